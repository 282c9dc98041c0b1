//! `/mcp/gateway`: one MCP server (streamable HTTP) in front of a workspace's upstreams. `tools/list` lists every
//! upstream's tools as `<upstream>__<tool>`; each `tools/call` is decided by the approval rules, with the tool named
//! `mcp:<upstream>/<tool>`, before anything reaches the upstream:
//!
//! - `allow`: forwarded, and the upstream's result returned as it is;
//! - `deny`: a result with `isError` naming the rule and its reason; the upstream is never called;
//! - `ask`: a live grant lets the call through; otherwise an approval question is asked and the call waits for it
//!   (with progress notifications, like `/mcp`'s tools). Approved, the call is forwarded, with the approver's edited
//!   arguments if any; rejected, expired or cancelled, it ends `isError` saying so. A client that cancels the call
//!   cancels the question.
//!
//! An upstream that answers a call `input_required` (MCP 2026-07-28's multi round-trip requests) has its
//! elicitations asked as `form` questions and the call sent again with the answers, at most [`MRTR_ROUNDS_MAX`]
//! rounds; the caller sees one call and its final result.
//!
//! Every call is audited (`gateway.call`, with a SHA-256 digest of the arguments rather than the arguments) and
//! counted. An upstream that cannot be reached answers `isError` at once; one that is down or slow never hides the
//! others' tools: each is listed concurrently, within [`LIST_TIMEOUT`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use app::types::{QuestionStatus, RuleDecision};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CancelledNotificationParam, ClientRequest, ContentBlock, ErrorData, GetTaskParams, GetTaskResult, Implementation,
    InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams, ResultType, ServerCapabilities,
    ServerConfig, ServerResult, UpdateTaskParams,
};
use rmcp::service::{PeerRequestOptions, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::connections::{CallScope, Connection, Connections, Target};
use crate::credentials::Caller;
use crate::doors::mcp::tasks::{self, Done, Resumed, Tasks};
use crate::doors::mcp::{self, AtShutdown, SessionOwners};
use crate::error::AppError;
use crate::rules::{ToolCall, Verdict};
use crate::state::AppState;
use crate::store::{AuditActor, NewAuditEntry};

/// How long listing one upstream's tools may take (connecting included) before it is left out of the list.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(3);
/// What separates the upstream's name from its tool's in the gateway's tool names.
pub const SEPARATOR: &str = "__";
/// The most rounds of a multi round-trip request (an upstream answering `input_required`) the gateway goes through
/// for one call; an upstream that still wants more input after them gets no more, and the call ends `isError`.
pub const MRTR_ROUNDS_MAX: usize = 8;

/// How one round of a forwarded call ended.
enum Round {
    /// With the call's answer, for the caller as it is.
    Done(CallToolResponse),
    /// With the upstream asking for input before it answers (MCP's multi round-trip requests).
    InputRequired(InputRequiredResult),
}

/// The gateway's MCP service, mounted at `/mcp/gateway` behind `/mcp`'s authentication, and the book of its
/// sessions.
#[expect(clippy::type_complexity, reason = "the service and its two books, as `/mcp`'s")]
pub fn service(
    state: AppState,
) -> Result<(StreamableHttpService<Gateway, LocalSessionManager>, Arc<SessionOwners>, Arc<Tasks>), reqwest::Error> {
    let mut manager = LocalSessionManager::default();
    // As at `/mcp`: sessions idle out by Holdpoint's own rule, which knows when a call waits for a person.
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let owners = SessionOwners::start(&state, Arc::clone(&manager));
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(state.shutdown.child_token());
    let connections = Arc::new(Connections::new(state.config.upstream_allow_private)?);
    // The configured upstreams' processes end with the server. A router built outside a runtime (a test builds
    // routers on a plain thread) serves nothing, so has nothing to close.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let (closing, shutdown) = (Arc::clone(&connections), state.shutdown.clone());
        runtime.spawn(async move {
            shutdown.cancelled().await;
            closing.close_all();
        });
    }
    let tasks = Tasks::new(tasks::Door::Gateway);
    let gateway = Gateway { state, owners: Arc::clone(&owners), connections, tasks: Arc::clone(&tasks) };
    let service = StreamableHttpService::new(move || Ok(gateway.clone()), manager, config);
    Ok((service, owners, tasks))
}

/// The gateway's MCP server.
#[derive(Clone)]
pub struct Gateway {
    state: AppState,
    owners: Arc<SessionOwners>,
    connections: Arc<Connections>,
    /// The tasks of the clients that declared MCP's tasks extension.
    tasks: Arc<Tasks>,
}

fn parts_of(context: &RequestContext<RoleServer>) -> Result<&http::request::Parts, ErrorData> {
    context.extensions.get::<http::request::Parts>().ok_or_else(|| ErrorData::internal_error("no HTTP request", None))
}

/// Refuses with 403, before any MCP message is read, a caller whose role may not ask (a viewer): the gateway makes
/// calls with the upstreams' credentials and asks people about them.
pub async fn require_asking_role(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match request.extensions().get::<Caller>().map(Caller::role) {
        Some(role) if !role.may_ask() => AppError::Forbidden(format!(
            "{} may not use the gateway: its calls go out with the upstreams' credentials",
            role.with_article()
        ))
        .into_response(),
        _ => next.run(request).await,
    }
}

fn caller_of(parts: &http::request::Parts) -> Result<Caller, ErrorData> {
    parts.extensions.get::<Caller>().cloned().ok_or_else(|| ErrorData::invalid_request("not authenticated", None))
}

fn internal(err: impl std::fmt::Display) -> ErrorData {
    tracing::error!(error = %err, "internal error in the MCP gateway");
    ErrorData::internal_error("internal error", None)
}

/// A tool result with `isError` and this text.
fn failed(text: String) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(text)]))
}

/// Why a call did not reach its upstream, when connecting to it failed (`problem` as the connection says it: "did
/// not answer within 5 s", "could not be started (...)", "unreachable: ...").
fn not_reached(upstream: &str, problem: &str) -> String {
    format!("The upstream {upstream} could not be reached: {problem}")
}

/// How a call whose approval was not given ends, and its audit outcome: rejected (with the comment and the
/// directive not to retry unchanged), expired or cancelled. `None` for an approval: the call may go on.
fn not_approved(asked: &app::types::Question, rule_tool: &str) -> Option<(&'static str, CallToolResult)> {
    let response = asked.response.as_ref();
    let error = |text: String| CallToolResult::error(vec![ContentBlock::text(text)]);
    match asked.status {
        QuestionStatus::Answered | QuestionStatus::Defaulted
            if response.is_some_and(|r| r.value == Value::Bool(true)) =>
        {
            None
        }
        QuestionStatus::Answered | QuestionStatus::Defaulted => {
            let by = asked.answered_by.clone().unwrap_or_else(|| "the default".into());
            let comment = response.and_then(|r| r.comment.clone());
            let comment = comment.map(|c| format!(": {c}")).unwrap_or_default();
            Some((
                "rejected",
                error(format!(
                    "Rejected by {by}{comment}. The call {rule_tool} was not made; do not retry it unchanged."
                )),
            ))
        }
        QuestionStatus::Expired => Some((
            "expired",
            error(format!(
                "The approval of {rule_tool} expired: nobody decided before its deadline (question {}). The call was \
                 not made.",
                asked.id
            )),
        )),
        QuestionStatus::Cancelled | QuestionStatus::Pending => Some(("cancelled", error(cancelled(asked, rule_tool)))),
    }
}

/// What a call whose approval was cancelled says: the question, and why it was cancelled when that was given.
fn cancelled(asked: &app::types::Question, rule_tool: &str) -> String {
    let reason = asked.response.as_ref().and_then(|r| r.comment.as_deref());
    let reason = reason.map(|r| format!(": {r}")).unwrap_or_default();
    format!("The approval of {rule_tool} was cancelled (question {}){reason}. The call was not made.", asked.id)
}

/// Whether a stored question is one the gateway asked for a call: an approval the rules asked, of a tool named
/// `mcp:<upstream>/<tool>`.
pub(crate) fn asked_by_gateway(row: &crate::store::QuestionRow) -> bool {
    row.kind == app::types::QuestionKind::Approval
        && row.context.0["source"] == "rules"
        && row.action.as_ref().is_some_and(|action| action.0.tool_name.starts_with("mcp:"))
}

/// The reason a gateway question gets when the server that took the call it asked about restarted or stopped
/// before making it.
const CANCELLED_BY_RESTART: &str =
    "the MCP gateway server that took the call this approval was for restarted or stopped before making it";

/// A gateway task this instance's book does not hold, read from its stored question. Another instance may hold it
/// (its hold in the store says so): only that one knows what became of the call, so this one says where the task
/// is and changes nothing. Otherwise the server that took the call restarted, or died, and the task ends at once:
/// its call is never made after that. The call's arguments, its upstream and the approval are all stored, but not
/// whether the server that stopped had already sent it (it may have stopped in the middle): sending it again could
/// make it twice, and a tool call that changes something must not run twice on one approval. So:
///
/// - rejected or expired: completed with the same `isError` result as without a restart; cancelled: cancelled;
/// - still pending: its question is cancelled (as the caller, so that nobody approves a call that will not run), and
///   the task fails saying the call was not made;
/// - approved: the task fails saying the call was not made after the restart, and may have been before it.
pub(crate) async fn resume(state: &AppState, caller: &Caller, row: crate::store::QuestionRow) -> Option<Resumed> {
    if !asked_by_gateway(&row) {
        return None;
    }
    let rule_tool = row.action.as_ref().map(|action| action.0.tool_name.clone()).unwrap_or_default();
    let id = row.id;
    let status = row.status;
    let hold = match held_elsewhere(state, id).await {
        Ok(Elsewhere::Held) => {
            return Some(Resumed::Elsewhere(format!(
                "The call {rule_tool} (question {id}) is held by another Holdpoint instance, which waits for its \
                 approval and makes it: ask that instance. Route a client's /mcp/gateway requests to one instance \
                 while its tasks last."
            )));
        }
        Ok(Elsewhere::Ended) => {
            return Some(Resumed::Elsewhere(format!(
                "The call {rule_tool} (question {id}) ended on another Holdpoint instance, which keeps its result: \
                 ask that instance. Route a client's /mcp/gateway requests to one instance while its tasks last."
            )));
        }
        Ok(Elsewhere::Gone(hold)) => hold,
        // A call this instance holds that its book does not: one that waits without a task.
        Ok(Elsewhere::HeldHere) => return None,
        Err(err) => {
            return Some(Resumed::Elsewhere(format!("Could not read where the call of question {id} is held: {err}")));
        }
    };
    if status == QuestionStatus::Pending {
        let store = state.store.as_ref();
        let reason = Some(CANCELLED_BY_RESTART.to_owned());
        let now = crate::store::now();
        match crate::questions::cancel_question(store, &state.metrics, caller, id, reason, now).await {
            // Resolved meanwhile: the call is not made all the same.
            Ok(_) | Err(AppError::Conflict { .. }) => {}
            Err(err) => tracing::warn!(error = %err, question = %id, "could not cancel a gateway task's question"),
        }
        let message = format!(
            "The server that took the call {rule_tool} restarted or stopped while it waited for its approval \
             (question {id}): the call was not made, and its question is cancelled. Call the tool again to ask anew."
        );
        return Some(Resumed::Now(Done::Finished(Err(ErrorData::internal_error(message, None)))));
    }
    let question = row.to_question(&caller.principal.workspace).ok()?;
    if status == QuestionStatus::Cancelled {
        // As a live task ends when its question is cancelled.
        return Some(Resumed::Now(Done::Cancelled(cancelled(&question, &rule_tool))));
    }
    if let Some((_, refused)) = not_approved(&question, &rule_tool) {
        return Some(Resumed::Now(Done::Finished(Ok(refused))));
    }
    let message = if hold.is_some_and(|hold| hold.released.as_deref() == Some(crate::store::HOLD_ENDED)) {
        format!(
            "The call {rule_tool} ended on a server that has restarted or stopped since (question {id} was \
             approved): its result went with that server, and the call is not made again."
        )
    } else {
        format!(
            "The server that took the call {rule_tool} restarted or stopped before the call ended (question {id} \
             was approved): the call is not made again, and whether it reached its upstream before is unknown."
        )
    };
    Some(Resumed::Now(Done::Finished(Err(ErrorData::internal_error(message, None)))))
}

/// Where the call a gateway question was asked for is, seen from an instance whose book has no task of it.
enum Elsewhere {
    /// This instance holds it.
    HeldHere,
    /// Another running instance holds it.
    Held,
    /// It ended on another running instance, which keeps its result.
    Ended,
    /// No running instance has it: the one that took it restarted or stopped (its hold, if it was held).
    Gone(Option<crate::store::GatewayHoldRow>),
}

async fn held_elsewhere(state: &AppState, question: uuid::Uuid) -> crate::store::StoreResult<Elsewhere> {
    let store = state.store.as_ref();
    let Some(hold) = store.gateway_hold(question).await? else { return Ok(Elsewhere::Gone(None)) };
    if hold.instance_id == state.gateway_waits.instance() && hold.released.is_none() {
        return Ok(Elsewhere::HeldHere);
    }
    let by_another = hold.instance_id != state.gateway_waits.instance()
        && hold.released.as_deref() != Some(crate::store::HOLD_LAPSED)
        && store.instance_alive(hold.instance_id, crate::store::now()).await?;
    Ok(match hold.released {
        _ if !by_another => Elsewhere::Gone(Some(hold)),
        None => Elsewhere::Held,
        Some(_) => Elsewhere::Ended,
    })
}

/// What became of one call, for its audit entry.
struct Record<'a> {
    caller: &'a Caller,
    upstream: &'a str,
    tool: &'a str,
    arguments: &'a Value,
    verdict: Option<&'a Verdict>,
    outcome: &'static str,
    started: Instant,
    question: Option<uuid::Uuid>,
}

/// A call the rules let through or ask about, with what finishing it needs: owned, as a task finishes it in the
/// background.
struct Pending {
    caller: Caller,
    upstream: String,
    tool: String,
    /// The tool as the rules name it, `mcp:<upstream>/<tool>`.
    rule_tool: String,
    arguments: Value,
    /// The arguments as the upstream gets them, unless an approver edits them.
    forwarded_arguments: Option<JsonObject>,
    verdict: Verdict,
    started: Instant,
    connection: Arc<Connection>,
    target: Target,
    parts: http::request::Parts,
}

impl Pending {
    fn record(&self, outcome: &'static str, question: Option<uuid::Uuid>) -> Record<'_> {
        Record {
            caller: &self.caller,
            upstream: &self.upstream,
            tool: &self.tool,
            arguments: &self.arguments,
            verdict: Some(&self.verdict),
            outcome,
            started: self.started,
            question,
        }
    }
}

impl Gateway {
    /// Audits and counts a call, off its path: the caller does not wait for the audit's write.
    fn record(&self, record: Record<'_>) {
        let decision = record.verdict.map(|v| v.decision.as_str());
        if let Some(decision) = decision {
            self.state.metrics.gateway_call(record.upstream, decision);
        }
        let entry = NewAuditEntry {
            workspace_id: record.caller.workspace_id(),
            actor: AuditActor::from(record.caller),
            action: crate::actions::GATEWAY_CALL.into(),
            subject_type: "tool_call".into(),
            subject_id: Some(format!("mcp:{}/{}", record.upstream, record.tool)),
            before: None,
            after: Some(json!({
                "upstream": record.upstream,
                "tool": record.tool,
                "decision": decision,
                "rule": record.verdict.and_then(|v| v.rule.clone()),
                "outcome": record.outcome,
                "arguments_sha256": crate::rules::arguments_digest(record.arguments),
                "duration_ms": u64::try_from(record.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "question_id": record.question,
            })),
            diff: None,
            created_at: crate::store::now(),
        };
        let store = Arc::clone(&self.state.store);
        tokio::spawn(async move {
            if let Err(err) = store.append_audit(&entry).await {
                tracing::error!(error = %err, "could not audit a gateway call");
            }
        });
    }

    /// What an elicitation during the forwarded call needs; `context` is the calling request's, or a task's.
    fn scope(&self, call: &Pending, context: RequestContext<RoleServer>) -> Arc<CallScope> {
        Arc::new(CallScope {
            state: self.state.clone(),
            owners: Arc::clone(&self.owners),
            parts: call.parts.clone(),
            context,
            caller: call.caller.clone(),
            upstream: call.upstream.clone(),
            tool: call.tool.clone(),
            assignee: call.verdict.ask.assignee.clone(),
            urgency: call.verdict.ask.urgency,
            timeout_seconds: call.verdict.ask.timeout_seconds,
        })
    }

    /// Ends a call once it may go on: reads the approval's decision, if it was asked, forwards an approved call
    /// (with the approver's edits), and audits it.
    async fn finish(
        &self,
        call: &Pending,
        scope: Arc<CallScope>,
        asked: Option<app::types::Question>,
    ) -> Result<CallToolResponse, ErrorData> {
        let rule_tool = &call.rule_tool;
        let mut forwarded_arguments = call.forwarded_arguments.clone();
        let question = asked.as_ref().map(|asked| asked.id);
        if let Some(asked) = &asked {
            if let Some((outcome, refused)) = not_approved(asked, rule_tool) {
                self.record(call.record(outcome, question));
                return Ok(CallToolResponse::Complete(refused));
            }
            if let Some(Value::Object(edited)) = asked.response.as_ref().and_then(|r| r.edited_arguments.clone()) {
                forwarded_arguments = Some(edited);
            }
        }
        let (connection, target) = if asked.is_some() {
            match self.after_the_wait(call).await? {
                Ok(goes_on) => goes_on,
                Err((outcome, refused)) => {
                    self.record(call.record(outcome, question));
                    return Ok(failed(refused));
                }
            }
        } else {
            (Arc::clone(&call.connection), call.target.clone())
        };
        let forwarded = self.forward(&connection, &target, scope, forwarded_arguments).await;
        let outcome = match &forwarded {
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => "error",
            Ok(_) => "forwarded",
            Err(_) => "error",
        };
        self.record(call.record(outcome, question));
        forwarded
    }

    /// Where an approved call goes once a person has decided, which may be days after it was asked: only if the
    /// token or session that made it still authenticates, and to the upstream as it is registered now (removed, the
    /// call is not made; changed, it goes to the new address), over the connection open now. Otherwise the audit's
    /// outcome and what the caller is told.
    async fn after_the_wait(
        &self,
        call: &Pending,
    ) -> Result<Result<(Arc<Connection>, Target), (&'static str, String)>, ErrorData> {
        let live = match crate::doors::auth::Proof::of(&call.parts.headers) {
            Some(proof) => proof.still_authenticates(&self.state, &call.caller).await.unwrap_or(false),
            None => false,
        };
        if !live {
            return Ok(Err((
                "cancelled",
                format!(
                    "The token or session that made the call {} was revoked while it waited for approval; the call \
                     was not made.",
                    call.rule_tool
                ),
            )));
        }
        let Some(target) = self.upstream(&call.caller, &call.upstream).await? else {
            return Ok(Err((
                "unreachable",
                format!(
                    "The upstream {} was removed while the call waited for approval; the call {} was not made.",
                    call.upstream, call.rule_tool
                ),
            )));
        };
        match self.connections.connect(&self.state, &target).await {
            Ok(connection) => Ok(Ok((connection, target))),
            Err(problem) => Ok(Err(("unreachable", not_reached(&call.upstream, &problem)))),
        }
    }

    /// For a client that declared MCP's tasks extension: asks the approval and answers with a task at once; the
    /// task waits for the decision and then finishes the call as [`Self::finish`] does, so the upstream is reached
    /// only once someone approved. Cancelling the task cancels the question, or the forwarded call.
    async fn call_as_task(
        &self,
        call: Pending,
        context: RequestContext<RoleServer>,
        input: app::types::NewQuestion,
    ) -> CallToolResponse {
        let asked = match mcp::ask(&self.state, &call.parts, &call.caller, input).await {
            Ok(asked) => asked,
            Err(refused) => {
                self.record(call.record("cancelled", None));
                return CallToolResponse::Complete(refused);
            }
        };
        let question = asked.row.clone();
        let question_id = question.id;
        let gateway = self.clone();
        let caller = call.caller.clone();
        let waiting = self.state.gateway_waits.wait_on(question.id, &caller).await;
        let task = self.tasks.start(&self.state, &caller, &question, move |stop| {
            // The forwarded call (and any elicitation it leads to) stops with the task, not with the request that
            // created it, which has been answered.
            let mut context = context;
            context.ct = stop;
            async move {
                let _waiting = waiting;
                let decided = mcp::settle(&gateway.state, &call.caller, asked).await;
                let asked = match decided {
                    Ok(asked) => asked,
                    Err(refused) => {
                        gateway.record(call.record("cancelled", Some(question_id)));
                        return Done::Finished(Ok(refused));
                    }
                };
                let was_cancelled =
                    (asked.status == QuestionStatus::Cancelled).then(|| cancelled(&asked, &call.rule_tool));
                let scope = gateway.scope(&call, context);
                let result = gateway.finish(&call, scope, Some(asked)).await;
                if let Some(message) = was_cancelled {
                    return Done::Cancelled(message);
                }
                Done::Finished(result.and_then(|response| match response {
                    CallToolResponse::Complete(result) => Ok(result),
                    // `forward` goes through the upstream's rounds of input itself: what it returns is final.
                    _ => Err(ErrorData::internal_error("the upstream's call did not end with a result", None)),
                }))
            }
        });
        CallToolResponse::Task(task)
    }

    /// The upstream of this name in the caller's workspace: the configuration file's, or the API's.
    async fn upstream(&self, caller: &Caller, name: &str) -> Result<Option<Target>, ErrorData> {
        if let Some(upstream) = self.state.configured_upstreams.find(caller.workspace_id(), name) {
            return Ok(Some(Target::Stdio(upstream)));
        }
        let rows = self.state.store.upstreams_cached(caller.workspace_id()).await.map_err(internal)?;
        Ok(rows.iter().find(|row| row.name == name).cloned().map(Target::Http))
    }

    /// Every upstream of the caller's workspace: the configuration file's, then the API's.
    async fn upstreams(&self, caller: &Caller) -> Result<Vec<Target>, ErrorData> {
        let mut targets: Vec<Target> =
            self.state.configured_upstreams.of(caller.workspace_id()).into_iter().map(Target::Stdio).collect();
        let rows = self.state.store.upstreams_cached(caller.workspace_id()).await.map_err(internal)?;
        targets.extend(rows.iter().cloned().map(Target::Http));
        Ok(targets)
    }

    /// Sends the call to the upstream and returns its answer as it is; `isError` at once when the upstream cannot
    /// be reached. The calling client's cancellation is passed on.
    ///
    /// An upstream may answer `input_required` (MCP 2026-07-28's multi round-trip requests): each elicitation it
    /// asks for becomes a `form` question, as an `elicitation/create` during a call does, and the call is sent
    /// again with the answers (`inputResponses`, under the same keys) and the upstream's `requestState` as it
    /// was, round after round, at most [`MRTR_ROUNDS_MAX`] times.
    async fn forward(
        &self,
        connection: &Arc<Connection>,
        row: &Target,
        scope: Arc<CallScope>,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut params = CallToolRequestParams::new(scope.tool.clone());
        params.arguments = arguments;
        for round in 1..=MRTR_ROUNDS_MAX {
            let asked = match self.round(connection, row, &scope, params.clone()).await? {
                Round::Done(response) => return Ok(response),
                Round::InputRequired(asked) => asked,
            };
            if round == MRTR_ROUNDS_MAX {
                break;
            }
            let requests = asked.input_requests.unwrap_or_default();
            let responses = match super::connections::answer_input_requests(&scope, requests).await {
                Ok(responses) => responses,
                Err(problem) => {
                    return Ok(failed(format!("The upstream {} {problem}; the call was not completed.", row.name())));
                }
            };
            if scope.context.ct.is_cancelled() {
                // The calling client gave up while its questions waited: no further round for nobody.
                return Err(ErrorData::internal_error("cancelled by the client", None));
            }
            params.input_responses = (!responses.is_empty()).then_some(responses);
            params.request_state = asked.request_state;
        }
        Ok(failed(format!(
            "The upstream {} still asked for input after {MRTR_ROUNDS_MAX} rounds; the gateway gave the call up.",
            row.name()
        )))
    }

    /// One round of a forwarded call.
    async fn round(
        &self,
        connection: &Arc<Connection>,
        row: &Target,
        scope: &Arc<CallScope>,
        params: CallToolRequestParams,
    ) -> Result<Round, ErrorData> {
        let started = Instant::now();
        let peer = connection.service.peer();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match peer.send_request_with_option(request, PeerRequestOptions::no_options()).await {
            Ok(handle) => handle,
            Err(err) => {
                let problem = super::connections::unreachable(&err);
                self.connections.drop_connection(&self.state, row, connection, &problem);
                return Ok(Round::Done(failed(format!("The upstream {} is {problem}", row.name()))));
            }
        };
        let id = handle.id.clone();
        let _registered = connection.calls.register(id.clone(), Arc::clone(scope));
        let answer = tokio::select! {
            answer = handle.await_response() => answer,
            () = scope.context.ct.cancelled() => {
                let cancel = CancelledNotificationParam::new(Some(id), Some("the gateway's client cancelled".into()));
                let _ = peer.notify_cancelled(cancel).await;
                return Err(ErrorData::internal_error("cancelled by the client", None));
            }
        };
        self.state.metrics.gateway_upstream(row.name(), started.elapsed());
        match answer {
            Ok(ServerResult::CallToolResult(mut result)) => {
                self.connections.healthy(&self.state, row);
                // An upstream on a protocol before 2026-07-28 leaves `resultType` out, which clients on 2026-07-28
                // require; rmcp strips it again for clients on an older protocol.
                result.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(Round::Done(CallToolResponse::Complete(result)))
            }
            Ok(ServerResult::InputRequiredResult(result)) => {
                self.connections.healthy(&self.state, row);
                Ok(Round::InputRequired(result))
            }
            Ok(_) => Ok(Round::Done(failed(format!(
                "The upstream {} answered the call with something else than a result",
                row.name()
            )))),
            Err(rmcp::ServiceError::McpError(error)) => {
                // The upstream refused the call itself (bad arguments, say): its error, as it said it.
                self.connections.healthy(&self.state, row);
                Err(error)
            }
            Err(err) => {
                let problem = super::connections::unreachable(&err);
                self.connections.drop_connection(&self.state, row, connection, &problem);
                Ok(Round::Done(failed(format!("The upstream {} is {problem}", row.name()))))
            }
        }
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("holdpoint-gateway", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Holdpoint's MCP gateway: the tools of the workspace's MCP servers, named <server>__<tool>. Each \
                 call is decided by the workspace's approval rules: it runs, waits for a person's approval, or is \
                 refused with the reason.",
            )
    }

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

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller_of(parts_of(&context)?)?;
        let targets = self.upstreams(&caller).await?;
        let listed = futures::future::join_all(targets.iter().map(|row| async move {
            // The opening goes on when the list stops waiting for it: a process still starting is there for the
            // next list.
            let (connections, state, target) = (Arc::clone(&self.connections), self.state.clone(), row.clone());
            let opening = tokio::spawn(async move { connections.connect(&state, &target).await });
            let listing = async {
                let connection = opening.await.map_err(|e| format!("could not be connected: {e}"))??;
                connection.list_tools(LIST_TIMEOUT).await
            };
            match tokio::time::timeout(LIST_TIMEOUT, listing).await {
                Ok(Ok(tools)) => Some((row, tools)),
                Ok(Err(problem)) => {
                    self.connections.failed(&self.state, row, &problem);
                    None
                }
                Err(_) => {
                    let problem = format!("did not list its tools within {} ms", LIST_TIMEOUT.as_millis());
                    self.connections.failed(&self.state, row, &problem);
                    None
                }
            }
        }))
        .await;
        let mut tools = Vec::new();
        for (row, upstream_tools) in listed.into_iter().flatten() {
            for tool in upstream_tools.iter() {
                let mut tool = tool.clone();
                tool.name = format!("{}{SEPARATOR}{}", row.name(), tool.name).into();
                tools.push(tool);
            }
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let parts = parts_of(&context)?.clone();
        let caller = caller_of(&parts)?;
        let Some((upstream, tool)) = request.name.split_once(SEPARATOR) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}: gateway tools are named <upstream>{SEPARATOR}<tool>", request.name),
                None,
            ));
        };
        let Some(row) = self.upstream(&caller, upstream).await? else {
            return Err(ErrorData::invalid_params(
                format!("unknown upstream {upstream:?} (tool {:?})", request.name),
                None,
            ));
        };
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let rule_tool = format!("mcp:{upstream}/{tool}");
        let rule_call =
            ToolCall { tool: &rule_tool, arguments: &arguments, agent: Some(&caller.principal.name), run: None };
        let verdict = self.state.rules().decide(caller.workspace_id(), &rule_call).await.map_err(|err| match err {
            AppError::Internal(cause) => internal(cause),
            other => ErrorData::invalid_request(other.to_string(), None),
        })?;
        let record = |outcome: &'static str, question: Option<uuid::Uuid>| Record {
            caller: &caller,
            upstream,
            tool,
            arguments: &arguments,
            verdict: Some(&verdict),
            outcome,
            started,
            question,
        };
        if verdict.decision == RuleDecision::Deny {
            self.record(record("denied", None));
            let rule =
                verdict.rule.as_deref().map_or_else(|| "the rules' default".to_owned(), |r| format!("rule {r:?}"));
            let reason = verdict.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            return Ok(failed(format!("Denied by {rule}{reason}. The call {rule_tool} was not made.")));
        }
        let connection = match self.connections.connect(&self.state, &row).await {
            Ok(connection) => connection,
            Err(problem) => {
                self.record(record("unreachable", None));
                return Ok(failed(not_reached(upstream, &problem)));
            }
        };
        match connection.has_tool(tool, LIST_TIMEOUT).await {
            Ok(true) => {}
            Ok(false) => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {tool:?} of upstream {upstream:?} (tool {:?})", request.name),
                    None,
                ));
            }
            Err(problem) => {
                self.connections.drop_connection(&self.state, &row, &connection, &problem);
                self.record(record("unreachable", None));
                return Ok(failed(format!("The upstream {upstream} {problem}")));
            }
        }
        let call = Pending {
            caller: caller.clone(),
            upstream: upstream.to_owned(),
            tool: tool.to_owned(),
            rule_tool: rule_tool.clone(),
            arguments: arguments.clone(),
            forwarded_arguments: request.arguments.clone(),
            verdict: verdict.clone(),
            started,
            connection,
            target: row,
            parts: parts.clone(),
        };
        // One person's grant does not stand for an approval that needs several people, or named ones.
        let grantable = verdict.ask.required_approvals.unwrap_or(1) <= 1 && verdict.ask.eligible.is_none();
        if verdict.decision == RuleDecision::Ask {
            let grant_call = crate::grants::Call {
                workspace_id: caller.workspace_id(),
                tool_name: &rule_tool,
                arguments: &arguments,
                run_id: None,
                agent: Some(crate::grants::token_agent(caller.principal.id)),
            };
            let granted = if grantable {
                crate::grants::let_through(
                    self.state.store.as_ref(),
                    &grant_call,
                    json!({ "source": "mcp_gateway", "upstream": upstream, "tool": tool }),
                )
                .await
                .map_err(internal)?
            } else {
                None
            };
            if granted.is_none() {
                let title = format!("Allow {tool} on {upstream}?");
                let input = crate::rules::approval_question(&rule_call, &verdict, Some(title));
                if tasks::wanted(&context) {
                    return Ok(self.call_as_task(call, context, input).await);
                }
                let (state, owners) = (&self.state, &self.owners);
                let asked = match mcp::ask(state, &parts, &caller, input).await {
                    Ok(asked) => asked,
                    Err(refused) => {
                        self.record(record("cancelled", None));
                        return Ok(CallToolResponse::Complete(refused));
                    }
                };
                let question_id = asked.row.id;
                let waited =
                    mcp::wait_for(state, owners, &parts, &context, &caller, asked, AtShutdown::Cancelled).await;
                let asked = match waited {
                    Ok(asked) => asked,
                    Err(refused) => {
                        self.record(record("cancelled", Some(question_id)));
                        return Ok(CallToolResponse::Complete(refused));
                    }
                };
                let scope = self.scope(&call, context);
                return self.finish(&call, scope, Some(asked)).await;
            }
        }
        let scope = self.scope(&call, context);
        self.finish(&call, scope, None).await
    }
}
