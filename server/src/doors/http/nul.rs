//! Refuses the NUL character (U+0000) wherever a request could carry it into the database: the path, the query,
//! and JSON and form bodies. No text field stores it — PostgreSQL's `text` and `jsonb` cannot hold it, and on SQLite
//! it would cut the text short wherever C strings read it — so a request with one is refused before any route reads
//! it, the same way on both databases, in the one error shape: 400 for the path or query, 422 for a body.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::AppError;

const REFUSED: &str = "may not contain the NUL character (U+0000)";

pub async fn refuse_nul(request: Request, next: Next) -> Response {
    let uri = request.uri();
    if has_percent_nul(uri.path().as_bytes()) || uri.query().is_some_and(|query| has_percent_nul(query.as_bytes())) {
        return AppError::BadRequest(format!("the URL {REFUSED}")).into_response();
    }
    let content_type = request.headers().get(header::CONTENT_TYPE).map(|value| value.as_bytes().to_ascii_lowercase());
    let scan: fn(&[u8]) -> bool = match content_type.as_deref() {
        Some(kind) if is_json(kind) => has_json_nul,
        Some(kind) if kind.starts_with(b"application/x-www-form-urlencoded") => has_percent_nul,
        // Uploads, multipart forms and bodiless requests: files may hold any byte, and are never text columns.
        _ => return next.run(request).await,
    };
    let (parts, body) = request.into_parts();
    // `limits::limit_body` bounded the body already.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(_) => return AppError::BadRequest("the request body could not be read".into()).into_response(),
    };
    if scan(&bytes) {
        return AppError::Invalid { message: format!("the body {REFUSED}"), details: None }.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// `application/json` or a `+json` type, with or without parameters.
fn is_json(content_type: &[u8]) -> bool {
    let essence = content_type.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
    essence == b"application/json" || essence.ends_with(b"+json")
}

/// Whether percent-encoded text (a path, a query, a form) decodes to a NUL: `%00`.
fn has_percent_nul(text: &[u8]) -> bool {
    text.windows(3).any(|w| w == b"%00")
}

/// Whether JSON text holds a NUL in a string. A raw control character is no valid JSON, so the only way is the
/// escape `\u0000` — a backslash that starts an escape, not one escaped by the backslash before it (`\\u0000` is
/// the text `\u0000`).
fn has_json_nul(text: &[u8]) -> bool {
    text.windows(6)
        .enumerate()
        .any(|(at, w)| w == b"\\u0000" && text[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_is_found_only_where_it_decodes_to_one() {
        assert!(has_json_nul(br#"{"title": "a\u0000b"}"#));
        assert!(has_json_nul(br#"{"\u0000": 1}"#));
        assert!(has_json_nul(br#"["\\\u0000"]"#), "an escaped backslash, then a NUL");
        assert!(!has_json_nul(br#"{"title": "a\\u0000b"}"#), r"the text \u0000 is no NUL");
        assert!(!has_json_nul(br#"{"title": "a\u0001b"}"#));
        assert!(!has_json_nul(br#"{"title": "plain"}"#));
        assert!(has_percent_nul(b"username=a%00b&password=x"));
        assert!(!has_percent_nul(b"q=100%25&n=%0A"));
    }

    #[test]
    fn json_is_told_by_its_media_type() {
        for json in [&b"application/json"[..], b"application/json; charset=utf-8", b"application/merge-patch+json"] {
            assert!(is_json(json), "{}", String::from_utf8_lossy(json));
        }
        for other in [&b"text/plain"[..], b"application/octet-stream", b"multipart/form-data; boundary=x"] {
            assert!(!is_json(other), "{}", String::from_utf8_lossy(other));
        }
    }
}
