//! Webhooks (docs/webhooks.md): a workspace's events reach its subscriptions, and a question's own events its
//! `callback_url`, signed per Standard Webhooks — every request checked by the `standardwebhooks` package in a receiver
//! process — in event order, at least once: retried while the receiver fails, kept through a SIGKILL, given up on `410
//! Gone` (which disables the subscription), and never sent into private address ranges without the opt-in. Callbacks
//! queue per workspace and URL, so one workspace's failing callbacks hold up no other's, and each names the URL it was
//! sent to in what is signed.

use crate::channels::receiver;
use crate::common;

use std::time::Duration;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{Backend, TestApp, assert_error};
use receiver::Receiver;
use serde_json::{Value, json};

on_both_backends!(
    deliveries_are_signed_retried_and_arrive_in_order,
    a_receiver_that_is_gone_disables_its_webhook_until_enabled,
    callbacks_carry_a_questions_own_events_signed_with_the_callback_secret,
    another_workspaces_failing_callbacks_to_the_same_url_hold_up_nothing,
    a_gone_answer_to_another_workspaces_callback_gives_up_nothing_of_ours,
    a_callback_names_the_url_it_was_sent_to_so_a_replay_elsewhere_is_told_apart,
    deliveries_pending_at_a_sigkill_are_all_sent_after_a_restart,
    private_and_malformed_urls_are_refused_and_change_nothing,
    a_new_url_takes_the_deliveries_still_waiting,
    a_redelivery_starts_its_retries_over,
);

async fn allowing_private(backend: Backend) -> Option<TestApp> {
    TestApp::start_with(backend, |config| config.channels.webhook_allow_private = true).await
}

async fn subscribe(app: &TestApp, receiver: &mut Receiver, path: &str, events: Value) -> (String, String) {
    let created = app.post("/api/v1/webhooks", json!({ "url": receiver.url(path), "events": events })).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let secret = created.json["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{}", created.text);
    receiver.trust(&secret).await;
    (created.json["id"].as_str().unwrap().to_owned(), secret)
}

async fn ask(app: &TestApp, title: &str) -> String {
    let asked = app.post("/api/v1/questions", json!({ "title": title })).await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    asked.json["id"].as_str().unwrap().to_owned()
}

/// The requests a receiver took (answered 2xx), until `count` of them, with every request (failed ones too) it got
/// on the way.
async fn taken(receiver: &mut Receiver, count: usize) -> (Vec<Value>, Vec<Value>) {
    let (mut taken, mut all) = (Vec::new(), Vec::new());
    while taken.len() < count {
        let request = receiver.next_request().await;
        assert_eq!(request["verified"], true, "a request failed Standard Webhooks verification: {request}");
        if request["answered"].as_u64().unwrap() < 300 {
            taken.push(request.clone());
        }
        all.push(request);
    }
    (taken, all)
}

fn ids(requests: &[Value]) -> Vec<i64> {
    requests.iter().map(|r| r["id"].as_str().unwrap().parse::<i64>().unwrap()).collect()
}

async fn deliveries_are_signed_retried_and_arrive_in_order(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut receiver = Receiver::start().await;
    let (webhook, _) = subscribe(&app, &mut receiver, "/hooks", json!(["question_asked", "question_answered"])).await;
    // The receiver fails its first two requests: the first event is tried three times (at once, ~1 s, ~5 s later)
    // and the events behind it wait their turn.
    receiver.command(json!({ "fail": 2, "status": 503 })).await;
    let first = ask(&app, "First?").await;
    ask(&app, "Second?").await;
    ask(&app, "Third?").await;
    let answered = app.post(&format!("/api/v1/questions/{first}/answer"), json!({ "value": "yes" })).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    let (accepted, all) = taken(&mut receiver, 4).await;
    let types: Vec<&str> = accepted.iter().map(|r| r["body"]["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["question_asked", "question_asked", "question_asked", "question_answered"]);
    let accepted_ids = ids(&accepted);
    assert!(accepted_ids.windows(2).all(|pair| pair[0] < pair[1]), "not in event order: {accepted_ids:?}");
    assert_eq!(all.len(), 6, "two failures, then four deliveries: {all:?}");
    assert_eq!(ids(&all[..3]), vec![accepted_ids[0]; 3], "the failing event is retried with the same webhook-id");
    let at = |r: &Value| r["received_at"].as_f64().unwrap();
    let (first_wait, second_wait) = (at(&all[1]) - at(&all[0]), at(&all[2]) - at(&all[1]));
    assert!((0.8..3.0).contains(&first_wait), "first retry after {first_wait:.2} s");
    assert!((4.0..8.0).contains(&second_wait), "second retry after {second_wait:.2} s");
    assert_eq!(accepted[0]["body"]["data"]["question"]["title"], "First?");
    assert_eq!(accepted[3]["body"]["data"]["question"]["status"], "answered");
    assert_eq!(accepted[0]["content_type"], "application/json");
    assert!(accepted[0]["body"]["timestamp"].as_str().unwrap().ends_with('Z'), "{}", accepted[0]);
    assert!(receiver.request_within(Duration::from_millis(1500)).await.is_none(), "a delivery was sent twice");
    let metrics = app.get("/metrics").await.text;
    assert!(metrics.contains("webhook_attempts_total{outcome=\"retried\"} 2"), "{metrics}");
    assert!(metrics.contains("webhook_attempts_total{outcome=\"sent\"} 4"), "{metrics}");

    // The deliveries as listed: newest first, each sent, the first after three attempts with the receiver's error.
    let listed = app.get(&format!("/api/v1/webhooks/{webhook}/deliveries")).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let items = listed.json["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{}", listed.text);
    assert!(items.iter().all(|d| d["status"] == "sent" && d["next_attempt_at"].is_null()), "{}", listed.text);
    let oldest = &items[3];
    assert_eq!((oldest["attempts"].as_u64(), oldest["response_status"].as_u64()), (Some(3), Some(204)));
    assert_eq!(oldest["message_id"], accepted_ids[0].to_string());
    let page = app.get(&format!("/api/v1/webhooks/{webhook}/deliveries?limit=3")).await;
    let cursor = page.json["next_cursor"].as_str().unwrap().to_owned();
    let rest = app.get(&format!("/api/v1/webhooks/{webhook}/deliveries?limit=3&cursor={cursor}")).await;
    assert_eq!(rest.json["items"].as_array().unwrap().len(), 1, "{}", rest.text);

    // Redelivered by hand: the same message again, with the same webhook-id; audited.
    let redelivered = app
        .post(&format!("/api/v1/webhooks/{webhook}/deliveries/{}/redeliver", oldest["id"].as_str().unwrap()), json!({}))
        .await;
    assert_eq!(redelivered.status, StatusCode::ACCEPTED, "{}", redelivered.text);
    let again = receiver.next_request().await;
    assert_eq!(
        (again["verified"].as_bool(), again["id"].as_str()),
        (Some(true), Some(accepted_ids[0].to_string().as_str()))
    );
    assert_eq!(again["body"], accepted[0]["body"], "a redelivery sends the same body");
    let audit = app.get("/api/v1/audit?action=webhook.redelivered").await;
    assert_eq!(audit.json["items"].as_array().unwrap().len(), 1, "{}", audit.text);

    // A test message goes through the same queue and answers with its first attempt.
    let test = app.post(&format!("/api/v1/webhooks/{webhook}/test"), json!({})).await;
    assert_eq!(test.status, StatusCode::OK, "{}", test.text);
    assert_eq!((test.json["status"].as_str(), test.json["event_type"].as_str()), (Some("sent"), Some("webhook_test")));
    let tested = receiver.next_request().await;
    assert_eq!(tested["verified"], true, "{tested}");
    assert_eq!(tested["body"]["type"], "webhook_test");
    assert!(tested["id"].as_str().unwrap().starts_with("test_"), "{tested}");
}

async fn a_receiver_that_is_gone_disables_its_webhook_until_enabled(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut receiver = Receiver::start().await;
    let (webhook, _) = subscribe(&app, &mut receiver, "/gone", json!(["question_asked"])).await;
    receiver.command(json!({ "fail_all": 410 })).await;
    ask(&app, "Anyone there?").await;
    let gone = receiver.next_request().await;
    assert_eq!(gone["answered"], 410, "{gone}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let shown = loop {
        let shown = app.get(&format!("/api/v1/webhooks/{webhook}")).await;
        if shown.json["disabled_at"].is_string() || tokio::time::Instant::now() > deadline {
            break shown;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(shown.json["disabled_at"].is_string(), "{}", shown.text);
    assert!(shown.json["disabled_reason"].as_str().unwrap().contains("410"), "{}", shown.text);
    ask(&app, "Still there?").await;
    assert!(receiver.request_within(Duration::from_secs(3)).await.is_none(), "a receiver that answered 410 got more");
    let listed = app.get(&format!("/api/v1/webhooks/{webhook}/deliveries")).await;
    let items = listed.json["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "nothing is queued for a disabled webhook: {}", listed.text);
    assert_eq!((items[0]["status"].as_str(), items[0]["response_status"].as_u64()), (Some("failed"), Some(410)));
    let test = app.post(&format!("/api/v1/webhooks/{webhook}/test"), json!({})).await;
    assert_error(&test, StatusCode::CONFLICT, "conflict");

    // Enabled again, it gets the events from then on.
    receiver.command(json!({ "fail_all": null })).await;
    let enabled = app
        .call(
            Method::PATCH,
            &format!("/api/v1/webhooks/{webhook}"),
            Some(&app.token),
            Some(json!({ "disabled": false })),
        )
        .await;
    assert_eq!(enabled.status, StatusCode::OK, "{}", enabled.text);
    assert!(enabled.json["disabled_at"].is_null(), "{}", enabled.text);
    ask(&app, "Back?").await;
    let back = receiver.next_request().await;
    assert_eq!(
        (back["answered"].as_u64(), back["body"]["data"]["question"]["title"].as_str()),
        (Some(204), Some("Back?"))
    );
    let audit = app.get("/api/v1/audit?action=webhook.changed").await;
    assert_eq!(audit.json["items"].as_array().unwrap().len(), 1, "{}", audit.text);
}

async fn callbacks_carry_a_questions_own_events_signed_with_the_callback_secret(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut receiver = Receiver::start().await;
    let secret = app.get("/api/v1/webhooks/callback-secret").await;
    assert_eq!(secret.status, StatusCode::OK, "{}", secret.text);
    let first_secret = secret.json["secret"].as_str().unwrap().to_owned();
    assert_eq!(app.get("/api/v1/webhooks/callback-secret").await.json["secret"], first_secret.as_str());
    receiver.trust(&first_secret).await;

    let callback = receiver.url("/callback/one");
    let asked = app.post("/api/v1/questions", json!({ "title": "Ship it?", "callback_url": callback })).await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    assert_eq!(asked.json["callback_url"], callback.as_str());
    let id = asked.json["id"].as_str().unwrap().to_owned();
    ask(&app, "Not this one").await;
    app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": "ship" })).await;
    let (requests, _) = taken(&mut receiver, 2).await;
    let seen: Vec<(&str, &str)> =
        requests.iter().map(|r| (r["path"].as_str().unwrap(), r["body"]["type"].as_str().unwrap())).collect();
    assert_eq!(seen, [("/callback/one", "question_asked"), ("/callback/one", "question_answered")]);
    assert!(requests.iter().all(|r| r["body"]["data"]["question"]["id"] == id.as_str()));
    assert!(receiver.request_within(Duration::from_secs(1)).await.is_none(), "another question's event was sent");

    // Rotated: what is sent from then on is signed with the new secret only.
    let rotated = app.post("/api/v1/webhooks/callback-secret", json!({})).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let new_secret = rotated.json["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, first_secret);
    let mut checker = Receiver::start().await;
    checker.trust(&new_secret).await;
    app.post("/api/v1/questions", json!({ "title": "Rotated?", "callback_url": checker.url("/cb") })).await;
    let signed = checker.next_request().await;
    assert_eq!((signed["verified"].as_bool(), signed["answered"].as_u64()), (Some(true), Some(204)), "{signed}");
    let audit = app.get("/api/v1/audit?action=callback_secret.rotated").await;
    assert_eq!(audit.json["items"].as_array().unwrap().len(), 1, "{}", audit.text);
    assert!(!audit.text.contains(&new_secret), "the audit log shows no secret");
}

/// The `default` workspace's callback secret, trusted by `receiver`.
async fn trust_callbacks(app: &TestApp, receiver: &mut Receiver) -> String {
    let secret = app.get("/api/v1/webhooks/callback-secret").await;
    assert_eq!(secret.status, StatusCode::OK, "{}", secret.text);
    let secret = secret.json["secret"].as_str().unwrap().to_owned();
    receiver.trust(&secret).await;
    secret
}

/// Asks a question with `callback_url` as the holder of `token`; returns its id.
async fn ask_with_callback(app: &TestApp, token: &str, title: &str, callback_url: &str) -> String {
    let asked = app
        .call(
            Method::POST,
            "/api/v1/questions",
            Some(token),
            Some(json!({ "title": title, "callback_url": callback_url })),
        )
        .await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    asked.json["id"].as_str().unwrap().to_owned()
}

/// The next request about question `id` within `wait`, with the others the receiver got on the way.
async fn request_about(receiver: &mut Receiver, id: &str, wait: Duration) -> (Option<Value>, Vec<Value>) {
    let deadline = tokio::time::Instant::now() + wait;
    let mut others = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(request) = receiver.request_within(left).await else { return (None, others) };
        if request["body"]["data"]["question"]["id"] == id {
            return (Some(request), others);
        }
        others.push(request);
    }
}

/// Workspace B names A's receiver as a callback: the receiver knows only A's secret, so it refuses B's messages
/// and B's are retried for days. They are B's queue alone: A's callback to the same URL goes at once.
async fn another_workspaces_failing_callbacks_to_the_same_url_hold_up_nothing(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut receiver = Receiver::start().await;
    trust_callbacks(&app, &mut receiver).await;
    let callback = receiver.url("/callback");
    let other = app.create_token("other", Role::Admin).await;

    let theirs = ask_with_callback(&app, &other, "Theirs?", &callback).await;
    let refused = receiver.next_request().await;
    assert_eq!((refused["verified"].as_bool(), refused["answered"].as_u64()), (Some(false), Some(401)), "{refused}");
    assert_eq!(refused["body"]["data"]["question"]["id"], theirs.as_str());

    let ours = ask_with_callback(&app, &app.token, "Ours?", &callback).await;
    let (delivered, before) = request_about(&mut receiver, &ours, Duration::from_secs(5)).await;
    let delivered =
        delivered.unwrap_or_else(|| panic!("our callback waited behind theirs; the receiver got {before:?}"));
    assert_eq!((delivered["verified"].as_bool(), delivered["answered"].as_u64()), (Some(true), Some(204)));
    assert!(before.iter().all(|r| r["body"]["data"]["question"]["id"] == theirs.as_str()), "{before:?}");

    // Theirs is still retried, with the same webhook-id, and still refused.
    let (retried, _) = request_about(&mut receiver, &theirs, Duration::from_secs(10)).await;
    let retried = retried.expect("their callback is retried");
    assert_eq!((retried["id"].as_str(), retried["answered"].as_u64()), (refused["id"].as_str(), Some(401)));
}

/// A `410 Gone` answering workspace B's callback gives up B's queue for that URL, not A's: A's callback, failing
/// for a moment when B's was refused, is delivered once the receiver takes it.
async fn a_gone_answer_to_another_workspaces_callback_gives_up_nothing_of_ours(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut receiver = Receiver::start().await;
    trust_callbacks(&app, &mut receiver).await;
    let callback = receiver.url("/callback");
    let other = app.create_token("other", Role::Admin).await;
    receiver.command(json!({ "fail_all": 503 })).await;

    let theirs = ask_with_callback(&app, &other, "Theirs?", &callback).await;
    let refused = receiver.next_request().await;
    assert_eq!((refused["verified"].as_bool(), refused["answered"].as_u64()), (Some(false), Some(401)), "{refused}");
    let ours = ask_with_callback(&app, &app.token, "Ours?", &callback).await;
    // Their retry (about a second after their first attempt) is told the URL is gone.
    receiver.command(json!({ "unverified": 410 })).await;
    let (gone, _) = request_about(&mut receiver, &theirs, Duration::from_secs(10)).await;
    let gone = gone.expect("their callback is retried");
    assert_eq!(gone["answered"], 410, "{gone}");
    // Ours keeps failing a little longer: whatever attempt of ours races the giving up of theirs is refused too, so
    // only a retry (one that was not given up) can deliver it.
    let (none, ours_meanwhile) = request_about(&mut receiver, &theirs, Duration::from_secs(2)).await;
    assert!(none.is_none(), "their callback was sent after the receiver said it is gone: {none:?}");
    assert!(ours_meanwhile.iter().all(|r| r["answered"] == 503), "{ours_meanwhile:?}");

    receiver.command(json!({ "fail_all": null })).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let delivered = loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let (request, others) = request_about(&mut receiver, &ours, left).await;
        assert!(others.is_empty(), "their callback was sent after the receiver said it is gone: {others:?}");
        let request = request.expect("our callback was given up with theirs");
        if request["answered"] == 204 {
            break request;
        }
        assert_eq!(request["answered"], 503, "{request}");
    };
    assert_eq!(delivered["verified"], true, "{delivered}");
    assert_eq!(delivered["body"]["data"]["question"]["id"], ours.as_str());

    // The URL still takes our callbacks; theirs is never sent again.
    let next = ask_with_callback(&app, &app.token, "Ours again?", &callback).await;
    let (again, others) = request_about(&mut receiver, &next, Duration::from_secs(10)).await;
    assert_eq!(again.expect("our next callback is sent")["answered"], 204);
    assert!(others.is_empty(), "{others:?}");
    assert!(receiver.request_within(Duration::from_secs(2)).await.is_none(), "their callback was sent again");
}

/// Every callback of a workspace is signed with the same secret, so the signature alone does not say which receiver
/// a message was for: what is signed names the callback URL and the question, and a receiver that checks them (as
/// docs/webhooks.md asks) tells a replay from elsewhere apart.
async fn a_callback_names_the_url_it_was_sent_to_so_a_replay_elsewhere_is_told_apart(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut first = Receiver::start().await;
    let mut second = Receiver::start().await;
    let secret = trust_callbacks(&app, &mut first).await;
    second.trust(&secret).await;
    let url = first.url("/callbacks/first");
    let id = ask_with_callback(&app, &app.token, "Bound?", &url).await;
    let sent = first.next_request().await;
    assert_eq!((sent["verified"].as_bool(), sent["answered"].as_u64()), (Some(true), Some(204)), "{sent}");
    assert_eq!(sent["body"]["data"]["question"]["callback_url"], url.as_str());
    assert_eq!(sent["body"]["data"]["question"]["id"], id.as_str());
    assert_eq!(sent["names_own_url"], true, "{sent}");

    // The same request, replayed by whoever received it to another receiver of the workspace's callbacks: its
    // signature verifies, and its body names another URL.
    let replayed = reqwest::Client::new()
        .post(second.url("/callbacks/second"))
        .header("content-type", "application/json")
        .header("webhook-id", sent["id"].as_str().unwrap())
        .header("webhook-timestamp", sent["timestamp"].as_str().unwrap())
        .header("webhook-signature", sent["signature"].as_str().unwrap())
        .body(sent["raw"].as_str().unwrap().to_owned())
        .send()
        .await
        .unwrap();
    assert!(replayed.status().is_success(), "{}", replayed.status());
    let seen = second.next_request().await;
    assert_eq!(seen["verified"], true, "{seen}");
    assert_eq!(seen["names_own_url"], false, "{seen}");
}

async fn deliveries_pending_at_a_sigkill_are_all_sent_after_a_restart(backend: Backend) {
    // This instance only sets up; server processes queue and send.
    let Some(app) = TestApp::start_with(backend, |config| {
        config.run_workers = false;
        config.channels.webhook_allow_private = true;
    })
    .await
    else {
        return;
    };
    let mut receiver = Receiver::start().await;
    subscribe(&app, &mut receiver, "/crash", json!(["question_asked"])).await;
    receiver.command(json!({ "fail_all": 503 })).await;
    let env = [("HOLDPOINT_WEBHOOK_ALLOW_PRIVATE", "true".to_owned())];
    let process = app.spawn_process_with(&env).await;
    let client = reqwest::Client::new();
    let mut titles = Vec::new();
    for n in 0..5 {
        let title = format!("Before the crash {n}?");
        let response = client
            .post(format!("{}/api/v1/questions", process.base_url))
            .bearer_auth(&app.token)
            .json(&json!({ "title": title }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        titles.push(title);
    }
    let refused = receiver.next_request().await;
    assert_eq!(refused["answered"], 503, "{refused}");
    process.kill().await;
    // Asked while no server process runs: queued from the log by the next one.
    for n in 0..3 {
        let title = format!("While down {n}?");
        ask(&app, &title).await;
        titles.push(title);
    }
    receiver.command(json!({ "fail_all": null })).await;
    let _restarted = app.spawn_process_with(&env).await;
    let (accepted, _) = taken(&mut receiver, titles.len()).await;
    let received: Vec<&str> =
        accepted.iter().map(|r| r["body"]["data"]["question"]["title"].as_str().unwrap()).collect();
    assert_eq!(received, titles, "every event once, in order");
    assert!(receiver.request_within(Duration::from_millis(1500)).await.is_none(), "a delivery was sent twice");
}

async fn private_and_malformed_urls_are_refused_and_change_nothing(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://[fd00::1]/hook",
    ] {
        let refused = app.post("/api/v1/webhooks", json!({ "url": url, "events": ["question_asked"] })).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(
            error["details"]["fields"]["url"].as_str().unwrap().contains("HOLDPOINT_WEBHOOK_ALLOW_PRIVATE"),
            "{url}: {error}"
        );
        let question = app.post("/api/v1/questions", json!({ "title": "Call me?", "callback_url": url })).await;
        let error = assert_error(&question, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"]["callback_url"].is_string(), "{url}: {error}");
    }
    for (body, field) in [
        (json!({ "url": "ftp://example.com/x", "events": ["question_asked"] }), "url"),
        (json!({ "url": "https://user:pw@93.184.216.34/x", "events": ["question_asked"] }), "url"),
        (json!({ "url": "https://93.184.216.34/x", "events": [] }), "events"),
        (json!({ "url": "https://93.184.216.34/x", "events": ["question_asked", "question_asked"] }), "events"),
        (
            json!({ "url": "https://93.184.216.34/x", "events": ["question_asked"], "description": "d".repeat(201) }),
            "description",
        ),
    ] {
        let refused = app.post("/api/v1/webhooks", body.clone()).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"][field].is_string(), "{body}: {error}");
    }
    let unknown_event =
        app.post("/api/v1/webhooks", json!({ "url": "https://93.184.216.34/x", "events": ["everything"] })).await;
    assert_error(&unknown_event, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert_eq!(app.get("/api/v1/webhooks").await.json, json!({ "items": [] }), "a refused webhook was stored");
    assert_eq!(app.get("/api/v1/questions").await.json["items"], json!([]), "a refused question was stored");
    let unknown = app.get("/api/v1/webhooks/00000000-0000-0000-0000-000000000000").await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "not_found");
}

/// A subscription moved to a new URL (its old receiver down) sends what still waits in its queue to the new one;
/// what was sent or given up keeps the address it went to.
async fn a_new_url_takes_the_deliveries_still_waiting(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut receiver = Receiver::start().await;
    let (webhook, _) = subscribe(&app, &mut receiver, "/old", json!(["question_asked"])).await;
    receiver.command(json!({ "fail_all": 503 })).await;
    ask(&app, "Moved?").await;
    let failed = receiver.next_request().await;
    assert_eq!((failed["path"].as_str(), failed["answered"].as_u64()), (Some("/old"), Some(503)), "{failed}");

    let moved = app
        .call(
            axum::http::Method::PATCH,
            &format!("/api/v1/webhooks/{webhook}"),
            Some(&app.token),
            Some(json!({ "url": receiver.url("/new") })),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.text);
    receiver.command(json!({ "fail_all": null })).await;
    let (taken, _) = taken(&mut receiver, 1).await;
    assert_eq!(taken[0]["path"], "/new", "{}", taken[0]);
    assert_eq!(taken[0]["body"]["data"]["question"]["title"], "Moved?");
    newest_once_sent(&app, &webhook).await;
}

/// The subscription's newest delivery once it is recorded as sent: a moment after the receiver has the request, as
/// its answer is recorded then.
async fn newest_once_sent(app: &TestApp, webhook: &str) -> Value {
    let mut listed = Value::Null;
    for _ in 0..200 {
        listed = app.get(&format!("/api/v1/webhooks/{webhook}/deliveries")).await.json;
        if listed["items"][0]["status"] == "sent" {
            return listed["items"][0].clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the delivery was not recorded as sent: {listed}")
}

/// A delivery redelivered by hand is retried from the start of the schedule (about 1 s, 5 s, 30 s), however many
/// attempts it took before: a receiver back from an outage with one more hiccup gets it a second later, not an hour.
async fn a_redelivery_starts_its_retries_over(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    let mut receiver = Receiver::start().await;
    let (webhook, _) = subscribe(&app, &mut receiver, "/hooks", json!(["question_asked"])).await;
    receiver.command(json!({ "fail": 2, "status": 503 })).await;
    ask(&app, "Again?").await;
    taken(&mut receiver, 1).await;
    let delivery = newest_once_sent(&app, &webhook).await;
    assert_eq!(delivery["attempts"], 3, "{delivery}");

    receiver.command(json!({ "fail": 1, "status": 503 })).await;
    let path = format!("/api/v1/webhooks/{webhook}/deliveries/{}/redeliver", delivery["id"].as_str().unwrap());
    assert_eq!(app.post(&path, json!({})).await.status, StatusCode::ACCEPTED);
    let refused = receiver.next_request().await;
    assert_eq!(refused["answered"], 503, "{refused}");
    let retried = receiver.request_within(Duration::from_secs(5)).await.expect("retried within seconds");
    assert_eq!(retried["answered"].as_u64().map(|status| status < 300), Some(true), "{retried}");
    let wait = retried["received_at"].as_f64().unwrap() - refused["received_at"].as_f64().unwrap();
    assert!((0.8..3.0).contains(&wait), "retried after {wait:.2} s");
}
