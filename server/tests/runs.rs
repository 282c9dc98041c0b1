//! The agent runtime through the API: runs that pause for a person and resume exactly where they stopped.

use crate::common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{Scripts, TestApp, assert_error};
use holdpoint::runtime::settings::ModelEndpoint;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn start(backend: common::Backend, scripts: &Scripts, mock: Option<&MockServer>, cap: u32) -> Option<TestApp> {
    let dir = scripts.dir.clone();
    let host = mock.map(|m| m.address().to_string());
    let endpoint = mock.map(model_endpoint);
    TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.http_allowed_hosts = host.into_iter().collect();
        config.runtime.model_endpoints = endpoint.into_iter().collect();
        config.runtime.max_total_steps = cap;
    })
    .await
}

/// A server whose agents may use `mock` as their model, and whose `http_request` reaches no host.
async fn start_with_model(backend: common::Backend, scripts: &Scripts, mock: &MockServer) -> Option<TestApp> {
    let dir = scripts.dir.clone();
    let endpoint = model_endpoint(mock);
    TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.model_endpoints = vec![endpoint];
    })
    .await
}

/// `mock`'s OpenAI-compatible API as a model endpoint the operator allows, without a key.
fn model_endpoint(mock: &MockServer) -> ModelEndpoint {
    format!("{}/v1", mock.uri()).parse().unwrap()
}

async fn create_agent(app: &TestApp, spec: Value) -> Value {
    let response = app.post("/api/v1/agents", spec).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.json
}

async fn start_run(app: &TestApp, agent_id: &Value, input: &str) -> String {
    let response = app.post("/api/v1/runs", json!({ "agent_id": agent_id, "input": input })).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.json["id"].as_str().unwrap().to_owned()
}

async fn messages(app: &TestApp, run_id: &str) -> Vec<Value> {
    let page = app.get(&format!("/api/v1/runs/{run_id}/messages?limit=200")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    page.json["items"].as_array().unwrap().clone()
}

async fn tool_calls(app: &TestApp, run_id: &str) -> Vec<Value> {
    let page = app.get(&format!("/api/v1/runs/{run_id}/tool-calls?limit=200")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    page.json["items"].as_array().unwrap().clone()
}

fn deploy_script(mock: &MockServer) -> Value {
    json!([
        { "content": "I will deploy.", "tool_calls": [{ "id": "call_deploy", "name": "http_request",
            "arguments": { "method": "POST", "url": format!("{}/deploy", mock.uri()) } }] },
        { "content": "Deployed." }
    ])
}

async fn deploy_mock() -> MockServer {
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/deploy"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&mock)
        .await;
    mock
}

fn agent(name: &str, model: &str, tools: &[&str], policy: Value) -> Value {
    json!({ "name": name, "system_prompt": "You deploy things.", "model": model, "tools": tools, "approval_policy": policy })
}

async fn run_pauses_for_approval_and_resumes_once_approved(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    let Some(app) = start(backend, &scripts, Some(&mock), 500).await else { return };
    let model = scripts.write("deploy.json", &deploy_script(&mock));
    let agent =
        create_agent(&app, agent("deployer", &model, &["http_request"], json!({"tools": {"http_request": "prompt"}})))
            .await;
    let run_id = start_run(&app, &agent["id"], "Deploy v2").await;

    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    assert_eq!(mock.received_requests().await.unwrap().len(), 0, "nothing runs before it is approved");
    let question_id = run["pending_question_ids"][0].as_str().unwrap().to_owned();
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["kind"], "approval");
    assert_eq!(question["run_id"], run_id.as_str());
    assert_eq!(question["tool_call_id"], "call_deploy");
    assert_eq!(question["action"]["tool_name"], "http_request");

    let answered = app.post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": true })).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    let run = app.wait_for_run(&run_id, "completed").await;
    assert_eq!(run["result"], "Deployed.");
    assert_eq!(run["step_count"], 2);
    assert_eq!(run["segments"].as_array().unwrap().len(), 2, "the resume appended a segment");
    assert_eq!(run["segments"][1]["resumed_from"], run["segments"][0]["id"]);
    assert_eq!(mock.received_requests().await.unwrap().len(), 1, "the approved call ran exactly once");

    let messages = messages(&app, &run_id).await;
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
    let seqs: Vec<u64> = messages.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(messages[3]["content"]["tool_call_id"], "call_deploy");
    let output: Value = serde_json::from_str(messages[3]["content"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(output["status"], 200);

    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["status"], "completed");
    assert!(calls[0]["decided_by"].as_str().unwrap().starts_with("admin"));
    assert!(calls[0]["duration_ms"].is_u64());
    let single = app.get(&format!("/api/v1/runs/{run_id}/tool-calls/call_deploy")).await;
    assert_eq!(single.json["id"], calls[0]["id"]);
}

async fn resuming_a_run_that_waits_for_approval_needs_an_approver(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    let Some(app) = start(backend, &scripts, Some(&mock), 500).await else { return };
    let model = scripts.write("deploy.json", &deploy_script(&mock));
    let agent = create_agent(&app, agent("deployer", &model, &["http_request"], json!({"default": "prompt"}))).await;
    let run_id = start_run(&app, &agent["id"], "Deploy v2").await;
    app.wait_for_run(&run_id, "waiting_for_approval").await;
    let resume = format!("/api/v1/runs/{run_id}/resume");
    // Resuming decides the pending call (undecided ones are rejected): that is answering an approval.
    let responder = app.create_token("default", app::types::Role::Responder).await;
    let refused =
        app.call(axum::http::Method::POST, &resume, Some(&responder), Some(json!({ "prompt": "go on" }))).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(app.get(&format!("/api/v1/runs/{run_id}")).await.json["status"], "waiting_for_approval");
    let approver = app.create_token("default", app::types::Role::Approver).await;
    let decisions = json!({ "tool_decisions": [{ "tool_call_id": "call_deploy", "approved": true }] });
    let resumed = app.call(axum::http::Method::POST, &resume, Some(&approver), Some(decisions)).await;
    assert_eq!(resumed.status, StatusCode::ACCEPTED, "{}", resumed.text);
    app.wait_for_run(&run_id, "completed").await;
    assert_eq!(mock.received_requests().await.unwrap().len(), 1);
}

/// A decision in a resume is an answer to the call's approval question, under the checks every answer passes: a
/// call a rule asks two people to approve is not one resume's to approve, a call only `alice` may decide is not
/// another approver's, a question someone claimed is theirs; each refusal leaves the run and its question as they
/// were. Rejecting the call, as one person may, resumes the run.
async fn a_resume_decides_under_the_checks_every_answer_passes(backend: common::Backend) {
    use axum::http::Method;
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    let Some(app) = start(backend, &scripts, Some(&mock), 500).await else { return };
    let model = scripts.write("deploy.json", &deploy_script(&mock));
    let agent = create_agent(&app, agent("deployer", &model, &["http_request"], json!({"default": "prompt"}))).await;
    let approver = app.create_token("default", app::types::Role::Approver).await;
    // A run of the deployer under `rules`, waiting for the approval of its call: the run's id and the question's.
    let waiting = |rules: Value, input: &'static str| {
        let (app, agent_id) = (&app, agent["id"].clone());
        async move {
            let saved = app.call(Method::PUT, "/api/v1/rules", Some(&app.token), Some(rules)).await;
            assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
            let run_id = start_run(app, &agent_id, input).await;
            let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
            (run_id, run["pending_question_ids"][0].as_str().unwrap().to_owned())
        }
    };
    let resume = |run_id: &str, decision: Value| {
        let (app, path, token) = (&app, format!("/api/v1/runs/{run_id}/resume"), approver.clone());
        async move { app.call(Method::POST, &path, Some(&token), Some(json!({ "tool_decisions": [decision] }))).await }
    };
    let approve = json!({ "tool_call_id": "call_deploy", "approved": true });
    let unchanged = |run_id: String, question_id: String| {
        let app = &app;
        async move {
            assert_eq!(app.get(&format!("/api/v1/runs/{run_id}")).await.json["status"], "waiting_for_approval");
            let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
            assert_eq!(question["status"], "pending");
            assert_eq!(question["approvals"].as_array().map_or(0, Vec::len), 0, "{question}");
        }
    };

    let two = json!({ "rules": [{ "name": "deploys-need-two", "tools": ["http_request"], "decision": "ask",
        "ask": { "required_approvals": 2 } }] });
    let (run_id, question_id) = waiting(two, "Deploy v2").await;
    assert_eq!(app.get(&format!("/api/v1/questions/{question_id}")).await.json["required_approvals"], 2);
    let refused = resume(&run_id, approve.clone()).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let why = error["details"]["fields"]["tool_decisions[0].approved"].as_str().unwrap_or_default();
    assert!(why.contains("needs 2 approvals"), "{error}");
    unchanged(run_id.clone(), question_id).await;
    // One person may reject it: the run goes on without the call.
    let resumed = resume(&run_id, json!({ "tool_call_id": "call_deploy", "approved": false, "comment": "no" })).await;
    assert_eq!(resumed.status, StatusCode::ACCEPTED, "{}", resumed.text);
    app.wait_for_run(&run_id, "completed").await;
    assert_eq!(tool_calls(&app, &run_id).await[0]["status"], "rejected");

    let alice = json!({ "rules": [{ "name": "alice-decides", "tools": ["http_request"], "decision": "ask",
        "ask": { "eligible": { "users": ["alice"] } } }] });
    let (run_id, question_id) = waiting(alice, "Deploy v3").await;
    let refused = resume(&run_id, approve.clone()).await;
    assert!(assert_error(&refused, StatusCode::FORBIDDEN, "forbidden")["message"].as_str().unwrap().contains("alice"));
    // Leaving the call undecided would reject it: that too is alice's.
    let path = format!("/api/v1/runs/{run_id}/resume");
    let undecided = app.call(Method::POST, &path, Some(&approver), Some(json!({ "prompt": "go on" }))).await;
    assert!(
        assert_error(&undecided, StatusCode::FORBIDDEN, "forbidden")["message"].as_str().unwrap().contains("alice")
    );
    unchanged(run_id, question_id).await;

    // Claimed by the operator's token (an admin, whom only another admin could overrule).
    let (run_id, question_id) = waiting(json!({ "rules": [] }), "Deploy v4").await;
    let claim = format!("/api/v1/questions/{question_id}/claim");
    let claimed = app.call(Method::POST, &claim, Some(&app.token), None).await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.text);
    assert_error(&resume(&run_id, approve).await, StatusCode::CONFLICT, "conflict");
    let path = format!("/api/v1/runs/{run_id}/resume");
    let undecided = app.call(Method::POST, &path, Some(&approver), Some(json!({ "prompt": "go on" }))).await;
    assert_error(&undecided, StatusCode::CONFLICT, "conflict");
    unchanged(run_id, question_id).await;
    assert_eq!(mock.received_requests().await.unwrap().len(), 0, "no call was made");
}

async fn a_rejection_reaches_the_model_with_its_reason(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    let Some(app) = start(backend, &scripts, Some(&mock), 500).await else { return };
    let model = scripts.write("deploy.json", &deploy_script(&mock));
    let agent = create_agent(&app, agent("deployer", &model, &["http_request"], json!({"default": "prompt"}))).await;
    let run_id = start_run(&app, &agent["id"], "Deploy v2").await;
    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    let question_id = run["pending_question_ids"][0].as_str().unwrap();
    let rejected = app
        .post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": false, "comment": "freeze week" }))
        .await;
    assert_eq!(rejected.status, StatusCode::OK);
    app.wait_for_run(&run_id, "completed").await;
    assert_eq!(mock.received_requests().await.unwrap().len(), 0, "a rejected call never runs");
    let messages = messages(&app, &run_id).await;
    let result: Value = serde_json::from_str(messages[3]["content"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["status"], "rejected");
    assert_eq!(result["reason"], "freeze week");
    assert!(result["instruction"].as_str().unwrap().contains("Do not retry the same call"));
    assert_eq!(tool_calls(&app, &run_id).await[0]["status"], "rejected");
}

async fn edited_arguments_run_instead_of_the_originals(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    Mock::given(method("POST")).and(path("/deploy-canary")).respond_with(ResponseTemplate::new(201)).mount(&mock).await;
    let Some(app) = start(backend, &scripts, Some(&mock), 500).await else { return };
    let model = scripts.write("deploy.json", &deploy_script(&mock));
    let agent = create_agent(&app, agent("deployer", &model, &["http_request"], json!({"default": "prompt"}))).await;
    let run_id = start_run(&app, &agent["id"], "Deploy v2").await;
    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    let question_id = run["pending_question_ids"][0].as_str().unwrap();
    let edited = json!({ "method": "POST", "url": format!("{}/deploy-canary", mock.uri()) });
    let answer = json!({ "value": true, "edited_arguments": edited });
    assert_eq!(app.post(&format!("/api/v1/questions/{question_id}/answer"), answer).await.status, StatusCode::OK);
    app.wait_for_run(&run_id, "completed").await;
    let received = mock.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].url.path(), "/deploy-canary");
    let call = &tool_calls(&app, &run_id).await[0];
    assert_eq!(call["input"]["url"], format!("{}/deploy", mock.uri()), "the original arguments are kept");
    assert_eq!(call["edited_input"], edited);
}

async fn ask_user_pauses_until_the_answer_and_returns_it(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write(
        "writer.json",
        &json!([
            { "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Which persona?", "response_type": "choice",
                "options": [{ "value": "pirate", "label": "Pirate" }, { "value": "poet", "label": "Poet" }] } }] },
            { "content": "Written." }
        ]),
    );
    let agent = create_agent(&app, agent("writer", &model, &["ask_user"], json!({}))).await;
    let run_id = start_run(&app, &agent["id"], "Write notes").await;
    let run = app.wait_for_run(&run_id, "waiting_for_input").await;
    let question_id = run["pending_question_ids"][0].as_str().unwrap();
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["kind"], "blocking");
    assert_eq!(question["response_type"], "choice");
    assert_eq!(question["tool_call_id"], "call_1_1");
    let wrong = app.post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": "clown" })).await;
    assert_error(&wrong, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let answer = json!({ "value": "poet", "comment": "keep it short" });
    assert_eq!(app.post(&format!("/api/v1/questions/{question_id}/answer"), answer).await.status, StatusCode::OK);
    app.wait_for_run(&run_id, "completed").await;
    let messages = messages(&app, &run_id).await;
    let result: Value = serde_json::from_str(messages[3]["content"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result, json!({ "status": "answered", "value": "poet", "comment": "keep it short" }));
}

/// A model's `ask_user` takes what MCP's `ask_user` takes (docs/api.md): rich fields with their bounds, options as
/// plain strings, or a `response_schema`; one that is not a valid question is told why, and nothing is asked.
async fn ask_user_takes_rich_fields_or_a_response_schema_as_mcps_ask_user_does(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let form = json!({ "title": "Size the cluster", "response_type": "form", "fields": [
        { "key": "nodes", "label": "Nodes", "response_type": "integer", "required": true, "min": 1, "max": 9,
          "widget": "slider" },
        { "key": "start", "label": "Start", "response_type": "datetime" },
        { "key": "regions", "label": "Regions", "response_type": "multi_choice", "options": ["eu", "us"],
          "max_items": 1 },
        { "key": "disks", "label": "Disks", "response_type": "table", "max_rows": 3,
          "columns": [{ "key": "size", "label": "Size", "response_type": "integer", "required": true }] }] });
    let schema = json!({ "title": "Ticket?", "kind": "non_blocking", "response_schema": { "type": "object",
        "properties": { "ticket": { "type": "string", "pattern": "^OPS-[0-9]+$" } }, "required": ["ticket"] } });
    let broken = json!({ "title": "Broken?", "response_type": "rating", "max": 11 });
    let model = scripts.write(
        "planner.json",
        &json!([
            { "tool_calls": [{ "name": "ask_user", "arguments": broken }] },
            { "tool_calls": [{ "name": "ask_user", "arguments": schema }] },
            { "tool_calls": [{ "name": "ask_user", "arguments": form }] },
            { "content": "Planned." }
        ]),
    );
    let agent = create_agent(&app, agent("planner", &model, &["ask_user"], json!({}))).await;
    let run_id = start_run(&app, &agent["id"], "Plan").await;
    app.wait_for_run(&run_id, "waiting_for_input").await;
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[0]["status"], "error", "{calls:?}");
    assert!(calls[0]["output"]["error"].as_str().unwrap().contains("max"), "{calls:?}");

    let questions = app.get("/api/v1/questions").await.json;
    let titled = |title: &str| questions["items"].as_array().unwrap().iter().find(|q| q["title"] == title).cloned();
    let ticket = titled("Ticket?").unwrap();
    assert_eq!((ticket["response_type"].as_str(), ticket["fields"][0]["key"].as_str()), (Some("form"), Some("ticket")));
    let id = ticket["id"].as_str().unwrap();
    let wrong = app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": { "ticket": "ops-1" } })).await;
    assert_error(&wrong, StatusCode::UNPROCESSABLE_ENTITY, "invalid");

    let question = titled("Size the cluster").expect("the form is asked");
    let question_id = question["id"].as_str().unwrap();
    let fields = &question["fields"];
    assert_eq!((fields[0]["max"].as_i64(), fields[0]["widget"].as_str()), (Some(9), Some("slider")));
    assert_eq!(fields[2]["options"][1], json!({ "value": "us", "label": "us" }), "a plain string is value and label");
    assert_eq!(fields[3]["columns"][0]["key"], "size");
    let value = json!({ "nodes": 3, "start": "2026-03-01T09:30:00+01:00", "regions": ["eu"],
        "disks": [{ "size": 100 }, { "size": 200 }] });
    let answered = app.post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": value })).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    app.wait_for_run(&run_id, "completed").await;
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[2]["output"], json!({ "status": "answered", "value": value }), "{calls:?}");
}

async fn an_agent_without_ask_user_cannot_ask(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write(
        "sneaky.json",
        &json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Hi?" } }] }, { "content": "ok" }]),
    );
    let agent = create_agent(&app, agent("sneaky", &model, &[], json!({}))).await;
    let run_id = start_run(&app, &agent["id"], "Try").await;
    app.wait_for_run(&run_id, "completed").await;
    assert_eq!(app.get("/api/v1/questions").await.json["items"].as_array().unwrap().len(), 0);
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[0]["status"], "error");
    assert!(calls[0]["output"]["error"].as_str().unwrap().contains("no tool"));
}

async fn step_budgets_are_per_segment_and_the_total_is_capped(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200)).mount(&mock).await;
    let Some(app) = start(backend, &scripts, Some(&mock), 90).await else { return };
    let turns: Vec<Value> = (0..100)
        .map(|n| json!({ "tool_calls": [{ "name": "http_request", "arguments": { "method": "GET", "url": format!("{}/step/{n}", mock.uri()) } }] }))
        .collect();
    let model = scripts.write("busy.json", &Value::Array(turns));
    let mut spec = agent("busy", &model, &["http_request"], json!({}));
    spec["max_steps"] = json!(45);
    let agent = create_agent(&app, spec).await;
    let run_id = start_run(&app, &agent["id"], "Work").await;

    let run = app.wait_for_run(&run_id, "paused").await;
    assert_eq!(run["step_count"], 45);
    assert_eq!(run["segments"][0]["steps"], 45);
    let resumed = app.post(&format!("/api/v1/runs/{run_id}/resume"), json!({ "prompt": "Go on." })).await;
    assert_eq!(resumed.status, StatusCode::ACCEPTED, "{}", resumed.text);

    let run = app.wait_for_run(&run_id, "paused").await;
    assert_eq!(run["step_count"], 90, "the second segment had a fresh budget of 45");
    assert_eq!(run["segments"].as_array().unwrap().len(), 2);
    assert_eq!(run["segments"][1]["start_step"], 45);
    let all = messages(&app, &run_id).await;
    let prompt_at =
        all.iter().position(|m| m["content"]["content"] == "Go on.").expect("the prompt is in the conversation");
    let next_assistant = all[prompt_at..].iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(next_assistant["step"], 46, "a run paused at 45 steps resumes at 46");

    let refused = app.post(&format!("/api/v1/runs/{run_id}/resume"), json!({})).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert_eq!(error["details"]["max_total_steps"], 90);
    assert_eq!(mock.received_requests().await.unwrap().len(), 90);
}

/// A model that gives two calls the same id, or none (some OpenAI-compatible servers number each turn's calls from
/// one), has its run go on: each such call gets an id of its own, and each result answers its own call.
async fn a_model_that_reuses_a_call_id_has_its_run_go_on(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200)).mount(&mock).await;
    let Some(app) = start(backend, &scripts, Some(&mock), 90).await else { return };
    let get = |id: &str, at: &str| json!({ "id": id, "name": "http_request", "arguments": { "method": "GET", "url": format!("{}/{at}", mock.uri()) } });
    let turns = json!([
        { "tool_calls": [get("c1", "first")] },
        { "tool_calls": [get("c1", "second"), get("", "third")] },
        { "content": "Done." }
    ]);
    let model = scripts.write("reused.json", &turns);
    let agent = create_agent(&app, agent("fetcher", &model, &["http_request"], json!({}))).await;
    let run_id = start_run(&app, &agent["id"], "Fetch three pages").await;
    app.wait_for_run(&run_id, "completed").await;
    let calls = tool_calls(&app, &run_id).await;
    let ids: Vec<&str> = calls.iter().map(|c| c["call_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["c1", "call_2_1", "call_2_2"], "{calls:?}");
    assert!(calls.iter().all(|c| c["status"] == "completed"), "{calls:?}");
    let results: Vec<String> = messages(&app, &run_id)
        .await
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"]["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results, ["c1", "call_2_1", "call_2_2"]);
}

async fn resume_is_refused_unless_the_run_is_paused_or_waiting(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write("done.json", &json!([{ "content": "Nothing to do." }]));
    let agent = create_agent(&app, agent("idle", &model, &[], json!({}))).await;
    let run_id = start_run(&app, &agent["id"], "Nothing").await;
    let run = app.wait_for_run(&run_id, "completed").await;
    assert_eq!(run["result"], "Nothing to do.");
    let refused = app.post(&format!("/api/v1/runs/{run_id}/resume"), json!({})).await;
    assert_error(&refused, StatusCode::CONFLICT, "conflict");
    let cancel = app.post(&format!("/api/v1/runs/{run_id}/cancel"), json!({})).await;
    assert_error(&cancel, StatusCode::CONFLICT, "conflict");
}

async fn resume_decides_pending_approvals_and_rejects_the_rest(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200)).mount(&mock).await;
    let Some(app) = start(backend, &scripts, Some(&mock), 500).await else { return };
    let model = scripts.write(
        "two.json",
        &json!([
            { "tool_calls": [
                { "id": "a", "name": "http_request", "arguments": { "method": "POST", "url": format!("{}/deploy", mock.uri()) } },
                { "id": "b", "name": "http_request", "arguments": { "method": "GET", "url": format!("{}/status", mock.uri()) } }
            ] },
            { "content": "done" }
        ]),
    );
    let agent = create_agent(&app, agent("two", &model, &["http_request"], json!({"default": "prompt"}))).await;
    let run_id = start_run(&app, &agent["id"], "Two calls").await;
    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    assert_eq!(run["pending_question_ids"].as_array().unwrap().len(), 2, "one approval question per call");
    let body = json!({ "tool_decisions": [{ "tool_call_id": "a", "approved": true }] });
    let resumed = app.post(&format!("/api/v1/runs/{run_id}/resume"), body).await;
    assert_eq!(resumed.status, StatusCode::ACCEPTED, "{}", resumed.text);
    app.wait_for_run(&run_id, "completed").await;
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[0]["status"], "completed");
    assert_eq!(calls[1]["status"], "rejected");
    assert_eq!(calls[1]["decision_comment"], "left undecided when the run was resumed");
    let paths: Vec<String> = mock.received_requests().await.unwrap().iter().map(|r| r.url.path().to_owned()).collect();
    assert_eq!(paths, ["/deploy"]);
}

async fn cancelling_a_waiting_run_cancels_its_questions(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts
        .write("ask.json", &json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Go?" } }] }]));
    let agent = create_agent(&app, agent("asker", &model, &["ask_user"], json!({}))).await;
    let run_id = start_run(&app, &agent["id"], "Ask").await;
    let run = app.wait_for_run(&run_id, "waiting_for_input").await;
    let question_id = run["pending_question_ids"][0].as_str().unwrap();
    let cancelled = app.post(&format!("/api/v1/runs/{run_id}/cancel"), json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.json["status"], "cancelled");
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["status"], "cancelled");
}

/// Answers `question_id` and cancels `run_id` at the same moment. The answer succeeds or finds the question
/// already cancelled (409), the cancel succeeds, and the run ends cancelled.
async fn answer_while_cancelling(app: &TestApp, question_id: &str, run_id: &str) {
    let (answer, cancel) = (format!("/api/v1/questions/{question_id}/answer"), format!("/api/v1/runs/{run_id}/cancel"));
    let (answered, cancelled) =
        tokio::join!(app.post(&answer, json!({ "value": "yes" })), app.post(&cancel, json!({})));
    assert!(
        matches!(answered.status, StatusCode::OK | StatusCode::CONFLICT),
        "the answer: {} {}",
        answered.status,
        answered.text
    );
    assert_eq!(cancelled.status, StatusCode::OK, "the cancel: {}", cancelled.text);
    let run = app.get(&format!("/api/v1/runs/{run_id}")).await.json;
    assert_eq!(run["status"], "cancelled", "{run}");
}

/// A person answers a run's question just as someone cancels the run: both requests succeed or are refused
/// cleanly (the answer may find the question already cancelled), never with a server error, and the run ends
/// cancelled either way. On PostgreSQL the two transactions lock the question, the workspace's audit chain and the
/// run; taken in different orders they deadlock, and the database aborts one of them.
async fn answering_and_cancelling_a_waiting_run_at_once_never_fails(backend: common::Backend) {
    const RUNS: usize = 12;
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    // After the answer the run asks again, so it is still open whenever the cancel comes (with one question, a
    // worker could finish the run first, and the cancel would rightly find it completed).
    let ask = json!({ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Go?" } }] });
    let model = scripts.write("ask.json", &json!([ask, ask]));
    let agent = create_agent(&app, agent("asker", &model, &["ask_user"], json!({}))).await;
    let mut waiting = Vec::new();
    for n in 0..RUNS {
        let run_id = start_run(&app, &agent["id"], &format!("Ask {n}")).await;
        let run = app.wait_for_run(&run_id, "waiting_for_input").await;
        waiting.push((run_id, run["pending_question_ids"][0].as_str().unwrap().to_owned()));
    }
    let races = waiting.iter().map(|(run_id, question_id)| {
        let app = &app;
        async move { answer_while_cancelling(app, question_id, run_id).await }
    });
    futures::future::join_all(races).await;
}

/// The same race one level down: a person answers a sub-agent's question just as someone cancels its parent. The
/// cancel reaches the child after the parent's audit entry; the answer locks the child's run first.
async fn answering_a_childs_question_while_its_parent_is_cancelled_never_fails(backend: common::Backend) {
    const PARENTS: usize = 6;
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let child_model = scripts.write(
        "child.json",
        &json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Which table?" } }] }, { "content": "done" }]),
    );
    // After its child, the parent asks too, so it is still open whenever the cancel comes.
    let parent_model = scripts.write(
        "parent.json",
        &json!([
            { "tool_calls": [{ "name": "spawn_agents", "arguments": { "agents": [{ "agent": "child", "input": "Go" }], "wait": true } }] },
            { "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Ship it?" } }] }
        ]),
    );
    create_agent(&app, agent("child", &child_model, &["ask_user"], json!({}))).await;
    let parent = create_agent(&app, agent("parent", &parent_model, &["spawn_agents", "ask_user"], json!({}))).await;
    let mut waiting = Vec::new();
    for n in 0..PARENTS {
        let parent_id = start_run(&app, &parent["id"], &format!("Coordinate {n}")).await;
        app.wait_for_run(&parent_id, "waiting_for_children").await;
        let children = app.get(&format!("/api/v1/runs?parent_run_id={parent_id}")).await.json;
        let child_id = children["items"][0]["id"].as_str().unwrap().to_owned();
        let child = app.wait_for_run(&child_id, "waiting_for_input").await;
        waiting.push((parent_id, child_id, child["pending_question_ids"][0].as_str().unwrap().to_owned()));
    }
    let races = waiting.iter().map(|(parent_id, child_id, question_id)| {
        let app = &app;
        async move {
            answer_while_cancelling(app, question_id, parent_id).await;
            let child = app.get(&format!("/api/v1/runs/{child_id}")).await.json;
            // Answered first, the child may have finished before the cancel reached it.
            assert!(matches!(child["status"].as_str(), Some("cancelled" | "completed")), "{child}");
        }
    });
    futures::future::join_all(races).await;
}

async fn sub_agents_ask_with_their_lineage_and_report_to_the_parent(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let child_model = scripts.write(
        "child.json",
        &json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Which table?" } }] }, { "content": "migrated users" }]),
    );
    let parent_model = scripts.write(
        "parent.json",
        &json!([
            { "tool_calls": [{ "name": "spawn_agents", "arguments": { "agents": [{ "agent": "migrator", "input": "Migrate" }], "wait": true } }] },
            { "content": "all done" }
        ]),
    );
    create_agent(&app, agent("migrator", &child_model, &["ask_user"], json!({}))).await;
    let parent = create_agent(&app, agent("coordinator", &parent_model, &["spawn_agents"], json!({}))).await;
    let parent_id = start_run(&app, &parent["id"], "Coordinate").await;
    app.wait_for_run(&parent_id, "waiting_for_children").await;

    let children = app.get(&format!("/api/v1/runs?parent_run_id={parent_id}")).await.json;
    let child_id = children["items"][0]["id"].as_str().unwrap().to_owned();
    let child = app.wait_for_run(&child_id, "waiting_for_input").await;
    assert_eq!(child["parent_run_ids"], json!([parent_id]));
    let question_id = child["pending_question_ids"][0].as_str().unwrap();
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["parent_run_ids"], json!([parent_id]), "the child's question carries its lineage");
    let inbox = app.get("/api/v1/questions?status=pending").await.json;
    assert_eq!(inbox["items"][0]["id"], question_id, "and shows in the inbox like any other");

    let answer = json!({ "value": "users" });
    assert_eq!(app.post(&format!("/api/v1/questions/{question_id}/answer"), answer).await.status, StatusCode::OK);
    app.wait_for_run(&child_id, "completed").await;
    let parent_run = app.wait_for_run(&parent_id, "completed").await;
    assert_eq!(parent_run["result"], "all done");
    let messages = messages(&app, &parent_id).await;
    let report: Value = serde_json::from_str(messages[3]["content"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(report["runs"][0]["run_id"], child_id.as_str());
    assert_eq!(report["runs"][0]["result"], "migrated users");
}

async fn bad_agents_and_runs_are_refused_and_change_nothing(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let bad = app.post("/api/v1/agents", json!({ "name": "x", "model": "gpt-4", "tools": ["rm_rf"] })).await;
    let error = assert_error(&bad, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["model"].is_string());
    assert!(error["details"]["fields"]["tools[0]"].is_string());
    let missing = app.post("/api/v1/agents", json!({ "name": "x", "model": "script:../../etc/passwd" })).await;
    assert_error(&missing, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let model = scripts.write("ok.json", &json!([{ "content": "ok" }]));
    create_agent(&app, agent("dup", &model, &[], json!({}))).await;
    let duplicate = app.post("/api/v1/agents", agent("dup", &model, &[], json!({}))).await;
    assert_error(&duplicate, StatusCode::CONFLICT, "conflict");
    let no_agent = app.post("/api/v1/runs", json!({ "agent_id": uuid::Uuid::now_v7(), "input": "x" })).await;
    assert_error(&no_agent, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert_eq!(app.get("/api/v1/runs").await.json["items"].as_array().unwrap().len(), 0);
    assert_eq!(app.get("/api/v1/agents").await.json["items"].as_array().unwrap().len(), 1);

    let other = app.create_token("elsewhere", app::types::Role::Admin).await;
    let agent_in_default = app.get("/api/v1/agents").await.json["items"][0]["id"].clone();
    let run = app.post("/api/v1/runs", json!({ "agent_id": agent_in_default, "input": "go" })).await;
    let run_id = run.json["id"].as_str().unwrap();
    // A key reused with another request is refused, naming the run the key started.
    let keyed = |input: &'static str| {
        let request = axum::http::Request::post("/api/v1/runs")
            .header(axum::http::header::AUTHORIZATION, format!("Bearer {}", app.token))
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .header("idempotency-key", "nightly-1")
            .body(axum::body::Body::from(json!({ "agent_id": agent_in_default, "input": input }).to_string()))
            .unwrap();
        app.send(request)
    };
    let first = keyed("first").await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let refused = assert_error(&keyed("second").await, StatusCode::CONFLICT, "conflict");
    assert_eq!(refused["details"]["run_id"], first.json["id"], "{refused}");
    let foreign = app.call(axum::http::Method::GET, &format!("/api/v1/runs/{run_id}"), Some(&other), None).await;
    assert_error(&foreign, StatusCode::NOT_FOUND, "not_found");
}

/// An OpenAI-compatible Chat Completions endpoint: asks for the deploy call until the conversation has its
/// result, then answers.
struct ChatCompletions {
    deploy_url: String,
}

impl wiremock::Respond for ChatCompletions {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let has_result = body["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool");
        let message = if has_result {
            json!({ "role": "assistant", "content": "Deployed.", "refusal": null })
        } else {
            let arguments = json!({ "method": "POST", "url": self.deploy_url }).to_string();
            json!({ "role": "assistant", "content": "Deploying now.", "tool_calls": [
                { "id": "call_abc123", "type": "function", "function": { "name": "http_request", "arguments": arguments } }
            ] })
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 1_700_000_000, "model": body["model"],
            "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 }
        }))
    }
}

async fn chat_mock() -> MockServer {
    let mock = deploy_mock().await;
    let responder = ChatCompletions { deploy_url: format!("{}/deploy", mock.uri()) };
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(responder).mount(&mock).await;
    mock
}

fn openai_agent(name: &str, mock: &MockServer, policy: Value) -> Value {
    json!({ "name": name, "system_prompt": "You deploy things.", "model": "openai:test-model",
        "tools": ["http_request"], "approval_policy": policy,
        "model_settings": { "base_url": format!("{}/v1", mock.uri()) } })
}

async fn chat_requests(mock: &MockServer) -> Vec<wiremock::Request> {
    mock.received_requests().await.unwrap().into_iter().filter(|r| r.url.path() == "/v1/chat/completions").collect()
}

async fn the_request_after_a_resume_is_byte_for_byte_the_one_without_a_pause(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = chat_mock().await;
    let Some(app) = start(backend, &scripts, Some(&mock), 500).await else { return };
    let paused = create_agent(&app, openai_agent("careful", &mock, json!({"tools": {"http_request": "prompt"}}))).await;
    let straight = create_agent(&app, openai_agent("trusting", &mock, json!({"default": "auto"}))).await;

    let run_id = start_run(&app, &paused["id"], "Deploy v2 to staging").await;
    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    let question_id = run["pending_question_ids"][0].as_str().unwrap();
    assert_eq!(
        app.post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": true })).await.status,
        StatusCode::OK
    );
    app.wait_for_run(&run_id, "completed").await;
    let with_pause = chat_requests(&mock).await;
    assert_eq!(with_pause.len(), 2);

    let run_id = start_run(&app, &straight["id"], "Deploy v2 to staging").await;
    app.wait_for_run(&run_id, "completed").await;
    let all = chat_requests(&mock).await;
    let without_pause = &all[2..];
    assert_eq!(without_pause.len(), 2);

    let after_resume = String::from_utf8(with_pause[1].body.clone()).unwrap();
    let never_paused = String::from_utf8(without_pause[1].body.clone()).unwrap();
    assert_eq!(after_resume, never_paused, "same messages, same order, same tool call ids, byte for byte");
    assert_eq!(with_pause[0].body, without_pause[0].body);
    let body: Value = serde_json::from_str(&after_resume).unwrap();
    let roles: Vec<&str> = body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(body["messages"][3]["tool_call_id"], "call_abc123");
    assert_eq!(body["model"], "test-model");
    assert!(body["messages"][2].get("refusal").is_none(), "provider extras are not sent back");
    assert_eq!(mock.received_requests().await.unwrap().iter().filter(|r| r.url.path() == "/deploy").count(), 2);
}

async fn the_provider_client_retries_rate_limits_and_server_errors(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    let rate_limited = json!({ "error": { "message": "slow down", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded" } });
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(429).set_body_json(rate_limited))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&mock)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&mock)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ChatCompletions { deploy_url: String::new() })
        .with_priority(3)
        .mount(&mock)
        .await;
    let Some(app) = start_with_model(backend, &scripts, &mock).await else { return };
    let mut spec = openai_agent("plain", &mock, json!({}));
    spec["tools"] = json!([]);
    let agent = create_agent(&app, spec).await;
    let run_id = start_run(&app, &agent["id"], "Say hi").await;
    let run = app.wait_for_run(&run_id, "completed").await;
    assert_eq!(run["result"], "Deployed.");
    assert_eq!(chat_requests(&mock).await.len(), 4, "a 429 and a 503, each retried, then two turns");
    // The retries by reason, and the tokens the two answered turns reported (one prompt and one completion each).
    let metrics = app.get("/metrics").await.text;
    for sample in [
        r#"holdpoint_model_call_retries_total{reason="rate_limited"} 1"#,
        r#"holdpoint_model_call_retries_total{reason="server_error"} 1"#,
        r#"holdpoint_model_tokens_total{kind="prompt"} 2"#,
        r#"holdpoint_model_tokens_total{kind="completion"} 2"#,
    ] {
        assert!(metrics.lines().any(|line| line == sample), "{sample} in {metrics}");
    }
}

async fn a_provider_that_keeps_failing_fails_the_run_with_a_clear_error(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(ResponseTemplate::new(401).set_body_json(
        json!({ "error": { "message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key" } }),
    )).mount(&mock).await;
    let Some(app) = start_with_model(backend, &scripts, &mock).await else { return };
    let agent = create_agent(&app, openai_agent("unlucky", &mock, json!({}))).await;
    let run_id = start_run(&app, &agent["id"], "Try").await;
    let run = app.wait_for_run(&run_id, "failed").await;
    assert!(run["error_message"].as_str().unwrap().contains("Incorrect API key"), "{run}");
    assert_eq!(chat_requests(&mock).await.len(), 1, "a 401 is not retried");
}

/// A model endpoint that is down (429 and 500 in turn) for every turn after the first while `down` is set, and
/// otherwise [`ChatCompletions`]. Records when each request came.
struct Flaky {
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    model: ChatCompletions,
    seen: std::sync::Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>,
}

impl wiremock::Respond for Flaky {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let mut seen = self.seen.lock().unwrap();
        seen.push(tokio::time::Instant::now());
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let later_turn = body["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool");
        if later_turn && self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return match seen.len() % 2 {
                0 => ResponseTemplate::new(429).set_body_json(
                    json!({ "error": { "message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded" } }),
                ),
                _ => ResponseTemplate::new(500).set_body_string("upstream exploded"),
            };
        }
        self.model.respond(request)
    }
}

/// A model outage longer than the retry window pauses the run with the error (not `failed`); once the provider is
/// back, a resume makes the very call that failed, and the run completes with nothing lost or repeated.
async fn a_model_outage_past_the_retry_window_pauses_the_run_and_a_resume_continues_it(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flaky = Flaky {
        down: down.clone(),
        model: ChatCompletions { deploy_url: format!("{}/deploy", mock.uri()) },
        seen: Default::default(),
    };
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(flaky).mount(&mock).await;
    let (dir, host, endpoint) = (scripts.dir.clone(), mock.address().to_string(), model_endpoint(&mock));
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.http_allowed_hosts = vec![host];
        config.runtime.model_endpoints = vec![endpoint];
        config.runtime.model_retry_seconds = 2;
    })
    .await
    else {
        return;
    };
    let base = app.serve().await;
    let agent = create_agent(&app, openai_agent("patient", &mock, json!({ "default": "auto" }))).await;
    let events = common::connect_events(&base, &app.token, None).await;
    let run_id = start_run(&app, &agent["id"], "Deploy v2 to staging").await;

    let run = app.wait_for_run(&run_id, "paused").await;
    let error = run["error_message"].as_str().unwrap();
    assert!(error.contains("unavailable") && error.contains("retried for"), "{run}");
    assert!(error.contains("429") || error.contains("500"), "{run}");
    let failed_calls = chat_requests(&mock).await.len() - 1;
    assert!(failed_calls >= 3, "the failing call was retried with backoff: {failed_calls} attempts");
    let statuses = common::read_events(events, 3).await;
    assert_eq!(statuses[2].2["status"], "paused");
    assert_eq!(statuses[2].2["error_message"], error, "the run's status event says why it paused");

    down.store(false, std::sync::atomic::Ordering::SeqCst);
    let resumed = app.post(&format!("/api/v1/runs/{run_id}/resume"), json!({})).await;
    assert_eq!(resumed.status, StatusCode::ACCEPTED, "{}", resumed.text);
    let run = app.wait_for_run(&run_id, "completed").await;
    assert_eq!(run["result"], "Deployed.");
    assert!(run["error_message"].is_null(), "{run}");

    let roles: Vec<String> =
        messages(&app, &run_id).await.iter().map(|m| m["role"].as_str().unwrap().to_owned()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"], "nothing lost, nothing repeated");
    let requests = chat_requests(&mock).await;
    assert_eq!(requests.len(), failed_calls + 2);
    assert!(
        requests[1..].iter().all(|r| r.body == requests[1].body),
        "the call after the resume is the very call that failed"
    );
    assert_eq!(mock.received_requests().await.unwrap().iter().filter(|r| r.url.path() == "/deploy").count(), 1);
}

/// A rate-limited or unavailable provider's `Retry-After` is waited, given in seconds or as an HTTP date.
async fn the_model_client_waits_as_long_as_retry_after_says(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&mock)
        .await;
    struct UnavailableUntil;
    impl wiremock::Respond for UnavailableUntil {
        fn respond(&self, _: &wiremock::Request) -> ResponseTemplate {
            let at = chrono::Utc::now() + chrono::Duration::seconds(3);
            ResponseTemplate::new(503).insert_header("retry-after", at.format("%a, %d %b %Y %H:%M:%S GMT").to_string())
        }
    }
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(UnavailableUntil)
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&mock)
        .await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let answer =
        Flaky { down: Default::default(), model: ChatCompletions { deploy_url: String::new() }, seen: seen.clone() };
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(answer)
        .with_priority(3)
        .mount(&mock)
        .await;
    let Some(app) = start_with_model(backend, &scripts, &mock).await else { return };
    let mut spec = openai_agent("plain", &mock, json!({}));
    spec["tools"] = json!([]);
    let agent = create_agent(&app, spec).await;
    let started = tokio::time::Instant::now();
    let run_id = start_run(&app, &agent["id"], "Say hi").await;
    let run = app.wait_for_run(&run_id, "completed").await;
    assert_eq!(run["result"], "Deployed.");
    assert_eq!(chat_requests(&mock).await.len(), 4, "a 429 and a 503, each retried, then two turns");
    // The HTTP date is cut to whole seconds: it asks for a wait of at least 2 s.
    let answered_after = seen.lock().unwrap()[0].duration_since(started);
    assert!(answered_after >= Duration::from_millis(2900), "waited only {answered_after:?} in all");
}

/// A run whose model call is being retried keeps its lease (no other instance can take it over), and stops
/// retrying once it is cancelled.
async fn a_run_retrying_its_model_keeps_its_lease_and_stops_when_cancelled(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "0"))
        .mount(&mock)
        .await;
    let (dir, endpoint) = (scripts.dir.clone(), model_endpoint(&mock));
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.model_endpoints = vec![endpoint];
        config.runtime.run_lease_seconds = 3;
        config.runtime.model_retry_seconds = 60;
    })
    .await
    else {
        return;
    };
    let mut spec = openai_agent("persistent", &mock, json!({}));
    spec["tools"] = json!([]);
    let agent = create_agent(&app, spec).await;
    let run_id = start_run(&app, &agent["id"], "Try").await;
    app.wait_for_run(&run_id, "running").await;

    // Twice the lease: a worker that did not renew it would have lost the run by now.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let run = app.get(&format!("/api/v1/runs/{run_id}")).await.json;
    assert_eq!(run["status"], "running", "{run}");
    let id = uuid::Uuid::parse_str(&run_id).unwrap();
    let now = holdpoint::store::now();
    let other = app.state.store.claim_run_by_id(id, uuid::Uuid::now_v7(), now + chrono::Duration::seconds(3), now);
    assert!(other.await.unwrap().is_none(), "another instance took over a run whose worker is retrying");
    assert!(chat_requests(&mock).await.len() >= 6, "the call was retried all along");

    assert_eq!(app.post(&format!("/api/v1/runs/{run_id}/cancel"), json!({})).await.status, StatusCode::OK);
    // The worker learns of the cancellation at its next lease renewal (every second here); the rest is slack for a
    // busy machine.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after_cancel = chat_requests(&mock).await.len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(chat_requests(&mock).await.len(), after_cancel, "the model is still called after the cancellation");
    assert_eq!(app.get(&format!("/api/v1/runs/{run_id}")).await.json["status"], "cancelled");
}

/// The models a workspace's agents may reach are the operator's choice: an admin cannot point an agent at a
/// listener of theirs, nor have the server send one of its variables (the bootstrap token, `DATABASE_URL`) as a key.
async fn agents_reach_only_the_model_endpoints_the_operator_allows_with_their_own_keys(backend: common::Backend) {
    let scripts = Scripts::new();
    let (official, allowed, attacker) = (chat_mock().await, chat_mock().await, chat_mock().await);
    let (official_url, allowed_endpoint) = (format!("{}/v1", official.uri()), model_endpoint(&allowed));
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(scripts.dir.clone());
        config.runtime.openai_base_url = official_url;
        config.runtime.openai_api_key = Some("sk-server-key".parse().unwrap());
        config.runtime.model_endpoints = vec![allowed_endpoint];
    })
    .await
    else {
        return;
    };
    let other_workspace_admin = app.create_token("other", app::types::Role::Admin).await;
    let as_other = |path: &'static str, body: Value| {
        let app = &app;
        let token = other_workspace_admin.clone();
        async move { app.call(axum::http::Method::POST, path, Some(&token), Some(body)).await }
    };
    let to_attacker = openai_agent("exfiltrate", &attacker, json!({}));
    let error = assert_error(
        &as_other("/api/v1/agents", to_attacker.clone()).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid",
    );
    assert!(error["details"]["fields"]["model_settings.base_url"].is_string(), "{error}");
    for variable in ["HOLDPOINT_BOOTSTRAP_TOKEN", "DATABASE_URL"] {
        let mut spec = openai_agent("exfiltrate", &allowed, json!({}));
        spec["model_settings"]["api_key_env"] = json!(variable);
        let error = assert_error(&as_other("/api/v1/agents", spec).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"]["model_settings.api_key_env"].is_string(), "{error}");
    }
    // The server's own key belongs to OPENAI_BASE_URL alone.
    let mut spec = openai_agent("exfiltrate", &allowed, json!({}));
    spec["model_settings"]["api_key_env"] = json!("OPENAI_API_KEY");
    assert_error(&as_other("/api/v1/agents", spec).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let inline = json!({ "agent": to_attacker, "input": "Go" });
    assert_error(&as_other("/api/v1/runs", inline).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid");

    // What is allowed works, each endpoint with its own key.
    let mut default_endpoint = openai_agent("official", &official, json!({}));
    default_endpoint["model_settings"] = json!({ "api_key_env": "OPENAI_API_KEY" });
    default_endpoint["tools"] = json!([]);
    let mut other_endpoint = openai_agent("local", &allowed, json!({}));
    other_endpoint["tools"] = json!([]);
    for spec in [default_endpoint, other_endpoint] {
        let response = as_other("/api/v1/runs", json!({ "agent": spec, "input": "Say hi" })).await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while chat_requests(&official).await.is_empty() || chat_requests(&allowed).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "both runs call their model");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let authorization = |request: &wiremock::Request| {
        request.headers.get("authorization").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default()
    };
    assert_eq!(authorization(&chat_requests(&official).await[0]), "Bearer sk-server-key");
    assert!(!authorization(&chat_requests(&allowed).await[0]).contains("sk-server-key"));
    assert!(chat_requests(&attacker).await.is_empty());
}

/// An agent saved while an endpoint was allowed cannot use it once the operator withdraws it.
async fn a_withdrawn_model_endpoint_is_refused_when_a_run_calls_the_model(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = chat_mock().await;
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let mut spec: app::types::AgentSpec = serde_json::from_value(openai_agent("withdrawn", &mock, json!({}))).unwrap();
    spec.tools.clear();
    // Stored as it was accepted under a configuration that allowed the endpoint.
    let workspace = app.state.store.ensure_workspace("default").await.unwrap();
    let agent = holdpoint::store::AgentRow {
        id: uuid::Uuid::now_v7(),
        workspace_id: workspace.id,
        name: spec.name.clone(),
        spec: sqlx::types::Json(spec),
        created_at: chrono::Utc::now(),
        updated_at: chrono::Utc::now(),
    };
    app.state.store.insert_agent(&agent).await.unwrap();
    let run_id = start_run(&app, &json!(agent.id), "Go").await;
    let run = app.wait_for_run(&run_id, "failed").await;
    assert!(run["error_message"].as_str().unwrap().contains("model_settings.base_url"), "{run}");
    assert!(chat_requests(&mock).await.is_empty());
}

async fn run_status_events_follow_a_run_on_the_event_stream(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let base = app.serve().await;
    let model = scripts.write("quick.json", &json!([{ "content": "done" }]));
    let agent = create_agent(&app, agent("quick", &model, &[], json!({}))).await;
    let events = common::connect_events(&base, &app.token, None).await;
    let run_id = start_run(&app, &agent["id"], "Go").await;
    let events = common::read_events(events, 3).await;
    let statuses: Vec<(&str, &str)> =
        events.iter().map(|(_, kind, data)| (kind.as_str(), data["status"].as_str().unwrap())).collect();
    assert_eq!(statuses, [("run_status", "queued"), ("run_status", "running"), ("run_status", "completed")]);
    assert!(events.iter().all(|(_, _, data)| data["run_id"] == run_id.as_str() && data["agent_name"] == "quick"));
    assert_eq!(events[2].2["step_count"], 1);
}

async fn a_batch_waits_whole_while_any_call_needs_approval(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200)).mount(&mock).await;
    let dir = scripts.dir.clone();
    let host = mock.address().to_string();
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.http_allowed_hosts = vec![host];
        config.runtime.shell = holdpoint::runtime::settings::ShellMode::DryRun;
    })
    .await
    else {
        return;
    };
    let model = scripts.write(
        "mixed.json",
        &json!([
            { "tool_calls": [
                { "id": "read", "name": "http_request", "arguments": { "method": "GET", "url": format!("{}/status", mock.uri()) } },
                { "id": "apply", "name": "shell", "arguments": { "command": "terraform apply" } }
            ] },
            { "content": "done" }
        ]),
    );
    let spec = agent(
        "mixed",
        &model,
        &["http_request", "shell"],
        json!({ "default": "auto", "tools": { "shell": "prompt" } }),
    );
    let agent_row = create_agent(&app, spec).await;
    let run_id = start_run(&app, &agent_row["id"], "Check and apply").await;
    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    assert_eq!(run["pending_question_ids"].as_array().unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(mock.received_requests().await.unwrap().len(), 0, "not even the automatic call ran before the decision");
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(
        (calls[0]["status"].as_str(), calls[1]["status"].as_str()),
        (Some("approved"), Some("pending_approval"))
    );

    let question_id = run["pending_question_ids"][0].as_str().unwrap();
    assert_eq!(
        app.post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": true })).await.status,
        StatusCode::OK
    );
    app.wait_for_run(&run_id, "completed").await;
    assert_eq!(mock.received_requests().await.unwrap().len(), 1);
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[0]["status"], "completed");
    assert_eq!(calls[1]["status"], "completed");
    assert_eq!(calls[1]["output"]["dry_run"], true);
    assert_eq!(calls[1]["decided_by"], "admin of default");
}

async fn the_shell_tool_runs_only_when_enabled_and_approved(backend: common::Backend) {
    let scripts = Scripts::new();
    let dir = scripts.dir.clone();
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.shell = holdpoint::runtime::settings::ShellMode::On;
    })
    .await
    else {
        return;
    };
    let model = scripts.write(
        "sh.json",
        &json!([{ "tool_calls": [{ "name": "shell", "arguments": { "command": "echo hold; exit 3" } }] }, { "content": "ok" }]),
    );
    // The default is auto, but shell needs approval unless the policy names it.
    let agent_row = create_agent(&app, agent("ops", &model, &["shell"], json!({ "default": "auto" }))).await;
    let run_id = start_run(&app, &agent_row["id"], "Run it").await;
    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    let question_id = run["pending_question_ids"][0].as_str().unwrap();
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert!(question["title"].as_str().unwrap().contains("echo hold"), "{question}");
    assert_eq!(
        app.post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": true })).await.status,
        StatusCode::OK
    );
    app.wait_for_run(&run_id, "completed").await;
    let call = &tool_calls(&app, &run_id).await[0];
    assert_eq!(call["status"], "error", "a non-zero exit is an error the model sees");
    let output: Value = serde_json::from_str(call["output"]["error"].as_str().unwrap()).unwrap();
    assert_eq!(output["exit_code"], 3);
    assert_eq!(output["stdout"], "hold\n");
    // Both calls are counted: the tool by name and status, the model by outcome.
    let metrics = app.get("/metrics").await.text;
    assert!(
        metrics.contains(r#"holdpoint_tool_call_duration_seconds_count{tool="shell",status="error"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"holdpoint_model_call_duration_seconds_count{outcome="ok"}"#), "{metrics}");
}

async fn the_shell_tool_is_refused_when_disabled(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write("sh.json", &json!([{ "tool_calls": [{ "name": "shell", "arguments": { "command": "touch /tmp/x" } }] }, { "content": "ok" }]));
    let agent_row = create_agent(&app, agent("ops", &model, &["shell"], json!({ "tools": { "shell": "auto" } }))).await;
    let run_id = start_run(&app, &agent_row["id"], "Run it").await;
    app.wait_for_run(&run_id, "completed").await;
    let call = &tool_calls(&app, &run_id).await[0];
    assert_eq!(call["status"], "error");
    assert!(call["output"]["error"].as_str().unwrap().contains("disabled"), "{call}");
}

async fn an_unanswered_blocking_question_fails_its_run_clearly(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write(
        "impatient.json",
        &json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Which region?", "timeout_seconds": 1 } }] }, { "content": "never" }]),
    );
    let agent_row = create_agent(&app, agent("impatient", &model, &["ask_user"], json!({}))).await;
    let run_id = start_run(&app, &agent_row["id"], "Ask").await;
    let run = app.wait_for_run(&run_id, "failed").await;
    assert!(run["error_message"].as_str().unwrap().contains("\"Which region?\" expired"), "{run}");
}

async fn a_parent_resumes_its_paused_child(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let child_model = scripts.write(
        "slow.json",
        &json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Tick", "kind": "non_blocking" } }] }, { "content": "child done" }]),
    );
    let parent_model = scripts.write(
        "boss.json",
        &json!([
            { "tool_calls": [{ "name": "spawn_agents", "arguments": { "agents": [{ "agent": "slow", "input": "Work" }] } }] },
            { "tool_calls": [{ "name": "spawn_agents", "arguments": { "resume_run_id": "CHILD", "prompt": "Finish up." } }] },
            { "content": "boss done" }
        ]),
    );
    let mut slow = agent("slow", &child_model, &["ask_user"], json!({}));
    slow["max_steps"] = json!(1);
    create_agent(&app, slow).await;
    let boss = create_agent(&app, agent("boss", &parent_model, &["spawn_agents"], json!({}))).await;
    let parent_id = start_run(&app, &boss["id"], "Delegate").await;
    // The child pauses after its one step, which wakes the parent with the child's status. A script cannot know
    // the child's id, so the parent's resume call names none and is refused with a reason the model reads.
    app.wait_for_run(&parent_id, "completed").await;
    let child = app.get(&format!("/api/v1/runs?parent_run_id={parent_id}")).await.json["items"][0].clone();
    assert_eq!(child["status"], "paused");
    let calls = tool_calls(&app, &parent_id).await;
    assert_eq!(calls[0]["output"]["runs"][0]["status"], "paused");
    assert_eq!(calls[1]["status"], "error");
    assert!(calls[1]["output"]["error"].as_str().unwrap().contains("not a run id"));

    let child_id = child["id"].as_str().unwrap();
    let resumer_model = scripts.write(
        "resumer.json",
        &json!([
            { "tool_calls": [{ "name": "spawn_agents", "arguments": { "resume_run_id": child_id, "prompt": "Finish up." } }] },
            { "content": "resumed" }
        ]),
    );
    // Only the child's parent may resume it.
    let stranger = create_agent(&app, agent("stranger", &resumer_model, &["spawn_agents"], json!({}))).await;
    let stranger_run = start_run(&app, &stranger["id"], "Resume someone else's child").await;
    app.wait_for_run(&stranger_run, "completed").await;
    assert!(tool_calls(&app, &stranger_run).await[0]["output"]["error"].as_str().unwrap().contains("not a sub-agent"));
    let resumed = app.post(&format!("/api/v1/runs/{child_id}/resume"), json!({ "prompt": "Finish up." })).await;
    assert_eq!(resumed.status, StatusCode::ACCEPTED);
    let child = app.wait_for_run(child_id, "completed").await;
    assert_eq!(child["result"], "child done");
    assert_eq!(child["step_count"], 2);
}

/// A client executes its run however it likes and names the tool calls it asks about: whoever started it requested
/// every approval it asks for, and separation of duties bars them from approving one — by answering it or by
/// resuming the run — while another approver may.
async fn a_client_runs_starter_may_not_approve_what_it_asks_over_the_worker_protocol(backend: common::Backend) {
    use app::types::Role;
    use axum::http::Method;
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write("quick.json", &json!([{ "content": "done" }]));
    let agent_row = create_agent(&app, agent("quick", &model, &[], json!({}))).await;
    let starter = app.create_token("default", Role::Approver).await;
    let other = app.create_token("default", Role::Approver).await;
    let body = json!({ "agent_id": agent_row["id"], "input": "Go", "executor": "client" });
    let run = app.call(Method::POST, "/api/v1/runs", Some(&starter), Some(body)).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.text);
    let run_id: uuid::Uuid = run.json["id"].as_str().unwrap().parse().unwrap();
    let worker = format!("/api/v1/runs/{run_id}/worker");

    // The client asks to approve a tool call it made up.
    let workspace_id = app.state.store.ensure_workspace("default").await.unwrap().id;
    let input = app::types::NewQuestion {
        kind: Some(app::types::QuestionKind::Approval),
        title: "Deploy to production?".into(),
        action: Some(app::types::ApprovalAction {
            tool_name: "shell".into(),
            arguments: json!({ "command": "deploy production" }),
        }),
        ..Default::default()
    };
    let bounds = holdpoint::questions::TimeoutBounds { min_seconds: 1, max_seconds: 86_400 };
    let mut question = holdpoint::questions::build_question(input, workspace_id, None, bounds, chrono::Utc::now())
        .expect("a valid question");
    question.tool_call_id = Some("call_made_up".into());
    let create = json!({ "op": "create_question", "question": question });
    // Only its starter asks the run's questions.
    let intruder = app.call(Method::POST, &worker, Some(&other), Some(create.clone())).await;
    assert_error(&intruder, StatusCode::FORBIDDEN, "forbidden");
    let asked = app.call(Method::POST, &worker, Some(&starter), Some(create)).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.text);
    let question_path = format!("/api/v1/questions/{}", question.id);
    assert_eq!(app.get(&question_path).await.json["tool_call_id"], "call_made_up");

    // Its call waits for that approval, as the client records it.
    let owner = uuid::Uuid::now_v7();
    let claimed = app
        .call(
            Method::POST,
            &worker,
            Some(&starter),
            Some(json!({ "op": "claim", "owner": owner, "lease_seconds": 30 })),
        )
        .await;
    assert_eq!(claimed.json["status"], "running", "{}", claimed.text);
    let now = chrono::Utc::now();
    let message = holdpoint::store::MessageRow {
        id: uuid::Uuid::now_v7(),
        run_id,
        seq: 1,
        step: 1,
        role: "assistant".into(),
        content: sqlx::types::Json(json!({ "role": "assistant", "content": "Deploying." })),
        created_at: now,
    };
    let call =
        pending_call(&message, "call_made_up", "shell", json!({ "command": "deploy production" }), Some(question.id));
    let append =
        json!({ "op": "append_messages", "owner": owner, "messages": [message], "tool_calls": [call], "step": 1 });
    let appended = app.call(Method::POST, &worker, Some(&starter), Some(append)).await;
    assert_eq!(appended.status, StatusCode::OK, "{}", appended.text);

    // Asked about a call the run keeps, once: asked again about it, the server answers with the first question.
    let about_call = |call_id: uuid::Uuid| {
        let mut asked = question.clone();
        asked.id = uuid::Uuid::now_v7();
        (asked.id, json!({ "op": "create_question", "question": asked, "call": call_id }))
    };
    let (first_id, first) = about_call(call.id);
    let first = app.call(Method::POST, &worker, Some(&starter), Some(first)).await;
    assert_eq!(first.json, json!(first_id), "{}", first.text);
    let (again_id, again) = about_call(call.id);
    let again = app.call(Method::POST, &worker, Some(&starter), Some(again)).await;
    assert_eq!(again.json, json!(first_id), "{}", again.text);
    assert_eq!(app.get(&format!("/api/v1/questions/{again_id}")).await.status, StatusCode::NOT_FOUND);
    // A call this run does not have is refused, naming it.
    let (_, elsewhere) = about_call(uuid::Uuid::now_v7());
    let refused = app.call(Method::POST, &worker, Some(&starter), Some(elsewhere)).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["call"].is_string(), "{error}");

    let waiting = json!({ "status": "waiting_for_approval", "result": null, "error_message": null, "at": now });
    let released = app.call(
        Method::POST,
        &worker,
        Some(&starter),
        Some(json!({ "op": "release", "owner": owner, "transition": waiting })),
    );
    let released = released.await;
    assert_eq!(released.json["status"], "waiting_for_approval", "{}", released.text);

    // The starter, an approver, may approve it neither by answering nor by resuming the run.
    let answer_path = format!("{question_path}/answer");
    let own = app.call(Method::POST, &answer_path, Some(&starter), Some(json!({ "value": true }))).await;
    let error = assert_error(&own, StatusCode::FORBIDDEN, "forbidden");
    assert!(error["message"].as_str().unwrap().contains("separation of duties"), "{error}");
    let decisions = json!({ "tool_decisions": [{ "tool_call_id": "call_made_up", "approved": true }] });
    let resume_path = format!("/api/v1/runs/{run_id}/resume");
    let resumed = app.call(Method::POST, &resume_path, Some(&starter), Some(decisions)).await;
    let error = assert_error(&resumed, StatusCode::FORBIDDEN, "forbidden");
    assert!(error["message"].as_str().unwrap().contains("separation of duties"), "{error}");
    let unchanged = app.get(&question_path).await.json;
    assert_eq!(unchanged["status"], "pending", "{unchanged}");
    assert!(unchanged["response"].is_null(), "{unchanged}");
    let calls = tool_calls(&app, &run_id.to_string()).await;
    assert_eq!(calls[0]["status"], "pending_approval", "{calls:?}");

    // Another approver may.
    let approved =
        app.call(Method::POST, &format!("{question_path}/answer"), Some(&other), Some(json!({ "value": true }))).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    assert_eq!(approved.json["status"], "answered");
    assert_eq!(approved.json["response"]["value"], true);
}

async fn the_worker_protocol_is_for_client_runs_only_and_fenced(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write("quick.json", &json!([{ "content": "done" }]));
    let agent_row = create_agent(&app, agent("quick", &model, &[], json!({}))).await;
    let run =
        app.post("/api/v1/runs", json!({ "agent_id": agent_row["id"], "input": "Go", "executor": "client" })).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.text);
    assert_eq!(run.json["executor"], "client");
    let run_id = run.json["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        app.get(&format!("/api/v1/runs/{run_id}")).await.json["status"],
        "queued",
        "the server's workers leave it"
    );

    let worker = format!("/api/v1/runs/{run_id}/worker");
    let (one, two) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let claimed = app.post(&worker, json!({ "op": "claim", "owner": one, "lease_seconds": 30 })).await;
    assert_eq!(claimed.json["status"], "running", "{}", claimed.text);
    let again = app.post(&worker, json!({ "op": "claim", "owner": two, "lease_seconds": 30 })).await;
    assert_eq!(again.json, Value::Null, "one claim at a time");
    let intruder = app.post(&worker, json!({ "op": "take_resume_prompt", "owner": two })).await;
    assert_error(&intruder, StatusCode::CONFLICT, "conflict");
    let owner = app.post(&worker, json!({ "op": "take_resume_prompt", "owner": one })).await;
    assert_eq!(owner.status, StatusCode::OK, "{}", owner.text);

    let server_run = start_run(&app, &agent_row["id"], "Server side").await;
    let refused = app.post(&format!("/api/v1/runs/{server_run}/worker"), json!({ "op": "workspace_name" })).await;
    assert_error(&refused, StatusCode::CONFLICT, "conflict");
    let other = app.create_token("elsewhere", app::types::Role::Admin).await;
    let foreign =
        app.call(axum::http::Method::POST, &worker, Some(&other), Some(json!({ "op": "workspace_name" }))).await;
    assert_error(&foreign, StatusCode::NOT_FOUND, "not_found");
    let viewer = app.create_token("default", app::types::Role::Viewer).await;
    let read_only =
        app.call(axum::http::Method::POST, &worker, Some(&viewer), Some(json!({ "op": "workspace_name" }))).await;
    assert_error(&read_only, StatusCode::FORBIDDEN, "forbidden");
}

/// A message of run `run_id`, as a worker stores it.
fn stored_message(run_id: uuid::Uuid, seq: i32, step: i32, content: Value) -> holdpoint::store::MessageRow {
    holdpoint::store::MessageRow {
        id: uuid::Uuid::now_v7(),
        run_id,
        seq,
        step,
        role: content["role"].as_str().unwrap().to_owned(),
        content: sqlx::types::Json(content),
        created_at: holdpoint::store::now(),
    }
}

/// A call of the model's turn `turn` to `tool` with `input`, waiting for approval (by the question `question_id`, once
/// asked), as a worker stores it.
fn pending_call(
    turn: &holdpoint::store::MessageRow,
    call_id: &str,
    tool: &str,
    input: Value,
    question_id: Option<uuid::Uuid>,
) -> holdpoint::store::ToolCallRow {
    holdpoint::store::ToolCallRow {
        id: uuid::Uuid::now_v7(),
        run_id: turn.run_id,
        message_id: turn.id,
        call_id: call_id.into(),
        tool_name: tool.into(),
        input: sqlx::types::Json(input),
        edited_input: None,
        output: None,
        status: app::types::ToolCallStatus::PendingApproval,
        duration_ms: None,
        step: turn.step,
        decided_by: None,
        decision_comment: None,
        question_id,
        child_run_ids: sqlx::types::Json(Vec::new()),
        created_at: turn.created_at,
        updated_at: turn.created_at,
    }
}

/// A worker that claimed the queued run `run_id`, stored its system prompt and `input`, and crashed: its lease has
/// run out. Returns the run and the worker's id, as whom the test stores what else the worker wrote.
async fn crashed_worker(app: &TestApp, run_id: uuid::Uuid, input: &str) -> (holdpoint::store::RunRow, uuid::Uuid) {
    use holdpoint::store::now;
    let store = &app.state.store;
    let crashed = uuid::Uuid::now_v7();
    let run = store.claim_run(crashed, now() - chrono::Duration::seconds(1), now()).await.unwrap().unwrap();
    assert_eq!(run.id, run_id);
    store.current_segment(run_id, crashed, now()).await.unwrap();
    let conversation = [
        stored_message(run_id, 1, 0, json!({ "role": "system", "content": "You deploy things." })),
        stored_message(run_id, 2, 0, json!({ "role": "user", "content": input })),
    ];
    store.append_messages(run_id, crashed, &conversation, &[], None, &[]).await.unwrap();
    (run, crashed)
}

/// A worker that stored the model's final answer and died before it completed the run: whoever takes the run over
/// completes it with that answer instead of asking the model for another turn.
async fn a_run_taken_over_after_its_final_answer_completes_with_that_answer(backend: common::Backend) {
    let scripts = Scripts::new();
    let dir = scripts.dir.clone();
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.run_workers = false;
    })
    .await
    else {
        return;
    };
    let model = scripts.write("answer.json", &json!([{ "content": "First answer." }, { "content": "Second answer." }]));
    let agent_row = create_agent(&app, agent("answerer", &model, &[], json!({}))).await;
    let run_id = start_run(&app, &agent_row["id"], "Answer").await;
    let id = uuid::Uuid::parse_str(&run_id).unwrap();

    // The worker that crashed: it claimed the run, stored the conversation and the model's final answer, and never
    // released the run.
    let (_, crashed) = crashed_worker(&app, id, "Answer").await;
    let answer = stored_message(id, 3, 1, json!({ "role": "assistant", "content": "First answer." }));
    app.state.store.append_messages(id, crashed, &[answer], &[], Some(1), &[]).await.unwrap();

    let scripts_dir = scripts.dir.clone();
    let (_state, _router) = app.restart(move |config| config.runtime.scripts_dir = Some(scripts_dir)).await;
    let run = app.wait_for_run(&run_id, "completed").await;
    assert_eq!(run["result"], "First answer.", "the stored answer is the result: {run}");
    assert_eq!(run["step_count"], 1, "the model was not asked again");
    let roles: Vec<String> =
        messages(&app, &run_id).await.iter().map(|m| m["role"].as_str().unwrap().to_owned()).collect();
    assert_eq!(roles, ["system", "user", "assistant"]);
}

/// A worker that asked a call's approval and died before it linked the call to the question: whoever takes the run
/// over finds that question and waits for it, and no second question asks the same thing.
async fn a_run_taken_over_between_asking_and_linking_asks_no_second_question(backend: common::Backend) {
    let scripts = Scripts::new();
    let mock = deploy_mock().await;
    let (dir, host) = (scripts.dir.clone(), mock.address().to_string());
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.http_allowed_hosts = vec![host];
        config.run_workers = false;
    })
    .await
    else {
        return;
    };
    let model = scripts.write("deploy.json", &deploy_script(&mock));
    let policy = json!({"tools": {"http_request": "prompt"}});
    let agent_row = create_agent(&app, agent("deployer", &model, &["http_request"], policy)).await;
    let run_id = start_run(&app, &agent_row["id"], "Deploy v2").await;
    let id = uuid::Uuid::parse_str(&run_id).unwrap();

    // The worker that crashed: it stored the model's turn and its call, asked the call's approval, and stopped
    // before it wrote the question's id into the call.
    let (run, crashed) = crashed_worker(&app, id, "Deploy v2").await;
    let store = &app.state.store;
    let arguments = json!({ "method": "POST", "url": format!("{}/deploy", mock.uri()) });
    let turn = stored_message(
        id,
        3,
        1,
        json!({ "role": "assistant", "content": "I will deploy.", "tool_calls": [{
        "id": "call_deploy", "type": "function",
        "function": { "name": "http_request", "arguments": arguments.to_string() } }] }),
    );
    let call = pending_call(&turn, "call_deploy", "http_request", arguments.clone(), None);
    store.append_messages(id, crashed, &[turn], std::slice::from_ref(&call), Some(1), &[]).await.unwrap();
    let ledger = &app.state.runtime.ledger;
    let asked_about = |title: &str| app::types::NewQuestion {
        kind: Some(app::types::QuestionKind::Approval),
        title: title.into(),
        action: Some(app::types::ApprovalAction { tool_name: "http_request".into(), arguments: arguments.clone() }),
        run_id: Some(id),
        ..Default::default()
    };
    let mut first =
        ledger.prepare_question(asked_about("deployer: POST?"), run.workspace_id, run.created_by).await.unwrap();
    first.tool_call_id = Some(call.call_id.clone());
    assert_eq!(ledger.ask(&first, call.id).await.unwrap(), first.id);
    // Asked again about the same call, the first question is the answer; another call is asked anew.
    let again =
        ledger.prepare_question(asked_about("deployer: POST?"), run.workspace_id, run.created_by).await.unwrap();
    assert_eq!(ledger.ask(&again, call.id).await.unwrap(), first.id);
    assert!(app.get(&format!("/api/v1/questions/{}", again.id)).await.status == StatusCode::NOT_FOUND, "not stored");

    let (scripts_dir, host) = (scripts.dir.clone(), mock.address().to_string());
    let (_state, router) = app
        .restart(move |config| {
            config.runtime.scripts_dir = Some(scripts_dir);
            config.runtime.http_allowed_hosts = vec![host];
        })
        .await;
    let waiting = app.wait_for_run(&run_id, "waiting_for_approval").await;
    assert_eq!(waiting["pending_question_ids"], json!([first.id]), "{waiting}");
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[0]["question_id"], json!(first.id), "the call is linked to the question asked before");
    let asked = app.get(&format!("/api/v1/questions?run_id={run_id}")).await.json;
    assert_eq!(asked["items"].as_array().unwrap().len(), 1, "one question: {asked}");
    assert_eq!(mock.received_requests().await.unwrap().len(), 0, "nothing runs before it is approved");

    // Approved where the restarted server hears of it, the call runs once and the run completes.
    let request = axum::http::Request::post(format!("/api/v1/questions/{}/answer", first.id))
        .header(axum::http::header::AUTHORIZATION, format!("Bearer {}", app.token))
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(json!({ "value": true }).to_string()))
        .unwrap();
    let answered = tower::ServiceExt::oneshot(router, request).await.unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    let done = app.wait_for_run(&run_id, "completed").await;
    assert_eq!(done["result"], "Deployed.", "{done}");
    assert_eq!(mock.received_requests().await.unwrap().len(), 1, "the approved call ran exactly once");
}

/// Whether the process `pid` still runs (a zombie has stopped running).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

async fn read_pid(path: &std::path::Path) -> u32 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(path).ok().and_then(|text| text.trim().parse().ok()) {
            return pid;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} was never written", path.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A worker that loses its lease while a `shell` command runs (another worker took the run over) stops the command,
/// and the processes it started with it, within a lease's renewal interval: the call is the new owner's to run.
async fn a_running_tool_stops_when_its_worker_loses_the_lease(backend: common::Backend) {
    let scripts = Scripts::new();
    let dir = scripts.dir.clone();
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.shell = holdpoint::runtime::settings::ShellMode::On;
        config.runtime.run_lease_seconds = 3;
    })
    .await
    else {
        return;
    };
    let file = |name: &str| scripts.dir.join(name).display().to_string();
    let command = format!(
        "echo $$ > {shell}.tmp && mv {shell}.tmp {shell}; sleep 30 & echo $! > {sleep}.tmp && mv {sleep}.tmp {sleep}; \
         wait; touch {finished}",
        shell = file("shell.pid"),
        sleep = file("sleep.pid"),
        finished = file("finished"),
    );
    let model = scripts.write(
        "slow.json",
        &json!([{ "tool_calls": [{ "name": "shell", "arguments": { "command": command } }] }, { "content": "done" }]),
    );
    let agent_row = create_agent(&app, agent("ops", &model, &["shell"], json!({ "tools": { "shell": "auto" } }))).await;
    let run_id = start_run(&app, &agent_row["id"], "Take your time").await;
    let shell = read_pid(&scripts.dir.join("shell.pid")).await;
    let sleep = read_pid(&scripts.dir.join("sleep.pid")).await;
    assert!(running(shell) && running(sleep));

    // Another worker takes the run over: by its clock the lease has run out.
    let id = uuid::Uuid::parse_str(&run_id).unwrap();
    let later = holdpoint::store::now() + chrono::Duration::hours(1);
    let other = uuid::Uuid::now_v7();
    let taken = app.state.store.claim_run_by_id(id, other, later, later).await.unwrap();
    assert!(taken.is_some(), "the run was taken over");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while running(shell) || running(sleep) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command still runs 5 s after its worker lost the lease (shell {}, sleep {})",
            running(shell),
            running(sleep)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!scripts.dir.join("finished").exists());
    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[0]["status"], "running", "the worker that lost the lease recorded nothing: {}", calls[0]);
    assert!(calls[0]["output"].is_null());
}

/// Serves `200` responses on a loopback port whose body never ends: 256 MiB at once, then nothing more while the
/// connection stays open (a bound, so that a client reading bodies whole does not fill the machine's memory).
async fn endless_body_server() -> std::net::SocketAddr {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b'x'; 64 * 1024];
                for _ in 0..4096 {
                    if socket.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
                std::future::pending::<()>().await;
            });
        }
    });
    addr
}

/// The peak resident memory of this process so far, in bytes.
fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Outputs far larger than the 64 KiB given back to the model are cut while they are read: an endless response
/// body ends the call at the cap, and a command that prints 200 MB is counted, not kept.
async fn huge_tool_outputs_are_cut_while_they_are_read(backend: common::Backend) {
    let scripts = Scripts::new();
    let dir = scripts.dir.clone();
    let endless = endless_body_server().await;
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.shell = holdpoint::runtime::settings::ShellMode::On;
        config.runtime.http_allowed_hosts = vec![endless.to_string()];
    })
    .await
    else {
        return;
    };
    let model = scripts.write(
        "big.json",
        &json!([
            { "tool_calls": [{ "name": "http_request", "arguments": { "method": "GET", "url": format!("http://{endless}/") } }] },
            { "tool_calls": [{ "name": "shell", "arguments": { "command": "yes | head -c 200000000" } }] },
            { "content": "done" }
        ]),
    );
    let policy = json!({ "tools": { "shell": "auto", "http_request": "auto" } });
    let agent_row = create_agent(&app, agent("reader", &model, &["http_request", "shell"], policy)).await;
    let before = peak_memory();
    let started = tokio::time::Instant::now();
    let run_id = start_run(&app, &agent_row["id"], "Read it all").await;
    app.wait_for_run(&run_id, "completed").await;
    assert!(started.elapsed() < Duration::from_secs(15), "the endless body was not read to its end");
    let grown = peak_memory().saturating_sub(before);
    assert!(grown < 64 * 1024 * 1024, "reading the outputs took {} MiB", grown / 1024 / 1024);

    let calls = tool_calls(&app, &run_id).await;
    assert_eq!(calls[0]["status"], "completed", "{}", calls[0]);
    let body = calls[0]["output"]["body"].as_str().unwrap();
    assert!(body.starts_with(&"x".repeat(64 * 1024)), "the body is kept up to the cap");
    let (kept, marker) = body.split_at(64 * 1024);
    assert_eq!(kept.len(), 64 * 1024);
    assert!(marker.starts_with("\n[truncated: "), "{marker}");
    assert_eq!(calls[1]["status"], "completed", "{}", calls[1]);
    let stdout = calls[1]["output"]["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), 64 * 1024 + "\n[truncated: 200000000 bytes in all]".len());
    assert!(stdout.starts_with("y\ny\n") && stdout.ends_with("\n[truncated: 200000000 bytes in all]"));
}

/// A run asks through the same use case as the REST API: its question is in the hub's memory while pending, so the
/// cycle's reads (the person's answer, a long-poll) skip the database for it as for one asked over REST.
async fn a_question_a_run_asks_is_recorded_as_one_asked_over_rest(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts, None, 500).await else { return };
    let model = scripts.write(
        "asks.json",
        &json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Which region?" } }] }, { "content": "ok" }]),
    );
    let agent_row = create_agent(&app, agent("asker", &model, &["ask_user"], json!({}))).await;
    let run_id = start_run(&app, &agent_row["id"], "Deploy").await;
    let run = app.wait_for_run(&run_id, "waiting_for_input").await;
    let from_run: uuid::Uuid = run["pending_question_ids"][0].as_str().unwrap().parse().unwrap();
    let from_rest = app.post("/api/v1/questions", json!({ "title": "Over REST?" })).await.json;
    let from_rest: uuid::Uuid = from_rest["id"].as_str().unwrap().parse().unwrap();
    let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
    for id in [from_run, from_rest] {
        assert!(app.state.hub.asked_and_pending(workspace, id).is_some(), "{id} is kept while pending");
    }
    let created = app.get("/metrics").await.text;
    assert!(created.contains(r#"holdpoint_questions_created_total{kind="blocking"} 2"#), "{created}");
}

on_both_backends!(
    a_question_a_run_asks_is_recorded_as_one_asked_over_rest,
    run_pauses_for_approval_and_resumes_once_approved,
    resuming_a_run_that_waits_for_approval_needs_an_approver,
    a_rejection_reaches_the_model_with_its_reason,
    edited_arguments_run_instead_of_the_originals,
    ask_user_pauses_until_the_answer_and_returns_it,
    ask_user_takes_rich_fields_or_a_response_schema_as_mcps_ask_user_does,
    an_agent_without_ask_user_cannot_ask,
    step_budgets_are_per_segment_and_the_total_is_capped,
    a_model_that_reuses_a_call_id_has_its_run_go_on,
    resume_is_refused_unless_the_run_is_paused_or_waiting,
    resume_decides_pending_approvals_and_rejects_the_rest,
    a_resume_decides_under_the_checks_every_answer_passes,
    cancelling_a_waiting_run_cancels_its_questions,
    answering_and_cancelling_a_waiting_run_at_once_never_fails,
    answering_a_childs_question_while_its_parent_is_cancelled_never_fails,
    sub_agents_ask_with_their_lineage_and_report_to_the_parent,
    bad_agents_and_runs_are_refused_and_change_nothing,
    the_request_after_a_resume_is_byte_for_byte_the_one_without_a_pause,
    the_provider_client_retries_rate_limits_and_server_errors,
    a_provider_that_keeps_failing_fails_the_run_with_a_clear_error,
    a_model_outage_past_the_retry_window_pauses_the_run_and_a_resume_continues_it,
    the_model_client_waits_as_long_as_retry_after_says,
    a_run_retrying_its_model_keeps_its_lease_and_stops_when_cancelled,
    agents_reach_only_the_model_endpoints_the_operator_allows_with_their_own_keys,
    a_withdrawn_model_endpoint_is_refused_when_a_run_calls_the_model,
    run_status_events_follow_a_run_on_the_event_stream,
    a_batch_waits_whole_while_any_call_needs_approval,
    the_shell_tool_runs_only_when_enabled_and_approved,
    the_shell_tool_is_refused_when_disabled,
    an_unanswered_blocking_question_fails_its_run_clearly,
    a_parent_resumes_its_paused_child,
    the_worker_protocol_is_for_client_runs_only_and_fenced,
    a_client_runs_starter_may_not_approve_what_it_asks_over_the_worker_protocol,
    a_run_taken_over_after_its_final_answer_completes_with_that_answer,
    a_run_taken_over_between_asking_and_linking_asks_no_second_question,
    a_running_tool_stops_when_its_worker_loses_the_lease,
    huge_tool_outputs_are_cut_while_they_are_read,
);

/// On PostgreSQL a resume and a cancel of the same paused run may meet: a cancel that commits while the resume is
/// under way wins, and the run stays cancelled (the resume answers 409) instead of being queued again. The cancel
/// here is held open on a connection of its own, its row locked, while the resume is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_committed_while_a_resume_waits_is_not_undone() {
    use sqlx::Connection as _;
    let scripts = Scripts::new();
    let mock = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200)).mount(&mock).await;
    let Some(app) = start(common::Backend::Postgres, &scripts, Some(&mock), 90).await else { return };
    let turns: Vec<Value> = (0..3)
        .map(|n| json!({ "tool_calls": [{ "name": "http_request", "arguments": { "method": "GET", "url": format!("{}/step/{n}", mock.uri()) } }] }))
        .collect();
    let model = scripts.write("steps.json", &Value::Array(turns));
    let mut spec = agent("stepper", &model, &["http_request"], json!({}));
    spec["max_steps"] = json!(1);
    let agent = create_agent(&app, spec).await;
    let run_id = start_run(&app, &agent["id"], "Work").await;
    app.wait_for_run(&run_id, "paused").await;

    let mut cancelling = sqlx::PgConnection::connect(&app.database_url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut cancelling).await.unwrap();
    sqlx::query("UPDATE runs SET status = 'cancelled' WHERE id = $1")
        .bind(uuid::Uuid::parse_str(&run_id).unwrap())
        .execute(&mut cancelling)
        .await
        .unwrap();
    let base = app.serve().await;
    let resume = tokio::spawn({
        let (url, token) = (format!("{base}/api/v1/runs/{run_id}/resume"), app.token.clone());
        async move { reqwest::Client::new().post(url).bearer_auth(token).json(&json!({})).send().await.unwrap() }
    });
    // The resume is under way, waiting for the run's row.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!resume.is_finished(), "the resume waits for the cancel");
    sqlx::query("COMMIT").execute(&mut cancelling).await.unwrap();
    let resumed = resume.await.unwrap();
    assert_eq!(resumed.status(), StatusCode::CONFLICT, "{}", resumed.text().await.unwrap());
    assert_eq!(app.get(&format!("/api/v1/runs/{run_id}")).await.json["status"], "cancelled");
}
