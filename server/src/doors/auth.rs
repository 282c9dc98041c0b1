//! How a request proves who it is: API tokens (bearer), browser sessions (cookie + CSRF token), and the
//! [`Caller`] extractor.
//!
//! Tokens and session ids are random secrets; only their SHA-256 is stored, which is enough for secrets with this
//! much entropy (argon2 is for people's passwords). A token is shown once, when it is created.

use axum::{
    extract::FromRequestParts,
    http::{Method, request::Parts},
};
use axum_extra::extract::CookieJar;

use crate::credentials::{Caller, Credential, hash_secret};
use crate::error::AppError;
use crate::state::AppState;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "hp_session";
/// The header a signed-in browser sends its CSRF token in on state-changing API requests.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The token of an `Authorization: Bearer` header.
fn bearer_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Resolves the browser session named by the request's cookie, if any.
pub async fn session_caller(state: &AppState, jar: &CookieJar) -> Result<Option<Caller>, AppError> {
    let Some(cookie) = jar.get(SESSION_COOKIE) else {
        return Ok(None);
    };
    let found = state.store.session_by_hash(&hash_secret(cookie.value()), chrono::Utc::now()).await?;
    Ok(found.map(|(principal, csrf_token)| Caller { principal, credential: Credential::Session { csrf_token } }))
}

/// Whether `sent` is the session's CSRF token, compared in constant time: how long a comparison takes must not
/// tell how much of a guess was right.
pub fn csrf_matches(expected: &str, sent: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    sent.is_some_and(|sent| bool::from(expected.as_bytes().ct_eq(sent.as_bytes())))
}

fn is_state_changing(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(token) = bearer_token(&parts.headers) {
            let failures = crate::doors::http::limits::AuthFailures::of(parts);
            if let Some(failures) = &failures {
                failures.check()?;
            }
            let Some(principal) = state.store.principal_by_token_hash(&hash_secret(token)).await? else {
                if let Some(failures) = &failures {
                    failures.record();
                }
                return Err(AppError::Unauthorized("the token is not valid".into()));
            };
            return Ok(Caller { principal, credential: Credential::Token });
        }
        let jar = CookieJar::from_headers(&parts.headers);
        let Some(caller) = session_caller(state, &jar).await? else {
            return Err(AppError::Unauthorized(
                "authentication required: send Authorization: Bearer <token>, or sign in".into(),
            ));
        };
        if let Credential::Session { csrf_token } = &caller.credential
            && is_state_changing(&parts.method)
        {
            let sent = parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
            if !csrf_matches(csrf_token, sent) {
                return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
            }
        }
        Ok(caller)
    }
}

/// What a long-lived request (an event stream, an MCP session) checks its caller again with: the hash of the
/// secret the caller was authenticated by.
#[derive(Clone)]
pub enum Proof {
    Token(Vec<u8>),
    Session(Vec<u8>),
}

impl std::fmt::Debug for Proof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Proof::Token(_) => "Token",
            Proof::Session(_) => "Session",
        })
    }
}

impl Proof {
    /// The credential of a request, as [`Caller`]'s extractor reads it: a bearer token first, else the session.
    pub fn of(headers: &axum::http::HeaderMap) -> Option<Proof> {
        if let Some(token) = bearer_token(headers) {
            return Some(Proof::Token(hash_secret(token)));
        }
        CookieJar::from_headers(headers).get(SESSION_COOKIE).map(|cookie| Proof::Session(hash_secret(cookie.value())))
    }

    /// Whether the credential still authenticates `caller` as it did (same principal, same workspace, same role):
    /// false once a token is revoked, a session ended, or a member removed or given another role.
    pub async fn still_authenticates(&self, state: &AppState, caller: &Caller) -> Result<bool, AppError> {
        let principal = match self {
            Proof::Token(hash) => state.store.principal_by_token_hash(hash).await?,
            Proof::Session(hash) => {
                state.store.session_by_hash(hash, chrono::Utc::now()).await?.map(|(principal, _)| principal)
            }
        };
        Ok(principal.is_some_and(|now| {
            now.id == caller.principal.id
                && now.workspace_id == caller.principal.workspace_id
                && now.role == caller.principal.role
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_very_csrf_token_matches() {
        assert!(csrf_matches("abc123", Some("abc123")));
        for wrong in [None, Some(""), Some("abc12"), Some("abc1234"), Some("ABC123")] {
            assert!(!csrf_matches("abc123", wrong), "{wrong:?}");
        }
    }
}
