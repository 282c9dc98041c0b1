//! People: accounts with argon2id passwords, workspace membership, API token management, and the one-time sign-in
//! link a first start prints. HTTP lives in `http::people`; this is what it (and the CLI) call. Signing in and
//! passwords are in `sign_in`, members, invitations, roles and tokens in `members`, where a member is reached (their
//! addresses, verified by their owner, and channel thresholds) in `addresses`, and absences in `absences`; what they
//! share is here.

mod absences;
mod addresses;
mod members;
mod sign_in;

use holdpoint_types::Role;
use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::store::{AuditActor, MemberRow, NewAuditEntry, Store, StoreError, TokenRow, now};

pub use absences::{Absence, MAX_ABSENCE_DAYS};
pub use addresses::{
    EMAIL_VERIFICATION_HOURS, EMAIL_VERIFICATION_PATH, PendingVerification, VerificationMailer,
    confirm_email_verification, link_slack_by_verified_email, my_notifications, open_email_verification,
    send_email_verification, set_my_notifications, update_my_addresses,
};
pub use members::{
    BOOTSTRAP_TOKEN, BootstrapInstalled, Joining, add_member, answer_invitation, change_role, check_token_name,
    create_token, install_bootstrap_token, my_invitations, remove_member, revoke_token, update_member,
};
pub use sign_in::{
    FRESH_SIGN_IN_MINUTES, authenticate, change_password, check_password, first_start_signin_code, hash_password,
    sign_in_by_link, verify_password,
};

/// The audit entry of a security-relevant action by `caller` in its workspace.
fn entry_by(
    caller: &Caller,
    action: &str,
    subject: (&str, Uuid),
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id: caller.workspace_id(),
        actor: AuditActor::from(caller),
        action: action.to_owned(),
        subject_type: subject.0.to_owned(),
        subject_id: Some(subject.1.to_string()),
        before,
        after,
        diff: None,
        created_at: now(),
    }
}

/// Stores a new token with the `token.created` entry recording it (by `actor`) in one transaction; `false`, and
/// nothing stored, if a token with the same secret exists already.
pub async fn store_token(store: &dyn Store, token: &TokenRow, actor: &AuditActor) -> Result<bool, StoreError> {
    store.insert_token(token, &crate::audit::token_created(token, actor)).await
}

/// What only an admin may do with the people of a workspace, as a refusal says it.
pub const MANAGE_PEOPLE: &str = "manage people and tokens";

pub const USERNAME_MAX_CHARS: usize = 64;

pub const PASSWORD_MIN_CHARS: usize = 10;

/// Long enough for any passphrase; short enough that hashing it is no denial of service.
pub const PASSWORD_MAX_CHARS: usize = 256;

pub const DISPLAY_NAME_MAX_CHARS: usize = 100;

pub const TOKEN_NAME_MAX_CHARS: usize = 100;

/// How long a printed sign-in link works.
pub const SIGNIN_LINK_HOURS: i64 = 24;

/// The workspace every installation starts with.
pub const DEFAULT_WORKSPACE: &str = "default";

/// The account a first start creates for the person who started the server.
pub const FIRST_ADMIN: &str = "admin";

/// Checks a username: lower-case letters, digits, `.`, `_`, `-`, starting with a letter or digit.
pub fn check_username(username: &str) -> Result<(), String> {
    let valid_chars = username.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    let starts_well = username.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if username.is_empty() || username.chars().count() > USERNAME_MAX_CHARS {
        Err(format!("must have 1..={USERNAME_MAX_CHARS} characters"))
    } else if !valid_chars || !starts_well {
        Err("may hold lower-case letters, digits, '.', '_' and '-', and must start with a letter or a digit".into())
    } else {
        Ok(())
    }
}

/// The caller's own account: invitations, verified addresses and passwords are an account's, and tokens have none.
fn my_account(caller: &Caller) -> Result<Uuid, AppError> {
    if caller.principal.kind != crate::store::PrincipalKind::User {
        return Err(AppError::Forbidden("tokens belong to no account; sign in with your account".into()));
    }
    Ok(caller.principal.id)
}

/// The caller's own membership: people have addresses and thresholds, tokens do not.
async fn my_membership(store: &dyn Store, caller: &Caller) -> Result<MemberRow, AppError> {
    if caller.principal.kind != crate::store::PrincipalKind::User {
        return Err(AppError::Forbidden("tokens are not reached by notifications; sign in with your account".into()));
    }
    store.member(caller.workspace_id(), caller.principal.id).await?.ok_or(AppError::NotFound("member"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_lower_case_words() {
        assert!(check_username("alice").is_ok());
        assert!(check_username("ops.bob-2_x").is_ok());
        assert!(check_username("Alice").is_err());
        assert!(check_username("-alice").is_err());
        assert!(check_username("").is_err());
        assert!(check_username("a b").is_err());
        assert!(check_username(&"a".repeat(65)).is_err());
    }
}
