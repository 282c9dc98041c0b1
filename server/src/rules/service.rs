//! The use cases of `/rules` and `/decide`: reading, checking and saving a workspace's document, and deciding a
//! call for an agent that asks before it acts (asking a person when the rules say `ask`).

use app::types::{
    AnswerBody, DecideQuestion, DecideRequest, DecideResponse, NewQuestion, Question, QuestionStatus, RuleDecision,
    RulesCheck, RulesDocument, StoredRules,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{Rules, RunRef, ToolCall, Verdict, approval_question, engine, stored_view};
use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::questions::TimeoutBounds;
use crate::state::App;
use crate::store::{AuditActor, IdempotencyKey, NewAuditEntry, RulesRow, Store, StoreError};
use crate::validation::FieldErrors;

/// How many times a save is tried again when another save of the same workspace came between its read and its
/// write.
const SAVE_ATTEMPTS: usize = 5;

/// Reads a document from JSON, naming the field of each fault: an unknown or misspelt key, a decision or mode
/// that is none of the allowed words, a value of the wrong type.
pub fn parse_document(value: &Value) -> Result<RulesDocument, AppError> {
    let mut errors = FieldErrors::default();
    let Some(object) = value.as_object() else {
        return Err(AppError::invalid_field("body", "must be a JSON object {\"rules\": [...], \"default\": ...}"));
    };
    for key in object.keys().filter(|key| !["rules", "default"].contains(&key.as_str())) {
        errors.add(key.clone(), "is not a field of a rules document (rules, default)");
    }
    if let Some(default) = object.get("default")
        && serde_json::from_value::<RuleDecision>(default.clone()).is_err()
    {
        errors.add("default", "must be allow, ask or deny");
    }
    match object.get("rules") {
        None | Some(Value::Null) => {}
        Some(Value::Array(rules)) => {
            for (i, rule) in rules.iter().enumerate() {
                rule_shape(rule, i, &mut errors);
            }
        }
        Some(_) => errors.add("rules", "must be a list of rules"),
    }
    errors.into_result("the rules document")?;
    serde_json::from_value(value.clone())
        .map_err(|err| AppError::Invalid { message: format!("the rules document is not valid: {err}"), details: None })
}

/// The faults of rule `i`'s shape, each under its field.
fn rule_shape(rule: &Value, i: usize, errors: &mut FieldErrors) {
    const FIELDS: [&str; 8] = ["name", "tools", "agents", "when", "decision", "reason", "ask", "mode"];
    let at = |field: &str| format!("rules[{i}].{field}");
    let Some(fields) = rule.as_object() else {
        return errors.add(format!("rules[{i}]"), "must be an object");
    };
    for key in fields.keys().filter(|key| !FIELDS.contains(&key.as_str())) {
        errors.add(at(key), format!("is not a field of a rule ({})", FIELDS.join(", ")));
    }
    for required in ["name", "tools", "decision"] {
        if !fields.contains_key(required) {
            errors.add(at(required), "is required");
        }
    }
    let fits = |field: &str, check: fn(Value) -> bool| fields.get(field).is_none_or(|v| check(v.clone()));
    if !fits("name", |v| v.is_string()) {
        errors.add(at("name"), "must be a string");
    }
    for list in ["tools", "agents"] {
        if !fits(list, |v| serde_json::from_value::<Vec<String>>(v).is_ok()) {
            errors.add(at(list), "must be a list of glob strings");
        }
    }
    for text in ["when", "reason"] {
        if !fits(text, |v| v.is_string() || v.is_null()) {
            errors.add(at(text), "must be a string");
        }
    }
    if !fits("decision", |v| serde_json::from_value::<RuleDecision>(v).is_ok()) {
        errors.add(at("decision"), "must be allow, ask or deny");
    }
    if !fits("mode", |v| serde_json::from_value::<app::types::RuleMode>(v).is_ok()) {
        errors.add(at("mode"), "must be enforce or dry_run");
    }
    if let Some(ask) = fields.get("ask")
        && let Err(err) = serde_json::from_value::<app::types::RuleAsk>(ask.clone())
    {
        errors.add(at("ask"), err.to_string());
    }
}

/// Checks a document whole: the engine's checks, and each rule's `ask` settings as the approval question they
/// would ask (its timeout within the server's bounds, its assignee a member who may approve, its quorum). Every
/// fault is named with its field; the compiled document on success.
pub async fn check(
    store: &dyn Store,
    bounds: TimeoutBounds,
    workspace_id: Uuid,
    document: &RulesDocument,
) -> Result<engine::CompiledRules, AppError> {
    let compiled = engine::compile(document, 0);
    let mut errors = FieldErrors::default();
    let sample = json!({});
    for (i, rule) in document.rules.iter().enumerate() {
        let Some(ask) = &rule.ask else { continue };
        let call = ToolCall { tool: "tool", arguments: &sample, agent: None, run: None };
        let verdict = Verdict {
            decision: RuleDecision::Ask,
            rule: Some(rule.name.clone()),
            reason: rule.reason.clone(),
            ask: ask.clone(),
            matched: Vec::new(),
        };
        let question = approval_question(&call, &verdict, None);
        let problem = match crate::questions::build_question(question, workspace_id, None, bounds, crate::store::now())
        {
            Ok(row) => crate::questions::check_assignee(store, &row).await.err(),
            Err(err) => Some(err),
        };
        if let Some(AppError::Invalid { message, details }) = problem {
            match details.as_ref().and_then(|d| d.get("fields")).and_then(Value::as_object) {
                Some(fields) => {
                    for (field, message) in fields {
                        errors.add(format!("rules[{i}].ask.{field}"), message.as_str().unwrap_or_default());
                    }
                }
                None => errors.add(format!("rules[{i}].ask"), message),
            }
        } else if let Some(other) = problem {
            return Err(other);
        }
    }
    match compiled {
        Ok(compiled) => errors.into_result("the rules document").map(|()| compiled),
        Err(mut faults) => {
            faults.merge(errors);
            Err(faults
                .into_result("the rules document")
                .err()
                .unwrap_or_else(|| AppError::invalid_field("rules", "does not compile")))
        }
    }
}

/// `GET /rules`: the workspace's document as stored (version 0 and no rules before the first save).
pub async fn get(store: &dyn Store, caller: &Caller) -> Result<StoredRules, AppError> {
    Ok(stored_view(store.rules_document(caller.workspace_id()).await?))
}

/// `POST /rules/check`: whether a document would be saved, without saving it.
pub async fn check_only(app: &App, caller: &Caller, body: &Value) -> Result<RulesCheck, AppError> {
    let document = parse_document(body)?;
    check(app.store.as_ref(), app.config.timeout_bounds(), caller.workspace_id(), &document).await?;
    Ok(RulesCheck { valid: true, rules: document.rules.len() })
}

/// `PUT /rules` (admins): replaces the workspace's document, its version one more than the one replaced, audited
/// (`rules.updated`, with the documents before and after and the change). A document with any fault is refused
/// whole (422 naming each field) and nothing is stored.
pub async fn save(app: &App, caller: &Caller, body: &Value) -> Result<StoredRules, AppError> {
    caller.require_admin("change the approval rules")?;
    let document = parse_document(body)?;
    let store = app.store.as_ref();
    let workspace_id = caller.workspace_id();
    check(store, app.config.timeout_bounds(), workspace_id, &document).await?;
    for _ in 0..SAVE_ATTEMPTS {
        let previous = store.rules_document(workspace_id).await?;
        let previous_version = previous.as_ref().map_or(0, |row| row.version);
        let before = serde_json::to_value(previous.as_ref().map(|row| &row.document.0)).map_err(AppError::internal)?;
        let now = crate::store::now();
        let row = RulesRow {
            workspace_id,
            version: previous_version + 1,
            document: sqlx::types::Json(document.clone()),
            updated_at: now,
            updated_by: caller.principal.name.clone(),
        };
        let after = serde_json::to_value(&document).map_err(AppError::internal)?;
        let audit = NewAuditEntry {
            workspace_id,
            actor: AuditActor::from(caller),
            action: actions::RULES_UPDATED.into(),
            subject_type: "rules".into(),
            subject_id: Some(row.version.to_string()),
            diff: Some(Value::Array(crate::audit::json_diff(&before, &after))),
            before: Some(json!({ "version": previous_version, "document": before })),
            after: Some(json!({ "version": row.version, "document": after })),
            created_at: now,
        };
        if store.save_rules(&row, previous_version, &audit).await? {
            return Ok(stored_view(Some(row)));
        }
    }
    Err(AppError::Conflict { message: "the rules were being saved by someone else; try again".into(), details: None })
}

/// `POST /rules/test`: what the stored rules decide about a call, without asking, auditing or counting.
pub async fn test(
    rules: &Rules<'_>,
    caller: &Caller,
    request: &app::types::RuleTestRequest,
) -> Result<Verdict, AppError> {
    check_call(&request.tool, &request.arguments)?;
    let call =
        ToolCall { tool: &request.tool, arguments: &request.arguments, agent: request.agent.as_deref(), run: None };
    rules.test(caller.workspace_id(), &call).await
}

fn check_call(tool: &str, arguments: &Value) -> Result<(), AppError> {
    let mut errors = FieldErrors::default();
    if tool.trim().is_empty() || tool.chars().count() > 200 {
        errors.add("tool", "must have 1..=200 characters");
    }
    if !arguments.is_object() {
        errors.add("arguments", "must be a JSON object");
    }
    errors.into_result("the call")
}

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
