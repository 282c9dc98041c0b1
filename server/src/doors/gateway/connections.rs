//! The gateway's side as an MCP client: one connection per upstream (rmcp's client over its streamable HTTP
//! transport, through the outbound guard, or over a local process's stdin and stdout for the configuration file's
//! upstreams), kept while it works and opened again after it fails: a process that died is started again when the
//! gateway next needs it (not sooner than [`RESTART_BACKOFF`] after a start that failed), and every process is
//! killed when the server shuts down.
//!
//! - An upstream that cannot be reached fails at once: the TCP connect gives up after [`CONNECT_TIMEOUT`] and the
//!   whole opening (the `initialize` exchange) after [`OPEN_TIMEOUT`]; a call or a list never waits on a dead host.
//! - An HTTP connection is opened with MCP 2026-07-28's `server/discover` (the version whose servers ask for input
//!   with multi round-trip requests, answered in [`answer_input_requests`]), and with `initialize` for servers that
//!   do not know it.
//! - A connection is for one version of the upstream's row (its `updated_at`): a changed URL or headers opens a new
//!   one.
//! - An upstream may ask for input during a call (`elicitation/create`): the request arrives on the call's own
//!   response stream, which tells which call it belongs to ([`Calls`]); it becomes a `form` question to the calling
//!   person (routed like the call's approval when the caller is a token), and its outcome is the answer: `accept`
//!   with the values, `decline` when the question was cancelled, `cancel` when it expired. A process has one
//!   stream, which tells nothing: its elicitation belongs to the call in flight when there is exactly one, and is
//!   declined when there are several.
//! - How each upstream fares is written to its row (last success, last error) when it changes, or a minute after it
//!   was last written, off the call's path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use app::types::{AssigneeRequest, NewQuestion, QuestionKind, QuestionStatus, ResponseType, Urgency};
use chrono::{DateTime, Utc};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, Implementation,
    InputRequest, InputRequests, InputResponses, ProtocolVersion, RequestId, Tool,
};
use rmcp::service::{InboundStreamOrigin, RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::credentials::{Caller, Credential};
use crate::doors::mcp::{self, AtShutdown, SessionOwners};
use crate::egress::GuardedClient;
use crate::state::AppState;
use crate::store::UpstreamRow;

use super::stdio::ConfiguredUpstream;

/// How long the TCP connection to an upstream may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long opening a connection (TCP, TLS and MCP's `initialize`) may take.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a configured upstream's process may take to start and answer `initialize`: programs load (an
/// interpreter, its packages) before they speak.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an upstream that keeps answering has its health written.
const HEALTH_REWRITE: Duration = Duration::from_secs(60);
/// How long an elicitation waits for the call it came with to be registered (it is, as the call is sent).
const SCOPE_WAIT: Duration = Duration::from_secs(2);
/// How long after a process failed to start the gateway answers with that failure rather than starting it again:
/// a command that cannot start is not started once per call.
pub const RESTART_BACKOFF: Duration = Duration::from_secs(1);

/// An upstream the gateway connects to.
#[derive(Clone)]
pub enum Target {
    /// Registered through the API: streamable HTTP at its URL.
    Http(UpstreamRow),
    /// From the configuration file: a local process.
    Stdio(Arc<ConfiguredUpstream>),
}

impl Target {
    pub fn id(&self) -> Uuid {
        match self {
            Target::Http(row) => row.id,
            Target::Stdio(upstream) => upstream.id,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Target::Http(row) => &row.name,
            Target::Stdio(upstream) => &upstream.spec.name,
        }
    }

    /// What a connection is for: a changed row is another connection.
    fn version(&self) -> DateTime<Utc> {
        match self {
            Target::Http(row) => row.updated_at,
            Target::Stdio(upstream) => upstream.since,
        }
    }
}

/// The calls in flight on one connection, by the id of their `tools/call` request, so that an upstream's
/// request made during one of them (an elicitation) reaches the right caller.
#[derive(Default)]
pub struct Calls {
    scopes: Mutex<HashMap<RequestId, Arc<CallScope>>>,
    registered: tokio::sync::Notify,
}

impl Calls {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, Arc<CallScope>>> {
        self.scopes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a call until the returned guard drops.
    pub fn register(self: &Arc<Self>, id: RequestId, scope: Arc<CallScope>) -> Registered {
        self.lock().insert(id.clone(), scope);
        self.registered.notify_waiters();
        Registered { calls: Arc::clone(self), id }
    }

    /// The call `id`, waiting a moment for it to be registered: the upstream may ask before the gateway has filed
    /// the request it just sent.
    async fn scope(&self, id: &RequestId) -> Option<Arc<CallScope>> {
        let deadline = tokio::time::Instant::now() + SCOPE_WAIT;
        loop {
            let registered = self.registered.notified();
            if let Some(scope) = self.lock().get(id) {
                return Some(Arc::clone(scope));
            }
            if tokio::time::timeout_at(deadline, registered).await.is_err() {
                return None;
            }
        }
    }

    /// The one call in flight, waiting a moment for it to be registered; `None` when there are several (a request
    /// on a connection's single stream cannot tell which it belongs to).
    async fn only_scope(&self) -> Option<Arc<CallScope>> {
        let deadline = tokio::time::Instant::now() + SCOPE_WAIT;
        loop {
            let registered = self.registered.notified();
            {
                let scopes = self.lock();
                match scopes.len() {
                    0 => {}
                    1 => return scopes.values().next().cloned(),
                    _ => return None,
                }
            }
            if tokio::time::timeout_at(deadline, registered).await.is_err() {
                return None;
            }
        }
    }
}

/// A call registered in [`Calls`]; unregisters it when dropped.
pub struct Registered {
    calls: Arc<Calls>,
    id: RequestId,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.id);
    }
}

/// Who made a forwarded call, and how a question it leads to is asked: what an elicitation needs.
pub struct CallScope {
    pub state: AppState,
    pub owners: Arc<SessionOwners>,
    /// The gateway request's HTTP parts (the caller's rate limits count its questions).
    pub parts: http::request::Parts,
    /// The calling client's request: progress goes to it, and its cancellation ends the wait.
    pub context: RequestContext<RoleServer>,
    pub caller: Caller,
    pub upstream: String,
    pub tool: String,
    /// Where a question goes when the caller is not a person: the call's own approval routing.
    pub assignee: Option<AssigneeRequest>,
    pub urgency: Option<Urgency>,
    pub timeout_seconds: Option<i64>,
}

/// The gateway's MCP client handler of one upstream connection.
#[derive(Clone)]
pub struct UpstreamClient {
    calls: Arc<Calls>,
    /// Whether the connection is one stream (a process's stdio), whose requests do not tell which call they are of.
    single_stream: bool,
}

impl ClientHandler for UpstreamClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let scope = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => self.calls.scope(id).await,
            // One stream for everything: the call in flight, if it is the only one.
            _ if self.single_stream => self.calls.only_scope().await,
            // Not asked during a call (the standalone stream): nobody to ask on behalf of.
            _ => None,
        };
        let Some(scope) = scope else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request else {
            // A URL elicitation sends a person to a page the gateway cannot show in a question.
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        Ok(elicit(&scope, &message, &schema).await)
    }

    fn get_info(&self) -> ClientConfig {
        // Form elicitation only: what a question can carry.
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({ "elicitation": { "form": {} } })).unwrap_or_default();
        ClientConfig::new(capabilities, Implementation::new("holdpoint-gateway", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::V_2025_06_18)
    }
}

/// Asks the elicitation as a `form` question and turns its outcome into the elicitation's result.
async fn elicit(scope: &CallScope, message: &str, schema: &Value) -> ElicitResult {
    // The schema becomes the question's fields as any question's `response_schema` does; one that cannot (a keyword
    // outside elicitation's primitives) is declined here rather than asked as something else.
    let mut faults = crate::validation::FieldErrors::default();
    crate::questions::response_schema::fields_from_schema(schema, "requestedSchema", &mut faults);
    if !faults.is_empty() {
        tracing::info!(upstream = %scope.upstream, faults = ?faults.fields(), "an elicitation's schema has no form equivalent; declined");
        return ElicitResult::new(ElicitationAction::Decline);
    }
    let mut title: String = message.chars().take(300).collect();
    if title.trim().is_empty() {
        title = format!("{} asks for input", scope.upstream);
    }
    let assignee = match scope.caller.credential {
        // A person calling through their browser session answers for themselves.
        Credential::Session { .. } => {
            Some(AssigneeRequest { user: Some(scope.caller.principal.name.clone()), role: None, strategy: None })
        }
        _ => scope.assignee.clone(),
    };
    let input = NewQuestion {
        kind: Some(QuestionKind::Blocking),
        response_type: Some(ResponseType::Form),
        title,
        body: format!(
            "The MCP server **{}** asks this during a call of its tool `{}`:\n\n{message}\n",
            scope.upstream, scope.tool
        ),
        response_schema: Some(schema.clone()),
        context: Some(json!({ "source": "mcp_gateway", "upstream": scope.upstream, "tool": scope.tool })),
        assignee,
        urgency: scope.urgency,
        timeout_seconds: scope.timeout_seconds,
        ..Default::default()
    };
    let asked = mcp::ask_and_wait(
        &scope.state,
        &scope.owners,
        &scope.parts,
        &scope.context,
        &scope.caller,
        input,
        AtShutdown::Cancelled,
    )
    .await;
    let question = match asked {
        Ok(question) => question,
        Err(refused) => {
            tracing::info!(upstream = %scope.upstream, result = ?refused.content, "an elicitation was not asked");
            return ElicitResult::new(ElicitationAction::Cancel);
        }
    };
    match question.status {
        QuestionStatus::Answered | QuestionStatus::Defaulted => {
            let value = question.response.map(|r| r.value).unwrap_or(Value::Null);
            ElicitResult::new(ElicitationAction::Accept).with_content(content_for(schema, value))
        }
        QuestionStatus::Cancelled => ElicitResult::new(ElicitationAction::Decline),
        QuestionStatus::Expired | QuestionStatus::Pending => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// Answers one round of an upstream's multi round-trip request (`input_required`): each elicitation is asked as a
/// `form` question as [`elicit`] asks an `elicitation/create` (all of the round's at once), its outcome the response
/// under the request's key; `roots/list` is answered with no roots (the gateway has none to offer). `Err` says what
/// the gateway cannot answer: a request to sample a language model, or a kind it does not know.
pub async fn answer_input_requests(scope: &CallScope, requests: InputRequests) -> Result<InputResponses, String> {
    let mut responses = InputResponses::new();
    let mut elicitations = Vec::new();
    for (key, request) in requests {
        match request {
            InputRequest::Elicitation(request) => elicitations.push((key, request.params)),
            InputRequest::ListRoots(_) => {
                responses.insert(key, json!({ "roots": [] }));
            }
            InputRequest::CreateMessage(_) => {
                return Err(format!("asked to sample a language model ({key:?}), which the gateway does not do"));
            }
            // rmcp's enum is non-exhaustive: a kind added later.
            _ => return Err(format!("asked for input of a kind the gateway does not answer ({key:?})")),
        }
    }
    let answered = futures::future::join_all(elicitations.into_iter().map(|(key, params)| async move {
        let result = match params {
            ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
                elicit(scope, &message, &schema).await
            }
            // A URL elicitation sends a person to a page the gateway cannot show in a question.
            _ => ElicitResult::new(ElicitationAction::Decline),
        };
        (key, serde_json::to_value(result).unwrap_or(Value::Null))
    }))
    .await;
    responses.extend(answered);
    Ok(responses)
}

/// A form answer as the elicitation's content: each value as its property's type has it (an `integer` property
/// gets an integer where the form holds a whole number written with a fraction, `3.0`). An integer stays exactly
/// as it was answered, however large: through a float, one past 2^53 would reach the upstream as another number.
fn content_for(schema: &Value, answer: Value) -> Value {
    let Value::Object(answer) = answer else { return Value::Object(Map::new()) };
    let properties = schema.get("properties").and_then(Value::as_object);
    let content = answer
        .into_iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| {
            let integer =
                properties.and_then(|p| p.get(&key)).and_then(|p| p.get("type")).is_some_and(|t| t == "integer");
            let whole = value.as_number().filter(|n| n.is_f64()).and_then(|n| n.as_f64()).filter(|n| n.fract() == 0.0);
            let value = match whole {
                // Only a float that is an i64 exactly: `as` would saturate one beyond.
                Some(number) if integer && number.abs() < 2f64.powi(63) => json!(number as i64),
                _ => value,
            };
            (key, value)
        })
        .collect();
    Value::Object(content)
}

/// An open connection to one version of an upstream.
pub struct Connection {
    version: DateTime<Utc>,
    pub service: RunningService<RoleClient, UpstreamClient>,
    pub calls: Arc<Calls>,
    /// The upstream's tool names as last listed.
    tools: Mutex<Option<Arc<Vec<Tool>>>>,
}

impl Connection {
    /// The upstream's tools: listed now, bounded by `within`.
    pub async fn list_tools(&self, within: Duration) -> Result<Arc<Vec<Tool>>, String> {
        let listed = tokio::time::timeout(within, self.service.peer().list_all_tools())
            .await
            .map_err(|_| format!("did not list its tools within {} ms", within.as_millis()))?
            .map_err(|e| format!("could not list its tools: {e}"))?;
        let listed = Arc::new(listed);
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&listed));
        Ok(listed)
    }

    /// Whether the upstream has a tool of that name: as last listed, or listed again when it was not there.
    pub async fn has_tool(&self, name: &str, within: Duration) -> Result<bool, String> {
        let known = self.tools.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if known.is_some_and(|tools| tools.iter().any(|tool| tool.name == name)) {
            return Ok(true);
        }
        Ok(self.list_tools(within).await?.iter().any(|tool| tool.name == name))
    }
}

/// Starts a configured upstream's process and opens the MCP session over its stdin and stdout. A process that does
/// not complete the `initialize` exchange within [`START_TIMEOUT`] is killed.
async fn open_stdio(upstream: &ConfiguredUpstream) -> Result<Connection, String> {
    let transport = super::stdio::spawn(&upstream.spec)
        .map_err(|e| format!("could not be started ({:?}): {e}", upstream.spec.command))?;
    let calls = Arc::new(Calls::default());
    let handler = UpstreamClient { calls: Arc::clone(&calls), single_stream: true };
    let service = tokio::time::timeout(START_TIMEOUT, handler.serve(transport))
        .await
        .map_err(|_| format!("was started but did not answer within {} s", START_TIMEOUT.as_secs()))?
        .map_err(|e| format!("was started but did not speak MCP: {}", crate::error::error_chain(&e)))?;
    Ok(Connection { version: upstream.since, service, calls, tools: Mutex::new(None) })
}

/// How an upstream's health was last written.
struct HealthMark {
    ok: bool,
    written: Instant,
}

/// The gateway's connections to its upstreams, across workspaces, by upstream id.
pub struct Connections {
    http: GuardedClient,
    open: Mutex<HashMap<Uuid, Arc<Connection>>>,
    /// One opening at a time per upstream: callers arriving together share the connection (and a process is
    /// started once).
    opening: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>,
    /// When a process last failed to start, and why.
    failed_starts: Mutex<HashMap<Uuid, (Instant, String)>>,
    health: Mutex<HashMap<Uuid, HealthMark>>,
}

impl Connections {
    pub fn new(allow_private: bool) -> Result<Self, reqwest::Error> {
        let builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("Holdpoint-Gateway/", env!("CARGO_PKG_VERSION")));
        let http = super::egress(allow_private).client(builder)?;
        Ok(Connections {
            http,
            open: Mutex::new(HashMap::new()),
            opening: Mutex::new(HashMap::new()),
            failed_starts: Mutex::new(HashMap::new()),
            health: Mutex::new(HashMap::new()),
        })
    }

    /// Closes every connection: each process is told to stop (its stdin closed) and killed. At shutdown.
    pub fn close_all(&self) {
        for (_, connection) in self.open_connections().drain() {
            connection.service.cancellation_token().cancel();
        }
    }

    fn open_connections(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<Connection>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The open connection to `target`, if it still works.
    fn live(&self, target: &Target) -> Option<Arc<Connection>> {
        let open = self.open_connections();
        let connection = open.get(&target.id())?;
        let live = connection.version == target.version()
            && !connection.service.is_closed()
            && !connection.service.peer().is_transport_closed();
        live.then(|| Arc::clone(connection))
    }

    /// The connection to `target`: the open one, or a new one (a process started anew).
    pub async fn connect(&self, state: &AppState, target: &Target) -> Result<Arc<Connection>, String> {
        if let Some(open) = self.live(target) {
            return Ok(open);
        }
        let gate = {
            let mut opening = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(opening.entry(target.id()).or_default())
        };
        let _one_at_a_time = gate.lock().await;
        if let Some(open) = self.live(target) {
            return Ok(open);
        }
        let recent_failure = self
            .failed_starts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&target.id())
            .filter(|(at, _)| at.elapsed() < RESTART_BACKOFF)
            .map(|(_, problem)| problem.clone());
        if let Some(problem) = recent_failure {
            return Err(problem);
        }
        let opened = match target {
            Target::Http(row) => self.open_http(row).await,
            Target::Stdio(upstream) => {
                let opened = open_stdio(upstream).await;
                if let Err(problem) = &opened {
                    let mut failed = self.failed_starts.lock().unwrap_or_else(PoisonError::into_inner);
                    failed.insert(upstream.id, (Instant::now(), problem.clone()));
                }
                opened
            }
        };
        match opened {
            Ok(connection) => {
                self.failed_starts.lock().unwrap_or_else(PoisonError::into_inner).remove(&target.id());
                let connection = Arc::new(connection);
                if let Some(stale) = self.open_connections().insert(target.id(), Arc::clone(&connection)) {
                    stale.service.cancellation_token().cancel();
                }
                self.healthy(state, target);
                Ok(connection)
            }
            Err(problem) => {
                self.failed(state, target, &problem);
                Err(problem)
            }
        }
    }

    async fn open_http(&self, row: &UpstreamRow) -> Result<Connection, String> {
        let url = url::Url::parse(&row.url).map_err(|e| format!("its URL is not valid: {e}"))?;
        if let Some(refusal) = self.http.refusal(&url) {
            return Err(format!("not connected: {refusal}"));
        }
        let mut headers = HashMap::new();
        for (name, value) in &row.headers.0 {
            let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header {name}: {e}"))?;
            let value = http::HeaderValue::from_str(value).map_err(|e| format!("header {name}: {e}"))?;
            headers.insert(name, value);
        }
        let config = StreamableHttpClientTransportConfig::with_uri(row.url.clone())
            .custom_headers(headers)
            .reinit_on_expired_session(true);
        let transport = || StreamableHttpClientTransport::with_client(self.http.inner().clone(), config.clone());
        let calls = Arc::new(Calls::default());
        let handler = UpstreamClient { calls: Arc::clone(&calls), single_stream: false };
        let opening = async {
            // MCP 2026-07-28 first (`server/discover`, then self-contained requests): the version whose servers ask
            // for input with multi round-trip requests. A server that does not know it and says so with a JSON-RPC
            // error gets `initialize` on the same connection; one that refuses otherwise (an HTTP 400 without a
            // session) is opened again the older way.
            let lifecycle = ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_06_18),
            };
            match handler.clone().serve_with_lifecycle(transport(), lifecycle).await {
                Ok(service) => Ok(service),
                Err(modern) => {
                    tracing::debug!(upstream = %row.name, error = %modern, "server/discover refused; initialize");
                    handler.serve(transport()).await
                }
            }
        };
        let service = tokio::time::timeout(OPEN_TIMEOUT, opening)
            .await
            .map_err(|_| format!("did not answer within {} s", OPEN_TIMEOUT.as_secs()))?
            .map_err(|e| unreachable(&e))?;
        Ok(Connection { version: row.updated_at, service, calls, tools: Mutex::new(None) })
    }

    /// Forgets `connection`, which failed, so that the next call opens another (a process is killed, and started
    /// anew next time). One opened since in its place is left alone: a call that waited long for its approval may
    /// fail on a connection that has already been replaced.
    pub fn drop_connection(&self, state: &AppState, target: &Target, connection: &Arc<Connection>, problem: &str) {
        {
            let mut open = self.open_connections();
            if open.get(&target.id()).is_some_and(|current| Arc::ptr_eq(current, connection)) {
                open.remove(&target.id());
            }
        }
        connection.service.cancellation_token().cancel();
        self.failed(state, target, problem);
    }

    /// Records that the upstream answered.
    pub fn healthy(&self, state: &AppState, target: &Target) {
        self.record(state, target, None);
    }

    /// Records that the upstream failed, and why.
    pub fn failed(&self, state: &AppState, target: &Target, problem: &str) {
        self.record(state, target, Some(problem));
    }

    fn record(&self, state: &AppState, target: &Target, problem: Option<&str>) {
        let row = match target {
            Target::Http(row) => row,
            // In memory, where the configured upstreams are: no write to wait for.
            Target::Stdio(upstream) => return upstream.record(crate::store::now(), problem),
        };
        let ok = problem.is_none();
        {
            let mut marks = self.health.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(mark) = marks.get(&row.id)
                && mark.ok == ok
                && ok
                && mark.written.elapsed() < HEALTH_REWRITE
            {
                return;
            }
            marks.insert(row.id, HealthMark { ok, written: Instant::now() });
        }
        // Off the call's path: health is for people reading the list, a call never waits for it.
        let store = Arc::clone(&state.store);
        let (workspace_id, id) = (row.workspace_id, row.id);
        let problem: Option<String> = problem.map(|p| p.chars().take(500).collect());
        tokio::spawn(async move {
            if let Err(err) =
                store.record_upstream_health(workspace_id, id, crate::store::now(), problem.as_deref()).await
            {
                tracing::warn!(error = %err, upstream = %id, "could not record an upstream's health");
            }
        });
    }
}

/// Why an upstream could not be reached, for its health and the caller's result, in words a person reads: the
/// innermost cause (the outbound guard's refusal, say), without the Rust type names rmcp's transport errors print
/// in brackets (`[rmcp::transport::worker::WorkerTransport<…>]`).
pub fn unreachable(error: &(dyn std::error::Error + 'static)) -> String {
    let mut root = error;
    while let Some(cause) = root.source() {
        root = cause;
    }
    let said = root.to_string();
    let mut readable = String::with_capacity(said.len());
    let mut rest = said.as_str();
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|close| open + close) else { break };
        readable.push_str(&rest[..open]);
        if !rest[open..close].contains("::") {
            readable.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    readable.push_str(rest);
    format!("unreachable: {}", readable.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::{content_for, unreachable};
    use serde_json::json;

    #[test]
    fn an_answer_reaches_the_upstream_as_its_schema_types_it_and_integers_exactly() {
        let schema = json!({ "type": "object", "properties": {
            "account": { "type": "integer" }, "copies": { "type": "integer" }, "weight": { "type": "number" },
            "note": { "type": "string" } } });
        let answer: serde_json::Value = serde_json::from_str(
            r#"{ "account": 9007199254740993, "copies": 3.0, "weight": 2.0, "note": "7", "skipped": null }"#,
        )
        .unwrap();
        let content = content_for(&schema, answer);
        // serde_json tells 3 from 3.0, so `copies` is checked an integer here.
        assert_eq!(content, json!({ "account": 9_007_199_254_740_993_u64, "copies": 3, "weight": 2.0, "note": "7" }));
        // Beyond i64: a u64 stays, and a whole float stays a float rather than saturating to i64::MAX.
        let content = content_for(&schema, json!({ "account": u64::MAX, "copies": 1e300 }));
        assert_eq!(content, json!({ "account": u64::MAX, "copies": 1e300 }));
    }

    #[test]
    fn an_unreachable_upstream_is_described_without_rust_type_names() {
        let said = std::io::Error::other(
            "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::X<reqwest::Client>>] \
             error: Client error: error sending request for url (http://127.0.0.1:9/mcp)",
        );
        assert_eq!(
            unreachable(&said),
            "unreachable: Send message error Transport error: Client error: error sending request for url \
             (http://127.0.0.1:9/mcp)"
        );
        // Brackets that are no type name stay, and so does everything else.
        let plain = std::io::Error::other("refused [by policy] at 10:00");
        assert_eq!(unreachable(&plain), "unreachable: refused [by policy] at 10:00");
    }
}
