//! How a person signs in with a password: passwords checked, hashed with argon2id and verified (with the same work
//! for an unknown account), changed by their owner, and the account and one-time sign-in link a first start makes.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::*;
use crate::actions;
use crate::credentials::{hash_secret, random_secret};
use crate::store::{Principal, SigninLinkRow, UserRow};

/// Checks a new password's length (the only rule that helps, per NIST SP 800-63B).
pub fn check_password(password: &str) -> Result<(), String> {
    let chars = password.chars().count();
    if !(PASSWORD_MIN_CHARS..=PASSWORD_MAX_CHARS).contains(&chars) {
        Err(format!("must have {PASSWORD_MIN_CHARS}..={PASSWORD_MAX_CHARS} characters"))
    } else {
        Ok(())
    }
}

/// Hashes a password with argon2id (the crate's defaults: 19 MiB, 2 passes), off the async threads.
pub async fn hash_password(password: String) -> Result<String, AppError> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default().hash_password(password.as_bytes(), &salt).map(|hash| hash.to_string())
    })
    .await
    .map_err(AppError::internal)?
    // password-hash's error is not `std::error::Error` without its `std` feature.
    .map_err(|err| AppError::internal(std::io::Error::other(err.to_string())))
}

/// A hash of a password nobody has, verified against when the account does not exist, so a sign-in attempt takes
/// as long for an unknown username as for a wrong password.
static DECOY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default().hash_password(random_secret(32).as_bytes(), &salt).map(|h| h.to_string()).unwrap_or_default()
});

/// Whether `password` matches the stored hash (or, with none, whether it would have: always `false`, at the same
/// cost).
pub async fn verify_password(password: String, stored: Option<String>) -> Result<bool, AppError> {
    tokio::task::spawn_blocking(move || {
        let real = stored.is_some();
        let hash = stored.unwrap_or_else(|| DECOY_HASH.clone());
        let Ok(parsed) = PasswordHash::new(&hash) else {
            return false;
        };
        Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok() && real
    })
    .await
    .map_err(AppError::internal)
}

/// Signs a person in with username and password: their principal in `workspace` (or their first workspace).
/// `None` for any failure, without saying which part was wrong.
pub async fn authenticate(
    store: &dyn Store,
    username: &str,
    password: &str,
    workspace: Option<&str>,
) -> Result<Option<Principal>, AppError> {
    let username = username.trim().to_lowercase();
    let user = store.user_by_username(&username).await?;
    let usable = user.as_ref().filter(|u| u.disabled_at.is_none());
    let stored = usable.and_then(|u| u.password_hash.clone());
    if !verify_password(password.to_owned(), stored).await? {
        return Ok(None);
    }
    let Some(user) = usable else {
        return Ok(None);
    };
    Ok(store.user_principal(user.id, workspace).await?)
}

/// How recent a sign-in must be for an account without a password to set its first one: a session opened long
/// ago (a browser left signed in, a session taken over) must not silently give the account a password.
pub const FRESH_SIGN_IN_MINUTES: i64 = 10;

/// `POST /me/password`: a person sets or changes their own password. Once one is set, the current one is needed;
/// a first password needs a session opened in the last [`FRESH_SIGN_IN_MINUTES`] (`signed_in_at`).
pub async fn change_password(
    store: &dyn Store,
    caller: &Caller,
    session: Option<&[u8]>,
    signed_in_at: Option<DateTime<Utc>>,
    current: Option<String>,
    new_password: String,
) -> Result<(), AppError> {
    if caller.principal.kind != crate::store::PrincipalKind::User {
        return Err(AppError::Forbidden("tokens have no password; sign in with your account".into()));
    }
    check_password(&new_password).map_err(|problem| AppError::invalid_field("new_password", problem))?;
    let user = store.user_by_username(&caller.principal.name).await?.ok_or(AppError::NotFound("account"))?;
    if let Some(stored) = user.password_hash.clone() {
        let current = current.unwrap_or_default();
        if !verify_password(current, Some(stored)).await? {
            return Err(AppError::Forbidden("the current password is not right".into()));
        }
    } else if signed_in_at.is_none_or(|at| now() - at > Duration::minutes(FRESH_SIGN_IN_MINUTES)) {
        return Err(AppError::Forbidden(format!(
            "a first password needs a fresh sign-in: sign in again (through single sign-on or a sign-in link) and \
             set it within {FRESH_SIGN_IN_MINUTES} minutes"
        )));
    }
    // Never the password or its hash: only that it changed.
    let changed = entry_by(caller, actions::PASSWORD_CHANGED, ("user", user.id), None, None);
    // Their other sessions end; the one they changed it in goes on.
    store.set_password(user.id, &hash_password(new_password).await?, session, &[changed]).await?;
    tracing::info!(username = %user.username, "password changed");
    Ok(())
}

/// On a first start — nobody can sign in to the default workspace except by link — makes sure the first admin's
/// account exists and stores a fresh one-time sign-in code for it. Returns the code to print, or `None` once
/// anyone has a credential (a token, or a password).
pub async fn first_start_signin_code(store: &dyn Store, workspace_id: Uuid) -> Result<Option<String>, StoreError> {
    if store.has_credentials(workspace_id).await? {
        return Ok(None);
    }
    let user = match store.user_by_username(FIRST_ADMIN).await? {
        Some(user) => user,
        None => {
            let user = UserRow {
                id: Uuid::now_v7(),
                username: FIRST_ADMIN.into(),
                display_name: "Administrator".into(),
                password_hash: None,
                created_at: now(),
                disabled_at: None,
            };
            match store.insert_user(&user, &[]).await {
                Ok(()) => user,
                // Another instance starting at the same moment created it.
                Err(StoreError::Duplicate(_)) => {
                    store.user_by_username(FIRST_ADMIN).await?.ok_or(StoreError::Duplicate("user"))?
                }
                Err(err) => return Err(err),
            }
        }
    };
    match store.insert_membership(workspace_id, user.id, Role::Admin, &[]).await {
        Ok(()) | Err(StoreError::Duplicate(_)) => {}
        Err(err) => return Err(err),
    }
    let code = random_secret(40);
    let created_at = now();
    store
        .replace_signin_link(&SigninLinkRow {
            code_hash: hash_secret(&code),
            workspace_id,
            user_id: user.id,
            created_at,
            expires_at: created_at + Duration::hours(SIGNIN_LINK_HOURS),
        })
        .await?;
    Ok(Some(code))
}

/// Signs in with a first start's one-time link: the admin it was made for, or `None` if the code is unknown, used
/// or expired — or if someone has a credential since it was printed. The link stands in for a credential only
/// while there is none, so a link left in a log stops working once a password or a token exists.
pub async fn sign_in_by_link(store: &dyn Store, code: &str) -> Result<Option<Principal>, StoreError> {
    let Some(principal) = store.use_signin_link(&hash_secret(code), now()).await? else { return Ok(None) };
    if store.has_credentials(principal.workspace_id).await? {
        return Ok(None);
    }
    Ok(Some(principal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_need_ten_to_256_characters() {
        assert!(check_password("short").is_err());
        assert!(check_password("long enough").is_ok());
        assert!(check_password(&"x".repeat(257)).is_err());
    }

    #[tokio::test]
    async fn a_password_verifies_against_its_argon2id_hash_only() {
        let hash = hash_password("correct horse battery".into()).await.unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery".into(), Some(hash.clone())).await.unwrap());
        assert!(!verify_password("wrong horse battery".into(), Some(hash)).await.unwrap());
        assert!(!verify_password("anything at all".into(), None).await.unwrap());
    }
}
