//! `POST /decide`: the rules' decision about a tool call an agent is about to make, asking a person when they say
//! `ask` (and with `wait`, waiting for the decision). It sits with the doors because it strings together the rules,
//! the grants, the runs an agent may act for and asking and waiting for a question, which the runtime's own use of
//! the rules (below the runs) must not import.

use app::types::{
    AnswerBody, DecideQuestion, DecideRequest, DecideResponse, NewQuestion, Question, QuestionStatus, RuleDecision,
};
use serde_json::{Value, json};

use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::rules::service::check_call;
use crate::rules::{RunRef, ToolCall, Verdict, approval_question};
use crate::state::App;
use crate::store::{AuditActor, IdempotencyKey, NewAuditEntry, StoreError};

/// `POST /decide` (agent tokens and above): the rules' decision about a call. `ask` consults the grants first (a
/// live grant lets the call through: `allow`), else asks the approval question; with `wait`, waits up to
/// `max_wait` for a person's decision and answers `allow` or `deny` (still `ask`, with the pending question, when
/// nobody decided within it). Every decision is audited (`rules.decided`).
pub async fn decide(
    app: &App,
    caller: &Caller,
    request: &DecideRequest,
    idempotency: Option<&IdempotencyKey>,
    max_wait: std::time::Duration,
) -> Result<DecideResponse, AppError> {
    caller.require_ask()?;
    check_call(&request.tool, &request.arguments)?;
    let store = app.store.as_ref();
    let workspace_id = caller.workspace_id();
    let run = match request.run_id {
        Some(id) => {
            let row = crate::runs::load_run(store, caller, id).await?;
            Some(RunRef { id: row.id, project: row.project })
        }
        None => None,
    };
    let agent = request.agent.clone().unwrap_or_else(|| caller.principal.name.clone());
    let call = ToolCall { tool: &request.tool, arguments: &request.arguments, agent: Some(&agent), run };
    let verdict = app.rules().decide(workspace_id, &call).await?;
    let mut response = DecideResponse {
        decision: verdict.decision,
        rule: verdict.rule.clone(),
        reason: verdict.reason.clone(),
        question: None,
        grant_id: None,
        arguments: None,
    };
    if verdict.decision == RuleDecision::Ask {
        let wishes = request.question.clone().unwrap_or_default();
        let asking =
            Asking { call: &call, verdict: &verdict, wishes: &wishes, wait: request.wait, max_wait, idempotency };
        ask(app, caller, asking, &mut response).await?;
    }
    if response.decision == RuleDecision::Allow {
        let edited =
            response.question.as_ref().and_then(|q| q.response.as_ref()).and_then(|r| r.edited_arguments.clone());
        response.arguments = Some(edited.unwrap_or_else(|| request.arguments.clone()));
    }
    store.append_audit(&decided_entry(caller, &call, &verdict, &response)).await?;
    Ok(response)
}

/// What the `ask` of a decision works from.
struct Asking<'a> {
    call: &'a ToolCall<'a>,
    verdict: &'a Verdict,
    wishes: &'a DecideQuestion,
    wait: bool,
    max_wait: std::time::Duration,
    idempotency: Option<&'a IdempotencyKey>,
}

/// The `ask` of a decision: a grant that covers the call, else the approval question (and with `wait`, its
/// outcome).
async fn ask(app: &App, caller: &Caller, asking: Asking<'_>, response: &mut DecideResponse) -> Result<(), AppError> {
    let Asking { call, verdict, wishes, wait, max_wait, idempotency } = asking;
    let store = app.store.as_ref();
    let question = with_wishes(approval_question(call, verdict, None), call, verdict, wishes);
    // One person's grant does not stand for a quorum, nor for the people a rule names as the only ones who may
    // approve.
    let grantable = question.required_approvals.unwrap_or(1) <= 1 && question.eligible.is_none();
    let grant_call = crate::grants::Call {
        workspace_id: caller.workspace_id(),
        tool_name: call.tool,
        arguments: call.arguments,
        run_id: call.run.as_ref().map(|run| run.id),
        agent: Some(crate::grants::token_agent(caller.principal.id)),
    };
    let record = json!({ "source": "decide", "rule": verdict.rule });
    if grantable && let Some(grant) = crate::grants::let_through(store, &grant_call, record).await? {
        response.decision = RuleDecision::Allow;
        response.grant_id = Some(grant.id);
        return Ok(());
    }
    let questions = app.asking();
    let row = questions.prepare(question, caller.workspace_id(), Some(caller.principal.id)).await?;
    crate::runs::check_run_of_new_question(store, caller, &row).await?;
    // Watch before asking, so an answer that comes before the wait begins still wakes it.
    let mut watch = wait.then(|| app.hub.watch_question(row.id));
    let asked = questions.record(&row, &caller.principal.workspace, idempotency).await.map_err(|err| match err {
        // The client learns which question its key asked, to fetch it rather than guess.
        StoreError::IdempotencyMismatch { resource_id } => {
            AppError::Conflict { message: err.to_string(), details: Some(json!({ "question_id": resource_id })) }
        }
        other => other.into(),
    })?;
    // A repeated key answers with the question the first request asked, which is the one to wait on.
    let asked_id = asked.question.id;
    let mut question = asked.question.to_question(&caller.principal.workspace)?;
    if asked_id != row.id && wait {
        watch = Some(app.hub.watch_question(asked_id));
        // Read again once watched: an answer between the first read and the watch would otherwise be missed.
        if let Some(row) = store.question(caller.workspace_id(), asked_id).await? {
            question = row.to_question(&caller.principal.workspace)?;
        }
    }
    if let Some(watch) = watch.as_mut()
        && question.status == QuestionStatus::Pending
    {
        let deadline = tokio::time::Instant::now() + max_wait;
        tokio::select! {
            _ = tokio::time::timeout_at(deadline, watch.next_event()) => {}
            () = app.shutdown.cancelled() => {}
        }
        if let Some(row) = store.question(caller.workspace_id(), asked_id).await? {
            question = row.to_question(&caller.principal.workspace)?;
        }
    }
    if let Some((decision, reason)) = outcome(&question).filter(|_| wait || question.status != QuestionStatus::Pending)
    {
        response.decision = decision;
        if reason.is_some() {
            response.reason = reason;
        }
    }
    response.question = Some(question);
    Ok(())
}

/// The approval question a rule asks, completed with the caller's wishes wherever the rule's `ask` is silent.
fn with_wishes(
    mut question: NewQuestion,
    call: &ToolCall<'_>,
    verdict: &Verdict,
    wishes: &DecideQuestion,
) -> NewQuestion {
    let ask = &verdict.ask;
    if let Some(title) = &wishes.title {
        question.title = title.clone();
    }
    if let Some(body) = wishes.body.as_deref().filter(|body| !body.trim().is_empty()) {
        question.body = format!("{body}\n\n{}", question.body);
    }
    // The caller's context may say where the call comes from (`source`); which rule asked is the server's to say.
    if let Some(Value::Object(theirs)) = &wishes.context {
        let mut merged = match question.context.take() {
            Some(Value::Object(ours)) => ours,
            _ => serde_json::Map::new(),
        };
        let rule = merged.remove("rule");
        merged.extend(theirs.clone());
        merged.insert("rule".into(), rule.unwrap_or(Value::Null));
        question.context = Some(Value::Object(merged));
    }
    if question.project.is_none() {
        question.project = wishes.project.clone();
    }
    question.urgency = ask.urgency.or(wishes.urgency);
    question.timeout_seconds = ask.timeout_seconds.or(wishes.timeout_seconds);
    question.assignee = ask.assignee.clone().or_else(|| wishes.assignee.clone());
    question.required_approvals = ask.required_approvals.or(wishes.required_approvals);
    question.eligible = ask.eligible.clone().or_else(|| wishes.eligible.clone());
    question.callback_url = wishes.callback_url.clone();
    // A rule that asks wants a person to decide: only a call no rule named may fall back to the caller's default.
    if verdict.rule.is_none() {
        question.default_response = wishes.default_response.clone();
    }
    // Several people cannot each edit what they all allow; arguments that are no object cannot be edited.
    let several = question.required_approvals.unwrap_or(1) > 1;
    question.allow_edit =
        ask.allow_edit.or(wishes.allow_edit).unwrap_or(false) && !several && call.arguments.is_object();
    question
}

/// What a decided approval question means for its call: `allow`, or `deny` with why; `None` while pending.
pub fn outcome(question: &Question) -> Option<(RuleDecision, Option<String>)> {
    let response: Option<&AnswerBody> = question.response.as_ref();
    match (question.status, response) {
        (QuestionStatus::Pending, _) => None,
        (QuestionStatus::Answered | QuestionStatus::Defaulted, Some(r)) if r.value == Value::Bool(true) => {
            Some((RuleDecision::Allow, None))
        }
        (QuestionStatus::Answered | QuestionStatus::Defaulted, Some(r)) => {
            let by = question.answered_by.clone().unwrap_or_else(|| "the default".into());
            Some((
                RuleDecision::Deny,
                Some(match &r.comment {
                    Some(comment) => format!("Rejected by {by}: {comment}"),
                    None => format!("Rejected by {by}."),
                }),
            ))
        }
        (QuestionStatus::Expired, _) => {
            Some((RuleDecision::Deny, Some("Nobody decided before the approval's deadline.".into())))
        }
        _ => Some((RuleDecision::Deny, Some("The approval was cancelled.".into()))),
    }
}

/// The audit entry of a decision through `POST /decide`.
fn decided_entry(caller: &Caller, call: &ToolCall<'_>, verdict: &Verdict, response: &DecideResponse) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id: caller.workspace_id(),
        actor: AuditActor::from(caller),
        action: actions::RULES_DECIDED.into(),
        subject_type: "tool_call".into(),
        subject_id: response.question.as_ref().map(|q| q.id.to_string()),
        before: None,
        after: Some(json!({
            "tool": call.tool,
            "arguments": call.arguments,
            "agent": call.agent,
            "run_id": call.run.as_ref().map(|run| run.id),
            "rules_decided": verdict.decision,
            "decision": response.decision,
            "rule": verdict.rule,
            "matched": verdict.matched,
            "question_id": response.question.as_ref().map(|q| q.id),
            "grant_id": response.grant_id,
        })),
        diff: None,
        created_at: crate::store::now(),
    }
}
