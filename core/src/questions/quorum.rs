//! Approvals that need several people (a quorum): who may give one, and recording each until the last one needed
//! answers the question. Each approval is a change of the pending question as [`super::pending`] describes.

use holdpoint_types::{AnswerBody, Approval, Decider, EventType, Question, QuestionStatus, Resolution};
use serde_json::json;
use uuid::Uuid;

use super::claims::require_claim;
use super::pending::{ATTEMPTS, change_time, pending_event, reread, still_changing};
use super::{Answering, not_pending, pending_for, transition};
use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::store::{
    NewAuditEntry, PendingEffect, PendingQuestionChange, QuestionResolution, QuestionRow, Reach, Store,
};

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

/// Records the caller's approval of a question that needs several (`answer` is an approval, checked against the
/// question and the caller's right to give it): the question stays pending with one approval more, or, with the
/// last one needed, is answered `true` in the same write. A person who approved already counts once: their
/// question is returned as it is.
pub async fn approve(
    answering: &Answering<'_>,
    caller: &Caller,
    mut row: QuestionRow,
    answer: AnswerBody,
    channel: Option<holdpoint_types::Channel>,
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
        let withdrawn = withdraw_fallen(store, row.workspace_id, &question, &mut after.approvals.0).await?;
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
            if let Some(audit_after) = completes.audit.after.as_mut() {
                if let Some(channel) = channel {
                    audit_after["channel"] = json!(channel);
                }
                if !withdrawn.is_empty() {
                    audit_after["withdrawn_approvals"] = json!(withdrawn);
                }
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
                    "withdrawn_approvals": (!withdrawn.is_empty()).then_some(&withdrawn),
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

/// Takes out of `approvals` those whose givers may no longer decide `question` — removed from its workspace, or
/// given a role it does not allow — and returns their names: a quorum counts the people who may decide it when it
/// completes, not who once might have. Approvals that record no person stay. Reads one member per approval.
async fn withdraw_fallen(
    store: &dyn Store,
    workspace_id: Uuid,
    question: &Question,
    approvals: &mut Vec<Approval>,
) -> Result<Vec<String>, AppError> {
    let mut withdrawn = Vec::new();
    let mut standing = Vec::with_capacity(approvals.len());
    for approval in approvals.drain(..) {
        let stands = match approval.person_id {
            Some(person) => store.member(workspace_id, person).await?.is_some_and(|member| {
                let decider = Decider { role: member.role, name: &member.username, account: true };
                question.refusal_to_decide(decider).is_none()
            }),
            None => true,
        };
        match stands {
            true => standing.push(approval),
            false => withdrawn.push(approval.by),
        }
    }
    *approvals = standing;
    Ok(withdrawn)
}

/// Whether `approval` is the caller's person's: by the person it counts as, or by name for an approval that records
/// no person.
fn same_person(approval: &Approval, caller: &Caller) -> bool {
    match approval.person_id {
        Some(person) => caller.principal.person == Some(person),
        None => approval.by == caller.principal.name,
    }
}
