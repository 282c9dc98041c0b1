//! The audit log (issue 7): every decision writes exactly its entry with the right kind of actor, in a hash chain
//! per workspace that `holdpoint audit verify` checks (and that fails, naming the entry, once a row is edited or
//! removed in the database); the admin-only API pages, filters and exports it.

use crate::common;

use std::time::Duration;

use app::types::Role;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{Backend, Scripts, TestApp, assert_error};
use serde_json::{Value, json};

backend_tests!(
    every_question_decision_writes_exactly_its_entry,
    a_browser_session_answers_as_a_human_and_signs_in_and_out_on_the_record,
    an_edited_approval_keeps_the_original_the_edit_and_their_diff,
    the_chain_verifies_and_an_edited_row_is_named,
    entries_with_text_beyond_ascii_hash_as_the_server_computes,
    a_removed_row_is_named_as_the_gap_it_leaves,
    concurrent_answers_on_two_instances_never_fork_the_chain,
    the_api_filters_pages_and_is_for_admins_of_the_workspace_only,
    exports_stream_the_selection_as_jsonl_and_csv,
    the_verify_command_passes_then_fails_after_a_row_is_edited,
);

/// Every entry of the `default` workspace after `after_seq`, oldest first.
async fn entries_after(app: &TestApp, after_seq: i64) -> Vec<Value> {
    let page = app.get("/api/v1/audit?limit=200").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let mut items: Vec<Value> = page.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["seq"].as_i64().unwrap() > after_seq)
        .cloned()
        .collect();
    items.reverse();
    items
}

/// The entries appended since the last call, which must be exactly one; moves `seq` on.
async fn only_new_entry(app: &TestApp, seq: &mut i64) -> Value {
    let new = entries_after(app, *seq).await;
    assert_eq!(new.len(), 1, "expected exactly one new entry, got {new:#?}");
    *seq = new[0]["seq"].as_i64().unwrap();
    new[0].clone()
}

async fn ask(app: &TestApp, body: Value) -> String {
    let created = app.post("/api/v1/questions", body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.json["id"].as_str().unwrap().to_owned()
}

async fn wait_until_resolved(app: &TestApp, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        if question["status"] != "pending" {
            return question;
        }
        assert!(tokio::time::Instant::now() < deadline, "the question was never resolved: {question}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn every_question_decision_writes_exactly_its_entry(app: TestApp) {
    let first = entries_after(&app, 0).await;
    assert_eq!(first.len(), 1, "the harness's admin token: {first:#?}");
    assert_eq!(first[0]["action"], "token.created");
    assert_eq!(first[0]["actor_kind"], "policy");
    assert_eq!(first[0]["after"], json!({"name": "admin of default", "role": "admin"}));
    assert_eq!(first[0]["seq"], 1);
    let mut seq = 1;

    // An answer with a bearer token.
    let id = ask(&app, json!({"title": "Ship it?", "response_type": "boolean"})).await;
    assert!(entries_after(&app, seq).await.is_empty(), "asking is not a decision");
    app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": true, "comment": "yes"})).await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(entry["action"], "question.answered");
    assert_eq!(entry["actor_kind"], "token");
    assert_eq!(entry["actor"], "admin of default");
    assert!(entry["actor_id"].is_string());
    assert_eq!((entry["subject_type"].as_str(), entry["subject_id"].as_str()), (Some("question"), Some(id.as_str())));
    assert_eq!(entry["before"]["status"], "pending");
    assert_eq!(entry["before"]["title"], "Ship it?");
    assert_eq!(entry["after"], json!({"status": "answered", "resolution": "human", "value": true, "comment": "yes"}));
    assert_eq!(entry["diff"], Value::Null);

    // A refused answer (409) and an invalid one (422) change nothing and record nothing.
    app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": false})).await;
    let other = ask(&app, json!({"title": "Which?", "response_type": "boolean"})).await;
    app.post(&format!("/api/v1/questions/{other}/answer"), json!({"value": "maybe"})).await;
    assert!(entries_after(&app, seq).await.is_empty());

    // A batch: one entry per item answered, none for the others.
    let batch = app
        .post(
            "/api/v1/questions/answer-batch",
            json!({"items": [{"id": other, "value": false}, {"id": id, "value": true}]}),
        )
        .await;
    assert_eq!(batch.status, StatusCode::OK, "{}", batch.text);
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(
        (entry["action"].as_str(), entry["subject_id"].as_str()),
        (Some("question.answered"), Some(other.as_str()))
    );

    // Cancelled by a caller.
    let cancelled = ask(&app, json!({"title": "Still needed?"})).await;
    app.post(&format!("/api/v1/questions/{cancelled}/cancel"), json!({"reason": "obsolete"})).await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(entry["action"], "question.cancelled");
    assert_eq!(entry["actor_kind"], "token");
    assert_eq!(entry["after"]["comment"], "obsolete");

    // Superseded by a newer blocking question of the same run: the run lifecycle's doing.
    // A run a client executes stays queued: nothing but the questions below happens to it.
    let agent = app.post("/api/v1/agents", json!({"name": "superseding", "model": "openai:test-model"})).await;
    let start = json!({"agent_id": agent.json["id"], "input": "go", "executor": "client"});
    let run_id = app.post("/api/v1/runs", start).await.json["id"].as_str().unwrap().to_owned();
    if let Some(last) = entries_after(&app, seq).await.last() {
        seq = last["seq"].as_i64().unwrap();
    }
    let older = ask(&app, json!({"title": "First?", "run_id": run_id})).await;
    ask(&app, json!({"title": "Second?", "run_id": run_id})).await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(
        (entry["action"].as_str(), entry["subject_id"].as_str()),
        (Some("question.cancelled"), Some(older.as_str()))
    );
    assert_eq!((entry["actor_kind"].as_str(), entry["actor"].as_str()), (Some("policy"), Some("run lifecycle")));

    // Deadlines: defaulted and expired, by the timeout.
    let defaulted = ask(
        &app,
        json!({"title": "Proceed?", "response_type": "boolean", "timeout_seconds": 1, "kind": "non_blocking",
            "default_response": {"value": false}}),
    )
    .await;
    wait_until_resolved(&app, &defaulted).await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(entry["action"], "question.defaulted");
    assert_eq!((entry["actor_kind"].as_str(), entry["actor"].as_str()), (Some("timeout"), Some("deadline")));
    assert_eq!(entry["after"]["resolution"], "default_on_timeout");
    let expired = ask(&app, json!({"title": "Anyone?", "timeout_seconds": 1, "kind": "non_blocking"})).await;
    wait_until_resolved(&app, &expired).await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!((entry["action"].as_str(), entry["actor_kind"].as_str()), (Some("question.expired"), Some("timeout")));
    assert_eq!(entry["after"]["status"], "expired");

    assert!(holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().is_ok());
}

fn session_cookie(response: &common::TestResponse) -> String {
    let set_cookie = response.headers.get(header::SET_COOKIE).expect("a session cookie").to_str().unwrap();
    set_cookie.split(';').next().unwrap().to_owned()
}

/// Signs in with `token`; returns the session cookie and its CSRF token (read from a rendered page).
async fn sign_in(app: &TestApp, token: &str) -> (String, String) {
    let request = Request::post("/auth/signin")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={token}&next=%2Finbox")))
        .unwrap();
    let cookie = session_cookie(&app.send(request).await);
    let inbox = app.send(Request::get("/inbox").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    let csrf = inbox.text.split("name=\"csrf\" value=\"").nth(1).and_then(|r| r.split('"').next()).unwrap().to_owned();
    (cookie, csrf)
}

async fn a_browser_session_answers_as_a_human_and_signs_in_and_out_on_the_record(app: TestApp) {
    let approver = app.create_token("default", Role::Approver).await;
    let mut seq = entries_after(&app, 0).await.last().unwrap()["seq"].as_i64().unwrap();
    let (cookie, csrf) = sign_in(&app, &approver).await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!((entry["action"].as_str(), entry["actor_kind"].as_str()), (Some("signin"), Some("human")));
    assert_eq!(entry["actor"], "approver of default");
    assert_eq!(entry["after"]["role"], "approver");

    let id = ask(&app, json!({"title": "Which region?"})).await;
    let answer = Request::post(format!("/api/v1/questions/{id}/answer"))
        .header(header::COOKIE, &cookie)
        .header("x-csrf-token", &csrf)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"value": "eu-west-1"}).to_string()))
        .unwrap();
    assert_eq!(app.send(answer).await.status, StatusCode::OK);
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!((entry["action"].as_str(), entry["actor_kind"].as_str()), (Some("question.answered"), Some("human")));
    assert_eq!(entry["actor"], "approver of default");

    let signout = Request::post("/auth/signout")
        .header(header::COOKIE, &cookie)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("csrf={csrf}")))
        .unwrap();
    assert_eq!(app.send(signout).await.status, StatusCode::SEE_OTHER);
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!((entry["action"].as_str(), entry["actor_kind"].as_str()), (Some("signout"), Some("human")));

    // A wrong token names no workspace: nothing is recorded in this one.
    let refused = Request::post("/auth/signin")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("token=hp_wrong"))
        .unwrap();
    assert_eq!(app.send(refused).await.status, StatusCode::SEE_OTHER);
    assert!(entries_after(&app, seq).await.is_empty());
}

async fn an_edited_approval_keeps_the_original_the_edit_and_their_diff(app: TestApp) {
    let original = json!({"command": "terraform apply -auto-approve", "cwd": "/srv/infra"});
    let edited = json!({"command": "terraform plan", "cwd": "/srv/infra", "timeout_seconds": 60});
    // Asked by an agent: whoever asks for an approval may not approve it (separation of duties).
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let asked = app
        .call(
            axum::http::Method::POST,
            "/api/v1/questions",
            Some(&agent),
            Some(json!({"title": "Apply?", "kind": "approval", "allow_edit": true,
                "action": {"tool_name": "shell", "arguments": original}})),
        )
        .await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    let id = asked.json["id"].as_str().unwrap().to_owned();
    let answered = app
        .post(
            &format!("/api/v1/questions/{id}/answer"),
            json!({"value": true, "comment": "plan first", "edited_arguments": edited}),
        )
        .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    let entries = app.get(&format!("/api/v1/audit?subject_id={id}")).await.json;
    let entry = &entries["items"][0];
    assert_eq!(entries["items"].as_array().unwrap().len(), 1);
    assert_eq!(entry["before"]["action"], json!({"tool_name": "shell", "arguments": original}));
    assert_eq!(entry["after"]["edited_arguments"], edited);
    assert_eq!(entry["after"]["value"], true);
    assert_eq!(
        entry["diff"],
        json!([
            {"op": "replace", "path": "/command", "value": "terraform plan"},
            {"op": "add", "path": "/timeout_seconds", "value": 60},
        ])
    );
}

/// A connection of the test's own to its database, for what an attacker with database access would do.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    async fn open(app: &TestApp) -> Raw {
        if app.database_url.starts_with("sqlite") {
            Raw::Sqlite(sqlx::SqlitePool::connect(&app.database_url).await.unwrap())
        } else {
            Raw::Postgres(sqlx::PgPool::connect(&app.database_url).await.unwrap())
        }
    }

    /// Runs `sql` after dropping the triggers that keep `audit_log` append-only (as someone bent on it would).
    async fn tamper(&self, sql: &str) {
        match self {
            Raw::Sqlite(pool) => {
                sqlx::query("DROP TRIGGER IF EXISTS audit_log_no_update").execute(pool).await.unwrap();
                sqlx::query("DROP TRIGGER IF EXISTS audit_log_no_delete").execute(pool).await.unwrap();
                sqlx::query(sql).execute(pool).await.unwrap();
            }
            Raw::Postgres(pool) => {
                sqlx::query("DROP TRIGGER IF EXISTS audit_log_no_change ON audit_log").execute(pool).await.unwrap();
                sqlx::query(sql).execute(pool).await.unwrap();
            }
        }
    }

    /// Runs `sql` with the triggers in place; returns the database's refusal.
    async fn try_execute(&self, sql: &str) -> Result<(), sqlx::Error> {
        match self {
            Raw::Sqlite(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
            Raw::Postgres(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
        }
    }
}

/// Four answered questions after the harness's token: entries 1..=5 in `default`.
async fn five_entries(app: &TestApp) {
    for n in 0..4 {
        let id = ask(app, json!({"title": format!("Question {n}"), "response_type": "boolean"})).await;
        let answered = app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": n % 2 == 0})).await;
        assert_eq!(answered.status, StatusCode::OK);
    }
    assert_eq!(entries_after(app, 0).await.len(), 5);
}

const DEFAULT_WS: &str = "(SELECT id FROM workspaces WHERE name = 'default')";

async fn the_chain_verifies_and_an_edited_row_is_named(app: TestApp) {
    five_entries(&app).await;
    app.create_token("other", Role::Admin).await;
    let verified = holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().expect("an intact log verifies");
    assert_eq!((verified.entries, verified.workspaces), (6, 2));

    let raw = Raw::open(&app).await;
    let refused = raw
        .try_execute(&format!("UPDATE audit_log SET actor = 'mallory' WHERE seq = 3 AND workspace_id = {DEFAULT_WS}"))
        .await;
    assert!(refused.unwrap_err().to_string().contains("append-only"), "the table refuses changes");
    raw.tamper(&format!(
        "UPDATE audit_log SET after = '{{\"status\":\"answered\",\"value\":false}}' WHERE seq = 3 AND workspace_id = {DEFAULT_WS}"
    ))
    .await;
    let broken = holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().expect_err("the edit is found");
    assert_eq!((broken.workspace.as_str(), broken.seq, broken.kind), ("default", 3, "altered"), "{broken}");
    let entry_3 = &entries_after(&app, 2).await[0];
    assert_eq!(broken.id.map(|id| id.to_string()), entry_3["id"].as_str().map(str::to_owned));
    assert!(broken.to_string().contains("seq 3"), "{broken}");
}

/// On PostgreSQL the commit seals each entry (migration 0010): its hash is computed by the database, over UTF-8
/// bytes counted by the database. Verifying recomputes every hash in Rust, so the two must agree on text whose
/// length in bytes is not its length in characters, and on NULL fields.
async fn entries_with_text_beyond_ascii_hash_as_the_server_computes(app: TestApp) {
    let id = ask(&app, json!({"title": "Überweisung an Zoë freigeben? 🚀", "response_type": "text"})).await;
    let answer = json!({"value": "Ja – aber nur bis 5 000 €, 日本語も OK 👍", "comment": "geprüft"});
    let answered = app.post(&format!("/api/v1/questions/{id}/answer"), answer).await;
    assert_eq!(answered.status, StatusCode::OK);
    let entries = entries_after(&app, 0).await;
    let entry = entries.last().expect("the answer's entry");
    assert!(entry["after"].to_string().contains("日本語"), "{entry}");
    assert!(entry["before"].to_string().contains("Zoë"), "{entry}");
    let verified = holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().expect("the chain verifies");
    assert_eq!(verified.entries as usize, entries.len());
}

async fn a_removed_row_is_named_as_the_gap_it_leaves(app: TestApp) {
    five_entries(&app).await;
    let raw = Raw::open(&app).await;
    assert!(raw.try_execute("DELETE FROM audit_log").await.is_err(), "the table refuses deletes");
    raw.tamper(&format!("DELETE FROM audit_log WHERE seq = 2 AND workspace_id = {DEFAULT_WS}")).await;
    let broken = holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().expect_err("the gap is found");
    assert_eq!((broken.seq, broken.kind), (2, "missing"), "{broken}");
    assert!(broken.message.contains("2..=2"), "{broken}");

    // The newest entry removed leaves no gap, but the chain no longer ends where its head says.
    let app = TestApp::start(if app.database_url.starts_with("sqlite") { Backend::Sqlite } else { Backend::Postgres })
        .await
        .unwrap();
    five_entries(&app).await;
    let raw = Raw::open(&app).await;
    raw.tamper(&format!("DELETE FROM audit_log WHERE seq = 5 AND workspace_id = {DEFAULT_WS}")).await;
    let broken = holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().expect_err("the removal is found");
    assert_eq!((broken.seq, broken.kind), (5, "missing"), "{broken}");

    // Swapping two entries' places breaks the links even when each keeps its own seq and hash.
    let app = TestApp::start(if app.database_url.starts_with("sqlite") { Backend::Sqlite } else { Backend::Postgres })
        .await
        .unwrap();
    five_entries(&app).await;
    let raw = Raw::open(&app).await;
    raw.tamper(&format!("UPDATE audit_log SET seq = seq + 100 WHERE seq IN (3, 4) AND workspace_id = {DEFAULT_WS}"))
        .await;
    raw.tamper(&format!(
        "UPDATE audit_log SET seq = 7 - (seq - 100) WHERE seq IN (103, 104) AND workspace_id = {DEFAULT_WS}"
    ))
    .await;
    let broken = holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().expect_err("the swap is found");
    assert_eq!(broken.seq, 3, "{broken}");
}

async fn concurrent_answers_on_two_instances_never_fork_the_chain(app: TestApp) {
    let (_second_state, second) = app.restart(|_| {}).await;
    let mut ids = Vec::new();
    for n in 0..40 {
        ids.push(ask(&app, json!({"title": format!("Q{n}"), "response_type": "boolean"})).await);
    }
    // Every question answered twice at once, once through each instance: 40 winners, 40 conflicts.
    let mut tasks = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        for via_second in [false, true] {
            let router = if via_second { second.clone() } else { app.router.clone() };
            let request = Request::post(format!("/api/v1/questions/{id}/answer"))
                .header(header::AUTHORIZATION, format!("Bearer {}", app.token))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({"value": n % 2 == 0}).to_string()))
                .unwrap();
            tasks.push(tokio::spawn(async move {
                use tower::ServiceExt;
                router.oneshot(request).await.unwrap().status()
            }));
        }
    }
    let mut ok = 0;
    for task in tasks {
        if task.await.unwrap() == StatusCode::OK {
            ok += 1;
        }
    }
    assert_eq!(ok, 40);
    let entries = entries_after(&app, 0).await;
    let seqs: Vec<i64> = entries.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=41).collect::<Vec<_>>(), "one entry per answer, seq without gaps or repeats");
    for pair in entries.windows(2) {
        assert_eq!(pair[1]["prev_hash"], pair[0]["hash"], "each entry links to the one before");
    }
    let verified = holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().expect("one unbroken chain");
    assert_eq!(verified.entries, 41);
}

async fn the_api_filters_pages_and_is_for_admins_of_the_workspace_only(app: TestApp) {
    let before = holdpoint::store::now();
    tokio::time::sleep(Duration::from_millis(5)).await;
    five_entries(&app).await;
    let cancelled = ask(&app, json!({"title": "Drop?"})).await;
    app.post(&format!("/api/v1/questions/{cancelled}/cancel"), json!({})).await;

    let all = entries_after(&app, 0).await;
    assert_eq!(all.len(), 6);
    let actions = |path: &str| {
        let path = path.to_owned();
        let app = &app;
        async move {
            let page = app.get(&path).await;
            assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.text);
            page.json["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["action"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(actions("/api/v1/audit?action=question.answered").await.len(), 4);
    assert_eq!(actions("/api/v1/audit?action=question.cancelled").await, ["question.cancelled"]);
    assert_eq!(actions("/api/v1/audit?actor_kind=policy").await, ["token.created"]);
    assert_eq!(actions("/api/v1/audit?actor_kind=token&actor=admin%20of%20default").await.len(), 5);
    assert!(actions("/api/v1/audit?actor=nobody").await.is_empty());
    assert_eq!(actions(&format!("/api/v1/audit?subject_id={cancelled}")).await, ["question.cancelled"]);
    let since = before.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    assert_eq!(actions(&format!("/api/v1/audit?since={since}")).await.len(), 5, "the token came before");
    assert_eq!(actions(&format!("/api/v1/audit?until={since}")).await, ["token.created"]);
    assert_eq!(actions("/api/v1/audit?action=&actor=&actor_kind=").await.len(), 6, "empty filters mean any");

    // Pages of two, newest first, until the cursor runs out: every entry once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/audit?limit=2&cursor={c}"),
            None => "/api/v1/audit?limit=2".to_owned(),
        };
        let page = app.get(&path).await.json;
        seen.extend(page["items"].as_array().unwrap().iter().map(|e| e["seq"].as_i64().unwrap()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, [6, 5, 4, 3, 2, 1]);

    for bad in
        ["limit=0", "limit=201", "cursor=nope", "actor_kind=robot", "since=yesterday", "until=2026-13-01T00:00:00Z"]
    {
        assert_error(&app.get(&format!("/api/v1/audit?{bad}")).await, StatusCode::BAD_REQUEST, "bad_request");
    }
    for role in [Role::Viewer, Role::Responder, Role::Approver, Role::Agent] {
        let token = app.create_token("default", role).await;
        let refused = app.call(Method::GET, "/api/v1/audit", Some(&token), None).await;
        let error = assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
        let said = format!("this is {}", role.with_article());
        assert!(error["message"].as_str().unwrap().ends_with(&said), "{error}");
        let export = app.call(Method::GET, "/api/v1/audit/export", Some(&token), None).await;
        assert_error(&export, StatusCode::FORBIDDEN, "forbidden");
    }
    assert_error(&app.call(Method::GET, "/api/v1/audit", None, None).await, StatusCode::UNAUTHORIZED, "unauthorized");

    // Another workspace's admin sees only that workspace's log, whatever it asks for.
    let other = app.create_token("other", Role::Admin).await;
    let theirs = app.call(Method::GET, "/api/v1/audit", Some(&other), None).await.json;
    let items = theirs["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!((items[0]["workspace"].as_str(), items[0]["seq"].as_i64()), (Some("other"), Some(1)));
    let probe = app.call(Method::GET, &format!("/api/v1/audit?subject_id={cancelled}"), Some(&other), None).await.json;
    assert!(probe["items"].as_array().unwrap().is_empty());
}

async fn exports_stream_the_selection_as_jsonl_and_csv(app: TestApp) {
    five_entries(&app).await;
    let listed = entries_after(&app, 0).await;

    let jsonl = app.get("/api/v1/audit/export?format=jsonl").await;
    assert_eq!(jsonl.status, StatusCode::OK);
    assert_eq!(jsonl.headers[header::CONTENT_TYPE], "application/x-ndjson");
    assert_eq!(jsonl.headers[header::CONTENT_DISPOSITION], "attachment; filename=\"holdpoint-audit-default.jsonl\"");
    let lines: Vec<Value> = jsonl.text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines, listed, "the export is the log in chain order");
    assert_eq!(app.get("/api/v1/audit/export").await.text, jsonl.text, "JSON Lines is the default");

    let filtered = app.get("/api/v1/audit/export?format=jsonl&action=token.created").await;
    assert_eq!(filtered.text.lines().count(), 1);

    let csv = app.get("/api/v1/audit/export?format=csv").await;
    assert_eq!(csv.status, StatusCode::OK);
    assert_eq!(csv.headers[header::CONTENT_TYPE], "text/csv; charset=utf-8");
    assert_eq!(csv.headers[header::CONTENT_DISPOSITION], "attachment; filename=\"holdpoint-audit-default.csv\"");
    let rows: Vec<&str> = csv.text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 6);
    assert!(rows[0].starts_with("seq,id,workspace_id,workspace,created_at,actor_kind,actor,"));
    assert!(rows[0].ends_with(",before,after,diff,prev_hash,hash"));
    assert!(rows[1].starts_with(&format!("1,{},", listed[0]["id"].as_str().unwrap())));
    assert!(rows[1].contains(r#","{""name"":""admin of default"",""role"":""admin""}","#), "{}", rows[1]);
    assert!(rows[5].ends_with(listed[4]["hash"].as_str().unwrap()));

    assert_error(&app.get("/api/v1/audit/export?format=xml").await, StatusCode::BAD_REQUEST, "bad_request");
}

async fn the_verify_command_passes_then_fails_after_a_row_is_edited(app: TestApp) {
    five_entries(&app).await;
    let verify = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"))
            .args(["audit", "verify", "--database-url", &app.database_url])
            .env("RUST_LOG", "warn")
            .output()
            .expect("the holdpoint binary runs")
    };
    let passed = verify();
    let stdout = String::from_utf8_lossy(&passed.stdout);
    assert_eq!(passed.status.code(), Some(0), "{stdout} {}", String::from_utf8_lossy(&passed.stderr));
    assert_eq!(stdout.trim(), "audit log verified: 5 entries in 1 workspace");

    Raw::open(&app)
        .await
        .tamper(&format!("UPDATE audit_log SET after = '{{\"status\":\"answered\",\"value\":true}}' WHERE seq = 3 AND workspace_id = {DEFAULT_WS}"))
        .await;
    let failed = verify();
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("workspace \"default\"") && stderr.contains("seq 3") && stderr.contains("altered"),
        "{stderr}"
    );
}

/// Creates an agent with one script and starts a run of it; returns the agent's and the run's ids.
async fn run_agent(
    app: &TestApp,
    scripts: &Scripts,
    name: &str,
    turns: Value,
    tools: &[&str],
    policy: Value,
) -> (String, String) {
    let model = scripts.write(&format!("{name}.json"), &turns);
    let spec = json!({ "name": name, "model": model, "tools": tools, "approval_policy": policy });
    let agent = app.post("/api/v1/agents", spec).await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
    let run = app.post("/api/v1/runs", json!({ "agent_id": agent.json["id"], "input": "go" })).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.text);
    (agent.json["id"].as_str().unwrap().to_owned(), run.json["id"].as_str().unwrap().to_owned())
}

fn shell_turn(id: &str, command: &str) -> Value {
    json!({ "id": id, "name": "shell", "arguments": { "command": command } })
}

async fn the_runtime_records_policy_decisions_resumes_and_cancellations(backend: Backend) {
    let scripts = Scripts::new();
    let dir = scripts.dir.clone();
    let Some(app) = TestApp::start_with(backend, move |config| config.runtime.scripts_dir = Some(dir)).await else {
        return;
    };
    let mut seq = 1;

    // `never`: rejected by the policy, recorded with the call.
    let turns = json!([{ "tool_calls": [shell_turn("c1", "rm -rf /")] }, { "content": "Refused." }]);
    let (agent_id, run_id) =
        run_agent(&app, &scripts, "guarded", turns, &["shell"], json!({"tools": {"shell": "never"}})).await;
    app.wait_for_run(&run_id, "completed").await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(entry["action"], "tool_call.decided");
    assert_eq!(entry["actor_kind"], "policy");
    assert_eq!(
        (entry["actor"].as_str(), entry["actor_id"].as_str()),
        (Some("approval policy"), Some(agent_id.as_str()))
    );
    assert_eq!(entry["subject_type"], "tool_call");
    let after = &entry["after"];
    assert_eq!((after["status"].as_str(), after["tool_name"].as_str()), (Some("rejected"), Some("shell")));
    assert_eq!(after["arguments"], json!({"command": "rm -rf /"}));
    assert_eq!((after["agent"].as_str(), after["run_id"].as_str()), (Some("guarded"), Some(run_id.as_str())));
    let calls = app.get(&format!("/api/v1/runs/{run_id}/tool-calls")).await.json;
    assert_eq!(entry["subject_id"], calls["items"][0]["id"]);

    // `auto`: approved by the policy (the shell then refuses to run, being disabled: not a decision).
    let turns = json!([{ "tool_calls": [shell_turn("c1", "uptime")] }, { "content": "Done." }]);
    let (_, run_id) =
        run_agent(&app, &scripts, "trusted", turns, &["shell"], json!({"tools": {"shell": "auto"}})).await;
    app.wait_for_run(&run_id, "completed").await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(
        (entry["action"].as_str(), entry["after"]["status"].as_str()),
        (Some("tool_call.decided"), Some("approved"))
    );

    // `prompt`: a person decides through the approval questions, here by resuming with one decision.
    let turns =
        json!([{ "tool_calls": [shell_turn("a", "make deploy"), shell_turn("b", "make clean")] }, { "content": "ok" }]);
    let (_, run_id) = run_agent(&app, &scripts, "careful", turns, &["shell"], json!({"default": "prompt"})).await;
    let run = app.wait_for_run(&run_id, "waiting_for_approval").await;
    assert!(entries_after(&app, seq).await.is_empty(), "asking for approval decides nothing");
    let questions: Vec<String> =
        run["pending_question_ids"].as_array().unwrap().iter().map(|q| q.as_str().unwrap().to_owned()).collect();
    let decisions = json!({ "tool_decisions": [{ "tool_call_id": "a", "approved": true, "comment": "go",
        "edited_arguments": {"command": "make deploy-canary"} }] });
    let resumed = app.post(&format!("/api/v1/runs/{run_id}/resume"), decisions).await;
    assert_eq!(resumed.status, StatusCode::ACCEPTED, "{}", resumed.text);
    app.wait_for_run(&run_id, "completed").await;
    let new = entries_after(&app, seq).await;
    assert_eq!(new.len(), 2, "{new:#?}");
    seq = new[1]["seq"].as_i64().unwrap();
    for entry in &new {
        assert_eq!(
            (entry["action"].as_str(), entry["actor_kind"].as_str()),
            (Some("question.answered"), Some("token"))
        );
        assert!(questions.contains(&entry["subject_id"].as_str().unwrap().to_owned()));
    }
    let approved = new.iter().find(|e| e["after"]["value"] == true).unwrap();
    assert_eq!(approved["after"]["edited_arguments"], json!({"command": "make deploy-canary"}));
    assert_eq!(approved["diff"], json!([{"op": "replace", "path": "/command", "value": "make deploy-canary"}]));
    let rejected = new.iter().find(|e| e["after"]["value"] == false).unwrap();
    assert_eq!(rejected["after"]["comment"], "left undecided when the run was resumed");

    // A run cancelled by a caller: the run and its pending question, both by that caller.
    let turns =
        json!([{ "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Go?" } }] }, { "content": "ok" }]);
    let (_, run_id) = run_agent(&app, &scripts, "asker", turns, &["ask_user"], json!({})).await;
    let run = app.wait_for_run(&run_id, "waiting_for_input").await;
    let question_id = run["pending_question_ids"][0].as_str().unwrap().to_owned();
    assert_eq!(app.post(&format!("/api/v1/runs/{run_id}/cancel"), json!({})).await.status, StatusCode::OK);
    let new = entries_after(&app, seq).await;
    let summary: Vec<(&str, &str, &str)> = new
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["subject_id"].as_str().unwrap(), e["actor_kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [("run.cancelled", run_id.as_str(), "token"), ("question.cancelled", question_id.as_str(), "token")]
    );
    assert_eq!(new[0]["before"]["status"], "waiting_for_input");
    seq = new[1]["seq"].as_i64().unwrap();

    // A run that ends with a non-blocking question still open: the run lifecycle cancels it.
    let turns = json!([
        { "tool_calls": [{ "name": "ask_user", "arguments": { "title": "Verbose?", "kind": "non_blocking" } }] },
        { "content": "Finished without waiting." }
    ]);
    let (_, run_id) = run_agent(&app, &scripts, "hasty", turns, &["ask_user"], json!({})).await;
    app.wait_for_run(&run_id, "completed").await;
    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(
        (entry["action"].as_str(), entry["actor"].as_str()),
        (Some("question.cancelled"), Some("run lifecycle"))
    );
    assert_eq!((entry["actor_kind"].as_str(), entry["actor_id"].as_str()), (Some("policy"), Some(run_id.as_str())));

    assert!(holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().is_ok());
}

/// A client executing its own run writes its tool calls over the worker protocol; what those writes record in the
/// audit log is decided by the server from its own copy of the run, as for its own workers.
async fn a_client_runs_policy_decisions_are_recorded_by_the_server(backend: Backend) {
    let scripts = Scripts::new();
    let dir = scripts.dir.clone();
    let Some(app) = TestApp::start_with(backend, move |config| config.runtime.scripts_dir = Some(dir)).await else {
        return;
    };
    let model = scripts.write("client.json", &json!([{ "content": "unused" }]));
    let spec = json!({ "name": "remote-hand", "model": model, "tools": ["shell"],
        "approval_policy": { "tools": { "shell": "never" } } });
    let agent = app.post("/api/v1/agents", spec).await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
    let agent_id = agent.json["id"].as_str().unwrap().to_owned();
    let run = app.post("/api/v1/runs", json!({ "agent_id": agent_id, "input": "go", "executor": "client" })).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.text);
    let run_id = run.json["id"].as_str().unwrap().to_owned();
    let mut seq = entries_after(&app, 0).await.last().map_or(0, |e| e["seq"].as_i64().unwrap());

    let worker = format!("/api/v1/runs/{run_id}/worker");
    let owner = uuid::Uuid::now_v7();
    let claimed = app.post(&worker, json!({ "op": "claim", "owner": owner, "lease_seconds": 30 })).await;
    assert_eq!(claimed.json["status"], "running", "{}", claimed.text);
    let now = chrono::Utc::now();
    let message_id = uuid::Uuid::now_v7();
    let message = json!({ "id": message_id, "run_id": run_id, "seq": 1, "step": 1, "role": "assistant",
        "content": { "role": "assistant", "tool_calls": [] }, "created_at": now });
    let call = |call_id: &str, status: &str, decided_by: Value| {
        json!({ "id": uuid::Uuid::now_v7(), "run_id": run_id, "message_id": message_id, "call_id": call_id,
            "tool_name": "shell", "input": { "command": "rm -rf /" }, "edited_input": null, "output": null,
            "status": status, "duration_ms": null, "step": 1, "decided_by": decided_by,
            "decision_comment": "never allowed", "question_id": null, "child_run_ids": [],
            "created_at": now, "updated_at": now })
    };
    let appended = app
        .post(
            &worker,
            json!({ "op": "append_messages", "owner": owner, "messages": [message], "step": 1,
                "tool_calls": [call("by-policy", "rejected", json!("policy")), call("open", "pending_approval", Value::Null)] }),
        )
        .await;
    assert_eq!(appended.status, StatusCode::OK, "{}", appended.text);

    let entry = only_new_entry(&app, &mut seq).await;
    assert_eq!(entry["action"], "tool_call.decided", "only the policy's decision is recorded: {entry}");
    assert_eq!(
        (entry["actor"].as_str(), entry["actor_id"].as_str()),
        (Some("approval policy"), Some(agent_id.as_str())),
        "the server names the agent from its own copy of the run"
    );
    assert_eq!(
        (entry["after"]["agent"].as_str(), entry["after"]["status"].as_str()),
        (Some("remote-hand"), Some("rejected"))
    );
    assert!(holdpoint::audit::verify(app.state.store.as_ref()).await.unwrap().is_ok());
}

mod runtime {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_the_runtime_records_policy_decisions_resumes_and_cancellations() {
        super::the_runtime_records_policy_decisions_resumes_and_cancellations(super::Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_the_runtime_records_policy_decisions_resumes_and_cancellations() {
        super::the_runtime_records_policy_decisions_resumes_and_cancellations(super::Backend::Postgres).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_a_client_runs_policy_decisions_are_recorded_by_the_server() {
        super::a_client_runs_policy_decisions_are_recorded_by_the_server(super::Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_client_runs_policy_decisions_are_recorded_by_the_server() {
        super::a_client_runs_policy_decisions_are_recorded_by_the_server(super::Backend::Postgres).await;
    }
}
