//! The MCP gateway (docs/gateway.md): upstream MCP servers registered per workspace, and `/mcp/gateway`, where each
//! tool call is decided by the approval rules before it reaches its upstream. The upstreams are real MCP servers (the
//! official Python SDK's FastMCP, which report each call they receive) and the gateway's client is rmcp's.

use crate::channels::mcp_upstream::{McpUpstream, StdioUpstream, running};
use crate::common;

use std::time::Duration;

use app::types::{Role, RulesDocument};
use axum::http::{Method, StatusCode};
use chrono::Utc;
use common::{Backend, TestApp, assert_error};
use holdpoint::store::{AuditActor, NewAuditEntry, RulesRow};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, TaskPayload, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

on_both_backends!(
    upstreams_are_registered_listed_changed_and_removed_by_admins,
    private_upstream_urls_are_refused,
    allowed_calls_are_forwarded_unchanged_and_denied_ones_never_reach_the_upstream,
    asked_calls_wait_for_a_person_who_may_edit_or_reject_them,
    a_client_cancelling_an_asked_call_cancels_its_question,
    a_condition_splits_one_tools_calls_between_allow_and_ask,
    an_elicitation_becomes_a_form_question_and_its_outcome_the_answer,
    an_upstream_down_answers_at_once_and_hides_only_its_own_tools,
    unknown_upstreams_and_tools_are_mcp_errors_naming_them,
    configured_processes_are_listed_and_called_like_registered_upstreams_but_not_changed_through_the_api,
    a_configured_process_is_started_again_after_it_dies_and_killed_at_shutdown,
    a_configured_name_taken_by_a_registered_upstream_stops_the_server,
    a_configured_process_that_cannot_start_answers_why,
    input_required_answers_are_asked_as_forms_and_the_call_retried_with_the_answers,
    an_asked_call_as_a_task_reaches_the_upstream_only_after_approval,
    a_gateway_task_read_after_its_server_died_ends_without_making_its_call,
    a_gateway_task_another_instance_holds_is_left_to_it_until_that_instance_dies,
    a_server_that_stops_cancels_the_questions_its_gateway_calls_wait_on,
    an_approved_call_goes_on_only_if_its_upstream_and_its_token_still_stand,
);

type Client = RunningService<RoleClient, ()>;

/// Bounds every wait of these tests.
const WITHIN: Duration = Duration::from_secs(20);

async fn connect(url: String, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    let connecting = ().serve(StreamableHttpClientTransport::from_config(config));
    tokio::time::timeout(WITHIN, connecting).await.expect("connects in time").expect("the MCP client connects")
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments.as_object().unwrap().clone())
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

/// A client of the gateway at `base` that declares MCP's tasks extension, calling with `token`.
async fn connect_with_tasks(base: &str, token: &str) -> RunningService<RoleClient, ClientConfig> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp/gateway")).auth_header(token);
    let info = ClientConfig::new(ClientCapabilities::builder().enable_tasks().build(), Implementation::new("t", "1"));
    info.serve(StreamableHttpClientTransport::from_config(config)).await.expect("connects")
}

/// One `tools/call` as a client on MCP 2026-07-28 sends it (the official Python SDK 2.x's default): no session, no
/// `initialize`, the client's identity in the request's `_meta`. The JSON-RPC response, from JSON or an SSE stream.
async fn call_on_2026_07_28(gateway: &Gateway, name: &str, arguments: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "holdpoint-test", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    } });
    let response = reqwest::Client::new()
        .post(format!("{}/mcp/gateway", gateway.base))
        .bearer_auth(&gateway.agent)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .json(&body)
        .send();
    let text = tokio::time::timeout(WITHIN, async { response.await.unwrap().text().await.unwrap() }).await.unwrap();
    let mut data = text.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim).filter(|d| !d.is_empty());
    serde_json::from_str(data.next_back().unwrap_or(&text)).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A gateway with its upstreams on loopback, and an agent token to call it with (the admin answers).
struct Gateway {
    app: TestApp,
    base: String,
    agent: String,
}

impl Gateway {
    async fn start(backend: Backend) -> Option<Gateway> {
        Gateway::start_with(backend, Vec::new()).await
    }

    /// A gateway whose configuration file starts these upstreams as local processes.
    async fn start_with(
        backend: Backend,
        configured: Vec<holdpoint::doors::gateway::stdio::StdioUpstream>,
    ) -> Option<Gateway> {
        Gateway::start_configured(backend, |config| config.gateway_upstreams = configured).await
    }

    /// A gateway with more settings.
    async fn start_configured(
        backend: Backend,
        configure: impl FnOnce(&mut holdpoint::config::ServeConfig),
    ) -> Option<Gateway> {
        let app = TestApp::start_with(backend, |config| {
            config.upstream_allow_private = true;
            configure(config);
        })
        .await?;
        let base = app.serve().await;
        let agent = app.create_token("default", Role::Agent).await;
        Some(Gateway { app, base, agent })
    }

    /// A gateway with the upstream `files` registered, whose deletes the rules ask a person about.
    async fn confirming_deletes(backend: Backend) -> Option<(Gateway, McpUpstream)> {
        let gateway = Gateway::start(backend).await?;
        let upstream = McpUpstream::start("files").await;
        gateway.register("files", &upstream.url()).await;
        gateway
            .rules(json!({ "default": "allow", "rules": [
                { "name": "confirm-deletes", "tools": ["mcp:files/delete_*"], "decision": "ask" } ] }))
            .await;
        Some((gateway, upstream))
    }

    async fn register(&self, name: &str, url: &str) {
        let created = self.app.post("/api/v1/upstreams", json!({ "name": name, "url": url })).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    }

    async fn client(&self) -> Client {
        connect(format!("{}/mcp/gateway", self.base), Some(&self.agent)).await
    }

    /// Saves the workspace's rules document, as `PUT /rules` does.
    async fn rules(&self, document: Value) {
        let store = &self.app.state.store;
        let workspace = store.ensure_workspace("default").await.unwrap();
        let version = store.rules_version(workspace.id).await.unwrap();
        let document: RulesDocument = serde_json::from_value(document).unwrap();
        holdpoint::rules::engine::compile(&document, version + 1).expect("the rules compile");
        let row = RulesRow {
            workspace_id: workspace.id,
            version: version + 1,
            document: sqlx::types::Json(document),
            updated_at: Utc::now(),
            updated_by: "test".into(),
        };
        let audit = NewAuditEntry {
            workspace_id: workspace.id,
            actor: AuditActor::policy("test harness", None),
            action: "rules.updated".into(),
            subject_type: "rules".into(),
            subject_id: None,
            before: None,
            after: None,
            diff: None,
            created_at: holdpoint::store::now(),
        };
        assert!(store.save_rules(&row, version, &audit).await.unwrap());
    }

    /// The one pending question, once there is one.
    async fn pending_question(&self) -> Value {
        let deadline = tokio::time::Instant::now() + WITHIN;
        loop {
            let page = self.app.get("/api/v1/questions?status=pending").await.json;
            if let Some(question) = page["items"].as_array().and_then(|items| items.first()) {
                return self.app.get(&format!("/api/v1/questions/{}", question["id"].as_str().unwrap())).await.json;
            }
            assert!(tokio::time::Instant::now() < deadline, "no question was asked");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Question `id`, once it is no longer pending; `why` says what should have ended it.
    async fn question_once_resolved(&self, id: &str, why: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WITHIN;
        loop {
            let question = self.app.get(&format!("/api/v1/questions/{id}")).await.json;
            if question["status"] != "pending" {
                return question;
            }
            assert!(tokio::time::Instant::now() < deadline, "{why} did not end the question: {question}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn answer(&self, question: &Value, body: Value) {
        let id = question["id"].as_str().unwrap();
        let answered = self.app.post(&format!("/api/v1/questions/{id}/answer"), body).await;
        assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    }

    /// The audit's `gateway.call` entries, once there are `count` (they are written off the call's path).
    async fn audited_calls(&self, count: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WITHIN;
        loop {
            let audit = self.app.get("/api/v1/audit?action=gateway.call").await.json;
            let items = audit["items"].as_array().cloned().unwrap_or_default();
            if items.len() >= count {
                return items;
            }
            assert!(tokio::time::Instant::now() < deadline, "{} gateway calls audited, not {count}", items.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn allowing_private(backend: Backend) -> Option<TestApp> {
    TestApp::start_with(backend, |config| config.upstream_allow_private = true).await
}

async fn upstreams_are_registered_listed_changed_and_removed_by_admins(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    // Registering does not need the server up: nothing listens on this port.
    let created = app
        .post(
            "/api/v1/upstreams",
            json!({ "name": "files", "url": "http://127.0.0.1:9/mcp",
                    "headers": { "Authorization": "Bearer upstream-secret-1", "X-Team": "ops" } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.json["name"], "files");
    assert_eq!(created.json["headers"], json!(["Authorization", "X-Team"]), "names only");
    assert_eq!(created.json["health"], json!({ "last_success_at": null, "last_error_at": null, "last_error": null }));
    assert!(!created.text.contains("upstream-secret-1"), "a header value is never returned: {}", created.text);

    let again = app.post("/api/v1/upstreams", json!({ "name": "files", "url": "http://127.0.0.1:10/mcp" })).await;
    assert_error(&again, StatusCode::CONFLICT, "conflict");
    for (body, field) in [
        (json!({ "name": "Files!", "url": "http://127.0.0.1:9/mcp" }), "name"),
        (json!({ "name": "a".repeat(33), "url": "http://127.0.0.1:9/mcp" }), "name"),
        (json!({ "name": "ftp", "url": "ftp://127.0.0.1/mcp" }), "url"),
        (json!({ "name": "creds", "url": "http://u:p@127.0.0.1:9/mcp" }), "url"),
        (json!({ "name": "hdr", "url": "http://127.0.0.1:9/mcp", "headers": { "Accept": "x" } }), "headers.Accept"),
        (json!({ "name": "hdr", "url": "http://127.0.0.1:9/mcp", "headers": { "X-A": "line\nbreak" } }), "headers.X-A"),
        (json!({ "name": "hdr", "url": "http://127.0.0.1:9/mcp", "headers": { "X-A": "café" } }), "headers.X-A"),
        (
            json!({ "name": "hdr", "url": "http://127.0.0.1:9/mcp", "headers": { "X-Key": "a", "x-key": "b" } }),
            "headers.x-key",
        ),
    ] {
        let refused = app.post("/api/v1/upstreams", body.clone()).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"][field].is_string(), "{body} names {field}: {error}");
    }

    let listed = app.get("/api/v1/upstreams").await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.json["items"].as_array().unwrap().len(), 1, "nothing refused was stored: {}", listed.text);
    assert!(!listed.text.contains("upstream-secret-1"));
    let one = app.get("/api/v1/upstreams/files").await;
    assert_eq!(one.json, created.json);

    let patched = app
        .call(
            Method::PATCH,
            "/api/v1/upstreams/files",
            Some(&app.token),
            Some(json!({ "url": "http://127.0.0.1:11/mcp", "headers": { "X-Api-Key": "upstream-secret-2" } })),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(patched.json["url"], "http://127.0.0.1:11/mcp");
    assert_eq!(patched.json["headers"], json!(["X-Api-Key"]));
    assert!(!patched.text.contains("upstream-secret-2"));

    // Admins only; another workspace sees none of it.
    let approver = app.create_token("default", Role::Approver).await;
    let refused = app.call(Method::GET, "/api/v1/upstreams", Some(&approver), None).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    let other = app.create_token("other", Role::Admin).await;
    let hidden = app.call(Method::GET, "/api/v1/upstreams/files", Some(&other), None).await;
    assert_error(&hidden, StatusCode::NOT_FOUND, "not_found");

    let deleted = app.call(Method::DELETE, "/api/v1/upstreams/files", Some(&app.token), None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_error(&app.get("/api/v1/upstreams/files").await, StatusCode::NOT_FOUND, "not_found");

    for action in ["upstream.created", "upstream.changed", "upstream.deleted"] {
        let audit = app.get(&format!("/api/v1/audit?action={action}")).await;
        assert_eq!(audit.json["items"].as_array().unwrap().len(), 1, "{action}: {}", audit.text);
        assert!(!audit.text.contains("upstream-secret"), "the audit keeps header names only: {}", audit.text);
    }
}

async fn private_upstream_urls_are_refused(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    for url in [
        "http://127.0.0.1:9/mcp",
        "http://localhost:9/mcp",
        "http://LOCALHOST./mcp",
        "http://api.localhost:9/mcp",
        "http://[::1]:9/mcp",
        "http://[::ffff:127.0.0.1]:9/mcp",
        "http://2130706433:9/mcp",
        "http://0x7f.1:9/mcp",
        "http://0177.0.0.1:9/mcp",
        "http://127.1:9/mcp",
        "http://0.0.0.0:9/mcp",
        "http://169.254.169.254/mcp",
        "http://10.0.0.1/mcp",
    ] {
        let refused = app.post("/api/v1/upstreams", json!({ "name": "local", "url": url })).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        let why = error["details"]["fields"]["url"].as_str().unwrap_or_else(|| panic!("{url}: {error}"));
        assert!(why.contains("HOLDPOINT_UPSTREAM_ALLOW_PRIVATE"), "{url}: {why}");
    }
    let listed = app.get("/api/v1/upstreams").await;
    assert_eq!(listed.json["items"], json!([]), "nothing stored");
    // A change to such a URL is refused the same way, and changes nothing.
    let public = app.post("/api/v1/upstreams", json!({ "name": "public", "url": "http://93.184.216.34/mcp" })).await;
    assert_eq!(public.status, StatusCode::CREATED, "{}", public.text);
    let patch = json!({ "url": "http://[::1]:9/mcp" });
    let refused = app.call(Method::PATCH, "/api/v1/upstreams/public", Some(&app.token), Some(patch)).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["url"].is_string(), "{error}");
    assert_eq!(app.get("/api/v1/upstreams/public").await.json["url"], "http://93.184.216.34/mcp");
}

async fn allowed_calls_are_forwarded_unchanged_and_denied_ones_never_reach_the_upstream(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let upstream = McpUpstream::start("files").await;
    gateway.register("files", &upstream.url()).await;
    gateway
        .rules(json!({ "default": "allow", "rules": [
            { "name": "no-deletes", "tools": ["mcp:files/delete_file"], "decision": "deny",
              "reason": "deleting needs a ticket" } ] }))
        .await;
    let client = gateway.client().await;
    let direct = connect(upstream.url(), None).await;

    let listed = client.list_all_tools().await.unwrap();
    let upstream_tools = direct.list_all_tools().await.unwrap();
    let mut names: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["files__delete_file", "files__pay", "files__read_file", "files__ship"]);
    for tool in &upstream_tools {
        let through = listed.iter().find(|t| t.name == format!("files__{}", tool.name)).unwrap();
        assert_eq!(through.input_schema, tool.input_schema, "{} keeps its schema", tool.name);
        assert_eq!(through.description, tool.description);
    }

    let arguments = json!({ "path": "/etc/motd" });
    let through = client.call_tool(call("files__read_file", arguments.clone())).await.unwrap();
    let straight = direct.call_tool(call("read_file", arguments.clone())).await.unwrap();
    assert_eq!(
        serde_json::to_value(&through).unwrap(),
        serde_json::to_value(&straight).unwrap(),
        "the upstream's result, unchanged"
    );
    assert_eq!(upstream.calls_within(2).await[0], json!({ "tool": "read_file", "arguments": arguments }));

    let denied = client.call_tool(call("files__delete_file", json!({ "path": "/etc/motd" }))).await.unwrap();
    assert_eq!(denied.is_error, Some(true));
    let why = text_of(&denied);
    assert!(why.contains("no-deletes") && why.contains("deleting needs a ticket"), "{why}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        upstream.calls().iter().all(|c| c["tool"] != "delete_file"),
        "a denied call never reaches the upstream: {:?}",
        upstream.calls()
    );

    let audited = gateway.audited_calls(2).await;
    let denial = audited.iter().find(|e| e["after"]["decision"] == "deny").expect("the denial is audited");
    assert_eq!(denial["after"]["rule"], "no-deletes");
    assert_eq!(denial["after"]["tool"], "delete_file");
    assert_eq!(denial["after"]["upstream"], "files");
    let digest = denial["after"]["arguments_sha256"].as_str().unwrap();
    assert_eq!(digest.len(), 64, "a SHA-256 of the arguments, not the arguments: {denial}");
    assert!(denial["after"]["duration_ms"].is_u64());
    let allowed = audited.iter().find(|e| e["after"]["decision"] == "allow").expect("the allowed call is audited");
    assert_eq!(allowed["after"]["outcome"], "forwarded");
    assert_eq!(allowed["after"]["rule"], Value::Null, "the default decided");

    let metrics = gateway.app.call(Method::GET, "/metrics", None, None).await.text;
    for series in [
        r#"holdpoint_gateway_calls_total{upstream="files",decision="allow"} 1"#,
        r#"holdpoint_gateway_calls_total{upstream="files",decision="deny"} 1"#,
        r#"holdpoint_gateway_upstream_duration_seconds_count{upstream="files"} 1"#,
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let files = gateway.app.get("/api/v1/upstreams/files").await.json;
        if files["health"]["last_success_at"].is_string() {
            assert_eq!(files["health"]["last_error"], Value::Null, "{files}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "its success never showed in its health: {files}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn asked_calls_wait_for_a_person_who_may_edit_or_reject_them(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let upstream = McpUpstream::start("files").await;
    gateway.register("files", &upstream.url()).await;
    gateway
        .rules(json!({ "default": "allow", "rules": [
            { "name": "confirm-deletes", "tools": ["mcp:files/delete_*"], "decision": "ask",
              "reason": "deletes cannot be undone", "ask": { "allow_edit": true } } ] }))
        .await;
    let client = std::sync::Arc::new(gateway.client().await);
    let ask = |path: &'static str| {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move { client.call_tool(call("files__delete_file", json!({ "path": path }))).await })
    };

    let approving = ask("/srv/data");
    let question = gateway.pending_question().await;
    assert_eq!(question["kind"], "approval");
    assert_eq!(
        question["action"],
        json!({ "tool_name": "mcp:files/delete_file", "arguments": { "path": "/srv/data" } })
    );
    assert!(question["body"].as_str().unwrap().contains("deletes cannot be undone"), "{question}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!approving.is_finished(), "the call waits for the person");
    assert!(upstream.calls().is_empty(), "nothing reached the upstream while it waits");
    gateway.answer(&question, json!({ "value": true, "edited_arguments": { "path": "/srv/data/tmp" } })).await;
    let approved = tokio::time::timeout(WITHIN, approving).await.unwrap().unwrap().unwrap();
    assert_ne!(approved.is_error, Some(true), "{approved:?}");
    assert_eq!(text_of(&approved), "deleted /srv/data/tmp");
    assert_eq!(
        upstream.calls_within(1).await,
        [json!({ "tool": "delete_file", "arguments": { "path": "/srv/data/tmp" } })],
        "the upstream received the edited arguments"
    );

    let rejecting = ask("/srv/backups");
    let question = gateway.pending_question().await;
    gateway.answer(&question, json!({ "value": false, "comment": "the backups stay" })).await;
    let rejected = tokio::time::timeout(WITHIN, rejecting).await.unwrap().unwrap().unwrap();
    assert_eq!(rejected.is_error, Some(true));
    let why = text_of(&rejected);
    assert!(why.contains("the backups stay") && why.contains("do not retry it unchanged"), "{why}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(upstream.calls().len(), 1, "a rejected call never reaches the upstream");
    let audited = gateway.audited_calls(2).await;
    let outcomes: Vec<&Value> = audited.iter().map(|e| &e["after"]["outcome"]).collect();
    assert!(outcomes.contains(&&json!("rejected")) && outcomes.contains(&&json!("forwarded")), "{outcomes:?}");
}

/// Polls `tasks/get` until the task has ended.
async fn ended_task(client: &RunningService<RoleClient, ClientConfig>, id: &str) -> rmcp::model::GetTaskResult {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let got = client.get_task(GetTaskParams::new(id)).await.expect("tasks/get answers");
        if got.task.status().is_terminal() {
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "the task {id} never ended: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client that declares MCP's tasks extension gets a task for a call that needs an approval: `tasks/get` shows
/// it waiting for the person while nothing reaches the upstream; approved, the call is forwarded and the task
/// completes with the upstream's result. A cancelled task's question is cancelled and its call never made.
async fn an_asked_call_as_a_task_reaches_the_upstream_only_after_approval(backend: Backend) {
    let Some((gateway, upstream)) = Gateway::confirming_deletes(backend).await else { return };
    let client = connect_with_tasks(&gateway.base, &gateway.agent).await;
    let task_of = |response: CallToolResponse| match response {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a task was expected, not {other:?}"),
    };

    let allowed = client.call_tool_once(call("files__read_file", json!({ "path": "/etc/motd" }))).await.unwrap();
    assert!(matches!(allowed, CallToolResponse::Complete(_)), "a call that asks nobody answers at once: {allowed:?}");
    let id = task_of(client.call_tool_once(call("files__delete_file", json!({ "path": "/srv/data" }))).await.unwrap());
    let question = gateway.pending_question().await;
    assert_eq!(question["id"], id.as_str(), "the task is named after its approval");
    let waiting = client.get_task(GetTaskParams::new(&id)).await.unwrap();
    assert_eq!(waiting.task.status(), TaskStatus::InputRequired, "{waiting:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(upstream.calls().len(), 1, "only the allowed call reached the upstream while the task waits");
    gateway.answer(&question, json!({ "value": true })).await;
    let done = ended_task(&client, &id).await;
    let TaskPayload::Completed { result } = &done.task.payload else { panic!("completed, not {done:?}") };
    let result: CallToolResult = serde_json::from_value(Value::Object(result.clone())).unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text_of(&result), "deleted /srv/data");
    assert_eq!(
        upstream.calls_within(2).await[1],
        json!({ "tool": "delete_file", "arguments": { "path": "/srv/data" } })
    );

    let id =
        task_of(client.call_tool_once(call("files__delete_file", json!({ "path": "/srv/backups" }))).await.unwrap());
    gateway.pending_question().await;
    client.cancel_task(CancelTaskParams::new(&id)).await.expect("tasks/cancel is acknowledged");
    let question = gateway.app.get(&format!("/api/v1/questions/{id}")).await.json;
    assert_eq!(question["status"], "cancelled", "{question}");
    assert_eq!(ended_task(&client, &id).await.task.status(), TaskStatus::Cancelled);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(upstream.calls().len(), 2, "the cancelled call never reached the upstream");
    let audited = gateway.audited_calls(3).await;
    let outcomes: Vec<&Value> = audited.iter().map(|e| &e["after"]["outcome"]).collect();
    assert!(outcomes.contains(&&json!("cancelled")), "the cancelled call is audited: {outcomes:?}");
}

/// An approval may come days after the call: the call then goes on only under what holds when it is approved. An
/// upstream removed meanwhile is not called, and a task whose token was revoked meanwhile never makes its call.
async fn an_approved_call_goes_on_only_if_its_upstream_and_its_token_still_stand(backend: Backend) {
    let Some((gateway, upstream)) = Gateway::confirming_deletes(backend).await else { return };

    let client = gateway.client().await;
    let waiting =
        tokio::spawn(async move { client.call_tool(call("files__delete_file", json!({ "path": "/srv/data" }))).await });
    let question = gateway.pending_question().await;
    let removed = gateway.app.call(Method::DELETE, "/api/v1/upstreams/files", Some(&gateway.app.token), None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    gateway.answer(&question, json!({ "value": true })).await;
    let result = tokio::time::timeout(WITHIN, waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(text_of(&result).contains("was removed while the call waited"), "{}", text_of(&result));

    gateway.register("files", &upstream.url()).await;
    let created = gateway.app.post("/api/v1/tokens", json!({ "name": "nightly agent", "role": "agent" })).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let token_id = created.json["token"]["id"].as_str().unwrap().to_owned();
    let secret = created.json["secret"].as_str().unwrap().to_owned();
    let tasks_client = connect_with_tasks(&gateway.base, &secret).await;
    let response = tasks_client.call_tool_once(call("files__delete_file", json!({ "path": "/srv/backups" }))).await;
    assert!(matches!(response, Ok(CallToolResponse::Task(_))), "a task: {response:?}");
    let question = gateway.pending_question().await;
    let revoked = gateway.app.post(&format!("/api/v1/tokens/{token_id}/revoke"), json!({})).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    gateway.answer(&question, json!({ "value": true })).await;

    let audited = gateway.audited_calls(2).await;
    let mut outcomes: Vec<&str> = audited.iter().filter_map(|e| e["after"]["outcome"].as_str()).collect();
    outcomes.sort_unstable();
    assert_eq!(outcomes, ["cancelled", "unreachable"], "{audited:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(upstream.calls().is_empty(), "neither approved call reached the upstream: {:?}", upstream.calls());
}

/// A gateway that asks about every call to the upstream `files`, with a second server on its database started as a
/// process of its own, and a client of that server's gateway that declares tasks. The second server says it runs
/// every 2 s or so, and counts as gone 8 s after it last did: room for a slow disk's stalls while it runs, and a
/// short wait once it is killed.
async fn with_a_second_server(
    backend: Backend,
    configure: impl FnOnce(&mut holdpoint::config::ServeConfig),
) -> Option<(Gateway, McpUpstream, common::ServerProcess, RunningService<RoleClient, ClientConfig>)> {
    let gateway = Gateway::start_configured(backend, configure).await?;
    let upstream = McpUpstream::start("files").await;
    gateway.register("files", &upstream.url()).await;
    gateway.rules(json!({ "default": "ask" })).await;
    let settings =
        [("HOLDPOINT_UPSTREAM_ALLOW_PRIVATE", "true".into()), ("HOLDPOINT_GATEWAY_HOLD_SECONDS", "8".into())];
    let server = gateway.app.spawn_process_with(&settings).await;
    let client = connect_with_tasks(&server.base_url, &gateway.agent).await;
    Some((gateway, upstream, server, client))
}

/// Calls `files__delete_file` on `path` through `client`, which gets a task for it: the task's id.
async fn delete_as_task(client: &RunningService<RoleClient, ClientConfig>, path: &str) -> String {
    match client.call_tool_once(call("files__delete_file", json!({ "path": path }))).await.unwrap() {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a task was expected, not {other:?}"),
    }
}

/// `tasks/get` of a task another server took, once that server counts as gone: until then, the reader answers that
/// another instance holds it.
async fn ended_task_once_its_server_is_gone(
    client: &RunningService<RoleClient, ClientConfig>,
    id: &str,
) -> rmcp::model::GetTaskResult {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        match client.get_task(GetTaskParams::new(id)).await {
            Ok(got) if got.task.status().is_terminal() => return got,
            Ok(got) => panic!("a task whose server is gone is over: {got:?}"),
            Err(err) => {
                let message = err.to_string();
                assert!(message.contains("another Holdpoint instance"), "{message}");
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "the task {id} is still held elsewhere");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// After the server that took them died (killed outright: it cancelled nothing), the gateway's tasks are read from
/// their questions on another server, but their calls are never made: one whose approval was still pending fails
/// saying so and its question is cancelled (nobody approves a call that will not run); one rejected completes with
/// the rejection, as it did on the server that died. The reader runs no workers, so what it says is its own
/// reading of the tasks, not the cancellation another instance's keeper makes. The upstream sees neither call.
async fn a_gateway_task_read_after_its_server_died_ends_without_making_its_call(backend: Backend) {
    let configure = |config: &mut holdpoint::config::ServeConfig| config.run_workers = false;
    let Some((gateway, upstream, server, client)) = with_a_second_server(backend, configure).await else { return };
    let waiting = delete_as_task(&client, "/srv/data").await;
    let question = gateway.pending_question().await;
    assert_eq!(question["id"], waiting.as_str());
    let rejected = delete_as_task(&client, "/srv/logs").await;
    let rejected_question = gateway.app.get(&format!("/api/v1/questions/{rejected}")).await.json;
    gateway.answer(&rejected_question, json!({ "value": false, "comment": "keep the logs" })).await;
    assert_eq!(ended_task(&client, &rejected).await.task.status(), TaskStatus::Completed);
    server.kill().await;

    let reader = connect_with_tasks(&gateway.base, &gateway.agent).await;
    let failed = ended_task_once_its_server_is_gone(&reader, &waiting).await;
    let TaskPayload::Failed { error } = &failed.task.payload else { panic!("failed, not {failed:?}") };
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("restarted or stopped") && message.contains("not made"), "{message}");
    let question = gateway.app.get(&format!("/api/v1/questions/{waiting}")).await.json;
    assert_eq!(question["status"], "cancelled", "{question}");

    let done = ended_task(&reader, &rejected).await;
    let TaskPayload::Completed { result } = &done.task.payload else { panic!("completed, not {done:?}") };
    let result: CallToolResult = serde_json::from_value(Value::Object(result.clone())).unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(text_of(&result).contains("keep the logs"), "{result:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(upstream.calls().is_empty(), "no call reached the upstream: {:?}", upstream.calls());
}

/// With several instances, a gateway task is its instance's: another instance asked about it says so and changes
/// nothing (its approval stays pending, and the instance that holds it still reports it), though a `tasks/cancel`
/// sent there cancels its question, which the holder follows. When the holder dies without stopping, the keeper of
/// a running instance cancels the question its call waited on, saying why, within about one hold's length; the
/// task then reads as cancelled everywhere, and the upstream never sees the call.
async fn a_gateway_task_another_instance_holds_is_left_to_it_until_that_instance_dies(backend: Backend) {
    let configure = |config: &mut holdpoint::config::ServeConfig| config.gateway_hold_seconds = 3;
    let Some((gateway, upstream, server, holder)) = with_a_second_server(backend, configure).await else { return };
    let task = delete_as_task(&holder, "/srv/data").await;
    let cancelled = delete_as_task(&holder, "/srv/logs").await;

    let other = connect_with_tasks(&gateway.base, &gateway.agent).await;
    let refused = other.get_task(GetTaskParams::new(&task)).await.expect_err("the other instance does not hold it");
    let message = refused.to_string();
    assert!(message.contains("held by another Holdpoint instance"), "{message}");
    // Passes of both instances' keepers later, nothing has changed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let question = gateway.app.get(&format!("/api/v1/questions/{task}")).await.json;
    assert_eq!(question["status"], "pending", "{question}");
    let held = holder.get_task(GetTaskParams::new(&task)).await.unwrap();
    assert_eq!(held.task.status(), TaskStatus::InputRequired, "{held:?}");

    other.cancel_task(CancelTaskParams::new(&cancelled)).await.expect("tasks/cancel is acknowledged");
    let question = gateway.app.get(&format!("/api/v1/questions/{cancelled}")).await.json;
    assert_eq!(question["status"], "cancelled", "{question}");
    assert_eq!(ended_task(&holder, &cancelled).await.task.status(), TaskStatus::Cancelled);

    server.kill().await;
    let question = gateway.question_once_resolved(&task, "the death of the instance holding its call").await;
    assert_eq!(question["status"], "cancelled", "{question}");
    let reason = question["response"]["comment"].as_str().unwrap_or_default();
    assert!(reason.contains("stopped without ending it") && reason.contains("will not be made"), "{question}");
    let ended = ended_task(&other, &task).await;
    assert_eq!(ended.task.status(), TaskStatus::Cancelled, "{ended:?}");
    let message = ended.task.task.status_message.clone().unwrap_or_default();
    assert!(message.contains("stopped without ending it"), "{message}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(upstream.calls().is_empty(), "no call reached the upstream: {:?}", upstream.calls());
}

/// A server that stops (SIGTERM, as a supervisor restarting it sends) cancels the approvals its gateway calls still
/// wait on, a task's too, saying why: no later start makes those calls, so nobody may approve them into the void.
/// The call without a task ends rather than hanging; the task, read from another server, ends cancelled with the
/// reason; the upstream sees neither call.
async fn a_server_that_stops_cancels_the_questions_its_gateway_calls_wait_on(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let upstream = McpUpstream::start("files").await;
    gateway.register("files", &upstream.url()).await;
    gateway.rules(json!({ "default": "ask" })).await;
    let server = gateway.app.spawn_process_with(&[("HOLDPOINT_UPSTREAM_ALLOW_PRIVATE", "true".into())]).await;
    let client = connect(format!("{}/mcp/gateway", server.base_url), Some(&gateway.agent)).await;
    let waiting = tokio::spawn(async move {
        let result = client.call_tool(call("files__delete_file", json!({ "path": "/srv/data" }))).await;
        (result, client)
    });
    let question = gateway.pending_question().await;
    let tasks_client = connect_with_tasks(&server.base_url, &gateway.agent).await;
    let created = tasks_client.call_tool_once(call("files__delete_file", json!({ "path": "/srv/logs" }))).await;
    let CallToolResponse::Task(created) = created.unwrap() else { panic!("a task was expected") };
    let task = created.task.task_id;

    assert!(server.terminate(30).await, "the server stops within 30 s");
    for id in [question["id"].as_str().unwrap(), task.as_str()] {
        let question = gateway.app.get(&format!("/api/v1/questions/{id}")).await.json;
        assert_eq!(question["status"], "cancelled", "{question}");
        let reason = question["response"]["comment"].as_str().unwrap_or_default();
        assert!(reason.contains("server stopped"), "{question}");
    }
    let (ended, _client) = tokio::time::timeout(WITHIN, waiting).await.expect("the waiting call ends").unwrap();
    if let Ok(result) = ended {
        assert_eq!(result.is_error, Some(true), "a call that was not made is an error: {result:?}");
        let text = text_of(&result);
        assert!(text.contains("server stopped") && text.contains("not made"), "{text}");
    }

    let tasks_client = connect_with_tasks(&gateway.base, &gateway.agent).await;
    let ended = ended_task(&tasks_client, &task).await;
    assert_eq!(ended.task.status(), TaskStatus::Cancelled, "{ended:?}");
    let message = ended.task.task.status_message.clone().unwrap_or_default();
    assert!(message.contains("server stopped") && message.contains("not made"), "{message}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(upstream.calls().is_empty(), "no call reached the upstream: {:?}", upstream.calls());
}

async fn a_condition_splits_one_tools_calls_between_allow_and_ask(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let upstream = McpUpstream::start("bank").await;
    gateway.register("bank", &upstream.url()).await;
    gateway
        .rules(json!({ "default": "deny", "rules": [
            { "name": "small-payments", "tools": ["mcp:bank/pay"], "when": "args.amount <= 1000",
              "decision": "allow" },
            { "name": "large-payments", "tools": ["mcp:bank/pay"], "when": "args.amount > 1000",
              "decision": "ask", "reason": "over 1000" } ] }))
        .await;
    let client = std::sync::Arc::new(gateway.client().await);
    let small = tokio::time::timeout(WITHIN, client.call_tool(call("bank__pay", json!({ "amount": 900 }))))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(text_of(&small), "paid 900 to acme");
    let empty = gateway.app.get("/api/v1/questions?status=pending").await.json;
    assert_eq!(empty["items"], json!([]), "900 was allowed without asking");

    let paying = std::sync::Arc::clone(&client);
    let large = tokio::spawn(async move { paying.call_tool(call("bank__pay", json!({ "amount": 1500 }))).await });
    let question = gateway.pending_question().await;
    assert_eq!(question["action"]["arguments"], json!({ "amount": 1500 }));
    assert_eq!(upstream.calls().len(), 1, "1500 waits for a person");
    gateway.answer(&question, json!({ "value": true })).await;
    let paid = tokio::time::timeout(WITHIN, large).await.unwrap().unwrap().unwrap();
    assert_eq!(text_of(&paid), "paid 1500 to acme");
}

/// A form question's fields as `(key, response_type, required)`, for asserting what an elicitation became.
fn field_kinds(question: &Value) -> Vec<(String, String, bool)> {
    question["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (f["key"].as_str().unwrap().into(), f["response_type"].as_str().unwrap().into(), f["required"] == true)
        })
        .collect()
}

async fn an_elicitation_becomes_a_form_question_and_its_outcome_the_answer(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let upstream = McpUpstream::start("shop").await;
    gateway.register("shop", &upstream.url()).await;
    gateway.rules(json!({ "default": "allow" })).await;
    let client = std::sync::Arc::new(gateway.client().await);
    let ship = |item: &'static str| {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move { client.call_tool(call("shop__ship", json!({ "item": item }))).await })
    };

    let shipping = ship("a book");
    let question = gateway.pending_question().await;
    assert_eq!(question["response_type"], "form");
    assert_eq!(question["title"], "Where should a book go?");
    let fields = field_kinds(&question);
    assert!(fields.contains(&("address".into(), "text".into(), true)), "{fields:?}");
    assert!(fields.contains(&("express".into(), "boolean".into(), false)), "{fields:?}");
    assert!(fields.contains(&("copies".into(), "integer".into(), false)), "{fields:?}");
    gateway.answer(&question, json!({ "value": { "address": "1 Quay Street", "express": true, "copies": 2 } })).await;
    let shipped = tokio::time::timeout(WITHIN, shipping).await.unwrap().unwrap().unwrap();
    let outcome: Value = serde_json::from_str(&text_of(&shipped)).unwrap();
    assert_eq!(
        outcome,
        json!({ "action": "accept", "content": { "address": "1 Quay Street", "express": true, "copies": 2 } })
    );

    let declining = ship("a lamp");
    let question = gateway.pending_question().await;
    let id = question["id"].as_str().unwrap();
    let cancelled = gateway.app.post(&format!("/api/v1/questions/{id}/cancel"), json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    let declined = tokio::time::timeout(WITHIN, declining).await.unwrap().unwrap().unwrap();
    let outcome: Value = serde_json::from_str(&text_of(&declined)).unwrap();
    assert_eq!(outcome, json!({ "action": "decline" }), "a cancelled question declines");
}

async fn an_upstream_down_answers_at_once_and_hides_only_its_own_tools(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let files = McpUpstream::start("files").await;
    let shop = McpUpstream::start("shop").await;
    gateway.register("files", &files.url()).await;
    gateway.register("shop", &shop.url()).await;
    // Registered, never up: nothing listens on a port just released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    gateway.register("gone", &format!("http://127.0.0.1:{closed}/mcp")).await;
    gateway.rules(json!({ "default": "allow" })).await;
    let client = gateway.client().await;

    let names = |tools: Vec<rmcp::model::Tool>| {
        let mut names: Vec<String> = tools.into_iter().map(|t| t.name.to_string()).collect();
        names.sort();
        names
    };
    let listed = names(client.list_all_tools().await.unwrap());
    assert_eq!(listed.len(), 8, "both live upstreams' tools, none of the one down: {listed:?}");
    assert!(listed.iter().all(|name| !name.starts_with("gone__")));

    let started = std::time::Instant::now();
    let down = client.call_tool(call("gone__read_file", json!({ "path": "/x" }))).await.unwrap();
    assert_eq!(down.is_error, Some(true));
    assert!(text_of(&down).starts_with("The upstream gone could not be reached: "), "{}", text_of(&down));
    assert!(started.elapsed() < Duration::from_secs(3), "answered at once, not after {:?}", started.elapsed());

    shop.stop().await;
    let started = std::time::Instant::now();
    let stopped = client.call_tool(call("shop__read_file", json!({ "path": "/x" }))).await.unwrap();
    assert_eq!(stopped.is_error, Some(true), "{stopped:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "answered at once, not after {:?}", started.elapsed());
    let listed = names(client.list_all_tools().await.unwrap());
    assert_eq!(listed, ["files__delete_file", "files__pay", "files__read_file", "files__ship"]);
    let still = client.call_tool(call("files__read_file", json!({ "path": "/x" }))).await.unwrap();
    assert_eq!(text_of(&still), "contents of /x");

    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let gone = gateway.app.get("/api/v1/upstreams/gone").await.json;
        if let Some(error) = gone["health"]["last_error"].as_str() {
            assert!(gone["health"]["last_error_at"].is_string());
            // Why, as a person reads it: the request that failed, without the transport's type names.
            assert!(
                error.contains(&format!("error sending request for url (http://127.0.0.1:{closed}/mcp)")),
                "{error}"
            );
            assert!(!error.contains("::"), "{error}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the failure never showed in its health: {gone}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn unknown_upstreams_and_tools_are_mcp_errors_naming_them(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let upstream = McpUpstream::start("files").await;
    gateway.register("files", &upstream.url()).await;
    gateway.rules(json!({ "default": "allow" })).await;
    let client = gateway.client().await;
    for (name, named) in
        [("nowhere__read_file", "nowhere"), ("files__format_disk", "format_disk"), ("read_file", "read_file")]
    {
        let error = client.call_tool(call(name, json!({}))).await.expect_err(name);
        let rmcp::ServiceError::McpError(error) = error else { panic!("{name}: not an MCP error: {error}") };
        assert!(error.message.contains(named), "{name}: {}", error.message);
    }
    assert!(upstream.calls().is_empty());
}

async fn a_client_cancelling_an_asked_call_cancels_its_question(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    let upstream = McpUpstream::start("files").await;
    gateway.register("files", &upstream.url()).await;
    gateway.rules(json!({ "default": "ask" })).await;
    let client = gateway.client().await;
    let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(call(
        "files__delete_file",
        json!({ "path": "/srv" }),
    )));
    let handle =
        client.peer().send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options()).await.unwrap();
    let question = gateway.pending_question().await;
    let id = question["id"].as_str().unwrap();
    handle.cancel(Some("the user pressed Esc".into())).await.unwrap();
    let question = gateway.question_once_resolved(id, "the client's cancellation").await;
    assert_eq!(question["status"], "cancelled", "{question}");
    assert!(upstream.calls().is_empty(), "a cancelled call never reaches the upstream");
    let audited = gateway.audited_calls(1).await;
    assert_eq!(audited[0]["after"]["outcome"], "cancelled", "{audited:?}");
    assert_eq!(audited[0]["after"]["question_id"], id, "the entry names the question it asked: {audited:?}");
}

async fn configured_processes_are_listed_and_called_like_registered_upstreams_but_not_changed_through_the_api(
    backend: Backend,
) {
    let process = StdioUpstream::new();
    let entry = process.entry("default", "files").await;
    let Some(gateway) = Gateway::start_with(backend, vec![entry.clone()]).await else { return };
    let app = &gateway.app;
    let http = McpUpstream::start("shop").await;
    gateway.register("shop", &http.url()).await;

    let listed = app.get("/api/v1/upstreams").await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let names: Vec<&str> =
        listed.json["items"].as_array().unwrap().iter().map(|u| u["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["files", "shop"], "both kinds, by name");
    let files = app.get("/api/v1/upstreams/files").await.json;
    assert_eq!(files["transport"], "stdio");
    assert_eq!(files["configured"], true);
    assert_eq!(files["url"], Value::Null);
    assert_eq!(files["process"]["command"], entry.command);
    assert_eq!(files["process"]["args"], json!(entry.args));
    assert_eq!(files["process"]["env"], json!(["MCP_UPSTREAM_RECORD"]), "the variables' names only");
    assert!(!listed.text.contains("holdpoint-stdio-upstream-"), "a variable's value is never shown: {}", listed.text);
    let shop = app.get("/api/v1/upstreams/shop").await.json;
    assert_eq!((&shop["transport"], &shop["configured"]), (&json!("http"), &json!(false)));
    assert_eq!(process.pids(), Vec::<u32>::new(), "started when the gateway first needs it, not before");

    // The API neither changes nor removes it, nor registers another of its name: 409, nothing changed.
    let patch = json!({ "url": "http://127.0.0.1:9/mcp" });
    let refused = app.call(Method::PATCH, "/api/v1/upstreams/files", Some(&app.token), Some(patch)).await;
    let error = assert_error(&refused, StatusCode::CONFLICT, "conflict");
    assert_eq!(error["details"], json!({ "name": "files", "configured": true }), "{error}");
    let refused = app.call(Method::DELETE, "/api/v1/upstreams/files", Some(&app.token), None).await;
    assert_error(&refused, StatusCode::CONFLICT, "conflict");
    let taken = app.post("/api/v1/upstreams", json!({ "name": "files", "url": "http://127.0.0.1:9/mcp" })).await;
    let error = assert_error(&taken, StatusCode::CONFLICT, "conflict");
    assert!(error["message"].as_str().unwrap().contains("configuration file"), "{error}");
    assert_eq!(app.get("/api/v1/upstreams/files").await.json["transport"], "stdio");
    assert_eq!(app.get("/api/v1/upstreams").await.json["items"].as_array().unwrap().len(), 2);
    let audit = app.get("/api/v1/audit?action=upstream.created").await;
    assert_eq!(audit.json["items"].as_array().unwrap().len(), 1, "only shop's registration: {}", audit.text);
    // Another workspace has no such upstream.
    let other = app.create_token("other", Role::Admin).await;
    let hidden = app.call(Method::GET, "/api/v1/upstreams/files", Some(&other), None).await;
    assert_error(&hidden, StatusCode::NOT_FOUND, "not_found");

    gateway
        .rules(json!({ "default": "allow", "rules": [
            { "name": "no-deletes", "tools": ["mcp:files/delete_file"], "decision": "deny", "reason": "not here" } ] }))
        .await;
    let client = std::sync::Arc::new(gateway.client().await);
    // A call waits for the process to start (a list would leave an upstream still starting out).
    let read = client.call_tool(call("files__read_file", json!({ "path": "/etc/motd" }))).await.unwrap();
    assert_eq!(text_of(&read), "contents of /etc/motd");
    let mut tools: Vec<String> = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    tools.sort();
    assert_eq!(tools.len(), 8, "{tools:?}");
    assert!(tools.contains(&"files__read_file".to_owned()) && tools.contains(&"shop__read_file".to_owned()));
    let denied = client.call_tool(call("files__delete_file", json!({ "path": "/etc/motd" }))).await.unwrap();
    assert_eq!(denied.is_error, Some(true));
    assert!(text_of(&denied).contains("no-deletes"), "{}", text_of(&denied));
    assert_eq!(process.calls(), [json!({ "tool": "read_file", "arguments": { "path": "/etc/motd" } })]);
    assert_eq!(process.pids().len(), 1, "one process serves the list and the calls");

    // An elicitation over its one stream belongs to the one call in flight.
    let shipping = {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move { client.call_tool(call("files__ship", json!({ "item": "a book" }))).await })
    };
    let question = gateway.pending_question().await;
    assert_eq!(question["response_type"], "form");
    assert_eq!(question["title"], "Where should a book go?");
    gateway.answer(&question, json!({ "value": { "address": "1 Quay Street" } })).await;
    let shipped = tokio::time::timeout(WITHIN, shipping).await.unwrap().unwrap().unwrap();
    let outcome: Value = serde_json::from_str(&text_of(&shipped)).unwrap();
    assert_eq!(outcome["action"], "accept", "{outcome}");
    assert_eq!(outcome["content"]["address"], "1 Quay Street");

    let audited = gateway.audited_calls(3).await;
    assert!(audited.iter().all(|e| e["after"]["upstream"] == "files"), "{audited:?}");
    assert!(audited.iter().any(|e| e["after"]["decision"] == "deny" && e["after"]["rule"] == "no-deletes"));
    let metrics = app.call(Method::GET, "/metrics", None, None).await.text;
    for series in [
        r#"holdpoint_gateway_calls_total{upstream="files",decision="allow"} 2"#,
        r#"holdpoint_gateway_calls_total{upstream="files",decision="deny"} 1"#,
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    let health = app.get("/api/v1/upstreams/files").await.json["health"].clone();
    assert!(health["last_success_at"].is_string(), "{health}");
    assert_eq!(health["last_error"], Value::Null, "{health}");
    // The process speaks an older protocol than a client on 2026-07-28, whose results need `resultType`.
    let latest = call_on_2026_07_28(&gateway, "files__read_file", json!({ "path": "/etc/motd" })).await;
    assert_eq!(latest["result"]["resultType"], "complete", "{latest}");
    assert_eq!(latest["result"]["content"][0]["text"], "contents of /etc/motd", "{latest}");
}

async fn a_configured_process_is_started_again_after_it_dies_and_killed_at_shutdown(backend: Backend) {
    let process = StdioUpstream::new();
    let entry = process.entry("default", "files").await;
    let Some(gateway) = Gateway::start_with(backend, vec![entry]).await else { return };
    gateway.rules(json!({ "default": "allow" })).await;
    let client = gateway.client().await;
    let read = client.call_tool(call("files__read_file", json!({ "path": "/a" }))).await.unwrap();
    assert_eq!(text_of(&read), "contents of /a");
    let first = process.pids();
    assert_eq!(first.len(), 1);
    assert!(running(first[0]));

    // It dies (as a crash would): the next use starts it again.
    let killed = std::process::Command::new("kill").args(["-9", &first[0].to_string()]).status().unwrap();
    assert!(killed.success());
    let deadline = tokio::time::Instant::now() + WITHIN;
    let answered = loop {
        // A call made before the gateway saw the process end answers isError at once; the next one starts it.
        let result = client.call_tool(call("files__read_file", json!({ "path": "/b" }))).await.unwrap();
        if result.is_error != Some(true) {
            break result;
        }
        assert!(tokio::time::Instant::now() < deadline, "never started again: {}", text_of(&result));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(text_of(&answered), "contents of /b");
    let pids = process.pids();
    assert_eq!(pids.len(), 2, "started once more: {pids:?}");
    assert!(!running(pids[0]) && running(pids[1]), "{pids:?}");

    // The server shuts down: the process ends with it.
    gateway.app.state.shutdown.cancel();
    let deadline = tokio::time::Instant::now() + WITHIN;
    while running(pids[1]) {
        assert!(tokio::time::Instant::now() < deadline, "the process outlived the server");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_configured_process_that_cannot_start_answers_why(backend: Backend) {
    let missing = std::env::temp_dir().join("holdpoint-no-such-mcp-server");
    let entry = holdpoint::doors::gateway::stdio::StdioUpstream {
        workspace: "default".into(),
        name: "broken".into(),
        command: missing.display().to_string(),
        args: Vec::new(),
        env: Default::default(),
        cwd: None,
    };
    let Some(gateway) = Gateway::start_with(backend, vec![entry]).await else { return };
    gateway.rules(json!({ "default": "allow" })).await;
    let client = gateway.client().await;
    let failed = client.call_tool(call("broken__anything", json!({}))).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    let text = text_of(&failed);
    assert!(text.starts_with("The upstream broken could not be reached: could not be started ("), "{text}");
    let audited = gateway.audited_calls(1).await;
    assert_eq!(audited[0]["after"]["outcome"], "unreachable", "{audited:?}");
}

async fn a_configured_name_taken_by_a_registered_upstream_stops_the_server(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let created = app.post("/api/v1/upstreams", json!({ "name": "files", "url": "http://127.0.0.1:9/mcp" })).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let process = StdioUpstream::new();
    let mut config = holdpoint::config::ServeConfig::for_tests(app.database_url.clone());
    config.gateway_upstreams = vec![process.entry("default", "files").await];
    let Err(error) = holdpoint::server::build_state(config).await else { panic!("the server started") };
    let error = error.to_string();
    assert!(error.contains("gateway.upstreams[0]") && error.contains("\"files\""), "{error}");
    // In another workspace the name is free.
    let mut config = holdpoint::config::ServeConfig::for_tests(app.database_url.clone());
    config.gateway_upstreams = vec![process.entry("ops", "files").await];
    let state = holdpoint::server::build_state(config).await.expect("starts");
    let ops = state.store.ensure_workspace("ops").await.unwrap();
    assert!(state.configured_upstreams.find(ops.id, "files").is_some());
    assert_eq!(process.pids(), Vec::<u32>::new(), "nothing was started");
}

async fn input_required_answers_are_asked_as_forms_and_the_call_retried_with_the_answers(backend: Backend) {
    let Some(gateway) = Gateway::start(backend).await else { return };
    // The official Python SDK 2.x: a tool that asks with multi round-trip requests (MCP 2026-07-28).
    let upstream = McpUpstream::start_mrtr("travel").await;
    gateway.register("travel", &upstream.url()).await;
    gateway.rules(json!({ "default": "allow" })).await;
    let client = std::sync::Arc::new(gateway.client().await);
    let book = |destination: &'static str| {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move { client.call_tool(call("travel__book", json!({ "destination": destination }))).await })
    };

    let booking = book("Oslo");
    let dates = gateway.pending_question().await;
    assert_eq!(dates["response_type"], "form");
    assert_eq!(dates["title"], "When do you travel to Oslo?");
    let fields = field_kinds(&dates);
    assert!(fields.contains(&("depart".into(), "text".into(), true)), "{fields:?}");
    assert!(fields.contains(&("nights".into(), "integer".into(), false)), "{fields:?}");
    gateway.answer(&dates, json!({ "value": { "depart": "2026-12-01", "nights": 3 } })).await;

    // The call is sent again with the answer; the upstream's second round asks the next question.
    let seat = gateway.pending_question().await;
    assert_ne!(seat["id"], dates["id"]);
    assert_eq!(seat["title"], "Window or aisle?");
    assert_eq!(seat["fields"][0]["response_type"], "choice", "{seat}");
    gateway.answer(&seat, json!({ "value": { "seat": "aisle" } })).await;
    let booked = tokio::time::timeout(WITHIN, booking).await.unwrap().unwrap().unwrap();
    assert_ne!(booked.is_error, Some(true), "{booked:?}");
    let outcome: Value = serde_json::from_str(&text_of(&booked)).unwrap();
    assert_eq!(
        outcome,
        json!({ "action": "accept", "dates": { "depart": "2026-12-01", "nights": 3 }, "seat": "aisle" })
    );

    // What each round carried: the answers under the requests' keys, and the upstream's state echoed as it was
    // (the SDK seals it; it shows what it sealed only when the token came back unchanged).
    let rounds = upstream.calls_within(3).await;
    assert_eq!(rounds.len(), 3, "{rounds:?}");
    assert!(rounds.iter().all(|r| r["tool"] == "book" && r["arguments"] == json!({ "destination": "Oslo" })));
    assert_eq!((&rounds[0]["request_state"], &rounds[0]["input_responses"]), (&Value::Null, &json!({})));
    assert_eq!(rounds[1]["request_state"], r#"{"round": 1}"#);
    assert_eq!(
        rounds[1]["input_responses"],
        json!({ "dates": { "action": "accept", "content": { "depart": "2026-12-01", "nights": 3 } } })
    );
    assert_eq!(rounds[2]["input_responses"], json!({ "seat": { "action": "accept", "content": { "seat": "aisle" } } }));

    // A cancelled question declines, as for an elicitation during a call.
    let declining = book("Rome");
    let question = gateway.pending_question().await;
    let id = question["id"].as_str().unwrap();
    let cancelled = gateway.app.post(&format!("/api/v1/questions/{id}/cancel"), json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    let declined = tokio::time::timeout(WITHIN, declining).await.unwrap().unwrap().unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text_of(&declined)).unwrap(), json!({ "action": "decline" }));
    let rounds = upstream.calls_within(5).await;
    assert_eq!(rounds[4]["input_responses"], json!({ "dates": { "action": "decline" } }));

    // An upstream that keeps asking gets a bounded number of rounds.
    let spun = client.call_tool(call("travel__spin", json!({}))).await.unwrap();
    assert_eq!(spun.is_error, Some(true));
    assert!(text_of(&spun).contains("after 8 rounds"), "{}", text_of(&spun));
    let spins = upstream.calls_within(13).await.into_iter().filter(|r| r["tool"] == "spin").count();
    assert_eq!(spins, 8);

    let audited = gateway.audited_calls(3).await;
    let outcomes: Vec<&Value> = audited.iter().map(|e| &e["after"]["outcome"]).collect();
    assert_eq!(outcomes.iter().filter(|o| **o == "forwarded").count(), 2, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| **o == "error").count(), 1, "{outcomes:?}");
}
