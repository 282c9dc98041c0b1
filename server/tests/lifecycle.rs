//! The question lifecycle (docs/api.md): every response type, first writer wins, cancel, batches, long-polls,
//! deadlines (also across a restart), and an event stream that loses nothing.

use crate::common;

use std::time::{Duration, Instant};

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{TestApp, assert_error, connect_events, read_events, read_events_until};
use futures::StreamExt;
use serde_json::{Value, json};

async fn a_new_blocking_question_on_a_run_supersedes_the_older_one(app: TestApp) {
    // A run a client executes stays queued: nothing but these questions happens to it.
    let agent = app.post("/api/v1/agents", json!({"name": "asker", "model": "openai:test-model"})).await;
    let start = json!({"agent_id": agent.json["id"], "input": "go", "executor": "client"});
    let run_id = app.post("/api/v1/runs", start).await.json["id"].as_str().unwrap().to_owned();
    let first = app.post("/api/v1/questions", json!({ "title": "First?", "run_id": run_id })).await.json;
    let second = app.post("/api/v1/questions", json!({ "title": "Second?", "run_id": run_id })).await.json;
    let other =
        app.post("/api/v1/questions", json!({ "title": "Pref?", "run_id": run_id, "kind": "non_blocking" })).await.json;
    let first = app.get(&format!("/api/v1/questions/{}", first["id"].as_str().unwrap())).await.json;
    assert_eq!(first["status"], "cancelled");
    assert!(first["response"]["comment"].as_str().unwrap().contains("superseded"));
    assert_eq!(
        app.get(&format!("/api/v1/questions/{}", second["id"].as_str().unwrap())).await.json["status"],
        "pending"
    );
    assert_eq!(
        app.get(&format!("/api/v1/questions/{}", other["id"].as_str().unwrap())).await.json["status"],
        "pending"
    );
}

/// An `agent` token reads only its own questions, on the event stream as in the REST API: another agent's
/// questions, and their answers, never reach it, live or replayed; people see everything.
async fn an_agent_tokens_event_stream_carries_only_its_own_questions(app: TestApp) {
    let base = app.serve().await;
    let (mine, theirs) =
        (app.create_token("default", Role::Agent).await, app.create_token("default", Role::Agent).await);
    let my_stream = connect_events(&base, &mine, None).await;
    let admin_stream = connect_events(&base, &app.token, None).await;
    let ask_as = |token: &str, title: &str| {
        let (token, title) = (token.to_owned(), title.to_owned());
        let app = &app;
        async move {
            let created =
                app.call(Method::POST, "/api/v1/questions", Some(&token), Some(json!({ "title": title }))).await;
            assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
            created.json["id"].as_str().unwrap().to_owned()
        }
    };
    let their_question = ask_as(&theirs, "Someone else's secret?").await;
    let my_question = ask_as(&mine, "Mine?").await;
    for id in [&their_question, &my_question] {
        let answered = app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": "yes" })).await;
        assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    }

    let expected_mine =
        vec![("question_asked".to_owned(), my_question.clone()), ("question_answered".into(), my_question)];
    let of = |events: Vec<(i64, String, Value)>| -> Vec<(String, String)> {
        events.into_iter().map(|(_, kind, data)| (kind, data["question"]["id"].as_str().unwrap().to_owned())).collect()
    };
    assert_eq!(of(read_events(my_stream, 2).await), expected_mine, "live: only the agent's own question");
    assert_eq!(of(read_events(connect_events(&base, &mine, Some(0)).await, 2).await), expected_mine, "replayed too");
    let everything = of(read_events(admin_stream, 4).await);
    assert!(everything.iter().any(|(_, id)| *id == their_question), "people see every question: {everything:?}");
}

async fn a_first_connection_replays_from_the_last_event_id_query_parameter(app: TestApp) {
    let base = app.serve().await;
    let first = app.post("/api/v1/questions", json!({ "title": "Rendered with the page" })).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let position = read_events(connect_events(&base, &app.token, Some(0)).await, 1).await[0].0;
    let missed = app.post("/api/v1/questions", json!({ "title": "Asked before the stream opened" })).await.json;
    let response = reqwest::Client::new()
        .get(format!("{base}/api/v1/events?last_event_id={position}"))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    let events = read_events(response, 1).await;
    assert_eq!(events[0].2["question"]["id"], missed["id"], "nothing between the render and the stream is lost");
    let negative = app.get("/api/v1/events?last_event_id=-1").await;
    assert_error(&negative, StatusCode::BAD_REQUEST, "bad_request");
}

/// A stream that names no last event starts with its position (an `id:` without data, which sets the client's last
/// event id and dispatches nothing): dropped before its first event, the client resumes there and loses nothing.
async fn a_stream_without_a_last_event_id_starts_by_naming_its_position(app: TestApp) {
    use futures::StreamExt;
    let base = app.serve().await;
    let before = app.post("/api/v1/questions", json!({ "title": "Asked before the stream" })).await;
    assert_eq!(before.status, StatusCode::CREATED);
    let logged = read_events(connect_events(&base, &app.token, Some(0)).await, 1).await[0].0;

    let mut stream = connect_events(&base, &app.token, None).await.bytes_stream();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("its first frame");
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap()));
    }
    // Where the stream goes on from: the event hub's position, which may not have reached the newest write yet
    // (that one then comes live).
    let position: i64 = text.strip_prefix("id: ").and_then(|rest| rest.strip_suffix("\n\n")).unwrap().parse().unwrap();
    assert!((0..=logged).contains(&position), "{text:?} names a position up to {logged}");
    drop(stream);

    let missed = app.post("/api/v1/questions", json!({ "title": "Asked while the stream was down" })).await.json;
    let resumed = read_events_until(connect_events(&base, &app.token, Some(position)).await, |events| {
        events.iter().any(|event| event.2["question"]["id"] == missed["id"])
    })
    .await;
    assert!(resumed.iter().all(|event| event.0 > position));
}

backend_tests!(
    a_stream_without_a_last_event_id_starts_by_naming_its_position,
    a_first_connection_replays_from_the_last_event_id_query_parameter,
    an_agent_tokens_event_stream_carries_only_its_own_questions,
    a_new_blocking_question_on_a_run_supersedes_the_older_one,
    every_response_type_takes_fitting_answers_and_refuses_the_rest,
    the_first_answer_wins_and_later_ones_get_409_with_who_answered,
    fifty_concurrent_answers_make_exactly_one_winner,
    fifty_concurrent_answers_split_across_two_server_processes_make_one_winner,
    cancelling_ends_a_question_and_is_itself_final,
    a_batch_answers_each_item_on_its_own,
    a_long_poll_returns_as_soon_as_the_question_is_answered,
    who_may_answer_depends_on_role_and_kind,
    refusals_name_the_callers_role_with_the_right_article,
    questions_past_their_deadline_are_defaulted_or_expired,
    filters_and_deadline_order_select_the_right_questions,
    a_text_search_finds_words_with_letters_beyond_ascii,
    paging_in_deadline_order_crosses_from_dated_to_undated_questions,
    a_client_that_missed_a_hundred_events_gets_exactly_those_on_reconnect,
    resolutions_are_announced_on_the_event_stream,
    a_resolved_question_reads_back_as_it_was_returned_and_announced,
    the_event_a_commit_hands_the_hub_is_the_event_the_log_stores,
    concurrent_asks_and_answers_reach_a_stream_once_each_in_order_and_long_polls_return_the_answer,
    metrics_count_questions_answers_timeouts_and_requests,
    questions_do_not_send_the_runtime_looking_for_runs,
);

fn options(values: &[&str]) -> Value {
    Value::Array(values.iter().map(|v| json!({"value": v, "label": v.to_uppercase()})).collect())
}

/// Asks as an agent does, with an agent token: the admin token of the tests answers, and whoever asks for an
/// approval may not approve it.
async fn ask(app: &TestApp, body: Value) -> String {
    let agent = app.create_token("default", app::types::Role::Agent).await;
    let created = app.call(axum::http::Method::POST, "/api/v1/questions", Some(&agent), Some(body)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.json["id"].as_str().unwrap().to_owned()
}

async fn every_response_type_takes_fitting_answers_and_refuses_the_rest(app: TestApp) {
    let approval_action = json!({"tool_name": "shell", "arguments": {"command": "terraform apply"}});
    let cases: Vec<(Value, Vec<Value>, Vec<Value>)> = vec![
        (
            json!({"title": "t", "response_type": "text"}),
            vec![json!("yes please")],
            vec![json!(""), json!(3), json!("x".repeat(10_001))],
        ),
        (
            json!({"title": "t", "response_type": "boolean"}),
            vec![json!(true), json!(false)],
            vec![json!("true"), json!(1)],
        ),
        (
            json!({"title": "t", "response_type": "choice", "options": options(&["a", "b"])}),
            vec![json!("a")],
            vec![json!("c"), json!(["a"])],
        ),
        (
            json!({"title": "t", "response_type": "multi_choice", "options": options(&["a", "b", "c"])}),
            vec![json!(["a", "c"]), json!([])],
            vec![json!(["a", "a"]), json!(["z"]), json!("a")],
        ),
        (
            json!({"title": "t", "kind": "approval", "action": approval_action}),
            vec![json!(true), json!(false)],
            vec![json!("yes"), json!(null)],
        ),
        (
            json!({"title": "t", "kind": "error_recovery", "options": options(&["use_cache"])}),
            vec![json!("retry"), json!("skip"), json!("abort"), json!("use_cache")],
            vec![json!("explode"), json!(true)],
        ),
        (
            json!({"title": "t", "response_type": "form", "fields": [
                {"key": "env", "label": "Env", "response_type": "choice", "options": options(&["dev", "prod"]), "required": true},
                {"key": "replicas", "label": "Replicas", "response_type": "number"},
                {"key": "notes", "label": "Notes", "response_type": "text"},
                {"key": "tags", "label": "Tags", "response_type": "multi_choice", "options": options(&["x", "y"])},
                {"key": "dry", "label": "Dry run", "response_type": "boolean", "required": true}
            ]}),
            vec![
                json!({"env": "prod", "replicas": 3, "notes": "go", "tags": ["x"], "dry": false}),
                json!({"env": "dev", "dry": true}),
            ],
            vec![
                json!({"env": "prod"}),
                json!({"env": "qa", "dry": true}),
                json!({"env": "dev", "dry": true, "other": 1}),
                json!("prod"),
            ],
        ),
    ];
    for (question, valid, invalid) in cases {
        for value in invalid {
            let id = ask(&app, question.clone()).await;
            let response = app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": value})).await;
            let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
            assert!(error["details"]["fields"].is_object(), "field-level details for {value}: {error}");
            let stored = app.get(&format!("/api/v1/questions/{id}")).await;
            assert_eq!(stored.json["status"], "pending", "a refused answer changes nothing");
            assert_eq!(stored.json["response"], Value::Null);
        }
        for value in valid {
            let id = ask(&app, question.clone()).await;
            let response = app
                .post(&format!("/api/v1/questions/{id}/answer"), json!({"value": value, "comment": "because"}))
                .await;
            assert_eq!(response.status, StatusCode::OK, "{question} with {value}: {}", response.text);
            assert_eq!(response.json["status"], "answered");
            assert_eq!(response.json["resolution"], "human");
            assert_eq!(response.json["response"]["value"], value);
            assert_eq!(response.json["response"]["comment"], "because");
            assert!(response.json["answered_by"].is_string());
        }
    }

    // Edited arguments only where the approval allows them, and only with an approval.
    let editable = json!({"title": "t", "kind": "approval", "allow_edit": true,
        "action": {"tool_name": "shell", "arguments": {"command": "rm -rf /tmp/x"}}});
    let id = ask(&app, editable.clone()).await;
    let edited = json!({"command": "rm -rf /tmp/x/cache"});
    let response =
        app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": true, "edited_arguments": edited})).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.json["response"]["edited_arguments"], edited);
    assert_eq!(response.json["action"]["arguments"]["command"], "rm -rf /tmp/x", "the original is kept");
    let id = ask(&app, editable).await;
    let response =
        app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": false, "edited_arguments": edited})).await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let fixed = json!({"title": "t", "kind": "approval", "action": {"tool_name": "shell", "arguments": {}}});
    let id = ask(&app, fixed).await;
    let response =
        app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": true, "edited_arguments": edited})).await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");

    let id = ask(&app, json!({"title": "t"})).await;
    let response = app
        .post(&format!("/api/v1/questions/{id}/answer"), json!({"value": "ok", "comment": "c".repeat(10_001)}))
        .await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let response = app.post(&format!("/api/v1/questions/{id}/answer"), json!({"comment": "no value"})).await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
}

async fn the_first_answer_wins_and_later_ones_get_409_with_who_answered(app: TestApp) {
    let id = ask(&app, json!({"title": "Which region?"})).await;
    let first = app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": "eu-west-1"})).await;
    assert_eq!(first.status, StatusCode::OK);
    let second = app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": "us-east-1"})).await;
    let error = assert_error(&second, StatusCode::CONFLICT, "conflict");
    assert_eq!(error["details"]["status"], "answered");
    assert_eq!(error["details"]["answered_by"], first.json["answered_by"]);
    let stored = app.get(&format!("/api/v1/questions/{id}")).await;
    assert_eq!(stored.json["response"]["value"], "eu-west-1");
    assert_error(
        &app.post("/api/v1/questions/00000000-0000-7000-8000-000000000000/answer", json!({"value": "x"})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

async fn fifty_concurrent_answers_make_exactly_one_winner(app: TestApp) {
    let id = ask(&app, json!({"title": "Race?"})).await;
    let attempts = (0..50).map(|i| {
        let app = &app;
        let id = id.clone();
        async move { app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": format!("answer {i}")})).await }
    });
    let responses = futures::future::join_all(attempts).await;
    let ok: Vec<_> = responses.iter().filter(|r| r.status == StatusCode::OK).collect();
    let conflicts = responses.iter().filter(|r| r.status == StatusCode::CONFLICT).count();
    assert_eq!((ok.len(), conflicts), (1, 49), "{:?}", responses.iter().map(|r| r.status).collect::<Vec<_>>());
    let stored = app.get(&format!("/api/v1/questions/{id}")).await;
    assert_eq!(stored.json["response"], ok[0].json["response"], "the stored answer is the winner's");
    let events = app.state.store.events_after(0, 1000).await.unwrap();
    let answered = events.iter().filter(|e| e.event_type == "question_answered").count();
    assert_eq!(answered, 1, "one transition, one event");
}

async fn fifty_concurrent_answers_split_across_two_server_processes_make_one_winner(app: TestApp) {
    let id = ask(&app, json!({"title": "Race across processes?"})).await;
    let (a, b) = tokio::join!(app.spawn_process(), app.spawn_process());
    let client = reqwest::Client::new();
    let attempts = (0..50).map(|i| {
        let base = if i % 2 == 0 { &a.base_url } else { &b.base_url };
        let request = client
            .post(format!("{base}/api/v1/questions/{id}/answer"))
            .bearer_auth(&app.token)
            .json(&json!({"value": format!("answer {i}")}));
        async move { request.send().await.unwrap().status().as_u16() }
    });
    let statuses = futures::future::join_all(attempts).await;
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let conflicts = statuses.iter().filter(|s| **s == 409).count();
    assert_eq!((ok, conflicts), (1, 49), "{statuses:?}");
}

async fn cancelling_ends_a_question_and_is_itself_final(app: TestApp) {
    let id = ask(&app, json!({"title": "Still needed?"})).await;
    let cancelled = app.post(&format!("/api/v1/questions/{id}/cancel"), json!({"reason": "the run ended"})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.json["status"], "cancelled");
    assert_eq!(cancelled.json["resolution"], "cancelled");
    assert_eq!(cancelled.json["response"]["comment"], "the run ended");
    let again = app.post(&format!("/api/v1/questions/{id}/cancel"), json!({})).await;
    assert_eq!(assert_error(&again, StatusCode::CONFLICT, "conflict")["details"]["status"], "cancelled");
    let answer = app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": "x"})).await;
    assert_error(&answer, StatusCode::CONFLICT, "conflict");
    let empty_body = ask(&app, json!({"title": "t"})).await;
    let response =
        app.call(Method::POST, &format!("/api/v1/questions/{empty_body}/cancel"), Some(&app.token), None).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
}

async fn a_batch_answers_each_item_on_its_own(app: TestApp) {
    let approval = json!({"title": "t", "kind": "approval", "action": {"tool_name": "deploy", "arguments": {}}});
    let first = ask(&app, approval.clone()).await;
    let second = ask(&app, approval.clone()).await;
    let taken = ask(&app, approval).await;
    app.post(&format!("/api/v1/questions/{taken}/answer"), json!({"value": false})).await;
    let response = app
        .post(
            "/api/v1/questions/answer-batch",
            json!({"items": [
                {"id": first, "value": true, "comment": "ship it"},
                {"id": second, "value": "maybe"},
                {"id": taken, "value": true},
                {"id": "00000000-0000-7000-8000-000000000000", "value": true},
            ]}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let statuses: Vec<_> = response.json["results"].as_array().unwrap().iter().map(|r| r["status"].clone()).collect();
    assert_eq!(statuses, [json!("answered"), json!("invalid"), json!("conflict"), json!("not_found")]);
    assert_eq!(response.json["results"][2]["error"]["details"]["status"], "answered");
    assert_eq!(app.get(&format!("/api/v1/questions/{first}")).await.json["response"]["comment"], "ship it");
    assert_eq!(app.get(&format!("/api/v1/questions/{second}")).await.json["status"], "pending");
    let empty = app.post("/api/v1/questions/answer-batch", json!({"items": []})).await;
    assert_error(&empty, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
}

async fn a_long_poll_returns_as_soon_as_the_question_is_answered(app: TestApp) {
    let id = ask(&app, json!({"title": "Wait for me"})).await;
    let base = app.serve().await;
    let client = reqwest::Client::new();
    let waiting = tokio::spawn({
        let (client, token, url) =
            (client.clone(), app.token.clone(), format!("{base}/api/v1/questions/{id}/wait?timeout_seconds=30"));
        async move {
            let response = client.get(url).bearer_auth(token).send().await.unwrap();
            let returned_at = Instant::now();
            (response.json::<Value>().await.unwrap(), returned_at)
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the wait holds while the question is pending");
    app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": "done"})).await;
    let answered_at = Instant::now();
    let (question, returned_at) = waiting.await.unwrap();
    assert_eq!(question["status"], "answered");
    let latency = returned_at.saturating_duration_since(answered_at);
    eprintln!("long-poll returned {latency:?} after the answer");
    assert!(latency < Duration::from_secs(2), "woken by the answer, not by its 30 s timeout ({latency:?})");

    // Already resolved: at once. Pending past the wait: returned as it is.
    let started = Instant::now();
    let now = client
        .get(format!("{base}/api/v1/questions/{id}/wait?timeout_seconds=30"))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(now.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(2));
    let other = ask(&app, json!({"title": "Nobody answers"})).await;
    let timed_out = app.get(&format!("/api/v1/questions/{other}/wait?timeout_seconds=1")).await;
    assert_eq!(timed_out.json["status"], "pending");
    assert_error(
        &app.get(&format!("/api/v1/questions/{other}/wait?timeout_seconds=61")).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    );
}

/// A refusal names the caller's role as a sentence would: "an agent may not …", not "a agent may not …".
async fn refusals_name_the_callers_role_with_the_right_article(app: TestApp) {
    for (role, said) in [
        (Role::Agent, "an agent may not answer blocking questions"),
        (Role::Viewer, "a viewer may not answer blocking questions"),
    ] {
        let token = app.create_token("default", role).await;
        // Asked by the agent itself: another agent's question would be missing to it (404), not forbidden.
        let asker = if role == Role::Agent { token.clone() } else { app.token.clone() };
        let asked = app.call(Method::POST, "/api/v1/questions", Some(&asker), Some(json!({"title": "Which?"}))).await;
        let question = asked.json["id"].as_str().unwrap().to_owned();
        let path = format!("/api/v1/questions/{question}/answer");
        let refused = app.call(Method::POST, &path, Some(&token), Some(json!({"value": "eu"}))).await;
        assert_eq!(assert_error(&refused, StatusCode::FORBIDDEN, "forbidden")["message"], said);
    }
}

async fn who_may_answer_depends_on_role_and_kind(app: TestApp) {
    let plain = ask(&app, json!({"title": "t"})).await;
    let approval =
        ask(&app, json!({"title": "t", "kind": "approval", "action": {"tool_name": "x", "arguments": {}}})).await;
    let answer = |token: String, id: String, value: Value| {
        let app = &app;
        async move {
            app.call(
                Method::POST,
                &format!("/api/v1/questions/{id}/answer"),
                Some(&token),
                Some(json!({"value": value})),
            )
            .await
        }
    };
    let viewer = app.create_token("default", Role::Viewer).await;
    assert_error(&answer(viewer, plain.clone(), json!("x")).await, StatusCode::FORBIDDEN, "forbidden");
    // An agent token may not answer even the questions it asked; another agent's it cannot even see.
    let agent = app.create_token("default", Role::Agent).await;
    let created = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(json!({"title": "mine"}))).await;
    let own = created.json["id"].as_str().unwrap().to_owned();
    assert_error(&answer(agent.clone(), own, json!("x")).await, StatusCode::FORBIDDEN, "forbidden");
    assert_error(&answer(agent, plain.clone(), json!("x")).await, StatusCode::NOT_FOUND, "not_found");
    let responder = app.create_token("default", Role::Responder).await;
    assert_error(&answer(responder.clone(), approval.clone(), json!(true)).await, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(answer(responder, plain, json!("x")).await.status, StatusCode::OK);
    let approver = app.create_token("default", Role::Approver).await;
    assert_eq!(answer(approver, approval, json!(true)).await.status, StatusCode::OK);
}

async fn wait_until_resolved(app: &TestApp, id: &str, within: Duration) -> Value {
    let started = Instant::now();
    loop {
        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        if question["status"] != "pending" || started.elapsed() > within {
            return question;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn questions_past_their_deadline_are_defaulted_or_expired(app: TestApp) {
    let defaulted = ask(
        &app,
        json!({"title": "Proceed?", "response_type": "boolean", "timeout_seconds": 1,
        "default_response": {"value": false, "comment": "nobody answered"}}),
    )
    .await;
    let expired = ask(&app, json!({"title": "Which?", "timeout_seconds": 1})).await;
    let open = ask(&app, json!({"title": "No deadline", "kind": "non_blocking"})).await;

    let question = wait_until_resolved(&app, &defaulted, Duration::from_secs(2)).await;
    assert_eq!(question["status"], "defaulted", "{question}");
    assert_eq!(question["resolution"], "default_on_timeout");
    assert_eq!(question["response"]["value"], false);
    let question = wait_until_resolved(&app, &expired, Duration::from_secs(2)).await;
    assert_eq!(question["status"], "expired", "{question}");
    assert_eq!(question["response"], Value::Null);
    assert_eq!(app.get(&format!("/api/v1/questions/{open}")).await.json["status"], "pending");

    tokio::time::sleep(Duration::from_millis(700)).await;
    let events = app.state.store.events_after(0, 1000).await.unwrap();
    let count = |kind: &str| events.iter().filter(|e| e.event_type == kind).count();
    assert_eq!((count("question_answered"), count("question_expired")), (1, 1), "each resolved exactly once");
    let late = app.post(&format!("/api/v1/questions/{expired}/answer"), json!({"value": "too late"})).await;
    assert_eq!(assert_error(&late, StatusCode::CONFLICT, "conflict")["details"]["status"], "expired");
}

/// A server whose workers do not run stands in for one that is down over the deadline; a second server on the same
/// database, started after it, must settle the question on its first pass.
async fn deadlines_that_passed_while_the_server_was_down_are_resolved_at_start(backend: common::Backend) {
    let Some(down) = TestApp::start_with(backend, |c| c.run_workers = false).await else { return };
    let id =
        ask(&down, json!({"title": "Overnight?", "timeout_seconds": 1, "default_response": {"value": "skip"}})).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(down.get(&format!("/api/v1/questions/{id}")).await.json["status"], "pending", "nobody was there");

    let started = Instant::now();
    let (_restarted, _router) = down.restart(|c| c.run_workers = true).await;
    let question = wait_until_resolved(&down, &id, Duration::from_secs(2)).await;
    assert_eq!(question["status"], "defaulted", "{question}");
    assert_eq!(question["response"]["value"], "skip");
    eprintln!("resolved {:?} after the restart", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_deadlines_that_passed_while_the_server_was_down_are_resolved_at_start() {
    deadlines_that_passed_while_the_server_was_down_are_resolved_at_start(common::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_deadlines_that_passed_while_the_server_was_down_are_resolved_at_start() {
    deadlines_that_passed_while_the_server_was_down_are_resolved_at_start(common::Backend::Postgres).await;
}

async fn filters_and_deadline_order_select_the_right_questions(app: TestApp) {
    let a =
        ask(&app, json!({"title": "Rotate keys", "project": "infra", "urgency": "critical", "timeout_seconds": 600}))
            .await;
    let b = ask(&app, json!({"title": "Pick a persona", "project": "writing", "kind": "non_blocking"})).await;
    let c = ask(
        &app,
        json!({"title": "Approve deploy", "kind": "approval", "project": "infra", "timeout_seconds": 400,
        "action": {"tool_name": "deploy", "arguments": {}}}),
    )
    .await;
    app.post(&format!("/api/v1/questions/{b}/answer"), json!({"value": "dev"})).await;
    let ids = |response: common::TestResponse| item_ids(&response);
    assert_eq!(ids(app.get("/api/v1/questions?project=infra").await), [c.clone(), a.clone()]);
    assert_eq!(ids(app.get("/api/v1/questions?status=answered").await), [b.as_str()]);
    assert_eq!(ids(app.get("/api/v1/questions?kind=approval").await), [c.as_str()]);
    assert_eq!(ids(app.get("/api/v1/questions?urgency=critical").await), [a.as_str()]);
    assert_eq!(ids(app.get("/api/v1/questions?q=PERSONA").await), [b.as_str()]);
    assert_eq!(ids(app.get("/api/v1/questions?q=100%25").await), Vec::<String>::new(), "% is matched literally");
    assert_eq!(ids(app.get("/api/v1/questions?sort=deadline").await), [c.clone(), a.clone(), b.clone()]);
    let first = app.get("/api/v1/questions?sort=deadline&limit=1").await;
    let cursor = first.json["next_cursor"].as_str().unwrap().to_owned();
    assert_eq!(ids(app.get(&format!("/api/v1/questions?sort=deadline&limit=2&cursor={cursor}")).await), [a, b]);
    assert_error(&app.get("/api/v1/questions?status=nonsense").await, StatusCode::BAD_REQUEST, "bad_request");
    assert_error(&app.get("/api/v1/questions?sort=random").await, StatusCode::BAD_REQUEST, "bad_request");
}

/// A search is case-insensitive for every letter: SQLite's own `LOWER` and `LIKE` fold ASCII letters only, so a
/// search lowered in Rust (`ü` for `Ü`) or by SQLite never found `Überweisung` from `überweisung`.
async fn a_text_search_finds_words_with_letters_beyond_ascii(app: TestApp) {
    let transfer =
        ask(&app, json!({"title": "Überweisung an Müller prüfen", "body": "Betrag: 1 200 € (Ölförderung)"})).await;
    let keys = ask(&app, json!({"title": "Rotate keys", "body": "100% of them; see a.b"})).await;
    let found = |query: &str| {
        let app = &app;
        let path = format!("/api/v1/questions?q={query}");
        async move {
            let response = app.get(&path).await;
            assert_eq!(response.status, StatusCode::OK, "{path}: {}", response.json);
            item_ids(&response)
        }
    };
    assert_eq!(found("%C3%9Cberweisung").await, [transfer.as_str()], "Überweisung, as written");
    assert_eq!(found("%C3%BCberweisung").await, [transfer.as_str()], "überweisung");
    assert_eq!(found("AN%20M%C3%9CLLER").await, [transfer.as_str()], "AN MÜLLER");
    assert_eq!(found("%C3%B6lf%C3%B6rderung").await, [transfer.as_str()], "ölförderung, in the body");
    assert!(found("M%C3%BCllerin").await.is_empty());
    // Characters a pattern language would read as operators match themselves.
    assert!(found("a.c").await.is_empty(), ". is no wildcard");
    assert_eq!(found("100%25%20of").await, [keys.as_str()], "% is matched literally");
    assert_eq!(found("(%C3%96l").await, [transfer.as_str()], "( opens nothing");
    let long = "x".repeat(holdpoint::questions::SEARCH_MAX_CHARS + 1);
    assert_error(&app.get(&format!("/api/v1/questions?q={long}")).await, StatusCode::BAD_REQUEST, "bad_request");
}

/// The ids of a page of questions, in its order.
fn item_ids(response: &common::TestResponse) -> Vec<String> {
    response.json["items"].as_array().unwrap().iter().map(|q| q["id"].as_str().unwrap().to_owned()).collect()
}

/// The deadline order is read in two parts (questions with a deadline, then those without): every page size and
/// every cursor, inside either part or at the boundary, must give the one order with nothing lost or repeated.
async fn paging_in_deadline_order_crosses_from_dated_to_undated_questions(app: TestApp) {
    let undated_first = ask(&app, json!({"title": "undated 1"})).await;
    let latest = ask(&app, json!({"title": "due in 900 s", "timeout_seconds": 900})).await;
    let undated_second = ask(&app, json!({"title": "undated 2"})).await;
    let soonest = ask(&app, json!({"title": "due in 300 s", "timeout_seconds": 300})).await;
    let middle = ask(&app, json!({"title": "due in 600 s", "timeout_seconds": 600})).await;
    let undated_third = ask(&app, json!({"title": "undated 3"})).await;
    let answered = ask(&app, json!({"title": "answered, due in 100 s", "timeout_seconds": 100})).await;
    app.post(&format!("/api/v1/questions/{answered}/answer"), json!({"value": "done"})).await;
    let expected = [soonest, middle, latest, undated_first, undated_second, undated_third];
    for limit in 1..=7 {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/api/v1/questions?status=pending&sort=deadline&limit={limit}");
            if let Some(cursor) = &cursor {
                path.push_str(&format!("&cursor={cursor}"));
            }
            let page = app.get(&path).await;
            assert_eq!(page.status, StatusCode::OK, "{}", page.text);
            let items = page.json["items"].as_array().unwrap();
            assert!(items.len() <= limit, "a page holds at most its limit");
            seen.extend(items.iter().map(|q| q["id"].as_str().unwrap().to_owned()));
            match page.json["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
            assert!(seen.len() <= expected.len(), "paging with limit {limit} does not end: {seen:?}");
        }
        assert_eq!(seen, expected, "pages of {limit} in deadline order");
    }
}

async fn a_client_that_missed_a_hundred_events_gets_exactly_those_on_reconnect(app: TestApp) {
    let base = app.serve().await;
    let first = connect_events(&base, &app.token, None).await;
    ask(&app, json!({"title": "before the disconnect"})).await;
    let seen = read_events(first, 1).await;
    let last_seen = seen[0].0;
    // The connection is gone (dropped above); 100 events happen meanwhile.
    let mut missed = Vec::new();
    for i in 0..100 {
        missed.push(ask(&app, json!({"title": format!("missed {i}")})).await);
    }
    let reconnected = connect_events(&base, &app.token, Some(last_seen)).await;
    let replayed = read_events(reconnected, 100).await;
    let ids: Vec<_> = replayed.iter().map(|e| e.2["question"]["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, missed, "exactly the missed ones, in order");
    assert!(replayed.windows(2).all(|w| w[0].0 < w[1].0), "event ids increase, no duplicates");
    assert!(replayed[0].0 > last_seen);
}

async fn resolutions_are_announced_on_the_event_stream(app: TestApp) {
    let base = app.serve().await;
    let stream =
        reqwest::Client::new().get(format!("{base}/api/v1/events")).bearer_auth(&app.token).send().await.unwrap();
    let answered = ask(&app, json!({"title": "a"})).await;
    let cancelled = ask(&app, json!({"title": "c"})).await;
    let expired = ask(&app, json!({"title": "e", "timeout_seconds": 1})).await;
    app.post(&format!("/api/v1/questions/{answered}/answer"), json!({"value": "ok"})).await;
    app.post(&format!("/api/v1/questions/{cancelled}/cancel"), json!({})).await;
    let events = read_events(stream, 6).await;
    let summary: Vec<(String, String)> =
        events.iter().map(|e| (e.1.clone(), e.2["question"]["id"].as_str().unwrap().to_owned())).collect();
    assert_eq!(
        summary,
        [
            ("question_asked".to_owned(), answered.clone()),
            ("question_asked".to_owned(), cancelled.clone()),
            ("question_asked".to_owned(), expired.clone()),
            ("question_answered".to_owned(), answered),
            ("question_cancelled".to_owned(), cancelled),
            ("question_expired".to_owned(), expired),
        ]
    );
}

/// Answering builds the resolved question before it writes it (on PostgreSQL the update, its event and its audit
/// entry are one statement): what the answer returns, what the event stream announces and what a later read gives
/// must be the same question, to the microsecond and whatever the order of the keys the answer came with.
async fn a_resolved_question_reads_back_as_it_was_returned_and_announced(app: TestApp) {
    let base = app.serve().await;
    let stream = connect_events(&base, &app.token, None).await;
    let form = json!({
        "title": "Where and how many?",
        "response_type": "form",
        "fields": [
            {"key": "zone", "label": "Zone", "response_type": "text", "required": true},
            {"key": "count", "label": "Count", "response_type": "number"}
        ],
        "context": {"zeta": [1, {"b": 2, "a": 1}], "alpha": "é ü"}
    });
    let answered = ask(&app, form).await;
    let cancelled = ask(&app, json!({"title": "Still needed?", "body": "**Markdown** body"})).await;
    let answer = json!({"value": {"zone": "eu-west-1", "count": 3}, "comment": "zeta before alpha"});
    let returned_answer = app.post(&format!("/api/v1/questions/{answered}/answer"), answer).await;
    assert_eq!(returned_answer.status, StatusCode::OK, "{}", returned_answer.text);
    let returned_cancel =
        app.post(&format!("/api/v1/questions/{cancelled}/cancel"), json!({"reason": "not any more"})).await;
    assert_eq!(returned_cancel.status, StatusCode::OK, "{}", returned_cancel.text);
    let events = read_events(stream, 4).await;
    for (id, returned, event_type) in
        [(&answered, &returned_answer, "question_answered"), (&cancelled, &returned_cancel, "question_cancelled")]
    {
        let stored = app.get(&format!("/api/v1/questions/{id}")).await;
        assert_eq!(returned.json, stored.json, "returned and read back");
        let announced = events.iter().find(|(_, kind, _)| kind == event_type).expect("announced");
        assert_eq!(announced.2["question"], stored.json, "announced and read back");
    }
    assert_eq!(returned_answer.json["status"], "answered");
    assert_eq!(returned_answer.json["response"]["value"], json!({"count": 3, "zone": "eu-west-1"}));
    assert_eq!(returned_cancel.json["response"]["comment"], "not any more");
}

/// On SQLite a commit hands its event to the event hub, which passes it on without reading it back: what it hands
/// over must be the event as the log stores it, large or small. (PostgreSQL announces an event by its id, and the
/// hub reads it from the log.) Subscribers get both events either way.
async fn the_event_a_commit_hands_the_hub_is_the_event_the_log_stores(app: TestApp) {
    let base = app.serve().await;
    let stream = connect_events(&base, &app.token, None).await;
    let mut committed = app.state.store.committed_events();
    let small = json!({"title": "Ça va? 🚀", "project": "p-1", "context": {"z": 1, "a": [true, null, 1.5, "é"]}});
    let large = json!({"title": "Large", "body": "x".repeat(9_000)});
    for body in [small, large] {
        let id = ask(&app, body).await;
        let handed = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                // Looked at again now and then, not only on a change: under load the change that carries this
                // commit can be folded into one the loop has already seen.
                let _ = tokio::time::timeout(Duration::from_millis(250), committed.changed()).await;
                let newest = committed.borrow_and_update().clone();
                let is_ours = |question_id: Option<uuid::Uuid>| question_id.map(|q| q.to_string()) == Some(id.clone());
                match newest.handed_over.get(newest.last) {
                    Some(event) if is_ours(event.question_id) => return newest,
                    None if app
                        .state
                        .store
                        .events_after(newest.last - 1, 1)
                        .await
                        .unwrap()
                        .iter()
                        .any(|event| is_ours(event.question_id)) =>
                    {
                        return newest;
                    }
                    _ => {}
                }
            }
        })
        .await
        .expect("the commit reaches the hub");
        let logged = app.state.store.events_after(handed.last - 1, 1).await.unwrap();
        assert_eq!(logged.len(), 1);
        match handed.handed_over.get(handed.last) {
            Some(event) => {
                let logged = holdpoint::events::HubEvent::from(&logged[0]);
                let fields = |event: &holdpoint::events::HubEvent| {
                    (
                        event.id,
                        event.workspace_id,
                        event.event_type.clone(),
                        event.project.clone(),
                        event.run_id,
                        event.question_id,
                    )
                };
                assert_eq!(fields(&event), fields(&logged), "handed over and logged");
                let data = |event: &holdpoint::events::HubEvent| serde_json::from_str::<Value>(&event.data).unwrap();
                assert_eq!(data(&event), data(&logged), "handed over and logged");
            }
            None => assert_eq!(app.state.store.backend(), holdpoint::store::Backend::Postgres, "announced by id"),
        }
    }
    let events = read_events(stream, 2).await;
    assert_eq!(events[0].2["question"]["title"], "Ça va? 🚀");
    assert_eq!(events[1].2["question"]["body"].as_str().map(str::len), Some(9_000));
}

/// The hub hands a commit's event straight to subscribers when it is the next one of the log and reads the log
/// otherwise: under concurrent commits both paths interleave, and neither may lose, repeat or reorder an event. The
/// long-polls answer from the event that woke them.
async fn concurrent_asks_and_answers_reach_a_stream_once_each_in_order_and_long_polls_return_the_answer(app: TestApp) {
    const QUESTIONS: usize = 24;
    let base = app.serve().await;
    let stream = connect_events(&base, &app.token, None).await;
    let agent = app.create_token("default", Role::Agent).await;
    let client = reqwest::Client::new();
    let cycles = (0..QUESTIONS).map(|n| {
        let (client, base, agent, admin) = (client.clone(), base.clone(), agent.clone(), app.token.clone());
        async move {
            let asked: Value = client
                .post(format!("{base}/api/v1/questions"))
                .bearer_auth(&agent)
                .json(&json!({ "title": format!("Question {n}?") }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let id = asked["id"].as_str().unwrap().to_owned();
            let wait =
                client.get(format!("{base}/api/v1/questions/{id}/wait?timeout_seconds=20")).bearer_auth(&agent).send();
            let answer = client
                .post(format!("{base}/api/v1/questions/{id}/answer"))
                .bearer_auth(&admin)
                .json(&json!({ "value": format!("answer {n}") }))
                .send();
            let (waited, answered) = tokio::join!(wait, answer);
            assert_eq!(answered.unwrap().status(), StatusCode::OK);
            let waited: Value = waited.unwrap().json().await.unwrap();
            assert_eq!(waited["status"], "answered", "{waited}");
            assert_eq!(waited["response"]["value"], format!("answer {n}"));
            assert_eq!(
                waited,
                app_question(&client, &base, &agent, &id).await,
                "the long-poll returns what a read does"
            );
            id
        }
    });
    let ids: Vec<String> = futures::future::join_all(cycles).await;
    let events = read_events(stream, 2 * QUESTIONS).await;
    let event_ids: Vec<i64> = events.iter().map(|e| e.0).collect();
    assert!(event_ids.windows(2).all(|w| w[0] < w[1]), "in id order: {event_ids:?}");
    for id in &ids {
        let of_question: Vec<&str> =
            events.iter().filter(|e| e.2["question"]["id"] == id.as_str()).map(|e| e.1.as_str()).collect();
        assert_eq!(of_question, ["question_asked", "question_answered"], "each event once, asked first");
    }
}

async fn app_question(client: &reqwest::Client, base: &str, token: &str, id: &str) -> Value {
    client.get(format!("{base}/api/v1/questions/{id}")).bearer_auth(token).send().await.unwrap().json().await.unwrap()
}

async fn metrics_count_questions_answers_timeouts_and_requests(app: TestApp) {
    let answered = ask(&app, json!({"title": "a"})).await;
    ask(&app, json!({"title": "p", "kind": "non_blocking"})).await;
    let expired = ask(&app, json!({"title": "e", "timeout_seconds": 1})).await;
    app.post(&format!("/api/v1/questions/{answered}/answer"), json!({"value": "ok"})).await;
    wait_until_resolved(&app, &expired, Duration::from_secs(2)).await;
    let response = app.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(response.status, StatusCode::OK);
    let text = response.text;
    for expected in [
        "holdpoint_questions_created_total{kind=\"blocking\"} 2",
        "holdpoint_questions_created_total{kind=\"non_blocking\"} 1",
        "holdpoint_questions_resolved_total{kind=\"blocking\",status=\"answered\"} 1",
        "holdpoint_questions_resolved_total{kind=\"blocking\",status=\"expired\"} 1",
        "holdpoint_questions_timed_out_total{kind=\"blocking\",status=\"expired\"} 1",
        "holdpoint_question_time_to_answer_seconds_count{kind=\"blocking\"} 1",
        "holdpoint_questions_pending{kind=\"non_blocking\"} 1",
        "holdpoint_sse_subscribers 0",
        "holdpoint_http_request_duration_seconds_count{method=\"POST\",route=\"/api/v1/questions\",status=\"201\"} 3",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
}

/// How many times this instance's workers have looked for a queued run, as `/metrics` reports it.
async fn run_claim_attempts(app: &TestApp) -> u64 {
    let text = app.call(Method::GET, "/metrics", None, None).await.text;
    let counts: Vec<u64> = text
        .lines()
        .filter(|line| line.starts_with("holdpoint_run_claim_attempts_total{"))
        .map(|line| line.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(!counts.is_empty(), "no claim attempts reported in\n{text}");
    counts.iter().sum()
}

/// Workers look for queued runs when a run's status changes and every half second, not on every question event:
/// each look is a write transaction, which on SQLite waits for the one writer behind the questions' own.
async fn questions_do_not_send_the_runtime_looking_for_runs(app: TestApp) {
    const QUESTIONS: u32 = 20;
    // The workers look once as they start; the counter exists from then on.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !app.call(Method::GET, "/metrics", None, None).await.text.contains("holdpoint_run_claim_attempts_total{") {
        assert!(Instant::now() < deadline, "the workers never looked for a run");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = run_claim_attempts(&app).await;
    let started = Instant::now();
    for i in 0..QUESTIONS {
        let id = app.post("/api/v1/questions", json!({ "title": format!("q{i}") })).await.json["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let answered = app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": "ok" })).await;
        assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    }
    // Long enough for every event to reach the workers (on PostgreSQL through the notification).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let looks = run_claim_attempts(&app).await - before;
    // One look per poll interval (500 ms) that passed, and one for a poll already under way.
    let polls = started.elapsed().as_millis() as u64 / 500 + 2;
    assert!(
        looks <= polls,
        "{looks} looks for a run during {QUESTIONS} questions and answers ({} events) in {:?}; polls allow {polls}",
        2 * QUESTIONS,
        started.elapsed()
    );
}

/// A long-poll waits for its own question, however many other events pass meanwhile: more at once than the event
/// buffer holds (here, written by another instance, which this one reads from the log in one go) once made it give
/// up and answer with the question still pending, long before its time was up. One worker thread: the waiter then
/// cannot read while the hub hands the burst out, as on a busy server.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_long_poll_outlasts_a_burst_of_other_events_larger_than_the_buffer() {
    use tower::ServiceExt;
    let app = TestApp::start_with(common::Backend::Sqlite, |c| c.sse_buffer = 16).await.unwrap();
    let (_other_state, other_instance) = app.restart(|_| {}).await;
    let waited_on = ask(&app, json!({"title": "Waited on"})).await;
    let wait = {
        let router = app.router.clone();
        let request = axum::http::Request::get(format!("/api/v1/questions/{waited_on}/wait?timeout_seconds=20"))
            .header(axum::http::header::AUTHORIZATION, format!("Bearer {}", app.token))
            .body(axum::body::Body::empty())
            .unwrap();
        tokio::spawn(async move {
            let started = Instant::now();
            let response = router.oneshot(request).await.unwrap();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            (serde_json::from_slice::<Value>(&body).unwrap(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    for n in 0..40 {
        let request = axum::http::Request::post("/api/v1/questions")
            .header(axum::http::header::AUTHORIZATION, format!("Bearer {}", app.token))
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(json!({"title": format!("Other {n}"), "kind": "non_blocking"}).to_string()))
            .unwrap();
        assert_eq!(other_instance.clone().oneshot(request).await.unwrap().status(), StatusCode::CREATED);
    }
    // This instance reads the other's events from the log within its poll interval (1 s), all at once.
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.state.hub.position() < app.state.store.last_event_id().await.unwrap() {
        assert!(Instant::now() < deadline, "this instance never read the other's events");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!wait.is_finished(), "the long-poll returned before its question was answered");
    let answered = app.post(&format!("/api/v1/questions/{waited_on}/answer"), json!({"value": "done"})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    let (question, took) = tokio::time::timeout(Duration::from_secs(10), wait).await.unwrap().unwrap();
    assert_eq!(question["status"], "answered", "{question}");
    assert!(took < Duration::from_secs(15), "woken by the answer, not by the end of its wait ({took:?})");
}

/// A client that stops reading must not hold up the others: its stream ends with a `reconnect` event once it falls
/// behind, and a reconnect with its last id replays the rest from the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_event_client_never_blocks_the_others_and_catches_up_by_reconnecting() {
    let app = TestApp::start_with(common::Backend::Sqlite, |c| c.sse_buffer = 16).await.unwrap();
    let base = app.serve().await;
    let slow = connect_events(&base, &app.token, None).await;
    let fast = connect_events(&base, &app.token, None).await;
    // Large events, so the slow client's socket buffers fill and its stream stops being written.
    let body = "x".repeat(30 * 1024);
    let count = 300;
    let fast_reader = tokio::spawn(read_events(fast, count));
    for i in 0..count {
        ask(&app, json!({"title": format!("bulk {i}"), "body": body, "kind": "non_blocking"})).await;
    }
    let fast_events = fast_reader.await.unwrap();
    assert_eq!(fast_events.len(), count, "the fast client got every event while the slow one stalled");

    // The slow client now reads: some events, then the reconnect notice, then the end of the stream.
    let mut stream = slow.bytes_stream();
    let mut text = String::new();
    while let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.contains("event: reconnect"), "the slow client was told to reconnect");
    let last_id: i64 =
        text.lines().rev().find_map(|line| line.strip_prefix("id:").and_then(|id| id.trim().parse().ok())).unwrap_or(0);
    let delivered = text.matches("event: question_asked").count();
    assert!(delivered < count, "the slow client had fallen behind ({delivered} of {count} before the notice)");

    let rest = read_events(connect_events(&base, &app.token, Some(last_id)).await, count - delivered).await;
    let mut titles: Vec<String> = rest.iter().map(|e| e.2["question"]["title"].as_str().unwrap().to_owned()).collect();
    titles.dedup();
    assert_eq!(titles.len(), count - delivered);
    assert_eq!(titles.last().unwrap(), &format!("bulk {}", count - 1), "the replay reaches the newest event");
}
