//! Who a question reaches and how the outbox gets it to them (docs/notifications.md): notifications and deliveries
//! written with the question, the notification center, claims that hand each delivery to one worker, retries, and email
//! through a real SMTP server to the `holdpoint` binary's outbox, and Slack through a stand-in of its Web API with
//! clicks signed as Slack signs them.

use crate::channels::mailing;
use crate::channels::push_service;
use crate::channels::slack_standin;
use crate::channels::smtp;
use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{Backend, Session, TestApp, assert_error};
use holdpoint::workers::outbox::Outbox;
use mailing::{PASSWORD, person};
use serde_json::{Value, json};

on_both_backends!(
    a_question_reaches_the_people_it_is_for_on_the_channels_they_chose,
    the_notification_center_is_each_persons_own,
    a_failing_channel_is_retried_with_backoff_and_each_delivery_claimed_once,
    an_email_reaches_a_real_smtp_server_through_the_servers_outbox,
    a_form_of_rich_fields_reaches_email_as_a_summary_with_a_link_to_answer_it,
    deliveries_outlive_an_smtp_outage_and_a_killed_server,
    two_server_processes_send_each_delivery_once,
    slack_asks_with_buttons_answers_signed_clicks_as_the_mapped_member_and_updates_the_message,
    slack_posts_a_question_once_in_a_configured_channel_where_anyone_mapped_answers,
    a_form_of_rich_fields_is_answered_in_a_slack_modal_of_block_kit_inputs,
    a_new_email_finds_the_members_slack_id,
    web_push_reaches_each_subscribed_browser_answers_through_its_actions_and_is_replaced_once_resolved,
    a_person_sends_themselves_a_test_message_by_email,
    a_question_handed_to_a_delegate_reaches_them,
    a_slack_id_a_member_claims_maps_nothing_until_an_admin_proves_it,
    a_slack_click_says_where_a_quorum_stands_and_who_holds_the_claim,
    a_member_who_leaves_is_sent_nothing_more,
);

/// A server whose email goes to `smtp` (a URL).
pub async fn start(backend: Backend, smtp: &str) -> Option<TestApp> {
    let smtp = smtp.to_owned();
    TestApp::start_with(backend, move |config| {
        config.channels.smtp_url = Some(smtp.parse().unwrap());
        config.channels.email_from = Some("Holdpoint <holdpoint@example.com>".parse().unwrap());
    })
    .await
}

/// Nothing listens on port 1 of the loopback address: every connection is refused at once.
const NOBODY: &str = "smtp://127.0.0.1:1?tls=none";

async fn ask(app: &TestApp, body: Value) -> String {
    let asked = app.post("/api/v1/questions", body).await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    asked.json["id"].as_str().unwrap().to_owned()
}

/// `(recipient, channel, status)` of a question's deliveries, sorted.
async fn deliveries(app: &TestApp, question: &str) -> Vec<(String, String, String)> {
    let listed = app.get(&format!("/api/v1/questions/{question}/deliveries")).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let mut items: Vec<_> = listed.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let text = |key: &str| d[key].as_str().unwrap().to_owned();
            (text("recipient"), text("channel"), text("status"))
        })
        .collect();
    items.sort();
    items
}

/// The question ids of a person's notifications, newest first.
async fn notified(app: &TestApp, session: &Session, query: &str) -> (Vec<String>, Value) {
    let page = app.session_call(session, Method::GET, &format!("/api/v1/notifications{query}"), None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let ids = page.json["items"].as_array().unwrap().iter().map(|n| n["question"]["id"].as_str().unwrap().to_owned());
    (ids.collect(), page.json)
}

fn email(who: &str) -> (String, String, String) {
    (who.to_owned(), "email".to_owned(), "queued".to_owned())
}

async fn a_question_reaches_the_people_it_is_for_on_the_channels_they_chose(backend: Backend) {
    let Some(app) = start(backend, NOBODY).await else { return };
    let alice = person(&app, "alice", Role::Approver, Some("alice@example.com")).await;
    let bob = person(&app, "bob", Role::Responder, Some("bob@example.com")).await;
    let vic = person(&app, "vic", Role::Viewer, Some("vic@example.com")).await;
    let dave = person(&app, "dave", Role::Admin, Some("dave@example.com")).await;
    let quiet = json!({ "email": { "min_urgency": "off" }, "web": { "min_urgency": "high" } });
    let set = app.session_call(&dave, Method::PUT, "/api/v1/me/notifications", Some(quiet)).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);

    // An approval (high by default) is for approvers and admins; email reaches those whose threshold it meets.
    let approval = ask(
        &app,
        json!({ "kind": "approval", "title": "Deploy to production?",
                "action": { "tool_name": "shell", "arguments": { "command": "make deploy" } } }),
    )
    .await;
    assert_eq!(
        deliveries(&app, &approval).await,
        vec![email("alice")],
        "dave turned email off; bob and vic may not approve"
    );
    // A normal question is for responders and up; email waits for `high`, the web list takes everything but dave's.
    let normal = ask(&app, json!({ "title": "Which region first?", "urgency": "normal" })).await;
    assert_eq!(deliveries(&app, &normal).await, vec![]);
    // An assigned question is for its assignee only.
    let assigned =
        ask(&app, json!({ "title": "Rotate the key?", "urgency": "critical", "assignee": { "user": "bob" } })).await;
    assert_eq!(deliveries(&app, &assigned).await, vec![email("bob")]);

    assert_eq!(notified(&app, &alice, "").await.0, vec![normal.clone(), approval.clone()]);
    assert_eq!(notified(&app, &bob, "").await.0, vec![assigned.clone(), normal.clone()]);
    assert_eq!(notified(&app, &vic, "").await.0, Vec::<String>::new(), "a viewer answers nothing");
    assert_eq!(notified(&app, &dave, "").await.0, vec![approval.clone()], "dave's web threshold is high");

    // The deliveries say who they are for by name, and are the question's readers' to see.
    let listed = app.get(&format!("/api/v1/questions/{approval}/deliveries")).await;
    let item = &listed.json["items"][0];
    assert_eq!((item["attempts"].as_u64(), item["last_error"].is_null()), (Some(0), true), "{item}");
    assert!(item["next_attempt_at"].is_string(), "{item}");
    let other = app.create_token("elsewhere", Role::Admin).await;
    let foreign = app.call(Method::GET, &format!("/api/v1/questions/{approval}/deliveries"), Some(&other), None).await;
    assert_error(&foreign, StatusCode::NOT_FOUND, "not_found");
    let agent = app.create_token("default", Role::Agent).await;
    let not_its_own =
        app.call(Method::GET, &format!("/api/v1/questions/{approval}/deliveries"), Some(&agent), None).await;
    assert_error(&not_its_own, StatusCode::NOT_FOUND, "not_found");
}

async fn the_notification_center_is_each_persons_own(backend: Backend) {
    let Some(app) = start(backend, NOBODY).await else { return };
    let alice = person(&app, "alice", Role::Approver, None).await;
    let bob = person(&app, "bob", Role::Approver, None).await;
    let mut asked = Vec::new();
    for n in 0..3 {
        asked.push(ask(&app, json!({ "title": format!("Question {n}?"), "response_type": "boolean" })).await);
    }
    let (ids, page) = notified(&app, &alice, "").await;
    assert_eq!(ids, asked.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(page["unread"], 3);
    assert!(
        page["items"].as_array().unwrap().iter().all(|n| n["action_status"] == "pending" && n["read_at"].is_null())
    );

    // Pages follow each other through the cursor.
    let (first, page) = notified(&app, &alice, "?limit=2").await;
    assert_eq!(first, vec![asked[2].clone(), asked[1].clone()]);
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (rest, page) = notified(&app, &alice, &format!("?limit=2&cursor={cursor}")).await;
    assert_eq!((rest, page["next_cursor"].clone()), (vec![asked[0].clone()], Value::Null));

    // Answered by anyone, it is done for everyone; reading is each person's own.
    let answered = app.post(&format!("/api/v1/questions/{}/answer", asked[1]), json!({ "value": true })).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    let (_, page) = notified(&app, &bob, "").await;
    let statuses: Vec<_> = page["items"].as_array().unwrap().iter().map(|n| n["action_status"].clone()).collect();
    assert_eq!(statuses, vec![json!("pending"), json!("done"), json!("pending")]);
    let alices = notified(&app, &alice, "").await.1;
    let first_id = alices["items"][0]["id"].as_str().unwrap().to_owned();
    let by_bob = app.session_call(&bob, Method::POST, &format!("/api/v1/notifications/{first_id}/read"), None).await;
    assert_error(&by_bob, StatusCode::NOT_FOUND, "not_found");
    let read = app.session_call(&alice, Method::POST, &format!("/api/v1/notifications/{first_id}/read"), None).await;
    assert_eq!(read.status, StatusCode::NO_CONTENT, "{}", read.text);
    let (unread, page) = notified(&app, &alice, "?unread=true").await;
    assert_eq!((unread, page["unread"].clone()), (vec![asked[1].clone(), asked[0].clone()], json!(2)));
    assert_eq!(notified(&app, &bob, "").await.1["unread"], 3, "bob's are bob's");
    let all = app.session_call(&alice, Method::POST, "/api/v1/notifications/read-all", None).await;
    assert_eq!(all.json, json!({ "marked": 2 }), "{}", all.text);
    assert_eq!(notified(&app, &alice, "").await.1["unread"], 0);

    // Tokens have no notifications; bad input changes nothing.
    let token = app.get("/api/v1/notifications").await;
    assert_error(&token, StatusCode::FORBIDDEN, "forbidden");
    let bad = app.session_call(&bob, Method::GET, "/api/v1/notifications?cursor=yesterday", None).await;
    assert_error(&bad, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let bad = app.session_call(&bob, Method::GET, "/api/v1/notifications?limit=0", None).await;
    assert_error(&bad, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let unknown = app.session_call(&bob, Method::POST, "/api/v1/notifications/nope/read", None).await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(notified(&app, &bob, "").await.1["unread"], 3);
}

fn outbox(app: &TestApp) -> Arc<Outbox> {
    Arc::new(
        Outbox::new(
            Arc::clone(&app.state.store),
            Arc::clone(&app.state.metrics),
            &app.state.config.channels,
            app.state.channel_keys.clone(),
            "http://holdpoint.test".into(),
        )
        .unwrap(),
    )
}

/// Waits until every delivery of `question` has left `queued` (its attempt recorded), and returns them.
async fn attempted(app: &TestApp, question: &str) -> Vec<Value> {
    for _ in 0..200 {
        let listed = app.get(&format!("/api/v1/questions/{question}/deliveries")).await.json;
        let items = listed["items"].as_array().unwrap().clone();
        if items.iter().all(|d| d["status"] != "queued") {
            return items;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the outbox did not record its attempt")
}

/// A delivery still waiting (queued, or retrying through an outage) when its person leaves the workspace is never
/// sent: it would carry the question, its context and its arguments to someone who may no longer see them.
async fn a_member_who_leaves_is_sent_nothing_more(backend: Backend) {
    let Some((app, question, _)) = tried_once_through_an_outage(backend).await else { return };
    let members = app.get("/api/v1/members").await.json;
    let alice = members["items"].as_array().unwrap().iter().find(|m| m["username"] == "alice").unwrap().clone();
    let path = format!("/api/v1/members/{}", alice["user_id"].as_str().unwrap());
    assert_eq!(app.call(Method::DELETE, &path, Some(&app.token), None).await.status, StatusCode::NO_CONTENT);
    let listed = app.get(&format!("/api/v1/questions/{question}/deliveries")).await.json;
    let of = |who: &str| listed["items"].as_array().unwrap().iter().find(|d| d["recipient"] == who).unwrap().clone();
    let (left, stayed) = (of("alice"), of("bob"));
    assert_eq!(left["status"], "failed", "{left}");
    assert!(left["last_error"].as_str().unwrap().contains("left the workspace"), "{left}");
    assert!(left["next_attempt_at"].is_null(), "{left}");
    assert_eq!(stayed["status"], "retrying", "{stayed}");
}

/// A server whose mail cannot be sent, and a question to alice and bob by email that its outbox tried once: the
/// server, the question's id and its deliveries as tried.
async fn tried_once_through_an_outage(backend: Backend) -> Option<(TestApp, String, Vec<Value>)> {
    let app = start(backend, NOBODY).await?;
    for name in ["alice", "bob"] {
        person(&app, name, Role::Approver, Some(&format!("{name}@example.com"))).await;
    }
    let question = ask(&app, json!({ "title": "Ship it?", "response_type": "boolean", "urgency": "high" })).await;
    assert_eq!(outbox(&app).send_due().await.unwrap(), 2);
    let tried = attempted(&app, &question).await;
    Some((app, question, tried))
}

async fn a_failing_channel_is_retried_with_backoff_and_each_delivery_claimed_once(backend: Backend) {
    let Some((app, _, tried)) = tried_once_through_an_outage(backend).await else { return };
    let outbox = outbox(&app);
    for delivery in &tried {
        assert_eq!(
            (delivery["status"].as_str(), delivery["attempts"].as_u64()),
            (Some("retrying"), Some(1)),
            "{delivery}"
        );
        assert!(delivery["last_error"].as_str().unwrap().contains("SMTP"), "{delivery}");
        let next: chrono::DateTime<chrono::Utc> = delivery["next_attempt_at"].as_str().unwrap().parse().unwrap();
        let wait = next - chrono::Utc::now();
        assert!(wait > chrono::Duration::seconds(5) && wait <= chrono::Duration::seconds(10), "{delivery}");
    }
    assert_eq!(outbox.send_due().await.unwrap(), 0, "nothing is due before its backoff has passed");
    // The admins' view of the channels: email is configured, failing, with two deliveries waiting.
    let health = app.get("/api/v1/channels").await;
    assert_eq!(health.status, StatusCode::OK, "{}", health.text);
    let email = health.json["items"].as_array().unwrap().iter().find(|c| c["channel"] == "email").unwrap().clone();
    assert_eq!((email["configured"].as_bool(), email["waiting"].as_u64()), (Some(true), Some(2)), "{email}");
    assert!(email["last_error"].as_str().unwrap().contains("SMTP") && email["last_failure_at"].is_string(), "{email}");
    assert!(email["last_sent_at"].is_null(), "{email}");
    let slack = health.json["items"].as_array().unwrap().iter().find(|c| c["channel"] == "slack").unwrap().clone();
    assert_eq!((slack["configured"].as_bool(), slack["waiting"].as_u64()), (Some(false), Some(0)), "{slack}");
    let metrics = app.get("/metrics").await.text;
    assert!(metrics.contains("deliveries_total{channel=\"email\",outcome=\"retried\"} 2"), "{metrics}");

    // Many due deliveries, claimed by two instances at once: each is handed out exactly once.
    for n in 0..20 {
        ask(&app, json!({ "title": format!("Batch {n}?"), "urgency": "critical" })).await;
    }
    let (second, _) = app.restart(|_| {}).await;
    let stores = [Arc::clone(&app.state.store), Arc::clone(&second.store)];
    let claims = stores.iter().map(|store| {
        let store = Arc::clone(store);
        tokio::spawn(async move {
            let mut claimed = Vec::new();
            loop {
                let at = holdpoint::store::now();
                let batch = store.claim_deliveries(at, at + chrono::Duration::minutes(5), 7).await.unwrap();
                if batch.is_empty() {
                    return claimed;
                }
                claimed.extend(batch.into_iter().map(|d| d.id));
            }
        })
    });
    let claimed: Vec<Vec<uuid::Uuid>> =
        futures::future::join_all(claims).await.into_iter().map(Result::unwrap).collect();
    let all: Vec<uuid::Uuid> = claimed.concat();
    let distinct: HashSet<_> = all.iter().collect();
    assert_eq!(
        (all.len(), distinct.len()),
        (40, 40),
        "claimed by each: {:?}",
        claimed.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

async fn an_email_reaches_a_real_smtp_server_through_the_servers_outbox(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let smtp = sink.url();
    let Some(app) = start(backend, &smtp).await else { return };
    person(&app, "alice", Role::Approver, Some("alice@example.com")).await;
    person(&app, "carl", Role::Approver, Some("unknown@example.com")).await;
    let server = app
        .spawn_process_with(&[
            ("HOLDPOINT_SMTP_URL", smtp.clone()),
            ("HOLDPOINT_EMAIL_FROM", "Holdpoint <holdpoint@example.com>".into()),
            ("HOLDPOINT_PUBLIC_URL", "https://holdpoint.example.com".into()),
        ])
        .await;
    let client = reqwest::Client::new();
    let asked: Value = client
        .post(format!("{}/api/v1/questions", server.base_url))
        .bearer_auth(&app.token)
        .json(&json!({ "kind": "approval", "title": "Apply the plan to production?",
            "action": { "tool_name": "shell", "arguments": { "command": "terraform apply" } } }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = asked["id"].as_str().unwrap().to_owned();

    let message = sink.next_message().await;
    assert_eq!(message["rcpt_tos"], json!(["alice@example.com"]), "{message}");
    assert_eq!(message["subject"], "[HIGH] Approval: Apply the plan to production?");
    let text = message.to_string();
    assert!(text.contains("Apply the plan to production?"), "{message}");
    assert!(text.contains("https://holdpoint.example.com/act/"), "the action links point at the public URL: {message}");
    assert!(text.contains(&format!("https://holdpoint.example.com/questions/{id}")), "{message}");

    // Sent to alice; refused for good for carl's address, with the server's reason.
    let mut items = Vec::new();
    for _ in 0..200 {
        items = app.get(&format!("/api/v1/questions/{id}/deliveries")).await.json["items"].as_array().unwrap().clone();
        if items.iter().all(|d| d["status"] == "sent" || d["status"] == "failed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let by_recipient = |who: &str| items.iter().find(|d| d["recipient"] == who).unwrap().clone();
    let (sent, refused) = (by_recipient("alice"), by_recipient("carl"));
    assert_eq!((sent["status"].as_str(), sent["attempts"].as_u64()), (Some("sent"), Some(1)), "{sent}");
    assert!(sent["sent_at"].is_string() && sent["next_attempt_at"].is_null(), "{sent}");
    assert_eq!(refused["status"], "failed", "{refused}");
    assert!(refused["last_error"].as_str().unwrap().contains("550"), "{refused}");

    // The links, taken from the HTML part as a mail client shows them, followed on the server itself.
    let link = |text: &str| {
        let links = message["parts"][1]["links"].as_array().unwrap();
        let href = links.iter().find(|l| l["text"] == text).unwrap()["href"].as_str().unwrap();
        href.replace("https://holdpoint.example.com", &server.base_url)
    };
    let (approve, reject) = (link("Approve"), link("Reject"));
    let question = || async { app.get(&format!("/api/v1/questions/{id}")).await.json };
    let opened = client.get(&approve).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let page = opened.text().await.unwrap();
    assert!(page.contains("Answer <strong>Approve</strong> as <strong>alice</strong>?"), "{page}");
    assert!(page.contains("terraform apply"), "the confirmation shows what is approved: {page}");
    assert_eq!(question().await["status"], "pending", "opening a link changes nothing");

    // A link is bound to its person: the same link made out to carl is not one this Holdpoint issued.
    let token = approve.rsplit('/').next().unwrap();
    let (payload, tag) = token.split_once('.').unwrap();
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut claims: Value = serde_json::from_slice(&engine.decode(payload).unwrap()).unwrap();
    let carl = app.get("/api/v1/members").await.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["username"] == "carl")
        .unwrap()["user_id"]
        .clone();
    claims["r"] = carl;
    let as_carl = format!("{}/act/{}.{tag}", server.base_url, engine.encode(serde_json::to_vec(&claims).unwrap()));
    let forged = client.post(&as_carl).send().await.unwrap();
    assert_eq!(forged.status(), 400);
    assert!(forged.text().await.unwrap().contains("This link is not valid"));
    assert_eq!(question().await["status"], "pending");

    // Confirmed: answered as alice, through email, on the record.
    let answered = client.post(&approve).send().await.unwrap();
    assert_eq!(answered.status(), 200);
    assert!(answered.text().await.unwrap().contains("Your answer is recorded as alice"));
    let now = question().await;
    assert_eq!((now["status"].as_str(), now["answered_by"].as_str()), (Some("answered"), Some("alice")), "{now}");
    assert_eq!(now["response"]["value"], true);
    let audit = app.get("/api/v1/audit?action=question.answered").await.json;
    let entry = audit["items"].as_array().unwrap().iter().find(|e| e["subject_id"] == id.as_str()).unwrap().clone();
    assert_eq!((entry["actor"].as_str(), entry["actor_kind"].as_str()), (Some("alice"), Some("human")), "{entry}");
    assert_eq!(entry["after"]["channel"], "email", "{entry}");

    // Used, and the other answer's link after it: nothing more is answered.
    for again in [&approve, &reject] {
        let refused = client.post(again).send().await.unwrap();
        assert_eq!(refused.status(), 409);
        assert!(refused.text().await.unwrap().contains("already answered by alice"));
    }
    let opened = client.get(&reject).send().await.unwrap();
    assert_eq!(opened.status(), 409);
    assert_eq!(question().await["response"]["value"], true);
}

/// A form of rich fields (docs/api.md) reaches email as what it asks for, field by field with its bounds and a table's
/// columns, and a link to answer it in Holdpoint; no one-click link, as a form is not one value.
async fn a_form_of_rich_fields_reaches_email_as_a_summary_with_a_link_to_answer_it(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let Some(app) = start(backend, &sink.url()).await else { return };
    person(&app, "alice", Role::Responder, Some("alice@example.com")).await;
    outbox(&app).spawn(&app.state.hub);
    let id = ask(
        &app,
        json!({ "title": "Size the <cluster>", "urgency": "high", "response_type": "form", "fields": [
            { "key": "nodes", "label": "Nodes", "response_type": "integer", "required": true, "min": 1, "max": 9,
              "description": "Worker nodes" },
            { "key": "start", "label": "Start", "response_type": "datetime" },
            { "key": "disks", "label": "Disks", "response_type": "table", "max_rows": 4,
              "columns": [{ "key": "size", "label": "Size (GiB)", "response_type": "integer", "required": true },
                          { "key": "ssd", "label": "SSD?", "response_type": "boolean" }] },
            { "key": "plan", "label": "Plan", "response_type": "file", "accept": ["application/pdf"] }
        ] }),
    )
    .await;
    let message = sink.next_message().await;
    assert_eq!(message["rcpt_tos"], json!(["alice@example.com"]), "{message}");
    assert_eq!(message["subject"], "[HIGH] Question: Size the <cluster>");
    let text = message["parts"][0]["content"].as_str().unwrap().replace("\r\n", "\n");
    let answer_url = format!("http://holdpoint.test/questions/{id}");
    let expected = format!(
        "What is asked:\n\
         \x20 - Nodes (required): a whole number from 1 to 9\n\
         \x20     Worker nodes\n\
         \x20 - Start: a date and time with its time zone\n\
         \x20 - Disks: a table of at most 4 rows\n\
         \x20     with the columns:\n\
         \x20       Size (GiB): a whole number, required\n\
         \x20       SSD?: yes or no\n\
         \x20 - Plan: a file (application/pdf)\n\
         \nAnswer in Holdpoint: {answer_url}\n"
    );
    assert!(text.ends_with(&expected), "{text}");
    assert!(!text.contains("/act/"), "no one-click link for a form: {text}");
    // The HTML part as a mail client shows it: the same summary, and one link, to answer in Holdpoint.
    let html = &message["parts"][1];
    let shown = html["text"].as_str().unwrap();
    for needle in ["Size the <cluster>", "Nodes (required): a whole number from 1 to 9", "Size (GiB): a whole number"] {
        assert!(shown.contains(needle), "{needle}: {shown}");
    }
    assert_eq!(html["links"], json!([{ "href": answer_url, "text": "Answer in Holdpoint" }]), "{html}");
}

/// The `holdpoint serve` environment of a server whose email goes to `smtp`, retrying after a second.
fn mailing(smtp: &str) -> Vec<(&'static str, String)> {
    vec![
        ("HOLDPOINT_SMTP_URL", smtp.to_owned()),
        ("HOLDPOINT_EMAIL_FROM", "Holdpoint <holdpoint@example.com>".into()),
        ("HOLDPOINT_DELIVERY_FIRST_RETRY_SECONDS", "1".into()),
    ]
}

async fn two_server_processes_send_each_delivery_once(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let smtp = sink.url();
    let Some(app) = start(backend, &smtp).await else { return };
    person(&app, "alice", Role::Approver, Some("alice@example.com")).await;
    let first = app.spawn_process_with(&mailing(&smtp)).await;
    let second = app.spawn_process_with(&mailing(&smtp)).await;
    let client = reqwest::Client::new();
    // Asked through both, so both outboxes wake for every question (each follows the other's events too).
    const QUESTIONS: usize = 24;
    for n in 0..QUESTIONS {
        let base = if n % 2 == 0 { &first.base_url } else { &second.base_url };
        let asked = client
            .post(format!("{base}/api/v1/questions"))
            .bearer_auth(&app.token)
            .json(&json!({ "title": format!("Ship build {n}?"), "response_type": "boolean", "urgency": "high" }))
            .send()
            .await
            .unwrap();
        assert_eq!(asked.status(), 201);
    }
    let mut subjects = Vec::new();
    for _ in 0..QUESTIONS {
        subjects.push(sink.next_message().await["subject"].as_str().unwrap().to_owned());
    }
    assert!(sink.message_within(Duration::from_millis(1500)).await.is_none(), "a delivery was sent twice");
    subjects.sort();
    subjects.dedup();
    assert_eq!(subjects.len(), QUESTIONS, "each question's email arrived once: {subjects:?}");
}

async fn deliveries_outlive_an_smtp_outage_and_a_killed_server(backend: Backend) {
    // A port of the loopback address where nothing listens until the SMTP server comes up.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let smtp = format!("smtp://127.0.0.1:{port}?tls=none");
    let Some(app) = start(backend, &smtp).await else { return };
    person(&app, "alice", Role::Approver, Some("alice@example.com")).await;
    person(&app, "bob", Role::Approver, Some("bob@example.com")).await;
    let server = app.spawn_process_with(&mailing(&smtp)).await;
    let client = reqwest::Client::new();
    let ask_there = |title: &'static str| {
        let request = client
            .post(format!("{}/api/v1/questions", server.base_url))
            .bearer_auth(&app.token)
            .json(&json!({ "title": title, "response_type": "boolean", "urgency": "high" }));
        async move { request.send().await.unwrap().json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned() }
    };
    let waiting = ask_there("Restart the cache?").await;
    let answered = ask_there("Purge the CDN?").await;

    // The outage: every attempt is refused and retried, and the questions stay answerable.
    for question in [&waiting, &answered] {
        let tried = attempted(&app, question).await;
        assert!(tried.iter().all(|d| d["status"] == "retrying"), "{tried:?}");
    }
    let answer = client
        .post(format!("{}/api/v1/questions/{answered}/answer", server.base_url))
        .bearer_auth(&app.token)
        .json(&json!({ "value": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    // The server is killed with deliveries queued, between two attempts (one in flight would stay claimed by the
    // dead server for the claim's five minutes); the SMTP server comes up; another server takes over.
    let between_attempts = || async {
        for _ in 0..400 {
            let mut quiet = true;
            for question in [&waiting, &answered] {
                let listed = app.get(&format!("/api/v1/questions/{question}/deliveries")).await.json;
                for delivery in listed["items"].as_array().unwrap() {
                    let next = delivery["next_attempt_at"]
                        .as_str()
                        .map(|at| at.parse::<chrono::DateTime<chrono::Utc>>().unwrap());
                    let due_soon =
                        next.is_some_and(|at| at - chrono::Utc::now() < chrono::Duration::milliseconds(1500));
                    quiet &= delivery["status"] != "queued" && !due_soon;
                }
            }
            if quiet {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the deliveries were never between two attempts")
    };
    between_attempts().await;
    drop(server);
    let mut sink = smtp::Sink::start_on(port).await;
    let _server = app.spawn_process_with(&mailing(&smtp)).await;
    let mut received = Vec::new();
    for _ in 0..2 {
        let message = sink.next_message().await;
        assert_eq!(message["subject"], "[HIGH] Question: Restart the cache?", "{message}");
        received.push(message["rcpt_tos"][0].as_str().unwrap().to_owned());
    }
    received.sort();
    assert_eq!(received, vec!["alice@example.com", "bob@example.com"]);
    assert!(sink.message_within(Duration::from_secs(3)).await.is_none(), "each person gets the question once");
    let listed = app.get(&format!("/api/v1/questions/{waiting}/deliveries")).await.json;
    for delivery in listed["items"].as_array().unwrap() {
        assert_eq!(delivery["status"], "sent", "{delivery}");
        assert!(delivery["attempts"].as_u64().unwrap() >= 2, "{delivery}");
    }
    // What was answered during the outage is not sent afterwards: the list says why.
    let listed = app.get(&format!("/api/v1/questions/{answered}/deliveries")).await.json;
    for delivery in listed["items"].as_array().unwrap() {
        assert_eq!(delivery["status"], "failed", "{delivery}");
        assert!(delivery["last_error"].as_str().unwrap().contains("answered first"), "{delivery}");
    }
}

/// Waits until the Slack stand-in has accepted `count` calls of `method`, and returns them.
async fn slack_calls(stand_in: &slack_standin::StandIn, method: &str, count: usize) -> Vec<Value> {
    for _ in 0..200 {
        let calls: Vec<Value> =
            stand_in.calls().into_iter().filter(|(m, _)| m == method).map(|(_, args)| args).collect();
        if calls.len() >= count {
            return calls;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("Slack's stand-in did not get {count} {method}: {:?}", stand_in.calls())
}

/// Posts a Slack interaction to the server as Slack would, signed with `secret` at `timestamp`.
async fn interact(app: &TestApp, body: &str, secret: &str, timestamp: i64) -> common::TestResponse {
    let signed = slack_standin::slack_signed(secret, body, timestamp);
    let mut request = axum::http::Request::post("/integrations/slack/interactions");
    for (name, value) in &signed {
        request = request.header(name, value);
    }
    app.send(request.body(axum::body::Body::from(body.to_owned())).unwrap()).await
}

/// The button labelled `label` of a posted message.
fn button<'a>(message: &'a Value, label: &str) -> &'a Value {
    let actions = message["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap();
    actions["elements"].as_array().unwrap().iter().find(|b| b["text"]["text"] == label).unwrap()
}

/// A server that sends on Slack through a stand-in (posting in `channel` when given), with approvers alice (Slack
/// user `U0ALICE`), bob (`U0BOB`) and carol (no Slack id).
async fn start_with_slack(backend: Backend, channel: Option<&str>) -> Option<(TestApp, slack_standin::StandIn)> {
    use slack_standin::{BOT_TOKEN, SIGNING_SECRET, StandIn};
    let (stand_in, api_url) = StandIn::start().await;
    let channel = channel.map(str::to_owned);
    let app = TestApp::start_with(backend, move |config| {
        config.channels.slack_bot_token = Some(BOT_TOKEN.parse().unwrap());
        config.channels.slack_signing_secret = Some(SIGNING_SECRET.parse().unwrap());
        config.channels.slack_api_url = api_url;
        config.channels.slack_channel = channel;
    })
    .await?;
    for (name, slack_id) in [("alice", Some("U0ALICE")), ("bob", Some("U0BOB")), ("carol", None)] {
        let member = app.add_person(name, PASSWORD, Role::Approver).await;
        if let Some(slack_id) = slack_id {
            let path = format!("/api/v1/members/{}", member["user_id"].as_str().unwrap());
            let set =
                app.call(Method::PATCH, &path, Some(&app.token), Some(json!({ "slack_user_id": slack_id }))).await;
            assert_eq!(set.status, StatusCode::OK, "{}", set.text);
        }
    }
    Some((app, stand_in))
}

/// A click that does not finish its question says so to whoever clicked: one approval of several is recorded and
/// they are told where the quorum stands; a question someone else has claimed is refused naming them.
async fn a_slack_click_says_where_a_quorum_stands_and_who_holds_the_claim(backend: Backend) {
    use holdpoint::channels::slack::MessageRef;
    use slack_standin::{SIGNING_SECRET, click_body};

    let Some((app, stand_in)) = start_with_slack(backend, None).await else { return };
    let form = format!("username=bob&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    let bob = app.sign_in_with(&form).await.expect("bob signs in");
    outbox(&app).spawn(&app.state.hub);
    let approval = json!({ "kind": "approval", "title": "Deploy to production?",
                           "action": { "tool_name": "shell", "arguments": { "command": "make deploy" } } });
    let mut two = approval.clone();
    two["required_approvals"] = json!(2);
    let two = ask(&app, two).await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 2).await;
    // The stand-in answers a direct message in the app's conversation, one `ts` per message, in the calls' order.
    let click_for_alice = |posted: &[Value], from: usize| {
        let i = from + posted[from..].iter().position(|m| m["channel"] == "U0ALICE").unwrap();
        let at = MessageRef { channel: "D0APPDM01".into(), ts: format!("1700000000.{:06}", 100 + i) };
        click_body(button(&posted[i], "Approve"), &at, "U0ALICE")
    };
    let now = chrono::Utc::now().timestamp();
    let clicked = interact(&app, &click_for_alice(&posted, 0), SIGNING_SECRET, now).await;
    assert_eq!(clicked.status, StatusCode::OK, "{}", clicked.text);
    let told = slack_calls(&stand_in, "chat.postEphemeral", 1).await;
    assert_eq!(told[0]["user"], "U0ALICE", "{}", told[0]);
    assert!(told[0]["text"].as_str().unwrap().contains("recorded: 1 of 2"), "{}", told[0]);
    assert_eq!(app.get(&format!("/api/v1/questions/{two}")).await.json["status"], "pending");

    let claimed = ask(&app, approval).await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 4).await;
    let claim = app.session_call(&bob, Method::POST, &format!("/api/v1/questions/{claimed}/claim"), None).await;
    assert_eq!(claim.status, StatusCode::OK, "{}", claim.text);
    let clicked = interact(&app, &click_for_alice(&posted, 2), SIGNING_SECRET, now).await;
    assert_eq!(clicked.status, StatusCode::OK, "{}", clicked.text);
    let told = slack_calls(&stand_in, "chat.postEphemeral", 2).await;
    assert!(told[1]["text"].as_str().unwrap().contains("claimed by bob"), "{}", told[1]);
    assert_eq!(app.get(&format!("/api/v1/questions/{claimed}")).await.json["status"], "pending");
}

async fn a_new_email_finds_the_members_slack_id(backend: Backend) {
    let Some((app, stand_in)) = start_with_slack(backend, None).await else { return };
    stand_in.add_person("carol@example.com", "U0CAROL");
    stand_in.add_person("dan@example.com", "U0DAN");
    let member_id = |name: &'static str| {
        let app = &app;
        async move {
            let members = app.get("/api/v1/members").await.json;
            let member = members["items"].as_array().unwrap().iter().find(|m| m["username"] == name).cloned();
            member.unwrap()["user_id"].as_str().unwrap().to_owned()
        }
    };
    let carol = member_id("carol").await;
    let path = format!("/api/v1/members/{carol}");

    // Carol has no Slack id: the new email an admin sets finds it, proven, and the audit entry records it.
    let set = app.call(Method::PATCH, &path, Some(&app.token), Some(json!({ "email": "carol@example.com" }))).await;
    assert_eq!((set.status, &set.json["slack_user_id"]), (StatusCode::OK, &json!("U0CAROL")), "{}", set.text);
    assert_eq!(set.json["slack_user_id_proven"], true);
    let audit = app.get(&format!("/api/v1/audit?action=addresses.changed&subject_id={carol}")).await.json;
    assert_eq!(audit["items"][0]["after"]["slack_user_id"], "U0CAROL", "{audit}");
    // An email Slack does not know leaves the id as it was: unknown there is not an error here.
    let dan = app.add_person("dan", PASSWORD, Role::Responder).await["user_id"].as_str().unwrap().to_owned();
    let unknown = app
        .call(
            Method::PATCH,
            &format!("/api/v1/members/{dan}"),
            Some(&app.token),
            Some(json!({ "email": "x@example.com" })),
        )
        .await;
    assert_eq!((unknown.status, &unknown.json["slack_user_id"]), (StatusCode::OK, &Value::Null), "{}", unknown.text);
    // An id given with the email is kept as given, and nothing is looked up.
    let lookups = || stand_in.calls().iter().filter(|(method, _)| method == "users.lookupByEmail").count();
    let before = lookups();
    let given = app
        .call(
            Method::PATCH,
            &format!("/api/v1/members/{dan}"),
            Some(&app.token),
            Some(json!({ "email": "dan@example.com", "slack_user_id": "U0GIVEN" })),
        )
        .await;
    assert_eq!(given.json["slack_user_id"], "U0GIVEN", "{}", given.text);
    // Nor is an email already known looked up again.
    let same = app.call(Method::PATCH, &path, Some(&app.token), Some(json!({ "email": "carol@example.com" }))).await;
    assert_eq!(same.status, StatusCode::OK);
    assert_eq!(lookups(), before, "{:?}", stand_in.calls());
    // People set their own address the same way.
    let form = format!("username=bob&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    let bob = app.sign_in_with(&form).await.expect("bob signs in");
    let cleared = app.session_call(&bob, Method::PATCH, "/api/v1/me", Some(json!({ "slack_user_id": null }))).await;
    assert_eq!(cleared.json["slack_user_id"], Value::Null, "{}", cleared.text);
    // An address a person types is not looked up before they verify it: it could be a colleague's.
    stand_in.add_person("bob@example.com", "U0BOB2");
    let mine = app.session_call(&bob, Method::PATCH, "/api/v1/me", Some(json!({ "email": "bob@example.com" }))).await;
    assert_eq!((mine.status, &mine.json["slack_user_id"]), (StatusCode::OK, &Value::Null), "{}", mine.text);
}

async fn slack_asks_with_buttons_answers_signed_clicks_as_the_mapped_member_and_updates_the_message(backend: Backend) {
    use holdpoint::channels::slack::MessageRef;
    use slack_standin::{SIGNING_SECRET, click_body};

    let Some((app, stand_in)) = start_with_slack(backend, None).await else { return };
    let form = format!("username=bob&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    let bob = app.sign_in_with(&form).await.expect("bob signs in");
    outbox(&app).spawn(&app.state.hub);

    // An approval reaches each approver with a Slack id as a direct message with its buttons.
    let approval = ask(
        &app,
        json!({ "kind": "approval", "title": "Deploy to production?",
                "action": { "tool_name": "shell", "arguments": { "command": "make deploy" } } }),
    )
    .await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 2).await;
    let mut to: Vec<&str> = posted.iter().map(|m| m["channel"].as_str().unwrap()).collect();
    to.sort_unstable();
    assert_eq!(to, ["U0ALICE", "U0BOB"], "carol has no Slack id");
    let sent = attempted(&app, &approval).await;
    assert!(sent.iter().all(|d| d["channel"] == "slack" && d["status"] == "sent"), "{sent:?}");
    let to_alice = posted.iter().find(|m| m["channel"] == "U0ALICE").unwrap();
    let labels: Vec<&str> = to_alice["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap())
        .map(|e| e["text"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Approve", "Reject", "With a comment…", "Open in Holdpoint"]);
    // The stand-in answers a direct message in the app's conversation, one `ts` per message; order follows the calls.
    let at = |i: usize| MessageRef { channel: "D0APPDM01".into(), ts: format!("1700000000.{:06}", 100 + i) };
    let alice_at = at(posted.iter().position(|m| m["channel"] == "U0ALICE").unwrap());
    let approve = click_body(button(to_alice, "Approve"), &alice_at, "U0ALICE");
    let status = || async { app.get(&format!("/api/v1/questions/{approval}")).await.json };
    let now = chrono::Utc::now().timestamp();

    // Refused, changing nothing: another secret's signature, a stale timestamp, a Slack user mapped to no member.
    let forged = interact(&app, &approve, "not-the-signing-secret", now).await;
    assert_error(&forged, StatusCode::UNAUTHORIZED, "unauthorized");
    let stale = interact(&app, &approve, SIGNING_SECRET, now - 301).await;
    assert_error(&stale, StatusCode::UNAUTHORIZED, "unauthorized");
    assert!(stale.text.contains("300"), "{}", stale.text);
    let not_signed = app
        .send(
            axum::http::Request::post("/integrations/slack/interactions")
                .header("content-type", "application/x-www-form-urlencoded")
                .body(axum::body::Body::from(approve.clone()))
                .unwrap(),
        )
        .await;
    assert_error(&not_signed, StatusCode::UNAUTHORIZED, "unauthorized");
    let stranger = click_body(button(to_alice, "Approve"), &alice_at, "U0MALLORY");
    let unmapped = interact(&app, &stranger, SIGNING_SECRET, now).await;
    assert_eq!(unmapped.status, StatusCode::OK, "Slack is told the click arrived: {}", unmapped.text);
    let told = slack_calls(&stand_in, "chat.postEphemeral", 1).await;
    assert_eq!((told[0]["user"].as_str(), told[0]["channel"].as_str()), (Some("U0MALLORY"), Some("D0APPDM01")));
    assert!(told[0]["text"].as_str().unwrap().contains("not linked"), "{}", told[0]);
    assert_eq!(status().await["status"], "pending");
    let garbled = interact(&app, "payload=%7Bnot-json", SIGNING_SECRET, now).await;
    assert_error(&garbled, StatusCode::BAD_REQUEST, "bad_request");
    assert_eq!(status().await["status"], "pending");

    // A signed click answers as the mapped member, through Slack, on the record.
    let clicked = interact(&app, &approve, SIGNING_SECRET, now).await;
    assert_eq!(clicked.status, StatusCode::OK, "{}", clicked.text);
    let answered = status().await;
    assert_eq!((answered["status"].as_str(), answered["answered_by"].as_str()), (Some("answered"), Some("alice")));
    assert_eq!(answered["response"]["value"], true);
    let audit = app.get("/api/v1/audit?action=question.answered").await.json;
    let entry =
        audit["items"].as_array().unwrap().iter().find(|e| e["subject_id"] == approval.as_str()).unwrap().clone();
    assert_eq!((entry["actor"].as_str(), entry["after"]["channel"].as_str()), (Some("alice"), Some("slack")));

    // Both messages now say how it was resolved, without buttons; a late click is told who answered.
    let updated = slack_calls(&stand_in, "chat.update", 2).await;
    for message in &updated {
        assert_eq!(message["channel"], "D0APPDM01");
        assert!(message["blocks"].as_array().unwrap().iter().all(|b| b["type"] != "actions"), "{message}");
        assert!(message["text"].as_str().unwrap().contains("Answered by alice"), "{message}");
    }
    let late = interact(&app, &click_body(button(to_alice, "Reject"), &alice_at, "U0BOB"), SIGNING_SECRET, now).await;
    assert_eq!(late.status, StatusCode::OK);
    let told = slack_calls(&stand_in, "chat.postEphemeral", 2).await;
    assert!(told[1]["text"].as_str().unwrap().contains("already answered by alice"), "{}", told[1]);
    assert_eq!(status().await["response"]["value"], true);

    // Answered in the web UI instead: the Slack messages follow.
    let question = ask(&app, json!({ "title": "Roll back?", "response_type": "boolean", "urgency": "critical" })).await;
    slack_calls(&stand_in, "chat.postMessage", 4).await;
    attempted(&app, &question).await;
    let path = format!("/api/v1/questions/{question}/answer");
    let answer = app.session_call(&bob, Method::POST, &path, Some(json!({ "value": false }))).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let updated = slack_calls(&stand_in, "chat.update", 4).await;
    assert!(updated[2..].iter().all(|m| m["text"].as_str().unwrap().contains("Answered by bob: *No*")), "{updated:?}");
    let listed = app.get(&format!("/api/v1/questions/{question}/deliveries")).await.json;
    assert!(listed["items"].as_array().unwrap().iter().all(|d| d["status"] == "sent"), "{listed}");
    assert_eq!(stand_in.calls().iter().filter(|(m, _)| m == "chat.update").count(), 4, "each message updated once");
    let health = app.get("/api/v1/channels").await.json;
    let slack = health["items"].as_array().unwrap().iter().find(|c| c["channel"] == "slack").unwrap().clone();
    assert_eq!((slack["configured"].as_bool(), slack["waiting"].as_u64()), (Some(true), Some(0)), "{slack}");
    assert!(slack["last_sent_at"].is_string() && slack["last_error"].is_null(), "{slack}");
    let metrics = app.get("/metrics").await.text;
    assert!(metrics.contains("deliveries_total{channel=\"slack\",outcome=\"sent\"} 4"), "{metrics}");
    assert!(metrics.contains("deliveries_total{channel=\"slack\",outcome=\"updated\"} 4"), "{metrics}");
}

async fn slack_posts_a_question_once_in_a_configured_channel_where_anyone_mapped_answers(backend: Backend) {
    use holdpoint::channels::slack::MessageRef;
    use slack_standin::{SIGNING_SECRET, click_body};

    let Some((app, stand_in)) = start_with_slack(backend, Some("C0QUESTIONS")).await else { return };
    outbox(&app).spawn(&app.state.hub);
    let question =
        ask(&app, json!({ "title": "Restart the cluster?", "response_type": "boolean", "urgency": "high" })).await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 1).await;
    assert_eq!(posted[0]["channel"], "C0QUESTIONS");
    let sent = attempted(&app, &question).await;
    assert_eq!(sent.len(), 1, "one post for everyone: {sent:?}");
    assert_eq!((sent[0]["recipient"].as_str(), sent[0]["status"].as_str()), (Some("alice"), Some("sent")));

    // Bob was not the delivery's recipient; in a channel, whoever is mapped answers as themselves.
    let at = MessageRef { channel: "C0QUESTIONS".into(), ts: "1700000000.000100".into() };
    let no = click_body(button(&posted[0], "No"), &at, "U0BOB");
    let clicked = interact(&app, &no, SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!(clicked.status, StatusCode::OK, "{}", clicked.text);
    let answered = app.get(&format!("/api/v1/questions/{question}")).await.json;
    assert_eq!((answered["answered_by"].as_str(), answered["response"]["value"].as_bool()), (Some("bob"), Some(false)));
    let updated = slack_calls(&stand_in, "chat.update", 1).await;
    assert_eq!(
        (updated[0]["channel"].as_str(), updated[0]["ts"].as_str()),
        (Some("C0QUESTIONS"), Some(at.ts.as_str()))
    );

    // A text question is answered in Slack's modal: "Answer…" opens it, its submission answers with the comment.
    let text = ask(&app, json!({ "title": "Name the release?", "response_type": "text", "urgency": "high" })).await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 2).await;
    let at = MessageRef { channel: "C0QUESTIONS".into(), ts: "1700000000.000101".into() };
    let open = click_body(button(&posted[1], "Answer…"), &at, "U0ALICE");
    let opened = interact(&app, &open, SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.text);
    let views = slack_calls(&stand_in, "views.open", 1).await;
    assert_eq!(views[0]["trigger_id"], "1337.42.abcdef");
    let view = &views[0]["view"];
    let submit = |user: &str| {
        let payload = json!({
            "type": "view_submission", "team": {"id": "T0001", "domain": "example"},
            "user": {"id": user, "username": user, "name": user, "team_id": "T0001"},
            "api_app_id": "A0001", "trigger_id": "789.012.def",
            "view": {"id": "V0001", "type": "modal", "callback_id": view["callback_id"],
                     "private_metadata": view["private_metadata"], "hash": "1700000002.abc",
                     "state": {"values": {
                         "answer": {"value": {"type": "plain_text_input", "value": "Comet"}},
                         "comment": {"value": {"type": "plain_text_input", "value": "from Slack"}}}}}
        });
        url::form_urlencoded::Serializer::new(String::new()).append_pair("payload", &payload.to_string()).finish()
    };
    // Submitted by a Slack user linked to nobody: the modal shows why, nothing is answered.
    let refused = interact(&app, &submit("U0MALLORY"), SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!(refused.status, StatusCode::OK);
    assert_eq!(refused.json["response_action"], "errors", "{}", refused.text);
    assert!(refused.json["errors"]["answer"].as_str().unwrap().contains("not linked"), "{}", refused.text);
    assert_eq!(app.get(&format!("/api/v1/questions/{text}")).await.json["status"], "pending");
    let submitted = interact(&app, &submit("U0ALICE"), SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!((submitted.status, submitted.text.as_str()), (StatusCode::OK, ""), "an empty 200 closes the modal");
    let answered = app.get(&format!("/api/v1/questions/{text}")).await.json;
    assert_eq!(
        (answered["answered_by"].as_str(), &answered["response"]["value"], answered["response"]["comment"].as_str()),
        (Some("alice"), &json!("Comet"), Some("from Slack")),
        "{answered}"
    );
    // "Answer…" on a resolved question opens a modal that says so.
    let reopened = interact(&app, &open, SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!(reopened.status, StatusCode::OK);
    let views = slack_calls(&stand_in, "views.open", 2).await;
    assert!(views[1]["view"].to_string().contains("already answered by alice"), "{}", views[1]);

    // A test message goes to the person's own Slack user, not to the questions' channel.
    let form = format!("username=alice&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    let alice = app.sign_in_with(&form).await.expect("alice signs in");
    let tested = test_message(&app, &alice, "slack").await;
    assert_eq!(tested.json, json!({ "channel": "slack", "sent": true, "error": null }), "{}", tested.text);
    let posted = slack_calls(&stand_in, "chat.postMessage", 3).await;
    assert_eq!(
        (posted[2]["channel"].as_str(), posted[2]["text"].as_str()),
        (Some("U0ALICE"), Some("Holdpoint: a test message"))
    );
}

/// A form of rich fields (docs/api.md) is answered in Slack's modal: Block Kit's own inputs, whose submitted state
/// becomes the answer (a date and time's Unix seconds as RFC 3339); a value the server refuses keeps the modal open
/// with the error under its input; a form with a required file is answered in Holdpoint, by link.
async fn a_form_of_rich_fields_is_answered_in_a_slack_modal_of_block_kit_inputs(backend: Backend) {
    use holdpoint::channels::slack::MessageRef;
    use slack_standin::{SIGNING_SECRET, click_body};

    let Some((app, stand_in)) = start_with_slack(backend, Some("C0QUESTIONS")).await else { return };
    outbox(&app).spawn(&app.state.hub);
    let question = ask(
        &app,
        json!({ "title": "Size the cluster", "urgency": "high", "response_type": "form", "fields": [
            { "key": "nodes", "label": "Nodes", "response_type": "integer", "required": true, "min": 1, "max": 9 },
            { "key": "when", "label": "When", "response_type": "datetime", "required": true },
            { "key": "canary", "label": "Canary?", "response_type": "boolean" },
            { "key": "regions", "label": "Regions", "response_type": "multi_choice",
              "options": [{ "value": "eu", "label": "Europe" }, { "value": "us", "label": "US" }] }] }),
    )
    .await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 1).await;
    assert!(posted[0]["blocks"].to_string().contains("Nodes (required): a whole number from 1 to 9"), "{}", posted[0]);
    let at = MessageRef { channel: "C0QUESTIONS".into(), ts: "1700000000.000100".into() };
    let open = click_body(button(&posted[0], "Answer…"), &at, "U0ALICE");
    let opened = interact(&app, &open, SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.text);
    let views = slack_calls(&stand_in, "views.open", 1).await;
    let view = &views[0]["view"];
    let inputs: Vec<(&str, &str)> = view["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "input")
        .map(|b| (b["block_id"].as_str().unwrap(), b["element"]["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        inputs,
        [
            ("field:0", "number_input"),
            ("field:1", "datetimepicker"),
            ("field:2", "radio_buttons"),
            ("field:3", "multi_static_select"),
            ("comment", "plain_text_input")
        ]
    );
    assert_eq!(view["blocks"][1]["element"]["max_value"], "9");
    let submit = |nodes: &str| {
        let payload = json!({
            "type": "view_submission", "team": {"id": "T0001", "domain": "example"},
            "user": {"id": "U0ALICE", "username": "alice", "name": "alice", "team_id": "T0001"},
            "api_app_id": "A0001", "trigger_id": "789.012.def",
            "view": {"id": "V0001", "type": "modal", "callback_id": view["callback_id"],
                     "private_metadata": view["private_metadata"], "hash": "1700000002.abc",
                     "state": {"values": {
                         "field:0": {"value": {"type": "number_input", "value": nodes}},
                         "field:1": {"value": {"type": "datetimepicker", "selected_date_time": 1_772_353_800}},
                         "field:2": {"value": {"type": "radio_buttons",
                                     "selected_option": {"text": {"type": "plain_text", "text": "Yes"}, "value": "true"}}},
                         "field:3": {"value": {"type": "multi_static_select", "selected_options": [
                             {"text": {"type": "plain_text", "text": "US"}, "value": "1"}]}},
                         "comment": {"value": {"type": "plain_text_input", "value": null}}}}}
        });
        url::form_urlencoded::Serializer::new(String::new()).append_pair("payload", &payload.to_string()).finish()
    };
    // Refused by the server (12 is more than 9): the modal stays open, the error under the input it is about.
    let refused = interact(&app, &submit("12"), SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!(refused.status, StatusCode::OK);
    assert_eq!(refused.json["response_action"], "errors", "{}", refused.text);
    let errors = refused.json["errors"].as_object().unwrap();
    assert_eq!(errors.keys().collect::<Vec<_>>(), ["field:0"], "{}", refused.text);
    assert!(errors["field:0"].as_str().unwrap().contains("at most 9"), "{}", refused.text);
    assert_eq!(app.get(&format!("/api/v1/questions/{question}")).await.json["status"], "pending");

    let submitted = interact(&app, &submit("3"), SIGNING_SECRET, chrono::Utc::now().timestamp()).await;
    assert_eq!((submitted.status, submitted.text.as_str()), (StatusCode::OK, ""), "an empty 200 closes the modal");
    let answered = app.get(&format!("/api/v1/questions/{question}")).await.json;
    assert_eq!(answered["answered_by"], "alice", "{answered}");
    assert_eq!(
        answered["response"]["value"],
        json!({ "nodes": 3, "when": "2026-03-01T08:30:00Z", "canary": true, "regions": ["us"] })
    );

    // A required file: Slack cannot take it, so the message offers only the way to answer in Holdpoint.
    ask(
        &app,
        json!({ "title": "The signed contract?", "urgency": "high", "response_type": "form", "fields": [
            { "key": "contract", "label": "Contract", "response_type": "file", "required": true },
            { "key": "note", "label": "Note", "response_type": "text" }] }),
    )
    .await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 2).await;
    let actions = posted[1]["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap();
    let labels: Vec<&str> =
        actions["elements"].as_array().unwrap().iter().map(|b| b["text"]["text"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Answer in Holdpoint"]);
}

/// Waits until the push endpoint has received `count` pushes, and returns them.
async fn pushes(endpoint: &push_service::Endpoint, count: usize) -> Vec<(axum::http::HeaderMap, axum::body::Bytes)> {
    for _ in 0..200 {
        let received = endpoint.received.lock().unwrap().clone();
        if received.len() >= count {
            return received;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the push endpoint did not receive {count} pushes")
}

async fn web_push_reaches_each_subscribed_browser_answers_through_its_actions_and_is_replaced_once_resolved(
    backend: Backend,
) {
    let (endpoint, origin) = push_service::start_endpoint().await;
    let Some(app) = TestApp::start_with(backend, |config| {
        config.channels.vapid_subject = Some("mailto:ops@example.com".into());
        config.channels.push_allow_http = true;
        config.channels.push_allow_private = true;
    })
    .await
    else {
        return;
    };
    let alice = person(&app, "alice", Role::Approver, None).await;
    let bob = person(&app, "bob", Role::Approver, None).await;
    let key = app.session_call(&alice, Method::GET, "/api/v1/push/public-key", None).await;
    assert_eq!(key.json["public_key"], app.state.channel_keys.vapid.public_key_encoded());
    assert_eq!(key.json["enabled"], true);

    // Alice subscribes a browser (twice: the same browser keeps its subscription) and one whose service has gone.
    let browser = push_service::push_check(&["subscribe"], None).await;
    let subscription = |endpoint: String, p256dh: &Value| {
        json!({ "endpoint": endpoint, "expirationTime": null,
                "keys": { "p256dh": p256dh, "auth": browser["auth"] } })
    };
    let path = "/api/v1/me/push-subscriptions";
    let laptop = subscription(format!("{origin}/push/alice-laptop"), &browser["p256dh"]);
    let first = app.session_call(&alice, Method::POST, path, Some(laptop.clone())).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    assert_eq!(first.json["push_service"], "127.0.0.1");
    let again = app.session_call(&alice, Method::POST, path, Some(laptop)).await;
    assert_eq!((again.status, &again.json["id"]), (StatusCode::CREATED, &first.json["id"]));
    let gone = subscription(format!("{origin}/push/gone"), &browser["p256dh"]);
    assert_eq!(app.session_call(&alice, Method::POST, path, Some(gone)).await.status, StatusCode::CREATED);
    // Refused, saving nothing: an endpoint that is no URL of a push service, a key that is no P-256 point.
    let bad_endpoint = subscription("ftp://push.example.com/1".into(), &browser["p256dh"]);
    let refused = app.session_call(&alice, Method::POST, path, Some(bad_endpoint)).await;
    assert!(assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid").to_string().contains("endpoint"));
    let bad_key = subscription(format!("{origin}/push/other"), &json!("AAAA"));
    let refused = app.session_call(&alice, Method::POST, path, Some(bad_key)).await;
    assert!(assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid").to_string().contains("p256dh"));
    let listed = app.session_call(&alice, Method::GET, path, None).await;
    assert_eq!(listed.json["items"].as_array().unwrap().len(), 2, "{}", listed.text);
    assert!(!listed.text.contains("/push/"), "endpoints are never listed: {}", listed.text);

    // An approval: pushed to each of alice's browsers, decrypted and verified independently; bob subscribed none.
    outbox(&app).spawn(&app.state.hub);
    let approval = ask(
        &app,
        json!({ "kind": "approval", "title": "Drop the staging database?",
                "action": { "tool_name": "sql", "arguments": { "query": "DROP DATABASE staging" } } }),
    )
    .await;
    let sent = attempted(&app, &approval).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0]["recipient"].as_str(), sent[0]["channel"].as_str()), (Some("alice"), Some("push")));
    assert_eq!(sent[0]["status"], "sent", "one browser took it: {sent:?}");
    let received = pushes(&endpoint, 1).await;
    let checked = push_service::read_push(&browser, &received[0].0, &received[0].1).await;
    let pushed: Value = serde_json::from_str(checked["plaintext"].as_str().unwrap()).unwrap();
    assert_eq!((pushed["type"].as_str(), pushed["tag"].as_str()), (Some("question"), Some(approval.as_str())));
    let actions: Vec<&str> =
        pushed["actions"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap()).collect();
    assert_eq!(actions, ["Approve", "Reject"]);
    assert_eq!(
        (checked["claims"]["aud"].as_str(), checked["claims"]["sub"].as_str()),
        (Some(origin.as_str()), Some("mailto:ops@example.com"))
    );
    let listed = app.session_call(&alice, Method::GET, path, None).await;
    assert_eq!(listed.json["items"].as_array().unwrap().len(), 1, "the gone browser is forgotten: {}", listed.text);

    // The Approve action answers as alice through push; the notification is then replaced (same tag).
    let approve = pushed["actions"][0]["url"].as_str().unwrap().strip_prefix("http://holdpoint.test").unwrap();
    let request = axum::http::Request::post(approve).body(axum::body::Body::empty()).unwrap();
    let answered = app.send(request).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    let question = app.get(&format!("/api/v1/questions/{approval}")).await.json;
    assert_eq!(
        (question["answered_by"].as_str(), question["response"]["value"].as_bool()),
        (Some("alice"), Some(true))
    );
    let audit = app.get("/api/v1/audit?action=question.answered").await.json;
    let entry = audit["items"].as_array().unwrap().iter().find(|e| e["subject_id"] == approval.as_str()).unwrap();
    assert_eq!(entry["after"]["channel"], "push", "{entry}");
    let received = pushes(&endpoint, 2).await;
    let checked = push_service::read_push(&browser, &received[1].0, &received[1].1).await;
    let replaced: Value = serde_json::from_str(checked["plaintext"].as_str().unwrap()).unwrap();
    assert_eq!((replaced["type"].as_str(), replaced["tag"].as_str()), (Some("resolved"), Some(approval.as_str())));
    assert_eq!(replaced["body"], "Answered by alice");
    assert_eq!(replaced["actions"], json!([]));

    // The service worker that shows pushes and the script that subscribes are served from the root, fresh each load.
    for (path, handler) in [("/service-worker.js", "onNotificationClick"), ("/push.js", "pushManager.subscribe")] {
        let script = app.get(path).await;
        assert_eq!(script.status, StatusCode::OK, "{path}");
        assert_eq!(script.headers["content-type"], "text/javascript; charset=utf-8", "{path}");
        assert_eq!(script.headers["cache-control"], "no-store", "{path}");
        assert!(script.text.contains(handler), "{path}");
    }

    // A member removed takes their subscribed browsers along.
    let bobs = subscription(format!("{origin}/push/bob-phone"), &browser["p256dh"]);
    assert_eq!(app.session_call(&bob, Method::POST, path, Some(bobs)).await.status, StatusCode::CREATED);
    let members = app.get("/api/v1/members").await.json;
    let bob_id = members["items"].as_array().unwrap().iter().find(|m| m["username"] == "bob").unwrap()["user_id"]
        .as_str()
        .unwrap()
        .parse::<uuid::Uuid>()
        .unwrap();
    let workspace = app.state.store.workspaces_of(bob_id).await.unwrap()[0];
    assert_eq!(app.state.store.push_subscriptions(workspace, bob_id).await.unwrap().len(), 1);
    let removed = app.call(Method::DELETE, &format!("/api/v1/members/{bob_id}"), Some(&app.token), None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    assert!(app.state.store.push_subscriptions(workspace, bob_id).await.unwrap().is_empty());

    // A test message reaches the browser too, decrypted as any push.
    let tested = test_message(&app, &alice, "push").await;
    assert_eq!(tested.json, json!({ "channel": "push", "sent": true, "error": null }), "{}", tested.text);
    let received = pushes(&endpoint, 3).await;
    let checked = push_service::read_push(&browser, &received[2].0, &received[2].1).await;
    let test: Value = serde_json::from_str(checked["plaintext"].as_str().unwrap()).unwrap();
    assert_eq!((test["type"].as_str(), test["tag"].as_str()), (Some("test"), Some("holdpoint-test")));

    // Unsubscribed: the next question pushes to nobody.
    let id = listed.json["items"][0]["id"].as_str().unwrap();
    let removed = app.session_call(&alice, Method::DELETE, &format!("{path}/{id}"), None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    let again = app.session_call(&alice, Method::DELETE, &format!("{path}/{id}"), None).await;
    assert_error(&again, StatusCode::NOT_FOUND, "not_found");
    // Each subscription and its removal is on the record, as alice, with the push service and never the endpoint.
    let audit = |action: &'static str| {
        let app = &app;
        async move {
            let page = app.get(&format!("/api/v1/audit?action={action}&actor=alice")).await;
            let entries = page.json["items"].as_array().unwrap().clone();
            assert!(entries.iter().all(|e| e["actor"] == "alice"), "{}", page.text);
            assert!(
                page.text.contains("\"push_service\":\"127.0.0.1\"") && !page.text.contains("/push/"),
                "{}",
                page.text
            );
            entries.len()
        }
    };
    assert_eq!(audit("push_subscription.added").await, 3, "the laptop twice, the gone browser once");
    assert_eq!(audit("push_subscription.removed").await, 1);
    let next = ask(&app, json!({ "title": "Ship it?", "response_type": "boolean", "urgency": "critical" })).await;
    assert_eq!(deliveries(&app, &next).await, vec![]);
    let nowhere = test_message(&app, &alice, "push").await;
    assert!(assert_error(&nowhere, StatusCode::CONFLICT, "conflict").to_string().contains("subscribed no browser"));
}

/// Asks for a test message on `channel` as `session`.
async fn test_message(app: &TestApp, session: &Session, channel: &str) -> common::TestResponse {
    let body = json!({ "channel": channel });
    app.session_call(session, Method::POST, "/api/v1/me/notifications/test", Some(body)).await
}

async fn a_person_sends_themselves_a_test_message_by_email(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let Some(app) = start(backend, &sink.url()).await else { return };
    let alice = person(&app, "alice", Role::Responder, Some("alice@example.com")).await;
    let bob = person(&app, "bob", Role::Responder, None).await;
    let sent = test_message(&app, &alice, "email").await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    assert_eq!(sent.json, json!({ "channel": "email", "sent": true, "error": null }));
    let message = sink.next_message().await;
    assert_eq!(message["rcpt_tos"], json!(["alice@example.com"]), "{message}");
    assert_eq!(message["subject"], "Holdpoint: a test message", "{message}");
    // What cannot be tried says why: no address, a channel this server does not send on, no such channel.
    let no_address = test_message(&app, &bob, "email").await;
    assert!(assert_error(&no_address, StatusCode::CONFLICT, "conflict").to_string().contains("no email address"));
    let no_slack = test_message(&app, &alice, "slack").await;
    assert!(assert_error(&no_slack, StatusCode::CONFLICT, "conflict").to_string().contains("Slack is not configured"));
    let unknown = test_message(&app, &alice, "pigeon").await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", unknown.text);
    // Nothing was written: a test message is no delivery.
    assert_eq!(app.get("/api/v1/channels").await.json["items"][0]["last_sent_at"], Value::Null);
}

/// Someone going away hands their questions to their delegate, who is reached as an escalation reaches people: a
/// notification, and a delivery on each channel they chose, caused by the hand-over.
async fn a_question_handed_to_a_delegate_reaches_them(backend: Backend) {
    let Some(app) = start(backend, NOBODY).await else { return };
    person(&app, "ana", Role::Approver, Some("ana@example.com")).await;
    let ben = person(&app, "ben", Role::Approver, Some("ben@example.com")).await;
    let id = ask(
        &app,
        json!({ "kind": "approval", "title": "Rotate the production keys?", "assignee": { "user": "ana" },
                "action": { "tool_name": "shell", "arguments": { "command": "rotate-keys --prod" } } }),
    )
    .await;
    assert_eq!(deliveries(&app, &id).await, [email("ana")]);
    assert!(notified(&app, &ben, "").await.0.is_empty(), "not ben's yet");

    let members = app.get("/api/v1/members").await.json;
    let ana = members["items"].as_array().unwrap().iter().find(|m| m["username"] == "ana").unwrap();
    let back = chrono::Utc::now() + chrono::Duration::days(2);
    let away = app
        .call(
            Method::PATCH,
            &format!("/api/v1/members/{}", ana["user_id"].as_str().unwrap()),
            Some(&app.token),
            Some(json!({ "away_until": back, "delegate": "ben" })),
        )
        .await;
    assert_eq!(away.status, StatusCode::OK, "{}", away.text);

    assert_eq!(deliveries(&app, &id).await, [email("ana"), email("ben")]);
    let listed = app.get(&format!("/api/v1/questions/{id}/deliveries")).await.json;
    let to_ben = listed["items"].as_array().unwrap().iter().find(|d| d["recipient"] == "ben").unwrap().clone();
    assert_eq!(to_ben["cause"], "escalated", "{to_ben}");
    assert_eq!(notified(&app, &ben, "").await.0, [id]);
}

/// Issue 51, finding 4: a Slack id is a member's only with proof. A member who claims a colleague's Slack id (or
/// types the colleague's address, which Slack would map to the colleague) neither receives the colleague's clicks
/// as their own nor anything else; an admin's setting proves an id, and a workspace holds each proven id once.
async fn a_slack_id_a_member_claims_maps_nothing_until_an_admin_proves_it(backend: Backend) {
    use holdpoint::channels::slack::MessageRef;
    use slack_standin::{SIGNING_SECRET, click_body};

    let Some((app, stand_in)) = start_with_slack(backend, None).await else { return };
    stand_in.add_person("carol@example.com", "U0CAROL");
    let carol = app.get("/api/v1/members").await.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["username"] == "carol")
        .unwrap()["user_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.add_person("dan", PASSWORD, Role::Approver).await;
    app.add_person("eve", PASSWORD, Role::Approver).await;
    let sign_in = |name: &'static str| {
        let app = &app;
        async move {
            let form = format!("username={name}&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
            app.sign_in_with(&form).await.expect("signs in")
        }
    };
    let (dan, eve) = (sign_in("dan").await, sign_in("eve").await);

    // Dan claims carol's Slack id; eve types carol's address. Neither is proven, and nothing is looked up for eve.
    let lookups = || stand_in.calls().iter().filter(|(method, _)| method == "users.lookupByEmail").count();
    let claimed =
        app.session_call(&dan, Method::PATCH, "/api/v1/me", Some(json!({ "slack_user_id": "U0CAROL" }))).await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.text);
    assert_eq!(
        (&claimed.json["slack_user_id"], &claimed.json["slack_user_id_proven"]),
        (&json!("U0CAROL"), &json!(false))
    );
    let before = lookups();
    let typed =
        app.session_call(&eve, Method::PATCH, "/api/v1/me", Some(json!({ "email": "carol@example.com" }))).await;
    assert_eq!((typed.status, &typed.json["slack_user_id"]), (StatusCode::OK, &Value::Null), "{}", typed.text);
    assert_eq!(lookups(), before, "an address eve typed is not looked up: {:?}", stand_in.calls());

    // An approval reaches the proven ids only (not dan's claim), and carol's click on it is nobody's.
    outbox(&app).spawn(&app.state.hub);
    let approval = ask(
        &app,
        json!({ "kind": "approval", "title": "Drop the table?",
                "action": { "tool_name": "sql", "arguments": { "statement": "DROP TABLE t" } } }),
    )
    .await;
    let posted = slack_calls(&stand_in, "chat.postMessage", 2).await;
    let mut to: Vec<&str> = posted.iter().map(|m| m["channel"].as_str().unwrap()).collect();
    to.sort_unstable();
    assert_eq!(to, ["U0ALICE", "U0BOB"], "an unproven id receives nothing");
    let to_alice = posted.iter().find(|m| m["channel"] == "U0ALICE").unwrap();
    let at = MessageRef {
        channel: "D0APPDM01".into(),
        ts: format!("1700000000.{:06}", 100 + posted.iter().position(|m| m["channel"] == "U0ALICE").unwrap()),
    };
    let now = chrono::Utc::now().timestamp();
    let as_carol = click_body(button(to_alice, "Approve"), &at, "U0CAROL");
    let clicked = interact(&app, &as_carol, SIGNING_SECRET, now).await;
    assert_eq!(clicked.status, StatusCode::OK, "{}", clicked.text);
    let question = app.get(&format!("/api/v1/questions/{approval}")).await.json;
    assert_eq!(question["status"], "pending", "carol's click is not dan's answer: {question}");
    let told = slack_calls(&stand_in, "chat.postEphemeral", 1).await;
    assert!(told[0]["text"].as_str().unwrap().contains("not linked"), "{}", told[0]);

    // An admin proves the id on carol: dan's claim goes, and carol's click is carol's.
    let path = format!("/api/v1/members/{carol}");
    let proven = app.call(Method::PATCH, &path, Some(&app.token), Some(json!({ "slack_user_id": "U0CAROL" }))).await;
    assert_eq!(
        (&proven.json["slack_user_id"], &proven.json["slack_user_id_proven"]),
        (&json!("U0CAROL"), &json!(true))
    );
    let mine = app.session_call(&dan, Method::PATCH, "/api/v1/me", Some(json!({}))).await;
    assert_eq!(mine.json["slack_user_id"], Value::Null, "{}", mine.text);
    let clicked = interact(&app, &as_carol, SIGNING_SECRET, now).await;
    assert_eq!(clicked.status, StatusCode::OK, "{}", clicked.text);
    let question = app.get(&format!("/api/v1/questions/{approval}")).await.json;
    assert_eq!((question["status"].as_str(), question["answered_by"].as_str()), (Some("answered"), Some("carol")));

    // A proven id is held once per workspace: proving alice's id on bob takes it from alice.
    let bob = app.get("/api/v1/members").await.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["username"] == "bob")
        .unwrap()["user_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let moved = app
        .call(
            Method::PATCH,
            &format!("/api/v1/members/{bob}"),
            Some(&app.token),
            Some(json!({ "slack_user_id": "U0ALICE" })),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.text);
    let members = app.get("/api/v1/members").await.json;
    let holders: Vec<&str> = members["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["slack_user_id"] == "U0ALICE")
        .map(|m| m["username"].as_str().unwrap())
        .collect();
    assert_eq!(holders, ["bob"], "{members}");
}
