//! `/mcp`: the Model Context Protocol over streamable HTTP, so any MCP client can ask a person through
//! Holdpoint: `ask_user`, `request_approval` (shaped for Claude Code's `--permission-prompt-tool`), `get_question`
//! and `resume_task`.
//!
//! Requests authenticate like the REST API (a bearer token); a layer in front of the MCP service ([`sessions`])
//! resolves the caller, holds each session to whoever opened it, and hands the caller to the tools through the
//! request's extensions. A tool call that asks a person waits until the question is resolved (answered,
//! defaulted, expired or cancelled), woken by the question's own event, sending progress notifications meanwhile so
//! that clients whose request timeouts reset on progress keep waiting. A client that cancels the call cancels the
//! question. Refusals and invalid questions are tool results with `isError`, carrying the API's error object.
//!
//! A client that declares MCP's tasks extension gets a task instead of a call held open ([`tasks`]); so does a client
//! that asks for one in MCP 2025-11-25's form ([`tasks_2025`]).

pub mod sessions;
pub mod tasks;
pub mod tasks_2025;

use std::sync::Arc;
use std::time::Duration;

use app::types::{
    AnswerBody, ApprovalAction, NewQuestion, Question, QuestionKind, QuestionStatus, ResumeRequest, RuleDecision,
    ToolDecision, UploadedFile,
};
use rmcp::ErrorData;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock, GetTaskParams, GetTaskResult, Implementation,
    ProgressNotificationParam, Resource, ResourceContents, ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::events::QuestionWatch;
pub use crate::questions::ask_user::*;
use crate::state::AppState;
use crate::store::QuestionRow;
pub use sessions::{SessionOwners, authenticate};
use tasks::{Done, Resumed, Tasks};

/// How often a waiting tool call re-reads its question, in case it missed the event (the hub lagged).
const RECHECK: Duration = Duration::from_secs(5);
/// The reason a question gets when the MCP client that asked it cancels the call.
const CANCELLED_BY_CLIENT: &str = "the MCP client cancelled the call that asked this question";

/// The MCP service, mounted at `/mcp` behind [`authenticate`] and [`tasks_2025::serve`], the book of its sessions
/// and that of its tasks.
pub fn service(
    state: AppState,
) -> (StreamableHttpService<HoldpointMcp, LocalSessionManager>, Arc<SessionOwners>, Arc<Tasks>) {
    let mut manager = LocalSessionManager::default();
    // Sessions idle out by Holdpoint's own rule (`sessions`), which knows when a call waits for a person; rmcp's
    // counts only messages, and would end a session in the middle of a long wait.
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let owners = SessionOwners::start(&state, Arc::clone(&manager));
    let config = StreamableHttpServerConfig::default()
        // Every request carries a bearer token, which a DNS-rebinding page cannot have; the Host check that
        // protects unauthenticated local servers would only break deployments behind a proxy.
        .disable_allowed_hosts()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(state.shutdown.child_token());
    let tasks = Tasks::new(tasks::Door::Mcp);
    let tools = HoldpointMcp { state, owners: Arc::clone(&owners), tasks: Arc::clone(&tasks) };
    let service = StreamableHttpService::new(move || Ok(tools.clone()), manager, config);
    (service, owners, tasks)
}

/// The tools of Holdpoint's MCP server.
#[derive(Clone)]
pub struct HoldpointMcp {
    state: AppState,
    owners: Arc<SessionOwners>,
    /// The tasks of the clients that declared MCP's tasks extension.
    tasks: Arc<Tasks>,
}

/// The arguments of `request_approval`; `tool_name` and `input` are Claude Code's permission-prompt contract.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ApprovalArgs {
    /// The tool the agent wants to call.
    pub tool_name: String,
    /// The arguments it wants to call it with.
    #[serde(default)]
    pub input: Value,
    /// The caller's id of the call, kept with the question.
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// A title for the person; `Allow <tool_name>?` by default.
    #[serde(default)]
    pub title: Option<String>,
    /// Why the agent wants it, in Markdown.
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub timeout_seconds: Option<i64>,
    /// How many distinct people must allow the call (1..=10, default 1); the first denial denies it.
    #[serde(default)]
    pub required_approvals: Option<u8>,
    /// Who may decide it: `{"role": "approver"|"admin"}` or `{"users": [usernames]}`.
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub eligible: Option<app::types::Eligible>,
}

/// The arguments of `get_question`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GetQuestionArgs {
    /// The id `ask_user` returned.
    pub question_id: String,
}

/// The arguments of `resume_task`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ResumeArgs {
    /// The run to resume.
    pub run_id: String,
    /// A message for the agent's next segment.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Decisions on the run's calls pending approval: `[{"tool_call_id", "approved", "comment"?,
    /// "edited_arguments"?}]`; the undecided ones are rejected.
    #[serde(default)]
    pub tool_decisions: Vec<Value>,
}

/// Where a question stands, as `ask_user` and `get_question` report it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nobody has decided yet (a non-blocking question, or `get_question` before the answer).
    Pending,
    /// A person answered.
    Answered,
    /// The deadline passed and the question's default applied.
    Defaulted,
    /// The deadline passed with no default: nobody answered (never a person's "no").
    Expired,
    /// The question was withdrawn, superseded or its run ended.
    Cancelled,
}

/// A question's outcome: what an agent acts on.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct QuestionOutcome {
    pub question_id: String,
    pub outcome: Outcome,
    /// The answer's value (or the default's), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The arguments an approver edited, for approvals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_arguments: Option<Value>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// The deadline, RFC 3339, while the question is pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_at: Option<String>,
}

impl From<&Question> for QuestionOutcome {
    fn from(question: &Question) -> Self {
        let outcome = match question.status {
            QuestionStatus::Pending => Outcome::Pending,
            QuestionStatus::Answered => Outcome::Answered,
            QuestionStatus::Defaulted => Outcome::Defaulted,
            QuestionStatus::Expired => Outcome::Expired,
            QuestionStatus::Cancelled => Outcome::Cancelled,
        };
        let response = question.response.as_ref();
        QuestionOutcome {
            question_id: question.id.to_string(),
            outcome,
            value: response.map(|r| r.value.clone()).filter(|v| !v.is_null()),
            comment: response.and_then(|r| r.comment.clone()),
            edited_arguments: response.and_then(|r| r.edited_arguments.clone()),
            answered_by: question.answered_by.clone(),
            timeout_at: (question.status == QuestionStatus::Pending)
                .then(|| question.timeout_at.map(|at| at.to_rfc3339()))
                .flatten(),
        }
    }
}

/// A refusal or an invalid request as a tool result: `isError`, with the API's error object as its text, so that
/// the agent reads why and can correct itself.
pub(crate) fn refusal(err: AppError) -> CallToolResult {
    if let AppError::Internal(cause) = &err {
        tracing::error!(error = %cause, "internal error in an MCP tool");
    }
    let body = json!({ "error": err.detail() });
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

pub(crate) fn caller_of(parts: &http::request::Parts) -> Result<Caller, CallToolResult> {
    parts.extensions.get::<Caller>().cloned().ok_or_else(|| refusal(AppError::Unauthorized("not authenticated".into())))
}

fn session_of(parts: &http::request::Parts) -> Option<&str> {
    parts.headers.get(sessions::SESSION_HEADER).and_then(|v| v.to_str().ok())
}

type ToolResult<T> = Result<T, CallToolResult>;

impl HoldpointMcp {
    async fn ask_and_wait(
        &self,
        parts: &http::request::Parts,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
        input: NewQuestion,
    ) -> ToolResult<Question> {
        ask_and_wait(&self.state, &self.owners, parts, context, caller, input, AtShutdown::Outlives).await
    }

    /// For a client that declared MCP's tasks extension: asks the question and answers with a task that waits for
    /// it, whose result `result` makes from the resolved question. A non-blocking question needs no task: its
    /// result is the answer at once.
    async fn ask_as_task(
        &self,
        parts: &http::request::Parts,
        caller: &Caller,
        input: NewQuestion,
        result: impl FnOnce(&Question) -> CallToolResult + Send + 'static,
    ) -> ToolResult<CallToolResponse> {
        let asked = ask(&self.state, parts, caller, input).await?;
        if asked.row.kind == QuestionKind::NonBlocking {
            let question = asked.row.to_question(&caller.principal.workspace).map_err(|e| refusal(e.into()))?;
            return Ok(CallToolResponse::Complete(result(&question)));
        }
        let row = asked.row.clone();
        let (state, owner) = (self.state.clone(), caller.clone());
        let base_url = tasks::base_url(&self.state, parts);
        let task = self.tasks.start(&self.state, caller, &row, move |_stop| async move {
            let question = settle(&state, &owner, asked).await;
            with_files_done(&state, &owner, &base_url, &question, task_done(&question, result)).await
        });
        Ok(CallToolResponse::Task(task))
    }
}

/// A question asked, with the watch on it registered before it was recorded (the answer may come before the wait).
pub(crate) struct Asked {
    pub row: QuestionRow,
    watch: QuestionWatch,
}

/// Creates the question, as `POST /questions` would for the caller (its rate limits included).
pub(crate) async fn ask(
    state: &AppState,
    parts: &http::request::Parts,
    caller: &Caller,
    input: NewQuestion,
) -> ToolResult<Asked> {
    caller.require_ask().map_err(refusal)?;
    // Counted as `POST /questions` is: a question asked over MCP is no cheaper to store or to answer.
    crate::doors::http::limits::check_creation_in(parts).map_err(refusal)?;
    let asking = state.asking();
    let row = asking.prepare(input, caller.workspace_id(), Some(caller.principal.id)).await.map_err(refusal)?;
    // Watch first: the answer may come before we start waiting.
    let watch = state.hub.watch_question(row.id);
    asking.record(&row, &caller.principal.workspace, None).await.map_err(|e| refusal(e.into()))?;
    Ok(Asked { row, watch })
}

/// The question as it stands now.
async fn current(state: &AppState, caller: &Caller, row: &QuestionRow) -> ToolResult<Question> {
    let current = state
        .store
        .question(row.workspace_id, row.id)
        .await
        .map_err(|e| refusal(e.into()))?
        .ok_or_else(|| refusal(AppError::NotFound("question")))?;
    current.to_question(&caller.principal.workspace).map_err(|e| refusal(e.into()))
}

/// Waits until the question is no longer pending: a task's wait, which has no request to send progress to (the
/// task stops it by dropping it).
pub(crate) async fn settle(state: &AppState, caller: &Caller, asked: Asked) -> ToolResult<Question> {
    let Asked { row, mut watch } = asked;
    loop {
        let question = current(state, caller, &row).await?;
        if question.status != QuestionStatus::Pending {
            return Ok(question);
        }
        tokio::select! {
            _ = watch.next_event() => watch = state.hub.watch_question(row.id),
            () = tokio::time::sleep(RECHECK) => {}
        }
    }
}

/// What becomes of a question asked over MCP whose call still waits when the server stops.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtShutdown {
    /// It stays pending: `/mcp`'s agents read its outcome again after a restart.
    Outlives,
    /// It is cancelled: a gateway call, which no later start makes ([`crate::doors::gateway::waits`]).
    Cancelled,
}

/// Creates the question and, unless it is non-blocking, waits until it is no longer pending, sending progress
/// notifications to the calling client meanwhile; the client's cancellation of the call cancels the question.
/// `/mcp`'s tools and the gateway's calls (its approvals and elicitations) ask through here.
pub(crate) async fn ask_and_wait(
    state: &AppState,
    owners: &Arc<SessionOwners>,
    parts: &http::request::Parts,
    context: &RequestContext<RoleServer>,
    caller: &Caller,
    input: NewQuestion,
    at_shutdown: AtShutdown,
) -> ToolResult<Question> {
    let asked = ask(state, parts, caller, input).await?;
    wait_for(state, owners, parts, context, caller, asked, at_shutdown).await
}

/// The wait of [`ask_and_wait`], for a caller that needs the question's id whatever the wait's outcome.
pub(crate) async fn wait_for(
    state: &AppState,
    owners: &Arc<SessionOwners>,
    parts: &http::request::Parts,
    context: &RequestContext<RoleServer>,
    caller: &Caller,
    asked: Asked,
    at_shutdown: AtShutdown,
) -> ToolResult<Question> {
    let Asked { row, mut watch } = asked;
    if row.kind == QuestionKind::NonBlocking {
        return row.to_question(&caller.principal.workspace).map_err(|e| refusal(e.into()));
    }
    let _noted_for_shutdown = match at_shutdown {
        AtShutdown::Cancelled => Some(state.gateway_waits.wait_on(row.id, caller).await),
        AtShutdown::Outlives => None,
    };
    let _waiting = owners.waiting(session_of(parts));
    let progress_token = context.meta.get_progress_token();
    let progress_every = Duration::from_secs(state.config.mcp_progress_seconds.max(1));
    let mut next_progress = tokio::time::Instant::now() + progress_every;
    let mut progress = 0.0;
    loop {
        let question = current(state, caller, &row).await?;
        if question.status != QuestionStatus::Pending {
            return Ok(question);
        }
        let recheck = tokio::time::Instant::now() + RECHECK;
        tokio::select! {
            _ = watch.next_event() => {
                // A fired watch is used up: the next one is registered before the question is read again.
                watch = state.hub.watch_question(row.id);
            }
            () = tokio::time::sleep_until(recheck.min(next_progress)) => {}
            () = context.ct.cancelled() => {
                // A server that stops ends its calls too, but their questions outlive it: only a client's
                // cancellation (or the end of its session) withdraws the question.
                if !state.shutdown.is_cancelled() {
                    withdraw(state, caller, row.id).await;
                }
                return Err(refusal(AppError::Conflict {
                    message: "the call was cancelled; its question is cancelled".into(),
                    details: None,
                }));
            }
        }
        if let Some(token) = &progress_token
            && tokio::time::Instant::now() >= next_progress
        {
            progress += 1.0;
            let left = question.timeout_at.map(|at| (at - crate::store::now()).num_seconds().max(0));
            let message = match left {
                Some(seconds) => format!("waiting for a person: question {} is pending, {seconds} s left", row.id),
                None => format!("waiting for a person: question {} is pending", row.id),
            };
            let mut notice = ProgressNotificationParam::new(token.clone(), progress);
            notice.message = Some(message);
            // A client that cannot take the notice any more will cancel or close: nothing to do here.
            let _ = context.peer.notify_progress(notice).await;
            next_progress = tokio::time::Instant::now() + progress_every;
        }
    }
}

/// A task of `/mcp` taken up again from its stored question (the server restarted since it was created, see
/// [`tasks`]): `request_approval`'s when the question is an approval it asked, else `ask_user`'s. It ends as the
/// task's first work would have, with the result made by the same functions. A gateway's question is no task of
/// `/mcp`'s.
pub(crate) async fn resume(by: tasks::TaskRequest<'_>, row: QuestionRow) -> Option<Resumed> {
    let tasks::TaskRequest { state, caller, base_url } = by;
    if crate::doors::gateway::door::asked_by_gateway(&row) {
        return None;
    }
    let asked_by_request_approval = row.kind == QuestionKind::Approval && row.context.0["source"] == "mcp";
    let result: Box<dyn FnOnce(&Question) -> CallToolResult + Send> = match &row.action {
        Some(action) if asked_by_request_approval => {
            let arguments = action.0.arguments.clone();
            Box::new(move |question| approval_decision(question, arguments))
        }
        _ => Box::new(outcome_result),
    };
    let pending = row.status == QuestionStatus::Pending;
    let asked = Asked { watch: state.hub.watch_question(row.id), row };
    let (state, caller, base_url) = (state.clone(), caller.clone(), base_url.to_owned());
    let work = async move {
        let question = settle(&state, &caller, asked).await;
        with_files_done(&state, &caller, &base_url, &question, task_done(&question, result)).await
    };
    Some(if pending { Resumed::Wait(Box::pin(work)) } else { Resumed::Now(work.await) })
}

/// `ask_user`'s result: the outcome, as text and structured.
fn outcome_result(question: &Question) -> CallToolResult {
    CallToolResult::structured(serde_json::to_value(QuestionOutcome::from(question)).unwrap_or_default())
}

/// The media types a model takes as an image to look at, which a tool result hands on as image content.
const MODEL_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// `result` with the files the answer of `question` references added to its content, so that the agent that asked
/// has them without a request of its own: an image as an image (a model can look at it), text as text, anything
/// else as its bytes, each under its download URL (`GET /api/v1/files/{id}`, which the asking token may read). The
/// structured outcome names them all; a file whose bytes cannot be read is linked instead.
async fn with_answered_files(
    state: &AppState,
    caller: &Caller,
    base_url: &str,
    question: &Question,
    mut result: CallToolResult,
) -> CallToolResult {
    for file in question.answered_files() {
        let uri = format!("{}/api/v1/files/{}", base_url.trim_end_matches('/'), file.file_id);
        let block = match read_file(state, caller, &file).await {
            Ok(bytes) => embedded_file(&file, uri, &bytes),
            Err(err) => {
                tracing::warn!(error = %err, file = %file.file_id, "could not read an answered file for an MCP result");
                let link = Resource::new(uri, file.name.clone()).with_mime_type(file.media_type.clone());
                ContentBlock::resource_link(link.with_size(file.size))
            }
        };
        result.content.push(block);
    }
    result
}

/// A task's end (see [`task_done`]) with the files its question's answer references (see [`with_answered_files`]).
pub(crate) async fn with_files_done(
    state: &AppState,
    caller: &Caller,
    base_url: &str,
    question: &ToolResult<Question>,
    done: Done,
) -> Done {
    match (question, done) {
        (Ok(question), Done::Finished(Ok(result))) => {
            Done::Finished(Ok(with_answered_files(state, caller, base_url, question, result).await))
        }
        (_, done) => done,
    }
}

async fn read_file(state: &AppState, caller: &Caller, file: &UploadedFile) -> object_store::Result<Vec<u8>> {
    use futures::TryStreamExt;
    let chunks: Vec<_> = state.files.read(caller.workspace_id(), file.file_id).await?.try_collect().await?;
    Ok(chunks.concat())
}

/// One answered file as tool result content (see [`with_answered_files`]).
fn embedded_file(file: &UploadedFile, uri: String, bytes: &[u8]) -> ContentBlock {
    use base64::Engine;
    let base64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let media_type = file.media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if MODEL_IMAGE_TYPES.contains(&media_type.as_str()) {
        return ContentBlock::image(base64(bytes), media_type);
    }
    let contents = if is_text(&media_type)
        && let Ok(text) = std::str::from_utf8(bytes)
    {
        ResourceContents::text(text, uri)
    } else {
        ResourceContents::blob(base64(bytes), uri)
    };
    ContentBlock::resource(contents.with_mime_type(media_type))
}

/// Whether a media type is text a model reads as it is.
fn is_text(media_type: &str) -> bool {
    media_type.starts_with("text/")
        || media_type.ends_with("+json")
        || media_type.ends_with("+xml")
        || ["application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml"]
            .contains(&media_type)
}

/// How a task that waited for `question` ends: cancelled with it, else with the call's result.
pub(crate) fn task_done(question: &ToolResult<Question>, result: impl FnOnce(&Question) -> CallToolResult) -> Done {
    match question {
        Ok(question) if question.status == QuestionStatus::Cancelled => {
            Done::Cancelled(format!("Question {} was cancelled; the call was not completed.", question.id))
        }
        Ok(question) => Done::Finished(Ok(result(question))),
        Err(refused) => Done::Finished(Ok(refused.clone())),
    }
}

/// `request_approval`'s answer, in Claude Code's permission-prompt format, from the resolved question.
fn approval_decision(question: &Question, arguments: Value) -> CallToolResult {
    let response: Option<&AnswerBody> = question.response.as_ref();
    let decision = match (question.status, response) {
        (QuestionStatus::Answered | QuestionStatus::Defaulted, Some(r)) if r.value == Value::Bool(true) => {
            json!({ "behavior": "allow", "updatedInput": r.edited_arguments.clone().unwrap_or(arguments) })
        }
        (QuestionStatus::Answered | QuestionStatus::Defaulted, Some(r)) => {
            let by = question.answered_by.clone().unwrap_or_else(|| "the default".into());
            let message = match &r.comment {
                Some(comment) => format!("Rejected by {by}: {comment}"),
                None => format!("Rejected by {by}."),
            };
            json!({ "behavior": "deny", "message": message })
        }
        (QuestionStatus::Expired, _) => {
            json!({ "behavior": "deny", "message": "Nobody decided before the approval's deadline." })
        }
        _ => json!({ "behavior": "deny", "message": "The approval was cancelled." }),
    };
    // The permission-prompt contract is the text; no output schema, as its two shapes are not one object.
    CallToolResult::success(vec![ContentBlock::text(decision.to_string())])
}

/// Cancels a question whose asking call was cancelled; a question resolved meanwhile stays as it is.
async fn withdraw(state: &AppState, caller: &Caller, id: Uuid) {
    let store = state.store.as_ref();
    let reason = Some(CANCELLED_BY_CLIENT.to_owned());
    match crate::questions::cancel_question(store, &state.metrics, caller, id, reason, crate::store::now()).await {
        Ok(_) | Err(AppError::Conflict { .. }) => {}
        Err(err) => tracing::warn!(error = %err, question = %id, "could not cancel a cancelled call's question"),
    }
}

#[tool_router]
impl HoldpointMcp {
    #[tool(description = "Ask a person a question and wait for the answer. Returns the question's outcome: \
        answered (with value and comment), defaulted (the deadline passed and its default applied), expired (nobody \
        answered: never a person's no) or cancelled. Use kind non_blocking for a preference: it returns at once \
        with outcome pending; read the answer later with get_question. A file a person answers with (response_type \
        file, or a form's file field) comes in the result's content too: an image as an image, text as text, \
        anything else as its bytes.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<QuestionOutcome>())]
    async fn ask_user(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<AskUserArgs>,
    ) -> ToolResult<CallToolResponse> {
        let caller = caller_of(&parts)?;
        let input: NewQuestion = args
            .into_new_question()
            .map_err(|e| refusal(AppError::BadRequest(format!("the question is not valid: {e}"))))?;
        if tasks::wanted(&context) {
            return self.ask_as_task(&parts, &caller, input, outcome_result).await;
        }
        let question = self.ask_and_wait(&parts, &context, &caller, input).await?;
        let base_url = tasks::base_url(&self.state, &parts);
        let result = with_answered_files(&self.state, &caller, &base_url, &question, outcome_result(&question)).await;
        Ok(CallToolResponse::Complete(result))
    }

    #[tool(description = "Ask a person to approve a tool call and wait for the decision. Answers in Claude Code's \
        permission-prompt format: {\"behavior\": \"allow\", \"updatedInput\": {...}} or {\"behavior\": \"deny\", \
        \"message\": \"...\"}. The person may edit the input before allowing it.")]
    async fn request_approval(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<ApprovalArgs>,
    ) -> ToolResult<CallToolResponse> {
        let caller = caller_of(&parts)?;
        let arguments = if args.input.is_null() { json!({}) } else { args.input.clone() };
        let body = args.body.clone().unwrap_or_else(|| {
            format!(
                "An agent wants to call `{}` with:\n\n```json\n{}\n```\n",
                args.tool_name,
                serde_json::to_string_pretty(&arguments).unwrap_or_default()
            )
        });
        let mut question_context = json!({ "source": "mcp" });
        if let Some(id) = &args.tool_use_id {
            question_context["tool_use_id"] = Value::String(id.clone());
        }
        // The workspace's approval rules first: a deny refuses at once, an allow lets the call through unasked,
        // an ask is asked as the rule says (its settings over the caller's: the rule is the admins').
        let rule_call = crate::rules::ToolCall {
            tool: &args.tool_name,
            arguments: &arguments,
            agent: Some(&caller.principal.name),
            run: None,
        };
        let verdict = self.state.rules().decide(caller.workspace_id(), &rule_call).await.map_err(refusal)?;
        match verdict.decision {
            RuleDecision::Deny => {
                let message = match (&verdict.rule, &verdict.reason) {
                    (Some(rule), Some(reason)) => format!("Denied by rule {rule}: {reason}"),
                    (Some(rule), None) => format!("Denied by rule {rule}."),
                    (None, _) => "Denied by the workspace's approval rules.".to_owned(),
                };
                let decision = json!({ "behavior": "deny", "message": message });
                return Ok(CallToolResult::success(vec![ContentBlock::text(decision.to_string())]).into());
            }
            RuleDecision::Allow => {
                let decision = json!({ "behavior": "allow", "updatedInput": arguments });
                return Ok(CallToolResult::success(vec![ContentBlock::text(decision.to_string())]).into());
            }
            RuleDecision::Ask => {}
        }
        let ask = verdict.ask;
        let required_approvals = ask.required_approvals.or(args.required_approvals);
        let eligible = ask.eligible.or_else(|| args.eligible.clone());
        let body = match (&verdict.rule, &verdict.reason) {
            (Some(rule), Some(reason)) => format!("{body}\nRule `{rule}`: {reason}\n"),
            _ => body,
        };
        // A grant made earlier (for this token, or the workspace) lets the call through without asking — unless
        // the call needs several approvals or names who may give it: one person's grant does not stand for them.
        let grantable = required_approvals.unwrap_or(1) <= 1 && eligible.is_none();
        let call = crate::grants::Call {
            workspace_id: caller.workspace_id(),
            tool_name: &args.tool_name,
            arguments: &arguments,
            run_id: None,
            agent: Some(crate::grants::token_agent(caller.principal.id)),
        };
        let record = json!({ "source": "mcp", "tool_use_id": args.tool_use_id });
        if grantable
            && crate::grants::let_through(self.state.store.as_ref(), &call, record)
                .await
                .map_err(|e| refusal(e.into()))?
                .is_some()
        {
            let decision = json!({ "behavior": "allow", "updatedInput": arguments });
            return Ok(CallToolResult::success(vec![ContentBlock::text(decision.to_string())]).into());
        }
        let input = NewQuestion {
            kind: Some(QuestionKind::Approval),
            title: args.title.clone().unwrap_or_else(|| format!("Allow {}?", args.tool_name)),
            body,
            action: Some(ApprovalAction { tool_name: args.tool_name.clone(), arguments: arguments.clone() }),
            // Several people cannot each edit what they all allow.
            allow_edit: arguments.is_object() && required_approvals.unwrap_or(1) <= 1 && ask.allow_edit != Some(false),
            context: Some(question_context),
            project: args.project.clone(),
            timeout_seconds: ask.timeout_seconds.or(args.timeout_seconds),
            urgency: ask.urgency,
            assignee: ask.assignee,
            required_approvals,
            eligible,
            ..Default::default()
        };
        if tasks::wanted(&context) {
            return self
                .ask_as_task(&parts, &caller, input, move |question| approval_decision(question, arguments))
                .await;
        }
        let question = self.ask_and_wait(&parts, &context, &caller, input).await?;
        Ok(CallToolResponse::Complete(approval_decision(&question, arguments)))
    }

    #[tool(description = "Read a question's current outcome (pending, answered, defaulted, expired or cancelled): \
        how an agent learns the answer to a non_blocking question it asked earlier. Files an answer carries come \
        with it, as ask_user's do.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<QuestionOutcome>())]
    async fn get_question(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<GetQuestionArgs>,
    ) -> ToolResult<CallToolResult> {
        let caller = caller_of(&parts)?;
        let missing = || refusal(AppError::NotFound("question"));
        let id = Uuid::parse_str(&args.question_id).map_err(|_| missing())?;
        let row = self.state.store.question(caller.workspace_id(), id).await.map_err(|e| refusal(e.into()))?;
        let row = row.filter(|row| caller.visibility().sees(row.created_by)).ok_or_else(missing)?;
        let question = row.to_question(&caller.principal.workspace).map_err(|e| refusal(e.into()))?;
        let base_url = tasks::base_url(&self.state, &parts);
        Ok(with_answered_files(&self.state, &caller, &base_url, &question, outcome_result(&question)).await)
    }

    #[tool(description = "Resume a Holdpoint run that is paused or waiting, optionally with a prompt and decisions \
        on its calls pending approval (undecided ones are rejected). Returns the run.")]
    async fn resume_task(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<ResumeArgs>,
    ) -> ToolResult<CallToolResult> {
        let caller = caller_of(&parts)?;
        let run_id = Uuid::parse_str(&args.run_id)
            .map_err(|_| refusal(AppError::invalid_field("run_id", format!("{:?} is not a run id", args.run_id))))?;
        let tool_decisions: Vec<ToolDecision> = args
            .tool_decisions
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<_, _>>()
            .map_err(|e| refusal(AppError::invalid_field("tool_decisions", e.to_string())))?;
        let request = ResumeRequest { prompt: args.prompt, tool_decisions };
        let run = crate::runs::resume_run(
            self.state.store.as_ref(),
            &caller,
            run_id,
            request,
            self.state.config.separation_of_duties,
        )
        .await
        .map_err(refusal)?;
        Ok(CallToolResult::success(vec![ContentBlock::text(serde_json::to_value(run).unwrap_or_default().to_string())]))
    }
}

#[tool_handler]
impl ServerHandler for HoldpointMcp {
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks.get_for(&self.state, &context, &request.task_id).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (caller, base_url) = tasks::caller_of(&self.state, &context)?;
        let by = tasks::TaskRequest { state: &self.state, caller: &caller, base_url: &base_url };
        self.tasks.update(by, &request.task_id).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (caller, base_url) = tasks::caller_of(&self.state, &context)?;
        let by = tasks::TaskRequest { state: &self.state, caller: &caller, base_url: &base_url };
        self.tasks.cancel(by, &request.task_id).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("holdpoint", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Holdpoint lets you stop and ask a person. ask_user waits for an answer; request_approval waits for \
                 an allow/deny decision on a tool call; get_question reads a question's outcome later; resume_task \
                 continues a paused Holdpoint run.",
            )
    }
}
