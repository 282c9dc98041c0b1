//! Escalation (docs/notifications.md): a workspace's policy reminds the people a pending question reached, then hands
//! it to someone else, who become its assignee and are notified — each step an event, an audit entry and a round of
//! deliveries, taken once however many instances run the worker, and the mail of each step reaching a real SMTP server
//! in order.

use crate::channels::mailing;
use crate::channels::smtp;
use crate::common;

use std::time::Duration;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{Backend, TestApp, assert_error};
use mailing::{PASSWORD, person};
use serde_json::{Value, json};

on_both_backends!(
    policies_are_checked_whole_and_a_refused_change_keeps_the_old_ones,
    a_policy_reminds_then_escalates_in_order_with_events_deliveries_and_audit,
    an_escalation_to_someone_who_left_keeps_the_question_answerable,
    an_escalation_reaching_a_delegate_again_is_taken,
    an_escalation_hands_a_question_only_to_people_who_can_decide_it,
);

const POLICIES: &str = "/api/v1/escalation-policies";

async fn put_policies(app: &TestApp, body: Value) -> common::TestResponse {
    app.call(Method::PUT, POLICIES, Some(&app.token), Some(body)).await
}

async fn policies_are_checked_whole_and_a_refused_change_keeps_the_old_ones(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    app.add_person("vic", PASSWORD, Role::Viewer).await;
    let kept = json!({ "items": [{ "kind": "blocking", "urgency": "normal", "remind_after_seconds": 600 }] });
    let stored = put_policies(&app, kept.clone()).await;
    assert_eq!((stored.status, &stored.json), (StatusCode::OK, &kept), "{}", stored.text);

    let refused = put_policies(
        &app,
        json!({ "items": [
            { "kind": "approval", "urgency": "high", "remind_after_seconds": 5, "escalate_after_seconds": 2,
              "escalate_to": { "role": "admin" } },
            { "kind": "approval", "urgency": "high", "remind_after_seconds": 1 },
            { "kind": "blocking", "urgency": "low", "escalate_after_seconds": 3 },
            { "kind": "approval", "urgency": "critical", "escalate_after_seconds": 3, "escalate_to": { "user": "vic" } },
            { "kind": "blocking", "urgency": "critical" },
            { "kind": "error_recovery", "urgency": "critical", "remind_after_seconds": 0 },
            { "kind": "non_blocking", "urgency": "low", "escalate_after_seconds": 60, "escalate_to": { "role": "viewer" } },
        ] }),
    )
    .await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let fields = error["details"]["fields"].as_object().unwrap();
    let named: Vec<&str> = fields.keys().map(String::as_str).collect();
    assert_eq!(
        named,
        vec![
            "items[0].escalate_after_seconds",
            "items[1].urgency",
            "items[2].escalate_to",
            "items[3].escalate_to.user",
            "items[4].remind_after_seconds",
            "items[5].remind_after_seconds",
            "items[6].escalate_to.role",
        ],
        "{error}"
    );
    assert!(fields["items[3].escalate_to.user"].as_str().unwrap().contains("vic is a viewer"), "{error}");
    assert_eq!(app.get(POLICIES).await.json, kept, "a refused change changed the policies");
    let unknown = put_policies(&app, json!({ "items": [{ "kind": "approval", "urgency": "high", "nag": 1 }] })).await;
    assert_error(&unknown, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert_eq!(app.get(POLICIES).await.json, kept);

    // The change is audited with what was there before.
    let audit = app.get("/api/v1/audit?action=escalation_policies.changed").await;
    let entries = audit.json["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{}", audit.text);
    assert_eq!((&entries[0]["before"], &entries[0]["after"]), (&json!([]), &kept["items"]));
}

async fn a_policy_reminds_then_escalates_in_order_with_events_deliveries_and_audit(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let smtp = sink.url();
    // This instance sets up and reads; two server processes on the same database run the deadline worker and send
    // the mail, so both try every step, and whichever takes a step sends its mail at once.
    let Some(app) = TestApp::start_with(backend, |config| config.run_workers = false).await else { return };
    let alice = person(&app, "alice", Role::Approver, Some("alice@example.com")).await;
    let dave = person(&app, "dave", Role::Admin, Some("dave@example.com")).await;
    let policy = json!({ "items": [{ "kind": "approval", "urgency": "high", "remind_after_seconds": 1,
                                     "escalate_after_seconds": 2, "escalate_to": { "role": "admin" } }] });
    let stored = put_policies(&app, policy.clone()).await;
    assert_eq!((stored.status, &stored.json), (StatusCode::OK, &policy), "{}", stored.text);
    let mailing = [
        ("HOLDPOINT_SMTP_URL", smtp.clone()),
        ("HOLDPOINT_EMAIL_FROM", "Holdpoint <holdpoint@example.com>".to_owned()),
    ];
    let first = app.spawn_process_with(&mailing).await;
    let _second = app.spawn_process_with(&mailing).await;

    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/questions", first.base_url))
        .bearer_auth(&app.token)
        .json(&json!({ "kind": "approval", "title": "Drop the staging database?",
                       "action": { "tool_name": "shell", "arguments": { "command": "dropdb staging" } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let asked: Value = response.json().await.unwrap();
    let id = asked["id"].as_str().unwrap().to_owned();
    let plan = &asked["escalation"];
    let at = |value: &Value| chrono::DateTime::parse_from_rfc3339(value.as_str().unwrap()).unwrap();
    let created = at(&asked["created_at"]);
    assert_eq!((at(&plan["remind_at"]) - created).num_milliseconds(), 1000, "{plan}");
    assert_eq!((at(&plan["escalate_at"]) - created).num_milliseconds(), 2000, "{plan}");
    assert_eq!(plan["escalate_to"], json!({ "role": "admin" }));
    assert!(plan["reminded_at"].is_null() && plan["escalated_at"].is_null(), "{plan}");
    let unplanned = app.post("/api/v1/questions", json!({ "title": "Lunch?", "urgency": "normal" })).await;
    assert!(unplanned.json.get("escalation").is_none(), "no policy, no plan: {}", unplanned.text);

    // The mail of each step, in order: the question to both (alice approves, dave is an admin), the reminder to
    // both, then the escalation to the admins alone.
    let mut mail = Vec::new();
    for _ in 0..5 {
        let message = sink.next_message().await;
        let to = message["rcpt_tos"][0].as_str().unwrap().to_owned();
        mail.push((message["subject"].as_str().unwrap().to_owned(), to));
    }
    let step_of = |subject: &str| subject.split(": ").next().unwrap().to_owned();
    let steps: Vec<String> = mail.iter().map(|(subject, _)| step_of(subject)).collect();
    assert_eq!(steps, ["[HIGH] Approval", "[HIGH] Approval", "Reminder", "Reminder", "Escalated to you"], "{mail:?}");
    assert_eq!(
        mail[4],
        ("Escalated to you: [HIGH] Approval: Drop the staging database?".into(), "dave@example.com".into())
    );
    let mut reminded: Vec<&str> = mail[2..4].iter().map(|(_, to)| to.as_str()).collect();
    reminded.sort();
    assert_eq!(reminded, ["alice@example.com", "dave@example.com"]);
    assert!(sink.message_within(Duration::from_millis(1500)).await.is_none(), "a step was taken twice");

    // The question now belongs to the admins; its plan says when each step was taken.
    let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
    assert_eq!(question["status"], "pending");
    assert_eq!(question["assignee"], json!({ "role": "admin" }), "{question}");
    let plan = &question["escalation"];
    assert!(at(&plan["reminded_at"]) >= at(&plan["remind_at"]), "{plan}");
    assert!(at(&plan["escalated_at"]) >= at(&plan["escalate_at"]), "{plan}");

    // Each step's deliveries, with their cause, oldest first.
    let mut causes = Vec::new();
    for _ in 0..200 {
        let listed = app.get(&format!("/api/v1/questions/{id}/deliveries")).await.json;
        let items = listed["items"].as_array().unwrap().clone();
        causes = items
            .iter()
            .map(|d| (d["cause"].as_str().unwrap().to_owned(), d["recipient"].as_str().unwrap().to_owned()))
            .collect::<Vec<_>>();
        if items.iter().all(|d| d["status"] == "sent") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let by_cause = |cause: &str| {
        let mut who: Vec<String> = causes.iter().filter(|(c, _)| c == cause).map(|(_, w)| w.clone()).collect();
        who.sort();
        who
    };
    assert_eq!(
        causes.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        ["asked", "asked", "reminded", "reminded", "escalated"]
    );
    assert_eq!(
        (by_cause("asked"), by_cause("reminded"), by_cause("escalated")),
        (
            vec!["alice".to_owned(), "dave".to_owned()],
            vec!["alice".to_owned(), "dave".to_owned()],
            vec!["dave".to_owned()]
        )
    );

    // The approver may no longer answer; an admin may.
    let path = format!("/api/v1/questions/{id}/answer");
    let refused = app.session_call(&alice, Method::POST, &path, Some(json!({ "value": true }))).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    let answered = app.session_call(&dave, Method::POST, &path, Some(json!({ "value": false }))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    // One event per step, in order, whichever instance took it.
    let events = app.state.store.events_after(0, 1000).await.unwrap();
    let types: Vec<&str> = events
        .iter()
        .filter(|e| e.question_id.map(|q| q.to_string()) == Some(id.clone()))
        .map(|e| e.event_type.as_str())
        .collect();
    assert_eq!(types, ["question_asked", "question_reminded", "question_escalated", "question_answered"]);

    // And the audit shows both steps, by the policy, with who each reached.
    let audit = app.get(&format!("/api/v1/audit?subject_id={id}")).await.json;
    let mut entries = audit["items"].as_array().unwrap().clone();
    entries.sort_by_key(|e| e["seq"].as_i64());
    let actions: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["question.reminded", "question.escalated", "question.answered"], "{audit}");
    let (reminder, escalation) = (&entries[0], &entries[1]);
    assert_eq!(
        (&reminder["actor"], &reminder["actor_kind"]),
        (&json!("escalation policy"), &json!("policy")),
        "{reminder}"
    );
    assert_eq!(reminder["after"]["notified"], json!(["alice", "dave"]), "{reminder}");
    assert_eq!(reminder["after"]["next_step"]["step"], "escalate", "{reminder}");
    assert_eq!(escalation["before"]["assignee"], Value::Null, "{escalation}");
    assert_eq!(escalation["after"]["assignee"], json!({ "role": "admin" }), "{escalation}");
    assert_eq!(escalation["after"]["notified"], json!(["dave"]), "{escalation}");
}

async fn an_escalation_to_someone_who_left_keeps_the_question_answerable(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let dave = app.add_person("dave", PASSWORD, Role::Approver).await["user_id"].as_str().unwrap().to_owned();
    let policy = json!({ "items": [{ "kind": "approval", "urgency": "high", "escalate_after_seconds": 1,
                                     "escalate_to": { "user": "dave" } }] });
    assert_eq!(put_policies(&app, policy).await.status, StatusCode::OK);
    // Dave leaves after the policy named him.
    let removed = app.call(Method::DELETE, &format!("/api/v1/members/{dave}"), Some(&app.token), None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);

    let asked = app
        .post(
            "/api/v1/questions",
            json!({ "kind": "approval", "title": "Rotate the TLS certificate?",
                                           "action": { "tool_name": "shell", "arguments": {} } }),
        )
        .await;
    let id = asked.json["id"].as_str().unwrap().to_owned();
    let (question, step) = escalated(&app, &id).await;
    // Handed to nobody who may answer, the question stays with whoever could; the audit says why.
    assert!(question.get("assignee").is_none(), "{question}");
    let after = &step["after"];
    assert!(after["not_reassigned"].as_str().is_some_and(|why| why.contains("dave")), "{step}");
    assert_eq!(after["notified"], json!([]), "{step}");
    let admin = app.create_token("default", Role::Admin).await;
    let path = format!("/api/v1/questions/{id}/answer");
    let answered = app.call(Method::POST, &path, Some(&admin), Some(json!({ "value": true }))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
}

/// A question can reach someone for the same cause twice: handed to a delegate while its assignee is away (an
/// escalation to them), then escalated by the policy to a role the delegate holds. The step is taken all the same,
/// the delegate's notification comes back unread, and the mail they were sent is not queued twice.
async fn an_escalation_reaching_a_delegate_again_is_taken(backend: Backend) {
    let Some(app) = start_mailing_nowhere(backend).await else { return };
    person(&app, "ana", Role::Approver, Some("ana@example.com")).await;
    person(&app, "cyd", Role::Admin, Some("cyd@example.com")).await;
    let policy = json!({ "items": [{ "kind": "approval", "urgency": "high", "escalate_after_seconds": 2,
                                     "escalate_to": { "role": "admin" } }] });
    assert_eq!(put_policies(&app, policy).await.status, StatusCode::OK);
    let agent = app.create_token("default", Role::Agent).await;
    let body = json!({ "kind": "approval", "urgency": "high", "title": "Rotate the production keys?",
                       "action": { "tool_name": "shell", "arguments": {} }, "assignee": { "user": "ana" } });
    let asked = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(body)).await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    let id = asked.json["id"].as_str().unwrap().to_owned();
    let ana = member_id(&app, "ana").await;
    let away = json!({ "away_until": chrono::Utc::now() + chrono::Duration::days(1), "delegate": "cyd" });
    let set = app.call(Method::PATCH, &format!("/api/v1/members/{ana}"), Some(&app.token), Some(away)).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);

    let (question, step) = escalated(&app, &id).await;
    assert_eq!(question["assignee"], json!({ "role": "admin" }), "{question}");
    assert_eq!(step["after"]["notified"], json!(["cyd"]), "{step}");
    let listed = app.get(&format!("/api/v1/questions/{id}/deliveries")).await.json;
    let mut causes: Vec<(String, String)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["cause"].as_str().unwrap().to_owned(), d["recipient"].as_str().unwrap().to_owned()))
        .collect();
    causes.sort();
    assert_eq!(causes, [("asked".into(), "ana".into()), ("escalated".into(), "cyd".into())], "{listed}");
}

async fn member_id(app: &TestApp, username: &str) -> String {
    let members = app.get("/api/v1/members").await.json;
    let member = members["items"].as_array().unwrap().iter().find(|m| m["username"] == username).cloned();
    member.expect("a member")["user_id"].as_str().unwrap().to_owned()
}

/// A server whose mail goes nowhere: the deliveries it queues stay queued, to be read.
async fn start_mailing_nowhere(backend: Backend) -> Option<TestApp> {
    TestApp::start_with(backend, |config| {
        config.channels.smtp_url = Some("smtp://127.0.0.1:1?tls=none".parse().unwrap());
        config.channels.email_from = Some("Holdpoint <holdpoint@example.com>".parse().unwrap());
    })
    .await
}

/// Waits until question `id` has taken its escalation step; returns it and the step's audit entry.
async fn escalated(app: &TestApp, id: &str) -> (Value, Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let question = loop {
        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        if question["escalation"]["escalated_at"].is_string() {
            break question;
        }
        assert!(tokio::time::Instant::now() < deadline, "the escalation step was not taken: {question}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let audit = app.get(&format!("/api/v1/audit?subject_id={id}&action=question.escalated")).await.json;
    (question, audit["items"][0].clone())
}

/// An escalation hands a question over only to people who can decide it: an approval's eligible approvers, enough of
/// them for the approvals it still needs, and, for someone away, their delegate. A claim held by someone the question
/// is no longer for ends with the step. Eligible approvers alone are notified of an approval reserved for them.
async fn an_escalation_hands_a_question_only_to_people_who_can_decide_it(backend: Backend) {
    let Some(app) = start_mailing_nowhere(backend).await else { return };
    let mut sessions = std::collections::HashMap::new();
    for (name, role) in [
        ("alice", Role::Approver),
        ("bob", Role::Approver),
        ("cyd", Role::Admin),
        ("dave", Role::Approver),
        ("erin", Role::Approver),
    ] {
        sessions.insert(name, person(&app, name, role, Some(&format!("{name}@example.com"))).await);
    }
    let policy = json!({ "items": [
        { "kind": "approval", "urgency": "high", "escalate_after_seconds": 2, "escalate_to": { "role": "admin" } },
        { "kind": "approval", "urgency": "critical", "escalate_after_seconds": 2, "escalate_to": { "role": "admin" } },
        { "kind": "approval", "urgency": "normal", "escalate_after_seconds": 2, "escalate_to": { "user": "dave" } },
    ] });
    assert_eq!(put_policies(&app, policy).await.status, StatusCode::OK);
    let dave = member_id(&app, "dave").await;
    let away = json!({ "away_until": chrono::Utc::now() + chrono::Duration::days(1), "delegate": "erin" });
    let set = app.call(Method::PATCH, &format!("/api/v1/members/{dave}"), Some(&app.token), Some(away)).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    let agent = app.create_token("default", Role::Agent).await;
    let ask = |urgency: &str, more: Value| {
        let mut body = json!({ "kind": "approval", "urgency": urgency, "title": format!("Deploy ({urgency})?"),
                               "action": { "tool_name": "deploy", "arguments": {} } });
        body.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
        let (app, agent) = (&app, agent.clone());
        async move {
            let asked = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(body)).await;
            assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
            asked.json["id"].as_str().unwrap().to_owned()
        }
    };
    let reserved = ask("high", json!({ "eligible": { "users": ["alice", "bob"] } })).await;
    let two = ask("critical", json!({ "required_approvals": 2 })).await;
    let claimed = ask("normal", json!({})).await;
    let path = format!("/api/v1/questions/{claimed}/claim");
    let claim = app.session_call(&sessions["bob"], Method::POST, &path, None).await;
    assert_eq!(claim.status, StatusCode::OK, "{}", claim.text);

    // Reserved for alice and bob: only they are reached, and the admins are not theirs to hand it to.
    let listed = app.get(&format!("/api/v1/questions/{reserved}/deliveries")).await.json;
    let mut reached: Vec<&str> =
        listed["items"].as_array().unwrap().iter().map(|d| d["recipient"].as_str().unwrap()).collect();
    reached.sort();
    assert_eq!(reached, ["alice", "bob"], "{listed}");
    let (question, step) = escalated(&app, &reserved).await;
    assert!(question.get("assignee").is_none(), "{question}");
    assert!(step["after"]["not_reassigned"].as_str().is_some_and(|why| why.contains("admin")), "{step}");

    // Two approvals needed, and one admin: the question stays with the approvers, who complete it.
    let (question, step) = escalated(&app, &two).await;
    assert!(question.get("assignee").is_none(), "{question}");
    assert!(
        step["after"]["not_reassigned"].as_str().is_some_and(|why| why.contains("the 2 approvals it needs")),
        "{step}"
    );
    for name in ["alice", "bob"] {
        let path = format!("/api/v1/questions/{two}/answer");
        let approved = app.session_call(&sessions[name], Method::POST, &path, Some(json!({ "value": true }))).await;
        assert_eq!(approved.status, StatusCode::OK, "{name}: {}", approved.text);
    }
    assert_eq!(app.get(&format!("/api/v1/questions/{two}")).await.json["status"], "answered");

    // Handed to dave, who is away: erin, his delegate, takes it, and bob's claim ends.
    let (question, step) = escalated(&app, &claimed).await;
    assert_eq!(question["assignee"], json!({ "user": "erin" }), "{question}");
    assert!(question.get("claimed_by").is_none(), "{question}");
    assert_eq!(
        (&step["after"]["delegated_from"], &step["after"]["claim_ended"]),
        (&json!("dave"), &json!("bob")),
        "{step}"
    );
    let path = format!("/api/v1/questions/{claimed}/answer");
    let answered = app.session_call(&sessions["erin"], Method::POST, &path, Some(json!({ "value": true }))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
}
