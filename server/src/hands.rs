//! Many hands: approvals that need several people, and claims. Each use case here decides the whole
//! change of a pending question — the row as it leaves it, its event and its audit entry, or the transition out of
//! `pending` the last approval completes — and hands it to the store, which writes it only if no other change of
//! the question was written since it was read. A use case that finds itself second reads the question again and
//! decides again: another approver's approval may have made this one the last, or the question may have left
//! `pending`.

use app::types::{
    AnswerBody, Approval, Assignee, DeliveryCause, EventType, Question, QuestionStatus, Resolution, Role,
};
use chrono::{DateTime, Duration, SubsecRound, Utc};
use serde_json::json;
use uuid::Uuid;

use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::questions::{Answering, not_pending, pending_for, transition};
use sqlx::types::Json;

use crate::notifications::{Reachable, SendsOn, reach_because};
use crate::store::{
    AuditActor, MemberRow, NewAuditEntry, NewEvent, PendingEffect, PendingQuestionChange, QuestionResolution,
    QuestionRow, Reach, Store,
};

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
    kind: app::types::QuestionKind,
    now: DateTime<Utc>,
) -> Option<&'a MemberRow> {
    let needed = if kind == app::types::QuestionKind::Approval { Role::Approver } else { Role::Responder };
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
    let mut filter =
        crate::store::QuestionFilter { status: Some(QuestionStatus::Pending), limit: 500, ..Default::default() };
    let mut handed = 0;
    loop {
        let page = store.list_questions(workspace_id, &filter).await?;
        let Some(last) = page.last() else { break };
        filter.after = Some(crate::store::QuestionCursor::Created { id: last.id });
        let full_page = page.len() == filter.limit as usize;
        for row in page {
            if hand_over(store, hub, workspace, &reached, away, actor, row).await? {
                handed += 1;
            }
        }
        if !full_page {
            break;
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

/// How long a claim lasts unless the claimer asks for less, and the most any claim lasts.
pub const DEFAULT_CLAIM_TTL_SECONDS: i64 = 1800;
/// The shortest claim worth taking.
pub const MIN_CLAIM_TTL_SECONDS: i64 = 1;

/// How many times a change is decided again after another change of the same question was written first. Each
/// retry means another person's change was stored, so with at most ten approvals needed, a retry budget this size
/// is only spent by a question changing faster than anyone could act on it.
const ATTEMPTS: usize = 64;

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

/// Refuses with 403 a service token's approval of a question that needs several: a quorum counts people, and a
/// token the operator made (not a person) stands for nobody.
fn require_person(caller: &Caller) -> Result<(), AppError> {
    if caller.principal.person.is_some() {
        return Ok(());
    }
    Err(AppError::Forbidden(
        "a service token (made by the operator, not by a person) cannot give one of several approvals: a quorum \
         counts people; approve with your account or a token you made"
            .into(),
    ))
}

/// Refuses with 403 a caller the question's `eligible` does not name (a quorum's approvers).
pub fn require_eligible(caller: &Caller, question: &Question) -> Result<(), AppError> {
    use crate::store::PrincipalKind;
    match &question.eligible {
        Some(app::types::Eligible::Role(role)) if caller.role().rank() < role.rank() => {
            Err(AppError::Forbidden(format!("only {}s and above may decide this approval", role)))
        }
        Some(app::types::Eligible::Users(users))
            if !(caller.principal.kind == PrincipalKind::User && users.contains(&caller.principal.name)) =>
        {
            Err(AppError::Forbidden(format!("only {} may decide this approval", users.join(", "))))
        }
        _ => Ok(()),
    }
}

/// The event of a change that leaves `after` (of workspace `workspace`) pending.
fn pending_event(after: &QuestionRow, event_type: EventType, workspace: &str) -> Result<NewEvent, AppError> {
    let question = crate::store::event_data(&after.to_question(workspace)?)?;
    Ok(NewEvent {
        workspace_id: after.workspace_id,
        event_type,
        project: after.project.clone(),
        run_id: after.run_id,
        question_id: Some(after.id),
        data: crate::store::question_event_data_around(&question)?,
        created_at: after.updated_at,
    })
}

/// The time a change of `row` is stamped with: now, at the databases' precision, never before its last change.
fn change_time(row: &QuestionRow) -> DateTime<Utc> {
    crate::store::now().max(row.updated_at).trunc_subsecs(6)
}

/// Records the caller's approval of a question that needs several (`answer` is an approval, checked against the
/// question and the caller's right to give it): the question stays pending with one approval more, or, with the
/// last one needed, is answered `true` in the same write. A person who approved already counts once: their
/// question is returned as it is.
pub async fn approve(
    answering: &Answering<'_>,
    caller: &Caller,
    mut row: QuestionRow,
    answer: AnswerBody,
    channel: Option<app::types::Channel>,
) -> Result<Question, AppError> {
    let (store, workspace) = (answering.store, caller.principal.workspace.as_str());
    require_person(caller)?;
    let by = caller.principal.name.clone();
    for _ in 0..ATTEMPTS {
        if row.status != QuestionStatus::Pending {
            return Err(not_pending(&row));
        }
        let question = row.to_question(workspace)?;
        require_claim(caller, &row, crate::store::now())?;
        if row.approvals.0.iter().any(|approval| same_person(approval, caller)) {
            return Ok(question);
        }
        let at = change_time(&row);
        let mut after = row.clone();
        let person_id = caller.principal.person;
        after.approvals.0.push(Approval { by: by.clone(), at, comment: answer.comment.clone(), person_id });
        after.revision += 1;
        after.updated_at = at;
        let given = after.approvals.0.len();
        let required = usize::try_from(row.required_approvals).unwrap_or(1);
        let effect = if given >= required {
            let change = QuestionResolution {
                status: QuestionStatus::Answered,
                response: Some(answer.clone()),
                answered_by: Some(by.clone()),
                resolution: Some(Resolution::Human),
                at,
                actor: caller.into(),
            };
            let mut completes = transition(&after, &change, workspace)?;
            if let (Some(channel), Some(audit_after)) = (channel, completes.audit.after.as_mut()) {
                audit_after["channel"] = json!(channel);
            }
            PendingEffect::Resolves(completes)
        } else {
            let event = pending_event(&after, EventType::QuestionApprovalAdded, workspace)?;
            let audit = NewAuditEntry {
                workspace_id: row.workspace_id,
                actor: caller.into(),
                action: actions::QUESTION_APPROVAL_ADDED.into(),
                subject_type: "question".into(),
                subject_id: Some(row.id.to_string()),
                before: Some(json!({ "title": row.title, "approvals": row.approvals.0.len() })),
                after: Some(json!({
                    "approvals": given,
                    "required_approvals": required,
                    "comment": answer.comment,
                    "channel": channel,
                })),
                diff: None,
                created_at: at,
            };
            PendingEffect::Recorded { event, audit, reach: Reach::default() }
        };
        let change = PendingQuestionChange { question: after, effect };
        if store.change_pending_question(&change).await? {
            answering.hub.forget_asked(row.id);
            return match change.effect {
                PendingEffect::Resolves(completes) => {
                    let resolved = completes.resolved;
                    answering.metrics.question_resolved(
                        resolved.kind.as_str(),
                        resolved.status.as_str(),
                        pending_for(&resolved),
                    );
                    Ok(resolved.to_question(workspace)?)
                }
                PendingEffect::Recorded { .. } => Ok(change.question.to_question(workspace)?),
            };
        }
        row = reread(store, &row).await?;
    }
    Err(still_changing())
}

/// Whether `approval` is the caller's person's: by the person it counts as, or by name for an approval that records
/// no person.
fn same_person(approval: &Approval, caller: &Caller) -> bool {
    match approval.person_id {
        Some(person) => caller.principal.person == Some(person),
        None => approval.by == caller.principal.name,
    }
}

async fn reread(store: &dyn Store, row: &QuestionRow) -> Result<QuestionRow, AppError> {
    store.question(row.workspace_id, row.id).await?.ok_or(AppError::NotFound("question"))
}

fn still_changing() -> AppError {
    AppError::Conflict {
        message: "the question kept changing while this change was being recorded; try again".into(),
        details: None,
    }
}

/// Who may claim a question: whoever may answer it (role, assignee, eligibility), as for an answer.
fn require_right_to_claim(caller: &Caller, question: &Question) -> Result<(), AppError> {
    crate::questions::require_answer_right(caller, question.kind)?;
    crate::questions::require_assignee(caller, question)?;
    require_eligible(caller, question)
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
        require_right_to_claim(caller, &question)?;
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
        after.revision += 1;
        after.updated_at = at;
        let event = pending_event(&after, EventType::QuestionClaimed, workspace)?;
        let audit = NewAuditEntry {
            workspace_id: row.workspace_id,
            actor: AuditActor::from(caller),
            action: audit_action.into(),
            subject_type: "question".into(),
            subject_id: Some(row.id.to_string()),
            before: Some(json!({
                "title": row.title,
                "claimed_by": question.claimed_by,
                "claim_expires_at": question.claim_expires_at,
            })),
            after: Some(audit_after),
            diff: None,
            created_at: at,
        };
        let effect = PendingEffect::Recorded { event, audit, reach: Reach::default() };
        let change = PendingQuestionChange { question: after, effect };
        if store.change_pending_question(&change).await? {
            answering.hub.forget_asked(row.id);
            return Ok(change.question.to_question(workspace)?);
        }
        row = reread(store, &row).await?;
    }
    Err(still_changing())
}
