//! Who a caller is and how it proved it: the [`Caller`] every use case is handed, and the secrets credentials are
//! made of. How a request becomes a caller (bearer tokens, session cookies, CSRF) is the doors' (`auth`).

use holdpoint_types::{Role, SessionInfo};
use rand::{Rng, distr::Alphanumeric};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::AppError;
use crate::store::Principal;

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
    /// A person acting through what a channel delivered to them alone: an action link, a Slack button.
    Channel(holdpoint_types::Channel),
}

/// The CSRF token is a secret of the session: redacted.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Token => f.write_str("Token"),
            Credential::Session { .. } => f.debug_struct("Session").field("csrf_token", &"[redacted]").finish(),
            Credential::Channel(channel) => f.debug_tuple("Channel").field(channel).finish(),
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

    /// The caller as a question's rules see whoever would decide it.
    pub fn decider(&self) -> holdpoint_types::Decider<'_> {
        holdpoint_types::Decider {
            role: self.role(),
            name: &self.principal.name,
            account: self.principal.kind == crate::store::PrincipalKind::User,
        }
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

    /// Refuses with 403 unless the caller is an admin of its workspace; `to` says what only an admin may do
    /// ("manage webhooks").
    pub fn require_admin(&self, to: &str) -> Result<(), AppError> {
        if self.role() == Role::Admin {
            Ok(())
        } else {
            Err(AppError::Forbidden(format!("only an admin may {to}, not {}", self.role().with_article())))
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
            Credential::Token | Credential::Channel(_) => None,
        }
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
