//! Security headers on every response, and the per-response nonce of the Content-Security-Policy.
//!
//! The pages are Leptos: server-rendered HTML whose hydration starts from an inline `<script type="module">`, and
//! whose out-of-order streaming adds inline scripts of its own. Leptos puts a nonce on all of them
//! (`leptos::nonce::use_nonce`); [`headers`] makes one per response, hands it to the renderer through the request
//! (see [`provide_csp_nonce`]) and names it in the policy, so only the scripts the server wrote run. The wasm module
//! needs `'wasm-unsafe-eval'` to be compiled. Styles come from `/pkg/holdpoint.css` only.
//!
//! Every response but the built site's files is `Cache-Control: no-store`: pages and API responses carry a
//! workspace's questions, tokens and CSRF token, which no shared or browser cache should keep. The site's files are
//! `no-cache`: kept, but revalidated before each use (a 304 while unchanged), because their names stay the same
//! from one release to the next and a page of a new release must never run an older release's script. The endpoints
//! that open or end a session refuse requests another site made a browser send ([`refuse_cross_site`]).

use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, header},
    middleware::Next,
    response::Response,
};

use crate::error::AppError;

/// The nonce of one response's Content-Security-Policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CspNonce(pub String);

impl CspNonce {
    /// 22 random alphanumeric characters (~131 bits): valid in a CSP `'nonce-…'` source as is.
    fn new() -> Self {
        CspNonce(crate::credentials::random_secret(22))
    }
}

/// The policy of a response whose inline scripts carry `nonce`.
pub fn content_security_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self'; \
         img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'"
    )
}

/// `max-age` of `Strict-Transport-Security`: one year, what preload lists ask for; subdomains are not included, as
/// Holdpoint cannot know what else is served under its domain.
const HSTS: &str = "max-age=31536000";

/// Adds the security headers to every response; `tls` (cookies are `Secure`, so the site is served over HTTPS)
/// adds `Strict-Transport-Security`, which over plain HTTP would be ignored at best.
pub async fn headers(State(tls): State<bool>, mut request: Request, next: Next) -> Response {
    let nonce = CspNonce::new();
    request.extensions_mut().insert(nonce.clone());
    // The built site's files are the same for everyone and may be kept, if revalidated; everything else is someone's.
    let cache_control = if request.uri().path().starts_with("/pkg/") { "no-cache" } else { "no-store" };
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control));
    if let Ok(policy) = HeaderValue::from_str(&content_security_policy(&nonce.0)) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    // For browsers older than `frame-ancestors`.
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if tls {
        headers.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static(HSTS));
    }
    response
}

/// Refuses (403) a request that another site made a browser send: one whose `Origin` is not this site's, or, from
/// a browser that sends no `Origin`, whose `Sec-Fetch-Site` says `cross-site` or `same-site`. This site's origin is
/// the `Host` the request was sent to, or the host of `public_url` (behind a proxy that rewrites `Host`). A request
/// with neither header (a script, an old browser) is let through: no browser sends a cross-site form without them.
pub fn refuse_cross_site(headers: &HeaderMap, public_url: Option<&str>) -> Result<(), AppError> {
    let refused = || Err(AppError::Forbidden("requests from another site may not sign in or out".into()));
    let fetch_site = headers.get("sec-fetch-site").and_then(|value| value.to_str().ok());
    if matches!(fetch_site, Some("cross-site" | "same-site")) {
        return refused();
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    // `null` (a sandboxed frame, a redirect across sites) and anything unreadable have no host, and fail here.
    let Some(origin) = origin.to_str().ok().and_then(host_of) else {
        return refused();
    };
    let host = headers.get(header::HOST).and_then(|value| value.to_str().ok());
    let ours = host.into_iter().chain(public_url.and_then(host_of));
    for site in ours {
        if site.eq_ignore_ascii_case(origin) {
            return Ok(());
        }
    }
    refused()
}

/// The `host[:port]` of an origin or URL (`https://holdpoint.example.com/` → `holdpoint.example.com`).
fn host_of(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    (!host.is_empty()).then_some(host)
}

/// Called in the Leptos context of a page render: makes the renderer put this response's nonce (from
/// [`headers`]) on its inline scripts, instead of the one Leptos made up, which no policy names.
pub fn provide_csp_nonce() {
    let nonce = leptos::prelude::use_context::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<CspNonce>().cloned());
    if let Some(CspNonce(nonce)) = nonce {
        leptos::prelude::provide_context(leptos::nonce::Nonce::from_value(nonce));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_nonce_and_allows_wasm_but_no_other_inline_code() {
        let policy = content_security_policy("abc123");
        assert!(policy.contains("script-src 'self' 'nonce-abc123' 'wasm-unsafe-eval';"), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| (header::HeaderName::from_static(name), HeaderValue::from_static(value)))
            .collect()
    }

    #[test]
    fn only_requests_from_this_site_or_from_no_browser_may_sign_in() {
        let ok = |pairs: &[(&'static str, &'static str)], public: Option<&str>| {
            refuse_cross_site(&headers(pairs), public).is_ok()
        };
        assert!(ok(&[], None));
        assert!(ok(&[("host", "hp.local:3000"), ("origin", "http://hp.local:3000")], None));
        assert!(ok(&[("host", "HP.local:3000"), ("origin", "https://hp.local:3000")], None));
        assert!(ok(
            &[("host", "10.0.0.5:3000"), ("origin", "https://hp.example.com")],
            Some("https://hp.example.com/")
        ));
        assert!(ok(&[("sec-fetch-site", "same-origin")], None));
        assert!(ok(&[("sec-fetch-site", "none")], None));
        assert!(!ok(&[("host", "hp.local:3000"), ("origin", "http://evil.example")], None));
        assert!(!ok(&[("host", "hp.local:3000"), ("origin", "http://hp.local:3001")], None));
        assert!(!ok(&[("host", "hp.local:3000"), ("origin", "null")], None));
        assert!(!ok(&[("origin", "http://hp.local:3000")], None), "no Host to compare with");
        assert!(!ok(&[("sec-fetch-site", "cross-site")], None));
        assert!(!ok(&[("sec-fetch-site", "same-site")], None));
    }

    #[test]
    fn every_response_gets_a_fresh_nonce() {
        assert_ne!(CspNonce::new(), CspNonce::new());
        assert_eq!(CspNonce::new().0.len(), 22);
    }
}
