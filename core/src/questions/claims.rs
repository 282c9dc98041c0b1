//! Claims: a person takes a pending question for a while, and only they (or an admin) may answer it until the claim
//! runs out or is let go. Taking and letting go of a claim are changes of the pending question as
//! [`super::pending`] describes.

use chrono::{DateTime, Duration, Utc};
use holdpoint_types::{EventType, Question, QuestionStatus, Role};
use serde_json::json;
use uuid::Uuid;

use super::pending::{ATTEMPTS, PendingPages, change_time, pending_event, reread, still_changing};
use super::{Answering, not_pending, require_right_to_decide};
use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::store::{AuditActor, NewAuditEntry, PendingEffect, PendingQuestionChange, QuestionRow, Reach};

/// How long a claim lasts unless the claimer asks for less, and the most any claim lasts.
pub const DEFAULT_CLAIM_TTL_SECONDS: i64 = 1800;
/// The shortest claim worth taking.
pub const MIN_CLAIM_TTL_SECONDS: i64 = 1;

/// Who holds `row`'s claim at `now`, as [`crate::store::Principal::counts_as`] says: a claim is held by a person
/// (whichever of their tokens took it) or by a service token, never by a name.
fn claim_holder(row: &QuestionRow, now: DateTime<Utc>) -> Option<Uuid> {
    row.claimed_by_id.filter(|_| row.claim_expires_at.is_some_and(|until| until > now))
}

/// Refuses with 409 an answer to a question someone else holds the claim of, unless the caller is an admin. The
/// holder's own tokens answer in their claim; a token that merely has their name does not.
pub fn require_claim(caller: &Caller, row: &QuestionRow, now: DateTime<Utc>) -> Result<(), AppError> {
    match claim_holder(row, now) {
        Some(holder) if holder != caller.principal.counts_as() && caller.role() != Role::Admin => Err(claimed_by(row)),
        _ => Ok(()),
    }
}

fn claimed_by(row: &QuestionRow) -> AppError {
    let holder = row.claimed_by.as_deref().unwrap_or_default();
    AppError::Conflict {
        message: format!("question is claimed by {holder}"),
        details: Some(json!({
            "claimed_by": holder,
            "claim_expires_at": row.claim_expires_at,
        })),
    }
}

/// Claims a pending question for the caller for `ttl_seconds` (default and at most `max_ttl_seconds`): while the
/// claim lasts only they, or an admin, may answer. Claiming again extends one's own claim; an admin may take over
/// another's; anyone else gets 409 naming who holds it.
pub async fn claim(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    ttl_seconds: Option<i64>,
    max_ttl_seconds: i64,
) -> Result<Question, AppError> {
    let ttl = ttl_seconds.unwrap_or(max_ttl_seconds);
    if !(MIN_CLAIM_TTL_SECONDS..=max_ttl_seconds).contains(&ttl) {
        return Err(AppError::invalid_field(
            "ttl_seconds",
            format!("must be within {MIN_CLAIM_TTL_SECONDS}..={max_ttl_seconds}"),
        ));
    }
    change_claim(answering, caller, id, ClaimChange::Take { ttl }).await
}

/// Lets the caller's claim of a question go (an admin may end anyone's); a question nobody holds is returned as it
/// is.
pub async fn unclaim(answering: &Answering<'_>, caller: &Caller, id: Uuid) -> Result<Question, AppError> {
    change_claim(answering, caller, id, ClaimChange::Release).await
}

#[derive(Clone, Copy)]
enum ClaimChange {
    Take { ttl: i64 },
    Release,
}

async fn change_claim(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    wanted: ClaimChange,
) -> Result<Question, AppError> {
    let (store, workspace) = (answering.store, caller.principal.workspace.as_str());
    let mut row = store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?;
    if !caller.visibility().sees(row.created_by) {
        return Err(AppError::NotFound("question"));
    }
    for _ in 0..ATTEMPTS {
        let question = row.to_question(workspace)?;
        // Who may claim a question: whoever may answer it, as for an answer.
        require_right_to_decide(caller, &question)?;
        if row.status != QuestionStatus::Pending {
            return Err(not_pending(&row));
        }
        let at = change_time(&row);
        let holder = question.claim_holder(at).map(str::to_owned);
        let holder_id = claim_holder(&row, at);
        let mine = holder_id.is_some() && holder_id == Some(caller.principal.counts_as());
        if holder_id.is_some() && !mine && caller.role() != Role::Admin {
            return Err(claimed_by(&row));
        }
        let mut after = row.clone();
        let (audit_action, audit_after) = match wanted {
            ClaimChange::Take { ttl } => {
                let until = at + Duration::seconds(ttl);
                after.claimed_by = Some(caller.principal.name.clone());
                after.claim_expires_at = Some(until);
                after.claimed_by_id = Some(caller.principal.counts_as());
                let taken_over = holder.filter(|_| !mine);
                (
                    actions::QUESTION_CLAIMED,
                    json!({ "claimed_by": caller.principal.name, "until": until, "taken_over_from": taken_over }),
                )
            }
            ClaimChange::Release if holder_id.is_none() => return Ok(question),
            ClaimChange::Release => {
                after.claimed_by = None;
                after.claim_expires_at = None;
                after.claimed_by_id = None;
                (actions::QUESTION_UNCLAIMED, json!({ "released": holder }))
            }
        };
        let change =
            claim_change(&question, after, at, AuditActor::from(caller), (audit_action, audit_after), workspace)?;
        if store.change_pending_question(&change).await? {
            answering.hub.forget_asked(row.id);
            return Ok(change.question.to_question(workspace)?);
        }
        row = reread(store, &row).await?;
    }
    Err(still_changing())
}

/// Who lets go of their claims, and why: a person (or a service token) who may no longer decide some questions.
#[derive(Debug, Clone, Copy)]
pub struct Fallen<'a> {
    /// Whose claims: a person's account, or a service token (as [`crate::store::Principal::counts_as`] names them).
    pub holder: Uuid,
    /// The role and name they now decide with; `None` once they decide nothing (removed, or a token revoked).
    pub now_as: Option<(Role, &'a str)>,
    /// Why, as the audit entry says it ("they left the workspace").
    pub because: &'a str,
}

/// Lets go of the claims `fallen.holder` holds on the pending questions of `workspace_id` that they may no longer
/// decide: all of them once they decide nothing, or those their new role does not allow. Otherwise their claim
/// would keep everyone but an admin from answering until it ran out. Each is a change of its own, conditional on the
/// question's revision, with a `question_claimed` event and a `question.unclaimed` audit entry by `actor`. How many
/// were let go.
pub async fn release_fallen_claims(
    store: &dyn crate::store::Store,
    hub: &crate::events::EventHub,
    workspace: &str,
    workspace_id: Uuid,
    fallen: Fallen<'_>,
    actor: &AuditActor,
) -> Result<u32, AppError> {
    let mut pending = PendingPages::of(workspace_id);
    let mut released = 0;
    while let Some(page) = pending.next(store).await? {
        for row in page.into_iter().filter(|row| row.claimed_by_id == Some(fallen.holder)) {
            if release_fallen(store, hub, workspace, fallen, actor, row).await? {
                released += 1;
            }
        }
    }
    Ok(released)
}

/// Lets go of `fallen`'s claim of `row` if they still hold it and may no longer decide it; whether it did.
async fn release_fallen(
    store: &dyn crate::store::Store,
    hub: &crate::events::EventHub,
    workspace: &str,
    fallen: Fallen<'_>,
    actor: &AuditActor,
    mut row: QuestionRow,
) -> Result<bool, AppError> {
    for _ in 0..ATTEMPTS {
        let question = row.to_question(workspace)?;
        let may_decide = fallen.now_as.is_some_and(|(role, name)| {
            question.refusal_to_decide(holdpoint_types::Decider { role, name, account: true }).is_none()
        });
        let at = change_time(&row);
        if row.status != QuestionStatus::Pending || claim_holder(&row, at) != Some(fallen.holder) || may_decide {
            return Ok(false);
        }
        let mut after = row.clone();
        after.claimed_by = None;
        after.claim_expires_at = None;
        after.claimed_by_id = None;
        let audited =
            (actions::QUESTION_UNCLAIMED, json!({ "released": question.claimed_by, "because": fallen.because }));
        let change = claim_change(&question, after, at, actor.clone(), audited, workspace)?;
        if store.change_pending_question(&change).await? {
            hub.forget_asked(row.id);
            return Ok(true);
        }
        row = reread(store, &row).await?;
    }
    Err(still_changing())
}

/// The change of a pending question whose claim was taken or let go (`after`, its claim set, as of `at`): its
/// revision moved on, a `question_claimed` event, and the audit entry `action` by `actor` with what the claim was
/// before and `audit_after`.
fn claim_change(
    question: &Question,
    mut after: QuestionRow,
    at: DateTime<Utc>,
    actor: AuditActor,
    (action, audit_after): (&str, serde_json::Value),
    workspace: &str,
) -> Result<PendingQuestionChange, AppError> {
    after.revision += 1;
    after.updated_at = at;
    let event = pending_event(&after, EventType::QuestionClaimed, workspace)?;
    let audit = NewAuditEntry {
        workspace_id: after.workspace_id,
        actor,
        action: action.into(),
        subject_type: "question".into(),
        subject_id: Some(after.id.to_string()),
        before: Some(json!({
            "title": question.title,
            "claimed_by": question.claimed_by,
            "claim_expires_at": question.claim_expires_at,
        })),
        after: Some(audit_after),
        diff: None,
        created_at: at,
    };
    Ok(PendingQuestionChange {
        question: after,
        effect: PendingEffect::Recorded { event, audit, reach: Reach::default() },
    })
}
