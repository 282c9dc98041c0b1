//! People and who may answer: accounts with passwords, membership roles that take effect at once, token
//! management with immediate revocation, assignees, separation of duties, and the first start's one-time link.

use crate::common;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{TestApp, assert_error};
use serde_json::{Value, json};

backend_tests!(
    a_person_signs_in_with_username_and_password_and_acts_with_their_role,
    a_wrong_password_or_an_unknown_person_is_refused_alike,
    a_role_change_applies_to_the_next_request_of_an_open_session,
    a_workspace_always_keeps_an_admin,
    removing_a_member_ends_their_session_at_once,
    a_persons_tokens_hold_no_more_than_their_membership,
    a_created_token_works_until_revoked_and_then_stops_at_once,
    changing_the_bootstrap_token_revokes_the_value_it_replaces,
    only_admins_manage_people_and_tokens,
    bad_people_and_token_input_is_refused_and_changes_nothing,
    a_question_assigned_to_a_person_is_answered_by_that_person_only,
    a_question_assigned_to_a_role_needs_that_role_or_above,
    an_assignee_must_be_someone_who_can_answer,
    whoever_requests_an_approval_may_not_approve_it,
    a_password_change_needs_the_current_password,
    the_first_start_link_signs_in_once_and_stops_once_someone_has_a_password,
    a_people_change_commits_with_its_audit_entry_or_not_at_all,
    an_existing_account_joins_another_workspace_only_by_accepting_an_invitation,
    a_first_password_needs_a_fresh_sign_in,
);

const PASSWORD: &str = "correct horse battery staple";

async fn sign_in_person(app: &TestApp, username: &str, password: &str) -> Option<common::Session> {
    let form = format!("username={username}&password={}&next=%2Finbox", password.replace(' ', "+"));
    app.sign_in_with(&form).await
}

async fn a_person_signs_in_with_username_and_password_and_acts_with_their_role(app: TestApp) {
    let member = app.add_person("alice", PASSWORD, Role::Approver).await;
    assert_eq!(member["username"], "alice");
    assert_eq!(member["role"], "approver");
    assert_eq!(member["has_password"], true);
    assert!(member.get("password").is_none() && !member.to_string().contains("argon2"), "{member}");

    let session = sign_in_person(&app, "alice", PASSWORD).await.expect("alice signs in");
    let me = app.session_call(&session, Method::GET, "/api/v1/me", None).await;
    assert_eq!(me.status, StatusCode::OK);
    assert_eq!(me.json["kind"], "user");
    assert_eq!(me.json["name"], "alice");
    assert_eq!(me.json["role"], "approver");
    assert_eq!(me.json["workspace"], "default");

    // Usernames are case-insensitive at sign-in.
    assert!(sign_in_person(&app, "ALICE", PASSWORD).await.is_some());

    let asked = app.call(Method::POST, "/api/v1/questions", Some(&agent_token(&app).await), Some(approval())).await;
    let answered = app
        .session_call(
            &session,
            Method::POST,
            &format!("/api/v1/questions/{}/answer", asked.json["id"].as_str().unwrap()),
            Some(json!({"value": true})),
        )
        .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.json["answered_by"], "alice");
}

async fn a_wrong_password_or_an_unknown_person_is_refused_alike(app: TestApp) {
    app.add_person("bob", PASSWORD, Role::Responder).await;
    let wrong = app.post_sign_in("username=bob&password=not+the+password").await;
    let unknown = app.post_sign_in("username=nobody&password=not+the+password").await;
    for refused in [&wrong, &unknown] {
        assert_eq!(refused.status, StatusCode::SEE_OTHER);
        assert!(refused.headers.get(axum::http::header::SET_COOKIE).is_none());
        let location = refused.headers[axum::http::header::LOCATION].to_str().unwrap();
        assert!(location.starts_with("/signin?error=wrong_password&"), "{location}");
    }
    assert_eq!(
        wrong.headers[axum::http::header::LOCATION],
        unknown.headers[axum::http::header::LOCATION],
        "the answer does not tell whether the account exists"
    );
}

async fn agent_token(app: &TestApp) -> String {
    app.create_token("default", Role::Agent).await
}

fn approval() -> Value {
    json!({"kind": "approval", "title": "Deploy?", "action": {"tool_name": "deploy", "arguments": {"env": "prod"}}})
}

async fn ask(app: &TestApp, token: &str, body: Value) -> String {
    let response = app.call(Method::POST, "/api/v1/questions", Some(token), Some(body)).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.json["id"].as_str().unwrap().to_owned()
}

async fn a_role_change_applies_to_the_next_request_of_an_open_session(app: TestApp) {
    let member = app.add_person("carol", PASSWORD, Role::Responder).await;
    let session = sign_in_person(&app, "carol", PASSWORD).await.unwrap();
    let agent = agent_token(&app).await;
    let id = ask(&app, &agent, approval()).await;
    let answer = format!("/api/v1/questions/{id}/answer");
    let refused = app.session_call(&session, Method::POST, &answer, Some(json!({"value": true}))).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");

    let user_id = member["user_id"].as_str().unwrap();
    let changed = app
        .call(Method::PATCH, &format!("/api/v1/members/{user_id}"), Some(&app.token), Some(json!({"role": "approver"})))
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.text);
    assert_eq!(changed.json["role"], "approver");
    let answered = app.session_call(&session, Method::POST, &answer, Some(json!({"value": true}))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    let demoted = app
        .call(Method::PATCH, &format!("/api/v1/members/{user_id}"), Some(&app.token), Some(json!({"role": "viewer"})))
        .await;
    assert_eq!(demoted.status, StatusCode::OK);
    // Each change is in the audit log, with who made it and the role before and after.
    let audit = app.get("/api/v1/audit?action=role.changed").await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.text);
    let entries = audit.json["items"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{}", audit.text);
    let newest = entries[0].to_string();
    assert!(newest.contains("approver") && newest.contains("viewer") && newest.contains(user_id), "{newest}");
    assert_eq!(entries[0]["actor_kind"], "token");
    let added = app.get("/api/v1/audit?action=member.added").await;
    assert_eq!(added.json["items"].as_array().unwrap().len(), 1, "{}", added.text);
    let id = ask(&app, &agent, json!({"title": "A text question"})).await;
    let refused = app
        .session_call(&session, Method::POST, &format!("/api/v1/questions/{id}/answer"), Some(json!({"value": "x"})))
        .await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
}

async fn a_workspace_always_keeps_an_admin(app: TestApp) {
    let dana = app.add_person("dana", PASSWORD, Role::Admin).await;
    let dana_id = dana["user_id"].as_str().unwrap();
    let erin = app.add_person("erin", PASSWORD, Role::Admin).await;
    let erin_id = erin["user_id"].as_str().unwrap();
    let demoted = app
        .call(Method::PATCH, &format!("/api/v1/members/{dana_id}"), Some(&app.token), Some(json!({"role": "viewer"})))
        .await;
    assert_eq!(demoted.status, StatusCode::OK);
    let refused = app
        .call(Method::PATCH, &format!("/api/v1/members/{erin_id}"), Some(&app.token), Some(json!({"role": "viewer"})))
        .await;
    assert_error(&refused, StatusCode::CONFLICT, "conflict");
    let refused = app.call(Method::DELETE, &format!("/api/v1/members/{erin_id}"), Some(&app.token), None).await;
    assert_error(&refused, StatusCode::CONFLICT, "conflict");
    let members = app.get("/api/v1/members").await;
    let roles: Vec<(String, String)> = members.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["username"].as_str().unwrap().to_owned(), m["role"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(roles, vec![("dana".into(), "viewer".into()), ("erin".into(), "admin".into())]);
}

async fn removing_a_member_ends_their_session_at_once(app: TestApp) {
    let frank = app.add_person("frank", PASSWORD, Role::Responder).await;
    let session = sign_in_person(&app, "frank", PASSWORD).await.unwrap();
    assert_eq!(app.session_call(&session, Method::GET, "/api/v1/questions", None).await.status, StatusCode::OK);
    let removed = app
        .call(
            Method::DELETE,
            &format!("/api/v1/members/{}", frank["user_id"].as_str().unwrap()),
            Some(&app.token),
            None,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    let after = app.session_call(&session, Method::GET, "/api/v1/questions", None).await;
    assert_error(&after, StatusCode::UNAUTHORIZED, "unauthorized");
    assert!(sign_in_person(&app, "frank", PASSWORD).await.is_none(), "no workspace left to sign in to");
}

/// A token a person made is theirs: it never holds more than their membership does now. Demoted, their admin token
/// acts as their new role (an agent token, which only asks, stays one); removed, every token of theirs stops at once,
/// the sessions opened with one included.
async fn a_persons_tokens_hold_no_more_than_their_membership(app: TestApp) {
    // Another admin, as the workspace keeps one.
    app.add_person("olga", PASSWORD, Role::Admin).await;
    let mallory = app.add_person("mallory", PASSWORD, Role::Admin).await;
    let member_path = format!("/api/v1/members/{}", mallory["user_id"].as_str().unwrap());
    let session = sign_in_person(&app, "mallory", PASSWORD).await.unwrap();
    let mut secrets = Vec::new();
    for (name, role) in [("mallory's admin", "admin"), ("mallory's bot", "agent")] {
        let created =
            app.session_call(&session, Method::POST, "/api/v1/tokens", Some(json!({"name": name, "role": role}))).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
        secrets.push(created.json["secret"].as_str().unwrap().to_owned());
    }
    let (admin_token, agent_token) = (secrets[0].clone(), secrets[1].clone());
    let opened = app.sign_in_with(&format!("token={admin_token}")).await.expect("the token opens a session");
    let me = async |token: String| app.call(Method::GET, "/api/v1/me", Some(&token), None).await;
    assert_eq!(me(admin_token.clone()).await.json["role"], "admin");

    let demoted = app.call(Method::PATCH, &member_path, Some(&app.token), Some(json!({"role": "viewer"}))).await;
    assert_eq!(demoted.status, StatusCode::OK, "{}", demoted.text);
    assert_eq!(me(admin_token.clone()).await.json["role"], "viewer", "the admin token acts as a viewer now");
    let minted =
        app.call(Method::POST, "/api/v1/tokens", Some(&admin_token), Some(json!({"name": "x", "role": "admin"}))).await;
    assert_error(&minted, StatusCode::FORBIDDEN, "forbidden");
    let through_session = app.session_call(&opened, Method::GET, "/api/v1/me", None).await;
    assert_eq!(through_session.json["role"], "viewer", "{}", through_session.text);
    assert_eq!(me(agent_token.clone()).await.json["role"], "agent", "an agent token stays one");

    let removed = app.call(Method::DELETE, &member_path, Some(&app.token), None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    for token in [admin_token, agent_token] {
        assert_error(&me(token).await, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    let through_session = app.session_call(&opened, Method::GET, "/api/v1/me", None).await;
    assert_error(&through_session, StatusCode::UNAUTHORIZED, "unauthorized");
    let listed = app.get("/api/v1/tokens").await.json;
    let names: Vec<&str> = listed["items"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"mallory's admin"), "the tokens are still listed, to be revoked: {names:?}");
}

async fn a_created_token_works_until_revoked_and_then_stops_at_once(app: TestApp) {
    let created = app.post("/api/v1/tokens", json!({"name": "ci pipeline", "role": "agent"})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let secret = created.json["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("hp_") && secret.len() == 43);
    let id = created.json["token"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created.json["token"]["created_by"], "admin of default");

    let listed = app.get("/api/v1/tokens").await;
    assert_eq!(listed.status, StatusCode::OK);
    assert!(!listed.text.contains(&secret), "a list never shows secrets");
    assert!(
        listed.json["items"].as_array().unwrap().iter().any(|t| t["id"] == id.as_str() && t["revoked_at"].is_null())
    );

    assert_eq!(app.call(Method::GET, "/api/v1/questions", Some(&secret), None).await.status, StatusCode::OK);
    let session = app.sign_in_with(&format!("token={secret}")).await.expect("the token opens a session");

    let revoked = app.call(Method::POST, &format!("/api/v1/tokens/{id}/revoke"), Some(&app.token), None).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    assert!(revoked.json["revoked_at"].is_string());
    assert_error(
        &app.call(Method::GET, "/api/v1/questions", Some(&secret), None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    assert_error(
        &app.session_call(&session, Method::GET, "/api/v1/questions", None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let again = app.call(Method::POST, &format!("/api/v1/tokens/{id}/revoke"), Some(&app.token), None).await;
    assert_error(&again, StatusCode::CONFLICT, "conflict");
    let audit = app.get("/api/v1/audit?action=token.revoked").await;
    let entries = audit.json["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "revoked once: {}", audit.text);
    assert_eq!(entries[0]["subject_id"], id.as_str());
    assert!(!audit.text.contains(&secret), "the audit log never holds a secret");

    let other = app.create_token("elsewhere", Role::Admin).await;
    let foreign = app.call(Method::POST, &format!("/api/v1/tokens/{id}/revoke"), Some(&other), None).await;
    assert_error(&foreign, StatusCode::NOT_FOUND, "not_found");
}

/// What a bearer token gets from `router`: 200 while it works, 401 once it does not.
async fn status_with(router: &axum::Router, token: &str) -> StatusCode {
    use tower::ServiceExt;
    let request = axum::http::Request::get("/api/v1/questions")
        .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(axum::body::Body::empty())
        .unwrap();
    router.clone().oneshot(request).await.unwrap().status()
}

async fn changing_the_bootstrap_token_revokes_the_value_it_replaces(app: TestApp) {
    let (first, second) = (format!("hp_{}", "a".repeat(40)), format!("hp_{}", "b".repeat(40)));
    let (_state, router) = app.restart(|c| c.bootstrap_token = Some(first.parse().unwrap())).await;
    assert_eq!(status_with(&router, &first).await, StatusCode::OK);
    // A token an admin made with the bootstrap token itself and named "bootstrap" too looks like the setting's in
    // the tokens' table (made by "bootstrap", an admin, no person's), but is not the setting's.
    let named =
        app.call(Method::POST, "/api/v1/tokens", Some(&first), Some(json!({"name": "bootstrap", "role": "admin"})));
    let named = named.await;
    assert_eq!(named.status, StatusCode::CREATED, "{}", named.text);
    assert_eq!(named.json["token"]["created_by"], "bootstrap");
    let named = named.json["secret"].as_str().unwrap().to_owned();
    let (_state, router) = app.restart(|c| c.bootstrap_token = Some(first.parse().unwrap())).await;
    assert_eq!(status_with(&router, &named).await, StatusCode::OK, "a restart with the same value revoked it");

    let (_state, router) = app.restart(|c| c.bootstrap_token = Some(second.parse().unwrap())).await;
    assert_eq!(status_with(&router, &first).await, StatusCode::UNAUTHORIZED, "the replaced value still works");
    assert_eq!(status_with(&router, &second).await, StatusCode::OK);
    assert_eq!(status_with(&router, &named).await, StatusCode::OK);
    // Starting again with the same value changes nothing.
    let (_state, router) = app.restart(|c| c.bootstrap_token = Some(second.parse().unwrap())).await;
    assert_eq!(status_with(&router, &second).await, StatusCode::OK);

    let audit = app.get("/api/v1/audit?action=token.revoked").await;
    let entries = audit.json["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "revoked once: {}", audit.text);
    assert_eq!(entries[0]["actor"], "bootstrap token configuration", "{}", audit.text);
    let tokens = app.get("/api/v1/tokens").await;
    let bootstrap: Vec<&Value> =
        tokens.json["items"].as_array().unwrap().iter().filter(|t| t["created_by"] == "bootstrap").collect();
    assert_eq!(bootstrap.len(), 3, "the setting's two and the admin's one: {}", tokens.text);
    assert_eq!(bootstrap.iter().filter(|t| t["revoked_at"].is_null()).count(), 2, "{}", tokens.text);
    assert_eq!(bootstrap.iter().find(|t| t["revoked_at"].is_string()).unwrap()["id"], entries[0]["subject_id"]);
}

async fn only_admins_manage_people_and_tokens(app: TestApp) {
    for role in [Role::Viewer, Role::Responder, Role::Approver, Role::Agent] {
        let token = app.create_token("default", role).await;
        let add = app
            .call(
                Method::POST,
                "/api/v1/members",
                Some(&token),
                Some(json!({"username": "x1", "password": PASSWORD, "role": "admin"})),
            )
            .await;
        assert_error(&add, StatusCode::FORBIDDEN, "forbidden");
        let create = app
            .call(Method::POST, "/api/v1/tokens", Some(&token), Some(json!({"name": "mine", "role": "admin"})))
            .await;
        assert_error(&create, StatusCode::FORBIDDEN, "forbidden");
        assert_error(
            &app.call(Method::GET, "/api/v1/tokens", Some(&token), None).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        );
        assert_eq!(app.call(Method::GET, "/api/v1/members", Some(&token), None).await.status, StatusCode::OK);
    }
    assert_eq!(app.get("/api/v1/members").await.json["items"], json!([]), "nobody was added");
}

async fn bad_people_and_token_input_is_refused_and_changes_nothing(app: TestApp) {
    let cases = [
        (json!({"username": "Alice", "password": PASSWORD, "role": "responder"}), "username"),
        (json!({"username": "alice", "password": "short", "role": "responder"}), "password"),
        (json!({"username": "alice", "role": "responder"}), "password"),
        (json!({"username": "alice", "password": PASSWORD, "role": "agent"}), "role"),
    ];
    for (body, field) in cases {
        let response = app.post("/api/v1/members", body.clone()).await;
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"].get(field).is_some(), "{body} → {error}");
    }
    let unknown = app.post("/api/v1/members", json!({"username": "alice", "password": PASSWORD, "role": "boss"})).await;
    assert_eq!(unknown.status.as_u16() / 100, 4, "{}", unknown.text);
    assert_eq!(app.get("/api/v1/members").await.json["items"], json!([]));

    app.add_person("alice", PASSWORD, Role::Responder).await;
    let again = app.post("/api/v1/members", json!({"username": "alice", "role": "admin"})).await;
    assert_error(&again, StatusCode::CONFLICT, "conflict");
    let takeover = app
        .post("/api/v1/members", json!({"username": "alice", "password": "another password", "role": "admin"}))
        .await;
    assert_error(&takeover, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(sign_in_person(&app, "alice", "another password").await.is_none(), "the password did not change");

    let nameless = app.post("/api/v1/tokens", json!({"name": "  ", "role": "agent"})).await;
    assert_error(&nameless, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let missing = app
        .call(
            Method::PATCH,
            &format!("/api/v1/members/{}", uuid::Uuid::now_v7()),
            Some(&app.token),
            Some(json!({"role": "viewer"})),
        )
        .await;
    assert_error(&missing, StatusCode::NOT_FOUND, "not_found");
}

async fn a_question_assigned_to_a_person_is_answered_by_that_person_only(app: TestApp) {
    app.add_person("gina", PASSWORD, Role::Responder).await;
    app.add_person("hank", PASSWORD, Role::Admin).await;
    let agent = agent_token(&app).await;
    let id = ask(&app, &agent, json!({"title": "Gina, which region?", "assignee": {"user": "gina"}})).await;
    let question = app.get(&format!("/api/v1/questions/{id}")).await;
    assert_eq!(question.json["assignee"], json!({"user": "gina"}));
    let answer = format!("/api/v1/questions/{id}/answer");
    let hank = sign_in_person(&app, "hank", PASSWORD).await.unwrap();
    assert_error(
        &app.session_call(&hank, Method::POST, &answer, Some(json!({"value": "eu"}))).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    assert_error(&app.post(&answer, json!({"value": "eu"})).await, StatusCode::FORBIDDEN, "forbidden");
    let gina = sign_in_person(&app, "gina", PASSWORD).await.unwrap();
    let answered = app.session_call(&gina, Method::POST, &answer, Some(json!({"value": "eu"}))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.json["answered_by"], "gina");
}

async fn a_question_assigned_to_a_role_needs_that_role_or_above(app: TestApp) {
    let agent = agent_token(&app).await;
    let id = ask(
        &app,
        &agent,
        json!({"title": "Rotate the key?", "response_type": "boolean", "assignee": {"role": "approver"}}),
    )
    .await;
    let answer = format!("/api/v1/questions/{id}/answer");
    let responder = app.create_token("default", Role::Responder).await;
    let refused = app.call(Method::POST, &answer, Some(&responder), Some(json!({"value": true}))).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    let approver = app.create_token("default", Role::Approver).await;
    let answered = app.call(Method::POST, &answer, Some(&approver), Some(json!({"value": true}))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
}

async fn an_assignee_must_be_someone_who_can_answer(app: TestApp) {
    app.add_person("ivy", PASSWORD, Role::Responder).await;
    let agent = agent_token(&app).await;
    let cases = [
        (json!({"title": "q", "assignee": {"user": "nobody"}}), "assignee.user"),
        (json!({"title": "q", "assignee": {"role": "viewer"}}), "assignee.role"),
        (json!({"title": "q", "assignee": {"role": "agent"}}), "assignee.role"),
        (
            json!({"kind": "approval", "title": "q", "action": {"tool_name": "t", "arguments": {}}, "assignee": {"user": "ivy"}}),
            "assignee.user",
        ),
    ];
    for (body, field) in cases {
        let response = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(body.clone())).await;
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"].get(field).is_some(), "{body} → {error}");
    }
    let malformed =
        app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(json!({"title": "q", "assignee": "ivy"}))).await;
    assert_eq!(malformed.status.as_u16() / 100, 4);
    assert_eq!(app.get("/api/v1/questions?status=pending").await.json["items"], json!([]), "nothing was stored");
}

async fn whoever_requests_an_approval_may_not_approve_it(app: TestApp) {
    let requester = app.create_token("default", Role::Approver).await;
    let id = ask(&app, &requester, approval()).await;
    let answer = format!("/api/v1/questions/{id}/answer");
    let refused = app.call(Method::POST, &answer, Some(&requester), Some(json!({"value": true}))).await;
    let error = assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert!(error["message"].as_str().unwrap().contains("separation of duties"), "{error}");
    assert_eq!(app.get(&format!("/api/v1/questions/{id}")).await.json["status"], "pending");
    // Withdrawing one's own request by rejecting it is allowed.
    let withdrawn = app.call(Method::POST, &answer, Some(&requester), Some(json!({"value": false}))).await;
    assert_eq!(withdrawn.status, StatusCode::OK, "{}", withdrawn.text);

    let id = ask(&app, &requester, approval()).await;
    let approved = app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": true})).await;
    assert_eq!(approved.status, StatusCode::OK, "another approver may approve: {}", approved.text);

    // A person's token requests as that person: they may approve it through no credential of theirs.
    app.add_person("quinn", PASSWORD, Role::Admin).await;
    let quinn = sign_in_person(&app, "quinn", PASSWORD).await.unwrap();
    let body = json!({"name": "quinn's agent", "role": "agent"});
    let made = app.session_call(&quinn, Method::POST, "/api/v1/tokens", Some(body)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let id = ask(&app, made.json["secret"].as_str().unwrap(), approval()).await;
    let answer = format!("/api/v1/questions/{id}/answer");
    let refused = app.session_call(&quinn, Method::POST, &answer, Some(json!({"value": true}))).await;
    let error = assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert!(error["message"].as_str().unwrap().contains("separation of duties"), "{error}");
    let body = json!({"name": "quinn's laptop", "role": "approver"});
    let other = app.session_call(&quinn, Method::POST, "/api/v1/tokens", Some(body)).await.json;
    let refused = app.call(Method::POST, &answer, other["secret"].as_str(), Some(json!({"value": true}))).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(app.get(&format!("/api/v1/questions/{id}")).await.json["status"], "pending");
    let approved = app.post(&answer, json!({"value": true})).await;
    assert_eq!(approved.status, StatusCode::OK, "someone else may approve: {}", approved.text);

    // Configurable: off, the requester may approve.
    let (_, router) = app.restart(|config| config.separation_of_duties = false).await;
    let id = ask(&app, &requester, approval()).await;
    let request = axum::http::Request::post(format!("/api/v1/questions/{id}/answer"))
        .header(axum::http::header::AUTHORIZATION, format!("Bearer {requester}"))
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(r#"{"value": true}"#))
        .unwrap();
    let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("holdpoint-people-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn a_password_change_needs_the_current_password(app: TestApp) {
    app.add_person("jules", PASSWORD, Role::Viewer).await;
    let elsewhere = sign_in_person(&app, "jules", PASSWORD).await.unwrap();
    let session = sign_in_person(&app, "jules", PASSWORD).await.unwrap();
    let change_password =
        async |body: Value| app.session_call(&session, Method::POST, "/api/v1/me/password", Some(body)).await;
    let wrong =
        change_password(json!({"current_password": "not it at all", "new_password": "a brand new passphrase"})).await;
    assert_error(&wrong, StatusCode::FORBIDDEN, "forbidden");
    let short = change_password(json!({"current_password": PASSWORD, "new_password": "tiny"})).await;
    assert_error(&short, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let changed =
        change_password(json!({"current_password": PASSWORD, "new_password": "a brand new passphrase"})).await;
    assert_eq!(changed.status, StatusCode::NO_CONTENT, "{}", changed.text);
    // Whoever signed in with the old password is signed out; the session that changed it goes on.
    let me = async |session| app.session_call(session, Method::GET, "/api/v1/me", None).await.status;
    assert_eq!(me(&elsewhere).await, StatusCode::UNAUTHORIZED);
    assert_eq!(me(&session).await, StatusCode::OK);
    assert!(sign_in_person(&app, "jules", PASSWORD).await.is_none());
    assert!(sign_in_person(&app, "jules", "a brand new passphrase").await.is_some());
    // A token has no password.
    let by_token = app.post("/api/v1/me/password", json!({"new_password": "a brand new passphrase"})).await;
    assert_error(&by_token, StatusCode::FORBIDDEN, "forbidden");
}

async fn the_first_start_link_signs_in_once_and_stops_once_someone_has_a_password(app: TestApp) {
    let store = app.state.store.as_ref();
    let workspace = store.ensure_workspace("default").await.unwrap();
    assert_eq!(
        holdpoint::people::first_start_signin_code(store, workspace.id).await.unwrap(),
        None,
        "the test's admin token is a credential: no link"
    );
    // As on a fresh first start: nobody has a credential once the admin token is revoked.
    let token_id: uuid::Uuid = app.get("/api/v1/me").await.json["id"].as_str().unwrap().parse().unwrap();
    let revoked = holdpoint::store::NewAuditEntry {
        workspace_id: workspace.id,
        actor: holdpoint::store::AuditActor::policy("test harness", None),
        action: "token.revoked".into(),
        subject_type: "token".into(),
        subject_id: Some(token_id.to_string()),
        before: None,
        after: None,
        diff: None,
        created_at: holdpoint::store::now(),
    };
    store.revoke_token(workspace.id, token_id, holdpoint::store::now(), &revoked).await.unwrap();
    let stale = holdpoint::people::first_start_signin_code(store, workspace.id).await.unwrap().expect("a link");
    let code = holdpoint::people::first_start_signin_code(store, workspace.id).await.unwrap().expect("a new link");
    assert_ne!(stale, code);

    let refused = app.post_sign_in(&format!("code={stale}")).await;
    assert!(refused.headers.get(axum::http::header::SET_COOKIE).is_none(), "only the newest link works");
    let session = app.sign_in_with(&format!("code={code}&next=%2Fsettings")).await.expect("the link signs in");
    let me = app.session_call(&session, Method::GET, "/api/v1/me", None).await;
    assert_eq!(
        (me.json["kind"].as_str(), me.json["name"].as_str(), me.json["role"].as_str()),
        (Some("user"), Some("admin"), Some("admin"))
    );
    assert!(app.sign_in_with(&format!("code={code}")).await.is_none(), "a link works once");

    // A link printed while nobody had a credential, never used, stops working once someone has one (an operator's
    // `holdpoint token create`, here): the journal that holds it is no key to the workspace.
    let unused = holdpoint::people::first_start_signin_code(store, workspace.id).await.unwrap().expect("a link");
    let operators = app.create_token("default", Role::Admin).await;
    let refused = app.post_sign_in(&format!("code={unused}")).await;
    assert!(refused.headers.get(axum::http::header::SET_COOKIE).is_none(), "{}", refused.text);
    let operators_id = app.call(Method::GET, "/api/v1/me", Some(&operators), None).await.json["id"].clone();
    let revoked = app
        .call(
            Method::POST,
            &format!("/api/v1/tokens/{}/revoke", operators_id.as_str().unwrap()),
            Some(&operators),
            Some(json!({})),
        )
        .await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);

    let set = app
        .session_call(
            &session,
            Method::POST,
            "/api/v1/me/password",
            Some(json!({"new_password": "the admin's own passphrase"})),
        )
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.text);
    assert_eq!(holdpoint::people::first_start_signin_code(store, workspace.id).await.unwrap(), None);
    assert!(sign_in_person(&app, "admin", "the admin's own passphrase").await.is_some());
}

#[tokio::test]
async fn holdpoint_serve_prints_a_one_time_link_on_a_first_start() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile_dir();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .arg("serve")
        .env("HOLDPOINT_ADDR", "127.0.0.1:0")
        .env("HOLDPOINT_DATA_DIR", &dir)
        .env_remove("DATABASE_URL")
        .env_remove("HOLDPOINT_BOOTSTRAP_TOKEN")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let link = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("/signin?code=") {
                return line.trim().to_owned();
            }
        }
        panic!("no sign-in link was printed")
    })
    .await
    .unwrap();
    let (page_url, code) = link.split_once("?code=").unwrap();
    assert!(page_url.starts_with("http://127.0.0.1:") && page_url.ends_with("/signin"), "{link}");
    assert_eq!(code.len(), 40);
    // Following it shows a button; only pressing it (a POST) spends the code.
    let page = reqwest::get(&link).await.unwrap().text().await.unwrap();
    assert!(page.contains("signin-link-form") && page.contains(code), "the page carries the code in its form");
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let base = page_url.trim_end_matches("/signin");
    let signed_in = client
        .post(format!("{base}/auth/signin"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("code={code}"))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    assert!(signed_in.headers().get("set-cookie").is_some());
    let again = client
        .post(format!("{base}/auth/signin"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("code={code}"))
        .send()
        .await
        .unwrap();
    assert!(again.headers().get("set-cookie").is_none());
    drop(child);
    let _ = std::fs::remove_dir_all(dir);
}

/// Makes the database refuse every new audit entry, as a full disk or a broken chain would, until the returned
/// statement undoes it.
async fn refuse_audit_entries(app: &TestApp) -> &'static str {
    use sqlx::Connection;
    if app.database_url.starts_with("sqlite:") {
        let mut db = sqlx::SqliteConnection::connect(&app.database_url).await.unwrap();
        sqlx::query(
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'audit refused'); END",
        )
        .execute(&mut db)
        .await
        .unwrap();
        "DROP TRIGGER refuse_audit"
    } else {
        let mut db = sqlx::PgConnection::connect(&app.database_url).await.unwrap();
        sqlx::query(
            "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$",
        )
        .execute(&mut db)
        .await
        .unwrap();
        // Entries are drafted first and sealed into the log at commit: refuse both.
        for table in ["audit_drafts", "audit_log"] {
            sqlx::query(&format!(
                "CREATE TRIGGER refuse_audit BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION refuse_audit()"
            ))
            .execute(&mut db)
            .await
            .unwrap();
        }
        "DROP FUNCTION refuse_audit() CASCADE"
    }
}

async fn undo(app: &TestApp, statement: &str) {
    use sqlx::Connection;
    if app.database_url.starts_with("sqlite:") {
        let mut db = sqlx::SqliteConnection::connect(&app.database_url).await.unwrap();
        sqlx::query(statement).execute(&mut db).await.unwrap();
    } else {
        let mut db = sqlx::PgConnection::connect(&app.database_url).await.unwrap();
        sqlx::query(statement).execute(&mut db).await.unwrap();
    }
}

/// Every change to people and credentials commits in one transaction with the audit entry that records it: when
/// the entry cannot be written, the change is not made either (and nothing happens unrecorded).
async fn a_people_change_commits_with_its_audit_entry_or_not_at_all(app: TestApp) {
    let bob =
        app.post("/api/v1/members", json!({ "username": "bob", "password": PASSWORD, "role": "responder" })).await;
    assert_eq!(bob.status, StatusCode::CREATED, "{}", bob.text);
    let bob_id = bob.json["user_id"].as_str().unwrap().to_owned();
    let token = app.post("/api/v1/tokens", json!({ "name": "ci", "role": "agent" })).await.json;
    let (token_id, secret) = (token["token"]["id"].as_str().unwrap().to_owned(), token["secret"].as_str().unwrap());
    let audited = app.get("/api/v1/audit?limit=200").await.json["items"].as_array().unwrap().len();

    let undo_statement = refuse_audit_entries(&app).await;
    let new_member = json!({ "username": "carol", "password": PASSWORD, "role": "approver" });
    assert_eq!(app.post("/api/v1/members", new_member).await.status, StatusCode::INTERNAL_SERVER_ERROR);
    let bob_path = format!("/api/v1/members/{bob_id}");
    let promoted = app.call(Method::PATCH, &bob_path, Some(&app.token), Some(json!({ "role": "admin" }))).await;
    assert_eq!(promoted.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", promoted.text);
    let removed = app.call(Method::DELETE, &bob_path, Some(&app.token), None).await;
    assert_eq!(removed.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", removed.text);
    let revoked = app.post(&format!("/api/v1/tokens/{token_id}/revoke"), json!({})).await;
    assert_eq!(revoked.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", revoked.text);
    let store = app.state.store.as_ref();
    let bob_account = store.user_by_username("bob").await.unwrap().unwrap();
    let entry = holdpoint::store::NewAuditEntry {
        workspace_id: app.state.store.ensure_workspace("default").await.unwrap().id,
        actor: holdpoint::store::AuditActor::policy("test harness", None),
        action: "user.password_changed".into(),
        subject_type: "user".into(),
        subject_id: Some(bob_id.clone()),
        before: None,
        after: None,
        diff: None,
        created_at: holdpoint::store::now(),
    };
    assert!(store.set_password(bob_account.id, "not-a-hash", None, &[entry]).await.is_err());
    undo(&app, undo_statement).await;

    assert!(store.user_by_username("carol").await.unwrap().is_none(), "no account without its record");
    let members = app.get("/api/v1/members").await.json;
    let bob_now = members["items"].as_array().unwrap().iter().find(|m| m["username"] == "bob").cloned();
    assert_eq!(bob_now.expect("bob is still a member")["role"], "responder", "the role is unchanged");
    let me = app.call(Method::GET, "/api/v1/me", Some(secret), None).await;
    assert_eq!(me.status, StatusCode::OK, "the token still works: {}", me.text);
    let bob_account_now = store.user_by_username("bob").await.unwrap().unwrap();
    assert_eq!(bob_account_now.password_hash, bob_account.password_hash, "the password is unchanged");
    let audit = app.get("/api/v1/audit?limit=200").await.json;
    assert_eq!(audit["items"].as_array().unwrap().len(), audited, "nothing was recorded either");
    holdpoint::audit::verify(store).await.unwrap().expect("the chain is unbroken");

    // With the log writable again, each change commits with its entry.
    let promoted = app.call(Method::PATCH, &bob_path, Some(&app.token), Some(json!({ "role": "admin" }))).await;
    assert_eq!(promoted.status, StatusCode::OK, "{}", promoted.text);
    let audit = app.get("/api/v1/audit?limit=200").await.json;
    assert_eq!(audit["items"][0]["action"], "role.changed", "{audit}");
    assert_eq!(audit["items"][0]["before"]["role"], "responder");
}

async fn invite(app: &TestApp, admin_token: &str, username: &str, role: &str) -> common::TestResponse {
    app.call(Method::POST, "/api/v1/members", Some(admin_token), Some(json!({"username": username, "role": role})))
        .await
}

async fn usernames(app: &TestApp, token: &str) -> Vec<String> {
    let members = app.call(Method::GET, "/api/v1/members", Some(token), None).await.json;
    members["items"].as_array().unwrap().iter().map(|m| m["username"].as_str().unwrap().to_owned()).collect()
}

async fn an_existing_account_joins_another_workspace_only_by_accepting_an_invitation(app: TestApp) {
    app.add_person("vic", PASSWORD, Role::Approver).await;
    app.add_person("bob", PASSWORD, Role::Viewer).await;
    let other = app.create_token("other", Role::Admin).await;

    // An admin of another workspace names vic's account: an invitation, no membership, nothing vic's.
    let invited = invite(&app, &other, "vic", "admin").await;
    assert_eq!(invited.status, StatusCode::ACCEPTED, "{}", invited.text);
    let invitation = invited.json["invitation"].clone();
    assert_eq!(
        (invitation["workspace"].as_str(), invitation["username"].as_str(), invitation["role"].as_str()),
        (Some("other"), Some("vic"), Some("admin")),
        "{invitation}"
    );
    assert_eq!(invitation["invited_by"], "admin of other");
    assert!(!usernames(&app, &other).await.contains(&"vic".to_owned()), "vic is no member of other yet");
    let vic_id = app.get("/api/v1/members").await.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["username"] == "vic")
        .unwrap()["user_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let patch = app
        .call(Method::PATCH, &format!("/api/v1/members/{vic_id}"), Some(&other), Some(json!({"email": "x@evil.test"})))
        .await;
    assert_error(&patch, StatusCode::NOT_FOUND, "not_found");
    assert_error(&invite(&app, &other, "vic", "viewer").await, StatusCode::CONFLICT, "conflict");
    let audit = app.call(Method::GET, "/api/v1/audit?action=member.invited", Some(&other), None).await.json;
    assert_eq!(audit["items"][0]["after"]["username"], "vic", "{audit}");

    // Only vic sees and answers it; a token has no invitations.
    let vic = sign_in_person(&app, "vic", PASSWORD).await.unwrap();
    let bob = sign_in_person(&app, "bob", PASSWORD).await.unwrap();
    let mine = app.session_call(&vic, Method::GET, "/api/v1/me/invitations", None).await;
    assert_eq!(mine.json["items"].as_array().map(Vec::len), Some(1), "{}", mine.text);
    assert_eq!(mine.json["items"][0]["id"], invitation["id"]);
    let bobs = app.session_call(&bob, Method::GET, "/api/v1/me/invitations", None).await;
    assert_eq!(bobs.json["items"], json!([]), "{}", bobs.text);
    let id = invitation["id"].as_str().unwrap();
    let accept = format!("/api/v1/me/invitations/{id}/accept");
    assert_error(&app.session_call(&bob, Method::POST, &accept, None).await, StatusCode::NOT_FOUND, "not_found");
    assert_error(&app.post(&accept, json!({})).await, StatusCode::FORBIDDEN, "forbidden");
    assert!(!usernames(&app, &other).await.contains(&"vic".to_owned()));

    // Vic accepts: a member of other with the role offered, on other's record; once.
    let accepted = app.session_call(&vic, Method::POST, &accept, None).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
    let members = app.call(Method::GET, "/api/v1/members", Some(&other), None).await.json;
    let member = members["items"].as_array().unwrap().iter().find(|m| m["username"] == "vic").cloned();
    assert_eq!(member.map(|m| m["role"].clone()), Some(json!("admin")), "{members}");
    let audit = app.call(Method::GET, "/api/v1/audit?action=invitation.accepted", Some(&other), None).await.json;
    assert_eq!(
        (audit["items"][0]["actor"].as_str(), audit["items"][0]["subject_id"].as_str()),
        (Some("vic"), Some(vic_id.as_str()))
    );
    assert_error(&app.session_call(&vic, Method::POST, &accept, None).await, StatusCode::NOT_FOUND, "not_found");
    assert_error(&invite(&app, &other, "vic", "viewer").await, StatusCode::CONFLICT, "conflict");

    // Declined: the invitation goes, and nothing else changes.
    let third = app.create_token("third", Role::Admin).await;
    let offered = invite(&app, &third, "bob", "responder").await;
    assert_eq!(offered.status, StatusCode::ACCEPTED, "{}", offered.text);
    let id = offered.json["invitation"]["id"].as_str().unwrap();
    let declined = app.session_call(&bob, Method::POST, &format!("/api/v1/me/invitations/{id}/decline"), None).await;
    assert_eq!(declined.status, StatusCode::OK, "{}", declined.text);
    assert!(!usernames(&app, &third).await.contains(&"bob".to_owned()));
    let audit = app.call(Method::GET, "/api/v1/audit?action=invitation.declined", Some(&third), None).await.json;
    assert_eq!(audit["items"][0]["actor"], "bob", "{audit}");
    let again = app.session_call(&bob, Method::POST, &format!("/api/v1/me/invitations/{id}/accept"), None).await;
    assert_error(&again, StatusCode::NOT_FOUND, "not_found");
    assert!(!usernames(&app, &third).await.contains(&"bob".to_owned()));

    // A new username is still an account and a member at once.
    let new = app
        .call(
            Method::POST,
            "/api/v1/members",
            Some(&third),
            Some(json!({"username": "nia", "password": PASSWORD, "role": "viewer"})),
        )
        .await;
    assert_eq!(new.status, StatusCode::CREATED, "{}", new.text);
    assert_eq!(new.json["username"], "nia");
}

/// A session of `user_id` in `workspace_id` opened `minutes_ago`, as any sign-in stores one.
async fn session_opened(
    app: &TestApp,
    user_id: uuid::Uuid,
    workspace_id: uuid::Uuid,
    minutes_ago: i64,
) -> common::Session {
    let secret = holdpoint::credentials::random_secret(48);
    let csrf = holdpoint::credentials::random_secret(32);
    let opened = chrono::Utc::now() - chrono::Duration::minutes(minutes_ago);
    app.state
        .store
        .insert_session(&holdpoint::store::SessionRow {
            id_hash: holdpoint::credentials::hash_secret(&secret),
            workspace_id,
            principal_id: user_id,
            principal_kind: holdpoint::store::PrincipalKind::User,
            csrf_token: csrf.clone(),
            created_at: opened,
            expires_at: opened + chrono::Duration::hours(12),
        })
        .await
        .unwrap();
    common::Session { cookie: format!("hp_session={secret}"), csrf }
}

async fn a_first_password_needs_a_fresh_sign_in(app: TestApp) {
    // An account without a password, as single sign-on or the operator makes one.
    let store = app.state.store.as_ref();
    let workspace = store.ensure_workspace("default").await.unwrap();
    let user = holdpoint::store::UserRow {
        id: uuid::Uuid::now_v7(),
        username: "sso-only".into(),
        display_name: "SSO only".into(),
        password_hash: None,
        created_at: chrono::Utc::now(),
        disabled_at: None,
    };
    store.insert_user(&user, &[]).await.unwrap();
    store.insert_membership(workspace.id, user.id, Role::Responder, &[]).await.unwrap();
    let first = json!({"new_password": "a brand new passphrase"});

    // A session opened long ago (left signed in, or taken over) gives the account no password.
    let stale = session_opened(&app, user.id, workspace.id, 11).await;
    assert_eq!(app.session_call(&stale, Method::GET, "/api/v1/me", None).await.status, StatusCode::OK);
    let refused = app.session_call(&stale, Method::POST, "/api/v1/me/password", Some(first.clone())).await;
    let error = assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert!(error["message"].as_str().unwrap().contains("fresh sign-in"), "{error}");
    assert!(sign_in_person(&app, "sso-only", "a brand new passphrase").await.is_none());
    let audit = app.get("/api/v1/audit?action=password.changed").await.json;
    assert_eq!(audit["items"], json!([]), "{audit}");

    // Signed in a minute ago: the first password is set.
    let fresh = session_opened(&app, user.id, workspace.id, 1).await;
    let set = app.session_call(&fresh, Method::POST, "/api/v1/me/password", Some(first)).await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.text);
    assert!(sign_in_person(&app, "sso-only", "a brand new passphrase").await.is_some());
    // Setting it ended the account's other sessions, the stale one too.
    assert_eq!(app.session_call(&stale, Method::GET, "/api/v1/me", None).await.status, StatusCode::UNAUTHORIZED);
    // Once there is one, the current password is what counts, however old the session.
    let old = session_opened(&app, user.id, workspace.id, 60).await;
    let change = json!({"current_password": "a brand new passphrase", "new_password": "another new passphrase"});
    let changed = app.session_call(&old, Method::POST, "/api/v1/me/password", Some(change)).await;
    assert_eq!(changed.status, StatusCode::NO_CONTENT, "{}", changed.text);
}
