//! Delegation while away (docs/api.md): a member away hands the questions assigned to them to their delegate — those
//! pending when the absence starts and those asked meanwhile — audited, on both backends.

use crate::common;

use app::types::Role;
use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use common::{TestApp, assert_error};
use serde_json::{Value, json};

backend_tests!(
    questions_for_someone_away_go_to_their_delegate_until_they_are_back,
    a_delegate_who_is_away_passes_the_question_on,
    absence_input_is_checked_and_nothing_is_stored,
    every_pending_question_is_handed_over_however_many_pages_they_fill,
);

const PASSWORD: &str = "correct horse battery staple";

async fn member(app: &TestApp, username: &str, role: Role) -> String {
    app.add_person(username, PASSWORD, role).await["user_id"].as_str().unwrap().to_owned()
}

async fn ask_for(app: &TestApp, agent: &str, assignee: Value) -> Value {
    let body = json!({
        "kind": "approval",
        "title": "Rotate the production keys?",
        "action": {"tool_name": "shell", "arguments": {"command": "rotate-keys --prod"}},
        "assignee": assignee,
    });
    let response = app.call(Method::POST, "/api/v1/questions", Some(agent), Some(body)).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.json
}

async fn set_absence(app: &TestApp, user_id: &str, body: Value) -> common::TestResponse {
    app.call(Method::PATCH, &format!("/api/v1/members/{user_id}"), Some(&app.token), Some(body)).await
}

async fn assignee_of(app: &TestApp, id: &str) -> String {
    let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
    question["assignee"]["user"].as_str().expect("assigned to a person").to_owned()
}

async fn audit(app: &TestApp, action: &str) -> Vec<Value> {
    app.get(&format!("/api/v1/audit?action={action}&limit=100")).await.json["items"].as_array().unwrap().clone()
}

async fn questions_for_someone_away_go_to_their_delegate_until_they_are_back(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let ana = member(&app, "ana", Role::Approver).await;
    member(&app, "ben", Role::Approver).await;
    let pending = ask_for(&app, &agent, json!({"user": "ana"})).await;
    let pending_id = pending["id"].as_str().unwrap();
    assert_eq!(pending["assignee"], json!({"user": "ana"}));

    // Ana goes away: what is assigned to her now goes to Ben, with an event and an audit entry.
    let back = Utc::now() + Duration::days(3);
    let set = set_absence(&app, &ana, json!({"away_until": back, "delegate": "ben"})).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    assert_eq!(set.json["delegate"], "ben");
    assert!(set.json["away_until"].is_string(), "{}", set.json);
    assert_eq!(assignee_of(&app, pending_id).await, "ben");
    let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
    let events = app.state.store.workspace_events_after(workspace, 0, 100).await.unwrap();
    let of_pending: Vec<&str> = events
        .iter()
        .filter(|e| e.question_id.map(|q| q.to_string()).as_deref() == Some(pending_id))
        .map(|e| e.event_type.as_str())
        .collect();
    assert_eq!(of_pending, ["question_asked", "question_escalated"]);
    let changed = audit(&app, "absence.changed").await;
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["after"]["delegate"], "ben");
    let delegated = audit(&app, "question.delegated").await;
    assert_eq!(delegated.len(), 1);
    assert_eq!(delegated[0]["subject_id"], pending_id);
    assert_eq!(delegated[0]["before"]["assignee"], json!({"user": "ana"}));
    assert_eq!(delegated[0]["after"]["assignee"], json!({"user": "ben"}));

    // Asked while she is away, by name or by round-robin turn: Ben's, recorded in the same write as the question.
    let named = ask_for(&app, &agent, json!({"user": "ana"})).await;
    assert_eq!(named["assignee"], json!({"user": "ben"}));
    let mut turns = Vec::new();
    for _ in 0..2 {
        let asked = ask_for(&app, &agent, json!({"role": "approver", "strategy": "round_robin"})).await;
        turns.push(asked["assignee"]["user"].as_str().unwrap().to_owned());
    }
    assert_eq!(turns, ["ben", "ben"], "ana's turn goes to ben too");
    assert_eq!(audit(&app, "question.delegated").await.len(), 3);
    let named_events = app.state.store.workspace_events_after(workspace, 0, 100).await.unwrap();
    let asked: Vec<_> = named_events
        .iter()
        .filter(|e| e.question_id.map(|q| q.to_string()).as_deref() == named["id"].as_str())
        .collect();
    assert_eq!(asked.len(), 1, "one event: asked, already assigned to ben");

    // Ben answers it; Ana may not while it is his.
    let ana_session = app
        .sign_in_with(&format!("username=ana&password={}&next=%2Finbox", PASSWORD.replace(' ', "+")))
        .await
        .expect("signed in");
    let refused = app
        .session_call(
            &ana_session,
            Method::POST,
            &format!("/api/v1/questions/{pending_id}/answer"),
            Some(json!({"value": true})),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);

    // Back: her own absence ends by herself, and questions come to her again.
    let ended = app.session_call(&ana_session, Method::PATCH, "/api/v1/me", Some(json!({"away_until": null}))).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.text);
    assert_eq!(ended.json["away_until"], Value::Null);
    assert_eq!(ended.json["delegate"], Value::Null);
    let after = ask_for(&app, &agent, json!({"user": "ana"})).await;
    assert_eq!(after["assignee"], json!({"user": "ana"}));
    assert_eq!(audit(&app, "absence.changed").await.len(), 2);
    // What went to Ben stays his.
    assert_eq!(assignee_of(&app, pending_id).await, "ben");
}

async fn a_delegate_who_is_away_passes_the_question_on(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let ana = member(&app, "ana", Role::Approver).await;
    let ben = member(&app, "ben", Role::Admin).await;
    member(&app, "cyd", Role::Approver).await;
    let back = Utc::now() + Duration::days(1);
    assert_eq!(set_absence(&app, &ben, json!({"away_until": back, "delegate": "cyd"})).await.status, StatusCode::OK);
    assert_eq!(set_absence(&app, &ana, json!({"away_until": back, "delegate": "ben"})).await.status, StatusCode::OK);
    let asked = ask_for(&app, &agent, json!({"user": "ana"})).await;
    assert_eq!(asked["assignee"], json!({"user": "cyd"}));
    // A loop back to ana ends at the last person before it.
    let cyd = app.get("/api/v1/members").await.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["username"] == "cyd")
        .unwrap()["user_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(set_absence(&app, &cyd, json!({"away_until": back, "delegate": "ana"})).await.status, StatusCode::OK);
    let looped = ask_for(&app, &agent, json!({"user": "ana"})).await;
    assert_eq!(looped["assignee"], json!({"user": "cyd"}));
}

async fn absence_input_is_checked_and_nothing_is_stored(app: TestApp) {
    let ana = member(&app, "ana", Role::Approver).await;
    member(&app, "ben", Role::Approver).await;
    member(&app, "rex", Role::Responder).await;
    member(&app, "vic", Role::Viewer).await;
    let soon = Utc::now() + Duration::days(2);
    let refused = [
        (json!({"away_until": Utc::now() - Duration::hours(1), "delegate": "ben"}), "away_until"),
        (json!({"away_until": Utc::now() + Duration::days(367), "delegate": "ben"}), "away_until"),
        (json!({"delegate": "ben"}), "away_until"),
        (json!({"away_until": soon}), "delegate"),
        (json!({"away_until": soon, "delegate": "ana"}), "delegate"),
        (json!({"away_until": soon, "delegate": "nobody"}), "delegate"),
        (json!({"away_until": soon, "delegate": "vic"}), "delegate"),
        // Ana is an approver: a responder cannot take her approvals.
        (json!({"away_until": soon, "delegate": "rex"}), "delegate"),
    ];
    for (body, field) in refused {
        let response = set_absence(&app, &ana, body.clone()).await;
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"].get(field).is_some(), "{body} → {error}");
    }
    let malformed = set_absence(&app, &ana, json!({"away_until": "next tuesday", "delegate": "ben"})).await;
    assert!(malformed.status.is_client_error(), "{}", malformed.text);
    let members = app.get("/api/v1/members").await.json;
    let stored = members["items"].as_array().unwrap().iter().find(|m| m["username"] == "ana").unwrap().clone();
    assert_eq!((stored["away_until"].clone(), stored["delegate"].clone()), (Value::Null, Value::Null));
    assert!(audit(&app, "absence.changed").await.is_empty());
}

/// Going away hands over every question assigned to the member, however many: the pending questions are read a page
/// (500) at a time, and the questions on the first and the last page go alike.
async fn every_pending_question_is_handed_over_however_many_pages_they_fill(app: TestApp) {
    let ana = member(&app, "ana", Role::Approver).await;
    member(&app, "ben", Role::Approver).await;
    let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
    // Asked straight through the use case: 501 questions over the API would wait on its creation rate limit.
    const ASKED: usize = 501;
    for n in 0..ASKED {
        let input =
            serde_json::from_value(json!({ "title": format!("Question {n} for ana?"), "assignee": {"user": "ana"} }));
        let row = app.state.asking().prepare(input.unwrap(), workspace, None).await.unwrap();
        app.state.asking().record(&row, "default", None).await.unwrap();
    }
    let back = Utc::now() + Duration::days(1);
    let set = set_absence(&app, &ana, json!({"away_until": back, "delegate": "ben"})).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);

    let filter = holdpoint::store::QuestionFilter {
        status: Some(app::types::QuestionStatus::Pending),
        limit: 1000,
        ..Default::default()
    };
    let pending = app.state.store.list_questions(workspace, &filter).await.unwrap();
    assert_eq!(pending.len(), ASKED);
    let with_ana: Vec<&str> = pending
        .iter()
        .filter(|row| row.assignee.as_ref().is_some_and(|a| a.0 == app::types::Assignee::User("ana".into())))
        .map(|row| row.title.as_str())
        .collect();
    assert!(with_ana.is_empty(), "{} of {ASKED} stayed with ana, e.g. {:?}", with_ana.len(), with_ana.first());
}
