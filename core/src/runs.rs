//! Agents and runs as the API sees them: validating definitions, starting, reading, resuming and cancelling
//! runs. The execution itself is in [`crate::runtime`].

use std::collections::HashSet;

use holdpoint_types::{
    AgentSpec, AnswerBody, NewRun, QuestionKind, QuestionStatus, Resolution, ResumeRequest, Role, Run, ToolCallStatus,
};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::runtime::Runtime;
use crate::runtime::model::script_path;
use crate::runtime::queued::new_run_row;
use crate::runtime::tools::BUILT_IN;
use crate::store::{
    IdempotencyKey, QuestionResolution, QuestionRow, ResumeOutcome, RunRow, Store, StoreError, ToolCallFilter,
};
use crate::validation::{FieldErrors, PROJECT_MAX_CHARS};

pub const AGENT_NAME_MAX_CHARS: usize = 100;
pub const SYSTEM_PROMPT_MAX_BYTES: usize = 64 * 1024;
pub const INPUT_MAX_BYTES: usize = 64 * 1024;
pub const PROMPT_MAX_CHARS: usize = 10_000;
/// The largest step budget a segment may have.
pub const MAX_STEPS_LIMIT: u32 = 500;

/// Checks an agent definition; returns it with its name trimmed.
pub fn validate_agent(mut spec: AgentSpec, runtime: &Runtime) -> Result<AgentSpec, AppError> {
    let mut errors = FieldErrors::default();
    spec.name = spec.name.trim().to_owned();
    let name_chars = spec.name.chars().count();
    if name_chars == 0 || name_chars > AGENT_NAME_MAX_CHARS {
        errors.add("name", format!("must have 1..={AGENT_NAME_MAX_CHARS} characters"));
    }
    if spec.system_prompt.len() > SYSTEM_PROMPT_MAX_BYTES {
        errors.add("system_prompt", format!("must be at most {SYSTEM_PROMPT_MAX_BYTES} bytes"));
    }
    match spec.model.split_once(':') {
        Some(("openai", model)) if !model.trim().is_empty() => {}
        Some(("script", file)) if !file.trim().is_empty() => match script_path(&runtime.scripts_dir, file) {
            Err(err) => errors.add("model", err.to_string()),
            Ok(path) if !path.is_file() => errors.add(
                "model",
                format!("the script {file:?} is not in the scripts directory {}", runtime.scripts_dir.display()),
            ),
            Ok(_) => {}
        },
        _ => errors.add("model", "must be openai:<model> or script:<file>"),
    }
    let mut seen = HashSet::new();
    for (i, tool) in spec.tools.iter().enumerate() {
        if !BUILT_IN.contains(&tool.as_str()) {
            errors.add(format!("tools[{i}]"), format!("{tool:?} is not a tool; tools: {}", BUILT_IN.join(", ")));
        } else if !seen.insert(tool.as_str()) {
            errors.add(format!("tools[{i}]"), format!("{tool:?} is listed twice"));
        }
    }
    for tool in spec.approval_policy.tools.keys() {
        if !BUILT_IN.contains(&tool.as_str()) {
            errors.add(format!("approval_policy.tools.{tool}"), "is not a tool");
        }
    }
    if let Some(steps) = spec.max_steps
        && !(1..=MAX_STEPS_LIMIT).contains(&steps)
    {
        errors.add("max_steps", format!("must be within 1..={MAX_STEPS_LIMIT}"));
    }
    if let Err(refused) = crate::runtime::model::resolve_endpoint(&spec.model_settings, &runtime.config) {
        errors.add(refused.field, refused.reason);
    }
    errors.into_result("the agent")?;
    Ok(spec)
}

/// The wire form of a run, with its segments and pending questions.
pub async fn to_wire(store: &dyn Store, row: &RunRow, workspace: &str) -> Result<Run, AppError> {
    let segments = store.segments(row.id).await?.iter().map(|s| s.to_segment()).collect::<Result<_, _>>()?;
    let pending = store.pending_question_ids(row.workspace_id, row.id).await?;
    Ok(row.to_run(workspace, segments, pending)?)
}

/// Loads a run of the caller's workspace; an `agent` token sees only the runs it created.
pub async fn load_run(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<RunRow, AppError> {
    let row = store.run(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("run"))?;
    if !caller.visibility().sees(row.created_by) {
        return Err(AppError::NotFound("run"));
    }
    Ok(row)
}

/// Refuses (422) a new question that names a run the caller may not act for: a run of another workspace, or for an
/// `agent` token a run it did not start. A run's question can supersede the run's blocking question and resume the
/// run with its answer, so naming a run is acting for it.
pub async fn check_run_of_new_question(store: &dyn Store, caller: &Caller, row: &QuestionRow) -> Result<(), AppError> {
    let Some(run_id) = row.run_id else {
        return Ok(());
    };
    match load_run(store, caller, run_id).await {
        Ok(_) => Ok(()),
        Err(AppError::NotFound(_)) => Err(AppError::invalid_field("run_id", "is not a run you may act for")),
        Err(other) => Err(other),
    }
}

/// `POST /runs`: validates and queues a run. Returns the run and whether this call created it.
pub async fn create_run(
    store: &dyn Store,
    runtime: &Runtime,
    caller: &Caller,
    input: NewRun,
    idempotency: Option<&IdempotencyKey>,
) -> Result<(Run, bool), AppError> {
    caller.require_ask()?;
    let mut errors = FieldErrors::default();
    if input.input.trim().is_empty() {
        errors.add("input", "must not be empty");
    }
    if input.input.len() > INPUT_MAX_BYTES {
        return Err(AppError::TooLarge(format!("input is larger than {INPUT_MAX_BYTES} bytes")));
    }
    if let Some(project) = &input.project
        && (project.trim().is_empty() || project.chars().count() > PROJECT_MAX_CHARS)
    {
        errors.add("project", format!("must have 1..={PROJECT_MAX_CHARS} characters"));
    }
    if let Some(steps) = input.max_steps
        && !(1..=MAX_STEPS_LIMIT).contains(&steps)
    {
        errors.add("max_steps", format!("must be within 1..={MAX_STEPS_LIMIT}"));
    }
    let executor = input.executor;
    let pause_on_input = input.pause_on_input;
    let (agent_id, spec) = match (input.agent_id, input.agent) {
        (Some(id), None) => {
            let agent = store.agent(caller.workspace_id(), id).await?;
            match agent {
                Some(agent) => (Some(agent.id), agent.spec.0),
                None => {
                    errors.add("agent_id", "no such agent in this workspace");
                    (None, AgentSpec::default())
                }
            }
        }
        (None, Some(spec)) => {
            if caller.role() != Role::Admin {
                return Err(AppError::Forbidden("only an admin may run an inline agent definition".into()));
            }
            match validate_agent(spec, runtime) {
                Ok(spec) => (None, spec),
                Err(AppError::Invalid { details: Some(details), .. }) => {
                    if let Some(fields) = details["fields"].as_object() {
                        for (field, message) in fields {
                            errors.add(format!("agent.{field}"), message.as_str().unwrap_or_default());
                        }
                    }
                    (None, AgentSpec::default())
                }
                Err(other) => return Err(other),
            }
        }
        _ => {
            errors.add("agent_id", "give exactly one of agent_id and agent");
            (None, AgentSpec::default())
        }
    };
    let parent = match input.parent_run_id {
        Some(id) => match load_run(store, caller, id).await {
            Ok(parent) => Some(parent),
            Err(AppError::NotFound(_)) => {
                errors.add("parent_run_id", "no such run in this workspace");
                None
            }
            Err(other) => return Err(other),
        },
        None => None,
    };
    errors.into_result("the run")?;
    let project =
        input.project.map(|p| p.trim().to_owned()).or_else(|| parent.as_ref().and_then(|p| p.project.clone()));
    let new = new_run_row(
        caller.workspace_id(),
        agent_id,
        spec,
        input.input,
        project,
        parent.as_ref(),
        input.max_steps,
        runtime.config.max_total_steps,
        Some(caller.principal.id),
        crate::store::now(),
    );
    let mut new = new;
    new.run.pause_on_input = pause_on_input;
    if executor == Some(holdpoint_types::RunExecutor::Client) {
        new.run.executor = holdpoint_types::RunExecutor::Client;
    }
    let created = store.create_run(&new.run, &new.segment, idempotency).await.map_err(|err| match err {
        StoreError::IdempotencyMismatch { resource_id } => {
            AppError::Conflict { message: err.to_string(), details: Some(serde_json::json!({ "run_id": resource_id })) }
        }
        other => other.into(),
    })?;
    let run = to_wire(store, &created.value, &caller.principal.workspace).await?;
    Ok((run, created.created))
}

/// `POST /runs/{id}/resume`: applies the decisions (undecided approvals are rejected), cancels unanswered
/// questions, keeps the prompt for the next segment, and queues the run. With `separation_of_duties`, a call whose
/// approval the caller requested (see [`crate::questions::requester`]) is not theirs to approve (403).
pub async fn resume_run(
    store: &dyn Store,
    caller: &Caller,
    id: Uuid,
    request: ResumeRequest,
    separation_of_duties: bool,
) -> Result<Run, AppError> {
    if !caller.role().may_answer() {
        return Err(AppError::Forbidden(format!("{} may not resume runs", caller.role().with_article())));
    }
    if request.prompt.as_ref().is_some_and(|p| p.chars().count() > PROMPT_MAX_CHARS) {
        return Err(AppError::invalid_field("prompt", format!("must have at most {PROMPT_MAX_CHARS} characters")));
    }
    let run = load_run(store, caller, id).await?;
    let filter = ToolCallFilter { status: Some(ToolCallStatus::PendingApproval), limit: 1000, ..Default::default() };
    let pending_calls = store.tool_calls(run.id, &filter).await?;
    // Deciding tool calls (and undecided ones are rejected) is answering approvals: approvers and admins only.
    if !pending_calls.is_empty() && !caller.role().may_answer_kind(QuestionKind::Approval) {
        return Err(AppError::Forbidden(format!(
            "{} may not decide tool calls pending approval; an approver or an admin may",
            caller.role().with_article()
        )));
    }
    let mut errors = FieldErrors::default();
    let mut decisions = Vec::new();
    for (i, decision) in request.tool_decisions.iter().enumerate() {
        let call = pending_calls
            .iter()
            .find(|c| c.id.to_string() == decision.tool_call_id || c.call_id == decision.tool_call_id);
        match call {
            None => errors
                .add(format!("tool_decisions[{i}].tool_call_id"), "is not a tool call of this run pending approval"),
            Some(call) => {
                if decisions.iter().any(|(c, _): &(&crate::store::ToolCallRow, _)| c.id == call.id) {
                    errors.add(format!("tool_decisions[{i}].tool_call_id"), "is decided twice");
                }
                decisions.push((call, decision));
            }
        }
    }
    std::mem::take(&mut errors).into_result("the resume request")?;
    let now = crate::store::now();
    // A decision is an answer to the call's approval question, under the checks every answer passes (the question's
    // assignee, who is eligible, separation of duties, a claim someone else holds, the answer's shape); and an
    // approval that needs several people is theirs to give, each in turn, not one resume's.
    let mut answers = Vec::new();
    for (i, (call, decision)) in decisions.iter().enumerate() {
        let answer = AnswerBody {
            value: serde_json::Value::Bool(decision.approved),
            comment: decision.comment.clone(),
            edited_arguments: decision.edited_arguments.clone().filter(|_| decision.approved),
        };
        let Some(question_id) = call.question_id else { continue };
        let Some(row) = store.question(run.workspace_id, question_id).await? else { continue };
        let question = row.to_question(&caller.principal.workspace)?;
        crate::questions::require_right_to_give(store, caller, &row, &question, &answer, separation_of_duties).await?;
        crate::questions::claims::require_claim(caller, &row, now)?;
        let shape = crate::questions::AnswerShape::from(&question);
        crate::questions::check_answer(&shape, &answer, &format!("tool_decisions[{i}]"), &mut errors);
        if decision.approved && row.required_approvals > 1 {
            errors.add(
                format!("tool_decisions[{i}].approved"),
                format!(
                    "this call needs {} approvals: each approver approves it where it is asked (the approval \
                     queue, the question's page), and the run goes on once they have",
                    row.required_approvals
                ),
            );
        }
        answers.push((call.id, answer));
    }
    errors.into_result("the resume request")?;
    // What the resume leaves undecided it ends: each such question needs the caller's right to end it.
    for call in pending_calls.iter().filter(|call| !answers.iter().any(|(id, _)| *id == call.id)) {
        let Some(question_id) = call.question_id else { continue };
        if let Some(row) = store.question(run.workspace_id, question_id).await? {
            crate::questions::require_right_to_end(caller, &row, now)?;
        }
    }
    for question_id in store.pending_question_ids(run.workspace_id, run.id).await? {
        match store.question(run.workspace_id, question_id).await? {
            Some(row) if row.kind != QuestionKind::NonBlocking => {
                crate::questions::require_right_to_end(caller, &row, now)?;
            }
            _ => {}
        }
    }
    let accepted = match store.prepare_resume(run.workspace_id, run.id, request.prompt.as_deref(), now).await? {
        ResumeOutcome::Accepted(run) => run,
        ResumeOutcome::NotFound => return Err(AppError::NotFound("run")),
        ResumeOutcome::NotResumable(run) => {
            return Err(AppError::Conflict {
                message: format!("only paused or waiting runs can be resumed; this run is {}", run.status),
                details: Some(serde_json::json!({ "status": run.status })),
            });
        }
        ResumeOutcome::CapReached(run) => {
            return Err(AppError::Invalid {
                message: format!(
                    "the run has reached the cap of {} steps in all and cannot be resumed",
                    run.max_total_steps
                ),
                details: Some(
                    serde_json::json!({ "step_count": run.step_count, "max_total_steps": run.max_total_steps }),
                ),
            });
        }
    };
    // Settle what the run waits on; the last resolution queues it (in the store, atomically).
    for call in &pending_calls {
        let Some(question_id) = call.question_id else { continue };
        let decided = answers.iter().find(|(id, _)| *id == call.id).map(|(_, answer)| answer.clone());
        let response = decided.unwrap_or_else(|| AnswerBody {
            value: serde_json::Value::Bool(false),
            comment: Some("left undecided when the run was resumed".into()),
            edited_arguments: None,
        });
        let Some(question) = store.question(run.workspace_id, question_id).await? else { continue };
        let change = QuestionResolution {
            status: QuestionStatus::Answered,
            response: Some(response),
            answered_by: Some(caller.principal.name.clone()),
            resolution: Some(Resolution::Human),
            at: now,
            actor: caller.into(),
        };
        crate::questions::resolve(store, &question, &change, &caller.principal.workspace).await?;
    }
    for question_id in store.pending_question_ids(run.workspace_id, run.id).await? {
        let Some(question) = store.question(run.workspace_id, question_id).await? else { continue };
        if question.kind == QuestionKind::NonBlocking {
            continue;
        }
        let reason = Some("the run was resumed without an answer".into());
        let change = QuestionResolution::cancelled(reason, Some(caller.principal.name.clone()), now, caller.into());
        crate::questions::resolve(store, &question, &change, &caller.principal.workspace).await?;
    }
    let current = store.run(run.workspace_id, accepted.id).await?.unwrap_or(accepted);
    to_wire(store, &current, &caller.principal.workspace).await
}

/// `POST /runs/{id}/cancel`: 409 if the run had already finished.
pub async fn cancel_run(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<Run, AppError> {
    caller.require_ask()?;
    let run = load_run(store, caller, id).await?;
    match store
        .cancel_run(run.workspace_id, run.id, crate::store::now(), &caller.into(), &crate::audit::RunCascades)
        .await?
    {
        None => Err(AppError::NotFound("run")),
        Some((run, true)) => to_wire(store, &run, &caller.principal.workspace).await,
        Some((run, false)) => Err(AppError::Conflict {
            message: format!("the run is already {}", run.status),
            details: Some(serde_json::json!({ "status": run.status })),
        }),
    }
}
