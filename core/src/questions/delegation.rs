//! Delegation: who stands in for a member who is away takes the questions assigned to them. A question asked for
//! someone away goes to their stand-in as it is asked; those pending when they go away are handed over, each a change
//! of the pending question as [`super::pending`] describes.

use crate::store::Json;
use chrono::{DateTime, Utc};
use holdpoint_types::{Assignee, DeliveryCause, EventType, QuestionStatus, Role};
use serde_json::json;
use uuid::Uuid;

use super::pending::{ATTEMPTS, PendingPages, change_time, pending_event, reread, still_changing};
use crate::actions;
use crate::error::AppError;
use crate::notifications::{Reachable, SendsOn, reach_because};
use crate::store::{AuditActor, MemberRow, NewAuditEntry, PendingEffect, PendingQuestionChange, QuestionRow, Store};

/// The longest a delegation chain is followed (ana away to ben, ben away to cyd, …): far more than any team's
/// holiday plan, and a bound on a loop the members' settings could make.
const MAX_DELEGATION_HOPS: usize = 8;

/// The least role a delegate needs to take a member's questions: the role that answers what may be assigned to
/// them (approvals need an approver), at least a responder.
pub fn delegate_role_for(role: Role) -> Role {
    if role.rank() >= Role::Approver.rank() { Role::Approver } else { Role::Responder }
}

/// Who answers in `username`'s stead at `now` (delegation): following each away member's delegate, the
/// first member who is not away — as long as they may answer a question of `kind`. `None` when `username` is not
/// away (or nobody in the chain may take it).
pub fn stand_in<'a>(
    members: &'a [MemberRow],
    username: &str,
    kind: holdpoint_types::QuestionKind,
    now: DateTime<Utc>,
) -> Option<&'a MemberRow> {
    let needed = if kind == holdpoint_types::QuestionKind::Approval { Role::Approver } else { Role::Responder };
    let mut current = members.iter().find(|member| member.username == username)?;
    let mut taker = None;
    let mut seen = vec![current.user_id];
    for _ in 0..MAX_DELEGATION_HOPS {
        if !current.is_away(now) {
            break;
        }
        let Some(next) = members.iter().find(|member| Some(member.user_id) == current.delegate_id) else { break };
        if seen.contains(&next.user_id) || next.role.rank() < needed.rank() {
            break;
        }
        seen.push(next.user_id);
        taker = Some(next);
        current = next;
    }
    taker
}

/// A new question assigned to someone away, assigned to who stands in for them instead, with the audit entry that
/// says so; `None` when its assignee (if a person) is not away.
pub fn delegated(row: &QuestionRow, members: &[MemberRow], now: DateTime<Utc>) -> Option<(QuestionRow, NewAuditEntry)> {
    let Some(Json(Assignee::User(assignee))) = &row.assignee else { return None };
    let away = members.iter().find(|member| &member.username == assignee)?;
    let taker = stand_in(members, assignee, row.kind, now)?;
    let mut after = row.clone();
    after.assignee = Some(Json(Assignee::User(taker.username.clone())));
    Some((after, delegation_entry(row, away, taker, &AuditActor::policy("delegation while away", None), now)))
}

/// The audit entry of `row` going from `away` to `taker`.
fn delegation_entry(
    row: &QuestionRow,
    away: &MemberRow,
    taker: &MemberRow,
    actor: &AuditActor,
    at: DateTime<Utc>,
) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id: row.workspace_id,
        actor: actor.clone(),
        action: actions::QUESTION_DELEGATED.into(),
        subject_type: "question".into(),
        subject_id: Some(row.id.to_string()),
        before: Some(json!({ "title": row.title, "assignee": { "user": away.username } })),
        after: Some(json!({ "assignee": { "user": taker.username }, "away_until": away.away_until })),
        diff: None,
        created_at: at,
    }
}

/// Hands the pending questions assigned to `away` (who has just gone away) to who stands in for them: each in a
/// write of its own, conditional on the question's revision, with a `question_escalated` event (the question
/// changed hands), a `question.delegated` audit entry by `actor`, and the taker reached as an escalation reaches
/// people (their notification, and deliveries on the channels `sends_on` names that they chose). A claim `away`
/// held is let go with it. How many were handed over.
pub async fn hand_over_assigned(
    store: &dyn Store,
    hub: &crate::events::EventHub,
    sends_on: &SendsOn,
    workspace: &str,
    away: &MemberRow,
    actor: &AuditActor,
    workspace_id: Uuid,
) -> Result<u32, AppError> {
    let members = crate::notifications::members(store, workspace_id).await?;
    let push_subscribers = if sends_on.push { store.push_subscribers(workspace_id).await? } else { Vec::new() };
    let reached = Reachable { members: &members, sends_on, push_subscribers: &push_subscribers };
    let mut pending = PendingPages::of(workspace_id);
    let mut handed = 0;
    while let Some(page) = pending.next(store).await? {
        for row in page {
            if hand_over(store, hub, workspace, &reached, away, actor, row).await? {
                handed += 1;
            }
        }
    }
    Ok(handed)
}

/// Hands one question over if it is still pending and assigned to `away`; whether it was.
async fn hand_over(
    store: &dyn Store,
    hub: &crate::events::EventHub,
    workspace: &str,
    reached: &Reachable<'_>,
    away: &MemberRow,
    actor: &AuditActor,
    mut row: QuestionRow,
) -> Result<bool, AppError> {
    for _ in 0..ATTEMPTS {
        let assigned = matches!(&row.assignee, Some(Json(Assignee::User(user))) if *user == away.username);
        if row.status != QuestionStatus::Pending || !assigned {
            return Ok(false);
        }
        let at = change_time(&row);
        let Some(taker) = stand_in(reached.members, &away.username, row.kind, at) else { return Ok(false) };
        let mut after = row.clone();
        after.assignee = Some(Json(Assignee::User(taker.username.clone())));
        if after.claimed_by_id == Some(away.user_id) {
            after.claimed_by = None;
            after.claim_expires_at = None;
            after.claimed_by_id = None;
        }
        after.revision += 1;
        after.updated_at = at;
        let event = pending_event(&after, EventType::QuestionEscalated, workspace)?;
        let audit = delegation_entry(&row, away, taker, actor, at);
        let reach = reach_because(
            &after,
            DeliveryCause::Escalated,
            at,
            reached.members,
            reached.sends_on,
            reached.push_subscribers,
        )?;
        let queued = !reach.deliveries.is_empty();
        let change = PendingQuestionChange { question: after, effect: PendingEffect::Recorded { event, audit, reach } };
        if store.change_pending_question(&change).await? {
            hub.forget_asked(row.id);
            if queued {
                hub.deliveries_queued();
            }
            return Ok(true);
        }
        row = reread(store, &row).await?;
    }
    Err(still_changing())
}
