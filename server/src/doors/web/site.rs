//! The built site (`pkg/holdpoint.js`, the wasm modules, `holdpoint.css`, each with a gzipped `.gz` beside it; see
//! `xtask/src/site.rs`): served from the binary itself when it was built with the feature `embed-site`, as
//! `cargo xtask dist` builds it, so a downloaded `holdpoint` needs no files beside it; else from a directory.
//! `HOLDPOINT_SITE_ROOT` names a directory, which then replaces the built-in site.
//!
//! Both are served alike: the MIME type `mime_guess` gives the file's name, the `.gz` variant to browsers that accept
//! gzip, `Last-Modified` and conditional requests; `http::security` adds `Cache-Control: no-cache`, so a browser
//! revalidates them before each use. Embedded files also carry an `ETag` (their SHA-256) and `Vary: Accept-Encoding`.

use std::borrow::Cow;
use std::path::PathBuf;

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use leptos::prelude::provide_context;
use tower_http::services::ServeDir;

use crate::config::ServeConfig;
use crate::state::AppState;

/// Where the built site's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// A directory: `HOLDPOINT_SITE_ROOT`, or, for a binary without the site built in, the one found beside the
    /// executable or in `./target/site` ([`ServeConfig::site_root`]).
    Directory(PathBuf),
    /// The site built into this binary (feature `embed-site`).
    Embedded,
}

/// The `site_root` Leptos is told when the site is embedded. Leptos reads two things under its `site_root` itself:
/// the split modules' manifest (`HydrationScripts`, from `<site_root>/pkg/`) and the files of its fallback handler.
/// Neither may come from the disk when the site is embedded (they could belong to another build), and no file can
/// exist under `/dev/null`, which is not a directory; the manifest is provided from the embedded files instead
/// ([`Site::provide_context`]), and the fallback is ours ([`Site::serve`]).
const NO_DIRECTORY: &str = "/dev/null";

impl Site {
    /// The configured directory, else the site built into this binary, else a directory found on the disk.
    pub fn choose(config: &ServeConfig) -> Site {
        match &config.site_root {
            Some(root) => Site::Directory(root.clone()),
            None if embedded::AVAILABLE => Site::Embedded,
            None => Site::Directory(config.site_root()),
        }
    }

    /// Whether the site's files are there: a directory without `pkg/` makes pages that never hydrate.
    pub fn is_built(&self) -> bool {
        match self {
            Site::Directory(root) => root.join("pkg").is_dir(),
            Site::Embedded => true,
        }
    }

    /// What Leptos is given as `LeptosOptions::site_root`.
    pub fn leptos_site_root(&self) -> String {
        match self {
            Site::Directory(root) => root.display().to_string(),
            Site::Embedded => NO_DIRECTORY.to_owned(),
        }
    }

    /// Called in the Leptos context of each page: with the site embedded, hands `HydrationScripts` the split
    /// modules' manifest it would otherwise read from the disk, so a page preloads the lazy modules it needs (its
    /// route's code) instead of fetching them one after another while it hydrates.
    pub fn provide_context(&self) {
        if *self == Site::Embedded
            && let Some(manifest) = embedded::split_manifest()
        {
            provide_context(manifest);
        }
    }

    /// Adds the routes of the site's files to `router`: `/pkg/...`, and as the fallback any other file of the site
    /// or else the app's "Not found" page.
    pub fn serve(&self, router: Router<AppState>) -> Router<AppState> {
        match self {
            Site::Directory(root) => router
                .nest_service("/pkg", ServeDir::new(root.join("pkg")).precompressed_gzip().precompressed_br())
                // Any other path: a file of the site's root, else the app's "Not found" page, with status 404, for
                // people who follow a stale link.
                .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(
                    crate::doors::http::security::provide_csp_nonce,
                    app::shell,
                )),
            Site::Embedded => router.route("/pkg/{*path}", get(embedded_pkg_file)).fallback(embedded_file_or_not_found),
        }
    }
}

/// `GET /pkg/{path}` from the embedded site.
async fn embedded_pkg_file(axum::extract::Path(path): axum::extract::Path<String>, headers: HeaderMap) -> Response {
    embedded_response(&format!("pkg/{path}"), &headers).unwrap_or_else(|| StatusCode::NOT_FOUND.into_response())
}

/// Any other path with the site embedded: one of its files (outside `pkg/`, what the site build copies from
/// `public/`), else the app's "Not found" page, rendered as Leptos' own fallback renders it.
async fn embedded_file_or_not_found(State(state): State<AppState>, request: Request) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        let path = request.uri().path().trim_start_matches('/');
        if let Some(response) = embedded_response(path, request.headers()) {
            return response;
        }
    }
    let options = state.leptos_options.clone();
    let render = leptos_axum::render_app_to_stream_in_order_with_context(
        {
            let state = state.clone();
            move || {
                provide_context(state.clone());
                crate::doors::http::security::provide_csp_nonce();
            }
        },
        move || app::shell(options.clone()),
    );
    let mut response = render(request).await;
    // A page that set a status of its own (a redirect) keeps it.
    if response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NOT_FOUND;
    }
    response
}

/// One of the site's files, as served: its bytes, and what its headers are made of.
#[derive(Debug, Clone)]
struct SiteFile {
    data: Cow<'static, [u8]>,
    sha256: [u8; 32],
    /// Seconds since the Unix epoch.
    last_modified: Option<u64>,
    mime: String,
}

/// The response to a request for the embedded file at `path` (relative to the site's root), `None` when the site
/// has no such file.
fn embedded_response(path: &str, request: &HeaderMap) -> Option<Response> {
    let file = embedded::file(path)?;
    let gzipped = embedded::file(&format!("{path}.gz"));
    Some(respond(&file, gzipped.as_ref(), request))
}

/// The response to a request (its headers) for `file`, with `gzipped` its `.gz` variant if the site has one.
fn respond(file: &SiteFile, gzipped: Option<&SiteFile>, request: &HeaderMap) -> Response {
    let (sent, encoding) = match gzipped {
        Some(gzipped) if accepts_gzip(request) => (gzipped, Some("gzip")),
        _ => (file, None),
    };
    let etag = format!("\"{}\"", hex::encode(sent.sha256));
    let last_modified = sent.last_modified.and_then(http_date);
    // What describes the version sent, on a 304 as on a 200.
    let mut headers = HeaderMap::new();
    if gzipped.is_some() {
        // Caches must tell the gzipped bytes from the plain ones.
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    if let Some(value) = last_modified.as_deref().and_then(|date| HeaderValue::from_str(date).ok()) {
        headers.insert(header::LAST_MODIFIED, value);
    }
    if !modified_since(request, &etag, sent.last_modified) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    if let Ok(value) = HeaderValue::from_str(&file.mime) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    if let Some(encoding) = encoding {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    let body = match &sent.data {
        Cow::Borrowed(bytes) => Body::from(*bytes),
        Cow::Owned(bytes) => Body::from(bytes.clone()),
    };
    (headers, body).into_response()
}

/// Whether the request's `Accept-Encoding` takes gzip: named, or as `*`, with a weight above 0 (RFC 9110 §12.5.3).
fn accepts_gzip(request: &HeaderMap) -> bool {
    let mut named = None;
    let mut any = None;
    let codings = request.get_all(header::ACCEPT_ENCODING).iter().filter_map(|value| value.to_str().ok());
    for coding in codings.flat_map(|value| value.split(',')) {
        let mut parts = coding.split(';');
        let name = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let weight = parts
            .filter_map(|parameter| parameter.trim().strip_prefix("q=").or(parameter.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match name.as_str() {
            "gzip" | "x-gzip" => named = Some(weight > 0.0),
            "*" => any = Some(weight > 0.0),
            _ => {}
        }
    }
    named.or(any).unwrap_or(false)
}

/// Whether the client's copy is out of date (or it has none): `If-None-Match` when sent, else `If-Modified-Since`
/// (RFC 9110 §13.2.2).
fn modified_since(request: &HeaderMap, etag: &str, last_modified: Option<u64>) -> bool {
    if let Some(tags) = request.get(header::IF_NONE_MATCH).and_then(|value| value.to_str().ok()) {
        // Weak comparison, as `If-None-Match` asks: `W/"x"` matches `"x"`.
        let matches = tags.split(',').map(str::trim).any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag);
        return !matches;
    }
    let since = request
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|value| value.to_str().ok())
        .and_then(|date| chrono::DateTime::parse_from_rfc2822(date).ok());
    match (since, last_modified) {
        (Some(since), Some(modified)) => i64::try_from(modified).map_or(true, |modified| modified > since.timestamp()),
        _ => true,
    }
}

/// An HTTP date (`Sat, 28 Nov 2026 18:43:21 GMT`).
fn http_date(seconds: u64) -> Option<String> {
    let time = chrono::DateTime::from_timestamp(i64::try_from(seconds).ok()?, 0)?;
    Some(time.format("%a, %d %b %Y %H:%M:%S GMT").to_string())
}

#[cfg(feature = "embed-site")]
mod embedded {
    //! The site as `cargo xtask site` built it into `target/site`, embedded when this crate is compiled (the build
    //! script fails first, with what to run, when it has not been built).

    use super::SiteFile;

    /// The splitter's loader of the lazy modules, under the name Leptos' `HydrationScripts` gives it (unhashed
    /// builds).
    const SPLIT_LOADER: &str = "__wasm_split.______________________.js";
    /// Which lazy modules each lazy function needs, as `HydrationScripts` reads it.
    const SPLIT_MANIFEST: &str = "pkg/__wasm_split_manifest.json";

    #[derive(rust_embed::Embed)]
    #[folder = "../target/site"]
    struct Files;

    pub(super) const AVAILABLE: bool = true;

    pub(super) fn file(path: &str) -> Option<SiteFile> {
        let file = <Files as rust_embed::Embed>::get(path)?;
        Some(SiteFile {
            sha256: file.metadata.sha256_hash(),
            last_modified: file.metadata.last_modified(),
            mime: file.metadata.mimetype().to_owned(),
            data: file.data,
        })
    }

    /// The split modules' manifest, in the form Leptos' `HydrationScripts` provides it after reading it from
    /// `<site_root>/pkg/` (leptos 0.8's `hydration/mod.rs`): the path the modules are fetched under, which modules
    /// each lazy function needs, and the loader's name.
    pub(super) fn split_manifest() -> Option<leptos::WasmSplitManifest> {
        static MANIFEST: std::sync::LazyLock<Option<leptos::WasmSplitManifest>> = std::sync::LazyLock::new(|| {
            let file = file(SPLIT_MANIFEST)?;
            let modules: std::collections::HashMap<String, Vec<String>> = match serde_json::from_slice(&file.data) {
                Ok(modules) => modules,
                Err(err) => {
                    tracing::warn!(%err, "the embedded site's split manifest is unreadable: pages will not preload their modules");
                    return None;
                }
            };
            let value = ("/pkg".to_owned(), modules, SPLIT_LOADER.to_owned());
            Some(leptos::WasmSplitManifest(leptos::reactive::owner::ArcStoredValue::new(value)))
        });
        MANIFEST.clone()
    }
}

#[cfg(not(feature = "embed-site"))]
mod embedded {
    //! Built without the feature `embed-site`: the site is always a directory.

    use super::SiteFile;

    pub(super) const AVAILABLE: bool = false;

    pub(super) fn file(_path: &str) -> Option<SiteFile> {
        None
    }

    pub(super) fn split_manifest() -> Option<leptos::WasmSplitManifest> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.clone(), HeaderValue::from_static(value))).collect()
    }

    fn site_file(data: &'static [u8], fill: u8) -> SiteFile {
        SiteFile {
            data: Cow::Borrowed(data),
            sha256: [fill; 32],
            last_modified: Some(1_800_000_000),
            mime: "application/wasm".into(),
        }
    }

    #[test]
    fn gzip_is_sent_to_whoever_accepts_it_with_a_weight_above_zero() {
        let accepts = |value: &'static str| accepts_gzip(&headers(&[(header::ACCEPT_ENCODING, value)]));
        assert!(accepts("gzip, deflate, br, zstd"));
        assert!(accepts("br;q=1.0, gzip;q=0.8"));
        assert!(accepts("GZIP"));
        assert!(accepts("*"));
        assert!(accepts("x-gzip"));
        assert!(!accepts("gzip;q=0"));
        assert!(!accepts("gzip;q=0.0, *"));
        assert!(!accepts("br, deflate"));
        assert!(!accepts("identity"));
        assert!(!accepts("*;q=0"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn a_file_goes_gzipped_to_those_who_accept_it_and_plain_to_the_others() {
        let (plain, gzipped) = (site_file(b"plain bytes", 1), site_file(b"gzipped", 2));
        let response = respond(&plain, Some(&gzipped), &headers(&[(header::ACCEPT_ENCODING, "gzip, br")]));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/wasm");
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[header::VARY], "accept-encoding");
        assert_eq!(response.headers()[header::ETAG], format!("\"{}\"", "02".repeat(32)).as_str());
        assert_eq!(response.headers()[header::LAST_MODIFIED], "Fri, 15 Jan 2027 08:00:00 GMT");
        assert!(response.headers().get(header::CACHE_CONTROL).is_none());
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        assert_eq!(&body[..], b"gzipped");

        let response = respond(&plain, Some(&gzipped), &headers(&[(header::ACCEPT_ENCODING, "br")]));
        assert!(response.headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(response.headers()[header::VARY], "accept-encoding");
        assert_eq!(response.headers()[header::ETAG], format!("\"{}\"", "01".repeat(32)).as_str());
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        assert_eq!(&body[..], b"plain bytes");

        let response = respond(&plain, None, &headers(&[(header::ACCEPT_ENCODING, "gzip")]));
        assert!(response.headers().get(header::CONTENT_ENCODING).is_none());
        assert!(response.headers().get(header::VARY).is_none(), "only one variant: nothing varies");
    }

    #[test]
    fn a_client_with_the_current_copy_gets_not_modified() {
        let file = site_file(b"bytes", 7);
        let etag = format!("\"{}\"", "07".repeat(32));
        let status = |pairs: Vec<(header::HeaderName, String)>| {
            let request: HeaderMap =
                pairs.into_iter().map(|(name, value)| (name, HeaderValue::from_str(&value).unwrap())).collect();
            respond(&file, None, &request).status()
        };
        assert_eq!(status(vec![(header::IF_NONE_MATCH, etag.clone())]), StatusCode::NOT_MODIFIED);
        assert_eq!(status(vec![(header::IF_NONE_MATCH, format!("\"other\", W/{etag}"))]), StatusCode::NOT_MODIFIED);
        assert_eq!(status(vec![(header::IF_NONE_MATCH, "\"other\"".into())]), StatusCode::OK);
        let at = "Fri, 15 Jan 2027 08:00:00 GMT".to_owned();
        assert_eq!(status(vec![(header::IF_MODIFIED_SINCE, at.clone())]), StatusCode::NOT_MODIFIED);
        assert_eq!(status(vec![(header::IF_MODIFIED_SINCE, "Fri, 15 Jan 2027 07:59:59 GMT".into())]), StatusCode::OK);
        // `If-None-Match` wins over `If-Modified-Since`.
        assert_eq!(
            status(vec![(header::IF_NONE_MATCH, "\"other\"".into()), (header::IF_MODIFIED_SINCE, at)]),
            StatusCode::OK
        );
        assert_eq!(status(vec![]), StatusCode::OK);
    }

    #[test]
    fn the_configured_directory_replaces_the_built_in_site() {
        let mut config = ServeConfig::for_tests("sqlite::memory:".into());
        config.site_root = Some(PathBuf::from("/srv/holdpoint-site"));
        assert_eq!(Site::choose(&config), Site::Directory(PathBuf::from("/srv/holdpoint-site")));
        config.site_root = None;
        let expected = if embedded::AVAILABLE { Site::Embedded } else { Site::Directory(config.site_root()) };
        assert_eq!(Site::choose(&config), expected);
    }
}
