//! The real `holdpoint` binary as scripts, CI jobs and people use it: `ask` with its exit codes, `run` / `resume`
//! pausing with exit code 10, and the responder commands (`questions`, `show`, `answer`, `approve`, `reject`),
//! against a running server and against the embedded engine; and the shell completions.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Backend, ServerProcess, TestApp};
use serde_json::{Value, json};

/// A working directory of the test's own (`.holdpoint/` is created in it).
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join("holdpoint-cli-tests").join(uuid::Uuid::now_v7().to_string());
        std::fs::create_dir_all(&dir).unwrap();
        WorkDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Output {
    code: i32,
    json: Value,
    stdout: String,
    stderr: String,
}

async fn holdpoint(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"));
    command.args(args).current_dir(dir).env_remove("HOLDPOINT_SERVER").env_remove("HOLDPOINT_TOKEN");
    for (name, value) in env {
        command.env(name, value);
    }
    let output =
        tokio::time::timeout(Duration::from_secs(60), command.output()).await.expect("the CLI finishes").unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    Output {
        code: output.status.code().unwrap_or(-1),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn api(server: &ServerProcess, token: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut request =
        reqwest::Client::new().request(method, format!("{}/api/v1{path}", server.base_url)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{path}: {}", response.status());
    response.json().await.unwrap()
}

fn remote(server: &ServerProcess, token: &str) -> Vec<(&'static str, String)> {
    vec![("HOLDPOINT_SERVER", server.base_url.clone()), ("HOLDPOINT_TOKEN", token.to_owned())]
}

/// A Holdpoint of its own with a server process, and the environment a script reaches that server with, holding an
/// agent token (a person, the app's admin, answers: whoever asks may not approve).
async fn agent_against_a_server() -> (TestApp, ServerProcess, Vec<(&'static str, String)>) {
    let app = TestApp::start_with(Backend::Sqlite, |c| c.run_workers = false).await.unwrap();
    let server = app.spawn_process().await;
    let env = remote(&server, &app.create_token("default", app::types::Role::Agent).await);
    (app, server, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_pauses_with_10_then_answers_with_0_11_or_12() {
    let (app, server, env) = agent_against_a_server().await;
    let dir = WorkDir::new();
    let gate = ["ask", "Apply terraform to prod?", "--type", "approval"];

    let paused = holdpoint(&dir.0, &[&gate[..], &["--no-wait"]].concat(), &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    assert_eq!(paused.json["outcome"], "paused");
    let id = paused.json["question_ids"][0].as_str().unwrap().to_owned();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path(".holdpoint/pause.json")).unwrap()).unwrap();
    assert_eq!(manifest, paused.json, "pause.json holds what was printed");
    let again = holdpoint(&dir.0, &[&gate[..], &["--no-wait"]].concat(), &env).await;
    assert_eq!(
        (again.code, again.json["question_ids"][0].as_str()),
        (10, Some(id.as_str())),
        "still the same question"
    );

    api(&server, &app.token, reqwest::Method::POST, &format!("/questions/{id}/answer"), Some(json!({ "value": true })))
        .await;
    let approved = holdpoint(&dir.0, &gate, &env).await;
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert_eq!(approved.json["id"], id.as_str());
    assert_eq!(approved.json["status"], "answered");
    assert!(!dir.path(".holdpoint/pause.json").exists(), "the pause is over");

    let deny = ["ask", "Drop the users table?", "--type", "approval"];
    let paused = holdpoint(&dir.0, &[&deny[..], &["--no-wait"]].concat(), &env).await;
    let id = paused.json["question_ids"][0].as_str().unwrap().to_owned();
    let body = json!({ "value": false, "comment": "not on a Friday" });
    api(&server, &app.token, reqwest::Method::POST, &format!("/questions/{id}/answer"), Some(body)).await;
    let rejected = holdpoint(&dir.0, &deny, &env).await;
    assert_eq!(rejected.code, 11, "{}", rejected.stderr);
    assert_eq!(rejected.json["response"]["comment"], "not on a Friday");

    let expired = holdpoint(&dir.0, &["ask", "Anyone there?", "--type", "approval", "--timeout", "1s"], &env).await;
    assert_eq!(expired.code, 12, "{}", expired.stderr);
    assert_eq!(expired.json["status"], "expired");

    let chosen = holdpoint(
        &dir.0,
        &[
            "ask",
            "Region?",
            "--type",
            "choice",
            "--option",
            "eu=Europe",
            "--option",
            "us=US",
            "--timeout",
            "1s",
            "--default",
            "eu",
        ],
        &env,
    )
    .await;
    assert_eq!(
        (chosen.code, &chosen.json["status"], &chosen.json["response"]["value"]),
        (0, &json!("defaulted"), &json!("eu"))
    );
}

/// Two gates left waiting in one directory each find their own question again: the second pause does not make the
/// first ask anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gates_waiting_in_one_directory_each_find_their_question() {
    let (app, server, env) = agent_against_a_server().await;
    let dir = WorkDir::new();
    let migrate = ["ask", "Migrate the database?", "--type", "approval"];
    let region = ["ask", "Which region?", "--type", "choice", "--option", "eu=Europe", "--option", "us=US"];
    let mut ids = Vec::new();
    for gate in [&migrate[..], &region[..]] {
        let paused = holdpoint(&dir.0, &[gate, &["--no-wait"]].concat(), &env).await;
        assert_eq!(paused.code, 10, "{}", paused.stderr);
        ids.push(paused.json["question_ids"][0].as_str().unwrap().to_owned());
    }
    let answers = [json!(true), json!("us")];
    for (id, value) in ids.iter().zip(&answers) {
        let path = format!("/questions/{id}/answer");
        api(&server, &app.token, reqwest::Method::POST, &path, Some(json!({ "value": value }))).await;
    }
    for ((gate, id), value) in [&migrate[..], &region[..]].into_iter().zip(&ids).zip(&answers) {
        let answered = holdpoint(&dir.0, gate, &env).await;
        assert_eq!(answered.code, 0, "{}", answered.stderr);
        assert_eq!((&answered.json["id"], &answered.json["response"]["value"]), (&json!(id), value));
    }
    let asked = api(&server, &app.token, reqwest::Method::GET, "/questions?limit=200", None).await;
    assert_eq!(asked["items"].as_array().unwrap().len(), 2, "nothing was asked twice: {asked}");
    assert!(!dir.path(".holdpoint/pause.json").exists(), "the pauses are over");
    assert_eq!(std::fs::read_dir(dir.path(".holdpoint/asks")).unwrap().count(), 0, "no gate is left waiting");

    // A gate left waiting on another server: this one does not know the question, so the gate asks it here.
    let paused = holdpoint(&dir.0, &[&migrate[..], &["--no-wait"]].concat(), &env).await;
    let (elsewhere, other, env) = agent_against_a_server().await;
    let asked_here = holdpoint(&dir.0, &[&migrate[..], &["--no-wait"]].concat(), &env).await;
    assert_eq!(asked_here.code, 10, "{}", asked_here.stderr);
    assert_ne!(asked_here.json["question_ids"], paused.json["question_ids"], "a question of this server");
    let listed = api(&other, &elsewhere.token, reqwest::Method::GET, "/questions", None).await;
    assert_eq!(listed["items"][0]["id"], asked_here.json["question_ids"][0]);
}

/// A script asks for a bounded number, a date, a table or a form of a JSON Schema as it asks for text, and reads the
/// value back; a bound the type does not take is the API's 422 on stdout, exit 1, and no question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_takes_every_single_value_type_with_its_bounds() {
    let (app, server, env) = agent_against_a_server().await;
    let dir = WorkDir::new();
    let replicas = ["ask", "How many replicas?", "--type", "integer", "--min", "1", "--max", "9", "--step", "2"];

    let paused = holdpoint(&dir.0, &[&replicas[..], &["--no-wait"]].concat(), &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let id = paused.json["question_ids"][0].as_str().unwrap().to_owned();
    let asked = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{id}"), None).await;
    assert_eq!(
        [&asked["response_type"], &asked["min"], &asked["max"], &asked["step"]],
        [&json!("integer"), &json!(1), &json!(9), &json!(2)]
    );
    let shown = holdpoint(&dir.0, &["show", &id], &env).await;
    assert!(shown.stdout.contains("Takes: a whole number from 1 to 9, in steps of 2"), "{}", shown.stdout);
    api(&server, &app.token, reqwest::Method::POST, &format!("/questions/{id}/answer"), Some(json!({ "value": 7 })))
        .await;
    let answered = holdpoint(&dir.0, &[&replicas[..], &["--output", "text"]].concat(), &env).await;
    assert_eq!((answered.code, answered.stdout.as_str()), (0, "7\n"), "{}", answered.stderr);

    let day =
        ["ask", "Release day?", "--type", "date", "--timeout", "1s", "--default", "2026-12-24", "--output", "text"];
    let defaulted = holdpoint(&dir.0, &day, &env).await;
    assert_eq!((defaulted.code, defaulted.stdout.as_str()), (0, "2026-12-24\n"), "{}", defaulted.stderr);

    let columns = json!([{ "key": "host", "label": "Host", "response_type": "text", "required": true },
        { "key": "weight", "label": "Weight", "response_type": "integer" }])
    .to_string();
    let table = ["ask", "Which hosts?", "--type", "table", "--columns", &columns, "--max-rows", "3", "--no-wait"];
    let paused = holdpoint(&dir.0, &table, &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let id = paused.json["question_ids"][0].as_str().unwrap();
    let asked = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{id}"), None).await;
    assert_eq!((&asked["columns"][1]["key"], &asked["max_rows"]), (&json!("weight"), &json!(3)));
    let shown = holdpoint(&dir.0, &["show", id], &env).await;
    for needle in ["Takes: a table of at most 3 rows", "column host (text, required): Host", "column weight (integer)"]
    {
        assert!(shown.stdout.contains(needle), "{needle}: {}", shown.stdout);
    }

    let schema = json!({ "type": "object", "required": ["window"],
        "properties": { "window": { "type": "string", "format": "date-time", "title": "Window" } } })
    .to_string();
    let paused = holdpoint(&dir.0, &["ask", "When?", "--schema", &schema, "--no-wait"], &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let id = paused.json["question_ids"][0].as_str().unwrap();
    let asked = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{id}"), None).await;
    assert_eq!(
        (&asked["response_type"], &asked["fields"][0]["response_type"], &asked["fields"][0]["required"]),
        (&json!("form"), &json!("datetime"), &json!(true))
    );

    let before = api(&server, &app.token, reqwest::Method::GET, "/questions?limit=200", None).await;
    let refused = holdpoint(&dir.0, &["ask", "Anything?", "--type", "text", "--min", "1"], &env).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert_eq!(refused.json["error"]["code"], "invalid", "{}", refused.stdout);
    assert!(refused.json["error"]["details"]["fields"]["min"].is_string(), "{}", refused.stdout);
    let after = api(&server, &app.token, reqwest::Method::GET, "/questions?limit=200", None).await;
    assert_eq!(after["items"], before["items"], "nothing was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ci_gate_a_grant_covers_passes_at_once_without_waiting() {
    let (app, server, env) = agent_against_a_server().await;
    let dir = WorkDir::new();
    let gate = |command: &str| {
        let arguments = json!({ "command": command }).to_string();
        ["ask", "Migrate the database?", "--type", "approval", "--tool", "shell", "--arguments"]
            .into_iter()
            .map(str::to_owned)
            .chain([arguments])
            .collect::<Vec<String>>()
    };
    let first = gate("make migrate");
    let first: Vec<&str> = first.iter().map(String::as_str).chain(["--no-wait"]).collect();
    let paused = holdpoint(&dir.0, &first, &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let id = paused.json["question_ids"][0].as_str().unwrap().to_owned();
    let grant = json!({ "scope": "agent", "matcher": { "command_prefix": "make migrate" } });
    let body = json!({ "value": true, "grant": grant });
    api(&server, &app.token, reqwest::Method::POST, &format!("/questions/{id}/answer"), Some(body)).await;

    let next = gate("make migrate STEP=2");
    let next: Vec<&str> = next.iter().map(String::as_str).collect();
    let passed = holdpoint(&dir.0, &next, &env).await;
    assert_eq!(passed.code, 0, "{}", passed.stderr);
    assert_eq!((&passed.json["status"], &passed.json["answered_by"]), (&json!("answered"), &json!("grant")));
    assert!(!passed.stderr.contains("Waiting for an answer"), "nothing to wait for: {}", passed.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_errors_are_one_line_with_a_non_zero_exit() {
    let app = TestApp::start_with(Backend::Sqlite, |c| c.run_workers = false).await.unwrap();
    let server = app.spawn_process().await;
    let dir = WorkDir::new();
    /// Arguments, environment, the exit code, and what the one line on stderr says.
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, String)>, i32, &'a str);
    let cases: Vec<Case> = vec![
        (vec!["ask", "x", "--bogus"], vec![], 2, "unexpected argument"),
        (vec!["ask", "x", "--type", "choice", "--option", "eu"], vec![], 2, "VALUE=LABEL"),
        (vec!["ask", "x", "--server", "http://127.0.0.1:9"], vec![], 2, "--server needs --token"),
        (vec!["ask", "x", "--server", "127.0.0.1:9", "--token", "hp_x"], vec![], 2, "must be an http:// or https://"),
        (vec!["questions", "--server", "htp://127.0.0.1:9", "--token", "hp_x"], vec![], 2, "must be an http://"),
        (
            vec!["ask", "x"],
            vec![("HOLDPOINT_SERVER", "http://127.0.0.1:9".into()), ("HOLDPOINT_TOKEN", "hp_x".into())],
            1,
            "cannot reach",
        ),
        (
            vec!["ask", "x"],
            vec![("HOLDPOINT_SERVER", server.base_url.clone()), ("HOLDPOINT_TOKEN", "hp_wrong".into())],
            1,
            "refused the token",
        ),
        (vec!["resume", "01a20372-82f8-747b-8dd0-4f4b79088461"], remote(&server, &app.token), 1, "run not found"),
        (vec!["resume", "nope"], remote(&server, &app.token), 2, "is not a run id"),
        (vec!["show", "nope"], remote(&server, &app.token), 2, "is not a question id"),
        (vec!["run", "task", "--agent", "nobody"], remote(&server, &app.token), 1, "no agent named"),
    ];
    for (args, env, code, needle) in cases {
        let out = holdpoint(&dir.0, &args, &env).await;
        assert_eq!(out.code, code, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked") && !out.stderr.contains("RUST_BACKTRACE"), "{}", out.stderr);
        if code != 2 {
            assert_eq!(out.stderr.trim().lines().count(), 1, "one line: {}", out.stderr);
        }
    }
    // With --output json, stdout is one JSON document even when the command line itself is refused.
    for (args, outcome) in [
        (&["ask", "x", "--bogus", "--output", "json"][..], json!("error")),
        (&["show", "--output=json"][..], Value::Null),
    ] {
        let out = holdpoint(&dir.0, args, &[]).await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        let document: Value =
            serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", out.stdout));
        assert_eq!(document["error"]["code"], "usage", "{document}");
        assert!(!document["error"]["message"].as_str().unwrap().is_empty(), "{document}");
        assert_eq!(document["outcome"], outcome, "{document}");
    }
    let text = holdpoint(&dir.0, &["ask", "x", "--bogus"], &[]).await;
    assert!(text.stdout.is_empty(), "text output prints nothing on stdout: {}", text.stdout);
}

/// A script whose first turn asks to run `commands` with `shell` (one call each), then finishes.
fn shell_script(commands: &[String]) -> Value {
    let calls: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(n, c)| json!({ "id": format!("sh{n}"), "name": "shell", "arguments": { "command": c } }))
        .collect();
    json!([{ "content": "I need to run these.", "tool_calls": calls }, { "content": "All done." }])
}

fn agent_spec(script: &str) -> Value {
    json!({ "name": "ops", "model": format!("script:{script}"), "tools": ["shell"], "approval_policy": { "tools": { "shell": "prompt" } } })
}

/// Runs the three pause/resume scenarios with `env` (a server's, or none for the embedded engine).
async fn pause_and_resume_scenarios(dir: &WorkDir, env: &[(&str, String)], with_agent: impl AsyncFn(&str, &Value)) {
    let marker = |name: &str| dir.path(name).display().to_string();
    let single = ["ops-one.json", "ops-three.json"];
    let one = shell_script(&[format!("touch {}", marker("one"))]);
    let three = shell_script(&[
        format!("touch {}", marker("a")),
        format!("touch {}", marker("b")),
        format!("touch {}", marker("c")),
    ]);
    with_agent(single[0], &one).await;

    // Approve the one call.
    let paused =
        holdpoint(&dir.0, &["run", "Tidy up", "--agent", "ops", "--pause-on-approval", "--output", "json"], env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    assert_eq!(paused.json["pause_reason"]["type"], "tool_approval_required");
    let run_id = paused.json["run_id"].as_str().unwrap().to_owned();
    let calls = paused.json["pause_reason"]["pending_tool_calls"].as_array().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert!(!dir.path("one").exists(), "nothing ran before the approval");
    let call_id = calls[0]["id"].as_str().unwrap();
    let done = holdpoint(&dir.0, &["resume", &run_id, "--approve", call_id, "--output", "json"], env).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        done.json,
        json!({ "outcome": "completed", "run_id": run_id, "final_message": "All done.", "steps_taken": 2 })
    );
    assert!(dir.path("one").exists(), "the approved command ran");

    // Reject everything: the model sees the rejection.
    std::fs::remove_file(dir.path("one")).unwrap();
    let paused = holdpoint(&dir.0, &["run", "Tidy up", "--agent", "ops", "--pause-on-approval"], env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let run_id = paused.json["run_id"].as_str().unwrap().to_owned();
    let done = holdpoint(&dir.0, &["resume", &run_id, "--reject-all", "--comment", "not today"], env).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(done.stderr.contains("not today") && done.stderr.contains("rejected"), "the model saw it: {}", done.stderr);
    assert!(!dir.path("one").exists());

    // One of three approved: the other two are rejected.
    with_agent(single[1], &three).await;
    let paused =
        holdpoint(&dir.0, &["run", "Tidy up", "--agent", "ops", "--pause-on-approval", "--output", "json"], env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let run_id = paused.json["run_id"].as_str().unwrap().to_owned();
    let calls = paused.json["pause_reason"]["pending_tool_calls"].as_array().unwrap().clone();
    assert_eq!(calls.len(), 3);
    let middle = calls[1]["call_id"].as_str().unwrap();
    let done = holdpoint(&dir.0, &["resume", &run_id, "--approve", middle], env).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!((dir.path("a").exists(), dir.path("b").exists(), dir.path("c").exists()), (false, true, false));
    assert_eq!(done.stderr.matches("left undecided when the run was resumed").count(), 2, "{}", done.stderr);

    // A final answer that asks something pauses too; the prompt of the resume answers it.
    with_agent(
        "ops-ask.json",
        &json!([{ "content": "Which environment should I use?" }, { "content": "Staging it is." }]),
    )
    .await;
    let paused =
        holdpoint(&dir.0, &["run", "Deploy", "--agent", "ops", "--pause-on-approval", "--output", "json"], env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    assert_eq!(paused.json["pause_reason"]["type"], "input_required");
    assert_eq!(paused.json["agent_message"], "Which environment should I use?");
    let run_id = paused.json["run_id"].as_str().unwrap().to_owned();
    let done = holdpoint(&dir.0, &["resume", &run_id, "staging", "--output", "json"], env).await;
    assert_eq!((done.code, &done.json["final_message"]), (0, &json!("Staging it is.")), "{}", done.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_resume_against_a_running_server() {
    let app = TestApp::start_with(Backend::Sqlite, |c| c.run_workers = false).await.unwrap();
    let dir = WorkDir::new();
    let scripts = dir.path("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    // The server's shell stays off: the commands can only have run in the CLI process, which executes the loop.
    // One operator both runs the gate and decides its calls with one token, so separation of duties is off, as it
    // must be for such a setup: with it on, the run's starter may not decide what its run asks (runs.rs checks that
    // refusal for every door, `resume` included).
    let server = app
        .spawn_process_with(&[
            ("HOLDPOINT_SCRIPTS_DIR", scripts.display().to_string()),
            ("HOLDPOINT_SEPARATION_OF_DUTIES", "false".into()),
        ])
        .await;
    let mut env = remote(&server, &app.token);
    env.push(("HOLDPOINT_SHELL", "on".into()));
    env.push(("HOLDPOINT_SCRIPTS_DIR", scripts.display().to_string()));
    let agent_id = std::sync::Mutex::new(None::<String>);
    pause_and_resume_scenarios(&dir, &env, async |file: &str, turns: &Value| {
        std::fs::write(scripts.join(file), turns.to_string()).unwrap();
        let spec = agent_spec(file);
        let existing = agent_id.lock().unwrap().clone();
        let agent = match existing {
            Some(id) => api(&server, &app.token, reqwest::Method::PUT, &format!("/agents/{id}"), Some(spec)).await,
            None => api(&server, &app.token, reqwest::Method::POST, "/agents", Some(spec)).await,
        };
        *agent_id.lock().unwrap() = agent["id"].as_str().map(str::to_owned);
    })
    .await;

    // Decided in the web UI (here: its API): a resume without flags takes that decision and executes the call.
    let one = shell_script(&[format!("touch {}", dir.path("web").display())]);
    std::fs::write(scripts.join("ops-web.json"), one.to_string()).unwrap();
    let id = agent_id.lock().unwrap().clone().unwrap();
    api(&server, &app.token, reqwest::Method::PUT, &format!("/agents/{id}"), Some(agent_spec("ops-web.json"))).await;
    let paused =
        holdpoint(&dir.0, &["run", "Tidy up", "--agent", "ops", "--pause-on-approval", "--output", "json"], &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let run_id = paused.json["run_id"].as_str().unwrap().to_owned();
    let question = paused.json["pause_reason"]["question_ids"][0].as_str().unwrap().to_owned();
    let answer = json!({ "value": true });
    api(&server, &app.token, reqwest::Method::POST, &format!("/questions/{question}/answer"), Some(answer)).await;
    assert!(!dir.path("web").exists(), "nothing runs until the CLI picks the run up again");
    let done = holdpoint(&dir.0, &["resume", &run_id, "--output", "json"], &env).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(dir.path("web").exists(), "the call approved in the web UI ran in the CLI process");

    // A person deciding with `resume --approve` under their own token decides only: the run goes on where the token
    // that started it runs, with that one's shell and scripts, never in the person's process.
    let once = shell_script(&[format!("touch {}", dir.path("person").display())]);
    std::fs::write(scripts.join("ops-person.json"), once.to_string()).unwrap();
    api(&server, &app.token, reqwest::Method::PUT, &format!("/agents/{id}"), Some(agent_spec("ops-person.json"))).await;
    let paused =
        holdpoint(&dir.0, &["run", "Tidy up", "--agent", "ops", "--pause-on-approval", "--output", "json"], &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let run_id = paused.json["run_id"].as_str().unwrap().to_owned();
    let call = paused.json["pause_reason"]["pending_tool_calls"][0]["id"].as_str().unwrap().to_owned();
    let mut person = remote(&server, &app.create_token("default", app::types::Role::Approver).await);
    person.push(("HOLDPOINT_SHELL", "on".into()));
    person.push(("HOLDPOINT_SCRIPTS_DIR", scripts.display().to_string()));
    let decided = holdpoint(&dir.0, &["resume", &run_id, "--approve", &call, "--output", "json"], &person).await;
    assert_eq!(decided.code, 0, "{}", decided.stderr);
    assert_eq!(decided.json["outcome"], "queued", "{}", decided.stdout);
    assert!(!dir.path("person").exists(), "the person's process executed nothing");
    let done = holdpoint(&dir.0, &["resume", &run_id, "--output", "json"], &env).await;
    assert_eq!((done.code, &done.json["outcome"]), (0, &json!("completed")), "{}", done.stderr);
    assert!(dir.path("person").exists(), "the run's own token executed the approved call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_resume_with_the_embedded_engine() {
    let dir = WorkDir::new();
    let env = [("HOLDPOINT_SHELL", "on".to_owned())];
    std::fs::create_dir_all(dir.path(".holdpoint/scripts")).unwrap();
    std::fs::create_dir_all(dir.path(".holdpoint/agents")).unwrap();
    let defined = std::sync::atomic::AtomicBool::new(false);
    pause_and_resume_scenarios(&dir, &env, async |file: &str, turns: &Value| {
        // The agent file defines `ops` the first time the engine meets it; later scripts replace its script file.
        std::fs::write(dir.path(".holdpoint/scripts/ops.json"), turns.to_string()).unwrap();
        if !defined.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let yaml = "model: script:ops.json\ntools: [shell]\napproval_policy:\n  tools:\n    shell: prompt\n";
            std::fs::write(dir.path(".holdpoint/agents/ops.yaml"), yaml).unwrap();
        }
        let _ = file;
    })
    .await;
    assert!(dir.path(".holdpoint/holdpoint.db").exists(), "the state lives in .holdpoint/");
}

/// `holdpoint user create` names the new member's role with the right article ("an approver", "a viewer"), and the
/// person can sign in with the password it read from standard input.
#[tokio::test]
async fn user_create_reads_the_password_from_stdin_and_says_what_the_person_now_is() {
    use tokio::io::AsyncWriteExt;
    let dir = WorkDir::new();
    let database = format!("sqlite:{}", dir.path("people.db").display());
    // `holdpoint user create ARGS --password-stdin` given `password`: its exit code and what it said.
    let create = |args: &'static [&'static str], password: &'static [u8]| {
        let (database, dir) = (database.clone(), dir.0.clone());
        async move {
            let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"))
                .args(["user", "create"])
                .args(args)
                .args(["--password-stdin", "--database-url", &database])
                .current_dir(&dir)
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(password).await.unwrap();
            let output =
                tokio::time::timeout(Duration::from_secs(60), child.wait_with_output()).await.unwrap().unwrap();
            (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
        }
    };
    for (args, said) in [
        (&["alice", "--role", "approver", "--create-database"][..], "alice is now an approver"),
        (&["bob", "--role", "viewer"][..], "bob is now a viewer"),
    ] {
        let (code, stderr) = create(args, b"a long enough password\n").await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.contains(&format!("{said} of workspace \"default\"")), "{stderr}");
    }
    // An existing account only joins another workspace: a password given for it is refused, not dropped.
    let (code, stderr) =
        create(&["alice", "--role", "viewer", "--workspace", "other"], b"another long password\n").await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("user set-password alice"), "{stderr}");
    {
        use sqlx::Connection;
        let mut db = sqlx::SqliteConnection::connect(&database).await.unwrap();
        let (made,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM workspaces WHERE name = 'other'").fetch_one(&mut db).await.unwrap();
        assert_eq!(made, 0, "the refusal made no workspace");
    }
    let store = holdpoint::store::connect(&database).await.unwrap();
    let alice = store.user_by_username("alice").await.unwrap().expect("alice was created");
    let verified = holdpoint::people::verify_password("a long enough password".into(), alice.password_hash).await;
    assert!(verified.unwrap(), "the password read from stdin is alice's, and stays hers");
}

/// A database URL's password is a secret like the others: `--help` names the variable, never its value.
#[tokio::test]
async fn help_never_shows_the_database_urls_password() {
    let dir = WorkDir::new();
    let url = ("DATABASE_URL", "postgres://holdpoint:SEKRIT-in-the-url@127.0.0.1:9/holdpoint".to_owned());
    for command in [&["serve", "--help"][..], &["audit", "verify", "--help"][..], &["backup", "--help"][..]] {
        let help = holdpoint(&dir.0, command, std::slice::from_ref(&url)).await;
        assert_eq!(help.code, 0, "{command:?}: {}", help.stderr);
        assert!(help.stdout.contains("DATABASE_URL"), "{command:?}: {}", help.stdout);
        assert!(!help.stdout.contains("SEKRIT"), "{command:?}: {}", help.stdout);
    }
}

/// The data directory a command creates holds the database and its secrets: its owner's alone, whatever the umask.
#[cfg(unix)]
#[tokio::test]
async fn the_data_directory_is_created_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = WorkDir::new();
    let data = dir.path("fresh-data");
    let created = holdpoint(
        &dir.0,
        &["token", "create", "--role", "admin", "--name", "ops", "--create-database"],
        &[("HOLDPOINT_DATA_DIR", data.display().to_string())],
    )
    .await;
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert_eq!(std::fs::metadata(&data).unwrap().permissions().mode() & 0o777, 0o700);
}

/// `holdpoint run` executes `http_request` in the CLI process with the server's rule: redirects are not followed,
/// so an allowed host that redirects elsewhere cannot hand the model (or the server) another host's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_executor_does_not_follow_a_redirect_off_the_allow_list() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let elsewhere = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/secret"))
        .respond_with(ResponseTemplate::new(200).set_body_string("the other host's secret"))
        .mount(&elsewhere)
        .await;
    let allowed = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/report"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", format!("{}/secret", elsewhere.uri())))
        .mount(&allowed)
        .await;

    let app = TestApp::start_with(Backend::Sqlite, |c| c.run_workers = false).await.unwrap();
    let dir = WorkDir::new();
    let scripts = dir.path("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let turns = json!([
        { "tool_calls": [{ "id": "fetch", "name": "http_request",
            "arguments": { "method": "GET", "url": format!("{}/report", allowed.uri()) } }] },
        { "content": "Fetched." }
    ]);
    std::fs::write(scripts.join("fetch.json"), turns.to_string()).unwrap();
    let server = app.spawn_process_with(&[("HOLDPOINT_SCRIPTS_DIR", scripts.display().to_string())]).await;
    let spec = json!({ "name": "fetcher", "model": "script:fetch.json", "tools": ["http_request"],
        "approval_policy": { "tools": { "http_request": "auto" } } });
    api(&server, &app.token, reqwest::Method::POST, "/agents", Some(spec)).await;
    let mut env = remote(&server, &app.token);
    env.push(("HOLDPOINT_SCRIPTS_DIR", scripts.display().to_string()));
    env.push(("HOLDPOINT_HTTP_ALLOWED_HOSTS", allowed.address().to_string()));

    let done = holdpoint(&dir.0, &["run", "Fetch the report", "--agent", "fetcher", "--output", "json"], &env).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    let run_id = done.json["run_id"].as_str().unwrap();
    let calls = api(&server, &app.token, reqwest::Method::GET, &format!("/runs/{run_id}/tool-calls"), None).await;
    let output = &calls["items"][0]["output"];
    assert_eq!(output["status"], 302, "the redirect itself is the result: {output}");
    assert!(!output.to_string().contains("the other host's secret"), "{output}");
    assert!(elsewhere.received_requests().await.unwrap().is_empty(), "the other host was never asked");
}

/// `holdpoint questions`, `show`, `answer`, `approve` and `reject` against a running server: each response type read
/// from the command line, and the refusals with their exit codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_answer_approve_and_reject_from_a_terminal_against_a_running_server() {
    let app = TestApp::start_with(Backend::Sqlite, |c| c.run_workers = false).await.unwrap();
    let server = app.spawn_process().await;
    let dir = WorkDir::new();
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let approver = remote(&server, &app.create_token("default", app::types::Role::Approver).await);
    let viewer = remote(&server, &app.create_token("default", app::types::Role::Viewer).await);
    let ask = async |body: Value| -> String {
        let question = api(&server, &agent, reqwest::Method::POST, "/questions", Some(body)).await;
        question["id"].as_str().unwrap().to_owned()
    };
    let options = json!([{ "value": "eu", "label": "Europe" }, { "value": "us", "label": "US" }]);
    let text = ask(json!({ "title": "Release notes tone?", "response_type": "text", "body": "Be **brief**." })).await;
    let boolean = ask(json!({ "title": "Ship it?", "response_type": "boolean", "project": "infra" })).await;
    let choice = ask(json!({ "title": "Region?", "response_type": "choice", "options": options })).await;
    let multi = ask(json!({ "title": "Regions?", "response_type": "multi_choice", "options": options })).await;
    let form = ask(json!({ "title": "Sizing", "response_type": "form", "fields": [
        { "key": "replicas", "label": "Replicas", "response_type": "number", "required": true },
        { "key": "canary", "label": "Canary first?", "response_type": "boolean", "required": true }] }))
    .await;
    let recovery = ask(json!({ "title": "The build failed", "kind": "error_recovery",
        "response_type": "error_recovery" }))
    .await;
    let approval = |title: &str| {
        json!({ "title": title, "kind": "approval", "response_type": "approval", "allow_edit": true,
            "action": { "tool_name": "shell", "arguments": { "command": "terraform apply" } },
            "context": { "ticket": "OPS-7" } })
    };
    let approved = ask(approval("Apply terraform?")).await;
    let rejected = ask(approval("Drop the table?")).await;

    let listed = holdpoint(&dir.0, &["questions", "--output", "json"], &approver).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.json["items"].as_array().unwrap().len(), 8, "{}", listed.stdout);
    let table = holdpoint(&dir.0, &["questions", "--kind", "approval"], &approver).await;
    assert_eq!(table.code, 0, "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("URGENCY") && lines[0].ends_with("TITLE"),
        "{}",
        table.stdout
    );
    assert_eq!(lines.len(), 3, "a header and the two approvals: {}", table.stdout);
    assert!(table.stdout.contains(&approved) && table.stdout.contains("Drop the table?"), "{}", table.stdout);
    let infra = holdpoint(&dir.0, &["questions", "--project", "infra", "--output", "json"], &approver).await;
    assert_eq!(infra.json["items"][0]["id"], boolean.as_str(), "{}", infra.stdout);
    assert_eq!(infra.json["items"].as_array().unwrap().len(), 1);

    let shown = holdpoint(&dir.0, &["show", &approved], &approver).await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    for needle in ["Apply terraform?", "Action: shell", "terraform apply", "OPS-7", "pending", "holdpoint approve"] {
        assert!(shown.stdout.contains(needle), "{needle}: {}", shown.stdout);
    }
    let shown = holdpoint(&dir.0, &["show", &text, "--output", "json"], &approver).await;
    assert_eq!((shown.code, &shown.json["body"]), (0, &json!("Be **brief**.")));

    // Each answer is printed as a person reads it: labels, not values; a form field by field.
    let answers: [(&str, &str, Value, &str); 6] = [
        (&text, "Short and friendly", json!("Short and friendly"), "Short and friendly"),
        (&boolean, "yes", json!(true), "yes"),
        (&choice, "us", json!("us"), "US"),
        (&multi, "eu,us", json!(["eu", "us"]), "Europe, US"),
        (
            &form,
            r#"{"replicas": "3", "canary": "no"}"#,
            json!({ "replicas": 3, "canary": false }),
            "Replicas: 3; Canary first?: no",
        ),
        (&recovery, "retry", json!("retry"), "Retry"),
    ];
    for (id, value, expected, words) in answers {
        let out = holdpoint(&dir.0, &["answer", id, value, "--comment", "from the terminal"], &approver).await;
        assert_eq!(out.code, 0, "{value}: {}", out.stderr);
        assert_eq!(out.stdout.trim(), format!("Answered {id}: {words} (comment: from the terminal)"));
        let question = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{id}"), None).await;
        assert_eq!(question["status"], "answered");
        assert_eq!(question["response"]["value"], expected, "{value}");
        assert_eq!(question["response"]["comment"], "from the terminal");
    }

    let edit = r#"{"command": "terraform apply -target=module.web"}"#;
    let out = holdpoint(&dir.0, &["approve", &approved, "--edit", edit, "--output", "json"], &approver).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json["response"]["value"], true);
    assert_eq!(out.json["response"]["edited_arguments"]["command"], "terraform apply -target=module.web");
    let out = holdpoint(&dir.0, &["reject", &rejected, "--comment", "not on a Friday"], &approver).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let question = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{rejected}"), None).await;
    assert_eq!(
        (&question["response"]["value"], &question["response"]["comment"]),
        (&json!(false), &json!("not on a Friday"))
    );

    // Refusals: exit 1 with the error's code, and nothing changes.
    let again = holdpoint(&dir.0, &["answer", &text, "Long"], &approver).await;
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("conflict") && again.stderr.contains("already answered"), "{}", again.stderr);
    assert_eq!(again.stderr.trim().lines().count(), 1, "{}", again.stderr);
    let again = holdpoint(&dir.0, &["reject", &approved, "--output", "json"], &approver).await;
    assert_eq!((again.code, &again.json["error"]["code"]), (1, &json!("conflict")), "{}", again.stdout);
    assert_eq!(again.json["error"]["details"]["status"], "answered");
    let pending = ask(json!({ "title": "Still open", "response_type": "boolean" })).await;
    let viewed = holdpoint(&dir.0, &["answer", &pending, "yes"], &viewer).await;
    assert_eq!(viewed.code, 1, "{}", viewed.stderr);
    assert!(viewed.stderr.contains("forbidden"), "{}", viewed.stderr);
    let viewed = holdpoint(&dir.0, &["questions"], &viewer).await;
    assert!(viewed.code == 0 && viewed.stdout.contains("Still open"), "a viewer may look: {}", viewed.stderr);
    let missing = holdpoint(&dir.0, &["show", "01a20372-82f8-747b-8dd0-4f4b79088461"], &approver).await;
    assert!(missing.code == 1 && missing.stderr.contains("not_found"), "{}", missing.stderr);

    // Usage: exit 2, and the server is not asked.
    let usage: [(Vec<&str>, &str); 6] = [
        (vec!["answer", &pending], "VALUE"),
        (vec!["answer", "not-an-id", "yes"], "not a question id"),
        (vec!["answer", &pending, "maybe"], "expected yes, no"),
        (vec!["approve", &pending], "not an approval"),
        (vec!["approve", &pending, "--edit", "[1]"], "JSON object"),
        (vec!["questions", "--status", "open"], "invalid value"),
    ];
    for (args, needle) in usage {
        let out = holdpoint(&dir.0, &args, &approver).await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
    let question = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{pending}"), None).await;
    assert_eq!(question["status"], "pending", "no refusal changed anything");

    // An approval that needs two people: a person's approval from the terminal says how far it is.
    let password = "correct horse battery staple";
    app.add_person("pat", password, app::types::Role::Admin).await;
    let form = format!("username=pat&password={}&next=%2Finbox", password.replace(' ', "+"));
    let session = app.sign_in_with(&form).await.expect("signed in");
    let made = json!({ "name": "pat's terminal", "role": "approver" });
    let made = app.session_call(&session, axum::http::Method::POST, "/api/v1/tokens", Some(made)).await;
    let pats = remote(&server, made.json["secret"].as_str().expect("a token of pat's"));
    let mut body = approval("Rotate the root key?");
    body["required_approvals"] = json!(2);
    body["allow_edit"] = json!(false);
    let quorum = ask(body).await;
    let out = holdpoint(&dir.0, &["approve", &quorum], &pats).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), format!("Approved {quorum}: approval recorded, 1 of 2; still pending"));
}

/// `holdpoint answer` on rich fields (docs/api.md): a form field by field (`--field`, each read by its type), a file
/// uploaded first (`--file`) and a table row by row (`--row`), against a running server; the server judges what the
/// values are, the command line only what it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_answer_rich_fields_with_field_file_and_row() {
    let app = TestApp::start_with(Backend::Sqlite, |c| c.run_workers = false).await.unwrap();
    let server = app.spawn_process().await;
    let dir = WorkDir::new();
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let approver = remote(&server, &app.create_token("default", app::types::Role::Approver).await);
    let ask = async |body: Value| -> String {
        let question = api(&server, &agent, reqwest::Method::POST, "/questions", Some(body)).await;
        question["id"].as_str().unwrap().to_owned()
    };
    let form = ask(json!({ "title": "Size the cluster", "response_type": "form", "fields": [
        { "key": "nodes", "label": "Nodes", "response_type": "integer", "required": true, "min": 1, "max": 9 },
        { "key": "start", "label": "Start", "response_type": "date", "required": true },
        { "key": "canary", "label": "Canary?", "response_type": "boolean" },
        { "key": "plan", "label": "Plan", "response_type": "file", "accept": ["application/pdf"] },
        { "key": "disks", "label": "Disks", "response_type": "table", "max_rows": 3,
          "columns": [{ "key": "size", "label": "Size", "response_type": "integer", "required": true },
                      { "key": "ssd", "label": "SSD?", "response_type": "boolean" }] }] }))
    .await;
    std::fs::write(dir.path("plan.pdf"), b"%PDF-1.7 the plan").unwrap();

    let shown = holdpoint(&dir.0, &["show", &form], &approver).await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    for needle in [
        "nodes (integer, required): Nodes — a whole number from 1 to 9",
        "column size (integer, required): Size",
        "--field KEY=VALUE",
    ] {
        assert!(shown.stdout.contains(needle), "{needle}: {}", shown.stdout);
    }

    // Usage: exit 2, nothing is uploaded or answered.
    let usage: [(Vec<&str>, &str); 5] = [
        (vec!["--field", "replicas=3"], "no field \"replicas\""),
        (vec!["--field", "nodes=three"], "field nodes is a number"),
        (vec!["--field", "plan=plan.pdf"], "--file plan=@PATH"),
        (vec!["--row", "disks", "weight=1"], "no column \"weight\""),
        (vec!["--file", "nodes=@plan.pdf"], "not a file field"),
    ];
    for (extra, needle) in usage {
        let out = holdpoint(&dir.0, &[&["answer", form.as_str()][..], &extra[..]].concat(), &approver).await;
        assert_eq!(out.code, 2, "{extra:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{extra:?}: {}", out.stderr);
    }
    let missing = holdpoint(&dir.0, &["answer", &form, "--file", "plan=@nowhere.pdf"], &approver).await;
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(missing.stderr.contains("nowhere.pdf"), "{}", missing.stderr);

    // What the server refuses: exit 1, naming the field.
    let refused =
        holdpoint(&dir.0, &["answer", &form, "--field", "nodes=12", "--field", "start=1 March"], &approver).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("value.nodes") && refused.stderr.contains("value.start"), "{}", refused.stderr);

    let answer = [
        "answer",
        &form,
        "--field",
        "nodes=3",
        "--field",
        "start=2026-03-01",
        "--field",
        "canary=no",
        "--file",
        "plan=@plan.pdf",
        "--row",
        "disks",
        "size=100,ssd=yes",
        "--row",
        r#"disks={"size": 200}"#,
        "--comment",
        "from the terminal",
        "--output",
        "json",
    ];
    let out = holdpoint(&dir.0, &answer, &approver).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let value = &out.json["response"]["value"];
    assert_eq!(
        (&value["nodes"], &value["start"], &value["canary"], &value["disks"]),
        (&json!(3), &json!("2026-03-01"), &json!(false), &json!([{ "size": 100, "ssd": true }, { "size": 200 }])),
        "{}",
        out.stdout
    );
    let plan = &value["plan"];
    assert_eq!(
        (&plan["name"], &plan["media_type"], &plan["size"]),
        (&json!("plan.pdf"), &json!("application/pdf"), &json!(17))
    );
    let file_id = plan["file_id"].as_str().unwrap();
    let downloaded = reqwest::Client::new()
        .get(format!("{}/api/v1/files/{file_id}", server.base_url))
        .bearer_auth(&agent)
        .send()
        .await
        .unwrap();
    assert_eq!(downloaded.status(), 200, "the agent that asked reads the file");
    assert_eq!(downloaded.bytes().await.unwrap().as_ref(), b"%PDF-1.7 the plan");

    // A question that is itself a table, row by row.
    let table = ask(json!({ "title": "Parts?", "response_type": "table",
        "columns": [{ "key": "item", "label": "Item", "response_type": "text", "required": true },
                    { "key": "qty", "label": "Qty", "response_type": "number" }] }))
    .await;
    let out =
        holdpoint(&dir.0, &["answer", &table, "--row", "item=disk,qty=2.5", "--row", "item=cpu"], &approver).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let question = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{table}"), None).await;
    assert_eq!(question["response"]["value"], json!([{ "item": "disk", "qty": 2.5 }, { "item": "cpu" }]));
}

/// A script asks for a file and waits; a person answers it from a terminal with `--file @PATH`; the script's
/// `--save` writes the file the person sent, and `--output text` prints where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_asks_for_a_file_a_person_sends_it_and_the_script_saves_it() {
    let (app, server, env) = agent_against_a_server().await;
    let person = remote(&server, &app.create_token("default", app::types::Role::Responder).await);
    let dir = WorkDir::new();
    let gate =
        ["ask", "The signed contract?", "--type", "file", "--accept", "application/pdf", "--save", "contract.pdf"];
    let paused = holdpoint(&dir.0, &[&gate[..], &["--no-wait"]].concat(), &env).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let id = paused.json["question_ids"][0].as_str().unwrap().to_owned();
    let question = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{id}"), None).await;
    assert_eq!((&question["response_type"], &question["accept"]), (&json!("file"), &json!(["application/pdf"])));
    let wrong = holdpoint(&dir.0, &["ask", "Name?", "--save", "name.txt"], &env).await;
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    assert!(wrong.stderr.contains("--type file"), "{}", wrong.stderr);

    let signed = b"%PDF-1.7 signed by both parties";
    std::fs::write(dir.path("signed.pdf"), signed).unwrap();
    let shown = holdpoint(&dir.0, &["show", &id], &person).await;
    assert!(shown.stdout.contains("--file @PATH"), "{}", shown.stdout);
    let as_value = holdpoint(&dir.0, &["answer", &id, "signed.pdf"], &person).await;
    assert_eq!(as_value.code, 2, "{}", as_value.stderr);
    assert!(as_value.stderr.contains("--file @PATH"), "{}", as_value.stderr);
    let sent = holdpoint(&dir.0, &["answer", &id, "--file", "@signed.pdf"], &person).await;
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    assert_eq!(sent.stdout.trim(), format!("Answered {id}: signed.pdf (31 bytes)"), "the file, not its record");

    let saved = holdpoint(&dir.0, &[&gate[..], &["--output", "text"]].concat(), &env).await;
    assert_eq!(saved.code, 0, "{}", saved.stderr);
    assert_eq!(saved.stdout.trim(), "contract.pdf");
    assert_eq!(std::fs::read(dir.path("contract.pdf")).unwrap(), signed);
    assert!(!dir.path("contract.pdf.part").exists());
}

/// With the embedded engine, what a script asks (as the engine's `cli` token) the person at the terminal answers
/// as themselves: separation of duties lets them approve it, and the answer names them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_answer_what_scripts_ask_with_the_embedded_engine() {
    let dir = WorkDir::new();
    let person = [("USER", "alice".to_owned())];
    let gate = ["ask", "Deploy to prod?", "--type", "approval"];
    let paused = holdpoint(&dir.0, &[&gate[..], &["--no-wait"]].concat(), &[]).await;
    assert_eq!(paused.code, 10, "{}", paused.stderr);
    let id = paused.json["question_ids"][0].as_str().unwrap().to_owned();

    let listed = holdpoint(&dir.0, &["questions"], &person).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains(&id) && listed.stdout.contains("Deploy to prod?"), "{}", listed.stdout);
    let approved = holdpoint(&dir.0, &["approve", &id, "--comment", "go"], &person).await;
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let gated = holdpoint(&dir.0, &gate, &[]).await;
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    assert_eq!((&gated.json["answered_by"], &gated.json["response"]["comment"]), (&json!("alice"), &json!("go")));

    let tone = ["ask", "Release notes tone?", "--output", "text"];
    let paused = holdpoint(&dir.0, &[&tone[..], &["--no-wait"]].concat(), &[]).await;
    let id = paused.json["question_ids"][0].as_str().unwrap().to_owned();
    let answered = holdpoint(&dir.0, &["answer", &id, "brief"], &person).await;
    assert_eq!(answered.code, 0, "{}", answered.stderr);
    let again = holdpoint(&dir.0, &["answer", &id, "long", "--output", "json"], &person).await;
    assert_eq!((again.code, &again.json["error"]["code"]), (1, &json!("conflict")), "{}", again.stdout);
    let asked = holdpoint(&dir.0, &tone, &[]).await;
    assert_eq!((asked.code, asked.stdout.as_str()), (0, "brief\n"), "--output text prints the value: {}", asked.stderr);
}

#[tokio::test]
async fn completions_are_generated_for_bash_zsh_and_fish() {
    let dir = WorkDir::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = holdpoint(&dir.0, &["completions", shell], &[]).await;
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        for command in ["questions", "answer", "approve", "reject", "resume", "completions"] {
            assert!(out.stdout.contains(command), "{shell} completes {command}");
        }
        if shell == "bash" {
            let script = dir.path("holdpoint.bash");
            std::fs::write(&script, &out.stdout).unwrap();
            let checked = std::process::Command::new("bash").arg("-n").arg(&script).status().unwrap();
            assert!(checked.success(), "the bash completion parses");
        }
    }
    let out = holdpoint(&dir.0, &["completions", "tcsh"], &[]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
}

/// `--output json` keeps stdout one JSON document, errors included; `--type` takes the API's names and hyphens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_covers_errors_and_types_take_both_spellings() {
    let app = TestApp::start_with(Backend::Sqlite, |c| c.run_workers = false).await.unwrap();
    let server = app.spawn_process().await;
    let dir = WorkDir::new();
    let env = remote(&server, &app.token);
    let out = holdpoint(&dir.0, &["run", "task", "--agent", "nobody", "--output", "json"], &env).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.json["outcome"], "error", "{}", out.stdout);
    assert!(out.json["error"]["message"].as_str().unwrap().contains("no agent named"), "{}", out.stdout);
    let out = holdpoint(&dir.0, &["run", "task", "--agent", "nobody"], &env).await;
    assert_eq!((out.code, out.stdout.as_str()), (1, ""), "text output keeps stdout empty");
    let out = holdpoint(&dir.0, &["resume", "01a20372-82f8-747b-8dd0-4f4b79088461", "--output", "json"], &env).await;
    assert_eq!((out.code, &out.json["error"]["code"]), (1, &json!("not_found")), "{}", out.stdout);

    for spelling in ["multi_choice", "multi-choice"] {
        let args = ["ask", "Regions?", "--type", spelling, "--option", "eu=EU", "--option", "us=US", "--no-wait"];
        let out = holdpoint(&dir.0, &[&args[..], &["--output", "json"]].concat(), &env).await;
        assert_eq!(out.code, 10, "{spelling}: {}", out.stderr);
        let id = out.json["question_ids"][0].as_str().unwrap();
        let question = api(&server, &app.token, reqwest::Method::GET, &format!("/questions/{id}"), None).await;
        assert_eq!(question["response_type"], "multi_choice");
    }
    let out = holdpoint(&dir.0, &["ask", "Oops", "--type", "error-recovery", "--no-wait"], &env).await;
    assert_eq!(out.code, 10, "{}", out.stderr);
}

/// The configuration file: every setting a flag takes can be a key (`holdpoint config check` shows where each came
/// from), the environment wins over it, secrets never show, and a wrong key or value is named.
#[tokio::test]
async fn config_check_takes_the_file_lets_the_environment_win_and_hides_secrets() {
    let dir = WorkDir::new();
    let file = dir.path("holdpoint.toml");
    std::fs::write(
        &file,
        r#"
addr = "127.0.0.1:4100"
data_dir = "/srv/holdpoint"
bootstrap_token = "hp_0123456789abcdef0123456789abcdef01234567"
http_allowed_hosts = ["api.example.com", "b.example.com"]
min_timeout_seconds = 60

[smtp]
url = "smtp://mailer:hunter2@127.0.0.1:2525"

[email]
from = "Holdpoint <hp@example.com>"

[[gateway.upstreams]]
name = "files"
command = "mcp-files"
args = ["--root", "/srv"]
env = { FILES_TOKEN = "tok-secret-99" }
"#,
    )
    .unwrap();
    let environment = [("HOLDPOINT_ADDR", "127.0.0.1:4200".to_owned())];
    let out = holdpoint(&dir.0, &["config", "check", "--config", "holdpoint.toml"], &environment).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in [
        "addr = \"127.0.0.1:4200\"  # environment (HOLDPOINT_ADDR)",
        "data_dir = \"/srv/holdpoint\"  # file",
        "min_timeout_seconds = 60  # file",
        "http_allowed_hosts = \"api.example.com,b.example.com\"  # file",
        "bootstrap_token = \"[redacted]\"  # file",
        "smtp_url = \"[redacted]\"  # file",
        "email_from = \"Holdpoint <hp@example.com>\"  # file",
        "max_timeout_seconds = 86400  # default",
    ] {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} missing from:\n{}", out.stdout);
    }
    assert!(!out.stdout.contains("hunter2") && !out.stdout.contains("0123456789abcdef"), "{}", out.stdout);
    // The gateway's upstreams started as processes: the file's only, shown without their variables' values.
    for line in ["[[gateway.upstreams]]  # file", "name = \"files\"", "args = [\"--root\", \"/srv\"]"] {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} missing from:\n{}", out.stdout);
    }
    assert!(out.stdout.contains("FILES_TOKEN") && !out.stdout.contains("tok-secret-99"), "{}", out.stdout);

    // The same file through HOLDPOINT_CONFIG, and a flag over both.
    let environment = [("HOLDPOINT_CONFIG", file.display().to_string())];
    let out = holdpoint(&dir.0, &["config", "check", "--data-dir", "/tmp/elsewhere"], &environment).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("data_dir = \"/tmp/elsewhere\"  # command line"), "{}", out.stdout);
    assert!(out.stdout.contains("addr = \"127.0.0.1:4100\"  # file"), "{}", out.stdout);

    for (text, named) in [
        ("adr = \"127.0.0.1:1\"\n", "no setting `adr` (did you mean `addr`?)"),
        ("min_timeout_seconds = \"soon\"\n", "`min_timeout_seconds`: invalid value 'soon'"),
        ("secure_cookies = \"maybe\"\n", "`secure_cookies`: expected true or false"),
        ("[smtp]\nurl = \"smtp://127.0.0.1:2525\"\n", "HOLDPOINT_EMAIL_FROM"),
        ("addr = \n", "is not valid TOML"),
        ("[[gateway.upstreams]]\nname = \"Files\"\ncommand = \"x\"\n", "`gateway.upstreams[0].name`"),
        ("[[gateway.upstreams]]\nname = \"files\"\n", "`gateway.upstreams[0]`: missing field `command`"),
    ] {
        std::fs::write(dir.path("wrong.toml"), text).unwrap();
        let out = holdpoint(&dir.0, &["config", "check", "--config", "wrong.toml"], &[]).await;
        assert_eq!(out.code, 2, "{text}: {}", out.stderr);
        assert!(out.stderr.contains(named), "{text}: {named:?} not in {}", out.stderr);
    }
    let out = holdpoint(&dir.0, &["config", "check", "--config", "missing.toml"], &[]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("cannot read the configuration file missing.toml"), "{}", out.stderr);
    // Asking for the version or the help needs no settings: a wrong file does not stand in the way.
    let missing = [("HOLDPOINT_CONFIG", "missing.toml".to_owned())];
    for asked in [&["--version"][..], &["--help"][..], &["serve", "--help"][..]] {
        let out = holdpoint(&dir.0, asked, &missing).await;
        assert_eq!(out.code, 0, "{asked:?}: {}", out.stderr);
        assert!(!out.stdout.is_empty(), "{asked:?}");
    }
}

/// An administrative command says which database it opens and makes none where there is none, unless asked: run
/// from another directory it would otherwise print a token of a new, empty database that no server knows.
#[tokio::test]
async fn admin_commands_name_their_database_and_create_none_unasked() {
    let dir = WorkDir::new();
    let data = dir.path("data");
    std::fs::write(dir.path("holdpoint.toml"), format!("data_dir = {:?}\n", data.display().to_string())).unwrap();
    let environment = [("HOLDPOINT_CONFIG", dir.path("holdpoint.toml").display().to_string())];
    let create = ["token", "create", "--role", "agent", "--name", "ci"];
    let out = holdpoint(&dir.0, &create, &environment).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let database = data.join("holdpoint.db");
    assert!(out.stderr.contains(&format!("there is no database at {}", database.display())), "{}", out.stderr);
    assert!(!database.exists() && out.stdout.is_empty(), "nothing made, no token printed");
    let out = holdpoint(&dir.0, &[&create[..], &["--create-database"]].concat(), &environment).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&format!("using the database {}", database.display())), "{}", out.stderr);
    assert!(out.stdout.trim().starts_with("hp_"), "{}", out.stdout);
    let out = holdpoint(&dir.0, &["audit", "verify"], &environment).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&format!("using the database {}", database.display())), "{}", out.stderr);
    // A token's name is held to what the API holds it to.
    for name in ["  ", &"n".repeat(101), "two\nlines"] {
        let out = holdpoint(&dir.0, &["token", "create", "--role", "agent", "--name", name], &environment).await;
        assert_eq!(out.code, 1, "{name:?}: {}", out.stderr);
        assert!(out.stderr.contains("--name") && out.stdout.is_empty(), "{name:?}: {}", out.stderr);
    }

    // PostgreSQL: a database without Holdpoint's tables is refused as a missing file is, and gets none.
    let Some((url, _cleanup)) = common::fresh_database(Backend::Postgres).await else { return };
    let environment = [("DATABASE_URL", url.clone())];
    let out = holdpoint(&dir.0, &create, &environment).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("holds no Holdpoint schema") && out.stdout.is_empty(), "{}", out.stderr);
    let out = holdpoint(&dir.0, &["audit", "verify"], &environment).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let out = holdpoint(&dir.0, &[&create[..], &["--create-database"]].concat(), &environment).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.trim().starts_with("hp_"), "{}", out.stdout);
    let out = holdpoint(&dir.0, &["audit", "verify"], &environment).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// A database a newer version migrated is named as such at start, not with the migrator's own words.
#[tokio::test]
async fn a_database_from_a_newer_version_is_refused_with_what_to_do() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    {
        use sqlx::Connection;
        let mut db = sqlx::SqliteConnection::connect(&app.database_url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (99990101000000, 'from the future', TRUE, X'00', 0)",
        )
        .execute(&mut db)
        .await
        .unwrap();
    }
    let config = holdpoint::config::ServeConfig::for_tests(app.database_url.clone());
    let err = holdpoint::server::build_state(config).await.err().expect("the newer database is refused");
    let message = err.to_string();
    assert!(message.contains("newer version of Holdpoint") && message.contains("99990101000000"), "{message}");
}

/// `holdpoint backup` copies the live database while answers are being written: the copy, restored into an empty
/// data directory and served, holds every answer acknowledged before the backup began, and its audit chain is
/// whole.
#[tokio::test]
async fn a_backup_taken_while_answers_are_written_holds_every_acknowledged_answer() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let server = app.spawn_process().await;
    let responder = app.create_token("default", app::types::Role::Responder).await;
    let mut ids = Vec::new();
    for i in 0..100 {
        let asked =
            api(&server, &app.token, reqwest::Method::POST, "/questions", Some(json!({"title": format!("Q{i}")})))
                .await;
        ids.push(asked["id"].as_str().unwrap().to_owned());
    }
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, std::time::Instant)>::new()));
    let queue = std::sync::Arc::new(std::sync::Mutex::new(ids.clone()));
    let mut answering = Vec::new();
    for _ in 0..4 {
        let (queue, acknowledged, base, token) =
            (queue.clone(), acknowledged.clone(), server.base_url.clone(), responder.clone());
        answering.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                let Some(id) = queue.lock().unwrap().pop() else { break };
                let answered = client
                    .post(format!("{base}/api/v1/questions/{id}/answer"))
                    .bearer_auth(&token)
                    .json(&json!({"value": "go ahead"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answered.status(), reqwest::StatusCode::OK);
                acknowledged.lock().unwrap().push((id, std::time::Instant::now()));
            }
        }));
    }
    while acknowledged.lock().unwrap().len() < 20 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let dir = WorkDir::new();
    let backup_file = dir.path("holdpoint-backup.db");
    let began = std::time::Instant::now();
    let out = backup(&dir, &backup_file, &app.database_url).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("Backed up 100 questions"), "{}", out.stderr);
    for task in answering {
        task.await.unwrap();
    }
    let before: Vec<String> =
        acknowledged.lock().unwrap().iter().filter(|(_, at)| *at < began).map(|(id, _)| id.clone()).collect();
    assert!(before.len() >= 20, "answers were acknowledged before the backup began");

    let out = backup(&dir, &backup_file, &app.database_url).await;
    assert_eq!(out.code, 1, "a backup never overwrites: {}", out.stderr);

    let restored = dir.path("restored");
    let restore = ["restore", &backup_file.display().to_string(), "--data-dir", &restored.display().to_string()];
    let out = holdpoint(&dir.0, &restore, &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = holdpoint(&dir.0, &restore, &[]).await;
    assert_eq!(out.code, 1, "a restore never replaces a database: {}", out.stderr);
    assert!(out.stderr.contains("restore only into an empty data directory"), "{}", out.stderr);

    let restored_url = format!("sqlite://{}", restored.join("holdpoint.db").display());
    let out = holdpoint(&dir.0, &["audit", "verify", "--database-url", &restored_url], &[]).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let copy = ServerProcess::spawn(&restored_url, &[]).await;
    for id in &before {
        let question = api(&copy, &app.token, reqwest::Method::GET, &format!("/questions/{id}"), None).await;
        assert_eq!(question["status"], "answered", "{question}");
        assert_eq!(question["response"]["value"], "go ahead", "{question}");
    }
}

/// A backup holds the webhooks' secrets, so only its owner may read it; it names what the data directory holds
/// beside the database. A restore, run as root into a directory another user owns (the service's state directory),
/// leaves a database that user owns, so the service can open it; both say which database they used.
#[tokio::test]
async fn backups_are_private_and_restores_belong_to_the_data_directorys_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let dir = WorkDir::new();
    let backup_file = dir.path("copy.db");
    let out = backup(&dir, &backup_file, &app.database_url).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("holdpoint: using the database /"), "{}", out.stderr);
    assert_eq!(std::fs::metadata(&backup_file).unwrap().mode() & 0o777, 0o600);
    assert!(!out.stderr.contains("Not in the backup"), "{}", out.stderr);

    let data = dir.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let root = runs_as_root();
    if root {
        // nobody:nogroup, as the service's user would own its state directory.
        std::os::unix::fs::chown(&data, Some(65534), Some(65534)).unwrap();
    }
    let data_dir = data.display().to_string();
    let out = holdpoint(&dir.0, &["restore", &backup_file.display().to_string(), "--data-dir", &data_dir], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let database = data.join("holdpoint.db");
    assert!(out.stderr.contains(&format!("using the database {}", database.display())), "{}", out.stderr);
    let (restored, owner) = (std::fs::metadata(&database).unwrap(), std::fs::metadata(&data).unwrap());
    assert_eq!((restored.uid(), restored.gid()), (owner.uid(), owner.gid()), "the data directory's owner owns it");
    assert_eq!(restored.permissions().mode() & 0o777, 0o600);
    assert!(!root || restored.uid() == 65534, "the test ran as root, so the owner changed");

    std::fs::create_dir_all(data.join("files/0192f0c4-0000-7000-8000-000000000000")).unwrap();
    std::fs::write(data.join("files/0192f0c4-0000-7000-8000-000000000000/upload"), b"x").unwrap();
    std::fs::create_dir_all(data.join("scripts")).unwrap();
    let second = dir.path("second.db").display().to_string();
    let out = holdpoint(&dir.0, &["backup", "--to", &second, "--data-dir", &data_dir], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&format!("Not in the backup: {}", data.join("files").display())), "{}", out.stderr);
    assert!(!out.stderr.contains("scripts"), "an empty directory is nothing to copy: {}", out.stderr);
}

fn runs_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // A file this process creates is owned by its effective user.
    let probe = std::env::temp_dir().join(format!("holdpoint-uid-{}", uuid::Uuid::now_v7()));
    std::fs::write(&probe, b"").unwrap();
    let uid = std::fs::metadata(&probe).unwrap().uid();
    let _ = std::fs::remove_file(&probe);
    uid == 0
}

/// `holdpoint backup --to FILE` of the database at `url`, run in `dir`.
async fn backup(dir: &WorkDir, file: &Path, url: &str) -> Output {
    holdpoint(&dir.0, &["backup", "--to", &file.display().to_string(), "--database-url", url], &[]).await
}

/// PostgreSQL is backed up with its own tools; the command says so instead of doing something else.
#[tokio::test]
async fn a_backup_of_postgresql_points_at_pg_dump() {
    let dir = WorkDir::new();
    let args = ["backup", "--to", "x.db", "--database-url", "postgres://postgres@127.0.0.1:9/none"];
    let out = holdpoint(&dir.0, &args, &[]).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("pg_dump"), "{}", out.stderr);
    assert!(!dir.path("x.db").exists());
}
