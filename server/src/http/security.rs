//! Security headers on every response, and the per-response nonce of the Content-Security-Policy.
//!
//! The pages are Leptos: server-rendered HTML whose hydration starts from an inline `<script type="module">`, and
//! whose out-of-order streaming adds inline scripts of its own. Leptos puts a nonce on all of them
//! (`leptos::nonce::use_nonce`); [`headers`] makes one per response, hands it to the renderer through the request
//! (see [`provide_csp_nonce`]) and names it in the policy, so only the scripts the server wrote run. The wasm module
//! needs `'wasm-unsafe-eval'` to be compiled. Styles come from `/pkg/holdpoint.css` only.

use axum::{
    extract::{Request, State},
    http::{HeaderValue, header},
    middleware::Next,
    response::Response,
};

/// The nonce of one response's Content-Security-Policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CspNonce(pub String);

impl CspNonce {
    /// 22 random alphanumeric characters (~131 bits): valid in a CSP `'nonce-…'` source as is.
    fn new() -> Self {
        CspNonce(crate::auth::random_secret(22))
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
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
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

    #[test]
    fn every_response_gets_a_fresh_nonce() {
        assert_ne!(CspNonce::new(), CspNonce::new());
        assert_eq!(CspNonce::new().0.len(), 22);
    }
}
