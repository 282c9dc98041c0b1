//! `POST /api/v1/runs/{id}/worker`: the worker protocol ([`crate::worker_api`]) for runs a client executes.

use app::types::{NewQuestion, RunExecutor};
use axum::extract::{Path, State};
use chrono::Duration;
use serde_json::Value;
use sqlx::types::Json;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::runs::load_run;
use crate::state::AppState;
use crate::store::{RunRow, StoreError, now};
use crate::worker_api::{MAX_LEASE_SECONDS, WorkerCall};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(worker_call))
}

/// What the OpenAPI document says of a worker operation's body: `op` is required and names one of the
/// operations of [`WorkerCall`]; the operation's own fields are the worker protocol's, not a public contract.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct WorkerCallFrame {
    op: WorkerOp,
}

/// The operations of [`WorkerCall`], by their wire names.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
enum WorkerOp {
    Claim,
    RenewLease,
    CurrentSegment,
    Messages,
    AppendMessages,
    ToolCalls,
    UpdateToolCall,
    TakeResumePrompt,
    Release,
    Question,
    PendingQuestions,
    CreateQuestion,
    AgentByName,
    LetThrough,
    RulesVerdict,
    CreateRun,
    PrepareResume,
    Runs,
    WorkspaceName,
}

fn lease(seconds: u32) -> Duration {
    Duration::seconds(i64::from(seconds.clamp(3, MAX_LEASE_SECONDS)))
}

fn reply(value: impl serde::Serialize) -> ApiResult<ApiJson<Value>> {
    Ok(ApiJson(serde_json::to_value(value).map_err(AppError::internal)?))
}

fn not_this_run(what: &str) -> AppError {
    AppError::invalid_field(what, "belongs to another run")
}

fn fenced(err: StoreError) -> AppError {
    match err {
        StoreError::LeaseLost => {
            AppError::Conflict { message: "this worker no longer holds the run".into(), details: None }
        }
        other => other.into(),
    }
}

/// `POST /runs/{id}/worker`: one operation of the worker protocol, for a run with `executor: client` that the
/// caller started. Writes are fenced on the caller's lease (409 once it is lost).
#[utoipa::path(post, path = "/runs/{id}/worker", tag = "runs", params(("id" = Uuid, Path, description = "The run's id")),
    request_body(content = WorkerCallFrame, description = "A worker operation: `op` names it, the other fields are its own"),
    responses((status = 200, description = "The operation's reply", body = Value), ErrorResponses))]
async fn worker_call(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<ApiJson<Value>> {
    caller.require_ask()?;
    let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound("run"))?;
    let store = state.store.as_ref();
    let run = load_run(store, &caller, id).await?;
    if run.executor != RunExecutor::Client {
        return Err(AppError::Conflict { message: "the server's workers execute this run".into(), details: None });
    }
    // A client-executed run runs where the credential that started it runs (its shell, its scripts, its model keys):
    // a person who decides its calls, or anyone else who may read it, does not take it over.
    if run.created_by != Some(caller.principal.id) {
        return Err(AppError::Forbidden(
            "only the token that started a run a client executes may execute it; it goes on when that token \
             resumes it (`holdpoint resume RUN`)"
                .into(),
        ));
    }
    // Read once the run is known to be the caller's: what a run's protocol accepts says nothing of other runs.
    let call: WorkerCall = serde_json::from_value(body)
        .map_err(|err| AppError::Invalid { message: format!("the body does not fit: {err}"), details: None })?;
    let workspace_id = run.workspace_id;
    let visibility = caller.visibility();
    // The server's own ledger decides what a client's writes record in the audit log, as for its own workers.
    let ledger = state.runtime.ledger.as_ref();
    match call {
        WorkerCall::Claim { owner, lease_seconds } => {
            reply(store.claim_run_by_id(run.id, owner, now() + lease(lease_seconds), now()).await?)
        }
        WorkerCall::RenewLease { owner, lease_seconds } => {
            reply(store.renew_lease(run.id, owner, now() + lease(lease_seconds)).await?)
        }
        WorkerCall::CurrentSegment { owner } => {
            reply(store.current_segment(run.id, owner, now()).await.map_err(fenced)?)
        }
        WorkerCall::Messages { after_seq, limit } => reply(store.messages(run.id, after_seq, limit.min(1000)).await?),
        WorkerCall::AppendMessages { owner, messages, tool_calls, step } => {
            if messages.iter().any(|m| m.run_id != run.id) {
                return Err(not_this_run("messages"));
            }
            if tool_calls.iter().any(|c| c.run_id != run.id) {
                return Err(not_this_run("tool_calls"));
            }
            reply(ledger.append_messages(&run, owner, &messages, &tool_calls, step).await.map_err(fenced)?)
        }
        WorkerCall::ToolCalls { filter } => reply(store.tool_calls(run.id, &filter).await?),
        WorkerCall::UpdateToolCall { owner, call } => {
            if call.run_id != run.id {
                return Err(not_this_run("call"));
            }
            reply(ledger.update_tool_call(&run, owner, &call).await.map_err(fenced)?)
        }
        WorkerCall::TakeResumePrompt { owner } => reply(store.take_resume_prompt(run.id, owner).await.map_err(fenced)?),
        WorkerCall::Release { owner, mut transition } => {
            transition.at = now();
            reply(ledger.release_run(run.id, owner, &transition).await.map_err(fenced)?)
        }
        // Only the run's own questions: a client executes one run, and sees no other agent's questions through it.
        WorkerCall::Question { id } => reply(
            store
                .question(workspace_id, id)
                .await?
                .filter(|question| question.run_id == Some(run.id) && visibility.sees(question.created_by)),
        ),
        // Only the run's own questions, as for `Question`.
        WorkerCall::PendingQuestions => {
            let mut ids = Vec::new();
            for id in store.pending_question_ids(workspace_id, run.id).await? {
                if store.question(workspace_id, id).await?.is_some_and(|q| visibility.sees(q.created_by)) {
                    ids.push(id);
                }
            }
            reply(ids)
        }
        WorkerCall::CreateQuestion { question, call } => {
            reply(create_question(&state, &caller, &run, question, call).await?)
        }
        WorkerCall::AgentByName { name } => reply(store.agent_by_name(workspace_id, &name).await?),
        WorkerCall::LetThrough { call } => {
            if call.run_id != run.id {
                return Err(not_this_run("call"));
            }
            // The call as stored: the client names which one, the server's copy says what it is.
            let stored = store.tool_call(run.id, call.id).await?.ok_or_else(|| not_this_run("call"))?;
            reply(ledger.let_through(&run, &stored).await?)
        }
        WorkerCall::RulesVerdict { tool, arguments, record } => {
            reply(ledger.rules_verdict(&run, &tool, &arguments, record).await?)
        }
        WorkerCall::CreateRun { run: child, segment, key } => {
            let Some(agent_id) = child.agent_id else {
                return Err(AppError::invalid_field("run.agent_id", "is required"));
            };
            let agent = store.agent(workspace_id, agent_id).await?.ok_or(AppError::NotFound("agent"))?;
            // Everything but the task and the ids comes from the server: a client cannot pick another workspace,
            // another parent or another agent definition.
            let new = crate::runtime::queued::new_run_row(
                workspace_id,
                Some(agent.id),
                agent.spec.0,
                child.input,
                run.project.clone(),
                Some(&run),
                None,
                state.runtime.config.max_total_steps,
                Some(caller.principal.id),
                now(),
            );
            let (mut row, mut first) = (new.run, new.segment);
            row.id = child.id;
            first.run_id = child.id;
            first.id = segment.id;
            // Scoped to the run: a client names its children's keys, and may not name another run's child.
            let key = key.map(|k| crate::store::IdempotencyKey {
                workspace_id,
                scope: "runs",
                key: format!("run:{}:{}", run.id, k.key),
                request_hash: k.request_hash,
            });
            reply(store.create_run(&row, &first, key.as_ref()).await?)
        }
        WorkerCall::PrepareResume { id, prompt } => {
            let child = store.run(workspace_id, id).await?.ok_or(AppError::NotFound("run"))?;
            if child.parent_run_id != Some(run.id) {
                return Err(AppError::invalid_field("id", "is not a child of this run"));
            }
            reply(store.prepare_resume(workspace_id, id, prompt.as_deref(), now()).await?)
        }
        WorkerCall::Runs { ids } => {
            // The run itself and its children: what its executor waits on and resumes.
            let runs: Vec<RunRow> = store
                .child_run_status(&ids)
                .await?
                .into_iter()
                .filter(|r| r.workspace_id == workspace_id && (r.id == run.id || r.parent_run_id == Some(run.id)))
                .filter(|r| visibility.sees(r.created_by))
                .collect();
            reply(runs)
        }
        WorkerCall::WorkspaceName => reply(store.workspace_name(workspace_id).await?),
    }
}

/// Asks a question for the client's run, validated as if it came through `POST /questions` (only its id, its
/// tool call and the run's lineage are taken from the client's row). Only whoever started the run asks its
/// questions (403 for anyone else): they are its requester, whom separation of duties bars from approving them.
async fn create_question(
    state: &AppState,
    caller: &Caller,
    run: &RunRow,
    row: crate::store::QuestionRow,
    call: Option<Uuid>,
) -> ApiResult<Uuid> {
    if run.created_by != Some(caller.principal.id) {
        return Err(AppError::Forbidden("only whoever started a run asks its questions".into()));
    }
    // Once per call of this run: the key is the server's, from a call it keeps.
    let key = match call {
        Some(call) if state.store.tool_call(run.id, call).await?.is_none() => return Err(not_this_run("call")),
        Some(call) => Some(crate::questions::tool_call_key(run.workspace_id, call)),
        None => None,
    };
    let timeout_seconds = row.timeout_at.map(|at| (at - row.created_at).num_seconds().max(1));
    // A question asked with a schema is checked again from its schema, which its fields were made from.
    let response_schema = row.response_schema.map(|s| s.0);
    let input = NewQuestion {
        kind: Some(row.kind),
        response_type: Some(row.response_type),
        title: row.title,
        body: row.body,
        options: row.options.0,
        fields: if response_schema.is_some() { Vec::new() } else { row.fields.0 },
        response_schema,
        rules: row.field_rules.map(|r| *r.0).unwrap_or_default(),
        action: row.action.map(|a| a.0),
        allow_edit: row.allow_edit,
        assignee: row.assignee.map(|a| a.0.into()),
        context: Some(row.context.0),
        project: run.project.clone(),
        run_id: Some(run.id),
        urgency: Some(row.urgency),
        timeout_seconds,
        default_response: row.default_response.map(|d| d.0),
        callback_url: None,
        required_approvals: u8::try_from(row.required_approvals).ok(),
        eligible: row.eligible.map(|e| e.0),
        unknown: Default::default(),
    };
    // Asked by whoever started the run: a client's run asks what its client decides to, tool calls included, so its
    // starter is the requester of every approval it asks for (`crate::questions::requester`).
    let asking = state.asking();
    let mut question = asking.prepare(input, run.workspace_id, run.created_by).await?;
    question.id = row.id;
    question.tool_call_id = row.tool_call_id;
    question.parent_run_ids = Json(run.parent_run_ids.0.clone());
    let workspace = state.store.workspace_name(run.workspace_id).await?;
    Ok(asking.record(&question, &workspace, key.as_ref()).await?.question.id)
}
