//! Credentials: API tokens (bearer), browser sessions (cookie + CSRF token), and the [`Caller`] extractor.
//!
//! Tokens and session ids are random secrets; only their SHA-256 is stored, which is enough for secrets with this
//! much entropy (argon2 is for people's passwords). A token is shown once, when it is created.

use app::types::{Role, SessionInfo};
use axum::{
    extract::FromRequestParts,
    http::{Method, request::Parts},
};
use axum_extra::extract::CookieJar;
use rand::{Rng, distr::Alphanumeric};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::AppError;
use crate::state::AppState;
use crate::store::Principal;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "hp_session";
/// The header a signed-in browser sends its CSRF token in on state-changing API requests.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Every token starts with this, so a leaked one is easy to recognise (and to scan for).
pub const TOKEN_PREFIX: &str = "hp_";

/// A new random secret of `len` alphanumeric characters.
pub fn random_secret(len: usize) -> String {
    rand::rng().sample_iter(&Alphanumeric).take(len).map(char::from).collect()
}

/// A new API token: `hp_` and 40 random characters (~238 bits).
pub fn new_token_secret() -> String {
    format!("{TOKEN_PREFIX}{}", random_secret(40))
}

/// The stored form of a secret.
pub fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// A secret that must never reach a log: `Debug` prints `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

/// How a caller proved who it is.
#[derive(Clone, PartialEq)]
pub enum Credential {
    Token,
    /// A browser session, with the CSRF token its forms and scripts must send back.
    Session {
        csrf_token: String,
    },
}

/// The CSRF token is a secret of the session: redacted.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Token => f.write_str("Token"),
            Credential::Session { .. } => f.debug_struct("Session").field("csrf_token", &"[redacted]").finish(),
        }
    }
}

/// The authenticated caller of an API request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub credential: Credential,
}

impl Caller {
    pub fn workspace_id(&self) -> Uuid {
        self.principal.workspace_id
    }

    pub fn role(&self) -> Role {
        self.principal.role
    }

    /// What the caller may see of its workspace.
    pub fn visibility(&self) -> crate::visibility::Visibility {
        crate::visibility::Visibility::of(self.role(), self.principal.id)
    }

    /// Refuses with 403 unless the caller's role may create questions.
    pub fn require_ask(&self) -> Result<(), AppError> {
        if self.role().may_ask() {
            Ok(())
        } else {
            Err(AppError::Forbidden(format!("{} token may not create questions", self.role().with_article())))
        }
    }

    /// What a page needs to know about a browser session.
    pub fn session_info(&self) -> Option<SessionInfo> {
        match &self.credential {
            Credential::Session { csrf_token } => Some(SessionInfo {
                workspace_id: self.principal.workspace_id,
                workspace: self.principal.workspace.clone(),
                principal_id: self.principal.id,
                name: self.principal.name.clone(),
                account: self.principal.kind == crate::store::PrincipalKind::User,
                role: self.principal.role,
                csrf_token: csrf_token.clone(),
            }),
            Credential::Token => None,
        }
    }
}

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
            let failures = crate::http::limits::AuthFailures::of(parts);
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
    fn a_new_token_is_prefixed_and_long_enough() {
        let token = new_token_secret();
        assert!(token.starts_with("hp_"));
        assert_eq!(token.len(), 43);
        assert_ne!(token, new_token_secret());
    }

    #[test]
    fn a_secret_hashes_the_same_every_time_and_differs_from_others() {
        assert_eq!(hash_secret("a"), hash_secret("a"));
        assert_ne!(hash_secret("a"), hash_secret("b"));
        assert_eq!(hash_secret("a").len(), 32);
    }

    #[test]
    fn only_the_very_csrf_token_matches() {
        assert!(csrf_matches("abc123", Some("abc123")));
        for wrong in [None, Some(""), Some("abc12"), Some("abc1234"), Some("ABC123")] {
            assert!(!csrf_matches("abc123", wrong), "{wrong:?}");
        }
    }

    #[test]
    fn a_secret_never_shows_in_debug_output() {
        let secret: Secret = "hp_supersecret".parse().unwrap();
        assert_eq!(format!("{secret:?}"), "[redacted]");
    }

    #[test]
    fn a_session_credential_never_shows_its_csrf_token_in_debug_output() {
        let credential = Credential::Session { csrf_token: "csrf-secret-value".into() };
        let debug = format!("{credential:?}");
        assert!(!debug.contains("csrf-secret-value"), "{debug}");
        assert_eq!(debug, r#"Session { csrf_token: "[redacted]" }"#);
    }
}
