//! Escalation: a workspace's policies per kind and urgency, and the steps the deadline worker takes by the plan a
//! question took from its policy when it was asked ([`crate::questions`]) — remind the people the question reached,
//! then hand it to `escalate_to`, who become its assignee and are notified. Each step is decided whole here (the question
//! as it leaves the step, its event, its audit entry, who it reaches) and written by the store only if the question
//! is still pending and the step still due, so across instances each step happens once.

use crate::store::Json;
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::json;

use holdpoint_types::{Assignee, DeliveryCause, EscalationPolicies, EscalationPolicy, EscalationStep, EventType};

use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::events::EventHub;
use crate::notifications::SendsOn;
use crate::questions::TimeoutBounds;
use crate::store::{
    AuditActor, EscalationPolicyRow, EscalationTransition, NewAuditEntry, NewEvent, QuestionRow, Store, StoreResult,
};
use crate::validation::FieldErrors;

/// The escalation policies as an actor in the audit log.
pub const ESCALATION_POLICY: &str = "escalation policy";

/// A workspace's policies, for any member (the plan each question took is on the question anyway).
pub async fn policies(store: &dyn Store, caller: &Caller) -> Result<EscalationPolicies, AppError> {
    let rows = store.escalation_policies(caller.workspace_id()).await?;
    Ok(EscalationPolicies { items: rows.into_iter().map(wire).collect() })
}

/// A stored policy as the API shows it.
pub fn wire(row: EscalationPolicyRow) -> EscalationPolicy {
    EscalationPolicy {
        kind: row.kind,
        urgency: row.urgency,
        remind_after_seconds: row.remind_after_seconds,
        escalate_after_seconds: row.escalate_after_seconds,
        escalate_to: row.escalate_to.map(|to| to.0),
    }
}

/// Replaces a workspace's policies (admins). Each step's delay is within the bounds a question's timeout has; a
/// policy has at least one step, an escalation names who it goes to, and comes after the reminder.
pub async fn replace_policies(
    store: &dyn Store,
    caller: &Caller,
    bounds: TimeoutBounds,
    new: EscalationPolicies,
) -> Result<EscalationPolicies, AppError> {
    caller.require_admin("manage people and tokens")?;
    let workspace_id = caller.workspace_id();
    let mut errors = FieldErrors::default();
    let mut seen = std::collections::HashSet::new();
    for (index, policy) in new.items.iter().enumerate() {
        let field = |name: &str| format!("items[{index}].{name}");
        if !seen.insert((policy.kind, policy.urgency)) {
            errors.add(field("urgency"), format!("a second policy for {} {} questions", policy.urgency, policy.kind));
        }
        if policy.remind_after_seconds.is_none() && policy.escalate_after_seconds.is_none() {
            errors.add(field("remind_after_seconds"), "a policy needs a reminder, an escalation or both");
        }
        for (name, seconds) in [
            ("remind_after_seconds", policy.remind_after_seconds),
            ("escalate_after_seconds", policy.escalate_after_seconds),
        ] {
            if let Some(seconds) = seconds
                && !(bounds.min_seconds..=bounds.max_seconds).contains(&seconds)
            {
                errors.add(
                    field(name),
                    format!("must be within {}..={} seconds", bounds.min_seconds, bounds.max_seconds),
                );
            }
        }
        if let (Some(remind), Some(escalate)) = (policy.remind_after_seconds, policy.escalate_after_seconds)
            && escalate <= remind
        {
            errors.add(field("escalate_after_seconds"), "must come after the reminder (remind_after_seconds)");
        }
        match (&policy.escalate_to, policy.escalate_after_seconds) {
            (None, Some(_)) => errors.add(field("escalate_to"), "required with escalate_after_seconds"),
            (Some(_), None) => errors.add(field("escalate_after_seconds"), "required with escalate_to"),
            (Some(to), Some(_)) => {
                if let Some((part, message)) =
                    crate::questions::assignee_problem(store, workspace_id, policy.kind, to).await?
                {
                    errors.add(field(&format!("escalate_to.{part}")), message);
                }
            }
            (None, None) => {}
        }
    }
    errors.into_result("the escalation policies")?;
    let before = policies(store, caller).await?;
    let at = crate::store::now();
    let rows: Vec<EscalationPolicyRow> = new
        .items
        .iter()
        .map(|policy| EscalationPolicyRow {
            workspace_id,
            kind: policy.kind,
            urgency: policy.urgency,
            remind_after_seconds: policy.remind_after_seconds,
            escalate_after_seconds: policy.escalate_after_seconds,
            escalate_to: policy.escalate_to.clone().map(Json),
            updated_at: at,
        })
        .collect();
    let audit = NewAuditEntry {
        workspace_id,
        actor: AuditActor::from(caller),
        action: actions::ESCALATION_POLICIES_CHANGED.into(),
        subject_type: "workspace".into(),
        subject_id: Some(workspace_id.to_string()),
        before: Some(json!(before.items)),
        after: Some(json!(new.items)),
        diff: None,
        created_at: at,
    };
    store.replace_escalation_policies(workspace_id, &rows, &audit).await?;
    policies(store, caller).await
}

/// Why a step reaches people, and the event and audit action that record it.
fn recorded_as(step: EscalationStep) -> (DeliveryCause, EventType, &'static str) {
    match step {
        EscalationStep::Remind => (DeliveryCause::Reminded, EventType::QuestionReminded, actions::QUESTION_REMINDED),
        EscalationStep::Escalate => {
            (DeliveryCause::Escalated, EventType::QuestionEscalated, actions::QUESTION_ESCALATED)
        }
    }
}

/// The step `row` (pending, of workspace `workspace`) is due to take at `at`, decided whole; `None` if it has none
/// due.
pub fn step_of(
    row: &QuestionRow,
    at: DateTime<Utc>,
    workspace: &str,
    reached: &crate::notifications::Reachable<'_>,
) -> StoreResult<Option<EscalationTransition>> {
    let (Some(plan), Some(due_at)) = (&row.escalation, row.next_escalation_at) else { return Ok(None) };
    let Some((step, step_at)) = plan.0.next_step() else { return Ok(None) };
    if step_at > at {
        return Ok(None);
    }
    let at = at.trunc_subsecs(6);
    let mut plan = plan.0.clone();
    let mut after = row.clone();
    // Why an escalation handed the question to nobody new, when it could not.
    let mut not_reassigned = None;
    // Whom the policy named, when they are away and their delegate takes the question instead.
    let mut delegated_from = None;
    // Whose claim the question's new hands end.
    let mut claim_ended = None;
    match step {
        EscalationStep::Remind => plan.reminded_at = Some(at),
        EscalationStep::Escalate => {
            plan.escalated_at = Some(at);
            let mut escalate_to = plan.escalate_to.clone();
            // A question handed to someone away goes to their delegate meanwhile, as one asked of them does.
            if let Some(Assignee::User(user)) = &escalate_to
                && let Some(taker) = crate::questions::delegation::stand_in(reached.members, user, row.kind, at)
            {
                delegated_from = Some(user.clone());
                escalate_to = Some(Assignee::User(taker.username.clone()));
            }
            let handed = QuestionRow { assignee: escalate_to.map(Json), ..row.clone() };
            // A person named by the policy may have left the workspace or lost the role since, or not be among an
            // approval's eligible approvers, or be too few for the approvals it still needs: a question handed to
            // fewer people who may decide it than it needs could only time out, so it stays with whoever could.
            let approved = |member: &crate::store::MemberRow| {
                row.approvals.0.iter().any(|approval| approval.person_id == Some(member.user_id))
            };
            let able = reached
                .members
                .iter()
                .filter(|member| crate::notifications::is_for(&handed, member) && !approved(member))
                .count();
            let needed =
                usize::try_from(row.required_approvals).unwrap_or(1).saturating_sub(row.approvals.0.len()).max(1);
            let to = plan.escalate_to.as_ref().map(ToString::to_string).unwrap_or_default();
            if able == 0 {
                not_reassigned = Some(format!("no member who may answer this question is {to}"));
            } else if able < needed {
                not_reassigned = Some(format!(
                    "{to}: {able} member(s) who may still approve it, fewer than the {needed} approvals it needs"
                ));
            } else {
                // A claim is held for the people a question is for: one held by someone it is no longer for would
                // keep its new assignees from answering it.
                let holder = reached.members.iter().find(|member| Some(member.user_id) == row.claimed_by_id);
                if row.claimed_by_id.is_some()
                    && !holder.is_some_and(|holder| crate::notifications::is_for(&handed, holder))
                {
                    claim_ended = row.claimed_by.clone();
                    after.claimed_by = None;
                    after.claim_expires_at = None;
                    after.claimed_by_id = None;
                }
                after.assignee = handed.assignee;
            }
        }
    }
    after.next_escalation_at = plan.next_step().map(|(_, next)| next);
    after.updated_at = at;
    let next_step = plan.next_step();
    after.escalation = Some(Json(plan));
    let (cause, event_type, audit_action) = recorded_as(step);
    let reach = match not_reassigned {
        Some(_) => crate::store::Reach::default(),
        None => crate::notifications::reach_because(
            &after,
            cause,
            at,
            reached.members,
            reached.sends_on,
            reached.push_subscribers,
        )?,
    };
    let question = crate::store::event_data(&after.to_question(workspace)?)?;
    let event = NewEvent {
        workspace_id: row.workspace_id,
        event_type,
        project: row.project.clone(),
        run_id: row.run_id,
        question_id: Some(row.id),
        data: crate::store::question_event_data_around(&question)?,
        created_at: at,
    };
    let notified: Vec<&str> = reached
        .members
        .iter()
        .filter(|member| reach.notifications.iter().any(|n| n.user_id == member.user_id))
        .map(|member| member.username.as_str())
        .collect();
    let channels: std::collections::BTreeSet<&str> = reach.deliveries.iter().map(|d| d.channel.as_str()).collect();
    let audit = NewAuditEntry {
        workspace_id: row.workspace_id,
        actor: AuditActor::policy(ESCALATION_POLICY, None),
        action: audit_action.into(),
        subject_type: "question".into(),
        subject_id: Some(row.id.to_string()),
        before: Some(json!({ "title": row.title, "assignee": row.assignee.as_ref().map(|a| &a.0) })),
        after: Some(json!({
            "assignee": after.assignee.as_ref().map(|a| &a.0),
            "notified": notified,
            "channels": channels,
            "next_step": next_step.map(|(step, at)| json!({ "step": step, "at": at })),
            "not_reassigned": not_reassigned,
            "delegated_from": delegated_from,
            "claim_ended": claim_ended,
        })),
        diff: None,
        created_at: at,
    };
    Ok(Some(EscalationTransition { question: after, due_at, event, audit, reach }))
}

/// The most questions one pass reads at a time.
const BATCH: i64 = 200;

/// Takes every escalation step due now; returns how many this call took. `hub` is this instance's, whose remembered
/// rows of the stepped questions are forgotten first (a step may change who may answer).
pub async fn take_due_steps(store: &dyn Store, hub: Option<&EventHub>, sends_on: &SendsOn) -> StoreResult<usize> {
    let mut taken = 0;
    loop {
        let at = crate::store::now();
        let due = store.due_escalations(at, BATCH).await?;
        let mut took_any = false;
        for row in due {
            let members = crate::notifications::members(store, row.workspace_id).await?;
            let push_subscribers =
                if sends_on.push { store.push_subscribers(row.workspace_id).await? } else { Vec::new() };
            let reached =
                crate::notifications::Reachable { members: &members, sends_on, push_subscribers: &push_subscribers };
            let workspace = store.workspace_name(row.workspace_id).await?;
            let Some(step) = step_of(&row, at, &workspace, &reached)? else { continue };
            if let Some(hub) = hub {
                hub.forget_asked(row.id);
            }
            if store.take_escalation_step(&step).await? {
                taken += 1;
                took_any = true;
                if let (Some(hub), false) = (hub, step.reach.deliveries.is_empty()) {
                    hub.deliveries_queued();
                }
            }
        }
        // A pass that took a step looks again: a question with both steps overdue (the server was down) takes the
        // second then. One that took none (every step taken elsewhere meanwhile) leaves the rest to the next wake.
        if !took_any {
            return Ok(taken);
        }
    }
}
