//! Abuse and bad input: rate limits on creation and sign-in (429 with `Retry-After`, per token, per client address,
//! per account), body size limits (413), security headers and cookie flags.

use crate::common;

use std::net::SocketAddr;

use app::types::Role;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use common::{Backend, TestApp, TestResponse, assert_error};
use holdpoint::config::ServeConfig;
use serde_json::{Value, json};

on_both_backends!(
    creation_over_a_tokens_limit_is_refused_with_retry_after_and_nothing_is_created,
    creation_over_an_addresss_limit_is_refused_whichever_token_is_used,
    every_creation_endpoint_counts_against_the_same_limit,
    a_thousand_wrong_sign_ins_are_rate_limited_and_the_right_token_works_after_the_window,
    a_thousand_wrong_passwords_for_one_account_are_limited_from_any_address_and_the_right_one_works_after_the_window,
    oversized_form_posts_are_too_large_in_the_error_shape_and_change_nothing,
);

/// A test server with the limits `configure` sets.
async fn start(backend: Backend, configure: impl FnOnce(&mut ServeConfig)) -> Option<TestApp> {
    TestApp::start_with(backend, configure).await
}

/// `request` as if it came over a socket from `peer` (what `into_make_service_with_connect_info` adds).
fn from_peer(mut request: Request<Body>, peer: &str) -> Request<Body> {
    let addr: SocketAddr = format!("{peer}:40000").parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(addr));
    request
}

/// `POST path` with a JSON body and a bearer token, from `peer`.
fn post_json(path: &str, token: &str, body: &Value, peer: &str) -> Request<Body> {
    let request = Request::post(path)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    from_peer(request, peer)
}

/// Asserts a 429 in the error shape, naming `limit`, with a `Retry-After` of whole seconds that matches the body.
fn assert_rate_limited(response: &TestResponse, limit: &str) -> u64 {
    let error = assert_error(response, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    assert_eq!(error["details"]["limit"], limit, "{}", response.text);
    let retry_after: u64 = response
        .headers
        .get(header::RETRY_AFTER)
        .expect("a Retry-After header")
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in seconds");
    assert!(retry_after >= 1, "a retry is never invited at once");
    assert_eq!(error["details"]["retry_after_seconds"], retry_after);
    retry_after
}

async fn question_count(app: &TestApp) -> usize {
    app.get("/api/v1/questions?limit=200").await.json["items"].as_array().unwrap().len()
}

async fn creation_over_a_tokens_limit_is_refused_with_retry_after_and_nothing_is_created(backend: Backend) {
    let Some(app) = start(backend, |c| {
        c.limits.create_rate_burst = 3;
        c.limits.create_rate_per_second = 1;
    })
    .await
    else {
        return;
    };
    let question = json!({"title": "Deploy?"});
    for _ in 0..3 {
        let created = app.send(post_json("/api/v1/questions", &app.token, &question, "192.0.2.1")).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    }
    let refused = app.send(post_json("/api/v1/questions", &app.token, &question, "192.0.2.1")).await;
    assert_eq!(assert_rate_limited(&refused, "create_per_token"), 1, "one request per second comes back in 1 s");
    // The same token from another address is the same token.
    let elsewhere = app.send(post_json("/api/v1/questions", &app.token, &question, "198.51.100.1")).await;
    assert_rate_limited(&elsewhere, "create_per_token");
    assert_eq!(question_count(&app).await, 3, "refused requests created nothing");

    // Another token of the same address has its own limit; reading is never limited.
    let other = app.create_token("default", Role::Admin).await;
    let created = app.send(post_json("/api/v1/questions", &other, &question, "192.0.2.1")).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(app.get("/api/v1/questions").await.status, StatusCode::OK);

    // After Retry-After, the token may create again.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let created = app.send(post_json("/api/v1/questions", &app.token, &question, "192.0.2.1")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
}

async fn creation_over_an_addresss_limit_is_refused_whichever_token_is_used(backend: Backend) {
    let Some(app) = start(backend, |c| {
        c.limits.create_ip_rate_burst = 3;
        c.limits.create_ip_rate_per_second = 1;
    })
    .await
    else {
        return;
    };
    let question = json!({"title": "Deploy?"});
    for _ in 0..3 {
        let token = app.create_token("default", Role::Agent).await;
        let created = app.send(post_json("/api/v1/questions", &token, &question, "192.0.2.1")).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    }
    let fresh_token = app.create_token("default", Role::Agent).await;
    let refused = app.send(post_json("/api/v1/questions", &fresh_token, &question, "192.0.2.1")).await;
    assert_rate_limited(&refused, "create_per_ip");
    // Without credentials too: the address is limited before anything else is looked at.
    let anonymous = app
        .send(from_peer(
            Request::post("/api/v1/questions")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(question.to_string()))
                .unwrap(),
            "192.0.2.1",
        ))
        .await;
    assert_rate_limited(&anonymous, "create_per_ip");
    assert_eq!(question_count(&app).await, 3);

    let other_address = app.send(post_json("/api/v1/questions", &fresh_token, &question, "192.0.2.2")).await;
    assert_eq!(other_address.status, StatusCode::CREATED, "another address has its own limit");
}

async fn every_creation_endpoint_counts_against_the_same_limit(backend: Backend) {
    let Some(app) = start(backend, |c| {
        c.limits.create_rate_burst = 4;
        c.limits.create_rate_per_second = 1;
    })
    .await
    else {
        return;
    };
    let peer = "192.0.2.1";
    // Bodies that are refused for what they say still count: the limit is on requests, not on successes.
    let requests = [
        ("/api/v1/agents", json!({"name": "x"})),
        ("/api/v1/runs", json!({"input": "go"})),
        ("/api/v1/questions/answer-batch", json!({"items": []})),
        ("/api/v1/questions", json!({"title": "Deploy?"})),
    ];
    for (path, body) in &requests {
        let response = app.send(post_json(path, &app.token, body, peer)).await;
        assert_ne!(response.status, StatusCode::TOO_MANY_REQUESTS, "{path}: {}", response.text);
    }
    for (path, body) in &requests {
        let response = app.send(post_json(path, &app.token, body, peer)).await;
        assert_rate_limited(&response, "create_per_token");
    }
    // Answering one question is not a creation and is not limited here.
    let question = app.get("/api/v1/questions").await.json["items"][0]["id"].as_str().unwrap().to_owned();
    let answered = app
        .send(post_json(&format!("/api/v1/questions/{question}/answer"), &app.token, &json!({"value": "ok"}), peer))
        .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
}

fn sign_in_request(token: &str, peer: &str) -> Request<Body> {
    let request = Request::post("/auth/signin")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={token}&next=%2Finbox")))
        .unwrap();
    from_peer(request, peer)
}

/// Sends the 1 000 wrong sign-ins `attempt` makes. Each is either checked and sent back to the form, or refused by
/// the rate limit `limit`; none opens a session. Only the burst of 5 is checked, plus the attempts the 2 s window
/// gave back while the loop ran (one every 0.4 s).
async fn a_thousand_wrong_attempts(app: &TestApp, limit: &str, attempt: impl Fn(u32) -> Request<Body>) {
    let (mut checked, mut limited) = (0, 0);
    let started = std::time::Instant::now();
    for n in 0..1000u32 {
        let response = app.send(attempt(n)).await;
        match response.status {
            StatusCode::SEE_OTHER => {
                assert!(response.headers[header::LOCATION].to_str().unwrap().starts_with("/signin?error="));
                checked += 1;
            }
            StatusCode::TOO_MANY_REQUESTS => {
                assert_rate_limited(&response, limit);
                limited += 1;
            }
            other => panic!("unexpected {other}: {}", response.text),
        }
        assert!(response.headers.get(header::SET_COOKIE).is_none(), "no wrong credential opens a session");
    }
    let given_back = (started.elapsed().as_secs_f64() / 0.4).ceil() as usize;
    assert!((5..=5 + given_back).contains(&checked), "{checked} wrong credentials were checked");
    assert_eq!(limited, 1000 - checked);
}

async fn a_thousand_wrong_sign_ins_are_rate_limited_and_the_right_token_works_after_the_window(backend: Backend) {
    let Some(app) = start(backend, |c| {
        c.limits.signin_rate_attempts = 5;
        c.limits.signin_rate_window_seconds = 2;
    })
    .await
    else {
        return;
    };
    let attacker = "203.0.113.9";
    a_thousand_wrong_attempts(&app, "sign_in_per_ip", |n| sign_in_request(&format!("hp_guess{n}"), attacker)).await;

    // While the limit lasts, even the right token is refused from that address: a limited attempt learns nothing.
    let during = app.send(sign_in_request(&app.token, attacker)).await;
    let retry_after = assert_rate_limited(&during, "sign_in_per_ip");
    assert!(retry_after <= 2, "never longer than the window: {retry_after}");
    // Someone at another address is not held up by the attack.
    let elsewhere = app.send(sign_in_request(&app.token, "198.51.100.7")).await;
    assert_eq!(elsewhere.status, StatusCode::SEE_OTHER);
    assert!(elsewhere.headers.get(header::SET_COOKIE).is_some());

    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let after = app.send(sign_in_request(&app.token, attacker)).await;
    assert_eq!(after.status, StatusCode::SEE_OTHER, "{}", after.text);
    assert_eq!(after.headers[header::LOCATION], "/inbox");
    assert!(after.headers[header::SET_COOKIE].to_str().unwrap().starts_with("hp_session="));
}

fn password_sign_in(username: &str, password: &str, peer: &str) -> Request<Body> {
    let body = format!("username={username}&password={}&next=%2Finbox", password.replace(' ', "+"));
    let request = Request::post("/auth/signin")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .unwrap();
    from_peer(request, peer)
}

async fn a_thousand_wrong_passwords_for_one_account_are_limited_from_any_address_and_the_right_one_works_after_the_window(
    backend: Backend,
) {
    let Some(app) = start(backend, |c| {
        c.limits.signin_rate_attempts = 5;
        c.limits.signin_rate_window_seconds = 2;
    })
    .await
    else {
        return;
    };
    let password = "the real passphrase";
    let created =
        app.post("/api/v1/members", json!({"username": "alice", "password": password, "role": "approver"})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    a_thousand_wrong_attempts(&app, "sign_in_per_account", |n| {
        // A distributed guess: every attempt from another address, the username in varying case.
        let peer = format!("10.{}.{}.{}", n / 65536 % 256, n / 256 % 256, n % 256);
        let username = if n % 2 == 0 { "alice" } else { "ALICE" };
        password_sign_in(username, &format!("guess number {n}"), &peer)
    })
    .await;
    let during = app.send(password_sign_in("alice", password, "192.0.2.1")).await;
    assert_rate_limited(&during, "sign_in_per_account");
    // A person at the form is sent back to it with the reason instead.
    let mut from_browser = password_sign_in("alice", password, "192.0.2.1");
    from_browser.headers_mut().insert(header::ACCEPT, "text/html,application/xhtml+xml".parse().unwrap());
    let page = app.send(from_browser).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    let location = page.headers[header::LOCATION].to_str().unwrap();
    assert!(location.starts_with("/signin?error=rate_limited&retry_after="), "{location}");
    assert!(page.headers.get(header::SET_COOKIE).is_none());

    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let after = app.send(password_sign_in("alice", password, "192.0.2.1")).await;
    assert_eq!(after.status, StatusCode::SEE_OTHER, "{}", after.text);
    assert_eq!(after.headers[header::LOCATION], "/inbox");
    assert!(after.headers[header::SET_COOKIE].to_str().unwrap().starts_with("hp_session="));
}

async fn oversized_form_posts_are_too_large_in_the_error_shape_and_change_nothing(backend: Backend) {
    let Some(app) = start(backend, |_| {}).await else {
        return;
    };
    // As a browser sends a form: with its length declared.
    let form = |path: &str, body: String, cookie: Option<&str>| {
        let mut request = Request::post(path)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::CONTENT_LENGTH, body.len());
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        request.body(Body::from(body)).unwrap()
    };
    // Without a declared length: the body is cut off while it is read.
    let streamed = |path: &str, kib: usize, cookie: Option<&str>| {
        let chunk = || Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b'a'; 1024]));
        let chunks = futures::stream::iter((0..kib).map(move |_| chunk()));
        let mut request = Request::post(path).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        request.body(Body::from_stream(chunks)).unwrap()
    };

    // Sign-in: 16 KiB at most.
    let big_sign_in = form("/auth/signin", format!("token={}&next=%2Finbox", "a".repeat(20 * 1024)), None);
    let response = app.send(big_sign_in).await;
    assert_error(&response, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    assert!(response.headers.get(header::SET_COOKIE).is_none());
    assert_error(&app.send(streamed("/auth/signin", 40, None)).await, StatusCode::PAYLOAD_TOO_LARGE, "too_large");

    // The answer form of a question page, and the UI's server functions: 256 KiB at most.
    let signed_in = app.send(sign_in_request(&app.token, "192.0.2.1")).await;
    let cookie = signed_in.headers[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_owned();
    let cookie = Some(cookie.as_str());
    let id = app.post("/api/v1/questions", json!({"title": "Deploy?"})).await.json["id"].as_str().unwrap().to_owned();
    let answer_form = format!("/ui/answer/{id}");
    let big_answer = form(&answer_form, format!("csrf=x&value={}", "a".repeat(300 * 1024)), cookie);
    assert_error(&app.send(big_answer).await, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    assert_error(&app.send(streamed(&answer_form, 300, cookie)).await, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let server_fn = <app::InboxQuestions as leptos::server_fn::ServerFn>::PATH;
    let big_server_fn = form(server_fn, "a".repeat(300 * 1024), cookie);
    assert_error(&app.send(big_server_fn).await, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let big_server_fn = app.send(streamed(server_fn, 300, cookie)).await;
    assert_eq!(big_server_fn.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", big_server_fn.text);

    // MCP reads its body itself, past axum's extractors.
    let mut big_mcp = form("/mcp", "a".repeat(300 * 1024), None);
    big_mcp.headers_mut().insert(header::AUTHORIZATION, format!("Bearer {}", app.token).parse().unwrap());
    assert_error(&app.send(big_mcp).await, StatusCode::PAYLOAD_TOO_LARGE, "too_large");

    let question = app.get(&format!("/api/v1/questions/{id}")).await;
    assert_eq!(question.json["status"], "pending", "nothing was answered");
}

/// The headers every response carries; returns the CSP nonce.
fn assert_security_headers(response: &TestResponse, what: &str) -> String {
    let header = |name: &str| {
        response.headers.get(name).unwrap_or_else(|| panic!("{what}: no {name}")).to_str().unwrap().to_owned()
    };
    assert_eq!(header("x-frame-options"), "DENY", "{what}");
    assert_eq!(header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(header("referrer-policy"), "same-origin", "{what}");
    let policy = header("content-security-policy");
    assert!(policy.contains("frame-ancestors 'none'"), "{what}: {policy}");
    assert!(policy.contains("'wasm-unsafe-eval'"), "{what}: {policy}");
    assert!(!policy.contains("unsafe-inline"), "{what}: {policy}");
    assert!(response.headers.get("strict-transport-security").is_none(), "{what}: HSTS without TLS");
    policy.split("'nonce-").nth(1).and_then(|rest| rest.split('\'').next()).expect("a nonce").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_api_responses_and_static_files_carry_the_security_headers() {
    let site = std::env::temp_dir().join(format!("holdpoint-site-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    std::fs::write(site.join("pkg/holdpoint.css"), "body { margin: 0 }").unwrap();
    let app = TestApp::start_with(Backend::Sqlite, |c| c.site_root = Some(site.clone())).await.unwrap();

    let page = app.send(Request::get("/signin").body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::OK);
    let nonce = assert_security_headers(&page, "page");
    // Every inline script Leptos wrote (hydration, streaming) carries this response's nonce, and no other.
    let scripts: Vec<&str> = page.text.split("<script").skip(1).collect();
    assert!(!scripts.is_empty(), "the page has its hydration script");
    for script in scripts {
        let tag = script.split('>').next().unwrap();
        assert!(tag.contains(&format!("nonce=\"{nonce}\"")), "a script without the response's nonce: <script{tag}>");
    }
    let again = app.send(Request::get("/signin").body(Body::empty()).unwrap()).await;
    assert_ne!(assert_security_headers(&again, "page"), nonce, "a nonce is used once");

    let not_found = app.send(Request::get("/no-such-page").body(Body::empty()).unwrap()).await;
    assert_eq!(not_found.status, StatusCode::NOT_FOUND);
    let nonce = assert_security_headers(&not_found, "404 page");
    assert!(not_found.text.contains(&format!("nonce=\"{nonce}\"")), "the 404 page hydrates too");

    let api = app.get("/api/v1/questions").await;
    assert_eq!(api.status, StatusCode::OK);
    assert_security_headers(&api, "API");
    let refused = app.call(Method::GET, "/api/v1/questions", None, None).await;
    assert_security_headers(&refused, "API error");

    let css = app.send(Request::get("/pkg/holdpoint.css").body(Body::empty()).unwrap()).await;
    assert_eq!(css.status, StatusCode::OK);
    assert_security_headers(&css, "static file");
    // A site file keeps its name from release to release: kept, but revalidated before each use.
    assert_eq!(css.headers[header::CACHE_CONTROL], "no-cache");
    let last_modified = css.headers[header::LAST_MODIFIED].to_str().unwrap();
    let unchanged = Request::get("/pkg/holdpoint.css").header(header::IF_MODIFIED_SINCE, last_modified);
    let unchanged = app.send(unchanged.body(Body::empty()).unwrap()).await;
    assert_eq!(unchanged.status, StatusCode::NOT_MODIFIED);
    std::fs::remove_dir_all(site).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_tls_cookies_are_secure_and_strict_transport_security_is_sent() {
    for tls in [false, true] {
        let app = TestApp::start_with(Backend::Sqlite, |c| c.secure_cookies = tls).await.unwrap();
        let signed_in = app.send(sign_in_request(&app.token, "192.0.2.1")).await;
        assert_eq!(signed_in.status, StatusCode::SEE_OTHER);
        let cookie = signed_in.headers[header::SET_COOKIE].to_str().unwrap();
        assert!(cookie.contains("HttpOnly"), "{cookie}");
        assert!(cookie.contains("SameSite=Lax"), "{cookie}");
        assert_eq!(cookie.contains("Secure"), tls, "{cookie}");
        let hsts = signed_in.headers.get("strict-transport-security");
        assert_eq!(hsts.map(|v| v.to_str().unwrap()), tls.then_some("max-age=31536000"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_clients_are_told_apart_by_x_forwarded_for() {
    for trust in [false, true] {
        let app = TestApp::start_with(Backend::Sqlite, |c| {
            c.limits.create_ip_rate_burst = 1;
            c.limits.create_ip_rate_per_second = 1;
            c.limits.trust_proxy_headers = trust;
        })
        .await
        .unwrap();
        let via_proxy = |client: &str| {
            let mut request = post_json("/api/v1/questions", &app.token, &json!({"title": "Deploy?"}), "10.0.0.2");
            // What the client wrote, then what the proxy appended.
            request.headers_mut().insert("x-forwarded-for", format!("6.6.6.6, {client}").parse().unwrap());
            request
        };
        assert_eq!(app.send(via_proxy("203.0.113.1")).await.status, StatusCode::CREATED);
        let second_client = app.send(via_proxy("203.0.113.2")).await;
        if trust {
            assert_eq!(second_client.status, StatusCode::CREATED, "{}", second_client.text);
            // The first client's own limit holds, whatever it writes at the left of the header.
            assert_rate_limited(&app.send(via_proxy("203.0.113.1")).await, "create_per_ip");
        } else {
            // Without trust, the proxy's address is the client: one limit for all behind it.
            assert_rate_limited(&second_client, "create_per_ip");
        }
    }
}

/// Over a real socket, `holdpoint serve` keys the limits on the peer's address (loopback has many: 127.0.0.0/8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_process_limits_each_peer_address_on_its_own() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let server = app
        .spawn_process_with(&[
            ("HOLDPOINT_CREATE_IP_RATE_BURST", "1".into()),
            ("HOLDPOINT_CREATE_IP_RATE_PER_SECOND", "1".into()),
        ])
        .await;
    let create_from = |source: &str| {
        let client = reqwest::Client::builder().local_address(source.parse::<std::net::IpAddr>().unwrap()).build();
        let request = client.unwrap().post(format!("{}/api/v1/questions", server.base_url));
        let request = request.bearer_auth(&app.token).json(&json!({"title": "Deploy?"}));
        async move { request.send().await.unwrap() }
    };
    assert_eq!(create_from("127.0.0.2").await.status(), 201);
    let refused = create_from("127.0.0.2").await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(refused.json::<Value>().await.unwrap()["error"]["details"]["limit"], "create_per_ip");
    assert_eq!(create_from("127.0.0.3").await.status(), 201, "another address has its own limit");
}
