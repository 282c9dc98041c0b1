//! `/mcp`: the Model Context Protocol over streamable HTTP (spec §7), so any MCP client can ask a person through
//! Holdpoint: `ask_user`, `request_approval` (shaped for Claude Code's `--permission-prompt-tool`) and
//! `resume_task`.
//!
//! Requests authenticate like the REST API (a bearer token); a layer in front of the MCP service resolves the
//! caller and hands it to the tools through the request's extensions. A tool call that asks a person blocks until
//! the question is resolved (answered, defaulted, expired or cancelled), woken by the question's own event.

use std::sync::Arc;
use std::time::Duration;

use app::types::{
    AnswerBody, ApprovalAction, NewQuestion, Question, QuestionKind, QuestionStatus, ResumeRequest, ToolDecision,
};
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{Caller, Proof};
use crate::error::AppError;
use crate::questions::{TimeoutBounds, build_question, insert_question};
use crate::state::AppState;

/// How often a waiting tool call re-reads its question, in case it missed the event (the hub lagged).
const RECHECK: Duration = Duration::from_secs(5);

/// The MCP service, mounted at `/mcp` behind [`authenticate`], and the owners of its sessions.
pub fn service(state: AppState) -> (StreamableHttpService<HoldpointMcp, LocalSessionManager>, Arc<SessionOwners>) {
    let manager = Arc::new(LocalSessionManager::default());
    let owners = SessionOwners::start(&state, Arc::clone(&manager));
    let config = StreamableHttpServerConfig::default()
        // Every request carries a bearer token, which a DNS-rebinding page cannot have; the Host check that
        // protects unauthenticated local servers would only break deployments behind a proxy.
        .disable_allowed_hosts()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(state.shutdown.child_token());
    let service = StreamableHttpService::new(move || Ok(HoldpointMcp { state: state.clone() }), manager, config);
    (service, owners)
}

/// The header MCP's streamable HTTP transport names a session in.
const SESSION_HEADER: &str = "mcp-session-id";

/// Who opened each MCP session, and with which credential.
///
/// A session belongs to the principal that opened it: a request naming it with another credential is told the
/// session does not exist (404, which makes a client start a new one). Each principal may hold
/// `HOLDPOINT_MCP_SESSIONS_PER_CALLER` sessions at once, and a session whose credential no longer authenticates
/// its opener (a revoked token, a removed member, another role) is closed, which ends the tool calls waiting in it.
pub struct SessionOwners {
    manager: Arc<LocalSessionManager>,
    sessions: std::sync::Mutex<std::collections::HashMap<String, SessionOwner>>,
    per_caller: usize,
}

struct SessionOwner {
    caller: Caller,
    proof: Proof,
}

impl SessionOwners {
    fn start(state: &AppState, manager: Arc<LocalSessionManager>) -> Arc<Self> {
        let owners = Arc::new(SessionOwners {
            manager,
            sessions: std::sync::Mutex::new(std::collections::HashMap::new()),
            per_caller: state.config.mcp_sessions_per_caller,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(close_sessions_of_revoked_credentials(state.clone(), Arc::downgrade(&owners)));
        }
        owners
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, SessionOwner>> {
        self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `session` was opened by `caller`'s principal.
    fn owned_by(&self, session: &str, caller: &Caller) -> bool {
        self.lock().get(session).is_some_and(|owner| owner.caller.principal.id == caller.principal.id)
    }

    /// Forgets the sessions the manager no longer has (closed by the client or idle), then says whether
    /// `caller` may open one more.
    async fn may_open(&self, caller: &Caller) -> bool {
        let theirs: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, owner)| owner.caller.principal.id == caller.principal.id)
            .map(|(id, _)| id.clone())
            .collect();
        let mut live = 0;
        for id in theirs {
            if self.manager.has_session(&SessionId::from(id.as_str())).await.unwrap_or(false) {
                live += 1;
            } else {
                self.lock().remove(&id);
            }
        }
        live < self.per_caller
    }

    fn opened(&self, session: String, caller: Caller, proof: Proof) {
        self.lock().insert(session, SessionOwner { caller, proof });
    }

    fn closed(&self, session: &str) {
        self.lock().remove(session);
    }

    /// How many sessions are open (as far as this knows).
    pub fn open(&self) -> usize {
        self.lock().len()
    }
}

/// Closes every session whose credential no longer authenticates its opener, each time the store hears of a
/// credential change; ends with the service.
async fn close_sessions_of_revoked_credentials(state: AppState, owners: std::sync::Weak<SessionOwners>) {
    let mut changes = state.store.credential_changes();
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = state.shutdown.cancelled() => return,
        }
        let Some(owners) = owners.upgrade() else { return };
        let sessions: Vec<(String, Caller, Proof)> =
            owners.lock().iter().map(|(id, owner)| (id.clone(), owner.caller.clone(), owner.proof.clone())).collect();
        for (id, caller, proof) in sessions {
            if !proof.still_authenticates(&state, &caller).await.unwrap_or(false) {
                owners.closed(&id);
                let _ = owners.manager.close_session(&SessionId::from(id.as_str())).await;
            }
        }
    }
}

/// Resolves the bearer token (or 401 in the API's error shape), holds each session to the principal that opened
/// it, and passes the caller on to the tools.
pub async fn authenticate(
    State((state, owners)): State<(AppState, Arc<SessionOwners>)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => caller,
        Err(err) => return err.into_response(),
    };
    let session = parts.headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    match &session {
        Some(id) if !owners.owned_by(id, &caller) => {
            return AppError::NotFound("MCP session").into_response();
        }
        Some(_) => {}
        None if parts.method == axum::http::Method::POST && !owners.may_open(&caller).await => {
            return AppError::RateLimited { limit: "mcp_sessions_per_caller", retry_after_seconds: 60 }.into_response();
        }
        None => {}
    }
    let proof = Proof::of(&parts.headers);
    let deleting = parts.method == axum::http::Method::DELETE;
    parts.extensions.insert(caller.clone());
    let response = next.run(Request::from_parts(parts, body)).await;
    match session {
        Some(id) if deleting => owners.closed(&id),
        Some(_) => {}
        None => {
            let opened = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok());
            if let (Some(id), Some(proof)) = (opened, proof) {
                owners.opened(id.to_owned(), caller, proof);
            }
        }
    }
    response
}

/// The tools of Holdpoint's MCP server.
#[derive(Clone)]
pub struct HoldpointMcp {
    state: AppState,
}

/// The arguments of `ask_user`: the `POST /questions` body.
#[derive(Debug, Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct AskUserArgs {
    /// The question, 1..=300 characters.
    pub title: String,
    /// Details, in Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// `blocking` (default), `non_blocking` (returns at once; the answer may come later) or `error_recovery`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `text` (default), `boolean`, `choice`, `multi_choice`, `error_recovery` or `form`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_type: Option<String>,
    /// For choices: `[{"value", "label", "description"?}]`, 2..=20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<Value>>,
    /// For forms: `[{"key", "label", "response_type", "options"?, "required"?}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<Value>>,
    /// A free label for grouping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// `low`, `normal`, `high` or `critical`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urgency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// Applied when the deadline passes: `{"value": ..., "comment"?: ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_response: Option<Value>,
    /// A JSON object shown with the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
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

fn caller_of(parts: &http::request::Parts) -> Result<Caller, ErrorData> {
    parts.extensions.get::<Caller>().cloned().ok_or_else(|| ErrorData::invalid_request("not authenticated", None))
}

fn tool_error(err: AppError) -> ErrorData {
    let detail = err.detail();
    let data = Some(json!({ "code": detail.code, "details": detail.details }));
    match err {
        AppError::Internal(_) => ErrorData::internal_error(detail.message, None),
        _ => ErrorData::invalid_params(detail.message, data),
    }
}

fn json_result(value: &Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

/// What a resolved question says to an agent.
fn outcome(question: &Question) -> Value {
    let mut out = json!({ "question_id": question.id, "status": question.status });
    if let Some(response) = &question.response {
        out["value"] = response.value.clone();
        if let Some(comment) = &response.comment {
            out["comment"] = Value::String(comment.clone());
        }
        if let Some(edited) = &response.edited_arguments {
            out["edited_arguments"] = edited.clone();
        }
    }
    if let Some(by) = &question.answered_by {
        out["answered_by"] = Value::String(by.clone());
    }
    out
}

impl HoldpointMcp {
    /// Creates the question and waits until it is no longer pending.
    async fn ask_and_wait(
        &self,
        parts: &http::request::Parts,
        caller: &Caller,
        input: NewQuestion,
    ) -> Result<Question, ErrorData> {
        caller.require_ask().map_err(tool_error)?;
        // Counted as `POST /questions` is: a question asked over MCP is no cheaper to store or to answer.
        crate::http::limits::check_creation_in(parts).map_err(tool_error)?;
        let bounds = TimeoutBounds {
            min_seconds: self.state.config.min_timeout_seconds,
            max_seconds: self.state.config.max_timeout_seconds,
        };
        let row = build_question(input, caller.workspace_id(), Some(caller.principal.id), bounds, crate::store::now())
            .map_err(tool_error)?;
        crate::questions::check_assignee(self.state.store.as_ref(), &row).await.map_err(tool_error)?;
        // Watch first: the answer may come before we start waiting.
        let mut watch = self.state.hub.watch_question(row.id);
        insert_question(self.state.store.as_ref(), &self.state.metrics, &row)
            .await
            .map_err(|e| tool_error(e.into()))?;
        let workspace = &caller.principal.workspace;
        if row.kind == QuestionKind::NonBlocking.as_str() {
            return row.to_question(workspace).map_err(|e| tool_error(e.into()));
        }
        loop {
            let current = self
                .state
                .store
                .question(row.workspace_id, row.id)
                .await
                .map_err(|e| tool_error(e.into()))?
                .ok_or_else(|| ErrorData::internal_error("the question disappeared", None))?;
            if current.status != QuestionStatus::Pending.as_str() {
                return current.to_question(workspace).map_err(|e| tool_error(e.into()));
            }
            let _ = tokio::time::timeout(RECHECK, watch.next_event()).await;
            // A fired watch is used up: the next one is registered before the question is read again.
            watch = self.state.hub.watch_question(row.id);
        }
    }
}

#[tool_router]
impl HoldpointMcp {
    #[tool(description = "Ask a person a question and wait for the answer. Returns the resolved question: status \
        (answered, defaulted, expired, cancelled), value and comment. Use kind non_blocking for a preference: it \
        returns at once with status pending.")]
    async fn ask_user(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<AskUserArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = caller_of(&parts)?;
        let input: NewQuestion = serde_json::to_value(&args)
            .and_then(serde_json::from_value)
            .map_err(|e| ErrorData::invalid_params(format!("the question is not valid: {e}"), None))?;
        if input.kind == Some(QuestionKind::Approval) {
            return Err(ErrorData::invalid_params("use request_approval to ask for approval", None));
        }
        let question = self.ask_and_wait(&parts, &caller, input).await?;
        Ok(json_result(&outcome(&question)))
    }

    #[tool(description = "Ask a person to approve a tool call and wait for the decision. Answers in Claude Code's \
        permission-prompt format: {\"behavior\": \"allow\", \"updatedInput\": {...}} or {\"behavior\": \"deny\", \
        \"message\": \"...\"}. The person may edit the input before allowing it.")]
    async fn request_approval(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<ApprovalArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = caller_of(&parts)?;
        let arguments = if args.input.is_null() { json!({}) } else { args.input.clone() };
        let body = args.body.clone().unwrap_or_else(|| {
            format!(
                "An agent wants to call `{}` with:\n\n```json\n{}\n```\n",
                args.tool_name,
                serde_json::to_string_pretty(&arguments).unwrap_or_default()
            )
        });
        let mut context = json!({ "source": "mcp" });
        if let Some(id) = &args.tool_use_id {
            context["tool_use_id"] = Value::String(id.clone());
        }
        let input = NewQuestion {
            kind: Some(QuestionKind::Approval),
            title: args.title.clone().unwrap_or_else(|| format!("Allow {}?", args.tool_name)),
            body,
            action: Some(ApprovalAction { tool_name: args.tool_name.clone(), arguments: arguments.clone() }),
            allow_edit: arguments.is_object(),
            context: Some(context),
            project: args.project.clone(),
            timeout_seconds: args.timeout_seconds,
            ..Default::default()
        };
        let question = self.ask_and_wait(&parts, &caller, input).await?;
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
        Ok(json_result(&decision))
    }

    #[tool(description = "Resume a Holdpoint run that is paused or waiting, optionally with a prompt and decisions \
        on its calls pending approval (undecided ones are rejected). Returns the run.")]
    async fn resume_task(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<ResumeArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = caller_of(&parts)?;
        let run_id = Uuid::parse_str(&args.run_id)
            .map_err(|_| ErrorData::invalid_params(format!("{:?} is not a run id", args.run_id), None))?;
        let tool_decisions: Vec<ToolDecision> = args
            .tool_decisions
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<_, _>>()
            .map_err(|e| ErrorData::invalid_params(format!("tool_decisions: {e}"), None))?;
        let request = ResumeRequest { prompt: args.prompt, tool_decisions };
        let run = crate::runs::resume_run(&self.state.runtime, &caller, run_id, request).await.map_err(tool_error)?;
        Ok(json_result(&serde_json::to_value(run).unwrap_or_default()))
    }
}

#[tool_handler]
impl ServerHandler for HoldpointMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "Holdpoint lets you stop and ask a person. ask_user waits for an answer; request_approval waits for an \
             allow/deny decision on a tool call; resume_task continues a paused Holdpoint run.",
        )
    }
}
