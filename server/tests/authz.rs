//! The authorization matrix: every API endpoint × every role × own and other workspace, with the exact status
//! each must answer. The endpoints come from the OpenAPI document (which the router is built from), so adding an
//! endpoint without a row here fails the test.
//!
//! Each request gets fresh objects to act on, so a request that changes something (an answer, a revocation) never
//! changes what the next one sees.

use crate::common;

use std::collections::BTreeSet;

use app::types::Role;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use chrono::Utc;
use common::TestApp;
use serde_json::{Value, json};
use tower::ServiceExt;

/// The callers, in the order of a row's statuses.
const CALLERS: [&str; 7] =
    ["anonymous", "viewer", "responder", "approver", "admin", "agent", "other workspace's admin"];

/// One endpoint (in one variant where the object acted on matters) and the status each caller gets.
struct Row {
    method: &'static str,
    path: &'static str,
    /// Which fixture `{id}` names, and anything else that shapes the request.
    variant: Variant,
    expect: [u16; 7],
}

#[derive(Clone, Copy, Debug)]
enum Variant {
    Plain,
    TextQuestion,
    ApprovalQuestion,
    /// A run waiting for approval, with a message and a tool call.
    Run,
    /// A queued run that a client executes (`executor: client`).
    ClientRun,
    /// A file the admin uploaded and answered its own form question with.
    AnsweredFile,
}

const fn row(method: &'static str, path: &'static str, variant: Variant, expect: [u16; 7]) -> Row {
    Row { method, path, variant, expect }
}

use Variant::*;

//                                                                           anon view resp appr admin agent other
const MATRIX: &[Row] = &[
    row("get", "/healthz", Plain, [200, 200, 200, 200, 200, 200, 200]),
    row("get", "/readyz", Plain, [200, 200, 200, 200, 200, 200, 200]),
    row("get", "/metrics", Plain, [200, 200, 200, 200, 200, 200, 200]),
    row("get", "/api/v1/me", Plain, [401, 200, 200, 200, 200, 200, 200]),
    // Tokens have no password; people change theirs with a session (tested in people.rs).
    row("post", "/api/v1/me/password", Plain, [401, 403, 403, 403, 403, 403, 403]),
    // Tokens are not reached by notifications: addresses and thresholds are a person's (tested in notifications.rs).
    row("patch", "/api/v1/me", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("get", "/api/v1/me/notifications", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("put", "/api/v1/me/notifications", Plain, [401, 403, 403, 403, 403, 403, 403]),
    // Invitations are an account's: tokens have none (tested with people in people.rs).
    row("get", "/api/v1/me/invitations", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("post", "/api/v1/me/invitations/{id}/accept", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("post", "/api/v1/me/invitations/{id}/decline", Plain, [401, 403, 403, 403, 403, 403, 403]),
    // The notification center is a person's: tokens have none (tested with people in outbox.rs).
    row("get", "/api/v1/notifications", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("post", "/api/v1/notifications/read-all", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("post", "/api/v1/notifications/{id}/read", Plain, [401, 403, 403, 403, 403, 403, 403]),
    // Browsers are subscribed to web pushes by people (tested with people in outbox.rs); the key is public.
    row("get", "/api/v1/push/public-key", Plain, [401, 200, 200, 200, 200, 200, 200]),
    // Each channel's health in the workspace: its deliveries' errors are for admins.
    row("get", "/api/v1/channels", Plain, [401, 403, 403, 403, 200, 403, 200]),
    // Any member may read when questions are reminded and escalated; admins set it.
    row("get", "/api/v1/escalation-policies", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("put", "/api/v1/escalation-policies", Plain, [401, 403, 403, 403, 200, 403, 200]),
    // Webhooks and the callback secret are for admins (another workspace's admin has its own).
    row("get", "/api/v1/upstreams", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("post", "/api/v1/upstreams", Plain, [401, 403, 403, 403, 201, 403, 201]),
    row("get", "/api/v1/upstreams/{name}", Plain, [401, 403, 403, 403, 200, 403, 404]),
    row("patch", "/api/v1/upstreams/{name}", Plain, [401, 403, 403, 403, 200, 403, 404]),
    row("delete", "/api/v1/upstreams/{name}", Plain, [401, 403, 403, 403, 204, 403, 404]),
    row("get", "/api/v1/webhooks", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("post", "/api/v1/webhooks", Plain, [401, 403, 403, 403, 201, 403, 201]),
    row("get", "/api/v1/webhooks/{id}", Plain, [401, 403, 403, 403, 200, 403, 404]),
    row("patch", "/api/v1/webhooks/{id}", Plain, [401, 403, 403, 403, 200, 403, 404]),
    row("delete", "/api/v1/webhooks/{id}", Plain, [401, 403, 403, 403, 204, 403, 404]),
    row("post", "/api/v1/webhooks/{id}/test", Plain, [401, 403, 403, 403, 200, 403, 404]),
    row("get", "/api/v1/webhooks/{id}/deliveries", Plain, [401, 403, 403, 403, 200, 403, 404]),
    row("post", "/api/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver", Plain, [401, 403, 403, 403, 202, 403, 404]),
    row("get", "/api/v1/webhooks/callback-secret", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("post", "/api/v1/webhooks/callback-secret", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("get", "/api/v1/me/push-subscriptions", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("post", "/api/v1/me/notifications/test", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("post", "/api/v1/me/push-subscriptions", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("delete", "/api/v1/me/push-subscriptions/{id}", Plain, [401, 403, 403, 403, 403, 403, 403]),
    row("get", "/api/v1/members", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("post", "/api/v1/members", Plain, [401, 403, 403, 403, 201, 403, 201]),
    row("patch", "/api/v1/members/{user_id}", Plain, [401, 403, 403, 403, 200, 403, 404]),
    row("delete", "/api/v1/members/{user_id}", Plain, [401, 403, 403, 403, 204, 403, 404]),
    row("get", "/api/v1/tokens", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("post", "/api/v1/tokens", Plain, [401, 403, 403, 403, 201, 403, 201]),
    row("post", "/api/v1/tokens/{id}/revoke", Plain, [401, 403, 403, 403, 200, 403, 404]),
    // The audit log is for admins (another workspace's admin reads its own, empty, log).
    row("get", "/api/v1/audit", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("get", "/api/v1/audit/export", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("get", "/api/v1/agents", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("post", "/api/v1/agents", Plain, [401, 403, 403, 403, 201, 403, 201]),
    row("get", "/api/v1/agents/{id}", Plain, [401, 200, 200, 200, 200, 200, 404]),
    row("put", "/api/v1/agents/{id}", Plain, [401, 403, 403, 403, 200, 403, 404]),
    // An AG-UI run of an agent is a run started by the caller, streamed (another workspace has no such agent).
    row("post", "/api/v1/agents/{name}/ag-ui", Plain, [401, 403, 200, 200, 200, 200, 404]),
    row("get", "/api/v1/events", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("get", "/api/v1/questions", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("post", "/api/v1/questions", Plain, [401, 403, 201, 201, 201, 201, 201]),
    // A question naming a run acts for the run: an agent token only for the runs it started (this one the admin
    // started), nobody for another workspace's.
    row("post", "/api/v1/questions", Run, [401, 403, 201, 201, 201, 422, 422]),
    // Per-item results say who may answer what; the batch itself is accepted from anyone signed in.
    row("post", "/api/v1/questions/answer-batch", TextQuestion, [401, 200, 200, 200, 200, 200, 200]),
    // An agent token reads only the questions it asked (these were asked by the admin).
    row("get", "/api/v1/questions/{id}", TextQuestion, [401, 200, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/questions/{id}/wait", TextQuestion, [401, 200, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/questions/{id}/deliveries", TextQuestion, [401, 200, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/questions/{id}/approved-before", ApprovalQuestion, [401, 200, 200, 200, 200, 404, 404]),
    // What an agent token may not see is missing to it, before any question of rights.
    row("post", "/api/v1/questions/{id}/answer", TextQuestion, [401, 403, 200, 200, 200, 404, 404]),
    row("post", "/api/v1/questions/{id}/answer", ApprovalQuestion, [401, 403, 403, 200, 200, 404, 404]),
    row("post", "/api/v1/questions/{id}/cancel", TextQuestion, [401, 403, 200, 200, 200, 404, 404]),
    // Cancelling someone else's question needs the right to answer it: a responder cannot turn down an approval.
    row("post", "/api/v1/questions/{id}/cancel", ApprovalQuestion, [401, 403, 403, 200, 200, 404, 404]),
    // Claiming needs the right to answer the question; an agent token sees none of these.
    row("post", "/api/v1/questions/{id}/claim", TextQuestion, [401, 403, 200, 200, 200, 404, 404]),
    row("post", "/api/v1/questions/{id}/claim", ApprovalQuestion, [401, 403, 403, 200, 200, 404, 404]),
    row("post", "/api/v1/questions/{id}/unclaim", TextQuestion, [401, 403, 200, 200, 200, 404, 404]),
    // Any member reads what is allowed without asking; an agent token does not. Revoking is for the maker or an
    // admin (the fixture's grant was made by the admin: another workspace does not see it).
    row("get", "/api/v1/grants", Plain, [401, 200, 200, 200, 200, 403, 200]),
    row("post", "/api/v1/grants/{id}/revoke", Plain, [401, 403, 403, 403, 200, 403, 404]),
    // Any member reads the approval rules, checks a document and tries a call; admins save them; whoever may ask
    // asks for a decision (with no rules saved, `ask` asks an approval question).
    row("get", "/api/v1/rules", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("put", "/api/v1/rules", Plain, [401, 403, 403, 403, 200, 403, 200]),
    row("post", "/api/v1/rules/check", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("post", "/api/v1/rules/test", Plain, [401, 200, 200, 200, 200, 200, 200]),
    row("post", "/api/v1/decide", Plain, [401, 403, 200, 200, 200, 200, 200]),
    // Whoever may answer uploads; a file is downloaded by its uploader until an answer references it (the admin's,
    // here), then by whoever sees that question (the admin asked this one: agent tokens see only their own).
    row("post", "/api/v1/files", Plain, [401, 403, 201, 201, 201, 403, 201]),
    row("get", "/api/v1/files/{id}", Plain, [401, 404, 404, 404, 200, 404, 404]),
    row("get", "/api/v1/files/{id}", AnsweredFile, [401, 200, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/runs", Plain, [401, 200, 200, 200, 200, 200, 200]),
    // The other workspace's admin names an agent it cannot see: refused like any unknown agent.
    row("post", "/api/v1/runs", Plain, [401, 403, 201, 201, 201, 201, 422]),
    // An agent token sees only the runs it started (these were started by the admin).
    row("get", "/api/v1/runs/{id}", Run, [401, 200, 200, 200, 200, 404, 404]),
    row("post", "/api/v1/runs/{id}/cancel", Run, [401, 403, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/runs/{id}/messages", Run, [401, 200, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/runs/{id}/messages/{mid}", Run, [401, 200, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/runs/{id}/tool-calls", Run, [401, 200, 200, 200, 200, 404, 404]),
    row("get", "/api/v1/runs/{id}/tool-calls/{cid}", Run, [401, 200, 200, 200, 200, 404, 404]),
    // Resuming decides the pending approval: approvers and admins only.
    row("post", "/api/v1/runs/{id}/resume", Run, [401, 403, 403, 202, 202, 403, 404]),
    // The worker protocol is for runs a client executes; the server executes this one.
    row("post", "/api/v1/runs/{id}/worker", Run, [401, 403, 409, 409, 409, 404, 404]),
    // A client executes this one, where the token that started it (the admin's) runs: nobody else executes it,
    // and an agent token does not even see it.
    row("post", "/api/v1/runs/{id}/worker", ClientRun, [401, 403, 403, 403, 200, 404, 404]),
];

/// The objects one request acts on, all in the `default` workspace, made by its admin.
struct Fixture {
    file_id: String,
    upstream_name: String,
    text_question: String,
    approval_question: String,
    agent_id: String,
    member_id: String,
    token_id: String,
    run: Option<RunFixture>,
    client_run: Option<String>,
    webhook_id: String,
    /// A delivery of the webhook, given up (so nothing sends it until it is redelivered).
    webhook_delivery_id: String,
    grant_id: String,
}

struct RunFixture {
    id: String,
    message_id: String,
    call_id: String,
}

struct Scripts(std::path::PathBuf);

impl Drop for Scripts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One credential per caller of [`CALLERS`], in its order (`None` for the anonymous one).
async fn caller_tokens(app: &TestApp) -> Vec<Option<String>> {
    vec![
        None,
        Some(app.create_token("default", Role::Viewer).await),
        Some(app.create_token("default", Role::Responder).await),
        Some(app.create_token("default", Role::Approver).await),
        Some(app.token.clone()),
        Some(app.create_token("default", Role::Agent).await),
        Some(app.create_token("elsewhere", Role::Admin).await),
    ]
}

async fn send(app: &TestApp, method: &str, uri: &str, token: Option<&str>, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = Request::builder().method(Method::from_bytes(method.to_uppercase().as_bytes()).unwrap()).uri(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = match body {
        Some(body) => request.header(header::CONTENT_TYPE, "application/json").body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    };
    let response = app.router.clone().oneshot(request.unwrap()).await.unwrap();
    let status = response.status();
    // The event stream never ends: its status is all this test needs.
    if response.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream")) {
        return (status, Value::Null);
    }
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn created(app: &TestApp, path: &str, body: Value) -> Value {
    created_by(app, &app.token, path, body).await
}

async fn created_by(app: &TestApp, token: &str, path: &str, body: Value) -> Value {
    let (status, json) = send(app, "post", path, Some(token), Some(body)).await;
    assert!(status.is_success(), "fixture {path}: {status} {json}");
    json
}

async fn fixture(app: &TestApp, requester: &str, n: usize, row: &Row) -> Fixture {
    let variant = row.variant;
    let text_question = created(app, "/api/v1/questions", json!({"title": format!("Question {n}")})).await;
    // Asked by someone else than the callers, so separation of duties does not decide the approval rows.
    let approval_question = created_by(
        app,
        requester,
        "/api/v1/questions",
        json!({"kind": "approval", "title": format!("Approve {n}?"), "action": {"tool_name": "deploy", "arguments": {"n": n}}}),
    )
    .await;
    let agent = created(
        app,
        "/api/v1/agents",
        json!({"name": format!("agent-{n}"), "model": "script:pause.json",
        "tools": ["http_request"], "approval_policy": {"default": "prompt"}}),
    )
    .await;
    // Only for the rows that name a member: an account's password takes a deliberately slow hash to make.
    let member_id = if row.path.contains("{user_id}") {
        let member = created(
            app,
            "/api/v1/members",
            json!({"username": format!("person-{n}"), "password": "a long enough password", "role": "responder"}),
        );
        member.await["user_id"].as_str().unwrap().to_owned()
    } else {
        String::new()
    };
    let token = created(app, "/api/v1/tokens", json!({"name": format!("token {n}"), "role": "agent"})).await;
    let run = if matches!(variant, Run) { Some(paused_run(app, &agent["id"]).await) } else { None };
    let client_run = if matches!(variant, ClientRun) {
        let run = created(app, "/api/v1/runs", json!({"agent_id": agent["id"], "input": "go", "executor": "client"}));
        Some(run.await["id"].as_str().unwrap().to_owned())
    } else {
        None
    };
    // For the webhooks' rows only (a workspace has at most 50): a public address (nothing resolved) for an event
    // none of these requests causes.
    let (webhook_id, webhook_delivery_id) = if row.path.starts_with("/api/v1/webhooks/{id}") {
        let webhook = created(
            app,
            "/api/v1/webhooks",
            json!({"url": format!("https://93.184.216.34/fixture/{n}"), "events": ["question_expired"]}),
        )
        .await;
        let webhook_id = webhook["id"].as_str().unwrap().to_owned();
        let delivery_id = given_up_delivery(app, &webhook_id).await;
        (webhook_id, delivery_id)
    } else {
        (String::new(), String::new())
    };
    let grant_id = if row.path.starts_with("/api/v1/grants/{id}") { made_grant(app).await } else { String::new() };
    // For the upstreams' rows only: registered at a public address (never connected to: nothing here lists or calls
    // the gateway's tools).
    let upstream_name = if row.path.starts_with("/api/v1/upstreams/{name}") {
        let upstream = created(
            app,
            "/api/v1/upstreams",
            json!({"name": format!("fixture-{n}"), "url": "https://93.184.216.34/mcp"}),
        );
        upstream.await["name"].as_str().unwrap().to_owned()
    } else {
        String::new()
    };
    // For the files' rows only: an upload of the admin's, referenced by the admin's answer to its own form question
    // for the `AnsweredFile` variant.
    let file_id = if row.path.starts_with("/api/v1/files/{id}") {
        upload_as_admin(app, n, matches!(variant, AnsweredFile)).await
    } else {
        String::new()
    };
    Fixture {
        file_id,
        upstream_name,
        grant_id,
        webhook_id,
        webhook_delivery_id,
        text_question: text_question["id"].as_str().unwrap().to_owned(),
        approval_question: approval_question["id"].as_str().unwrap().to_owned(),
        agent_id: agent["id"].as_str().unwrap().to_owned(),
        member_id,
        token_id: token["token"]["id"].as_str().unwrap().to_owned(),
        run,
        client_run,
    }
}

/// A file the admin uploads; `answered`: referenced by the admin's answer to a form question it asked.
async fn upload_as_admin(app: &TestApp, n: usize, answered: bool) -> String {
    let request = Request::post(format!("/api/v1/files?name=fixture-{n}.txt"))
        .header(header::AUTHORIZATION, format!("Bearer {}", app.token))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(format!("file {n}")))
        .unwrap();
    let uploaded = app.send(request).await;
    assert_eq!(uploaded.status, StatusCode::CREATED, "{}", uploaded.text);
    let file_id = uploaded.json["file_id"].as_str().unwrap().to_owned();
    if answered {
        let question = created(
            app,
            "/api/v1/questions",
            json!({"title": format!("Files {n}"), "response_type": "form",
                "fields": [{"key": "doc", "label": "Doc", "response_type": "file", "required": true}]}),
        )
        .await;
        let path = format!("/api/v1/questions/{}/answer", question["id"].as_str().unwrap());
        created(app, &path, json!({"value": {"doc": {"file_id": file_id}}})).await;
    }
    file_id
}

/// A run of the scripted agent, once it waits for approval of its tool call.
async fn paused_run(app: &TestApp, agent_id: &Value) -> RunFixture {
    let run = created(app, "/api/v1/runs", json!({"agent_id": agent_id, "input": "fetch"})).await;
    let id = run["id"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, run) = send(app, "get", &format!("/api/v1/runs/{id}"), Some(&app.token), None).await;
        if run["status"] == "waiting_for_approval" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the run never waited for approval: {run}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (_, messages) = send(app, "get", &format!("/api/v1/runs/{id}/messages"), Some(&app.token), None).await;
    let (_, calls) = send(app, "get", &format!("/api/v1/runs/{id}/tool-calls"), Some(&app.token), None).await;
    RunFixture {
        id,
        message_id: messages["items"][0]["id"].as_str().unwrap().to_owned(),
        call_id: calls["items"][0]["id"].as_str().unwrap().to_owned(),
    }
}

/// A live workspace grant, as an admin's approval leaves one.
async fn made_grant(app: &TestApp) -> String {
    let workspace = app.state.store.ensure_workspace("default").await.unwrap();
    let now = holdpoint::store::now();
    let grant = holdpoint::store::GrantRow {
        id: uuid::Uuid::now_v7(),
        workspace_id: workspace.id,
        scope: app::types::GrantScope::Workspace,
        run_id: None,
        agent: None,
        tool_name: "shell".into(),
        matcher: sqlx::types::Json(app::types::ArgumentMatcher::command_prefix("ls")),
        created_by: "admin of default".into(),
        created_by_id: None,
        question_id: None,
        created_at: now,
        expires_at: now + chrono::Duration::hours(1),
        revoked_at: None,
        revoked_by: None,
        uses: 0,
        last_used_at: None,
    };
    let audit = holdpoint::store::NewAuditEntry {
        workspace_id: workspace.id,
        actor: holdpoint::store::AuditActor::policy("test harness", None),
        action: "grant.created".into(),
        subject_type: "grant".into(),
        subject_id: Some(grant.id.to_string()),
        before: None,
        after: None,
        diff: None,
        created_at: now,
    };
    app.state.store.insert_grant(&grant, &audit).await.unwrap();
    grant.id.to_string()
}

/// A delivery of a webhook, as the worker leaves one it gave up on.
async fn given_up_delivery(app: &TestApp, webhook_id: &str) -> String {
    let at = Utc::now();
    let id = uuid::Uuid::now_v7();
    let workspace = app.state.store.ensure_workspace("default").await.unwrap();
    let delivery = holdpoint::store::WebhookDeliveryRow {
        id,
        workspace_id: workspace.id,
        webhook_id: Some(webhook_id.parse().unwrap()),
        endpoint: webhook_id.to_owned(),
        url: "https://93.184.216.34/fixture".into(),
        sequence: 1,
        message_id: "1".into(),
        event_type: "question_expired".into(),
        body: "{}".into(),
        status: app::types::DeliveryStatus::Failed,
        attempts: 1,
        next_attempt_at: at,
        claimed_until: None,
        last_error: Some("the receiver answered 500".into()),
        response_status: Some(500),
        sent_at: None,
        created_at: at,
        updated_at: at,
        give_up_at: at,
    };
    app.state.store.queue_webhook_deliveries(&[delivery], None).await.unwrap();
    id.to_string()
}

/// The request a row makes with a fixture: its URI and body.
fn request_for(row: &Row, fixture: &Fixture, n: usize) -> (String, Option<Value>) {
    let run = fixture.run.as_ref();
    let id = match (row.variant, row.path) {
        (TextQuestion, _) => fixture.text_question.clone(),
        (ApprovalQuestion, _) => fixture.approval_question.clone(),
        (Run, _) => run.unwrap().id.clone(),
        (ClientRun, _) => fixture.client_run.clone().unwrap(),
        (Plain, p) if p.starts_with("/api/v1/agents") => fixture.agent_id.clone(),
        (Plain, p) if p.starts_with("/api/v1/tokens") => fixture.token_id.clone(),
        (Plain, p) if p.starts_with("/api/v1/webhooks") => fixture.webhook_id.clone(),
        (Plain, p) if p.starts_with("/api/v1/grants") => fixture.grant_id.clone(),
        (Plain | AnsweredFile, p) if p.starts_with("/api/v1/files") => fixture.file_id.clone(),
        (Plain, p)
            if p.starts_with("/api/v1/notifications")
                || p.starts_with("/api/v1/me/push-subscriptions")
                || p.starts_with("/api/v1/me/invitations") =>
        {
            uuid::Uuid::now_v7().to_string()
        }
        _ => String::new(),
    };
    let path = match row.path {
        "/api/v1/agents/{name}/ag-ui" => format!("/api/v1/agents/agent-{n}/ag-ui"),
        path => path.to_owned(),
    };
    let mut uri = path
        .replace("{id}", &id)
        .replace("{user_id}", &fixture.member_id)
        .replace("{name}", &fixture.upstream_name)
        .replace("{delivery_id}", &fixture.webhook_delivery_id)
        .replace("{mid}", &run.map(|r| r.message_id.clone()).unwrap_or_default())
        .replace("{cid}", &run.map(|r| r.call_id.clone()).unwrap_or_default());
    if uri.ends_with("/wait") {
        uri.push_str("?timeout_seconds=1");
    }
    if uri == "/api/v1/files" {
        uri.push_str("?name=matrix.json");
    }
    let body = match (row.method, row.path, row.variant) {
        ("post", "/api/v1/me/password", _) => Some(json!({"new_password": "a new long password"})),
        ("post", "/api/v1/members", _) => {
            Some(json!({"username": format!("new-{n}"), "password": "a long enough password", "role": "viewer"}))
        }
        ("patch", "/api/v1/me", _) => Some(json!({"email": "someone@example.com"})),
        ("put", "/api/v1/me/notifications", _) => Some(json!({"email": {"min_urgency": "normal"}})),
        ("post", "/api/v1/me/notifications/test", _) => Some(json!({"channel": "email"})),
        ("post", "/api/v1/me/push-subscriptions", _) => Some(json!({"endpoint": "https://push.example.com/send/1",
            "keys": {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
                     "auth": "tBHItJI5svbpez7KI4CCXg"}})),
        ("put", "/api/v1/escalation-policies", _) => Some(json!({"items": [
            {"kind": "approval", "urgency": "high", "remind_after_seconds": 300}]})),
        ("put", "/api/v1/rules", _) | ("post", "/api/v1/rules/check", _) => {
            Some(json!({"rules": [{"name": "shell", "tools": ["shell"], "decision": "ask"}]}))
        }
        ("post", "/api/v1/rules/test", _) => Some(json!({"tool": "shell", "arguments": {"command": "ls"}})),
        ("post", "/api/v1/decide", _) => Some(json!({"tool": "shell", "arguments": {"command": "ls"}})),
        ("post", "/api/v1/webhooks", _) => Some(json!({"url": format!("https://93.184.216.34/hook/{n}"),
            "events": ["question_expired"]})),
        ("patch", "/api/v1/webhooks/{id}", _) => Some(json!({"description": "changed"})),
        ("post", "/api/v1/upstreams", _) => {
            Some(json!({"name": format!("new-{n}"), "url": "https://93.184.216.34/mcp"}))
        }
        ("patch", "/api/v1/upstreams/{name}", _) => Some(json!({"url": "https://93.184.216.34/mcp/v2"})),
        ("patch", _, _) => Some(json!({"role": "approver"})),
        ("post", "/api/v1/tokens", _) => Some(json!({"name": format!("new {n}"), "role": "viewer"})),
        ("post", "/api/v1/agents", _) | ("put", _, _) => {
            Some(json!({"name": format!("new-agent-{n}"), "model": "script:pause.json"}))
        }
        ("post", "/api/v1/questions", Run) => Some(json!({"title": "New question", "run_id": run.unwrap().id})),
        ("post", "/api/v1/questions", _) => Some(json!({"title": "New question"})),
        // An upload of JSON bytes (the body's Content-Type is the file's).
        ("post", "/api/v1/files", _) => Some(json!({"uploaded": n})),
        ("post", "/api/v1/questions/answer-batch", _) => {
            Some(json!({"items": [{"id": fixture.text_question, "value": "an answer"}]}))
        }
        ("post", _, TextQuestion) if row.path.ends_with("/answer") => Some(json!({"value": "an answer"})),
        ("post", _, ApprovalQuestion) if row.path.ends_with("/answer") => Some(json!({"value": true})),
        ("post", _, _) if row.path.ends_with("/cancel") => None,
        ("post", "/api/v1/runs", _) => Some(json!({"agent_id": fixture.agent_id, "input": "go"})),
        ("post", "/api/v1/agents/{name}/ag-ui", _) => Some(json!({"threadId": format!("thread-{n}"),
            "runId": format!("run-{n}"), "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{"id": "m1", "role": "user", "content": "go"}]})),
        ("post", _, Run) if row.path.ends_with("/resume") => {
            Some(json!({"tool_decisions": [{"tool_call_id": "call_1", "approved": false}]}))
        }
        ("post", _, Run | ClientRun) if row.path.ends_with("/worker") => {
            Some(json!({"op": "messages", "after_seq": 0, "limit": 10}))
        }
        _ => None,
    };
    (uri, body)
}

fn documented_endpoints() -> BTreeSet<(String, String)> {
    let (_, document) = holdpoint::doors::http::api_routes();
    let mut endpoints = BTreeSet::new();
    for (path, item) in &document.paths.paths {
        let path = if path.starts_with("/api/v1") || matches!(path.as_str(), "/healthz" | "/readyz" | "/metrics") {
            path.clone()
        } else {
            format!("/api/v1{path}")
        };
        for (method, operation) in [
            ("get", &item.get),
            ("post", &item.post),
            ("put", &item.put),
            ("patch", &item.patch),
            ("delete", &item.delete),
        ] {
            if operation.is_some() {
                endpoints.insert((method.to_owned(), path.clone()));
            }
        }
    }
    endpoints
}

#[test]
fn every_endpoint_of_the_api_is_in_the_matrix() {
    let documented = documented_endpoints();
    let listed: BTreeSet<(String, String)> = MATRIX.iter().map(|r| (r.method.to_owned(), r.path.to_owned())).collect();
    let missing: Vec<_> = documented.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&documented).collect();
    assert!(missing.is_empty(), "endpoints without a row in the authorization matrix: {missing:?}");
    assert!(stale.is_empty(), "rows for endpoints that do not exist: {stale:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_gets_exactly_the_status_of_the_matrix_on_sqlite() {
    every_role_gets_exactly_the_status_of_the_matrix(common::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_gets_exactly_the_status_of_the_matrix_on_postgres() {
    every_role_gets_exactly_the_status_of_the_matrix(common::Backend::Postgres).await;
}

async fn every_role_gets_exactly_the_status_of_the_matrix(backend: common::Backend) {
    let scripts = Scripts(std::env::temp_dir().join(format!("holdpoint-authz-{}", uuid::Uuid::now_v7())));
    std::fs::create_dir_all(&scripts.0).unwrap();
    std::fs::write(
        scripts.0.join("pause.json"),
        json!([
            {"content": "Fetching.", "tool_calls": [{"id": "call_1", "name": "http_request",
                "arguments": {"method": "GET", "url": "http://127.0.0.1:9/never"}}]},
            {"content": "done"}
        ])
        .to_string(),
    )
    .unwrap();
    let dir = scripts.0.clone();
    let Some(app) = TestApp::start_with(backend, move |config| config.runtime.scripts_dir = Some(dir)).await else {
        return;
    };
    let tokens = caller_tokens(&app).await;
    let requester = app.create_token("default", Role::Responder).await;
    let mut failures = Vec::new();
    let mut n = 0;
    for row in MATRIX {
        for (caller, token) in tokens.iter().enumerate() {
            n += 1;
            let fixture = fixture(&app, &requester, n, row).await;
            let (uri, body) = request_for(row, &fixture, n);
            let (status, json) = send(&app, row.method, &uri, token.as_deref(), body).await;
            let expected = row.expect[caller];
            if status.as_u16() != expected {
                failures.push(format!(
                    "{} {} ({:?}) as {}: expected {expected}, got {} {json}",
                    row.method.to_uppercase(),
                    row.path,
                    row.variant,
                    CALLERS[caller],
                    status.as_u16()
                ));
            } else if !status.is_success() {
                let code = json["error"]["code"].as_str().unwrap_or("<none>");
                let wanted = match expected {
                    401 => "unauthorized",
                    403 => "forbidden",
                    404 => "not_found",
                    409 => "conflict",
                    _ => code,
                };
                if code != wanted {
                    failures.push(format!(
                        "{} {} as {}: error code {code}, not {wanted}",
                        row.method, row.path, CALLERS[caller]
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {n} requests differ from the matrix:\n{}", failures.len(), failures.join("\n"));
}

/// The gateway makes calls with the upstreams' credentials and asks people about them: only a role that may ask may
/// use it. A viewer is refused before any MCP message is read, in the API's error shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_serves_only_roles_that_may_ask() {
    let app = TestApp::start(common::Backend::Sqlite).await.unwrap();
    let base = app.serve().await;
    let http = reqwest::Client::new();
    let initialize = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let expected = [401, 403, 200, 200, 200, 200, 200];
    for (caller, token) in caller_tokens(&app).await.iter().enumerate() {
        let mut request = http
            .post(format!("{base}/mcp/gateway"))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body: Value = if status == 200 { Value::Null } else { response.json().await.unwrap() };
        assert_eq!(status, expected[caller], "{}: {body}", CALLERS[caller]);
        if status == 403 {
            assert_eq!(body["error"]["code"], "forbidden", "{body}");
            assert!(body["error"]["message"].as_str().unwrap().contains("gateway"), "{body}");
        }
    }
}

/// `/mcp` is outside the OpenAPI document: its rules, by caller. Opening a session needs a valid credential; a
/// session answers only the credential's principal that opened it (any other gets 404, as for a session that does
/// not exist); asking needs a role that may ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_serve_only_their_opener_and_tools_follow_the_roles() {
    let app = TestApp::start(common::Backend::Sqlite).await.unwrap();
    let base = app.serve().await;
    let callers = caller_tokens(&app).await;
    let http = reqwest::Client::new();
    let rpc = |token: Option<&str>, session: Option<&str>, body: Value| {
        let mut request =
            http.post(format!("{base}/mcp")).header("accept", "application/json, text/event-stream").json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialize = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let ask = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "ask_user", "arguments": { "title": "Go?", "kind": "non_blocking" } } });
    // Whether each caller may ask (a non-blocking question returns at once).
    let may_ask = [false, false, true, true, true, true, true];
    let mut sessions = Vec::new();
    for (caller, token) in callers.iter().enumerate() {
        let opened = rpc(token.as_deref(), None, initialize.clone()).await.unwrap();
        if token.is_none() {
            assert_eq!(opened.status(), 401, "{}", CALLERS[caller]);
            sessions.push(None);
            continue;
        }
        assert_eq!(opened.status(), 200, "{}", CALLERS[caller]);
        let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let notified = rpc(token.as_deref(), Some(&session), initialized.clone()).await.unwrap();
        assert!(notified.status().is_success(), "{}: {}", CALLERS[caller], notified.status());
        let asked = rpc(token.as_deref(), Some(&session), ask.clone()).await.unwrap();
        assert_eq!(asked.status(), 200, "{}", CALLERS[caller]);
        let text = asked.text().await.unwrap();
        assert_eq!(
            // The tool's result is JSON inside the JSON-RPC message's text content, so its quotes are escaped.
            text.contains(r#"\"outcome\":\"pending\""#),
            may_ask[caller],
            "{} asking over MCP: {text}",
            CALLERS[caller]
        );
        sessions.push(Some(session));
    }
    // Every credential against every other caller's session: 404.
    for (owner, session) in sessions.iter().enumerate() {
        let Some(session) = session else { continue };
        for (caller, token) in callers.iter().enumerate() {
            let Some(token) = token else { continue };
            if caller == owner {
                continue;
            }
            let borrowed = rpc(Some(token), Some(session), ask.clone()).await.unwrap();
            assert_eq!(borrowed.status(), 404, "{} using {}'s session", CALLERS[caller], CALLERS[owner]);
        }
    }
}
