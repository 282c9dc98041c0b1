//! `POST /api/v1/agents/{name}/ag-ui`: Holdpoint's own agents over AG-UI 1.0's HTTP transport.
//!
//! The request is AG-UI's `RunAgentInput`; the answer streams the run as AG-UI events over Server-Sent Events
//! (`data: {json}` frames): `RUN_STARTED`, then for each model turn a step (`STEP_STARTED` … `STEP_FINISHED`) with
//! its text (`TEXT_MESSAGE_START`/`CONTENT`/`END`) and tool calls (`TOOL_CALL_START`/`ARGS`/`END`), each tool's
//! `TOOL_CALL_RESULT`, and `RUN_FINISHED` — a success with the final answer as `result`, or an interrupt outcome
//! while the run waits for people: each pending question of the run is an interrupt whose id is the question's id,
//! and a run waiting for its sub-agents is interrupted by their pending questions.
//! A failed run ends with `RUN_ERROR`.
//!
//! A thread is one Holdpoint run: the first request on a thread starts a run of the agent, keyed to the agent and
//! the thread id (an idempotency key of its own scope, so the mapping lives in the database and every instance
//! finds it). The next request on the thread carries `resume` entries, which answer or cancel those questions as
//! the caller may (the same rights as `POST /questions/{id}/answer` and `/cancel`), and streams the run on from
//! where it stopped. The run is executed by the server's workers, never by the request: a client that hangs up
//! loses the stream, not the run.
//!
//! Everything that can be refused is refused before the stream starts, with the one JSON error shape.

use std::convert::Infallible;
use std::time::Duration;

use app::types::{
    AnswerBody, FieldRules, FormField, NewRun, Question, QuestionKind, QuestionOption, QuestionStatus, ResponseType,
    ResumeRequest, RunStatus,
};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::runs::PROMPT_MAX_CHARS;
use crate::state::AppState;
use crate::store::{IdempotencyKey, MessageRow, RunRow, ToolCallFilter};
use crate::validation::{COMMENT_MAX_CHARS, FieldErrors};

mod interrupts;
mod resume;
mod stream;
#[cfg(test)]
mod tests;

use interrupts::*;
use resume::*;
use stream::*;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(run_agent))
}

/// The idempotency scope a thread's run is keyed under, with the key `<agent id>:<thread id>`.
const THREAD_SCOPE: &str = "ag_ui_thread";
/// The longest thread id taken.
const THREAD_ID_MAX_CHARS: usize = 200;
/// How often the stream looks at the run when no event told it of a change.
const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How often an idle stream sends a comment, so that proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The key of the `metadata` under which events and interrupts carry Holdpoint's own ids.
const METADATA_KEY: &str = "holdpoint";
/// The name of the `CUSTOM` event that tells which resume entries named questions resolved elsewhere first.
const ALREADY_RESOLVED: &str = "holdpoint.already_resolved";

/// AG-UI's `RunAgentInput`: what a client sends to run the agent on a thread.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation; the agent's run is keyed to it (1..=200 characters).
    thread_id: String,
    /// The client's id of this run, echoed in `RUN_STARTED` and `RUN_FINISHED`.
    run_id: String,
    /// Accepted and not used.
    #[serde(default)]
    #[allow(dead_code)]
    parent_run_id: Option<String>,
    /// The AG-UI version the client speaks (`1.0`).
    #[serde(default)]
    #[allow(dead_code)]
    protocol_version: Option<String>,
    /// Accepted and not used: Holdpoint's agents keep no AG-UI state.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    #[allow(dead_code)]
    state: Option<Value>,
    /// The thread's messages (AG-UI `Message` objects). A run that starts takes the last user message as its task,
    /// with the messages before it as the conversation so far.
    #[schema(value_type = Vec<Object>)]
    messages: Vec<Value>,
    /// The client's own tools: not offered to the model (the agent has its own, from its definition).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    #[allow(dead_code)]
    tools: Vec<Value>,
    /// `{description, value}` items, added to the task of a run that starts.
    #[serde(default)]
    context: Vec<ContextItem>,
    /// `{"holdpoint": {"project": "..."}}` files a run that starts under that project.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    forwarded_props: Option<Value>,
    /// The answers to the interrupts of the thread's previous run.
    #[serde(default)]
    resume: Option<Vec<ResumeEntry>>,
}

/// A piece of context given with a run.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ContextItem {
    description: String,
    value: String,
}

/// How an interrupt was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// AG-UI's `ResumeEntry`: the answer to one interrupt.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt's id: the question's id (or the run's id, for a paused run's interrupt).
    interrupt_id: String,
    status: ResumeStatus,
    /// A `tool_call` interrupt's `{approved, editedArgs?}`, a `confirmation`'s boolean, an `input_required`'s value
    /// (as its `responseSchema` describes it).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    payload: Option<Value>,
    /// `{"holdpoint": {"comment": "..."}}` is kept as the answer's comment (or the cancellation's reason).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// `POST /agents/{name}/ag-ui`: runs the agent on an AG-UI thread, or continues the thread's run with the answers
/// to its interrupts, and streams it as AG-UI events until it ends or waits for people.
#[utoipa::path(post, path = "/agents/{name}/ag-ui", tag = "agents",
    params(("name" = String, Path, description = "The agent's name")),
    request_body = RunAgentInput,
    responses(
        (status = 200, description = "AG-UI events as Server-Sent Events; each `data:` is one event's JSON",
            content_type = "text/event-stream", body = String),
        ErrorResponses,
    ))]
#[tracing::instrument(skip_all, fields(agent = %name))]
async fn run_agent(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(name): Path<String>,
    ApiJson(input): ApiJson<RunAgentInput>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    require_event_stream(&headers)?;
    caller.require_ask()?;
    let thread_id = input.thread_id.trim();
    let mut errors = FieldErrors::default();
    if thread_id.is_empty() || thread_id.chars().count() > THREAD_ID_MAX_CHARS {
        errors.add("threadId", format!("must have 1..={THREAD_ID_MAX_CHARS} characters"));
    }
    if input.run_id.trim().is_empty() {
        errors.add("runId", "must not be empty");
    }
    errors.into_result("the run input")?;
    // Counted with the caller's event streams, as long as the stream lives.
    let slot = state
        .hub
        .open_stream(caller.principal.id, state.config.streams_per_caller)
        .ok_or(AppError::RateLimited { limit: "streams_per_caller", retry_after_seconds: KEEP_ALIVE.as_secs() })?;
    let agent = state.store.agent_by_name(caller.workspace_id(), &name).await?.ok_or(AppError::NotFound("agent"))?;
    let key = thread_key(&caller, agent.id, thread_id);
    let existing = state.store.run_by_key(&key).await?;
    if let Some(run) = &existing
        && !caller.visibility().sees(run.created_by)
    {
        return Err(AppError::NotFound("thread"));
    }
    let mut already_resolved = Vec::new();
    let (run, after_seq) = match (existing, input.resume.as_deref()) {
        (None, Some(entries)) if !entries.is_empty() => {
            return Err(AppError::invalid_field("resume", "the thread has no run to resume"));
        }
        (None, _) => {
            let new = NewRun {
                agent_id: Some(agent.id),
                input: task_of(&input)?,
                project: project_of(&input)?,
                ..NewRun::default()
            };
            let (run, created) =
                crate::runs::create_run(state.store.as_ref(), &state.runtime, &caller, new, Some(&key)).await?;
            let row = state.store.run(caller.workspace_id(), run.id).await?.ok_or(AppError::NotFound("run"))?;
            if !created {
                return Err(thread_busy(&row));
            }
            (row, 0)
        }
        (Some(run), Some(entries)) if !entries.is_empty() => {
            let after = match interrupted_at(&state, run.id, entries).await? {
                Some(seq) => seq,
                None => last_seq(&state, run.id).await?,
            };
            already_resolved = settle_interrupts(&state, &caller, &run, entries).await?;
            (run, after)
        }
        (Some(run), _) if run.status == RunStatus::Paused => {
            // A new user message continues a paused run (its step budget was spent, or it asked something).
            let after = last_seq(&state, run.id).await?;
            let prompt = last_user_text(&input.messages);
            let request = ResumeRequest { prompt, tool_decisions: Vec::new() };
            crate::runs::resume_run(state.store.as_ref(), &caller, run.id, request, state.config.separation_of_duties)
                .await?;
            (run, after)
        }
        (Some(run), _) => return Err(thread_busy(&run)),
    };
    // The ids are echoed as the client sent them.
    let (thread_id, run_id) = (input.thread_id, input.run_id);
    let stream = run_events(
        state,
        slot,
        caller.principal.workspace.clone(),
        run,
        after_seq,
        thread_id,
        run_id,
        already_resolved,
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// Refuses (400) a request whose `Accept` admits no `text/event-stream`: the only encoding served. AG-UI's
/// protobuf encoding is not served; a client that accepts it beside Server-Sent Events (as `HttpAgent` may) gets
/// Server-Sent Events, which its `Content-Type` says.
fn require_event_stream(headers: &HeaderMap) -> ApiResult<()> {
    let Some(accept) = headers.get(axum::http::header::ACCEPT) else { return Ok(()) };
    let accept = accept.to_str().unwrap_or_default();
    let admits = accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let refused = parts.any(|p| p.trim().replace(' ', "").trim_start_matches("q=").parse::<f32>() == Ok(0.0));
        !refused && matches!(media.as_str(), "text/event-stream" | "text/*" | "*/*")
    });
    if accept.trim().is_empty() || admits {
        Ok(())
    } else {
        Err(AppError::BadRequest("this endpoint answers with text/event-stream; send Accept: text/event-stream".into()))
    }
}

/// The key of a thread's run: per workspace, agent and thread, whoever sends the request.
fn thread_key(caller: &Caller, agent_id: Uuid, thread_id: &str) -> IdempotencyKey {
    IdempotencyKey {
        workspace_id: caller.workspace_id(),
        scope: THREAD_SCOPE,
        key: format!("{agent_id}:{thread_id}"),
        request_hash: THREAD_SCOPE.as_bytes().to_vec(),
    }
}

/// 409 for a request without `resume` on a thread whose run is under way, waits for people, or has ended.
fn thread_busy(run: &RunRow) -> AppError {
    let message = match run.status {
        RunStatus::WaitingForInput | RunStatus::WaitingForApproval => {
            "the thread's run waits for its interrupts: send resume entries that answer them".to_owned()
        }
        RunStatus::WaitingForChildren => {
            "the thread's run waits for its sub-agents: send resume entries that answer their interrupts".to_owned()
        }
        status if status.is_terminal() => format!("the thread's run is {status}; start a new thread"),
        status => format!("the thread's run is {status}; wait until it finishes or waits"),
    };
    AppError::Conflict { message, details: Some(json!({ "run_id": run.id, "status": run.status })) }
}

/// The text of a message's `content`: a string, or the text parts of an array of parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|part| part["type"] == "text")
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn last_user_text(messages: &[Value]) -> Option<String> {
    messages.iter().rev().find(|m| m["role"] == "user").map(|m| text_of(&m["content"])).filter(|t| !t.trim().is_empty())
}

/// The task of a run that starts: the last user message, after the conversation before it and followed by the
/// context items. 422 without a user message that has text.
fn task_of(input: &RunAgentInput) -> ApiResult<String> {
    let mut errors = FieldErrors::default();
    for (i, message) in input.messages.iter().enumerate() {
        if !message["role"].is_string() {
            errors.add(format!("messages[{i}].role"), "must be a message role");
        }
    }
    errors.into_result("the run input")?;
    let last_user =
        input.messages.iter().rposition(|m| m["role"] == "user" && !text_of(&m["content"]).trim().is_empty());
    let Some(last_user) = last_user else {
        return Err(AppError::invalid_field("messages", "needs a user message with text to start the thread's run"));
    };
    let mut task = String::new();
    let earlier: Vec<String> = input.messages[..last_user]
        .iter()
        .filter(|m| matches!(m["role"].as_str(), Some("user" | "assistant" | "system" | "developer")))
        .map(|m| (m["role"].as_str().unwrap_or_default(), text_of(&m["content"])))
        .filter(|(_, text)| !text.trim().is_empty())
        .map(|(role, text)| format!("{role}: {text}"))
        .collect();
    if !earlier.is_empty() {
        task.push_str("The conversation so far:\n\n");
        task.push_str(&earlier.join("\n\n"));
        task.push_str("\n\n---\n\n");
    }
    task.push_str(&text_of(&input.messages[last_user]["content"]));
    if !input.context.is_empty() {
        task.push_str("\n\nContext:\n");
        for item in &input.context {
            task.push_str(&format!("- {}: {}\n", item.description, item.value));
        }
    }
    Ok(task)
}

/// `forwardedProps.holdpoint.project`, when given: a string.
fn project_of(input: &RunAgentInput) -> ApiResult<Option<String>> {
    match input.forwarded_props.as_ref().map(|props| &props[METADATA_KEY]["project"]) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(project)) => Ok(Some(project.clone())),
        Some(_) => Err(AppError::invalid_field("forwardedProps.holdpoint.project", "must be a string")),
    }
}

/// Where the stream that ended with these interrupts stopped: the seq of the assistant message whose tool calls
/// asked them (the earliest, if several). A question answered elsewhere before this request (the inbox, the CLI,
/// Slack) let the run go on past it, and the stream goes on from there, as it would have had the answer come through
/// this request. `None` when no tool call asked them (a paused run's interrupt).
async fn interrupted_at(state: &AppState, run_id: Uuid, entries: &[ResumeEntry]) -> ApiResult<Option<i32>> {
    let asked: std::collections::HashSet<Uuid> =
        entries.iter().filter_map(|entry| Uuid::parse_str(entry.interrupt_id.trim()).ok()).collect();
    let mut messages = std::collections::HashSet::new();
    let mut filter = ToolCallFilter { limit: 1000, ..ToolCallFilter::default() };
    loop {
        let page = state.store.tool_calls(run_id, &filter).await?;
        messages.extend(
            page.iter().filter(|call| call.question_id.is_some_and(|q| asked.contains(&q))).map(|call| call.message_id),
        );
        match page.last() {
            Some(last) if page.len() == 1000 => filter.after = Some(last.id),
            _ => break,
        }
    }
    if messages.is_empty() {
        return Ok(None);
    }
    let (mut after, mut found) = (0, None::<i32>);
    loop {
        let page = state.store.messages(run_id, after, 1000).await?;
        found = page.iter().filter(|m| messages.contains(&m.id)).map(|m| m.seq).chain(found).min();
        match page.last() {
            Some(last) if page.len() == 1000 => after = last.seq,
            _ => return Ok(found),
        }
    }
}

/// The seq of the run's last message (0 without any).
async fn last_seq(state: &AppState, run_id: Uuid) -> ApiResult<i32> {
    let mut last = 0;
    loop {
        let page = state.store.messages(run_id, last, 1000).await?;
        match page.last() {
            Some(message) => last = message.seq,
            None => return Ok(last),
        }
        if page.len() < 1000 {
            return Ok(last);
        }
    }
}
