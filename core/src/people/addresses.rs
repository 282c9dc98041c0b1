//! Where a member is reached: their addresses (an email verified by its owner through a link, a Slack user id, found
//! by that email too), set by an admin or by the person, and the lowest urgency each channel reaches them at.

use chrono::Duration;
use holdpoint_types::{AddressUpdate, Member, NotificationPreferences};
use uuid::Uuid;

use super::absences::{absence_of, set_absence};
use super::*;
use crate::actions;
use crate::channels::slack::SlackClient;
use crate::credentials::{hash_secret, random_secret};
use crate::events::EventHub;
use crate::notifications::SendsOn;
use crate::store::{EmailConfirmation, EmailVerificationRow, MemberSettings};

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

/// The longest email address SMTP carries (RFC 5321's path limit less its angle brackets).
const MAX_EMAIL_CHARS: usize = 254;

/// Refuses an address no channel could use: an email that is not one mailbox's address, a Slack user id that is
/// not Slack's form (`U` or `W`, then upper-case letters and digits).
pub(super) fn check_addresses(update: &AddressUpdate) -> Result<(), AppError> {
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

/// Who sets a member's addresses, which decides what the change proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Proof {
    /// An admin of the workspace: the Slack id they set (or the one their address finds) is proven.
    Admin,
    /// The member themselves: a Slack id is only a claim (it could be a colleague's), and an address is theirs
    /// only once they confirm a link sent there.
    Owner,
}

/// What [`set_addresses`] changed that needs a next step.
pub(super) struct AddressesSet {
    /// An address the member named themselves and has not verified: it is sent a verification link.
    email_to_verify: Option<String>,
}

/// Writes the addresses `update` gives over those `member` has, with the audit entry of the change (nothing when
/// nothing changes). A Slack id set by an admin is proven, one the member sets is not. A new email of a member
/// without a Slack id, where this server sends on Slack, is looked up there (`users.lookupByEmail`) unless the
/// update sets the Slack id itself, when an admin set the address or the account verified it: the Slack user
/// found is then proven theirs. An address a member typed is never looked up before they verify it: it could be
/// a colleague's.
pub(super) async fn set_addresses(
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
