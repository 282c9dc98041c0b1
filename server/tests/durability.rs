//! Runs survive the server: a `holdpoint serve` process killed while a run waits, and two processes on one
//! PostgreSQL racing for the same resumed runs.

use crate::common;

use std::time::Duration;

use common::{Backend, ServerProcess, TestApp};
use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

struct Scripts(std::path::PathBuf);

impl Scripts {
    fn new(turns: &Value) -> Self {
        let dir = std::env::temp_dir().join("holdpoint-test-scripts").join(uuid::Uuid::now_v7().to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("deploy.json"), turns.to_string()).unwrap();
        Scripts(dir)
    }
}

impl Drop for Scripts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The database and tokens, with the test's own workers off: only the spawned processes execute runs.
async fn database(backend: Backend) -> Option<TestApp> {
    TestApp::start_with(backend, |config| config.run_workers = false).await
}

async fn spawn(app: &TestApp, scripts: &Scripts, mock: &MockServer) -> ServerProcess {
    app.spawn_process_with(&[
        ("HOLDPOINT_SCRIPTS_DIR", scripts.0.display().to_string()),
        ("HOLDPOINT_HTTP_ALLOWED_HOSTS", mock.address().to_string()),
        ("HOLDPOINT_RUN_LEASE_SECONDS", "5".into()),
    ])
    .await
}

struct Client {
    http: reqwest::Client,
    token: String,
}

impl Client {
    async fn send(&self, base: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{base}/api/v1{path}")).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, base: &str, path: &str) -> Value {
        let (status, body) = self.send(base, reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    async fn post(&self, base: &str, path: &str, body: Value) -> Value {
        let (status, body) = self.send(base, reqwest::Method::POST, path, Some(body)).await;
        assert!((200..300).contains(&status), "POST {path}: {status} {body}");
        body
    }

    /// Polls `GET /runs?status=` until it lists `count` runs (within `seconds`).
    async fn wait_for_runs(&self, base: &str, status: &str, count: usize, seconds: u64) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
        loop {
            let page = self.get(base, &format!("/runs?status={status}&limit=200")).await;
            let items = page["items"].as_array().unwrap().clone();
            if items.len() == count {
                return items;
            }
            assert!(tokio::time::Instant::now() < deadline, "{} of {count} runs are {status}", items.len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn deploy_turns(mock: &MockServer) -> Value {
    json!([
        { "content": "Deploying.", "tool_calls": [{ "id": "call_deploy", "name": "http_request",
            "arguments": { "method": "POST", "url": format!("{}/deploy", mock.uri()) } }] },
        { "content": "Deployed." }
    ])
}

async fn deploy_mock() -> MockServer {
    let mock = MockServer::start().await;
    Mock::given(method("POST")).and(path_regex("^/deploy")).respond_with(ResponseTemplate::new(200)).mount(&mock).await;
    mock
}

async fn create_agent(client: &Client, base: &str) -> Value {
    let agent = json!({ "name": "deployer", "system_prompt": "You deploy services.", "model": "script:deploy.json", "tools": ["http_request"],
        "approval_policy": { "tools": { "http_request": "prompt" } } });
    client.post(base, "/agents", agent).await
}

async fn a_run_waiting_for_approval_survives_sigkill(backend: Backend) {
    let mock = deploy_mock().await;
    let scripts = Scripts::new(&deploy_turns(&mock));
    let Some(app) = database(backend).await else { return };
    let client = Client { http: reqwest::Client::new(), token: app.token.clone() };
    let first = spawn(&app, &scripts, &mock).await;
    let agent = create_agent(&client, &first.base_url).await;
    let run = client.post(&first.base_url, "/runs", json!({ "agent_id": agent["id"], "input": "Deploy v2" })).await;
    let run_id = run["id"].as_str().unwrap().to_owned();
    let waiting = client.wait_for_runs(&first.base_url, "waiting_for_approval", 1, 20).await;
    let question_id = waiting[0]["pending_question_ids"][0].as_str().unwrap().to_owned();
    let before = client.get(&first.base_url, &format!("/runs/{run_id}/messages")).await["items"].clone();
    assert_eq!(before.as_array().unwrap().len(), 3, "system, task and the model's turn are stored before the pause");

    first.kill().await;
    let second = spawn(&app, &scripts, &mock).await;
    client.post(&second.base_url, &format!("/questions/{question_id}/answer"), json!({ "value": true })).await;
    let done = client.wait_for_runs(&second.base_url, "completed", 1, 20).await;
    assert_eq!(done[0]["id"], run_id.as_str());
    assert_eq!(done[0]["result"], "Deployed.");

    let after = client.get(&second.base_url, &format!("/runs/{run_id}/messages")).await["items"].clone();
    let after = after.as_array().unwrap();
    assert_eq!(&after[..3], before.as_array().unwrap().as_slice(), "every message before the crash is kept as it was");
    let roles: Vec<&str> = after.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"], "and none is duplicated");
    assert_eq!(mock.received_requests().await.unwrap().len(), 1, "the approved call ran once");
}

/// Two server processes on one PostgreSQL; 100 runs paused for approval are approved at once, half through each
/// process. Every run must resume exactly once: one tool execution and one model turn each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_resume_each_of_100_runs_exactly_once() {
    const RUNS: usize = 100;
    let mock = deploy_mock().await;
    let scripts = Scripts::new(&deploy_turns(&mock));
    let Some(app) = database(Backend::Postgres).await else { return };
    let client = Client { http: reqwest::Client::new(), token: app.token.clone() };
    let (one, two) = tokio::join!(spawn(&app, &scripts, &mock), spawn(&app, &scripts, &mock));
    let agent = create_agent(&client, &one.base_url).await;
    let creations = (0..RUNS).map(|n| {
        let base = if n % 2 == 0 { &one.base_url } else { &two.base_url };
        client.post(base, "/runs", json!({ "agent_id": agent["id"], "input": format!("Deploy service {n}") }))
    });
    futures::future::join_all(creations).await;
    client.wait_for_runs(&one.base_url, "waiting_for_approval", RUNS, 60).await;
    assert_eq!(mock.received_requests().await.unwrap().len(), 0);

    let pending = client.get(&one.base_url, "/questions?status=pending&kind=approval&limit=200").await;
    let ids: Vec<Value> = pending["items"].as_array().unwrap().iter().map(|q| q["id"].clone()).collect();
    assert_eq!(ids.len(), RUNS);
    let batch =
        |ids: &[Value]| json!({ "items": ids.iter().map(|id| json!({ "id": id, "value": true })).collect::<Vec<_>>() });
    let (first_half, second_half) = ids.split_at(RUNS / 2);
    let (a, b) = tokio::join!(
        client.post(&one.base_url, "/questions/answer-batch", batch(first_half)),
        client.post(&two.base_url, "/questions/answer-batch", batch(second_half)),
    );
    for result in a["results"].as_array().unwrap().iter().chain(b["results"].as_array().unwrap()) {
        assert_eq!(result["status"], "answered", "{result}");
    }

    let completed = client.wait_for_runs(&one.base_url, "completed", RUNS, 120).await;
    assert_eq!(mock.received_requests().await.unwrap().len(), RUNS, "each approved call ran exactly once");
    for run in &completed {
        assert_eq!(run["step_count"], 2, "{run}");
        assert_eq!(run["segments"].as_array().unwrap().len(), 2, "{run}");
        let id = run["id"].as_str().unwrap();
        let messages = client.get(&two.base_url, &format!("/runs/{id}/messages")).await;
        let roles: Vec<&str> =
            messages["items"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"], "run {id} resumed more than once");
    }
}

mod sqlite {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_waiting_for_approval_survives_sigkill() {
        super::a_run_waiting_for_approval_survives_sigkill(super::Backend::Sqlite).await;
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_waiting_for_approval_survives_sigkill() {
        super::a_run_waiting_for_approval_survives_sigkill(super::Backend::Postgres).await;
    }
}

/// Events caused through instance B reach an SSE client of instance A in order and without gaps, and a client that
/// reconnects to a restarted A with `Last-Event-ID` gets exactly what it missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_one_instance_reach_the_clients_of_another_in_order() {
    let Some(app) = database(Backend::Postgres).await else { return };
    let client = Client { http: reqwest::Client::new(), token: app.token.clone() };
    let (a, b) = tokio::join!(app.spawn_process(), app.spawn_process());
    let stream = common::connect_events(&a.base_url, &app.token, None).await;
    let mut asked = Vec::new();
    for n in 0..20 {
        let question = client.post(&b.base_url, "/questions", json!({ "title": format!("Question {n}") })).await;
        asked.push(question["id"].clone());
    }
    let events = common::read_events(stream, 20).await;
    let seen: Vec<Value> = events.iter().map(|(_, _, data)| data["question"]["id"].clone()).collect();
    assert_eq!(seen, asked, "every event, in the order it happened");
    assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "ids increase");
    let last_seen = events.last().unwrap().0;

    a.kill().await;
    let mut missed = Vec::new();
    for n in 0..5 {
        let question =
            client.post(&b.base_url, "/questions", json!({ "title": format!("While A was down {n}") })).await;
        missed.push(question["id"].clone());
    }
    let restarted = app.spawn_process().await;
    let stream = common::connect_events(&restarted.base_url, &app.token, Some(last_seen)).await;
    let replayed = common::read_events(stream, 5).await;
    let seen: Vec<Value> = replayed.iter().map(|(_, _, data)| data["question"]["id"].clone()).collect();
    assert_eq!(seen, missed, "the restarted instance replays exactly what the client missed");
    assert!(replayed[0].0 > last_seen);
}

/// A token revoked through one instance stops working on another at once, even on one that has just served it (and
/// so trusts it from memory): the revocation is heard by notification. The instances trust a token for ten minutes
/// here, so only the notification can explain a refusal within the bound, however loaded the machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_through_one_instance_stops_working_on_the_others() {
    let Some(app) = database(Backend::Postgres).await else { return };
    let admin = Client { http: reqwest::Client::new(), token: app.token.clone() };
    let trusted_for = Duration::from_secs(600);
    let env = [("HOLDPOINT_TOKEN_CACHE_SECONDS", trusted_for.as_secs().to_string())];
    let (a, b) = tokio::join!(app.spawn_process_with(&env), app.spawn_process_with(&env));
    let created = admin.post(&a.base_url, "/tokens", json!({ "name": "ci", "role": "agent" })).await;
    let agent = Client { http: reqwest::Client::new(), token: created["secret"].as_str().unwrap().to_owned() };
    let id = created["token"]["id"].as_str().unwrap();
    // Served a few times, the token is in instance A's memory once A listens for revocations (right after start).
    for _ in 0..5 {
        agent.get(&a.base_url, "/questions").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    admin.post(&b.base_url, &format!("/tokens/{id}/revoke"), json!({})).await;
    let heard_within = Duration::from_secs(30);
    let revoked_at = tokio::time::Instant::now();
    loop {
        // Judged by when a request was sent: on a loaded machine an answer can take long to arrive.
        let sent_after = revoked_at.elapsed();
        let (status, body) = agent.send(&a.base_url, reqwest::Method::GET, "/questions", None).await;
        if status == 401 {
            assert_eq!(body["error"]["code"], "unauthorized");
            break;
        }
        assert_eq!(status, 200, "{body}");
        assert!(sent_after < heard_within, "instance A took the token {sent_after:?} after B revoked it");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _) = agent.send(&b.base_url, reqwest::Method::GET, "/questions", None).await;
    assert_eq!(status, 401, "and B, which revoked it, refuses it too");
}

/// Ids are drawn as each transaction commits, under the event log's lock (migration 0008): with many writers on two
/// instances committing at once, every stream of either instance still gets every event, once, in id order. A
/// later id that became visible before an earlier one would make the hubs step past the earlier one for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_on_two_instances_reach_every_stream_without_a_gap() {
    const WRITERS: usize = 32;
    const EACH: usize = 10;
    let Some(app) = database(Backend::Postgres).await else { return };
    let unlimited =
        ["HOLDPOINT_CREATE_RATE_BURST", "HOLDPOINT_CREATE_RATE_PER_SECOND"].map(|name| (name, "100000".into()));
    let (a, b) = tokio::join!(app.spawn_process_with(&unlimited), app.spawn_process_with(&unlimited));
    let streams = [
        common::connect_events(&a.base_url, &app.token, None).await,
        common::connect_events(&b.base_url, &app.token, None).await,
    ];
    let readers = streams.map(|stream| tokio::spawn(common::read_events(stream, WRITERS * EACH)));
    let client = Client { http: reqwest::Client::new(), token: app.token.clone() };
    let writers = (0..WRITERS).map(|writer| {
        let (client, base) = (&client, if writer % 2 == 0 { &a.base_url } else { &b.base_url });
        async move {
            let mut asked = Vec::new();
            for n in 0..EACH {
                let title = format!("Writer {writer}, question {n}");
                let question = client.post(base, "/questions", json!({ "title": title, "kind": "non_blocking" })).await;
                asked.push(question["id"].as_str().unwrap().to_owned());
            }
            asked
        }
    });
    let mut asked: Vec<String> = futures::future::join_all(writers).await.into_iter().flatten().collect();
    asked.sort();
    for reader in readers {
        let events = reader.await.unwrap();
        assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "ids increase on every stream");
        let mut seen: Vec<String> =
            events.iter().map(|(_, _, data)| data["question"]["id"].as_str().unwrap().to_owned()).collect();
        seen.sort();
        assert_eq!(seen, asked, "every question's event, once");
    }
}

/// SIGTERM stops a server promptly even while clients hold an event stream and a long-poll open: the stream ends
/// with `reconnect` (its Last-Event-ID loses nothing), the long-poll answers with the question as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_open_streams_instead_of_waiting_for_them() {
    let Some(app) = database(Backend::Sqlite).await else { return };
    let client = Client { http: reqwest::Client::new(), token: app.token.clone() };
    let server = app.spawn_process().await;
    let question = client.post(&server.base_url, "/questions", json!({ "title": "Still there?" })).await;
    let stream = common::connect_events(&server.base_url, &app.token, None).await;
    let wait_url =
        format!("{}/api/v1/questions/{}/wait?timeout_seconds=60", server.base_url, question["id"].as_str().unwrap());
    let long_poll = tokio::spawn(reqwest::Client::new().get(wait_url).bearer_auth(app.token.clone()).send());
    tokio::time::sleep(Duration::from_millis(300)).await;

    assert!(server.terminate(10).await, "the server stops within 10 s although clients are connected");
    let rest = tokio::time::timeout(Duration::from_secs(10), stream.text()).await.unwrap().unwrap();
    assert!(rest.contains("event: reconnect"), "the stream ended with reconnect: {rest:?}");
    let answered = long_poll.await.unwrap().unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.json::<Value>().await.unwrap()["status"], "pending");
}
