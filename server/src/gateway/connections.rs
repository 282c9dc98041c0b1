//! The gateway's side as an MCP client: one connection per upstream (rmcp's client over its streamable HTTP
//! transport, through the outbound guard), kept while it works and opened again after it fails.
//!
//! - An upstream that cannot be reached fails at once: the TCP connect gives up after [`CONNECT_TIMEOUT`] and the
//!   whole opening (the `initialize` exchange) after [`OPEN_TIMEOUT`]; a call or a list never waits on a dead host.
//! - A connection is for one version of the upstream's row (its `updated_at`): a changed URL or headers opens a new
//!   one.
//! - An upstream may ask for input during a call (`elicitation/create`): the request arrives on the call's own
//!   response stream, which tells which call it belongs to ([`Calls`]); it becomes a `form` question to the calling
//!   person (routed like the call's approval when the caller is a token), and its outcome is the answer: `accept`
//!   with the values, `decline` when the question was cancelled, `cancel` when it expired.
//! - How each upstream fares is written to its row (last success, last error) when it changes, or a minute after it
//!   was last written, off the call's path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use app::types::{
    AssigneeRequest, FormField, NewQuestion, QuestionKind, QuestionOption, QuestionStatus, ResponseType, Urgency,
};
use chrono::{DateTime, Utc};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, Implementation,
    ProtocolVersion, RequestId, Tool,
};
use rmcp::service::{InboundStreamOrigin, RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::credentials::{Caller, Credential};
use crate::egress::GuardedClient;
use crate::mcp::SessionOwners;
use crate::state::AppState;
use crate::store::UpstreamRow;

/// How long the TCP connection to an upstream may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long opening a connection (TCP, TLS and MCP's `initialize`) may take.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an upstream that keeps answering has its health written.
const HEALTH_REWRITE: Duration = Duration::from_secs(60);
/// How long an elicitation waits for the call it came with to be registered (it is, as the call is sent).
const SCOPE_WAIT: Duration = Duration::from_secs(2);

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
}

impl ClientHandler for UpstreamClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(InboundStreamOrigin::OutboundRequest(id)) = context.extensions.get::<InboundStreamOrigin>() else {
            // Not asked during a call (the standalone stream): nobody to ask on behalf of.
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let Some(scope) = self.calls.scope(id).await else {
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
    let Some(fields) = form_fields(schema) else {
        tracing::info!(upstream = %scope.upstream, "an elicitation's schema has no form equivalent; declined");
        return ElicitResult::new(ElicitationAction::Decline);
    };
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
        fields: fields.clone(),
        context: Some(json!({ "source": "mcp_gateway", "upstream": scope.upstream, "tool": scope.tool })),
        assignee,
        urgency: scope.urgency,
        timeout_seconds: scope.timeout_seconds,
        ..Default::default()
    };
    let asked =
        crate::mcp::ask_and_wait(&scope.state, &scope.owners, &scope.parts, &scope.context, &scope.caller, input).await;
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

/// The form fields of an elicitation's `requestedSchema`, as far as the question's field types go: strings are
/// `text` (or `choice` with `enum` or `oneOf` consts), numbers and integers `number`, booleans `boolean`, arrays of
/// enumerated strings `multi_choice`. `None` when a property has none of these shapes or there are too many.
pub fn form_fields(schema: &Value) -> Option<Vec<FormField>> {
    let properties = schema.get("properties")?.as_object()?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if properties.is_empty() || properties.len() > 10 {
        return None;
    }
    let mut fields = Vec::with_capacity(properties.len());
    for (key, property) in properties {
        let label = ["title", "description"]
            .iter()
            .find_map(|word| property.get(*word).and_then(Value::as_str))
            .unwrap_or(key)
            .chars()
            .take(200)
            .collect();
        let (response_type, options) = match property.get("type").and_then(Value::as_str) {
            Some("string") => match choices(property) {
                Some(options) => (ResponseType::Choice, options),
                None => (ResponseType::Text, Vec::new()),
            },
            Some("number" | "integer") => (ResponseType::Number, Vec::new()),
            Some("boolean") => (ResponseType::Boolean, Vec::new()),
            Some("array") => (ResponseType::MultiChoice, choices(property.get("items")?)?),
            _ => return None,
        };
        let required = required.contains(&key.as_str());
        fields.push(FormField {
            key: key.clone(),
            label,
            response_type,
            options,
            required,
            accept: Vec::new(),
            max_bytes: None,
        });
    }
    Some(fields)
}

/// A property's choices: `enum` (with `enumNames` as labels when given), or `oneOf`/`anyOf` of titled consts.
fn choices(property: &Value) -> Option<Vec<QuestionOption>> {
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        let names = property.get("enumNames").and_then(Value::as_array);
        return values
            .iter()
            .enumerate()
            .map(|(i, value)| {
                let value = value.as_str()?.to_owned();
                let label = names.and_then(|n| n.get(i)).and_then(Value::as_str).unwrap_or(&value).to_owned();
                Some(QuestionOption { value, label, description: None })
            })
            .collect();
    }
    let consts = property.get("oneOf").or_else(|| property.get("anyOf"))?.as_array()?;
    consts
        .iter()
        .map(|choice| {
            let value = choice.get("const")?.as_str()?.to_owned();
            let label = choice.get("title").and_then(Value::as_str).unwrap_or(&value).to_owned();
            Some(QuestionOption { value, label, description: None })
        })
        .collect()
}

/// A form answer as the elicitation's content: each value as its property's type has it (an `integer` property
/// gets an integer where the form holds a number).
fn content_for(schema: &Value, answer: Value) -> Value {
    let Value::Object(answer) = answer else { return Value::Object(Map::new()) };
    let properties = schema.get("properties").and_then(Value::as_object);
    let content = answer
        .into_iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| {
            let integer =
                properties.and_then(|p| p.get(&key)).and_then(|p| p.get("type")).is_some_and(|t| t == "integer");
            let value = match value.as_f64() {
                Some(number) if integer && number.fract() == 0.0 => json!(number as i64),
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

/// How an upstream's health was last written.
struct HealthMark {
    ok: bool,
    written: Instant,
}

/// The gateway's connections to its upstreams, across workspaces, by upstream id.
pub struct Connections {
    http: GuardedClient,
    open: Mutex<HashMap<Uuid, Arc<Connection>>>,
    health: Mutex<HashMap<Uuid, HealthMark>>,
}

impl Connections {
    pub fn new(allow_private: bool) -> Result<Self, reqwest::Error> {
        let builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("Holdpoint-Gateway/", env!("CARGO_PKG_VERSION")));
        let http = super::egress(allow_private).client(builder)?;
        Ok(Connections { http, open: Mutex::new(HashMap::new()), health: Mutex::new(HashMap::new()) })
    }

    fn open_connections(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<Connection>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection to `row`'s upstream: the open one, or a new one.
    pub async fn connect(&self, state: &AppState, row: &UpstreamRow) -> Result<Arc<Connection>, String> {
        if let Some(open) = self.open_connections().get(&row.id)
            && open.version == row.updated_at
            && !open.service.is_closed()
            && !open.service.peer().is_transport_closed()
        {
            return Ok(Arc::clone(open));
        }
        match self.open_new(row).await {
            Ok(connection) => {
                let connection = Arc::new(connection);
                if let Some(stale) = self.open_connections().insert(row.id, Arc::clone(&connection)) {
                    stale.service.cancellation_token().cancel();
                }
                self.healthy(state, row);
                Ok(connection)
            }
            Err(problem) => {
                self.failed(state, row, &problem);
                Err(problem)
            }
        }
    }

    async fn open_new(&self, row: &UpstreamRow) -> Result<Connection, String> {
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
        let transport = StreamableHttpClientTransport::with_client(self.http.inner().clone(), config);
        let calls = Arc::new(Calls::default());
        let handler = UpstreamClient { calls: Arc::clone(&calls) };
        let service = tokio::time::timeout(OPEN_TIMEOUT, handler.serve(transport))
            .await
            .map_err(|_| format!("did not answer within {} s", OPEN_TIMEOUT.as_secs()))?
            .map_err(|e| format!("unreachable: {}", crate::error::error_chain(&e)))?;
        Ok(Connection { version: row.updated_at, service, calls, tools: Mutex::new(None) })
    }

    /// Forgets a connection that failed, so that the next call opens another.
    pub fn drop_connection(&self, state: &AppState, row: &UpstreamRow, problem: &str) {
        if let Some(connection) = self.open_connections().remove(&row.id) {
            connection.service.cancellation_token().cancel();
        }
        self.failed(state, row, problem);
    }

    /// Records that the upstream answered.
    pub fn healthy(&self, state: &AppState, row: &UpstreamRow) {
        self.record(state, row, None);
    }

    /// Records that the upstream failed, and why.
    pub fn failed(&self, state: &AppState, row: &UpstreamRow, problem: &str) {
        self.record(state, row, Some(problem));
    }

    fn record(&self, state: &AppState, row: &UpstreamRow, problem: Option<&str>) {
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
