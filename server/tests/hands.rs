//! Many hands (docs/api.md): approvals that need several people and claims, on both backends.

use crate::common;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{TestApp, assert_error};
use serde_json::{Value, json};

backend_tests!(
    two_of_three_waits_for_the_second_approval_and_counts_each_person_once,
    one_rejection_answers_a_quorum_question_false_at_once,
    twenty_concurrent_approvers_on_two_instances_make_one_transition,
    a_claim_keeps_others_from_answering_until_it_ends_but_not_an_admin,
    quorum_and_claim_input_is_checked_and_nothing_is_stored,
    round_robin_gives_a_roles_questions_to_its_members_in_turn,
    two_tokens_of_one_person_are_one_approval_and_a_service_token_gives_none,
    a_token_named_like_a_person_does_not_answer_in_their_claim_but_their_own_token_does,
    cancelling_anothers_question_needs_the_right_to_answer_it,
    an_action_link_says_where_a_quorum_stands_and_who_holds_the_claim,
    who_leaves_or_may_no_longer_decide_counts_toward_no_quorum_and_holds_no_claim,
);

/// A token of its own name made by the operator's token: a service identity, no person's. Its secret.
async fn named_token(app: &TestApp, name: &str, role: Role) -> String {
    let created = app.post("/api/v1/tokens", json!({"name": name, "role": role})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.json["secret"].as_str().unwrap().to_owned()
}

/// A token named `name` that belongs to the person `username` (a member, made without a password if new), as one
/// they made themselves. Its secret.
async fn persons_token(app: &TestApp, username: &str, name: &str, role: Role) -> String {
    let store = app.state.store.as_ref();
    let workspace = store.ensure_workspace("default").await.unwrap();
    let user = match store.user_by_username(username).await.unwrap() {
        Some(user) => user,
        None => {
            let user = holdpoint::store::UserRow {
                id: uuid::Uuid::now_v7(),
                username: username.into(),
                display_name: username.into(),
                password_hash: None,
                created_at: chrono::Utc::now(),
                disabled_at: None,
            };
            store.insert_user(&user, &[]).await.unwrap();
            let member_role = if role == Role::Agent { Role::Responder } else { role };
            store.insert_membership(workspace.id, user.id, member_role, &[]).await.unwrap();
            user
        }
    };
    let secret = holdpoint::credentials::new_token_secret();
    let token = holdpoint::store::TokenRow {
        id: uuid::Uuid::now_v7(),
        workspace_id: workspace.id,
        name: name.into(),
        role,
        secret_hash: holdpoint::credentials::hash_secret(&secret),
        created_at: chrono::Utc::now(),
        created_by: Some(username.into()),
        maker_id: Some(user.id),
    };
    let actor = holdpoint::store::AuditActor::policy("test harness", None);
    holdpoint::people::store_token(store, &token, &actor).await.unwrap();
    secret
}

fn quorum_approval(required: u8, eligible: Option<Value>) -> Value {
    let mut body = json!({
        "kind": "approval",
        "title": "Drop the staging database?",
        "action": {"tool_name": "shell", "arguments": {"command": "dropdb staging"}},
        "required_approvals": required,
    });
    if let Some(eligible) = eligible {
        body["eligible"] = eligible;
    }
    body
}

fn with_assignee(mut body: Value, assignee: Value) -> Value {
    body["assignee"] = assignee;
    body
}

async fn ask(app: &TestApp, token: &str, body: Value) -> String {
    let response = app.call(Method::POST, "/api/v1/questions", Some(token), Some(body)).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.json["id"].as_str().unwrap().to_owned()
}

async fn answer(app: &TestApp, token: &str, id: &str, body: Value) -> common::TestResponse {
    app.call(Method::POST, &format!("/api/v1/questions/{id}/answer"), Some(token), Some(body)).await
}

const PASSWORD: &str = "correct horse battery staple";

/// A person with the role, signed in.
async fn person(app: &TestApp, username: &str, role: Role) -> common::Session {
    app.add_person(username, PASSWORD, role).await;
    let form = format!("username={username}&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    app.sign_in_with(&form).await.expect("signed in")
}

async fn two_of_three_waits_for_the_second_approval_and_counts_each_person_once(app: TestApp) {
    let requester = named_token(&app, "release bot", Role::Approver).await;
    let ana = person(&app, "ana", Role::Approver).await;
    let ben = person(&app, "ben", Role::Approver).await;
    person(&app, "cyd", Role::Approver).await;
    let dee = person(&app, "dee", Role::Admin).await;
    let id = ask(&app, &requester, quorum_approval(2, Some(json!({"users": ["ana", "ben", "cyd"]})))).await;
    let asked = app.get(&format!("/api/v1/questions/{id}")).await.json;
    assert_eq!(asked["required_approvals"], 2);
    assert_eq!(asked["eligible"], json!({"users": ["ana", "ben", "cyd"]}));
    assert!(asked.get("approvals").is_none(), "none yet: {asked}");
    let answer_as = |session: &common::Session, body: Value| {
        let path = format!("/api/v1/questions/{id}/answer");
        let (app, session) = (&app, session.clone());
        async move { app.session_call(&session, Method::POST, &path, Some(body)).await }
    };

    // Someone `eligible` does not name may not decide it, an admin included; nor a token.
    assert_error(&answer_as(&dee, json!({"value": true})).await, StatusCode::FORBIDDEN, "forbidden");
    assert_error(&answer(&app, &requester, &id, json!({"value": true})).await, StatusCode::FORBIDDEN, "forbidden");

    let first = answer_as(&ana, json!({"value": true, "comment": "schema is backed up"})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.json["status"], "pending", "one approval of two leaves it pending");
    assert_eq!(first.json["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(first.json["approvals"][0]["by"], "ana");
    assert_eq!(first.json["approvals"][0]["comment"], "schema is backed up");
    // Approving again counts once.
    let again = answer_as(&ana, json!({"value": true})).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.json["status"], "pending");
    assert_eq!(again.json["approvals"].as_array().unwrap().len(), 1);
    // The list shows the progress.
    let listed = app.get("/api/v1/questions?status=pending").await.json;
    assert_eq!(listed["items"][0]["approvals"].as_array().unwrap().len(), 1, "{listed}");

    let second = answer_as(&ben, json!({"value": true, "comment": "go"})).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(second.json["status"], "answered");
    assert_eq!(second.json["response"]["value"], true);
    assert_eq!(second.json["answered_by"], "ben");
    let by: Vec<&str> =
        second.json["approvals"].as_array().unwrap().iter().map(|a| a["by"].as_str().unwrap()).collect();
    assert_eq!(by, ["ana", "ben"]);

    // The events: asked, one approval added, answered; the audit records each approval and the approvers.
    let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
    let events = app.state.store.workspace_events_after(workspace, 0, 100).await.unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e.question_id.map(|q| q.to_string()) == Some(id.clone()))
        .map(|e| e.event_type.as_str())
        .collect();
    assert_eq!(kinds, ["question_asked", "question_approval_added", "question_answered"]);
    let audit = app.get("/api/v1/audit?limit=50").await.json;
    let entries: Vec<&Value> =
        audit["items"].as_array().unwrap().iter().filter(|e| e["subject_id"] == id.as_str()).collect();
    let added = entries.iter().find(|e| e["action"] == "question.approval_added").expect("the first is audited");
    assert_eq!(added["actor"], "ana");
    assert_eq!(added["after"]["approvals"], 1);
    let answered = entries.iter().find(|e| e["action"] == "question.answered").expect("the transition is audited");
    assert_eq!(answered["after"]["approvals"].as_array().unwrap().len(), 2, "{answered}");

    // Separation of duties applies to every approver: whoever asked may not add an approval either.
    let id = ask(&app, &requester, quorum_approval(2, None)).await;
    let own = answer(&app, &requester, &id, json!({"value": true})).await;
    let error = assert_error(&own, StatusCode::FORBIDDEN, "forbidden");
    assert!(error["message"].as_str().unwrap().contains("separation of duties"), "{error}");
    assert!(app.get(&format!("/api/v1/questions/{id}")).await.json.get("approvals").is_none());
}

async fn one_rejection_answers_a_quorum_question_false_at_once(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let ana = persons_token(&app, "ana", "ana", Role::Approver).await;
    let ben = persons_token(&app, "ben", "ben", Role::Approver).await;
    let id = ask(&app, &agent, quorum_approval(3, None)).await;
    assert_eq!(answer(&app, &ana, &id, json!({"value": true})).await.json["status"], "pending");
    let rejected = answer(&app, &ben, &id, json!({"value": false, "comment": "not during the freeze"})).await;
    assert_eq!(rejected.status, StatusCode::OK, "{}", rejected.text);
    assert_eq!(rejected.json["status"], "answered");
    assert_eq!(rejected.json["response"]["value"], false);
    assert_eq!(rejected.json["answered_by"], "ben");
    assert_eq!(rejected.json["approvals"][0]["by"], "ana", "the approval given stays on record");
    let after = answer(&app, &app.token, &id, json!({"value": true})).await;
    assert_error(&after, StatusCode::CONFLICT, "conflict");
}

async fn twenty_concurrent_approvers_on_two_instances_make_one_transition(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let mut approvers = Vec::new();
    for n in 0..20 {
        let name = format!("approver-{n:02}");
        approvers.push((name.clone(), persons_token(&app, &name, &name, Role::Approver).await));
    }
    let (second_state, second_router) = app.restart(|_| {}).await;
    for round in 0..3 {
        let id = ask(&app, &agent, quorum_approval(2, Some(json!({"role": "approver"})))).await;
        let requests = approvers.iter().enumerate().map(|(n, (_, secret))| {
            let router = if n % 2 == 0 { app.router.clone() } else { second_router.clone() };
            let request = axum::http::Request::post(format!("/api/v1/questions/{id}/answer"))
                .header(axum::http::header::AUTHORIZATION, format!("Bearer {secret}"))
                .header(axum::http::header::CONTENT_TYPE, "application/json")
                .body(axum::body::Body::from(r#"{"value": true}"#))
                .unwrap();
            tokio::spawn(async move {
                let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
                let status = response.status();
                let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
                (status, serde_json::from_slice::<Value>(&body).unwrap())
            })
        });
        let mut outcomes = Vec::new();
        for request in requests.collect::<Vec<_>>() {
            outcomes.push(request.await.unwrap());
        }
        let answered =
            outcomes.iter().filter(|(status, body)| *status == StatusCode::OK && body["status"] == "answered").count();
        let added =
            outcomes.iter().filter(|(status, body)| *status == StatusCode::OK && body["status"] == "pending").count();
        let conflicts = outcomes.iter().filter(|(status, _)| *status == StatusCode::CONFLICT).count();
        assert_eq!((added, answered, conflicts), (1, 1, 18), "round {round}: {outcomes:?}");

        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        assert_eq!(question["status"], "answered");
        let approvals = question["approvals"].as_array().unwrap();
        assert_eq!(approvals.len(), 2, "exactly the first two approvals are recorded: {question}");
        assert_ne!(approvals[0]["by"], approvals[1]["by"]);
        let first_ok = outcomes.iter().find(|(_, body)| body["status"] == "pending").unwrap();
        assert_eq!(
            approvals[0]["by"], first_ok.1["approvals"][0]["by"],
            "the first recorded is the one told it was first"
        );
        let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
        let events = app.state.store.workspace_events_after(workspace, 0, 1000).await.unwrap();
        let of_question: Vec<&str> = events
            .iter()
            .filter(|e| e.question_id.map(|q| q.to_string()) == Some(id.clone()))
            .map(|e| e.event_type.as_str())
            .collect();
        assert_eq!(of_question, ["question_asked", "question_approval_added", "question_answered"], "round {round}");
    }
    drop(second_state);
}

async fn a_claim_keeps_others_from_answering_until_it_ends_but_not_an_admin(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let alice = named_token(&app, "alice", Role::Responder).await;
    let bob = named_token(&app, "bob", Role::Responder).await;
    let ask_text = json!({"title": "Which region?", "response_type": "text"});
    let id = ask(&app, &agent, ask_text.clone()).await;
    let claim = |token: String, body: Option<Value>| {
        let path = format!("/api/v1/questions/{id}/claim");
        let app = &app;
        async move { app.call(Method::POST, &path, Some(&token), body).await }
    };

    let claimed = claim(alice.clone(), None).await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.text);
    assert_eq!(claimed.json["claimed_by"], "alice");
    assert_eq!(claimed.json["status"], "pending");
    let until = app::types::time::parse_rfc3339(claimed.json["claim_expires_at"].as_str().unwrap()).unwrap();
    let ttl = (until - chrono::Utc::now()).num_seconds();
    assert!((1790..=1800).contains(&ttl), "the default claim lasts 30 minutes: {ttl}");
    // Everyone sees who holds it, in the question and in the list.
    assert_eq!(app.get(&format!("/api/v1/questions/{id}")).await.json["claimed_by"], "alice");
    assert_eq!(app.get("/api/v1/questions?status=pending").await.json["items"][0]["claimed_by"], "alice");

    let refused = answer(&app, &bob, &id, json!({"value": "eu-west-1"})).await;
    let error = assert_error(&refused, StatusCode::CONFLICT, "conflict");
    assert_eq!(error["details"]["claimed_by"], "alice", "{error}");
    assert!(error["message"].as_str().unwrap().contains("alice"));
    let taken = claim(bob.clone(), None).await;
    assert_eq!(assert_error(&taken, StatusCode::CONFLICT, "conflict")["details"]["claimed_by"], "alice");
    let not_bobs = app.call(Method::POST, &format!("/api/v1/questions/{id}/unclaim"), Some(&bob), None).await;
    assert_error(&not_bobs, StatusCode::CONFLICT, "conflict");

    // Alice lets it go; bob claims it for two seconds; after that alice can answer.
    let released = app.call(Method::POST, &format!("/api/v1/questions/{id}/unclaim"), Some(&alice), None).await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text);
    assert!(released.json.get("claimed_by").is_none(), "{}", released.text);
    let short = claim(bob.clone(), Some(json!({"ttl_seconds": 2}))).await;
    assert_eq!(short.json["claimed_by"], "bob", "{}", short.text);
    assert_error(&answer(&app, &alice, &id, json!({"value": "us-east-1"})).await, StatusCode::CONFLICT, "conflict");
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    let after_ttl = answer(&app, &alice, &id, json!({"value": "us-east-1"})).await;
    assert_eq!(after_ttl.status, StatusCode::OK, "the claim ran out: {}", after_ttl.text);
    assert_eq!(after_ttl.json["answered_by"], "alice");

    // An admin answers whatever the claim.
    let id = ask(&app, &agent, ask_text).await;
    let path = format!("/api/v1/questions/{id}/claim");
    assert_eq!(app.call(Method::POST, &path, Some(&alice), None).await.status, StatusCode::OK);
    let by_admin = answer(&app, &app.token, &id, json!({"value": "ap-south-1"})).await;
    assert_eq!(by_admin.status, StatusCode::OK, "{}", by_admin.text);

    // Each claim and release is an event and an audit entry.
    let audit = app.get("/api/v1/audit?limit=100").await.json;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .filter(|a| a.contains("claim"))
        .collect();
    assert_eq!(
        actions,
        ["question.claimed", "question.claimed", "question.unclaimed", "question.claimed"],
        "newest first"
    );
    let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
    let events = app.state.store.workspace_events_after(workspace, 0, 100).await.unwrap();
    assert_eq!(events.iter().filter(|e| e.event_type == "question_claimed").count(), 4);
}

async fn quorum_and_claim_input_is_checked_and_nothing_is_stored(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let refused = [
        (quorum_approval(0, None), "required_approvals"),
        (quorum_approval(11, None), "required_approvals"),
        (json!({"title": "Name?", "required_approvals": 2}), "required_approvals"),
        (json!({"title": "Name?", "eligible": {"role": "approver"}}), "eligible"),
        (quorum_approval(2, Some(json!({"role": "responder"}))), "eligible.role"),
        (quorum_approval(3, Some(json!({"users": ["ana", "ben"]}))), "eligible.users"),
        (quorum_approval(2, Some(json!({"users": ["ana", "ana"]}))), "eligible.users"),
        (
            {
                let mut body = quorum_approval(2, None);
                body["allow_edit"] = json!(true);
                body
            },
            "allow_edit",
        ),
        // Only the one person assigned may answer: they cannot be several approvers, nor be left out of them.
        (with_assignee(quorum_approval(2, None), json!({"user": "ana"})), "assignee"),
        (with_assignee(quorum_approval(2, None), json!({"role": "approver", "strategy": "round_robin"})), "assignee"),
        (
            with_assignee(quorum_approval(1, Some(json!({"users": ["ana", "ben"]}))), json!({"user": "cyd"})),
            "assignee.user",
        ),
    ];
    for (body, field) in refused {
        let response = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(body.clone())).await;
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"].get(field).is_some(), "{body} → {error}");
    }
    let malformed = app
        .call(Method::POST, "/api/v1/questions", Some(&agent), Some(quorum_approval(2, Some(json!({"team": "ops"})))))
        .await;
    assert!(malformed.status.is_client_error(), "{}", malformed.text);
    assert_eq!(app.get("/api/v1/questions").await.json["items"], json!([]), "nothing was stored");

    let id = ask(&app, &agent, json!({"title": "Name?"})).await;
    for body in [json!({"ttl_seconds": 0}), json!({"ttl_seconds": 1801})] {
        let response = app.post(&format!("/api/v1/questions/{id}/claim"), body).await;
        assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    }
    let unknown = app.post(&format!("/api/v1/questions/{id}/claim"), json!({"minutes": 5})).await;
    assert_error(&unknown, StatusCode::BAD_REQUEST, "bad_request");
    let viewer = app.create_token("default", Role::Viewer).await;
    let by_viewer = app.call(Method::POST, &format!("/api/v1/questions/{id}/claim"), Some(&viewer), None).await;
    assert_error(&by_viewer, StatusCode::FORBIDDEN, "forbidden");
    assert!(app.get(&format!("/api/v1/questions/{id}")).await.json.get("claimed_by").is_none());
    let missing = app.post(&format!("/api/v1/questions/{}/claim", uuid::Uuid::now_v7()), json!({})).await;
    assert_error(&missing, StatusCode::NOT_FOUND, "not_found");
}

async fn round_robin_gives_a_roles_questions_to_its_members_in_turn(app: TestApp) {
    for (name, role) in
        [("ana", Role::Approver), ("ben", Role::Approver), ("cyd", Role::Approver), ("dee", Role::Admin)]
    {
        app.add_person(name, PASSWORD, role).await;
    }
    let agent = app.create_token("default", Role::Agent).await;
    let mut round_robin = quorum_approval(1, None);
    round_robin["assignee"] = json!({"role": "approver", "strategy": "round_robin"});
    let mut assigned = Vec::new();
    for _ in 0..6 {
        let id = ask(&app, &agent, round_robin.clone()).await;
        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        assigned.push(question["assignee"]["user"].as_str().expect("assigned to one person").to_owned());
    }
    assert_eq!(assigned, ["ana", "ben", "cyd", "ana", "ben", "cyd"], "2-2-2, least recently assigned first");

    // Asked at once, the turns still go round: 9 more questions, 3 each.
    let asks = (0..9).map(|_| {
        let (app, agent, body) = (&app, agent.clone(), round_robin.clone());
        async move { ask(app, &agent, body).await }
    });
    let ids = futures::future::join_all(asks).await;
    let mut counts = std::collections::BTreeMap::new();
    for id in ids {
        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        *counts.entry(question["assignee"]["user"].as_str().unwrap().to_owned()).or_insert(0) += 1;
    }
    assert_eq!(counts.into_iter().collect::<Vec<_>>(), [("ana".into(), 3), ("ben".into(), 3), ("cyd".into(), 3)]);

    // A role that may not answer, a role nobody has, a strategy without a role: refused, nothing stored.
    let before = app.get("/api/v1/questions?limit=200").await.json["items"].as_array().unwrap().len();
    let refused = [
        (json!({"role": "responder", "strategy": "round_robin"}), "assignee.role"),
        (json!({"user": "ana", "strategy": "round_robin"}), "assignee.strategy"),
        (json!({"user": "ana", "role": "approver"}), "assignee"),
    ];
    for (assignee, field) in refused {
        let mut body = quorum_approval(1, None);
        body["assignee"] = assignee.clone();
        let response = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(body)).await;
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"].get(field).is_some(), "{assignee} → {error}");
    }
    let nobody = json!({"title": "Anyone?", "assignee": {"role": "responder", "strategy": "round_robin"}});
    let response = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(nobody)).await;
    let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["message"].as_str().unwrap().contains("no member"), "{error}");
    let unknown = json!({"title": "Anyone?", "assignee": {"role": "approver", "strategy": "random"}});
    let response = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(unknown)).await;
    assert!(response.status.is_client_error(), "{}", response.text);
    let after = app.get("/api/v1/questions?limit=200").await.json["items"].as_array().unwrap().len();
    assert_eq!(before, after);
}

async fn two_tokens_of_one_person_are_one_approval_and_a_service_token_gives_none(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    // Ada, an admin, makes two approver tokens with her own account.
    let ada = person(&app, "ada", Role::Admin).await;
    let mut adas = Vec::new();
    for name in ["ada's laptop", "ada's ci"] {
        let body = json!({"name": name, "role": "approver"});
        let created = app.session_call(&ada, Method::POST, "/api/v1/tokens", Some(body)).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
        adas.push(created.json["secret"].as_str().unwrap().to_owned());
    }
    let id = ask(&app, &agent, quorum_approval(2, None)).await;
    let path = format!("/api/v1/questions/{id}/answer");

    let first = answer(&app, &adas[0], &id, json!({"value": true})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.json["status"], "pending");
    // Her second token is Ada again, and so is Ada signed in: one person, one approval.
    for again in [
        answer(&app, &adas[1], &id, json!({"value": true})).await,
        app.session_call(&ada, Method::POST, &path, Some(json!({"value": true}))).await,
    ] {
        assert_eq!(again.status, StatusCode::OK, "{}", again.text);
        assert_eq!(again.json["status"], "pending", "one person does not make a quorum of two: {}", again.text);
        assert_eq!(again.json["approvals"].as_array().unwrap().len(), 1, "{}", again.text);
    }
    // A token the operator made stands for nobody: refused, and nothing changes.
    let service = named_token(&app, "ops bot", Role::Approver).await;
    let refused = answer(&app, &service, &id, json!({"value": true})).await;
    let error = assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert!(error["message"].as_str().unwrap().contains("service token"), "{error}");
    let unchanged = app.get(&format!("/api/v1/questions/{id}")).await.json;
    assert_eq!(unchanged["status"], "pending");
    assert_eq!(unchanged["approvals"].as_array().unwrap().len(), 1, "{unchanged}");

    // Another person completes it.
    let ben = person(&app, "ben", Role::Approver).await;
    let second = app.session_call(&ben, Method::POST, &path, Some(json!({"value": true}))).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(second.json["status"], "answered");
    let by: Vec<&str> =
        second.json["approvals"].as_array().unwrap().iter().map(|a| a["by"].as_str().unwrap()).collect();
    assert_eq!(by, ["ada's laptop", "ben"]);
}

async fn a_token_named_like_a_person_does_not_answer_in_their_claim_but_their_own_token_does(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let alice = person(&app, "alice", Role::Responder).await;
    let bob = person(&app, "bob", Role::Admin).await;
    let id = ask(&app, &agent, json!({"title": "Which region?", "response_type": "text"})).await;
    let claimed = app.session_call(&alice, Method::POST, &format!("/api/v1/questions/{id}/claim"), None).await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.text);
    assert_eq!(claimed.json["claimed_by"], "alice");

    // Bob makes a responder token and names it "alice": it is Bob's, not Alice's.
    let body = json!({"name": "alice", "role": "responder"});
    let created = app.session_call(&bob, Method::POST, "/api/v1/tokens", Some(body)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let namesake = created.json["secret"].as_str().unwrap().to_owned();
    let refused = answer(&app, &namesake, &id, json!({"value": "eu-west-1"})).await;
    let error = assert_error(&refused, StatusCode::CONFLICT, "conflict");
    assert_eq!(error["details"]["claimed_by"], "alice", "{error}");
    let taken = app.call(Method::POST, &format!("/api/v1/questions/{id}/claim"), Some(&namesake), None).await;
    assert_error(&taken, StatusCode::CONFLICT, "conflict");
    let released = app.call(Method::POST, &format!("/api/v1/questions/{id}/unclaim"), Some(&namesake), None).await;
    assert_error(&released, StatusCode::CONFLICT, "conflict");
    let unchanged = app.get(&format!("/api/v1/questions/{id}")).await.json;
    assert_eq!(unchanged["status"], "pending", "{unchanged}");
    assert_eq!(unchanged["claimed_by"], "alice", "{unchanged}");

    // A token Alice made answers in her claim.
    let hers = persons_token(&app, "alice", "alice's laptop", Role::Responder).await;
    let answered = answer(&app, &hers, &id, json!({"value": "eu-west-1"})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.json["answered_by"], "alice's laptop");
}

async fn cancel(app: &TestApp, session: &common::Session, id: &str) -> common::TestResponse {
    let body = json!({"reason": "use the production database"});
    app.session_call(session, Method::POST, &format!("/api/v1/questions/{id}/cancel"), Some(body)).await
}

/// Cancelling a question someone else asked ends it for the asker, with the reason in place of an answer, so it
/// takes the rights an answer takes: the assignee's, being eligible, and the claim. Each refusal leaves the question
/// pending; the person it is for may end it.
async fn cancelling_anothers_question_needs_the_right_to_answer_it(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let alice = person(&app, "alice", Role::Approver).await;
    let bob = person(&app, "bob", Role::Approver).await;
    let assigned = json!({"kind": "blocking", "title": "Which database?", "response_type": "text",
        "assignee": {"user": "alice"}});
    let assigned = ask(&app, &agent, assigned).await;
    let refused = cancel(&app, &bob, &assigned).await;
    assert!(assert_error(&refused, StatusCode::FORBIDDEN, "forbidden")["message"].as_str().unwrap().contains("alice"));
    let reserved = ask(&app, &agent, quorum_approval(1, Some(json!({"users": ["alice"]})))).await;
    assert_error(&cancel(&app, &bob, &reserved).await, StatusCode::FORBIDDEN, "forbidden");
    let claimed = ask(&app, &agent, json!({"title": "Which region?", "response_type": "text"})).await;
    let claim = app.session_call(&alice, Method::POST, &format!("/api/v1/questions/{claimed}/claim"), None).await;
    assert_eq!(claim.status, StatusCode::OK, "{}", claim.text);
    let error = assert_error(&cancel(&app, &bob, &claimed).await, StatusCode::CONFLICT, "conflict");
    assert_eq!(error["details"]["claimed_by"], "alice", "{error}");
    for id in [&assigned, &reserved, &claimed] {
        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        assert_eq!(question["status"], "pending", "{question}");
    }

    let ended = cancel(&app, &alice, &assigned).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.text);
    assert_eq!(ended.json["status"], "cancelled");
}

/// The path of an email's action link for `username` to answer `question` with `value`, signed as the server signs
/// the links it sends.
async fn action_link(app: &TestApp, question: &str, username: &str, value: Value) -> String {
    let user = app.state.store.user_by_username(username).await.unwrap().expect("a person");
    let expires_at = chrono::Utc::now() + chrono::Duration::hours(1);
    let claims = holdpoint::channels::action_links::ActionClaims::new(
        question.parse().unwrap(),
        user.id,
        value,
        app::types::Channel::Email,
        expires_at,
    );
    format!("/act/{}", app.state.channel_keys.action_links.sign(&claims))
}

async fn follow(app: &TestApp, link: &str) -> common::TestResponse {
    app.send(axum::http::Request::post(link).body(axum::body::Body::empty()).unwrap()).await
}

/// A link's page says what the click did: one approval of several is recorded with where the quorum stands, and a
/// question someone else has claimed is refused naming them, not called answered.
async fn an_action_link_says_where_a_quorum_stands_and_who_holds_the_claim(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    person(&app, "ana", Role::Approver).await;
    let ben = person(&app, "ben", Role::Approver).await;
    let two = ask(&app, &agent, quorum_approval(2, None)).await;
    let followed = follow(&app, &action_link(&app, &two, "ana", json!(true)).await).await;
    assert_eq!(followed.status, StatusCode::OK, "{}", followed.text);
    assert!(followed.text.contains("Your approval is recorded: 1 of 2 approvals"), "{}", followed.text);
    assert_eq!(app.get(&format!("/api/v1/questions/{two}")).await.json["status"], "pending");

    let claimed = ask(&app, &agent, quorum_approval(1, None)).await;
    let claim = app.session_call(&ben, Method::POST, &format!("/api/v1/questions/{claimed}/claim"), None).await;
    assert_eq!(claim.status, StatusCode::OK, "{}", claim.text);
    let refused = follow(&app, &action_link(&app, &claimed, "ana", json!(true)).await).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(refused.text.contains("Question is claimed by ben."), "{}", refused.text);
    assert!(refused.text.contains(&format!("href=\"/questions/{claimed}\"")), "{}", refused.text);
    assert!(!refused.text.contains("already"), "{}", refused.text);
    assert_eq!(app.get(&format!("/api/v1/questions/{claimed}")).await.json["status"], "pending");
}

/// Whoever may no longer decide a question lets go of it: a member removed, a member given another role, a service
/// token revoked.
async fn who_leaves_or_may_no_longer_decide_counts_toward_no_quorum_and_holds_no_claim(app: TestApp) {
    let requester = named_token(&app, "release bot", Role::Approver).await;
    let ana = person(&app, "ana", Role::Approver).await;
    let ben = person(&app, "ben", Role::Approver).await;
    let cyd = person(&app, "cyd", Role::Approver).await;
    let dee = person(&app, "dee", Role::Approver).await;
    let agent = app.create_token("default", Role::Agent).await;
    let call = |session: &common::Session, id: &str, verb: &str, body: Option<Value>| {
        let (app, session, path) = (&app, session.clone(), format!("/api/v1/questions/{id}/{verb}"));
        async move { app.session_call(&session, Method::POST, &path, body).await }
    };
    let user_id = |username: &'static str| {
        let store = app.state.store.clone();
        async move { store.user_by_username(username).await.unwrap().expect("a user").id }
    };
    let first = ask(&app, &requester, quorum_approval(2, None)).await;
    let second = ask(&app, &requester, quorum_approval(2, None)).await;
    let text = ask(&app, &agent, json!({"title": "Which region?", "response_type": "text"})).await;
    // Ana approves the first and claims it; ben approves the second and claims it; dee claims the text question.
    for (session, id) in [(&ana, &first), (&ben, &second)] {
        let approved = call(session, id, "answer", Some(json!({"value": true}))).await;
        assert_eq!(approved.json["status"], "pending", "{}", approved.text);
        assert_eq!(call(session, id, "claim", None).await.status, StatusCode::OK);
    }
    assert_eq!(call(&dee, &text, "claim", None).await.status, StatusCode::OK);

    // An admin removes ana, and makes ben and dee responders: ana's and ben's claims go at once (neither may
    // decide an approval now); dee's stays, as a responder still answers a text question.
    let removed =
        app.call(Method::DELETE, &format!("/api/v1/members/{}", user_id("ana").await), Some(&app.token), None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    for username in ["ben", "dee"] {
        let path = format!("/api/v1/members/{}", user_id(username).await);
        let changed = app.call(Method::PATCH, &path, Some(&app.token), Some(json!({"role": "responder"}))).await;
        assert_eq!(changed.status, StatusCode::OK, "{}", changed.text);
    }
    for id in [&first, &second] {
        let question = app.get(&format!("/api/v1/questions/{id}")).await.json;
        assert!(question.get("claimed_by").is_none(), "the claim is let go: {question}");
    }
    assert_eq!(app.get(&format!("/api/v1/questions/{text}")).await.json["claimed_by"], "dee");

    // Cyd's approval completes neither: ana's and ben's approvals no longer count, and are taken out.
    for id in [&first, &second] {
        let approved = call(&cyd, id, "answer", Some(json!({"value": true}))).await;
        assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
        assert_eq!(approved.json["status"], "pending", "one approval of two that count: {}", approved.text);
        let by: Vec<&str> =
            approved.json["approvals"].as_array().unwrap().iter().map(|a| a["by"].as_str().unwrap()).collect();
        assert_eq!(by, ["cyd"]);
    }
    // An approver who may decide it completes it; the transition records who no longer counted.
    let last = person(&app, "eve", Role::Approver).await;
    let completed = call(&last, &first, "answer", Some(json!({"value": true}))).await;
    assert_eq!(completed.json["status"], "answered", "{}", completed.text);

    let audit = app.get("/api/v1/audit?limit=100").await.json;
    let entries = audit["items"].as_array().unwrap();
    let on = |id: &str, action: &str| -> Vec<Value> {
        entries.iter().filter(|e| e["subject_id"] == id && e["action"] == action).cloned().collect()
    };
    let withdrawn: Vec<Value> = on(&first, "question.approval_added").iter().map(|e| e["after"].clone()).collect();
    assert_eq!(withdrawn[0]["withdrawn_approvals"], json!(["ana"]), "{withdrawn:?}");
    assert_eq!(on(&second, "question.approval_added")[0]["after"]["withdrawn_approvals"], json!(["ben"]));
    let released = on(&first, "question.unclaimed");
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0]["after"]["because"], "they left the workspace");
    assert_eq!(on(&second, "question.unclaimed")[0]["after"]["because"], "their role is now responder");
    assert!(on(&text, "question.unclaimed").is_empty());
    let workspace = app.state.store.ensure_workspace("default").await.unwrap().id;
    let events = app.state.store.workspace_events_after(workspace, 0, 200).await.unwrap();
    let claim_events = |id: &str| {
        events
            .iter()
            .filter(|e| e.question_id.map(|q| q.to_string()).as_deref() == Some(id))
            .filter(|e| e.event_type == "question_claimed")
            .count()
    };
    assert_eq!(claim_events(&first), 2, "claimed, then let go");
    assert_eq!(claim_events(&text), 1);

    // A service token that is revoked lets go of its claims; a person's token claims for the person, who keeps them.
    let service = named_token(&app, "night shift", Role::Responder).await;
    let persons = persons_token(&app, "fay", "fay's laptop", Role::Responder).await;
    let (by_service, by_person) = (
        ask(&app, &agent, json!({"title": "Restart the worker?", "response_type": "text"})).await,
        ask(&app, &agent, json!({"title": "Which queue first?", "response_type": "text"})).await,
    );
    for (token, id) in [(&service, &by_service), (&persons, &by_person)] {
        let claimed = app.call(Method::POST, &format!("/api/v1/questions/{id}/claim"), Some(token), None).await;
        assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.text);
    }
    let tokens = app.get("/api/v1/tokens?limit=100").await.json;
    for name in ["night shift", "fay's laptop"] {
        let token = tokens["items"].as_array().unwrap().iter().find(|t| t["name"] == name).expect("listed");
        let path = format!("/api/v1/tokens/{}/revoke", token["id"].as_str().unwrap());
        let revoked = app.call(Method::POST, &path, Some(&app.token), None).await;
        assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    }
    assert!(app.get(&format!("/api/v1/questions/{by_service}")).await.json.get("claimed_by").is_none());
    assert_eq!(app.get(&format!("/api/v1/questions/{by_person}")).await.json["claimed_by"], "fay's laptop");
    let audit = app.get("/api/v1/audit?limit=100").await.json;
    let released: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["subject_id"] == by_service.as_str() && e["action"] == "question.unclaimed")
        .collect();
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0]["after"]["because"], "the token was revoked");
}
