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
use crate::store::{IdempotencyKey, MessageRow, RunRow};
use crate::validation::{COMMENT_MAX_CHARS, FieldErrors};

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
            let after = last_seq(&state, run.id).await?;
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

/// What a resume entry does, once checked.
enum Settle {
    Answer(Uuid, AnswerBody),
    Cancel(Uuid, Option<String>),
    ResumePaused(Option<String>),
    CancelRun,
}

/// `metadata.holdpoint.comment` of a resume entry.
fn comment_of(entry: &ResumeEntry, i: usize, errors: &mut FieldErrors) -> Option<String> {
    let comment = entry.metadata.as_ref().map(|m| &m[METADATA_KEY]["comment"]);
    match comment {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.chars().count() <= COMMENT_MAX_CHARS => Some(text.clone()),
        Some(_) => {
            errors.add(
                format!("resume[{i}].metadata.holdpoint.comment"),
                format!("must be a string of at most {COMMENT_MAX_CHARS} characters"),
            );
            None
        }
    }
}

/// Answers or cancels what the resume entries name, as the caller may: every entry is checked first (the thread's,
/// the caller's right, the payload's shape), and nothing changes if one is refused.
///
/// The first answer wins everywhere in Holdpoint: an entry naming a question already resolved elsewhere (answered
/// in Slack or the inbox, expired, cancelled), or resolved while this request applies the others, is skipped and
/// its resolution stands. Returns those entries, each with how its question was resolved, for the stream to tell.
async fn settle_interrupts(
    state: &AppState,
    caller: &Caller,
    run: &RunRow,
    entries: &[ResumeEntry],
) -> ApiResult<Vec<Value>> {
    let mut already_resolved = Vec::new();
    let mut errors = FieldErrors::default();
    let mut actions = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, entry) in entries.iter().enumerate() {
        let field = format!("resume[{i}].interruptId");
        let comment = comment_of(entry, i, &mut errors);
        let Ok(id) = Uuid::parse_str(entry.interrupt_id.trim()) else {
            errors.add(field, "is not an interrupt of this thread");
            continue;
        };
        if !seen.insert(id) {
            errors.add(field, "is answered twice");
            continue;
        }
        if id == run.id {
            if run.status != RunStatus::Paused {
                return Err(thread_busy(run));
            }
            match entry.status {
                ResumeStatus::Cancelled => actions.push(Settle::CancelRun),
                ResumeStatus::Resolved => {
                    let prompt = match entry.payload.as_ref().map(|p| &p["prompt"]) {
                        None | Some(Value::Null) => None,
                        Some(Value::String(p)) if p.chars().count() <= PROMPT_MAX_CHARS => Some(p.clone()),
                        Some(_) => {
                            errors.add(
                                format!("resume[{i}].payload.prompt"),
                                format!("must be a string of at most {PROMPT_MAX_CHARS} characters"),
                            );
                            None
                        }
                    };
                    actions.push(Settle::ResumePaused(prompt));
                }
            }
            continue;
        }
        let row = state.store.question(caller.workspace_id(), id).await?;
        // The run's own questions, or its sub-agents' (which hold it while it waits for them).
        let of_thread =
            |q: &crate::store::QuestionRow| q.run_id == Some(run.id) || q.parent_run_ids.0.contains(&run.id);
        let Some(row) = row.filter(|q| of_thread(q) && caller.visibility().sees(q.created_by)) else {
            errors.add(field, "is not an interrupt of this thread");
            continue;
        };
        if row.status != QuestionStatus::Pending {
            already_resolved.push(resolution_of(&entry.interrupt_id, &row.to_question(&caller.principal.workspace)?));
            continue;
        }
        let question = row.to_question(&caller.principal.workspace)?;
        match entry.status {
            ResumeStatus::Cancelled => {
                if row.created_by != Some(caller.principal.id) {
                    crate::questions::require_answer_right(caller, row.kind)?;
                }
                actions.push(Settle::Cancel(id, comment));
            }
            ResumeStatus::Resolved => {
                let Some(answer) = answer_of(&question, entry, comment, i, &mut errors) else { continue };
                let requester = match row.created_by {
                    Some(creator) if creator == caller.principal.id => {
                        crate::questions::requester(state.store.as_ref(), &row).await?
                    }
                    other => other,
                };
                crate::questions::require_right_to_give(
                    caller,
                    &question,
                    requester,
                    &answer,
                    state.config.separation_of_duties,
                )?;
                let mut problems = FieldErrors::default();
                crate::questions::check_answer(&(&question).into(), &answer, &format!("resume[{i}]"), &mut problems);
                errors.merge(problems);
                actions.push(Settle::Answer(id, answer));
            }
        }
    }
    errors.into_result("the resume entries")?;
    let now = crate::store::now();
    for action in actions {
        match action {
            Settle::Answer(id, answer) => {
                let answered = crate::questions::answer_question(&state.answering(), caller, id, answer, now).await;
                if let Some(resolved) = resolved_meanwhile(state, caller, id, answered.map(|_| ())).await? {
                    already_resolved.push(resolved);
                }
            }
            Settle::Cancel(id, reason) => {
                let reason = reason.or_else(|| Some("cancelled through AG-UI".to_owned()));
                let cancelled =
                    crate::questions::cancel_question(state.store.as_ref(), &state.metrics, caller, id, reason, now)
                        .await;
                if let Some(resolved) = resolved_meanwhile(state, caller, id, cancelled.map(|_| ())).await? {
                    already_resolved.push(resolved);
                }
            }
            Settle::ResumePaused(prompt) => {
                let request = ResumeRequest { prompt, tool_decisions: Vec::new() };
                let sod = state.config.separation_of_duties;
                crate::runs::resume_run(state.store.as_ref(), caller, run.id, request, sod).await?;
            }
            Settle::CancelRun => {
                crate::runs::cancel_run(state.store.as_ref(), caller, run.id).await?;
            }
        }
    }
    Ok(already_resolved)
}

/// How applying an entry to question `id` went: `None` if it applied; the question's resolution if someone else
/// resolved it between the check and the write (the conflict the first answer's win makes); any other error as it is.
async fn resolved_meanwhile(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    applied: Result<(), AppError>,
) -> ApiResult<Option<Value>> {
    match applied {
        Ok(()) => Ok(None),
        Err(err @ AppError::Conflict { .. }) => {
            let row = state.store.question(caller.workspace_id(), id).await?;
            match row.filter(|row| row.status != QuestionStatus::Pending) {
                Some(row) => Ok(Some(resolution_of(&id.to_string(), &row.to_question(&caller.principal.workspace)?))),
                None => Err(err),
            }
        }
        Err(err) => Err(err),
    }
}

/// A skipped resume entry, and how its question was resolved: its status, who answered, when, and the answer.
fn resolution_of(interrupt_id: &str, question: &Question) -> Value {
    json!({
        "interruptId": interrupt_id,
        "status": question.status,
        "answeredBy": question.answered_by,
        "resolvedAt": question.resolved_at,
        "response": question.response,
    })
}

/// The answer a resolved entry gives its question; `None` (with the fault in `errors`) if the payload does not fit
/// the interrupt's kind.
fn answer_of(
    question: &Question,
    entry: &ResumeEntry,
    comment: Option<String>,
    i: usize,
    errors: &mut FieldErrors,
) -> Option<AnswerBody> {
    let field = format!("resume[{i}].payload");
    let Some(payload) = entry.payload.clone().filter(|p| !p.is_null()) else {
        errors.add(field, "is required to resolve an interrupt");
        return None;
    };
    if is_approval(question) {
        let Some(approved) = payload["approved"].as_bool() else {
            errors.add(format!("{field}.approved"), "must be true or false");
            return None;
        };
        let edited = match &payload["editedArgs"] {
            Value::Null => None,
            Value::Object(_) if approved => Some(payload["editedArgs"].clone()),
            Value::Object(_) => None,
            _ => {
                errors.add(format!("{field}.editedArgs"), "must be an object of the call's arguments");
                return None;
            }
        };
        return Some(AnswerBody { value: Value::Bool(approved), comment, edited_arguments: edited });
    }
    let value = match (question.response_type, &payload) {
        // A confirmation's boolean, or an object with one boolean (what a schema of one property gives).
        (ResponseType::Boolean, Value::Object(entries)) if entries.len() == 1 => {
            entries.values().next().cloned().unwrap_or(Value::Null)
        }
        _ => payload,
    };
    Some(AnswerBody { value, comment, edited_arguments: None })
}

fn is_approval(question: &Question) -> bool {
    question.kind == QuestionKind::Approval || question.response_type == ResponseType::Approval
}

// The stream ------------------------------------------------------------------------------------------------------

fn event(data: Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(data.to_string()))
}

/// The run from its message after `after_seq` on, as AG-UI events, until it ends or waits for people. The resume
/// entries skipped because their questions were resolved elsewhere first come right after `RUN_STARTED`, as a
/// `CUSTOM` event named [`ALREADY_RESOLVED`] whose value is `{"entries": [...]}`.
#[expect(clippy::too_many_arguments, reason = "the stream's own parts, each passed once")]
fn run_events(
    state: AppState,
    slot: crate::events::StreamSlot,
    workspace: String,
    run: RunRow,
    after_seq: i32,
    thread_id: String,
    run_id: String,
    already_resolved: Vec<Value>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let holdpoint = json!({ METADATA_KEY: { "run_id": run.id } });
    async_stream::stream! {
        let _slot = slot;
        yield event(json!({
            "type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "metadata": holdpoint,
        }));
        if !already_resolved.is_empty() {
            yield event(json!({
                "type": "CUSTOM", "name": ALREADY_RESOLVED, "value": { "entries": already_resolved },
            }));
        }
        let (mut receiver, _) = state.hub.subscribe();
        let mut seen = after_seq;
        loop {
            // The status first: messages are stored before the run leaves `running`, so a run read as waiting or
            // ended has all its messages stored by the time they are read.
            let current = match state.store.run(run.workspace_id, run.id).await {
                Ok(Some(current)) => current,
                Ok(None) => {
                    yield event(json!({ "type": "RUN_ERROR", "message": "the run is gone", "code": "not_found" }));
                    return;
                }
                Err(err) => {
                    tracing::warn!(run = %run.id, error = %err, "the AG-UI stream could not read its run");
                    yield event(json!({ "type": "RUN_ERROR", "message": "internal error", "code": "internal" }));
                    return;
                }
            };
            let messages = match state.store.messages(run.id, seen, 1000).await {
                Ok(messages) => messages,
                Err(err) => {
                    tracing::warn!(run = %run.id, error = %err, "the AG-UI stream could not read the run's messages");
                    yield event(json!({ "type": "RUN_ERROR", "message": "internal error", "code": "internal" }));
                    return;
                }
            };
            let more = messages.len() == 1000;
            for message in &messages {
                seen = message.seq;
                for data in events_of(message) {
                    yield event(data);
                }
            }
            if more {
                continue;
            }
            let finished = |outcome: Value, result: Option<Value>| {
                let mut data = json!({ "type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id,
                    "outcome": outcome, "metadata": holdpoint });
                if let Some(result) = result {
                    data["result"] = result;
                }
                data
            };
            match current.status {
                RunStatus::Completed => {
                    let result = current.result.clone().map(Value::String);
                    yield event(finished(json!({ "type": "success" }), result));
                    return;
                }
                RunStatus::Cancelled => {
                    yield event(finished(json!({ "type": "cancelled" }), None));
                    return;
                }
                RunStatus::Failed => {
                    let message = current.error_message.clone().unwrap_or_else(|| "the run failed".to_owned());
                    yield event(json!({ "type": "RUN_ERROR", "message": message, "code": "run_failed",
                        "metadata": holdpoint }));
                    return;
                }
                RunStatus::Paused => {
                    yield event(finished(json!({ "type": "interrupt", "interrupts": [paused_interrupt(&current)] }), None));
                    return;
                }
                RunStatus::WaitingForInput | RunStatus::WaitingForApproval | RunStatus::WaitingForChildren => {
                    match interrupts(&state, &workspace, &current).await {
                        Ok(interrupts) if !interrupts.is_empty() => {
                            yield event(finished(json!({ "type": "interrupt", "interrupts": interrupts }), None));
                            return;
                        }
                        // Its last question was just resolved (the run is about to be queued again), or its
                        // sub-agents are at work and have asked nothing yet.
                        Ok(_) => {}
                        Err(err) => {
                            tracing::warn!(run = %run.id, error = %err, "the AG-UI stream could not read the run's questions");
                            yield event(json!({ "type": "RUN_ERROR", "message": "internal error", "code": "internal" }));
                            return;
                        }
                    }
                }
                RunStatus::Queued | RunStatus::Running => {}
            }
            // Until something of this run happens, or the poll interval passes (messages are not events).
            let wait = tokio::time::sleep(POLL_INTERVAL);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    received = receiver.recv() => match received {
                        Ok(event) if event.run_id != Some(run.id) => continue,
                        // The hub is gone (the server is stopping): only the poll interval wakes the stream.
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                            (&mut wait).await;
                            break;
                        }
                        _ => break,
                    },
                    () = &mut wait => break,
                    () = state.shutdown.cancelled() => {
                        yield event(json!({ "type": "RUN_ERROR", "code": "server_shutdown",
                            "message": "the server is shutting down; the run goes on, and its interrupts come with \
                                        the next request on the thread" }));
                        return;
                    }
                }
            }
        }
    }
}

/// The AG-UI events of one stored message: a model turn as a step with its text and tool calls, a tool's result.
/// The conversation's system and user messages are the client's own, and are not sent back.
fn events_of(message: &MessageRow) -> Vec<Value> {
    let content = &message.content.0;
    let id = message.id.to_string();
    match message.role.as_str() {
        "assistant" => {
            let step = format!("step {}", message.step);
            let mut events = vec![json!({ "type": "STEP_STARTED", "stepName": step })];
            let text = text_of(&content["content"]);
            if !text.is_empty() {
                events.push(json!({ "type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant" }));
                events.push(json!({ "type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text }));
                events.push(json!({ "type": "TEXT_MESSAGE_END", "messageId": id }));
            }
            for (n, call) in content["tool_calls"].as_array().into_iter().flatten().enumerate() {
                // The executor's own fallback, so that the id is the one its questions name.
                let call_id =
                    call["id"].as_str().map_or_else(|| format!("call_{}_{}", message.step, n + 1), str::to_owned);
                let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default();
                let arguments = match call.pointer("/function/arguments") {
                    Some(Value::String(arguments)) => arguments.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                events.push(json!({ "type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name,
                    "parentMessageId": id }));
                if !arguments.is_empty() {
                    events.push(json!({ "type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments }));
                }
                events.push(json!({ "type": "TOOL_CALL_END", "toolCallId": call_id }));
            }
            events.push(json!({ "type": "STEP_FINISHED", "stepName": step }));
            events
        }
        "tool" => {
            let result = match &content["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            vec![json!({ "type": "TOOL_CALL_RESULT", "messageId": id, "toolCallId": content["tool_call_id"],
                "content": result, "role": "tool" })]
        }
        _ => Vec::new(),
    }
}

/// The interrupts of a waiting run: one per pending question that holds it, oldest first. A run waiting for its
/// sub-agents is held by their questions (and their sub-agents'), so those are its interrupts.
async fn interrupts(state: &AppState, workspace: &str, run: &RunRow) -> Result<Vec<Value>, AppError> {
    let mut ids = state.store.pending_question_ids(run.workspace_id, run.id).await?;
    if run.status == RunStatus::WaitingForChildren {
        ids.extend(descendants_pending_question_ids(state, run).await?);
        // Question ids are UUIDv7: in id order is in the order they were asked.
        ids.sort_unstable();
    }
    let mut interrupts = Vec::new();
    for id in ids {
        let Some(row) = state.store.question(run.workspace_id, id).await? else { continue };
        if row.status != QuestionStatus::Pending || row.kind == QuestionKind::NonBlocking {
            continue;
        }
        interrupts.push(interrupt_of(&row.to_question(workspace)?));
    }
    Ok(interrupts)
}

/// The most sub-agent runs one stream looks through for questions: far above what a run can spawn and wait for.
const DESCENDANTS_MAX: usize = 500;

/// The pending questions of the runs below `run` that still wait: its sub-agents', theirs, and so on.
async fn descendants_pending_question_ids(state: &AppState, run: &RunRow) -> Result<Vec<Uuid>, AppError> {
    let mut ids = Vec::new();
    let mut parents = vec![run.id];
    let mut looked_at = 0;
    while let Some(parent) = parents.pop() {
        let filter = crate::store::RunFilter {
            parent_run_id: Some(parent),
            limit: DESCENDANTS_MAX as u32,
            ..Default::default()
        };
        for child in state.store.list_runs(run.workspace_id, &filter).await? {
            looked_at += 1;
            if looked_at > DESCENDANTS_MAX {
                return Ok(ids);
            }
            let waits = matches!(
                child.status,
                RunStatus::WaitingForInput | RunStatus::WaitingForApproval | RunStatus::WaitingForChildren
            );
            if waits {
                ids.extend(state.store.pending_question_ids(run.workspace_id, child.id).await?);
            }
            if child.status == RunStatus::WaitingForChildren {
                parents.push(child.id);
            }
        }
    }
    Ok(ids)
}

/// A paused run's one interrupt, whose id is the run's: resolving it resumes the run (`payload.prompt`, if given,
/// is the next user message), cancelling it cancels the run.
fn paused_interrupt(run: &RunRow) -> Value {
    let message = match &run.error_message {
        Some(reason) => format!("The run paused: {reason}. Resume it to go on."),
        None => "The run paused (its step budget is spent, or it asks something). Resume it to go on.".to_owned(),
    };
    json!({
        "id": run.id,
        "reason": "input_required",
        "message": message,
        "responseSchema": {
            "type": "object",
            "properties": { "prompt": { "type": "string", "maxLength": PROMPT_MAX_CHARS,
                "description": "The next user message, if any" } },
        },
        "metadata": { METADATA_KEY: { "run_id": run.id, "paused": true } },
    })
}

/// A pending question as an AG-UI interrupt: an approval is a `tool_call` of its call, a yes/no question a
/// `confirmation`, any other an `input_required` whose `responseSchema` describes the value to send.
fn interrupt_of(question: &Question) -> Value {
    let mut message = question.title.clone();
    if !question.body.trim().is_empty() {
        message.push_str("\n\n");
        message.push_str(&question.body);
    }
    let mut meta = json!({ "question_id": question.id, "run_id": question.run_id, "kind": question.kind,
        "response_type": question.response_type });
    let mut interrupt = json!({ "id": question.id, "message": message });
    if is_approval(question) {
        interrupt["reason"] = json!("tool_call");
        if let Some(call_id) = &question.tool_call_id {
            interrupt["toolCallId"] = json!(call_id);
        }
        let mut properties = json!({ "approved": { "type": "boolean" } });
        if question.allow_edit {
            properties["editedArgs"] = json!({ "type": "object" });
        }
        interrupt["responseSchema"] = json!({ "type": "object", "properties": properties, "required": ["approved"] });
        if let Some(action) = &question.action {
            meta["tool_name"] = json!(action.tool_name);
            meta["arguments"] = action.arguments.clone();
        }
    } else if question.response_type == ResponseType::Boolean {
        interrupt["reason"] = json!("confirmation");
    } else {
        interrupt["reason"] = json!("input_required");
        interrupt["responseSchema"] = question.response_schema.clone().unwrap_or_else(|| value_schema(question));
    }
    if let Some(deadline) = question.timeout_at {
        interrupt["expiresAt"] = json!(deadline.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    interrupt["metadata"] = json!({ METADATA_KEY: meta });
    interrupt
}

/// The JSON Schema of a question's value.
fn value_schema(question: &Question) -> Value {
    if question.response_type == ResponseType::Form {
        return form_schema(&question.fields);
    }
    let mut schema = type_schema(question.response_type, &question.options, &question.rules);
    if question.response_type == ResponseType::ErrorRecovery && question.options.is_empty() {
        schema = json!({ "type": "string", "enum": ["retry", "skip", "abort"] });
    }
    schema
}

fn form_schema(fields: &[FormField]) -> Value {
    let mut properties = serde_json::Map::new();
    for field in fields {
        let mut property = type_schema(field.response_type, &field.options, &field.rules);
        property["title"] = json!(field.label);
        if let Some(description) = &field.description {
            property["description"] = json!(description);
        }
        if let Some(default) = &field.default {
            property["default"] = default.clone();
        }
        properties.insert(field.key.clone(), property);
    }
    let required: Vec<&str> = fields.iter().filter(|f| f.required).map(|f| f.key.as_str()).collect();
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

fn choices(options: &[QuestionOption]) -> Value {
    options.iter().map(|o| json!({ "const": o.value, "title": o.label })).collect()
}

fn bounded(mut schema: Value, rules: &FieldRules) -> Value {
    if let Some(min) = &rules.min {
        schema["minimum"] = json!(min);
    }
    if let Some(max) = &rules.max {
        schema["maximum"] = json!(max);
    }
    schema
}

/// The JSON Schema of one value of `response_type`.
fn type_schema(response_type: ResponseType, options: &[QuestionOption], rules: &FieldRules) -> Value {
    match response_type {
        ResponseType::Boolean | ResponseType::Approval => json!({ "type": "boolean" }),
        ResponseType::Number => bounded(json!({ "type": "number" }), rules),
        ResponseType::Integer => bounded(json!({ "type": "integer" }), rules),
        ResponseType::Rating => json!({ "type": "integer", "minimum": 1, "maximum": rules.rating_max() }),
        ResponseType::Choice | ResponseType::ErrorRecovery => json!({ "type": "string", "oneOf": choices(options) }),
        ResponseType::MultiChoice => {
            let mut schema = json!({ "type": "array", "uniqueItems": true,
                "items": { "type": "string", "oneOf": choices(options) } });
            if let Some(min) = rules.min_items {
                schema["minItems"] = json!(min);
            }
            if let Some(max) = rules.max_items {
                schema["maxItems"] = json!(max);
            }
            schema
        }
        ResponseType::Date => json!({ "type": "string", "format": "date" }),
        ResponseType::Datetime => json!({ "type": "string", "format": "date-time" }),
        ResponseType::Time => json!({ "type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$" }),
        ResponseType::Email => json!({ "type": "string", "format": "email" }),
        ResponseType::Url => json!({ "type": "string", "format": "uri" }),
        ResponseType::Markdown => json!({ "type": "string", "maxLength": 10_000 }),
        ResponseType::Table => {
            let mut row = serde_json::Map::new();
            for column in &rules.columns {
                let mut property = type_schema(column.response_type, &column.options, &FieldRules::default());
                property["title"] = json!(column.label);
                row.insert(column.key.clone(), property);
            }
            let required: Vec<&str> = rules.columns.iter().filter(|c| c.required).map(|c| c.key.as_str()).collect();
            let mut schema = json!({ "type": "array",
                "items": { "type": "object", "properties": row, "required": required } });
            if let Some(min) = rules.min_rows {
                schema["minItems"] = json!(min);
            }
            if let Some(max) = rules.max_rows {
                schema["maxItems"] = json!(max);
            }
            schema
        }
        ResponseType::File => json!({ "type": "object", "required": ["file_id"],
            "properties": { "file_id": { "type": "string", "format": "uuid" } },
            "description": "An upload of POST /api/v1/files" }),
        ResponseType::Form => json!({ "type": "object" }),
        ResponseType::Text => json!({ "type": "string", "minLength": 1, "maxLength": 10_000 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(axum::http::header::ACCEPT, accept.parse().unwrap());
        headers
    }

    #[test]
    fn accept_headers_that_admit_an_event_stream_pass_and_others_are_refused() {
        assert!(require_event_stream(&HeaderMap::new()).is_ok());
        assert!(require_event_stream(&headers("text/event-stream")).is_ok());
        assert!(require_event_stream(&headers("application/vnd.ag-ui.event+proto, text/event-stream;q=0.5")).is_ok());
        assert!(require_event_stream(&headers("*/*")).is_ok());
        assert!(require_event_stream(&headers("application/json")).is_err());
        assert!(require_event_stream(&headers("text/event-stream;q=0")).is_err());
    }

    #[test]
    fn a_model_turn_is_a_step_with_its_text_and_each_tool_call() {
        let message = MessageRow {
            id: Uuid::now_v7(),
            run_id: Uuid::now_v7(),
            seq: 3,
            step: 1,
            role: "assistant".into(),
            content: sqlx::types::Json(json!({ "role": "assistant", "content": "I will deploy.",
                "tool_calls": [{ "id": "call_1", "type": "function",
                    "function": { "name": "http_request", "arguments": "{\"url\":\"x\"}" } }] })),
            created_at: crate::store::now(),
        };
        let types: Vec<String> = events_of(&message).iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect();
        assert_eq!(
            types,
            [
                "STEP_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "STEP_FINISHED"
            ]
        );
    }
}
