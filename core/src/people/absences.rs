//! A member's absence: when they are away, who stands in for them, checked and set by the person or an admin; the
//! questions assigned to them then go to who stands in (see `questions::delegation`).

use chrono::{DateTime, Utc};
use holdpoint_types::AddressUpdate;
use uuid::Uuid;

use super::*;
use crate::events::EventHub;
use crate::notifications::SendsOn;
use crate::store::MemberSettings;

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
pub(super) async fn absence_of(
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
                        "{} is {}; the questions of {} need at least {}",
                        found.username,
                        found.role.with_article(),
                        member.role.with_article(),
                        needed.with_article()
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
pub(super) async fn set_absence(
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
