//! What one caller must never reach of another's: runs of other workspaces and other agents named by a question,
//! replayed idempotency keys, questions and runs through the worker protocol, event streams that outlive their
//! credential, and batch answers that fail part-way.

use crate::common;

use std::time::Duration;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{Scripts, TestApp, assert_error};
use serde_json::{Value, json};

async fn start(backend: common::Backend, scripts: &Scripts) -> Option<TestApp> {
    let dir = scripts.dir.clone();
    TestApp::start_with(backend, move |config| config.runtime.scripts_dir = Some(dir)).await
}

async fn post_as(app: &TestApp, token: &str, path: &str, body: Value) -> common::TestResponse {
    app.call(Method::POST, path, Some(token), Some(body)).await
}

async fn get_as(app: &TestApp, token: &str, path: &str) -> common::TestResponse {
    app.call(Method::GET, path, Some(token), None).await
}

/// A run started by `token` whose scripted agent asks a blocking question; returned once it waits for the answer,
/// with that question's id.
async fn waiting_run(app: &TestApp, scripts: &Scripts, token: &str, name: &str) -> (String, String) {
    let model = scripts.write(
        &format!("{name}.json"),
        &json!([
            { "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Which region?" } }] },
            { "content": "done" }
        ]),
    );
    let agent = app.post("/api/v1/agents", json!({ "name": name, "model": model, "tools": ["ask_user"] })).await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
    let run = post_as(app, token, "/api/v1/runs", json!({ "agent_id": agent.json["id"], "input": "Deploy" })).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.text);
    let run_id = run.json["id"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let run = get_as(app, &app.token, &format!("/api/v1/runs/{run_id}")).await.json;
        if run["status"] == "waiting_for_input" {
            return (run_id, run["pending_question_ids"][0].as_str().unwrap().to_owned());
        }
        assert!(tokio::time::Instant::now() < deadline, "the run never asked: {run}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn status_of(app: &TestApp, question_id: &str) -> Value {
    app.get(&format!("/api/v1/questions/{question_id}")).await.json["status"].clone()
}

/// A blocking question naming a run supersedes the run's pending one and resumes the run with its answer: only
/// whoever may act for the run may name it.
async fn a_question_may_name_only_a_run_its_caller_acts_for(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts).await else { return };
    let starter = app.create_token("default", Role::Agent).await;
    let (run_id, pending) = waiting_run(&app, &scripts, &starter, "asker").await;
    let other_workspace = app.create_token("elsewhere", Role::Agent).await;
    let other_agent = app.create_token("default", Role::Agent).await;
    for intruder in [&other_workspace, &other_agent] {
        let hijack = json!({ "title": "Ignore that", "run_id": run_id });
        let refused = post_as(&app, intruder, "/api/v1/questions", hijack).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"]["run_id"].is_string(), "{error}");
        assert_eq!(status_of(&app, &pending).await, "pending", "nothing changed");
    }
    let run = app.get(&format!("/api/v1/runs/{run_id}")).await.json;
    assert_eq!(run["status"], "waiting_for_input");
    assert_eq!(run["pending_question_ids"], json!([pending]));

    // The run's own agent may: its new blocking question supersedes the old one (docs/api.md).
    let own = post_as(&app, &starter, "/api/v1/questions", json!({ "title": "Which zone?", "run_id": run_id })).await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.text);
    assert_eq!(status_of(&app, &pending).await, "cancelled");
}

/// Below the API, every statement keyed by a run also keys on the workspace: a question of workspace B that
/// carries a run id of workspace A (as rows written before the API checked it may) neither cancels A's question
/// nor resumes A's run when it is answered.
async fn a_run_id_of_another_workspace_changes_nothing_in_the_store(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts).await else { return };
    let (run_id, pending) = waiting_run(&app, &scripts, &app.token, "asker").await;
    let elsewhere = app.state.store.ensure_workspace("elsewhere").await.unwrap();
    let bounds = holdpoint::questions::TimeoutBounds { min_seconds: 1, max_seconds: 86_400 };
    let input = app::types::NewQuestion {
        title: "Planted".into(),
        run_id: Some(run_id.parse().unwrap()),
        ..Default::default()
    };
    let planted = holdpoint::questions::build_question(input, elsewhere.id, None, bounds, chrono::Utc::now()).unwrap();
    app.state.asking().record(&planted, "elsewhere", None).await.unwrap();
    assert_eq!(status_of(&app, &pending).await, "pending", "a question of another workspace supersedes nothing");

    let other_admin = app.create_token("elsewhere", Role::Admin).await;
    let answer = json!({ "value": "eu" });
    let answered = post_as(&app, &other_admin, &format!("/api/v1/questions/{}/answer", planted.id), answer).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let run = app.get(&format!("/api/v1/runs/{run_id}")).await.json;
    assert_eq!(run["status"], "waiting_for_input", "another workspace's answer resumes nothing: {run}");
    assert_eq!(run["pending_question_ids"], json!([pending]));

    // Cancelling the run cancels its own questions only.
    let cancelled = app.post(&format!("/api/v1/runs/{run_id}/cancel"), json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(status_of(&app, &pending).await, "cancelled");
    let planted_now = get_as(&app, &other_admin, &format!("/api/v1/questions/{}", planted.id)).await.json;
    assert_eq!(planted_now["status"], "answered");
}

/// An idempotency key is its caller's: another caller replaying it gets a result of its own.
async fn idempotency_keys_belong_to_their_caller(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let (first, second) =
        (app.create_token("default", Role::Agent).await, app.create_token("default", Role::Agent).await);
    let ask = |token: String| {
        let app = &app;
        async move {
            let request = axum::http::Request::post("/api/v1/questions")
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .header("idempotency-key", "deploy-42")
                .body(axum::body::Body::from(json!({ "title": "Ship build 42?" }).to_string()))
                .unwrap();
            app.send(request).await
        }
    };
    let original = ask(first.clone()).await;
    assert_eq!(original.status, StatusCode::CREATED);
    let id = original.json["id"].as_str().unwrap().to_owned();
    app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": "yes, with care" })).await;

    let replayed = ask(second.clone()).await;
    assert_eq!(replayed.status, StatusCode::CREATED, "a key of another caller is a new request: {}", replayed.text);
    assert_ne!(replayed.json["id"], original.json["id"]);
    assert!(replayed.json["response"].is_null(), "the first caller's answer stays its own: {}", replayed.text);
    // The first caller's own retry still gets its first result.
    let retried = ask(first).await;
    assert_eq!(retried.status, StatusCode::OK);
    assert_eq!(retried.json["id"], original.json["id"]);
}

/// A client executing its run sees that run's questions and children only.
async fn the_worker_protocol_shows_only_the_runs_own_questions_and_children(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts).await else { return };
    let (asker, worker) =
        (app.create_token("default", Role::Agent).await, app.create_token("default", Role::Agent).await);
    let secret = post_as(&app, &asker, "/api/v1/questions", json!({ "title": "The launch codes?" })).await;
    let secret_id = secret.json["id"].as_str().unwrap().to_owned();
    let (other_run, _) = waiting_run(&app, &scripts, &asker, "other").await;

    let model = scripts.write("quick.json", &json!([{ "content": "done" }]));
    let agent = app.post("/api/v1/agents", json!({ "name": "quick", "model": model })).await.json;
    let start = json!({ "agent_id": agent["id"], "input": "Go", "executor": "client" });
    let run = post_as(&app, &worker, "/api/v1/runs", start).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.text);
    let path = format!("/api/v1/runs/{}/worker", run.json["id"].as_str().unwrap());

    let question = post_as(&app, &worker, &path, json!({ "op": "question", "id": secret_id })).await;
    assert_eq!(question.status, StatusCode::OK, "{}", question.text);
    assert_eq!(question.json, Value::Null, "another agent's question is not this run's");
    let runs = post_as(&app, &worker, &path, json!({ "op": "runs", "ids": [other_run] })).await;
    assert_eq!(runs.json, json!([]), "another agent's run is not this run's child");
    let own = json!({ "title": "Which region?", "run_id": run.json["id"] });
    let own = post_as(&app, &worker, "/api/v1/questions", own).await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.text);
    let pending = post_as(&app, &worker, &path, json!({ "op": "pending_questions" })).await;
    assert_eq!(pending.status, StatusCode::OK, "{}", pending.text);
    assert_eq!(pending.json, json!([own.json["id"]]), "the run's own pending questions only");
}

/// An event stream ends when its token is revoked, before it delivers anything more.
async fn a_revoked_tokens_event_stream_ends(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let base = app.serve().await;
    let watcher = app.create_token("default", Role::Viewer).await;
    let stream = common::connect_events(&base, &watcher, None).await;
    assert_eq!(stream.status(), 200);
    let tokens = app.get("/api/v1/tokens").await.json;
    let token_id = tokens["items"].as_array().unwrap().iter().find(|t| t["role"] == "viewer").unwrap()["id"].clone();
    let revoked = app.post(&format!("/api/v1/tokens/{}/revoke", token_id.as_str().unwrap()), json!({})).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    app.post("/api/v1/questions", json!({ "title": "Secret plans" })).await;

    use futures::StreamExt;
    let mut body = stream.bytes_stream();
    let mut received = String::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(bytes) => received.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => break,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream ends once its token is revoked; received: {received}");
    assert!(!received.contains("Secret plans"), "nothing after the revocation reaches it: {received}");
}

/// A caller holds a bounded number of event streams.
async fn event_streams_per_caller_are_capped(backend: common::Backend) {
    let Some(app) = TestApp::start_with(backend, |config| config.streams_per_caller = 2).await else { return };
    let base = app.serve().await;
    let (_one, _two) =
        (common::connect_events(&base, &app.token, None).await, common::connect_events(&base, &app.token, None).await);
    let third =
        reqwest::Client::new().get(format!("{base}/api/v1/events")).bearer_auth(&app.token).send().await.unwrap();
    assert_eq!(third.status(), 429);
    let error: Value = third.json().await.unwrap();
    assert_eq!(error["error"]["code"], "rate_limited");
    let someone_else = app.create_token("default", Role::Viewer).await;
    assert_eq!(common::connect_events(&base, &someone_else, None).await.status(), 200, "the cap is per caller");
    drop(_one);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let again = reqwest::Client::new().get(format!("{base}/api/v1/events")).bearer_auth(&app.token).send().await;
        if again.unwrap().status() == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "a closed stream gives its place back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The run a question or run event is about.
fn run_of(data: &Value) -> Option<&str> {
    data["run_id"].as_str().or_else(|| data["question"]["run_id"].as_str()).or_else(|| data["run"]["id"].as_str())
}

/// An `agent` token's event stream carries the events of its own runs only, live and replayed; people
/// see every run's.
async fn an_agent_tokens_event_stream_carries_only_its_own_runs(backend: common::Backend) {
    let scripts = Scripts::new();
    let Some(app) = start(backend, &scripts).await else { return };
    let base = app.serve().await;
    let (mine, theirs) =
        (app.create_token("default", Role::Agent).await, app.create_token("default", Role::Agent).await);
    let my_stream = common::connect_events(&base, &mine, None).await;
    let admin_stream = common::connect_events(&base, &app.token, None).await;
    let (their_run, _) = waiting_run(&app, &scripts, &theirs, "theirs").await;
    let (my_run, _) = waiting_run(&app, &scripts, &mine, "mine").await;
    // The last event either stream waits for: a question of the agent's own, asked after both runs wait.
    let marker = post_as(&app, &mine, "/api/v1/questions", json!({ "title": "Marker", "kind": "non_blocking" })).await;
    let marker = marker.json["id"].as_str().unwrap().to_owned();
    let until_marker = |events: &[(i64, String, Value)]| events.iter().any(|(_, _, d)| d["question"]["id"] == marker);

    let live = common::read_events_until(my_stream, until_marker).await;
    let replayed = common::read_events_until(common::connect_events(&base, &mine, Some(0)).await, until_marker).await;
    for (how, events) in [("live", &live), ("replayed", &replayed)] {
        let runs: Vec<Option<&str>> = events.iter().map(|(_, _, data)| run_of(data)).collect();
        assert!(runs.contains(&Some(my_run.as_str())), "{how}: the agent's own run: {events:?}");
        assert!(!runs.contains(&Some(their_run.as_str())), "{how}: never another agent's run: {events:?}");
    }
    let everything = common::read_events_until(admin_stream, until_marker).await;
    assert!(everything.iter().any(|(_, _, data)| run_of(data) == Some(&their_run)), "people see every run");
}

/// A replay from the start of the log reads the caller's workspace only.
async fn a_replay_shows_only_the_callers_workspace(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let base = app.serve().await;
    let other = app.create_token("elsewhere", Role::Admin).await;
    post_as(&app, &other, "/api/v1/questions", json!({ "title": "Elsewhere" })).await;
    app.post("/api/v1/questions", json!({ "title": "Here" })).await;
    let events = common::read_events(common::connect_events(&base, &app.token, Some(0)).await, 1).await;
    assert_eq!(events[0].2["question"]["title"], "Here");
}

/// One item failing inside the server does not fail the batch: the items answered before it stay reported.
async fn a_batch_reports_an_internal_failure_on_its_item_alone(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let good = app.post("/api/v1/questions", json!({ "title": "Fine" })).await.json["id"].as_str().unwrap().to_owned();
    let broken =
        app.post("/api/v1/questions", json!({ "title": "Broken" })).await.json["id"].as_str().unwrap().to_owned();
    let after =
        app.post("/api/v1/questions", json!({ "title": "After" })).await.json["id"].as_str().unwrap().to_owned();
    // A row the server cannot read back: what a failing database or a corrupt row looks like to a handler.
    let sql = "UPDATE questions SET options = 'not json' WHERE id = $1";
    let broken_id: uuid::Uuid = broken.parse().unwrap();
    if app.database_url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&app.database_url).await.unwrap();
        sqlx::query(sql).bind(broken_id).execute(&pool).await.unwrap();
    } else {
        let pool = sqlx::PgPool::connect(&app.database_url).await.unwrap();
        sqlx::query("UPDATE questions SET options = '\"not a list\"' WHERE id = $1")
            .bind(broken_id)
            .execute(&pool)
            .await
            .unwrap();
    }
    let items = json!({ "items": [
        { "id": good, "value": "one" }, { "id": broken, "value": "two" }, { "id": after, "value": "three" }
    ] });
    // Through an instance that reads the questions from the database (this one remembers them as it asked them).
    let (_state, router) = app.restart(|_| {}).await;
    let mut other_instance = app;
    other_instance.router = router;
    let response = other_instance.post("/api/v1/questions/answer-batch", items).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let statuses: Vec<&str> =
        response.json["results"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["answered", "error", "answered"], "{}", response.text);
    assert_eq!(response.json["results"][1]["error"]["code"], "internal");
    assert_eq!(status_of(&other_instance, &good).await, "answered");
}

on_both_backends!(
    a_question_may_name_only_a_run_its_caller_acts_for,
    a_run_id_of_another_workspace_changes_nothing_in_the_store,
    idempotency_keys_belong_to_their_caller,
    the_worker_protocol_shows_only_the_runs_own_questions_and_children,
    an_agent_tokens_event_stream_carries_only_its_own_runs,
    a_revoked_tokens_event_stream_ends,
    event_streams_per_caller_are_capped,
    a_replay_shows_only_the_callers_workspace,
    a_batch_reports_an_internal_failure_on_its_item_alone,
);
