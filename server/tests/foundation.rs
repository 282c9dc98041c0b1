//! The foundation's contract: authentication, workspace isolation, the error shape, creating and reading
//! questions, browser sessions with CSRF, and the event stream over a real socket.

use crate::common;

use app::types::Role;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{TestApp, assert_error, read_events};
use serde_json::{Value, json};

backend_tests!(
    a_request_without_a_token_is_unauthorized_in_the_error_shape,
    a_wrong_token_is_unauthorized,
    a_question_created_can_be_read_and_listed,
    another_workspace_cannot_see_the_question,
    a_viewer_cannot_create_questions,
    invalid_questions_are_refused_with_field_details_and_nothing_is_stored,
    malformed_json_is_a_bad_request,
    an_unknown_api_route_is_not_found_in_the_error_shape,
    an_idempotent_retry_returns_the_first_question,
    pages_cover_every_question_once,
    health_and_readiness_answer,
    a_browser_session_needs_the_csrf_token_to_change_anything,
    an_agent_tokens_browser_session_shows_no_one_elses_questions,
    pages_render_whole_while_another_router_is_built,
    pages_redirect_to_sign_in_without_a_session,
    the_event_stream_delivers_new_questions_and_replays_missed_ones,
    the_inbox_lists_and_counts_what_its_filters_select,
);

async fn a_request_without_a_token_is_unauthorized_in_the_error_shape(app: TestApp) {
    let response = app.call(Method::GET, "/api/v1/questions", None, None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "unauthorized");
    let response = app.call(Method::POST, "/api/v1/questions", None, Some(json!({"title": "x"}))).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "unauthorized");
    let response = app.call(Method::GET, "/api/v1/events", None, None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "unauthorized");
}

async fn a_wrong_token_is_unauthorized(app: TestApp) {
    let response = app.call(Method::GET, "/api/v1/questions", Some("hp_not_a_real_token"), None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "unauthorized");
}

async fn a_question_created_can_be_read_and_listed(app: TestApp) {
    let created =
        app.post("/api/v1/questions", json!({"title": "Deploy to prod?", "body": "**now**", "project": "infra"})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let question = created.json;
    assert_eq!(question["title"], "Deploy to prod?");
    assert_eq!(question["status"], "pending");
    assert_eq!(question["kind"], "blocking");
    assert_eq!(question["response_type"], "text");
    assert_eq!(question["workspace"], "default");
    assert_eq!(question["project"], "infra");
    let id = question["id"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);

    let fetched = app.get(&format!("/api/v1/questions/{id}")).await;
    assert_eq!(fetched.status, StatusCode::OK);
    assert_eq!(fetched.json, question);

    let listed = app.get("/api/v1/questions?status=pending").await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.json["items"], json!([question]));
    assert_eq!(listed.json["next_cursor"], Value::Null);
}

async fn another_workspace_cannot_see_the_question(app: TestApp) {
    let created = app.post("/api/v1/questions", json!({"title": "Secret"})).await;
    let id = created.json["id"].as_str().unwrap().to_owned();
    let stranger = app.create_token("other", Role::Admin).await;

    let response = app.call(Method::GET, &format!("/api/v1/questions/{id}"), Some(&stranger), None).await;
    assert_error(&response, StatusCode::NOT_FOUND, "not_found");
    let listed = app.call(Method::GET, "/api/v1/questions", Some(&stranger), None).await;
    assert_eq!(listed.json["items"], json!([]));

    let theirs = app.call(Method::POST, "/api/v1/questions", Some(&stranger), Some(json!({"title": "Theirs"}))).await;
    assert_eq!(theirs.json["workspace"], "other");
    let ours = app.get("/api/v1/questions").await;
    assert_eq!(ours.json["items"].as_array().unwrap().len(), 1);
}

async fn a_viewer_cannot_create_questions(app: TestApp) {
    let viewer = app.create_token("default", Role::Viewer).await;
    let response = app.call(Method::POST, "/api/v1/questions", Some(&viewer), Some(json!({"title": "x"}))).await;
    assert_error(&response, StatusCode::FORBIDDEN, "forbidden");
    let agent = app.create_token("default", Role::Agent).await;
    let response = app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(json!({"title": "x"}))).await;
    assert_eq!(response.status, StatusCode::CREATED);
}

async fn invalid_questions_are_refused_with_field_details_and_nothing_is_stored(app: TestApp) {
    let response = app.post("/api/v1/questions", json!({"title": ""})).await;
    let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["title"].is_string());

    let response = app
        .post(
            "/api/v1/questions",
            json!({"title": "Pick", "response_type": "choice", "options": [{"value": "a", "label": "A"}]}),
        )
        .await;
    let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["options"].is_string());

    let response = app.post("/api/v1/questions", json!({"title": "x", "kind": "sometimes"})).await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");

    let response = app.post("/api/v1/questions", json!({"title": "x", "body": "b".repeat(33 * 1024)})).await;
    assert_error(&response, StatusCode::PAYLOAD_TOO_LARGE, "too_large");

    let response = app.post("/api/v1/questions", json!({"title": "x", "body": "b".repeat(1024 * 1024)})).await;
    assert_error(&response, StatusCode::PAYLOAD_TOO_LARGE, "too_large");

    let listed = app.get("/api/v1/questions").await;
    assert_eq!(listed.json["items"], json!([]), "a refused question was stored");
}

async fn malformed_json_is_a_bad_request(app: TestApp) {
    let request = Request::post("/api/v1/questions")
        .header(header::AUTHORIZATION, format!("Bearer {}", app.token))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"title\":"))
        .unwrap();
    assert_error(&app.send(request).await, StatusCode::BAD_REQUEST, "bad_request");
}

async fn an_unknown_api_route_is_not_found_in_the_error_shape(app: TestApp) {
    assert_error(&app.get("/api/v1/nothing-here").await, StatusCode::NOT_FOUND, "not_found");
    assert_error(&app.get("/api/v1/questions/not-a-uuid").await, StatusCode::NOT_FOUND, "not_found");
    let response = app.call(Method::DELETE, "/api/v1/questions", Some(&app.token), None).await;
    assert_eq!(response.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(response.json["error"]["code"].is_string(), "{}", response.text);
}

async fn an_idempotent_retry_returns_the_first_question(app: TestApp) {
    let send = |body: Value| {
        let request = Request::post("/api/v1/questions")
            .header(header::AUTHORIZATION, format!("Bearer {}", app.token))
            .header(header::CONTENT_TYPE, "application/json")
            .header("idempotency-key", "retry-1")
            .body(Body::from(body.to_string()))
            .unwrap();
        app.send(request)
    };
    let first = send(json!({"title": "Once"})).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = send(json!({"title": "Once"})).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json["id"], first.json["id"]);
    let different = send(json!({"title": "Twice"})).await;
    let error = assert_error(&different, StatusCode::CONFLICT, "conflict");
    assert_eq!(error["details"]["question_id"], first.json["id"], "the refusal names the key's question");
    assert_eq!(app.get("/api/v1/questions").await.json["items"].as_array().unwrap().len(), 1);
}

async fn pages_cover_every_question_once(app: TestApp) {
    let mut created = Vec::new();
    for i in 0..7 {
        let response = app.post("/api/v1/questions", json!({"title": format!("q{i}")})).await;
        created.push(response.json["id"].as_str().unwrap().to_owned());
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/questions?limit=3&cursor={c}"),
            None => "/api/v1/questions?limit=3".to_owned(),
        };
        let page = app.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        seen.extend(page.json["items"].as_array().unwrap().iter().map(|q| q["id"].as_str().unwrap().to_owned()));
        // A question created between pages must not shift later pages.
        if cursor.is_none() {
            app.post("/api/v1/questions", json!({"title": "late"})).await;
        }
        match page.json["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    created.reverse();
    assert_eq!(seen, created, "newest first, each once");
    assert_error(&app.get("/api/v1/questions?limit=0").await, StatusCode::BAD_REQUEST, "bad_request");
    assert_error(&app.get("/api/v1/questions?limit=201").await, StatusCode::BAD_REQUEST, "bad_request");
    assert_error(&app.get("/api/v1/questions?cursor=nonsense").await, StatusCode::BAD_REQUEST, "bad_request");
}

async fn health_and_readiness_answer(app: TestApp) {
    let health = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json["status"], "ok");
}

fn session_cookie(response: &common::TestResponse) -> String {
    let set_cookie = response.headers.get(header::SET_COOKIE).expect("a session cookie").to_str().unwrap();
    assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(set_cookie.contains("SameSite=Lax"), "{set_cookie}");
    set_cookie.split(';').next().unwrap().to_owned()
}

async fn sign_in(app: &TestApp, token: &str) -> common::TestResponse {
    let request = Request::post("/auth/signin")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={token}&next=%2Finbox")))
        .unwrap();
    app.send(request).await
}

/// An `agent` token reads only its own questions, in a browser session opened with it as in the API.
async fn an_agent_tokens_browser_session_shows_no_one_elses_questions(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let someone_elses = app.post("/api/v1/questions", json!({"title": "Someone else's rollout plan"})).await.json;
    let own =
        app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(json!({"title": "My own question"}))).await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.text);
    let signed_in = sign_in(&app, &agent).await;
    assert_eq!(signed_in.headers[header::LOCATION], "/inbox");
    let cookie = session_cookie(&signed_in);
    let page = |path: String| {
        let request = Request::get(path).header(header::COOKIE, &cookie).body(Body::empty()).unwrap();
        app.send(request)
    };
    let inbox = page("/inbox".into()).await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert!(!inbox.text.contains("Someone else"), "the inbox lists another's question: {}", inbox.text);
    assert!(inbox.text.contains("My own question"), "the inbox lists the agent's own question");
    let question = page(format!("/questions/{}", someone_elses["id"].as_str().unwrap())).await;
    assert!(!question.text.contains("Someone else"), "the question page shows another's question");
    assert!(question.text.contains("No such question"));
    let own_page = page(format!("/questions/{}", own.json["id"].as_str().unwrap())).await;
    assert!(own_page.text.contains("My own question"), "the agent opens its own question");
}

async fn a_browser_session_needs_the_csrf_token_to_change_anything(app: TestApp) {
    let refused = sign_in(&app, "hp_wrong").await;
    assert_eq!(refused.status, StatusCode::SEE_OTHER);
    assert!(refused.headers[header::LOCATION].to_str().unwrap().starts_with("/signin?error="));
    assert!(refused.headers.get(header::SET_COOKIE).is_none());

    app.post("/api/v1/questions", json!({"title": "Visible in the inbox"})).await;
    let signed_in = sign_in(&app, &app.token).await;
    assert_eq!(signed_in.status, StatusCode::SEE_OTHER);
    assert_eq!(signed_in.headers[header::LOCATION], "/inbox");
    let cookie = session_cookie(&signed_in);

    let inbox = app.send(Request::get("/inbox").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert!(inbox.text.contains("Visible in the inbox"), "the server-rendered inbox lists the question");
    let csrf = inbox
        .text
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page carries the CSRF token")
        .to_owned();

    let with_cookie = |csrf: Option<&str>| {
        let mut request = Request::post("/api/v1/questions")
            .header(header::COOKIE, &cookie)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(csrf) = csrf {
            request = request.header("x-csrf-token", csrf);
        }
        app.send(request.body(Body::from(json!({"title": "from the browser"}).to_string())).unwrap())
    };
    assert_error(&with_cookie(None).await, StatusCode::FORBIDDEN, "forbidden");
    assert_error(&with_cookie(Some("forged")).await, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(with_cookie(Some(&csrf)).await.status, StatusCode::CREATED);

    let read =
        app.send(Request::get("/api/v1/questions").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(read.status, StatusCode::OK, "reading needs no CSRF token");

    let sign_out = |csrf: &str| {
        app.send(
            Request::post("/auth/signout")
                .header(header::COOKIE, &cookie)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(format!("csrf={csrf}")))
                .unwrap(),
        )
    };
    assert_error(&sign_out("forged").await, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(sign_out(&csrf).await.status, StatusCode::SEE_OTHER);
    let after = app.send(Request::get("/inbox").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(after.status, StatusCode::SEE_OTHER, "the session ended");
}

/// Building a router lists the app's routes by rendering it with every resource held back, and Leptos holds them
/// back process-wide: a page whose data started loading meanwhile, in another router of the same process, never
/// finished. Tests build a router each, in parallel; an embedding program may build more than one.
async fn pages_render_whole_while_another_router_is_built(app: TestApp) {
    app.post("/api/v1/questions", json!({"title": "Rendered whole"})).await;
    let cookie = session_cookie(&sign_in(&app, &app.token).await);
    let building = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let builder = {
        let (state, building) = (app.state.clone(), std::sync::Arc::clone(&building));
        std::thread::spawn(move || {
            let mut built = 0;
            while building.load(std::sync::atomic::Ordering::Relaxed) {
                drop(holdpoint::doors::http::router(state.clone()));
                built += 1;
            }
            built
        })
    };
    const PAGES: usize = 60;
    for round in 0..PAGES {
        let request = Request::get("/inbox").header(header::COOKIE, &cookie).body(Body::empty()).unwrap();
        let page = tokio::time::timeout(std::time::Duration::from_secs(10), app.send(request)).await;
        let Ok(page) = page else {
            building.store(false, std::sync::atomic::Ordering::Relaxed);
            panic!("page {round} of {PAGES} did not finish within 10 s while routers were being built");
        };
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.text.contains("Rendered whole"), "page {round} lists the question");
    }
    building.store(false, std::sync::atomic::Ordering::Relaxed);
    let built = builder.join().unwrap();
    assert!(built > 0, "no router was built while the pages rendered");
}

async fn pages_redirect_to_sign_in_without_a_session(app: TestApp) {
    let response = app.send(Request::get("/inbox?status=pending").body(Body::empty()).unwrap()).await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.headers[header::LOCATION], "/signin?next=/inbox%3Fstatus%3Dpending");
    let forged =
        app.send(Request::get("/inbox").header(header::COOKIE, "hp_session=forged").body(Body::empty()).unwrap()).await;
    assert_eq!(forged.status, StatusCode::SEE_OTHER);
    let unknown = app.send(Request::get("/no-such-page").body(Body::empty()).unwrap()).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.text.contains("Not found"), "a page, not an empty body: {}", unknown.text);
    let sign_in_page = app.send(Request::get("/signin").body(Body::empty()).unwrap()).await;
    assert_eq!(sign_in_page.status, StatusCode::OK);
    assert!(sign_in_page.text.contains("action=\"/auth/signin\""));
}

async fn the_event_stream_delivers_new_questions_and_replays_missed_ones(app: TestApp) {
    let base = app.serve().await;
    let client = reqwest::Client::new();
    let live = client.get(format!("{base}/api/v1/events")).bearer_auth(&app.token).send().await.unwrap();
    assert_eq!(live.status(), 200);
    assert_eq!(live.headers()["content-type"], "text/event-stream");

    let mut ids = Vec::new();
    for i in 0..3 {
        let created = app.post("/api/v1/questions", json!({"title": format!("live {i}"), "project": "p"})).await;
        ids.push(created.json["id"].clone());
    }
    let events = read_events(live, 3).await;
    assert_eq!(events.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(), ["question_asked"; 3]);
    assert_eq!(events.iter().map(|e| e.2["question"]["id"].clone()).collect::<Vec<_>>(), ids);
    assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "ids increase");

    // Reconnect after the first: exactly the two missed, in order.
    let replay = client
        .get(format!("{base}/api/v1/events"))
        .bearer_auth(&app.token)
        .header("last-event-id", events[0].0.to_string())
        .send()
        .await
        .unwrap();
    let replayed = read_events(replay, 2).await;
    assert_eq!(replayed.iter().map(|e| e.0).collect::<Vec<_>>(), [events[1].0, events[2].0]);

    // Another workspace's subscriber sees none of it, and a project filter applies.
    let stranger = app.create_token("other", Role::Viewer).await;
    let theirs = client
        .get(format!("{base}/api/v1/events"))
        .bearer_auth(&stranger)
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    let other_token = app.create_token("other", Role::Agent).await;
    app.call(Method::POST, "/api/v1/questions", Some(&other_token), Some(json!({"title": "theirs"}))).await;
    let seen = read_events(theirs, 1).await;
    assert_eq!(seen[0].2["question"]["title"], "theirs");

    let filtered = client
        .get(format!("{base}/api/v1/events?project=q"))
        .bearer_auth(&app.token)
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    app.post("/api/v1/questions", json!({"title": "in q", "project": "q"})).await;
    let seen = read_events(filtered, 1).await;
    assert_eq!(seen[0].2["question"]["title"], "in q");
}

/// The inbox's list reads summaries and its badge a capped count; both must select what the full list selects.
async fn the_inbox_lists_and_counts_what_its_filters_select(app: TestApp) {
    use holdpoint::store::{QuestionFilter, QuestionSort};

    let ask = |body: Value| app.post("/api/v1/questions", body);
    let alpha = ask(json!({"title": "Deploy alpha?", "project": "infra"})).await.json;
    ask(json!({"title": "Deploy beta?", "kind": "approval", "action": {"tool_name": "shell", "arguments": {}}})).await;
    ask(json!({"title": "Rotate the keys?", "project": "infra", "kind": "non_blocking"})).await;
    let answered =
        app.post(&format!("/api/v1/questions/{}/answer", alpha["id"].as_str().unwrap()), json!({"value": "ok"})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    let store = app.state.store.as_ref();
    let principal =
        store.principal_by_token_hash(&holdpoint::credentials::hash_secret(&app.token)).await.unwrap().unwrap();
    let workspace = principal.workspace_id;
    let pending =
        |limit| QuestionFilter { status: Some(app::types::QuestionStatus::Pending), limit, ..Default::default() };
    assert_eq!(store.count_questions(workspace, &pending(200)).await.unwrap(), 2);
    assert_eq!(store.count_questions(workspace, &pending(1)).await.unwrap(), 1, "the count stops at the limit");
    let infra = QuestionFilter { project: Some("infra".into()), ..pending(200) };
    assert_eq!(store.count_questions(workspace, &infra).await.unwrap(), 1);

    for filter in [
        QuestionFilter { limit: 200, ..Default::default() },
        QuestionFilter { sort: QuestionSort::Deadline, limit: 200, ..Default::default() },
        QuestionFilter { text: Some("DEPLOY".into()), limit: 200, ..Default::default() },
        infra.clone(),
    ] {
        let full: Vec<_> =
            store.list_questions(workspace, &filter).await.unwrap().into_iter().map(|q| (q.id, q.title)).collect();
        let summaries: Vec<_> = store
            .list_question_summaries(workspace, &filter)
            .await
            .unwrap()
            .into_iter()
            .map(|row| row.into_summary().unwrap())
            .map(|q| (q.id, q.title))
            .collect();
        assert_eq!(summaries, full, "{filter:?}");
        assert!(!full.is_empty(), "{filter:?}");
    }

    let signed_in = sign_in(&app, &app.token).await;
    let cookie = session_cookie(&signed_in);
    let inbox = app.send(Request::get("/inbox").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert!(inbox.text.contains(r#"aria-label="2 pending""#), "the badge counts the pending questions: {}", inbox.text);
    assert!(inbox.text.contains("Rotate the keys?") && inbox.text.contains("Deploy beta?"));
    assert!(!inbox.text.contains("Deploy alpha?"), "an answered question is not in the default inbox");
}
