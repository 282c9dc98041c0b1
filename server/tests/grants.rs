//! Grants (docs/api.md): "always allow" rules made with an approval, consulted by the executor and by MCP's
//! `request_approval` before a person is asked, audited with each call they let through, listed and revoked.

use crate::common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Scripts, TestApp, assert_error};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

on_both_backends!(
    a_run_scoped_prefix_grant_lets_matching_calls_through_and_nothing_else,
    a_revoked_or_expired_grant_lets_nothing_through,
    a_tokens_grant_lets_its_mcp_request_approval_through,
    a_tokens_grant_approves_its_rest_approval_as_it_is_asked,
    an_approval_by_a_grant_revoked_before_its_write_writes_nothing,
    grant_requests_are_checked_and_a_faulty_one_changes_nothing,
    the_same_call_approved_by_hand_is_counted_for_the_grant_offer,
    a_prefix_grant_covers_the_command_and_every_other_argument_only_as_approved,
    an_agent_grant_covers_the_token_that_asked_not_every_token_running_that_agent,
);

async fn app_with_shell(backend: common::Backend, scripts: &Scripts) -> Option<TestApp> {
    let dir = scripts.dir.clone();
    TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.shell = holdpoint::runtime::settings::ShellMode::DryRun;
    })
    .await
}

/// An agent whose policy prompts for `shell`, running `commands` one model turn each, then finishing.
async fn shell_agent(app: &TestApp, scripts: &Scripts, name: &str, commands: &[&str]) -> Value {
    let mut turns: Vec<Value> = commands
        .iter()
        .map(|command| json!({ "tool_calls": [{ "name": "shell", "arguments": { "command": command } }] }))
        .collect();
    turns.push(json!({ "content": "done" }));
    let model = scripts.write(&format!("{name}.json"), &Value::Array(turns));
    let spec = json!({ "name": name, "system_prompt": "You look after the repository.", "model": model,
        "tools": ["shell"], "approval_policy": { "tools": { "shell": "prompt" } } });
    let created = app.post("/api/v1/agents", spec).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.json
}

async fn start_run(app: &TestApp, agent: &Value) -> String {
    let response = app.post("/api/v1/runs", json!({ "agent_id": agent["id"], "input": "tidy up" })).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.json["id"].as_str().unwrap().to_owned()
}

async fn pending_question_of(app: &TestApp, run_id: &str) -> Value {
    let run = app.wait_for_run(run_id, "waiting_for_approval").await;
    let id = run["pending_question_ids"][0].as_str().unwrap();
    app.get(&format!("/api/v1/questions/{id}")).await.json
}

async fn tool_calls(app: &TestApp, run_id: &str) -> Vec<Value> {
    app.get(&format!("/api/v1/runs/{run_id}/tool-calls")).await.json["items"].as_array().unwrap().clone()
}

async fn audit(app: &TestApp, action: &str) -> Vec<Value> {
    let page = app.get(&format!("/api/v1/audit?action={action}&limit=100")).await.json;
    page["items"].as_array().unwrap().clone()
}

async fn a_run_scoped_prefix_grant_lets_matching_calls_through_and_nothing_else(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = app_with_shell(backend, &scripts).await else { return };
    let agent = shell_agent(&app, &scripts, "tidier", &["git status", "git status --short", "git push"]).await;
    let run_id = start_run(&app, &agent).await;

    // The first call asks; the approver allows it and every `git status …` of this run.
    let first = pending_question_of(&app, &run_id).await;
    assert_eq!(first["action"]["arguments"]["command"], "git status");
    let grant = json!({ "scope": "run", "matcher": { "command_prefix": "git status" } });
    let approved = app
        .post(
            &format!("/api/v1/questions/{}/answer", first["id"].as_str().unwrap()),
            json!({ "value": true, "grant": grant }),
        )
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);

    // `git status --short` runs without a question; `git push` asks.
    let second = pending_question_of(&app, &run_id).await;
    assert_eq!(second["action"]["arguments"]["command"], "git push", "the next question is the push");
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[1]["input"]["command"], "git status --short");
    assert_eq!(calls[1]["status"], "completed");
    assert_eq!(calls[1]["decided_by"], "grant");
    assert!(calls[1]["question_id"].is_null(), "nobody was asked: {}", calls[1]);
    let questions = app.get(&format!("/api/v1/questions?run_id={run_id}")).await.json;
    assert_eq!(questions["items"].as_array().unwrap().len(), 2, "asked for the first call and the push only");

    // The grant, as listed, and the audit: made by the admin, used once, with the call it let through.
    let grants = app.get("/api/v1/grants").await.json;
    let listed = &grants["items"][0];
    assert_eq!(listed["scope"], "run");
    assert_eq!(listed["run_id"], run_id.as_str());
    assert_eq!(listed["tool_name"], "shell");
    assert_eq!(listed["matcher"], json!({ "command_prefix": "git status" }));
    assert_eq!(listed["created_by"], "admin of default");
    assert_eq!(listed["uses"], 1);
    let expires = app::types::time::parse_rfc3339(listed["expires_at"].as_str().unwrap()).unwrap();
    let lifetime = (expires - chrono::Utc::now()).num_minutes();
    assert!((1430..=1440).contains(&lifetime), "24 hours by default: {lifetime} min");
    let created = audit(&app, "grant.created").await;
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["actor"], "admin of default");
    let grants = app.get("/api/v1/grants").await.json;
    assert_eq!(grants["items"][0]["uses"], 1);
    let used = audit(&app, "grant.used").await;
    assert_eq!(used.len(), 1);
    assert_eq!(used[0]["subject_id"], listed["id"]);
    assert_eq!(used[0]["after"]["arguments"]["command"], "git status --short");
    assert_eq!(used[0]["after"]["grant_created_by"], "admin of default");
    assert_eq!(used[0]["after"]["run_id"], run_id.as_str());

    let rejected = app
        .post(&format!("/api/v1/questions/{}/answer", second["id"].as_str().unwrap()), json!({ "value": false }))
        .await;
    assert_eq!(rejected.status, StatusCode::OK);
    app.wait_for_run(&run_id, "completed").await;

    // Another run of the same agent is not covered by a run's grant.
    let agent = shell_agent(&app, &scripts, "tidier-two", &["git status"]).await;
    let other = start_run(&app, &agent).await;
    assert_eq!(pending_question_of(&app, &other).await["action"]["arguments"]["command"], "git status");
}

async fn a_revoked_or_expired_grant_lets_nothing_through(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = app_with_shell(backend, &scripts).await else { return };
    // An agent-wide grant for exactly `make test`, then revoked: the agent's next run asks again.
    let agent = shell_agent(&app, &scripts, "tester", &["make test"]).await;
    let run_id = start_run(&app, &agent).await;
    let question = pending_question_of(&app, &run_id).await;
    let answer = json!({ "value": true, "grant": { "scope": "agent" } });
    let approved = app.post(&format!("/api/v1/questions/{}/answer", question["id"].as_str().unwrap()), answer).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    app.wait_for_run(&run_id, "completed").await;
    let grant = app.get("/api/v1/grants").await.json["items"][0].clone();
    assert_eq!(grant["scope"], "agent");
    assert_eq!(grant["agent"], format!("agent:{}", agent["id"].as_str().unwrap()), "the definition, not a name");
    assert_eq!(grant["matcher"], json!({ "equals": { "command": "make test" } }));

    // While it lives, the agent's next run is let through.
    let through = start_run(&app, &agent).await;
    app.wait_for_run(&through, "completed").await;
    assert_eq!(tool_calls(&app, &through).await[0]["decided_by"], "grant");

    let id = grant["id"].as_str().unwrap();
    let revoked = app.post(&format!("/api/v1/grants/{id}/revoke"), json!({})).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    assert!(revoked.json["revoked_at"].is_string());
    assert_eq!(revoked.json["revoked_by"], "admin of default");
    assert_error(&app.post(&format!("/api/v1/grants/{id}/revoke"), json!({})).await, StatusCode::CONFLICT, "conflict");
    assert_eq!(app.get("/api/v1/grants").await.json["items"], json!([]), "only live grants by default");
    assert_eq!(app.get("/api/v1/grants?all=true").await.json["items"][0]["uses"], 1);
    assert_eq!(audit(&app, "grant.revoked").await.len(), 1);
    let asks = start_run(&app, &agent).await;
    pending_question_of(&app, &asks).await;

    // A grant past its expiry lets nothing through either.
    let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
    let now = holdpoint::store::now();
    let expired = holdpoint::store::GrantRow {
        id: uuid::Uuid::now_v7(),
        workspace_id: workspace,
        scope: app::types::GrantScope::Workspace,
        run_id: None,
        agent: None,
        tool_name: "shell".into(),
        matcher: sqlx::types::Json(app::types::ArgumentMatcher::command_prefix("make")),
        created_by: "admin of default".into(),
        created_by_id: None,
        question_id: None,
        created_at: now - chrono::Duration::hours(25),
        expires_at: now - chrono::Duration::seconds(1),
        revoked_at: None,
        revoked_by: None,
        uses: 0,
        last_used_at: None,
    };
    let entry = holdpoint::store::NewAuditEntry {
        workspace_id: workspace,
        actor: holdpoint::store::AuditActor::policy("test harness", None),
        action: "grant.created".into(),
        subject_type: "grant".into(),
        subject_id: Some(expired.id.to_string()),
        before: None,
        after: None,
        diff: None,
        created_at: now,
    };
    app.state.store.insert_grant(&expired, &entry).await.unwrap();
    let still_asks = start_run(&app, &agent).await;
    pending_question_of(&app, &still_asks).await;
    let calls = tool_calls(&app, &still_asks).await;
    assert_eq!(calls[0]["status"], "pending_approval");
}

async fn a_tokens_grant_lets_its_mcp_request_approval_through(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let base = app.serve().await;
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(agent.clone());
    let client = std::sync::Arc::new(
        ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("the MCP client connects"),
    );
    let ask_with = |command: &'static str, extra: Value| {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move {
            let mut arguments = json!({ "tool_name": "shell", "input": { "command": command } });
            arguments.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            let params =
                CallToolRequestParams::new("request_approval").with_arguments(arguments.as_object().unwrap().clone());
            let result = client.call_tool(params).await.unwrap();
            serde_json::from_str::<Value>(&result.content[0].as_text().unwrap().text).unwrap()
        })
    };
    let ask = |command: &'static str| ask_with(command, json!({}));
    let asking = ask("npm test");
    let question = loop {
        let page = app.get("/api/v1/questions?status=pending").await.json;
        if let Some(question) = page["items"].as_array().and_then(|items| items.first()) {
            break question.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let id = question["id"].as_str().unwrap();
    let grant = json!({ "scope": "agent", "matcher": { "command_prefix": "npm test" }, "expires_in_seconds": 3600 });
    let approved = app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": true, "grant": grant })).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    assert_eq!(asking.await.unwrap()["behavior"], "allow");

    // The same token's next `npm test -- --watch=false` is allowed at once; another command still asks.
    let again = tokio::time::timeout(Duration::from_secs(10), ask("npm test -- --watch=false")).await.unwrap().unwrap();
    assert_eq!(again, json!({ "behavior": "allow", "updatedInput": { "command": "npm test -- --watch=false" } }));
    let pending = app.get("/api/v1/questions?status=pending").await.json;
    assert_eq!(pending["items"], json!([]), "nobody was asked");
    // Another command is asked about, and so is a matching one that needs two people or names who may approve it.
    let others = [
        ask("npm publish"),
        ask_with("npm test", json!({ "required_approvals": 2 })),
        ask_with("npm test", json!({ "eligible": { "role": "admin" } })),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while app.get("/api/v1/questions?status=pending").await.json["items"].as_array().unwrap().len() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "the three are asked within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    others.iter().for_each(tokio::task::JoinHandle::abort);
    let used = app.get("/api/v1/audit?action=grant.used").await.json;
    assert_eq!(used["items"][0]["after"]["source"], "mcp");
}

async fn a_tokens_grant_approves_its_rest_approval_as_it_is_asked(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let base = app.serve().await;
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let approval = |command: &str, extra: Value| {
        let mut question = json!({
            "kind": "approval",
            "title": format!("Run {command}?"),
            "project": "ci",
            "action": { "tool_name": "shell", "arguments": { "command": command } },
        });
        question.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        question
    };
    let ask = |question: Value, key: Option<&'static str>| {
        let mut request = axum::http::Request::builder()
            .method(Method::POST)
            .uri("/api/v1/questions")
            .header("authorization", format!("Bearer {agent}"))
            .header("content-type", "application/json");
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        app.send(request.body(axum::body::Body::from(question.to_string())).unwrap())
    };
    let first = ask(approval("npm test", json!({})), None).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    assert_eq!(first.json["status"], "pending");
    let id = first.json["id"].as_str().unwrap();
    let grant = json!({ "scope": "agent", "matcher": { "command_prefix": "npm test" }, "expires_in_seconds": 3600 });
    let approved = app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": true, "grant": grant })).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let events = common::connect_events(&base, &app.token, Some(0)).await;

    // The same token's next matching call is approved as it is asked: by the grant, with nobody asked.
    let granted = ask(approval("npm test -- --watch=false", json!({})), Some("granted-once")).await;
    assert_eq!(granted.status, StatusCode::CREATED, "{}", granted.text);
    assert_eq!(granted.json["status"], "answered");
    assert_eq!(granted.json["response"]["value"], true);
    assert_eq!(granted.json["resolution"], "policy");
    assert_eq!(granted.json["answered_by"], "grant");
    assert_eq!(granted.json["response"]["comment"], "Covered by a grant from admin of default, so nobody was asked.");
    let granted_id = granted.json["id"].as_str().unwrap();
    assert_eq!(app.get("/api/v1/questions?status=pending").await.json["items"], json!([]), "nobody was asked");
    let waited =
        app.call(Method::GET, &format!("/api/v1/questions/{granted_id}/wait?timeout=1"), Some(&agent), None).await;
    assert_eq!(waited.json["status"], "answered", "{}", waited.text);
    // Its stream says it was asked, then answered; its audit names the grant, its maker and the question.
    let seen = common::read_events_until(events, |events| {
        events.iter().filter(|(_, _, data)| data["question"]["id"] == granted_id).count() >= 2
    })
    .await;
    let of_granted: Vec<&str> = seen
        .iter()
        .filter(|(_, _, data)| data["question"]["id"] == granted_id)
        .map(|(_, kind, _)| kind.as_str())
        .collect();
    assert_eq!(of_granted, ["question_asked", "question_answered"]);
    // Even its asked event shows it answered: no page offers it to a person, not for a moment.
    let asked = seen.iter().find(|(_, kind, data)| kind == "question_asked" && data["question"]["id"] == granted_id);
    assert_eq!(asked.unwrap().2["question"]["status"], "answered");
    let grants = app.get("/api/v1/grants").await.json;
    assert_eq!(grants["items"][0]["uses"], 1);
    let used = audit(&app, "grant.used").await;
    assert_eq!(used.len(), 1);
    assert_eq!(used[0]["after"]["question_id"], granted_id);
    assert_eq!(used[0]["after"]["arguments"]["command"], "npm test -- --watch=false");
    assert_eq!((used[0]["actor_kind"].as_str(), used[0]["actor"].as_str()), (Some("policy"), Some("grant")));
    let answered = audit(&app, "question.answered").await;
    let by_grant = answered.iter().find(|entry| entry["subject_id"] == granted_id).expect("its answer is audited");
    assert_eq!(by_grant["actor_id"], grants["items"][0]["id"]);

    // A retry with the same key gets the same question and uses the grant no more.
    let retried = ask(approval("npm test -- --watch=false", json!({})), Some("granted-once")).await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.text);
    assert_eq!(retried.json["id"], granted_id);
    assert_eq!(retried.json["status"], "answered");
    assert_eq!(app.get("/api/v1/grants").await.json["items"][0]["uses"], 1);

    // Another command, or one that needs two people or names who may approve it, is asked.
    for (command, extra) in [
        ("npm publish", json!({})),
        ("npm test", json!({ "required_approvals": 2 })),
        ("npm test", json!({ "eligible": { "role": "admin" } })),
    ] {
        let asked = ask(approval(command, extra.clone()), None).await;
        assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
        assert_eq!(asked.json["status"], "pending", "{command} {extra}");
    }
    // Another token's call is its own: the grant was scoped to the agent that asked.
    let other = app.create_token("default", app::types::Role::Agent).await;
    let asked = app.call(Method::POST, "/api/v1/questions", Some(&other), Some(approval("npm test", json!({})))).await;
    assert_eq!(asked.json["status"], "pending", "{}", asked.text);
    // Revoked, it lets nothing through.
    let grant_id = grants["items"][0]["id"].as_str().unwrap();
    let revoked = app.post(&format!("/api/v1/grants/{grant_id}/revoke"), json!({})).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    let after = ask(approval("npm test", json!({})), None).await;
    assert_eq!(after.json["status"], "pending", "{}", after.text);
    assert_eq!(audit(&app, "grant.used").await.len(), 1);
}

/// The store writes a question a grant approves only while the grant is live: one revoked after it was read (by a
/// person, between the asking's read and its write) leaves nothing written, and the asking tries the next grant or
/// asks a person.
async fn an_approval_by_a_grant_revoked_before_its_write_writes_nothing(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let action = json!({ "tool_name": "shell", "arguments": { "command": "npm test" } });
    let question = json!({ "kind": "approval", "title": "Run the tests?", "action": action });
    let asked = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(question)).await;
    let id = asked.json["id"].as_str().unwrap();
    let grant = json!({ "scope": "workspace", "matcher": { "equals": { "command": "npm test" } } });
    let approved = app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": true, "grant": grant })).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let store = app.state.store.as_ref();
    let workspace = store.ensure_workspace("default").await.unwrap();
    let grant_id: uuid::Uuid =
        app.get("/api/v1/grants").await.json["items"][0]["id"].as_str().unwrap().parse().unwrap();
    let read = store.grant(workspace.id, grant_id).await.unwrap().unwrap();
    let revoked = app.post(&format!("/api/v1/grants/{grant_id}/revoke"), json!({})).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);

    let input =
        serde_json::from_value(json!({ "kind": "approval", "title": "Run the tests again?", "action": action }));
    let row = app.state.asking().prepare(input.unwrap(), workspace.id, None).await.unwrap();
    let call = holdpoint::grants::Call {
        workspace_id: workspace.id,
        tool_name: "shell",
        arguments: &action["arguments"],
        run_id: None,
        agent: None,
    };
    let (event, with) = holdpoint::questions::approved_by_grant(&row, "default", &read, &call).unwrap();
    let written = store.create_question(&row, &event, None, &with).await;
    assert!(matches!(written, Err(holdpoint::store::StoreError::GrantNotLive)), "{written:?}");
    assert!(store.question(workspace.id, row.id).await.unwrap().is_none(), "no question was written");
    assert!(audit(&app, "grant.used").await.is_empty());
    assert_eq!(app.get("/api/v1/grants?all=true").await.json["items"][0]["uses"], 0);
}

async fn grant_requests_are_checked_and_a_faulty_one_changes_nothing(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let approver = {
        let created = app.post("/api/v1/tokens", json!({ "name": "ops approver", "role": "approver" })).await;
        created.json["secret"].as_str().unwrap().to_owned()
    };
    let asked = app
        .call(
            Method::POST,
            "/api/v1/questions",
            Some(&agent),
            Some(json!({ "kind": "approval", "title": "Deploy?", "action": { "tool_name": "deploy", "arguments": { "env": "prod" } } })),
        )
        .await;
    let id = asked.json["id"].as_str().unwrap().to_owned();
    let answer = format!("/api/v1/questions/{id}/answer");
    let refused = [
        (json!({ "value": true, "grant": { "scope": "run" } }), "grant.scope"),
        (
            json!({ "value": true, "grant": { "scope": "agent", "matcher": { "command_prefix": "deploy" } } }),
            "grant.matcher",
        ),
        (
            json!({ "value": true, "grant": { "scope": "agent", "matcher": { "equals": { "env": "dev" } } } }),
            "grant.matcher.equals",
        ),
        (
            json!({ "value": true, "grant": { "scope": "agent", "expires_in_seconds": 2_592_001 } }),
            "grant.expires_in_seconds",
        ),
        (json!({ "value": true, "grant": { "scope": "agent", "expires_in_seconds": 10 } }), "grant.expires_in_seconds"),
        (json!({ "value": false, "grant": { "scope": "agent" } }), "grant"),
    ];
    for (body, field) in refused {
        let response = app.post(&answer, body.clone()).await;
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"].get(field).is_some(), "{body} → {error}");
    }
    // A workspace-wide grant is for admins.
    let by_approver = app
        .call(Method::POST, &answer, Some(&approver), Some(json!({ "value": true, "grant": { "scope": "workspace" } })))
        .await;
    assert_error(&by_approver, StatusCode::FORBIDDEN, "forbidden");
    let unknown = app.post(&answer, json!({ "value": true, "grant": { "scope": "galaxy" } })).await;
    assert!(unknown.status.is_client_error());
    assert_eq!(app.get(&format!("/api/v1/questions/{id}")).await.json["status"], "pending", "nothing was answered");
    assert_eq!(app.get("/api/v1/grants?all=true").await.json["items"], json!([]), "nothing was granted");

    // Shell prefixes that could chain another command are refused when the grant is made.
    let shell = app
        .call(
            Method::POST,
            "/api/v1/questions",
            Some(&agent),
            Some(json!({ "kind": "approval", "title": "Run?", "action": { "tool_name": "shell", "arguments": { "command": "git status; rm -rf /" } } })),
        )
        .await;
    let shell_answer = format!("/api/v1/questions/{}/answer", shell.json["id"].as_str().unwrap());
    for prefix in ["git status;", "git status &&", "git status |", "$(git status)"] {
        let body = json!({ "value": true, "grant": { "scope": "agent", "matcher": { "command_prefix": prefix } } });
        let response = app.post(&shell_answer, body).await;
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"].get("grant.matcher.command_prefix").is_some(), "{prefix:?} → {error}");
    }
    // An agent token reads no grants; a viewer does.
    let listed = app.call(Method::GET, "/api/v1/grants", Some(&agent), None).await;
    assert_error(&listed, StatusCode::FORBIDDEN, "forbidden");
}

async fn the_same_call_approved_by_hand_is_counted_for_the_grant_offer(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let ask = |arguments: Value| {
        let (app, agent) = (&app, agent.clone());
        async move {
            let body = json!({ "kind": "approval", "title": "Run the linter?",
                "action": { "tool_name": "shell", "arguments": arguments } });
            let asked = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(body)).await;
            asked.json["id"].as_str().unwrap().to_owned()
        }
    };
    let count = |id: String| {
        let app = &app;
        async move { app.get(&format!("/api/v1/questions/{id}/approved-before")).await.json["approved_by_hand"].clone() }
    };
    let lint = json!({ "command": "cargo clippy", "cwd": "/srv/app" });
    for n in 0..5 {
        let id = ask(lint.clone()).await;
        assert_eq!(count(id.clone()).await, n);
        // The same arguments written in another order are the same call.
        let value = if n == 4 { json!(false) } else { json!(true) };
        app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": value })).await;
    }
    // Four approvals and one rejection: four.
    let sixth = ask(json!({ "cwd": "/srv/app", "command": "cargo clippy" })).await;
    assert_eq!(count(sixth).await, 4);
    let other = ask(json!({ "command": "cargo clippy --fix", "cwd": "/srv/app" })).await;
    assert_eq!(count(other).await, 0, "other arguments are another call");
}

/// A `shell` grant's prefix covers the command; every other argument is the approved call's. `git status` in
/// another `cwd` runs that repository's hooks and configuration, so it is asked about, and so is an argument the
/// approved call did not have.
async fn a_prefix_grant_covers_the_command_and_every_other_argument_only_as_approved(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let ask = |arguments: Value| {
        let question = json!({
            "kind": "approval",
            "title": format!("Run {}?", arguments["command"]),
            "action": { "tool_name": "shell", "arguments": arguments },
        });
        let (app, agent) = (&app, agent.clone());
        async move {
            let asked = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(question)).await;
            assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
            asked.json
        }
    };
    let approve = |id: Value, grant: Value| {
        let app = &app;
        async move {
            let answer = format!("/api/v1/questions/{}/answer", id.as_str().unwrap());
            app.post(&answer, json!({ "value": true, "grant": grant })).await
        }
    };

    let first = ask(json!({ "command": "git status" })).await;
    let grant = json!({ "scope": "agent", "matcher": { "command_prefix": "git status" } });
    let approved = approve(first["id"].clone(), grant).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let listed = app.get("/api/v1/grants").await.json;
    assert_eq!(listed["items"][0]["matcher"], json!({ "command_prefix": "git status" }), "no other arguments");

    let covered = ask(json!({ "command": "git status -s" })).await;
    assert_eq!((covered["status"].as_str(), covered["answered_by"].as_str()), (Some("answered"), Some("grant")));
    for arguments in [
        json!({ "command": "git status", "cwd": "/tmp/x" }),
        json!({ "command": "git status", "timeout_seconds": 1 }),
        json!({ "command": "git status -s", "cwd": "/tmp/attacker-repo" }),
    ] {
        let asked = ask(arguments.clone()).await;
        assert_eq!(asked["status"], "pending", "{arguments} was let through by a grant of the command alone");
    }

    // Made while approving a call in a `cwd`, a grant records it: the same `cwd` only, and no other argument.
    let in_repo = app.get("/api/v1/questions?status=pending").await.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["action"]["arguments"]["cwd"] == "/tmp/x")
        .cloned()
        .expect("the call in /tmp/x is pending");
    let wrong = json!({ "scope": "agent", "matcher": { "command_prefix": "git", "other_arguments": { "cwd": "/" } } });
    let refused = approve(in_repo["id"].clone(), wrong).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"].get("grant.matcher.other_arguments").is_some(), "{error}");
    let grant = json!({ "scope": "agent", "matcher": { "command_prefix": "git" } });
    let approved = approve(in_repo["id"].clone(), grant).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let listed = app.get("/api/v1/grants").await.json;
    assert_eq!(
        listed["items"][0]["matcher"],
        json!({ "command_prefix": "git", "other_arguments": { "cwd": "/tmp/x" } })
    );
    let covered = ask(json!({ "command": "git log", "cwd": "/tmp/x" })).await;
    assert_eq!((covered["status"].as_str(), covered["answered_by"].as_str()), (Some("answered"), Some("grant")));
    for arguments in [
        json!({ "command": "git log" }),
        json!({ "command": "git log", "cwd": "/tmp/attacker-repo" }),
        json!({ "command": "git log", "cwd": "/tmp/x", "timeout_seconds": 1 }),
    ] {
        let asked = ask(arguments.clone()).await;
        assert_eq!(asked["status"], "pending", "{arguments} was let through");
    }
    let used = audit(&app, "grant.used").await;
    assert_eq!(used.len(), 2, "two calls were let through: {used:?}");
}

/// Any agent token may run any agent, so an `agent` grant made on a token's question is bound to that token, not to
/// the agent's name: another token running the same agent and asking the same call is asked.
async fn an_agent_grant_covers_the_token_that_asked_not_every_token_running_that_agent(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = app_with_shell(backend, &scripts).await else { return };
    let deployer = shell_agent(&app, &scripts, "deployer", &["make deploy"]).await;
    let (first, second) = (
        app.create_token("default", app::types::Role::Agent).await,
        app.create_token("default", app::types::Role::Agent).await,
    );
    let run_of = |token: String| {
        let body = json!({ "agent_id": deployer["id"], "input": "ship it", "executor": "client" });
        let app = &app;
        async move {
            let run = app.call(Method::POST, "/api/v1/runs", Some(&token), Some(body)).await;
            assert_eq!(run.status, StatusCode::CREATED, "{}", run.text);
            run.json["id"].as_str().unwrap().to_owned()
        }
    };
    let ask = |token: String, run_id: String| {
        let question = json!({ "kind": "approval", "title": "Deploy?", "run_id": run_id,
            "action": { "tool_name": "shell", "arguments": { "command": "make deploy" } } });
        let app = &app;
        async move {
            let asked = app.call(Method::POST, "/api/v1/questions", Some(&token), Some(question)).await;
            assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
            asked.json
        }
    };

    // The first token, running "deployer", is granted `make deploy` for its agent.
    let asked = ask(first.clone(), run_of(first.clone()).await).await;
    assert_eq!(asked["status"], "pending");
    let answer = json!({ "value": true, "grant": { "scope": "agent" } });
    let approved = app.post(&format!("/api/v1/questions/{}/answer", asked["id"].as_str().unwrap()), answer).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let grant = app.get("/api/v1/grants").await.json["items"][0].clone();
    assert!(grant["agent"].as_str().unwrap().starts_with("token:"), "bound to the token that asked: {grant}");

    // Its next run asks nobody.
    let again = ask(first.clone(), run_of(first.clone()).await).await;
    assert_eq!(again["status"], "answered", "{again}");
    assert_eq!(again["answered_by"], "grant");
    // Another token running the same agent is asked.
    let other = ask(second.clone(), run_of(second.clone()).await).await;
    assert_eq!(other["status"], "pending", "another token does not borrow the grant: {other}");
    assert_eq!(audit(&app, "grant.used").await.len(), 1);
}
