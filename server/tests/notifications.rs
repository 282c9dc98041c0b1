//! Reaching people outside Holdpoint's pages (docs/notifications.md): the keys every instance signs with, and people's
//! addresses and channel thresholds.

use crate::common;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{TestApp, assert_error};
use holdpoint::channels::web_push::VapidKey;
use serde_json::{Value, json};

backend_tests!(
    every_instance_signs_with_the_keys_the_first_one_stored,
    an_admin_or_the_person_sets_their_addresses_on_the_record,
    a_person_chooses_per_channel_the_lowest_urgency_that_reaches_them,
    bad_addresses_and_thresholds_are_refused_and_change_nothing,
);

const PASSWORD: &str = "correct horse battery staple";

async fn person(app: &TestApp, username: &str, role: Role) -> (String, common::Session) {
    let member = app.add_person(username, PASSWORD, role).await;
    let form = format!("username={username}&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    let session = app.sign_in_with(&form).await.expect("the person signs in");
    (member["user_id"].as_str().unwrap().to_owned(), session)
}

async fn member(app: &TestApp, username: &str) -> Value {
    let members = app.get("/api/v1/members").await;
    members.json["items"].as_array().unwrap().iter().find(|m| m["username"] == username).unwrap().clone()
}

async fn every_instance_signs_with_the_keys_the_first_one_stored(app: TestApp) {
    let first = &app.state.channel_keys;
    let (second, _) = app.restart(|_| {}).await;
    assert_eq!(second.channel_keys.action_links.encoded(), first.action_links.encoded());
    assert_eq!(second.channel_keys.vapid.encoded(), first.vapid.encoded());

    // A VAPID key given in the configuration replaces the stored one; the action link key stays the shared one.
    let configured = VapidKey::generate();
    let given = configured.clone();
    let (third, _) = app.restart(move |config| config.channels.vapid_private_key = Some(given)).await;
    assert_eq!(third.channel_keys.vapid.encoded(), configured.encoded());
    assert_eq!(third.channel_keys.action_links.encoded(), first.action_links.encoded());
    // ...without changing what is stored.
    let (fourth, _) = app.restart(|_| {}).await;
    assert_eq!(fourth.channel_keys.vapid.encoded(), first.vapid.encoded());
}

async fn an_admin_or_the_person_sets_their_addresses_on_the_record(app: TestApp) {
    let (alice, session) = person(&app, "alice", Role::Approver).await;
    let fresh = member(&app, "alice").await;
    assert_eq!((&fresh["email"], &fresh["slack_user_id"]), (&Value::Null, &Value::Null));

    // An admin sets both (and the role, in the same request).
    let path = format!("/api/v1/members/{alice}");
    let set = app
        .call(
            Method::PATCH,
            &path,
            Some(&app.token),
            Some(json!({"role": "admin", "email": "alice@example.com", "slack_user_id": "U012AB3CD"})),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    assert_eq!((set.json["role"].as_str(), set.json["email"].as_str()), (Some("admin"), Some("alice@example.com")));
    assert_eq!(set.json["slack_user_id"], "U012AB3CD");

    // The person changes one and removes the other; an absent field is kept.
    let mine = app
        .session_call(
            &session,
            Method::PATCH,
            "/api/v1/me",
            Some(json!({"email": "a@example.org", "slack_user_id": null})),
        )
        .await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.text);
    assert_eq!((mine.json["email"].as_str(), &mine.json["slack_user_id"]), (Some("a@example.org"), &Value::Null));
    let kept = app.session_call(&session, Method::PATCH, "/api/v1/me", Some(json!({}))).await;
    assert_eq!(kept.json["email"], "a@example.org");
    assert_eq!(member(&app, "alice").await["email"], "a@example.org");

    // Each change is on the record with what it was and what it became; one that changes nothing is not.
    let audit = app.get("/api/v1/audit?action=addresses.changed").await;
    let items = audit.json["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{}", audit.text);
    assert_eq!(items[0]["actor"], "alice", "{}", audit.text);
    let proven = json!({"email": "alice@example.com", "slack_user_id": "U012AB3CD", "slack_user_id_proven": true});
    assert_eq!(items[0]["before"], proven);
    assert_eq!(
        items[0]["after"],
        json!({"email": "a@example.org", "slack_user_id": null, "slack_user_id_proven": false})
    );
    assert_eq!(items[1]["after"], proven, "an id an admin sets is proven");
}

async fn a_person_chooses_per_channel_the_lowest_urgency_that_reaches_them(app: TestApp) {
    let (_, session) = person(&app, "bob", Role::Responder).await;
    let defaults = app.session_call(&session, Method::GET, "/api/v1/me/notifications", None).await;
    assert_eq!(defaults.status, StatusCode::OK, "{}", defaults.text);
    assert_eq!(
        defaults.json,
        json!({"web": {"min_urgency": "low"}, "push": {"min_urgency": "low"},
               "email": {"min_urgency": "high"}, "slack": {"min_urgency": "high"}})
    );

    let put = app
        .session_call(
            &session,
            Method::PUT,
            "/api/v1/me/notifications",
            Some(json!({"email": {"min_urgency": "normal"}, "slack": {"min_urgency": "off"}})),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    let stored = app.session_call(&session, Method::GET, "/api/v1/me/notifications", None).await;
    assert_eq!(stored.json, put.json);
    assert_eq!(stored.json["email"]["min_urgency"], "normal");
    assert_eq!(stored.json["slack"]["min_urgency"], "off");
    // Left out of the PUT: the default.
    assert_eq!(stored.json["push"]["min_urgency"], "low");

    // The same thresholds again change nothing, and nothing is recorded.
    let again = app.session_call(&session, Method::PUT, "/api/v1/me/notifications", Some(put.json.clone())).await;
    assert_eq!(again.json, put.json);
    let audit = app.get("/api/v1/audit?action=notifications.changed").await;
    assert_eq!(audit.json["items"].as_array().unwrap().len(), 1, "{}", audit.text);
    assert_eq!(audit.json["items"][0]["before"]["email"]["min_urgency"], "high");
    assert_eq!(audit.json["items"][0]["after"]["slack"]["min_urgency"], "off");
}

async fn bad_addresses_and_thresholds_are_refused_and_change_nothing(app: TestApp) {
    let (carol, session) = person(&app, "carol", Role::Approver).await;
    let path = format!("/api/v1/members/{carol}");
    app.call(Method::PATCH, &path, Some(&app.token), Some(json!({"email": "carol@example.com"}))).await;
    let audit_before = app.get("/api/v1/audit").await.json["items"].as_array().unwrap().len();

    for body in [
        json!({"email": "not an address"}),
        json!({"email": format!("{}@example.com", "a".repeat(250))}),
        json!({"slack_user_id": "alice"}),
        json!({"slack_user_id": "U1"}),
        json!({"slack_user_id": "u012ab3cd"}),
    ] {
        let refused = app.session_call(&session, Method::PATCH, "/api/v1/me", Some(body.clone())).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        // The admin's route checks the addresses before the role: a bad one changes the role neither.
        let mut with_role = body.clone();
        with_role["role"] = json!("viewer");
        let refused = app.call(Method::PATCH, &path, Some(&app.token), Some(with_role)).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    }
    let unknown = app.session_call(&session, Method::PATCH, "/api/v1/me", Some(json!({"phone": "123"}))).await;
    assert!(unknown.status.is_client_error() && unknown.json["error"]["code"].is_string(), "{}", unknown.text);
    for body in [
        json!({"email": {"min_urgency": "urgent"}}),
        json!({"email": "high"}),
        json!({"fax": {"min_urgency": "high"}}),
        json!({"email": {"min_urgency": "high", "max": 1}}),
    ] {
        let refused = app.session_call(&session, Method::PUT, "/api/v1/me/notifications", Some(body.clone())).await;
        assert!(refused.status.is_client_error(), "{body}: {}", refused.text);
        assert!(refused.json["error"]["code"].is_string(), "{}", refused.text);
    }
    // Not a member of this workspace: 404, as for any object of another workspace.
    let other = app
        .call(
            Method::PATCH,
            &format!("/api/v1/members/{}", uuid::Uuid::now_v7()),
            Some(&app.token),
            Some(json!({"email": "x@example.com"})),
        )
        .await;
    assert_error(&other, StatusCode::NOT_FOUND, "not_found");

    let after = member(&app, "carol").await;
    assert_eq!((after["email"].as_str(), after["role"].as_str()), (Some("carol@example.com"), Some("approver")));
    assert_eq!(after["slack_user_id"], Value::Null);
    let notifications = app.session_call(&session, Method::GET, "/api/v1/me/notifications", None).await;
    assert_eq!(notifications.json["email"]["min_urgency"], "high");
    assert_eq!(app.get("/api/v1/audit").await.json["items"].as_array().unwrap().len(), audit_before);
}
