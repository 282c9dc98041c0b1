//! MCP's tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663, MCP 2026-07-28) for the calls that wait for a
//! person: `/mcp`'s `ask_user` and `request_approval`, and the gateway's calls that need an approval.
//!
//! A client that declares the extension (in `initialize`'s capabilities, or per request in `_meta`) gets a task
//! (`resultType: "task"`) at once instead of a call held open until someone answers; a client that does not gets
//! the call as before. rmcp brings the extension's types and its `tasks/*` dispatch; the tasks themselves are
//! Holdpoint's, as each is a view of the question it waits for:
//!
//! - A task's id is its question's id, so the task outlives the client's session: a client that reconnects (with
//!   the same credential) goes on polling it. A task belongs to the principal that asked: anyone else is told it
//!   does not exist.
//! - `tasks/get`: `input_required` while the question is pending, with its id, URL and status in `_meta`, and for
//!   a client that declared URL-mode elicitation the question as one (`inputRequests.question`: where a person
//!   answers it)
//!   (`holdpoint/question`); `working` once it is resolved and the call finishes (a gateway call reaches its
//!   upstream only now); then `completed` with the tool's result (a result with `isError` included, as the
//!   extension says), `failed` with a JSON-RPC error, or `cancelled` when the question was cancelled.
//! - `tasks/update`: acknowledged; the input a task waits for is a person's answer, given in Holdpoint.
//! - `tasks/cancel`: cancels the question, audited as the caller, and stops the call.
//!
//! The book of tasks is kept in memory, for the question's lifetime and an hour after. A server that restarted has
//! an empty book, but the questions are stored: a `tasks/*` request naming a task the book does not hold takes it
//! up again from its question ([`Door::resume`]), provided the question is in the caller's workspace and was asked
//! by the caller's principal, as the book's own check requires. `/mcp`'s tools answer as the waiting call would
//! have: pending, the task waits for the question again; resolved, it is completed with the tool's result, made by
//! the same code. A gateway call is not made after a restart (see [`crate::doors::gateway::door::resume`]); one
//! that another running instance holds, or ended and keeps the result of, is that instance's to tell: the request
//! is answered with an error saying so (a `tasks/cancel` cancels its question, which that instance follows).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use app::types::QuestionStatus;
use chrono::{DateTime, Utc};
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, ElicitRequest, ElicitRequestParams, GetTaskResult, InputRequest,
    JsonObject, MetaObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::QuestionRow;

/// How often a client is asked to poll a task, in milliseconds.
pub const POLL_INTERVAL_MS: u64 = 2_000;
/// How long a task is kept after its question's deadline (or, without one, after 24 h).
const KEPT_AFTER_DEADLINE: chrono::Duration = chrono::Duration::hours(1);
/// The reason a question gets when the MCP client cancels the task that asked it.
const CANCELLED_BY_TASK: &str = "the MCP client cancelled the task that asked this question";
/// How long a stopped task's work may take to end.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// The key of the question in a task's `_meta`.
pub const META_KEY: &str = "holdpoint/question";

/// Whether the client that sent this request declared the tasks extension: only such a client gets a task.
pub fn wanted(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|capabilities| capabilities.supports_tasks())
}

/// Whether the client that sent this request declared URL-mode elicitation: MCP lets a server send a client only
/// the elicitation modes it declared.
fn takes_url_elicitations(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().and_then(|capabilities| capabilities.elicitation).is_some_and(|e| e.url.is_some())
}

/// How a task's work ended.
pub enum Done {
    /// With the call's result, or the JSON-RPC error it would have answered.
    Finished(Result<CallToolResult, ErrorData>),
    /// Without a result: its question was cancelled (the message says by whom or why).
    Cancelled(String),
}

/// What a task taken up again after a restart ([`Tasks`] missing it) does.
pub enum Resumed {
    /// It has already ended: its question was resolved while no server watched it.
    Now(Done),
    /// It waits for its question again, as the task's first work did.
    Wait(Pin<Box<dyn Future<Output = Done> + Send>>),
    /// Another instance holds it, or ended it and keeps its result: the message says so, and this book does not
    /// take it up.
    Elsewhere(String),
}

/// Where the task a request names is.
enum Held {
    /// In this book.
    Here(Uuid),
    /// With another instance (see [`Resumed::Elsewhere`]): why this one cannot tell.
    Elsewhere(Uuid, String),
}

/// Which MCP server a book of tasks belongs to: what its tasks are, once only their questions tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    /// `/mcp`: `ask_user` and `request_approval`.
    Mcp,
    /// `/mcp/gateway`: calls that waited for an approval.
    Gateway,
}

impl Door {
    /// The task of a stored question the book does not hold; `None` if no task of this door asked it.
    async fn resume(self, by: TaskRequest<'_>, question: QuestionRow) -> Option<Resumed> {
        match self {
            Door::Mcp => crate::doors::mcp::resume(by, question).await,
            Door::Gateway => crate::doors::gateway::door::resume(by.state, by.caller, question).await,
        }
    }
}

#[derive(Clone)]
enum State {
    Running,
    Finished(Result<CallToolResult, ErrorData>),
    Cancelled(String),
}

struct Entry {
    owner: Uuid,
    workspace_id: Uuid,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    state: State,
    stop: CancellationToken,
}

/// The tasks of one MCP server (`/mcp` or the gateway), by question id.
pub struct Tasks {
    door: Door,
    entries: Mutex<HashMap<Uuid, Entry>>,
    /// Woken whenever a task ends: what a `tasks/result` waits on.
    ended: tokio::sync::Notify,
}

impl Tasks {
    pub fn new(door: Door) -> Arc<Self> {
        Arc::new(Tasks { door, entries: Mutex::default(), ended: tokio::sync::Notify::new() })
    }

    /// Which MCP server these tasks are of.
    pub fn door(&self) -> Door {
        self.door
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn entry(state: &AppState, caller: &Caller, question: &QuestionRow, now: DateTime<Utc>) -> Entry {
        let deadline = question.timeout_at.unwrap_or(question.created_at + chrono::Duration::hours(24));
        Entry {
            owner: caller.principal.id,
            workspace_id: question.workspace_id,
            created_at: question.created_at,
            updated_at: now,
            expires_at: deadline.max(now) + KEPT_AFTER_DEADLINE,
            state: State::Running,
            stop: state.shutdown.child_token(),
        }
    }

    /// Runs a task's work in the background until it is done, the task is cancelled or the server stops, and
    /// records how it ended.
    fn run(self: &Arc<Self>, id: Uuid, stop: CancellationToken, work: impl Future<Output = Done> + Send + 'static) {
        let tasks = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut work = std::pin::pin!(work);
            let done = tokio::select! {
                done = &mut work => done,
                () = stop.cancelled() => {
                    // Stopped by `tasks/cancel` (which records it) or by the server's end (the question outlives
                    // it). The work sees the same token: it gets a moment to end cleanly (a forwarded call tells its
                    // upstream, the call is audited) before it is dropped.
                    let _ = tokio::time::timeout(STOP_GRACE, work).await;
                    return;
                }
            };
            let Some(tasks) = tasks.upgrade() else { return };
            if let Some(entry) = tasks.lock().get_mut(&id)
                && matches!(entry.state, State::Running)
            {
                entry.state = State::ended(done);
                entry.updated_at = crate::store::now();
            }
            tasks.ended.notify_waiters();
        });
    }

    /// Makes sure the book holds task `id` of `caller`: a task it does not hold is taken up again from its stored
    /// question, once (two requests racing for it take up one). A task another instance holds is an error saying
    /// so. Anything else is no task of the caller's.
    async fn held(self: &Arc<Self>, by: TaskRequest<'_>, task_id: &str) -> Result<Uuid, ErrorData> {
        match self.find(by, task_id).await? {
            Held::Here(id) => Ok(id),
            Held::Elsewhere(_, message) => Err(ErrorData::internal_error(message, None)),
        }
    }

    /// [`Self::held`], telling a task another instance holds apart.
    async fn find(self: &Arc<Self>, by: TaskRequest<'_>, task_id: &str) -> Result<Held, ErrorData> {
        let TaskRequest { state, caller, .. } = by;
        let id = parse(task_id)?;
        match self.lock().get(&id) {
            Some(entry) if entry.owner == caller.principal.id => return Ok(Held::Here(id)),
            Some(_) => return Err(unknown(task_id)),
            None => {}
        }
        let question = state.store.question(caller.workspace_id(), id).await.map_err(|e| internal(e.into()))?;
        let question =
            question.filter(|q| q.created_by == Some(caller.principal.id)).ok_or_else(|| unknown(task_id))?;
        let resumed = self.door.resume(by, question.clone()).await.ok_or_else(|| unknown(task_id))?;
        let now = crate::store::now();
        let mut entry = Self::entry(state, caller, &question, now);
        let stop = entry.stop.clone();
        let work = match resumed {
            Resumed::Now(done) => {
                entry.state = State::ended(done);
                None
            }
            Resumed::Wait(work) => Some(work),
            Resumed::Elsewhere(message) => return Ok(Held::Elsewhere(id, message)),
        };
        {
            let mut entries = self.lock();
            if entries.contains_key(&id) {
                // Taken up meanwhile by another request: that one's stands.
                return Ok(Held::Here(id));
            }
            entries.retain(|_, entry| entry.expires_at > now);
            entries.insert(id, entry);
        }
        if let Some(work) = work {
            self.run(id, stop, work);
        }
        Ok(Held::Here(id))
    }

    /// Opens the task of `question`, asked by `caller`, and runs `work` for it in the background until it is done,
    /// the task is cancelled or the server stops. `work` gets the token that stops it (the task's cancellation).
    pub fn start<F, Fut>(
        self: &Arc<Self>,
        state: &AppState,
        caller: &Caller,
        question: &QuestionRow,
        work: F,
    ) -> CreateTaskResult
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Done> + Send + 'static,
    {
        let now = crate::store::now();
        let entry = Self::entry(state, caller, question, now);
        let stop = entry.stop.clone();
        let task = Task::new(question.id.to_string(), TaskStatus::Working, stamp(entry.created_at), stamp(now))
            .with_ttl_ms(ttl_ms(&entry))
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message(format!("question {} asked; waiting for a person", question.id));
        {
            let mut entries = self.lock();
            entries.retain(|_, entry| entry.expires_at > now);
            entries.insert(question.id, entry);
        }
        let work = work(stop.clone());
        self.run(question.id, stop, work);
        CreateTaskResult::new(task).with_meta(question_meta(json!({ "id": question.id, "status": "pending" })))
    }

    /// `tasks/get` as the client that sent `context` may read it: while the question waits, its page as a URL-mode
    /// elicitation (`inputRequests.question`) only to a client that declared that mode; another reads the task
    /// `input_required` with the question in its status message and `_meta`, and no input request it could not
    /// handle.
    pub async fn get_for(
        self: &Arc<Self>,
        state: &AppState,
        context: &RequestContext<RoleServer>,
        task_id: &str,
    ) -> Result<GetTaskResult, ErrorData> {
        let (caller, base_url) = caller_of(state, context)?;
        let mut got = self.get(TaskRequest { state, caller: &caller, base_url: &base_url }, task_id).await?;
        if let TaskPayload::InputRequired { input_requests } = &mut got.task.payload
            && !takes_url_elicitations(context)
        {
            input_requests.clear();
        }
        Ok(got)
    }

    /// `tasks/get`: where the task stands, read from its question while the call waits for it.
    pub async fn get(self: &Arc<Self>, by: TaskRequest<'_>, task_id: &str) -> Result<GetTaskResult, ErrorData> {
        let TaskRequest { state, caller, base_url } = by;
        let id = self.held(by, task_id).await?;
        let (workspace_id, created_at, updated_at, expires_at, current) = {
            let entries = self.lock();
            let entry =
                entries.get(&id).filter(|entry| entry.owner == caller.principal.id).ok_or_else(|| unknown(task_id))?;
            (entry.workspace_id, entry.created_at, entry.updated_at, entry.expires_at, entry.state.clone())
        };
        let ttl = u64::try_from((expires_at - created_at).num_milliseconds()).unwrap_or(0);
        let base = |status: TaskStatus, updated: DateTime<Utc>| {
            Task::new(task_id, status, stamp(created_at), stamp(updated))
                .with_ttl_ms(ttl)
                .with_poll_interval_ms(POLL_INTERVAL_MS)
        };
        let url = holdpoint_channels::question_url(base_url, id);
        let question = state.store.question(workspace_id, id).await.map_err(|e| internal(e.into()))?;
        let question_status = question.as_ref().map(|q| q.status);
        let meta = question_meta(json!({ "id": id, "url": url, "status": question_status }));
        let detailed = match current {
            State::Finished(Ok(result)) => {
                let status = if result.is_error == Some(true) { "the call ended with an error" } else { "done" };
                let result: JsonObject = match serde_json::to_value(&result) {
                    Ok(Value::Object(result)) => result,
                    _ => JsonObject::new(),
                };
                DetailedTask::new(
                    base(TaskStatus::Completed, updated_at).with_status_message(status),
                    TaskPayload::Completed { result },
                )
            }
            State::Finished(Err(error)) => {
                let message = error.message.to_string();
                let error: JsonObject = match serde_json::to_value(&error) {
                    Ok(Value::Object(error)) => error,
                    _ => JsonObject::new(),
                };
                DetailedTask::new(
                    base(TaskStatus::Failed, updated_at).with_status_message(message),
                    TaskPayload::Failed { error },
                )
            }
            State::Cancelled(message) => DetailedTask::new(
                base(TaskStatus::Cancelled, updated_at).with_status_message(message),
                TaskPayload::Cancelled,
            ),
            State::Running => match question {
                Some(row) if row.status == QuestionStatus::Pending => {
                    let message = format!("Waiting for a person to answer question {id}: {}", row.title);
                    let elicitation = ElicitRequestParams::UrlElicitationParams {
                        meta: None,
                        message: message.clone(),
                        url: url.clone(),
                        elicitation_id: id.to_string(),
                    };
                    let input_requests = BTreeMap::from([(
                        "question".to_owned(),
                        InputRequest::Elicitation(ElicitRequest::new(elicitation)),
                    )]);
                    DetailedTask::new(
                        base(TaskStatus::InputRequired, updated_at).with_status_message(message),
                        TaskPayload::InputRequired { input_requests },
                    )
                }
                _ => DetailedTask::new(
                    base(TaskStatus::Working, crate::store::now())
                        .with_status_message(format!("question {id} is resolved; finishing the call")),
                    TaskPayload::Working,
                ),
            },
        };
        let mut result = GetTaskResult::new(detailed);
        result.meta = Some(meta);
        Ok(result)
    }

    /// Waits until the task has ended (or the server stops: `None`), then tells how, as `tasks/get` does.
    pub async fn ended(
        self: &Arc<Self>,
        by: TaskRequest<'_>,
        task_id: &str,
    ) -> Result<Option<GetTaskResult>, ErrorData> {
        let TaskRequest { state, .. } = by;
        loop {
            // Registered before reading, so that an end between the read and the wait is not missed.
            let woken = self.ended.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            let got = self.get(by, task_id).await?;
            if got.task.status().is_terminal() {
                return Ok(Some(got));
            }
            tokio::select! {
                () = woken => {}
                // A task's end is always announced; this only bounds what a missed one could cost.
                () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
                () = state.shutdown.cancelled() => return Ok(None),
            }
        }
    }

    /// The ids of the caller's tasks that this book holds, newest first.
    pub fn ids_of(&self, caller: &Caller) -> Vec<String> {
        let now = crate::store::now();
        let mut theirs: Vec<(DateTime<Utc>, Uuid)> = self
            .lock()
            .iter()
            .filter(|(_, entry)| entry.owner == caller.principal.id && entry.expires_at > now)
            .map(|(id, entry)| (entry.created_at, *id))
            .collect();
        theirs.sort_by(|a, b| b.cmp(a));
        theirs.into_iter().map(|(_, id)| id.to_string()).collect()
    }

    /// A task that ended as it began: a call asked to run as a task (MCP 2025-11-25's `params.task`) whose result
    /// came at once (a non-blocking question, a rule's decision, a grant). It has no question, so its id is its own,
    /// and it lives in this book only.
    pub fn completed(&self, state: &AppState, caller: &Caller, result: CallToolResult) -> Uuid {
        let id = Uuid::now_v7();
        let now = crate::store::now();
        let entry = Entry {
            owner: caller.principal.id,
            workspace_id: caller.workspace_id(),
            created_at: now,
            updated_at: now,
            expires_at: now + KEPT_AFTER_DEADLINE,
            state: State::Finished(Ok(result)),
            stop: state.shutdown.child_token(),
        };
        let mut entries = self.lock();
        entries.retain(|_, entry| entry.expires_at > now);
        entries.insert(id, entry);
        id
    }

    /// `tasks/update`: the task must be the caller's; what it waits for is a person's answer, so responses to its
    /// input request change nothing.
    pub async fn update(self: &Arc<Self>, by: TaskRequest<'_>, task_id: &str) -> Result<(), ErrorData> {
        self.held(by, task_id).await.map(|_| ())
    }

    /// `tasks/cancel`: cancels the question (as the caller, audited so) and stops the call. A task that has ended
    /// stays as it ended. A task another instance holds is cancelled through its question, which that instance
    /// follows: its call is not made.
    pub async fn cancel(self: &Arc<Self>, by: TaskRequest<'_>, task_id: &str) -> Result<(), ErrorData> {
        let TaskRequest { state, caller, .. } = by;
        let id = match self.find(by, task_id).await? {
            Held::Here(id) => id,
            Held::Elsewhere(id, _) => return cancel_question(state, caller, id).await,
        };
        let stop = {
            let mut entries = self.lock();
            let entry = entries
                .get_mut(&id)
                .filter(|entry| entry.owner == caller.principal.id)
                .ok_or_else(|| unknown(task_id))?;
            if !matches!(entry.state, State::Running) {
                return Ok(());
            }
            entry.state = State::Cancelled("The task was cancelled by its client; so was its question.".into());
            entry.updated_at = crate::store::now();
            entry.stop.clone()
        };
        stop.cancel();
        self.ended.notify_waiters();
        cancel_question(state, caller, id).await
    }
}

/// Cancels the question of a task its client cancelled, as the client. One resolved meanwhile stays as it was (the
/// call may be reaching its upstream): the call is stopped all the same.
async fn cancel_question(state: &AppState, caller: &Caller, id: Uuid) -> Result<(), ErrorData> {
    let (store, reason) = (state.store.as_ref(), Some(CANCELLED_BY_TASK.to_owned()));
    match crate::questions::cancel_question(store, &state.metrics, caller, id, reason, crate::store::now()).await {
        Ok(_) | Err(AppError::Conflict { .. }) => Ok(()),
        Err(err) => Err(internal(err)),
    }
}

impl State {
    fn ended(done: Done) -> Self {
        match done {
            Done::Finished(result) => State::Finished(result),
            Done::Cancelled(message) => State::Cancelled(message),
        }
    }
}

/// Where a person answers questions: the configured public URL, else the host this request came to.
pub fn base_url(state: &AppState, parts: &http::request::Parts) -> String {
    if let Some(url) = &state.config.public_url {
        return url.clone();
    }
    let host = parts.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    format!("http://{host}")
}

/// A task's `_meta`: its question under [`META_KEY`].
fn question_meta(question: Value) -> MetaObject {
    MetaObject(JsonObject::from_iter([(META_KEY.to_owned(), question)]))
}

fn ttl_ms(entry: &Entry) -> u64 {
    u64::try_from((entry.expires_at - entry.created_at).num_milliseconds()).unwrap_or(0)
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn parse(task_id: &str) -> Result<Uuid, ErrorData> {
    Uuid::parse_str(task_id).map_err(|_| unknown(task_id))
}

/// The extension's answer for a task that does not exist, or is not the caller's: invalid params.
fn unknown(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task {task_id:?}"), None)
}

fn internal(err: AppError) -> ErrorData {
    tracing::error!(error = %err, "internal error in an MCP task");
    ErrorData::internal_error("internal error", None)
}

/// Who sends a `tasks/*` request: the server it reaches, the principal it acts as, and where that server is reached
/// (the base of a question's page, and of a file's download URL in a task's result).
#[derive(Clone, Copy)]
pub struct TaskRequest<'a> {
    pub state: &'a AppState,
    pub caller: &'a Caller,
    pub base_url: &'a str,
}

/// The caller of a `tasks/*` request, and where its questions are answered.
pub fn caller_of(state: &AppState, context: &RequestContext<RoleServer>) -> Result<(Caller, String), ErrorData> {
    let parts = context
        .extensions
        .get::<http::request::Parts>()
        .ok_or_else(|| ErrorData::internal_error("no HTTP request", None))?;
    let caller = parts
        .extensions
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| ErrorData::invalid_request("not authenticated", None))?;
    Ok((caller, base_url(state, parts)))
}
