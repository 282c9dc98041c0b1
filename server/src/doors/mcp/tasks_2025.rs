//! MCP 2025-11-25's tasks, for the clients that speak that revision's form of them rather than the
//! `io.modelcontextprotocol/tasks` extension ([`super::tasks`]): the same tasks, the same book, the same fallback
//! to the stored question after a restart, in the older shapes.
//!
//! In that revision a client asks for a task per call, with `params.task` (`{ttl}`) on `tools/call`, and the server
//! answers `{task: {taskId, status, statusMessage, createdAt, lastUpdatedAt, ttl, pollInterval}}`; `tasks/get`
//! returns the task, `tasks/result` waits until it has ended and returns the tool's result (or its JSON-RPC error),
//! `tasks/list` lists the caller's tasks, `tasks/cancel` cancels one and returns it. rmcp serves only the extension's
//! form and drops `params.task`, so this layer, in front of the MCP service and behind authentication, reads each
//! POSTed JSON-RPC request first:
//!
//! - `initialize`: the server's capabilities gain `tasks` (`list`, `cancel`, `requests.tools.call`). A client that
//!   declares the extension is noted as such for its session ([`DeclaresTasksExtension`]).
//! - `tools/list` (sessions without the extension): the tools that may wait for a person say
//!   `execution.taskSupport: "optional"`: `/mcp`'s `ask_user` and `request_approval`, every gateway tool.
//! - `tools/call` with `params.task`: passed on as the call of a client that declares the extension (per request,
//!   in `_meta`), so the tools make their task as they do for one; the answer is rewritten to the older shape. A call
//!   that ends at once (a non-blocking question, a rule's or a grant's decision, a refusal) answers a task completed
//!   already, with an id of its own, held in memory only.
//! - `tasks/get` and `tasks/cancel` from sessions without the extension, and `tasks/result` and `tasks/list` from
//!   any: answered here, from the door's book. `tasks/result` answers as a server-sent event stream (kept alive
//!   while it waits); a `completed` task gives the tool's result with `_meta["io.modelcontextprotocol/related-task"]`,
//!   a `failed` one its JSON-RPC error, a `cancelled` one an error saying so. Cancelling a task that has ended is
//!   refused with invalid params, as the revision says.
//!
//! `notifications/tasks/status` is not sent (the revision makes it optional): a client polls `tasks/get` or waits on
//! `tasks/result`. `tasks/list` lists the tasks this server holds in memory: after a restart, those read again since.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ErrorCode, GetTaskResult, TASKS_EXTENSION_ID, TaskStatus};
use serde_json::{Map, Value, json};

use super::sessions::{SESSION_HEADER, SessionOwners};
use super::tasks::{self, Door, Tasks};
use crate::credentials::Caller;
use crate::state::AppState;

/// The largest JSON-RPC request this layer reads; the API's body limit already bounds it further.
const REQUEST_LIMIT: usize = 1024 * 1024;
/// The largest answer of the MCP service this layer rewrites when it is not a stream.
const RESPONSE_LIMIT: usize = 16 * 1024 * 1024;
/// The `_meta` key relating a message to its task, in MCP 2025-11-25.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The per-request `_meta` key of a client's capabilities (MCP 2026-07-28), through which a `params.task` call is
/// passed on as one from a client that declares the extension.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The per-request `_meta` key of the protocol version: a request carrying it speaks MCP 2026-07-28.
const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// A response extension: the `initialize` it answers came from a client declaring the tasks extension. The session
/// book ([`SessionOwners`]) keeps it with the session it opens.
#[derive(Clone, Copy, Debug)]
pub struct DeclaresTasksExtension;

/// What the layer needs: the door's state, its book of tasks and its sessions.
#[derive(Clone)]
pub struct TasksDoor {
    pub state: AppState,
    pub tasks: Arc<Tasks>,
    pub owners: Arc<SessionOwners>,
}

/// See the module's documentation.
pub async fn serve(State(door): State<TasksDoor>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, REQUEST_LIMIT).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return crate::error::AppError::TooLarge("the MCP request is too large".into()).into_response();
        }
    };
    let mut message: Value = match serde_json::from_slice(&bytes) {
        Ok(message @ Value::Object(_)) => message,
        // Not JSON: JSON-RPC's parse error, as the streamable HTTP transport answers a body it cannot read (HTTP
        // 400 with the error response and a null id).
        Err(error) if error.classify() != serde_json::error::Category::Io => {
            let mut refused = refuse(&Value::Null, &ErrorData::new(ErrorCode::PARSE_ERROR, error.to_string(), None));
            *refused.status_mut() = axum::http::StatusCode::BAD_REQUEST;
            return refused;
        }
        // Another JSON-RPC shape (a batch): rmcp's to answer.
        _ => return next.run(Request::from_parts(parts, Body::from(bytes))).await,
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let session = parts.headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let modern = message.pointer(&format!("/params/_meta/{}", PROTOCOL_VERSION.replace('/', "~1"))).is_some()
        || session.as_deref().is_some_and(|session| door.owners.declares_tasks_extension(session));
    let caller = parts.extensions.get::<Caller>().cloned();
    let base_url = tasks::base_url(&door.state, &parts);
    match (method.as_str(), caller) {
        ("initialize", _) => {
            let declares = message
                .pointer("/params/capabilities/extensions")
                .and_then(Value::as_object)
                .is_some_and(|extensions| extensions.contains_key(TASKS_EXTENSION_ID));
            let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let mut response = rewrite(response, id, |answer| {
                if let Some(capabilities) = answer.pointer_mut("/result/capabilities").and_then(Value::as_object_mut) {
                    capabilities.insert(
                        "tasks".into(),
                        json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
                    );
                }
            })
            .await;
            if declares {
                response.extensions_mut().insert(DeclaresTasksExtension);
            }
            response
        }
        ("tools/list", _) if !modern => {
            let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let tasked = door.tasks.door();
            rewrite(response, id, move |answer| {
                let tools = answer.pointer_mut("/result/tools").and_then(Value::as_array_mut);
                for tool in tools.into_iter().flatten() {
                    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
                    let waits = match tasked {
                        Door::Mcp => matches!(name, "ask_user" | "request_approval"),
                        Door::Gateway => true,
                    };
                    if waits && let Some(tool) = tool.as_object_mut() {
                        tool.insert("execution".into(), json!({ "taskSupport": "optional" }));
                    }
                }
            })
            .await
        }
        ("tools/call", Some(_)) if message.pointer("/params/task").is_some_and(|task| !is_task_metadata(task)) => {
            let refusal = "params.task must be an object, with `ttl` (milliseconds) a whole number of 0 or more";
            refuse(&id, &ErrorData::invalid_params(refusal, None))
        }
        ("tools/call", Some(caller)) if message.pointer("/params/task").is_some() => {
            let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
                return next.run(Request::from_parts(parts, Body::from(bytes))).await;
            };
            params.remove("task");
            let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(CLIENT_CAPABILITIES.into(), json!({ "extensions": { TASKS_EXTENSION_ID: {} } }));
            }
            let body = serde_json::to_vec(&message).unwrap_or_default();
            let mut parts = parts;
            parts.headers.remove(header::CONTENT_LENGTH);
            let response = next.run(Request::from_parts(parts, Body::from(body))).await;
            let (state, book) = (door.state.clone(), Arc::clone(&door.tasks));
            rewrite(response, id, move |answer| {
                let Some(result) = answer.get_mut("result") else { return };
                let created = if result.get("resultType").and_then(Value::as_str) == Some("task") {
                    let meta = result.get("_meta").cloned();
                    let mut created = json!({ "task": older_task(result) });
                    if let Some(meta) = meta {
                        created["_meta"] = meta;
                    }
                    created
                } else {
                    let mut finished = result.clone();
                    if let Some(finished) = finished.as_object_mut() {
                        finished.remove("resultType");
                    }
                    let finished: CallToolResult = serde_json::from_value(finished)
                        .unwrap_or_else(|_| CallToolResult::error(vec![rmcp::model::ContentBlock::text("no result")]));
                    let (status, message) = ended(&finished);
                    let id = book.completed(&state, &caller, finished);
                    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                    json!({ "task": {
                        "taskId": id.to_string(),
                        "status": status,
                        "statusMessage": message,
                        "createdAt": now,
                        "lastUpdatedAt": now,
                        "ttl": 3_600_000,
                        "pollInterval": tasks::POLL_INTERVAL_MS,
                    } })
                };
                *result = created;
            })
            .await
        }
        ("tasks/get", Some(caller)) if !modern => {
            let by = tasks::TaskRequest { state: &door.state, caller: &caller, base_url: &base_url };
            let task_id = task_id_of(&message);
            match door.tasks.get(by, &task_id).await {
                Ok(got) => answer(&id, task_with_meta(&got)),
                Err(error) => refuse(&id, &error),
            }
        }
        ("tasks/cancel", Some(caller)) if !modern => {
            let by = tasks::TaskRequest { state: &door.state, caller: &caller, base_url: &base_url };
            let task_id = task_id_of(&message);
            let cancelled = async {
                let before = door.tasks.get(by, &task_id).await?;
                if before.task.status().is_terminal() {
                    let status = status_name(before.task.status());
                    let message = format!("task {task_id:?} cannot be cancelled: it has already ended ({status})");
                    return Err(ErrorData::invalid_params(message, None));
                }
                door.tasks.cancel(by, &task_id).await?;
                door.tasks.get(by, &task_id).await
            };
            match cancelled.await {
                Ok(got) => answer(&id, task_with_meta(&got)),
                Err(error) => refuse(&id, &error),
            }
        }
        ("tasks/list", Some(caller)) => {
            let by = tasks::TaskRequest { state: &door.state, caller: &caller, base_url: &base_url };
            let mut listed = Vec::new();
            for task_id in door.tasks.ids_of(&caller) {
                if let Ok(got) = door.tasks.get(by, &task_id).await {
                    listed.push(older_task(&serde_json::to_value(&got).unwrap_or_default()));
                }
            }
            answer(&id, json!({ "tasks": listed }))
        }
        ("tasks/result", Some(caller)) => {
            let task_id = task_id_of(&message);
            let ended = async move {
                let by = tasks::TaskRequest { state: &door.state, caller: &caller, base_url: &base_url };
                let message = match door.tasks.ended(by, &task_id).await {
                    Ok(Some(got)) => payload(&id, &task_id, &got),
                    Ok(None) => {
                        let stopping = ErrorData::internal_error("the server is stopping; ask again", None);
                        json!({ "jsonrpc": "2.0", "id": id, "error": stopping })
                    }
                    Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
                };
                Ok::<_, Infallible>(Event::default().event("message").data(message.to_string()))
            };
            Sse::new(futures::stream::once(ended))
                .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
                .into_response()
        }
        _ => next.run(Request::from_parts(parts, Body::from(bytes))).await,
    }
}

/// `tasks/result`'s answer for an ended task: the tool's result, its JSON-RPC error, or an error for a cancelled task.
fn payload(id: &Value, task_id: &str, got: &GetTaskResult) -> Value {
    let wire = serde_json::to_value(got).unwrap_or_default();
    let related = json!({ RELATED_TASK: { "taskId": task_id } });
    match got.task.status() {
        TaskStatus::Completed => {
            let mut result = wire.get("result").cloned().unwrap_or_else(|| json!({ "content": [] }));
            if let Some(result) = result.as_object_mut() {
                result.remove("resultType");
                let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(RELATED_TASK.into(), related[RELATED_TASK].clone());
                }
            }
            json!({ "jsonrpc": "2.0", "id": id, "result": result })
        }
        TaskStatus::Failed => {
            let mut error =
                wire.get("error").cloned().unwrap_or_else(|| json!({ "code": -32603, "message": "failed" }));
            error["data"] = match error.get("data") {
                Some(Value::Object(data)) => {
                    let mut data = data.clone();
                    data.insert(RELATED_TASK.into(), related[RELATED_TASK].clone());
                    Value::Object(data)
                }
                _ => related,
            };
            json!({ "jsonrpc": "2.0", "id": id, "error": error })
        }
        _ => {
            let message = got.task.task.status_message.clone().unwrap_or_else(|| "the task was cancelled".into());
            let error = ErrorData::new(ErrorCode::INVALID_REQUEST, format!("task cancelled: {message}"), Some(related));
            json!({ "jsonrpc": "2.0", "id": id, "error": error })
        }
    }
}

/// A task as MCP 2025-11-25 shows it, from the extension's wire form (`ttlMs`, `pollIntervalMs`, the payload inline).
fn older_task(wire: &Value) -> Value {
    let mut task = Map::new();
    for (from, to) in [
        ("taskId", "taskId"),
        ("status", "status"),
        ("statusMessage", "statusMessage"),
        ("createdAt", "createdAt"),
        ("lastUpdatedAt", "lastUpdatedAt"),
        ("ttlMs", "ttl"),
        ("pollIntervalMs", "pollInterval"),
    ] {
        if let Some(value) = wire.get(from).filter(|value| !value.is_null() || to == "ttl") {
            task.insert(to.into(), value.clone());
        }
    }
    task.entry("ttl").or_insert(Value::Null);
    Value::Object(task)
}

/// Whether `task` is MCP 2025-11-25's `TaskMetadata`: an object whose `ttl`, if any, is a whole number of
/// milliseconds.
fn is_task_metadata(task: &Value) -> bool {
    task.as_object().is_some_and(|task| task.get("ttl").is_none_or(|ttl| ttl.is_null() || ttl.as_u64().is_some()))
}

/// The status and message of a call that ended as it began. MCP 2025-11-25: "when the tool result has `isError`
/// set to `true`, the task should reach `failed` status" (the result is still what `tasks/result` returns).
fn ended(result: &CallToolResult) -> (&'static str, &'static str) {
    if result.is_error == Some(true) {
        ("failed", "the call ended with an error")
    } else {
        ("completed", "the call ended at once")
    }
}

/// `tasks/get`'s and `tasks/cancel`'s result: the task, and the question it waits for under `_meta`. A call that
/// ended with an error result is `failed` in this revision (see [`ended`]).
fn task_with_meta(got: &GetTaskResult) -> Value {
    let wire = serde_json::to_value(got).unwrap_or_default();
    let mut task = older_task(&wire);
    if wire.pointer("/result/isError") == Some(&Value::Bool(true)) {
        task["status"] = "failed".into();
    }
    if let Some(meta) = &got.meta {
        task["_meta"] = serde_json::to_value(meta).unwrap_or_default();
    }
    task
}

fn status_name(status: TaskStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn task_id_of(message: &Value) -> String {
    message.get("params").and_then(|p| p.get("taskId")).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn answer(id: &Value, result: Value) -> Response {
    json_response(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}

fn refuse(id: &Value, error: &ErrorData) -> Response {
    json_response(json!({ "jsonrpc": "2.0", "id": id, "error": error }))
}

fn json_response(message: Value) -> Response {
    let mut response = Body::from(message.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The MCP service's answer with the JSON-RPC response to request `id` changed by `change`, whether it came as JSON
/// or as a server-sent event stream (read event by event, so that the notifications before the response pass as
/// they come).
async fn rewrite(response: Response, id: Value, change: impl FnOnce(&mut Value) + Send + 'static) -> Response {
    let (mut parts, body) = response.into_parts();
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if content_type.starts_with("application/json") {
        let Ok(bytes) = axum::body::to_bytes(body, RESPONSE_LIMIT).await else {
            return crate::error::AppError::Internal("an MCP answer too large to read".into()).into_response();
        };
        let mut change = Some(change);
        let rewritten = rewrite_message(&bytes, &id, &mut change).unwrap_or(bytes);
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::from(rewritten));
    }
    if !content_type.starts_with("text/event-stream") {
        return Response::from_parts(parts, body);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    struct Reading<S, F> {
        body: S,
        pending: Vec<u8>,
        change: Option<F>,
        id: Value,
        done: bool,
    }
    let reading = Reading { body: body.into_data_stream(), pending: Vec::new(), change: Some(change), id, done: false };
    let events = futures::stream::unfold(reading, |mut reading| async move {
        loop {
            if let Some(end) = find(&reading.pending, b"\n\n") {
                let event: Vec<u8> = reading.pending.drain(..end + 2).collect();
                let event = rewrite_event(&event, &reading.id, &mut reading.change).unwrap_or_else(|| event.into());
                return Some((Ok::<_, axum::Error>(event), reading));
            }
            if reading.done {
                if reading.pending.is_empty() {
                    return None;
                }
                let rest = Bytes::from(std::mem::take(&mut reading.pending));
                return Some((Ok(rest), reading));
            }
            match reading.body.next().await {
                Some(Ok(chunk)) => reading.pending.extend_from_slice(&chunk),
                Some(Err(err)) => return Some((Err(err), Reading { done: true, pending: Vec::new(), ..reading })),
                None => reading.done = true,
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(events))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// One server-sent event with its data rewritten, if it is the response to `id` and `change` is still to apply.
fn rewrite_event<F: FnOnce(&mut Value)>(event: &[u8], id: &Value, change: &mut Option<F>) -> Option<Bytes> {
    change.as_ref()?;
    let text = std::str::from_utf8(event).ok()?;
    let data: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| data.strip_prefix(' ').unwrap_or(data))
        .collect();
    if data.is_empty() {
        return None;
    }
    let rewritten = rewrite_message(data.join("\n").as_bytes(), id, change)?;
    let rewritten = std::str::from_utf8(&rewritten).ok()?;
    let mut out = String::new();
    let mut wrote_data = false;
    for line in text.lines() {
        if line.starts_with("data:") {
            if !wrote_data {
                out.push_str("data: ");
                out.push_str(rewritten);
                out.push('\n');
                wrote_data = true;
            }
        } else if !line.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push('\n');
    Some(Bytes::from(out))
}

/// A JSON-RPC message rewritten by `change` if it is the response (or error) to `id`.
fn rewrite_message<F: FnOnce(&mut Value)>(bytes: &[u8], id: &Value, change: &mut Option<F>) -> Option<Bytes> {
    let mut message: Value = serde_json::from_slice(bytes).ok()?;
    if message.get("id") != Some(id) || !(message.get("result").is_some() || message.get("error").is_some()) {
        return None;
    }
    (change.take()?)(&mut message);
    serde_json::to_vec(&message).ok().map(Bytes::from)
}
