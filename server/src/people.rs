//! People: accounts with argon2id passwords, workspace membership, API token management, and the one-time sign-in
//! link a first start prints. HTTP lives in `http::people`; this is what it (and the CLI) call.

use app::types::{
    AddressUpdate, CreatedToken, Invitation, Member, MemberUpdate, NewMember, NewToken, NotificationPreferences, Role,
    TokenInfo,
};
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::actions;
use crate::channels::slack::SlackClient;
use crate::credentials::{Caller, hash_secret, new_token_secret, random_secret};
use crate::error::AppError;
use crate::events::EventHub;
use crate::notifications::SendsOn;
use crate::store::{
    AuditActor, EmailConfirmation, EmailVerificationRow, InvitationRow, MemberRow, MemberSettings, MembershipChange,
    NewAuditEntry, Principal, SigninLinkRow, Store, StoreError, TokenRow, UserRow, now,
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

/// What `POST /members` did: a new account made a member, or an existing account invited.
#[derive(Debug, Clone)]
pub enum Joining {
    /// A new account, a member at once.
    Added(Member),
    /// An account that exists already: it joins only when its owner accepts.
    Invited(Invitation),
}

/// `POST /members`: adds a person whose username is new, creating their account with its password; invites an
/// account that exists already, which becomes a member only when its owner accepts (an admin of one workspace
/// holds no power over an account another workspace shares).
pub async fn add_member(store: &dyn Store, caller: &Caller, input: NewMember) -> Result<Joining, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let mut errors = crate::validation::FieldErrors::default();
    let username = input.username.trim().to_owned();
    if let Err(problem) = check_username(&username) {
        errors.add("username", problem);
    }
    if input.role == Role::Agent {
        errors.add("role", "people hold human roles: viewer, responder, approver or admin");
    }
    if let Some(name) = &input.display_name
        && (name.trim().is_empty() || name.chars().count() > DISPLAY_NAME_MAX_CHARS)
    {
        errors.add("display_name", format!("must have 1..={DISPLAY_NAME_MAX_CHARS} characters"));
    }
    if let Some(Err(problem)) = input.password.as_deref().map(check_password) {
        errors.add("password", problem);
    }
    errors.into_result("the member")?;
    let user = match store.user_by_username(&username).await? {
        Some(existing) => {
            if input.password.is_some() {
                return Err(AppError::invalid_field(
                    "password",
                    "the account exists already; only its owner sets its password",
                ));
            }
            return invite(store, caller, &existing, input.role).await.map(Joining::Invited);
        }
        None => {
            let Some(password) = input.password else {
                return Err(AppError::invalid_field("password", "a new account needs a password"));
            };
            let user = UserRow {
                id: Uuid::now_v7(),
                display_name: input.display_name.map(|n| n.trim().to_owned()).unwrap_or_else(|| username.clone()),
                username: username.clone(),
                password_hash: Some(hash_password(password).await?),
                created_at: now(),
                disabled_at: None,
            };
            let after = serde_json::json!({ "username": user.username, "display_name": user.display_name });
            let created = entry_by(caller, actions::USER_CREATED, ("user", user.id), None, Some(after));
            store.insert_user(&user, &[created]).await.map_err(conflict_on_duplicate)?;
            tracing::info!(username = %user.username, "account created");
            user
        }
    };
    let after = serde_json::json!({ "username": user.username, "role": input.role });
    let added = entry_by(caller, actions::MEMBER_ADDED, ("user", user.id), None, Some(after));
    store
        .insert_membership(caller.workspace_id(), user.id, input.role, &[added])
        .await
        .map_err(conflict_on_duplicate)?;
    tracing::info!(username = %user.username, role = %input.role, workspace = %caller.principal.workspace, "member added");
    let row = store.member(caller.workspace_id(), user.id).await?.ok_or(AppError::NotFound("member"))?;
    Ok(Joining::Added(row.to_member()?))
}

/// Invites the existing account `user` to the caller's workspace with `role`: 409 if they are a member already or
/// invited already.
async fn invite(store: &dyn Store, caller: &Caller, user: &UserRow, role: Role) -> Result<Invitation, AppError> {
    if store.member(caller.workspace_id(), user.id).await?.is_some() {
        return Err(AppError::Conflict { message: "this membership exists already".into(), details: None });
    }
    let invitation = InvitationRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        workspace: caller.principal.workspace.clone(),
        user_id: user.id,
        role,
        invited_by: caller.principal.name.clone(),
        created_at: now(),
    };
    let after = serde_json::json!({ "username": user.username, "role": role, "invitation": invitation.id });
    let invited = entry_by(caller, actions::MEMBER_INVITED, ("user", user.id), None, Some(after));
    store.insert_invitation(&invitation, &invited).await.map_err(conflict_on_duplicate)?;
    tracing::info!(username = %user.username, %role, workspace = %caller.principal.workspace, "account invited");
    Ok(invitation.to_invitation(&user.username))
}

/// The caller's own account: invitations, verified addresses and passwords are an account's, and tokens have none.
fn my_account(caller: &Caller) -> Result<Uuid, AppError> {
    if caller.principal.kind != crate::store::PrincipalKind::User {
        return Err(AppError::Forbidden("tokens belong to no account; sign in with your account".into()));
    }
    Ok(caller.principal.id)
}

/// `GET /me/invitations`: the invitations of the caller's account, oldest first.
pub async fn my_invitations(store: &dyn Store, caller: &Caller) -> Result<Vec<Invitation>, AppError> {
    let user_id = my_account(caller)?;
    let rows = store.invitations_of(user_id).await?;
    Ok(rows.iter().map(|row| row.to_invitation(&caller.principal.name)).collect())
}

/// `POST /me/invitations/{id}/accept` (`accept`) or `/decline`: the caller answers an invitation of their own
/// account, once. Accepting makes them a member of its workspace with its role. The audit entry goes to the
/// inviting workspace's log. 404 if the account has no such invitation (answered already, or another's).
pub async fn answer_invitation(
    store: &dyn Store,
    caller: &Caller,
    id: Uuid,
    accept: bool,
) -> Result<Invitation, AppError> {
    let user_id = my_account(caller)?;
    let actor = AuditActor::from(caller);
    let username = caller.principal.name.clone();
    let audit = move |invitation: &InvitationRow| NewAuditEntry {
        workspace_id: invitation.workspace_id,
        actor: actor.clone(),
        action: (if accept { actions::INVITATION_ACCEPTED } else { actions::INVITATION_DECLINED }).to_owned(),
        subject_type: "user".into(),
        subject_id: Some(user_id.to_string()),
        before: None,
        after: Some(serde_json::json!({
            "username": username, "role": invitation.role, "invitation": invitation.id,
        })),
        diff: None,
        created_at: now(),
    };
    let answered =
        store.answer_invitation(user_id, id, accept, &audit).await?.ok_or(AppError::NotFound("invitation"))?;
    tracing::info!(username = %caller.principal.name, workspace = %answered.workspace, accept, "invitation answered");
    Ok(answered.to_invitation(&caller.principal.name))
}

/// `PATCH /members/{user_id}`: another role; never leaves the workspace without an admin.
pub async fn change_role(store: &dyn Store, caller: &Caller, user_id: Uuid, role: Role) -> Result<Member, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    if role == Role::Agent {
        return Err(AppError::invalid_field("role", "people hold human roles: viewer, responder, approver or admin"));
    }
    let changed = move |before: Role| {
        let (before, after) = (serde_json::json!({ "role": before }), serde_json::json!({ "role": role }));
        entry_by(caller, actions::ROLE_CHANGED, ("user", user_id), Some(before), Some(after))
    };
    match store.change_role(caller.workspace_id(), user_id, role, &changed).await? {
        MembershipChange::Changed { before } => tracing::info!(%user_id, %before, after = %role, "role changed"),
        MembershipChange::NotMember => return Err(AppError::NotFound("member")),
        MembershipChange::LastAdmin => return Err(last_admin()),
    }
    let row = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
    Ok(row.to_member()?)
}

/// `PATCH /members/{user_id}`: another role, other addresses, or both. Every field is checked before anything is
/// written, so a bad one changes nothing.
pub async fn update_member(
    store: &dyn Store,
    slack: Option<&SlackClient>,
    hub: &EventHub,
    sends_on: &SendsOn,
    caller: &Caller,
    user_id: Uuid,
    update: MemberUpdate,
) -> Result<Member, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let addresses = update.addresses();
    check_addresses(&addresses)?;
    let absence = match addresses.changes_absence() {
        true => {
            let member = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
            Some(absence_of(store, caller.workspace_id(), &member, &addresses, crate::store::now()).await?)
        }
        false => None,
    };
    if let Some(role) = update.role {
        change_role(store, caller, user_id, role).await?;
    }
    if addresses.email.is_some() || addresses.slack_user_id.is_some() {
        let member = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
        set_addresses(store, slack, caller, &member, addresses, Proof::Admin).await?;
    }
    if let Some(absence) = absence {
        let member = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
        set_absence(store, hub, sends_on, caller, &member, absence).await?;
    }
    let row = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
    Ok(row.to_member()?)
}

/// `PATCH /me`: a person sets where they are reached. A new email address is stored unverified and sent a
/// verification link (through `mailer`, when email is configured); a Slack id they set is stored unproven.
#[allow(clippy::too_many_arguments)]
pub async fn update_my_addresses(
    store: &dyn Store,
    slack: Option<&SlackClient>,
    mailer: &VerificationMailer,
    hub: &EventHub,
    sends_on: &SendsOn,
    caller: &Caller,
    update: AddressUpdate,
) -> Result<Member, AppError> {
    let member = my_membership(store, caller).await?;
    check_addresses(&update)?;
    let absence = match update.changes_absence() {
        true => Some(absence_of(store, caller.workspace_id(), &member, &update, crate::store::now()).await?),
        false => None,
    };
    if update.email.is_some() || update.slack_user_id.is_some() {
        let changed = set_addresses(store, slack, caller, &member, update, Proof::Owner).await?;
        if let Some(email) = changed.email_to_verify {
            send_email_verification(store, mailer, member.user_id, &email).await?;
        }
    }
    if let Some(absence) = absence {
        let member = my_membership(store, caller).await?;
        set_absence(store, hub, sends_on, caller, &member, absence).await?;
    }
    let row = store.member(caller.workspace_id(), member.user_id).await?.ok_or(AppError::NotFound("member"))?;
    Ok(row.to_member()?)
}

/// `GET /me/notifications`: the caller's channel thresholds.
pub async fn my_notifications(store: &dyn Store, caller: &Caller) -> Result<NotificationPreferences, AppError> {
    Ok(my_membership(store, caller).await?.preferences()?)
}

/// `PUT /me/notifications`: the caller's channel thresholds, replaced whole.
pub async fn set_my_notifications(
    store: &dyn Store,
    caller: &Caller,
    preferences: NotificationPreferences,
) -> Result<NotificationPreferences, AppError> {
    let member = my_membership(store, caller).await?;
    let before = member.preferences()?;
    if preferences == before {
        return Ok(preferences);
    }
    let json = serde_json::to_value(preferences).map_err(|e| AppError::Internal(Box::new(e)))?;
    let settings = MemberSettings { notifications: Some(json.to_string()), ..member.settings() };
    let audit = entry_by(
        caller,
        actions::NOTIFICATIONS_CHANGED,
        ("user", member.user_id),
        serde_json::to_value(before).ok(),
        Some(json),
    );
    if !store.set_member_settings(caller.workspace_id(), member.user_id, &settings, &audit).await? {
        return Err(AppError::NotFound("member"));
    }
    Ok(preferences)
}

/// The caller's own membership: people have addresses and thresholds, tokens do not.
async fn my_membership(store: &dyn Store, caller: &Caller) -> Result<MemberRow, AppError> {
    if caller.principal.kind != crate::store::PrincipalKind::User {
        return Err(AppError::Forbidden("tokens are not reached by notifications; sign in with your account".into()));
    }
    store.member(caller.workspace_id(), caller.principal.id).await?.ok_or(AppError::NotFound("member"))
}

/// The longest email address SMTP carries (RFC 5321's path limit less its angle brackets).
const MAX_EMAIL_CHARS: usize = 254;

/// Refuses an address no channel could use: an email that is not one mailbox's address, a Slack user id that is
/// not Slack's form (`U` or `W`, then upper-case letters and digits).
fn check_addresses(update: &AddressUpdate) -> Result<(), AppError> {
    if let Some(Some(email)) = &update.email
        && (email.chars().count() > MAX_EMAIL_CHARS || email.parse::<lettre::Address>().is_err())
    {
        return Err(AppError::invalid_field("email", "an email address such as alice@example.com"));
    }
    if let Some(Some(id)) = &update.slack_user_id {
        let mut chars = id.chars();
        let well_formed = matches!(chars.next(), Some('U' | 'W'))
            && (2..=30).contains(&chars.clone().count())
            && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        if !well_formed {
            return Err(AppError::invalid_field("slack_user_id", "a Slack user id such as U012AB3CD"));
        }
    }
    Ok(())
}

/// The longest absence that may be set at once.
pub const MAX_ABSENCE_DAYS: i64 = 366;

/// An absence as it will be stored: until when, and who stands in (their id and username); both `None` when none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absence {
    pub away_until: Option<DateTime<Utc>>,
    pub delegate: Option<(Uuid, String)>,
}

/// Checks the absence `update` sets for `member` against the workspace and the time: given together, in the
/// future (at most [`MAX_ABSENCE_DAYS`] ahead), to a member who may answer what `member` is assigned (not
/// themselves, nor someone disabled). Either given as `null` ends the absence. Refuses with 422 naming the field.
async fn absence_of(
    store: &dyn Store,
    workspace_id: Uuid,
    member: &MemberRow,
    update: &AddressUpdate,
    now: DateTime<Utc>,
) -> Result<Absence, AppError> {
    if matches!(update.away_until, Some(None)) || matches!(update.delegate, Some(None)) {
        return Ok(Absence { away_until: None, delegate: None });
    }
    let away_until = update.away_until.flatten().or(member.away_until);
    let delegate = update.delegate.clone().flatten().or_else(|| member.delegate.clone());
    let mut errors = crate::validation::FieldErrors::default();
    match away_until {
        None => errors.add("away_until", "an absence needs an end: when you are back"),
        Some(until) if until <= now => errors.add("away_until", "must be in the future"),
        Some(until) if until > now + chrono::Duration::days(MAX_ABSENCE_DAYS) => {
            errors.add("away_until", format!("at most {MAX_ABSENCE_DAYS} days ahead"))
        }
        Some(_) => {}
    }
    let mut delegate_found = None;
    match delegate.as_deref().map(str::trim) {
        None => errors.add("delegate", "an absence needs someone to take your questions"),
        Some(name) if name.eq_ignore_ascii_case(&member.username) => errors.add("delegate", "must be someone else"),
        Some(name) => {
            let needed = crate::questions::delegation::delegate_role_for(member.role);
            let user = store.user_by_username(&name.to_lowercase()).await?.filter(|user| user.disabled_at.is_none());
            let found = match &user {
                Some(user) => store.member(workspace_id, user.id).await?,
                None => None,
            };
            match found {
                None => errors.add("delegate", format!("{name:?} is not a member of this workspace")),
                Some(found) if found.role.rank() < needed.rank() => errors.add(
                    "delegate",
                    format!(
                        "{} is a {}; the questions of a {} need at least a {needed}",
                        found.username, found.role, member.role
                    ),
                ),
                Some(found) => delegate_found = Some((found.user_id, found.username)),
            }
        }
    }
    errors.into_result("the absence")?;
    Ok(Absence { away_until, delegate: delegate_found })
}

/// Stores `member`'s absence with its audit entry, and when it starts now, hands the questions assigned to them to
/// who stands in (each with its own audit entry, the taker notified on the channels `sends_on` names). Nothing is written when nothing changes.
async fn set_absence(
    store: &dyn Store,
    hub: &EventHub,
    sends_on: &SendsOn,
    caller: &Caller,
    member: &MemberRow,
    absence: Absence,
) -> Result<(), AppError> {
    let before = member.settings();
    let settings = MemberSettings {
        away_until: absence.away_until,
        delegate_id: absence.delegate.as_ref().map(|(id, _)| *id),
        ..before.clone()
    };
    if settings == before {
        return Ok(());
    }
    let audit = entry_by(
        caller,
        crate::actions::ABSENCE_CHANGED,
        ("user", member.user_id),
        Some(
            serde_json::json!({ "username": member.username, "away_until": member.away_until, "delegate": member.delegate }),
        ),
        Some(serde_json::json!({
            "username": member.username,
            "away_until": absence.away_until,
            "delegate": absence.delegate.as_ref().map(|(_, name)| name),
        })),
    );
    if !store.set_member_settings(caller.workspace_id(), member.user_id, &settings, &audit).await? {
        return Err(AppError::NotFound("member"));
    }
    let now = crate::store::now();
    let away = store.member(caller.workspace_id(), member.user_id).await?.ok_or(AppError::NotFound("member"))?;
    if away.is_away(now) {
        let handed = crate::questions::delegation::hand_over_assigned(
            store,
            hub,
            sends_on,
            &caller.principal.workspace,
            &away,
            &AuditActor::from(caller),
            caller.workspace_id(),
        )
        .await?;
        tracing::info!(username = %away.username, delegate = ?away.delegate, handed, "away: questions handed over");
    }
    Ok(())
}

/// Who sets a member's addresses, which decides what the change proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proof {
    /// An admin of the workspace: the Slack id they set (or the one their address finds) is proven.
    Admin,
    /// The member themselves: a Slack id is only a claim (it could be a colleague's), and an address is theirs
    /// only once they confirm a link sent there.
    Owner,
}

/// What [`set_addresses`] changed that needs a next step.
struct AddressesSet {
    /// An address the member named themselves and has not verified: it is sent a verification link.
    email_to_verify: Option<String>,
}

/// Writes the addresses `update` gives over those `member` has, with the audit entry of the change (nothing when
/// nothing changes). A Slack id set by an admin is proven, one the member sets is not. A new email of a member
/// without a Slack id, where this server sends on Slack, is looked up there (`users.lookupByEmail`) unless the
/// update sets the Slack id itself, when an admin set the address or the account verified it: the Slack user
/// found is then proven theirs. An address a member typed is never looked up before they verify it: it could be
/// a colleague's.
async fn set_addresses(
    store: &dyn Store,
    slack: Option<&SlackClient>,
    caller: &Caller,
    member: &MemberRow,
    update: AddressUpdate,
    proof: Proof,
) -> Result<AddressesSet, AppError> {
    let before = member.settings();
    // An address the member names, changed or not: while the account has not verified it, each time it is named
    // a new link is sent (the first may have been lost, or the address typed by an admin before).
    let named_email = update.email.clone().flatten();
    let mut settings = MemberSettings { email: update.email.unwrap_or_else(|| before.email.clone()), ..before.clone() };
    if let Some(slack_user_id) = update.slack_user_id {
        settings.slack_user_id_proven = match slack_user_id == before.slack_user_id {
            true => before.slack_user_id_proven || (proof == Proof::Admin && slack_user_id.is_some()),
            false => proof == Proof::Admin && slack_user_id.is_some(),
        };
        settings.slack_user_id = slack_user_id;
    } else if let (Some(slack), Some(email), None) = (slack, &settings.email, &settings.slack_user_id)
        && settings.email != before.email
        && (proof == Proof::Admin || verified_by(store, email, member.user_id).await?)
    {
        match slack.user_id_by_email(email).await {
            Ok(found) => {
                settings.slack_user_id_proven = found.is_some();
                settings.slack_user_id = found;
            }
            // The address is saved all the same; an admin can set the Slack id by hand.
            Err(err) => tracing::warn!(user_id = %member.user_id, error = %err, "could not look the email up on Slack"),
        }
    }
    let email_to_verify = match (named_email, proof) {
        (Some(email), Proof::Owner) => (!verified_by(store, &email, member.user_id).await?).then_some(email),
        _ => None,
    };
    if settings == before {
        return Ok(AddressesSet { email_to_verify });
    }
    let addresses = |s: &MemberSettings| {
        serde_json::json!({
            "email": s.email, "slack_user_id": s.slack_user_id, "slack_user_id_proven": s.slack_user_id_proven,
        })
    };
    let audit = entry_by(
        caller,
        actions::ADDRESSES_CHANGED,
        ("user", member.user_id),
        Some(addresses(&before)),
        Some(addresses(&settings)),
    );
    if !store.set_member_settings(caller.workspace_id(), member.user_id, &settings, &audit).await? {
        return Err(AppError::NotFound("member"));
    }
    tracing::info!(user_id = %member.user_id, "addresses changed");
    Ok(AddressesSet { email_to_verify })
}

/// Whether the account `user_id` verified `email`.
async fn verified_by(store: &dyn Store, email: &str, user_id: Uuid) -> Result<bool, AppError> {
    Ok(store.account_by_verified_email(email).await?.is_some_and(|account| account.user_id == user_id))
}

/// How long a verification link works.
pub const EMAIL_VERIFICATION_HOURS: i64 = 24;
/// The path of verification links, under the public URL: `/verify-email/{code}`.
pub const EMAIL_VERIFICATION_PATH: &str = "/verify-email";

/// What sends verification links: the email sender (none when email is not configured here) and the public URL
/// the links point under.
pub struct VerificationMailer {
    pub sender: Option<crate::channels::email::EmailSender>,
    pub public_url: String,
}

/// Sends `email` a link that, confirmed by the account `user_id` (signed in as itself), records the address as the
/// account's. The code is stored only as its hash. Without email configured here nothing is sent: the address
/// stays unverified.
pub async fn send_email_verification(
    store: &dyn Store,
    mailer: &VerificationMailer,
    user_id: Uuid,
    email: &str,
) -> Result<(), AppError> {
    let Some(sender) = &mailer.sender else {
        tracing::info!(%user_id, "email is not configured: the address is stored unverified");
        return Ok(());
    };
    let Ok(to) = crate::channels::email::parse_mailbox(email) else {
        return Ok(());
    };
    let code = random_secret(40);
    let created_at = now();
    store
        .insert_email_verification(&EmailVerificationRow {
            code_hash: hash_secret(&code),
            user_id,
            email: email.to_lowercase(),
            created_at,
            expires_at: created_at + Duration::hours(EMAIL_VERIFICATION_HOURS),
        })
        .await?;
    let link = format!("{}{EMAIL_VERIFICATION_PATH}/{code}", mailer.public_url.trim_end_matches('/'));
    let text = format!(
        "Someone (we hope you) set this address on a Holdpoint account. To confirm that it is yours, open this link \
         while signed in to Holdpoint, and confirm:\n\n{link}\n\nThe link works for {EMAIL_VERIFICATION_HOURS} hours. \
         If you did not ask for this, ignore this message: nothing changes."
    );
    let html = format!(
        "<p>Someone (we hope you) set this address on a Holdpoint account. To confirm that it is yours, open this \
         link while signed in to Holdpoint, and confirm:</p><p><a href=\"{}\">Confirm this address</a></p>\
         <p>The link works for {EMAIL_VERIFICATION_HOURS} hours. If you did not ask for this, ignore this message: \
         nothing changes.</p>",
        html_escape::encode_double_quoted_attribute(&link)
    );
    let message =
        crate::channels::email::RenderedEmail { subject: "Holdpoint: confirm your email address".into(), text, html };
    match sender.send(to, &message).await {
        crate::channels::DeliveryOutcome::Sent { .. } => tracing::info!(%user_id, "verification link sent"),
        outcome => tracing::warn!(%user_id, ?outcome, "the verification link could not be sent"),
    }
    Ok(())
}

/// A verification link opened: the address it verifies, for the account it was sent for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingVerification {
    pub user_id: Uuid,
    pub email: String,
}

/// Reads a verification link without using it (`GET`: mail scanners open links). `None` if unknown, used or
/// expired.
pub async fn open_email_verification(store: &dyn Store, code: &str) -> Result<Option<PendingVerification>, AppError> {
    Ok(store
        .email_verification(&hash_secret(code), now())
        .await?
        .map(|(user_id, email)| PendingVerification { user_id, email }))
}

/// Confirms a verification link (`POST`) as `caller`, who must be signed in as the account it was sent for: the
/// link proves the mailbox, the session proves the account, and only both together make the address the account's.
/// 404 when the link is unknown, used, expired or another account's; 409 when another account verified the
/// address first.
pub async fn confirm_email_verification(store: &dyn Store, caller: &Caller, code: &str) -> Result<String, AppError> {
    let user_id = my_account(caller)?;
    let actor = AuditActor::from(caller);
    let workspace_id = caller.workspace_id();
    let audit = move |email: &str| NewAuditEntry {
        workspace_id,
        actor: actor.clone(),
        action: actions::EMAIL_VERIFIED.to_owned(),
        subject_type: "user".into(),
        subject_id: Some(user_id.to_string()),
        before: None,
        after: Some(serde_json::json!({ "email": email })),
        diff: None,
        created_at: now(),
    };
    match store.confirm_email_verification(&hash_secret(code), user_id, now(), &audit).await? {
        EmailConfirmation::Verified { email } => {
            tracing::info!(%user_id, "email address verified");
            Ok(email)
        }
        EmailConfirmation::Unknown => Err(AppError::NotFound("verification link")),
        EmailConfirmation::TakenByAnother => Err(AppError::Conflict {
            message: "another account has verified this address: an address signs in one account".into(),
            details: None,
        }),
    }
}

/// After `caller`'s account verified `email`: where this server sends on Slack and the caller's membership here has
/// that address and no proven Slack id, the Slack user with the address is looked up and linked, proven.
pub async fn link_slack_by_verified_email(
    store: &dyn Store,
    slack: Option<&SlackClient>,
    caller: &Caller,
    email: &str,
) -> Result<(), AppError> {
    let Some(slack) = slack else { return Ok(()) };
    let member = my_membership(store, caller).await?;
    let same_address = member.email.as_deref().is_some_and(|own| own.eq_ignore_ascii_case(email));
    if !same_address || member.slack_user_id_proven {
        return Ok(());
    }
    let found = slack
        .user_id_by_email(email)
        .await
        .map_err(|err| AppError::internal(std::io::Error::other(err.to_string())))?;
    let Some(found) = found else { return Ok(()) };
    let before = member.settings();
    let settings = MemberSettings { slack_user_id: Some(found.clone()), slack_user_id_proven: true, ..before.clone() };
    let audit = entry_by(
        caller,
        actions::ADDRESSES_CHANGED,
        ("user", member.user_id),
        Some(
            serde_json::json!({ "slack_user_id": before.slack_user_id, "slack_user_id_proven": before.slack_user_id_proven }),
        ),
        Some(serde_json::json!({ "slack_user_id": found, "slack_user_id_proven": true, "via": "verified email" })),
    );
    store.set_member_settings(caller.workspace_id(), member.user_id, &settings, &audit).await?;
    Ok(())
}

/// `DELETE /members/{user_id}`: the person loses access to the workspace at once (their sessions there end).
pub async fn remove_member(store: &dyn Store, caller: &Caller, user_id: Uuid) -> Result<(), AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let removed = move |before: Role| {
        entry_by(caller, actions::MEMBER_REMOVED, ("user", user_id), Some(serde_json::json!({ "role": before })), None)
    };
    match store.remove_member(caller.workspace_id(), user_id, &removed).await? {
        MembershipChange::Changed { before } => {
            tracing::info!(%user_id, %before, "member removed");
            Ok(())
        }
        MembershipChange::NotMember => Err(AppError::NotFound("member")),
        MembershipChange::LastAdmin => Err(last_admin()),
    }
}

fn last_admin() -> AppError {
    AppError::Conflict { message: "the workspace must keep at least one admin".into(), details: None }
}

fn conflict_on_duplicate(err: StoreError) -> AppError {
    match err {
        StoreError::Duplicate(what) => {
            AppError::Conflict { message: format!("this {what} exists already"), details: None }
        }
        other => other.into(),
    }
}

/// `POST /tokens`: a new token of the caller's workspace; its secret is in the answer and nowhere else.
pub async fn create_token(store: &dyn Store, caller: &Caller, input: NewToken) -> Result<CreatedToken, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let name = input.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > TOKEN_NAME_MAX_CHARS {
        return Err(AppError::invalid_field("name", format!("must have 1..={TOKEN_NAME_MAX_CHARS} characters")));
    }
    let secret = new_token_secret();
    let row = TokenRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        name,
        role: input.role,
        secret_hash: hash_secret(&secret),
        created_at: now(),
        created_by: Some(caller.principal.name.clone()),
        // The token belongs to the person who made it (a token made by a token belongs to that token's person).
        maker_id: caller.principal.person,
    };
    store_token(store, &row, &AuditActor::from(caller)).await?;
    tracing::info!(token = %row.id, name = %row.name, role = %row.role, by = %caller.principal.name, "token created");
    let info = store.token_info(caller.workspace_id(), row.id).await?.ok_or(AppError::NotFound("token"))?;
    Ok(CreatedToken { token: info.to_token_info()?, secret })
}

/// `POST /tokens/{id}/revoke`: the token stops working at once, and so do the sessions opened with it. 409 if it
/// was revoked already.
pub async fn revoke_token(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<TokenInfo, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let at = now();
    let (before, after) = (serde_json::json!({ "revoked_at": null }), serde_json::json!({ "revoked_at": at }));
    let revoked = entry_by(caller, actions::TOKEN_REVOKED, ("token", id), Some(before), Some(after));
    let row = store.revoke_token(caller.workspace_id(), id, at, &revoked).await?.ok_or(AppError::NotFound("token"))?;
    if row.revoked_at != Some(at) {
        return Err(AppError::Conflict {
            message: "the token is revoked already".into(),
            details: Some(serde_json::json!({ "revoked_at": row.revoked_at })),
        });
    }
    tracing::info!(token = %id, by = %caller.principal.name, "token revoked");
    Ok(row.to_token_info()?)
}

/// How recent a sign-in must be for an account without a password to set its first one: a session opened long
/// ago (a browser left signed in, a session taken over) must not silently give the account a password.
pub const FRESH_SIGN_IN_MINUTES: i64 = 10;

/// `POST /me/password`: a person sets or changes their own password. Once one is set, the current one is needed;
/// a first password needs a session opened in the last [`FRESH_SIGN_IN_MINUTES`] (`signed_in_at`).
pub async fn change_password(
    store: &dyn Store,
    caller: &Caller,
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
    store.set_password(user.id, &hash_password(new_password).await?, &[changed]).await?;
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
