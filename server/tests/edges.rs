//! The edges a client reaches before or around the API proper: the sign-in flow (where `next` leads, which origin
//! may post it, what `?error=` may say), failed authentication, the metrics' labels, caching of private
//! responses, the bootstrap token's length, and the connection limits of the socket itself.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use common::{Backend, TestApp, TestResponse, assert_error};
use holdpoint::config::ServeConfig;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

backend_tests!(
    made_up_methods_and_paths_do_not_grow_the_metrics,
    metrics_speak_the_format_the_scraper_asks_for,
    a_next_that_leads_off_site_or_breaks_the_header_is_replaced_by_the_inbox,
    a_cross_site_sign_in_or_sign_out_is_refused_and_changes_no_session,
    refusals_name_an_error_code_and_the_pages_show_only_fixed_sentences,
    pages_and_api_responses_with_private_data_are_never_stored,
    a_bootstrap_token_too_short_published_or_unsendable_stops_the_server_at_start,
    the_nul_character_is_refused_in_urls_and_bodies_and_nothing_is_stored,
    a_body_that_does_not_fit_names_the_field_in_the_errors_details,
    the_sign_in_endpoints_refuse_what_is_not_their_form_in_the_one_error_shape,
    a_server_functions_refusal_is_answered_as_one_not_as_a_fault_of_the_server,
);

/// Tests that start their own app, with limits of their own.
mod own_limits {
    use super::*;
    on_both_backends!(failed_bearer_authentications_are_limited_per_address_and_successful_ones_are_not_counted,);
}

/// `request` as if it came over a socket from `peer`.
fn from_peer(mut request: Request<Body>, peer: &str) -> Request<Body> {
    let addr: SocketAddr = format!("{peer}:40000").parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(addr));
    request
}

fn sign_in_form() -> axum::http::request::Builder {
    Request::post("/auth/signin").header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
}

/// `POST /auth/signin` with the urlencoded `body` and the extra `headers`, each from an address of its own (so
/// that a test's many attempts stay under the sign-in limit of one address).
async fn post_sign_in(app: &TestApp, body: &str, headers: &[(&str, &str)]) -> TestResponse {
    static PEER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let mut request = sign_in_form();
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let peer = std::net::Ipv4Addr::from(0x0a00_0000 + PEER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    app.send(from_peer(request.body(Body::from(body.to_owned())).unwrap(), &peer.to_string())).await
}

fn location(response: &TestResponse) -> &str {
    response.headers.get(header::LOCATION).map_or("", |v| v.to_str().unwrap())
}

/// A classic Prometheus scrape reads counters as counters (their family named like their samples, no `# EOF`), and
/// a scraper that asks for OpenMetrics gets OpenMetrics.
async fn metrics_speak_the_format_the_scraper_asks_for(app: TestApp) {
    app.post("/api/v1/questions", serde_json::json!({ "title": "Counted?" })).await;
    let classic = app.send(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(classic.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    assert!(!classic.text.contains("# EOF"), "{}", classic.text);
    let lines = classic.text.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let created = scrape
        .samples
        .iter()
        .find(|s| s.metric == "holdpoint_questions_created_total" && s.labels.get("kind") == Some("blocking"))
        .expect("the counter is there");
    assert!(
        matches!(created.value, prometheus_parse::Value::Counter(n) if n >= 1.0),
        "read as a counter: {:?}",
        created.value
    );
    let build = scrape.samples.iter().find(|s| s.metric == "holdpoint_build_info").expect("build info");
    assert_eq!(build.labels.get("version"), Some(env!("CARGO_PKG_VERSION")));
    let memory = scrape.samples.iter().find(|s| s.metric == "holdpoint_process_resident_memory_bytes");
    assert!(matches!(memory.map(|m| &m.value), Some(prometheus_parse::Value::Gauge(bytes)) if *bytes > 0.0));

    let request = Request::get("/metrics")
        .header("accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
        .body(Body::empty())
        .unwrap();
    let open = app.send(request).await;
    assert_eq!(open.headers["content-type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(open.text.ends_with("# EOF\n"), "{}", open.text);
    assert!(open.text.contains("# TYPE holdpoint_questions_created counter"), "{}", open.text);
}

async fn made_up_methods_and_paths_do_not_grow_the_metrics(app: TestApp) {
    for n in 0..200 {
        let method = Method::from_bytes(format!("MADEUP{n}").as_bytes()).unwrap();
        for path in ["/api/v1/questions", "/inbox", "/healthz"] {
            let response =
                app.send(Request::builder().method(method.clone()).uri(path).body(Body::empty()).unwrap()).await;
            assert!(!response.status.is_success(), "{method} {path}: {}", response.status);
        }
        app.get(&format!("/api/v1/no-such-thing/{n}")).await;
        app.get(&format!("/api/v1/questions/{}", uuid::Uuid::now_v7())).await;
    }
    let metrics = app.send(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(!metrics.text.contains("MADEUP"), "a made-up method became a label");
    assert!(metrics.text.contains(r#"method="other""#), "{}", metrics.text);
    assert!(!metrics.text.contains("no-such-thing"), "a raw path became a label");
    assert!(metrics.text.contains(r#"route="/api/v1/questions/{id}""#), "{}", metrics.text);
    let series =
        metrics.text.lines().filter(|l| l.starts_with("holdpoint_http_request_duration_seconds_count")).count();
    assert!(series < 20, "{series} label sets after 1 000 requests");
}

async fn a_next_that_leads_off_site_or_breaks_the_header_is_replaced_by_the_inbox(app: TestApp) {
    let token = app.token.clone();
    for next in [
        "%2F%09%2Fevil.example%2F",
        "%2F%5Cevil.example",
        "%2F%2Fevil.example",
        "https%3A%2F%2Fevil.example",
        "%2Finbox%0D%0ASet-Cookie%3A%20x%3Dy",
        "%2F%0A%2Fevil.example",
    ] {
        let signed_in = post_sign_in(&app, &format!("token={token}&next={next}"), &[]).await;
        assert_eq!(signed_in.status, StatusCode::SEE_OTHER, "next={next}: {}", signed_in.text);
        assert_eq!(location(&signed_in), "/inbox", "next={next}");
        assert!(signed_in.headers.get(header::SET_COOKIE).is_some());

        let refused = post_sign_in(&app, &format!("token=hp_wrong&next={next}"), &[]).await;
        assert_eq!(refused.status, StatusCode::SEE_OTHER, "next={next}: {}", refused.text);
        assert!(location(&refused).ends_with("&next=/inbox"), "next={next}: {}", location(&refused));
    }
    let kept = post_sign_in(&app, &format!("token={token}&next=%2Finbox%3Fkind%3Dapproval"), &[]).await;
    assert_eq!(location(&kept), "/inbox?kind=approval");
}

async fn a_cross_site_sign_in_or_sign_out_is_refused_and_changes_no_session(app: TestApp) {
    let form = format!("token={}&next=%2Finbox", app.token);
    let host = ("host", "holdpoint.internal:3000");
    for headers in [
        vec![host, ("origin", "https://evil.example")],
        vec![host, ("origin", "null")],
        vec![host, ("origin", "http://holdpoint.internal:3001")],
        vec![host, ("sec-fetch-site", "cross-site")],
        vec![host, ("origin", "https://evil.example"), ("sec-fetch-site", "same-origin")],
    ] {
        let refused = post_sign_in(&app, &form, &headers).await;
        assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
        assert!(refused.headers.get(header::SET_COOKIE).is_none(), "{headers:?} got a session");
    }
    for headers in [
        vec![],
        vec![host, ("origin", "http://holdpoint.internal:3000")],
        vec![host, ("origin", "http://holdpoint.internal:3000"), ("sec-fetch-site", "same-origin")],
        vec![host, ("sec-fetch-site", "same-origin")],
        vec![host, ("sec-fetch-site", "none")],
    ] {
        let signed_in = post_sign_in(&app, &form, &headers).await;
        assert_eq!(signed_in.status, StatusCode::SEE_OTHER, "{headers:?}: {}", signed_in.text);
        assert!(signed_in.headers.get(header::SET_COOKIE).is_some(), "{headers:?}");
    }

    // Sign-out needs the CSRF token too, but a cross-site post is refused before it is looked at.
    let session = app.sign_in_with(&form).await.unwrap();
    let sign_out = Request::post("/auth/signout")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, &session.cookie)
        .header("host", "holdpoint.internal:3000")
        .header("origin", "https://evil.example")
        .body(Body::from(format!("csrf={}", session.csrf)))
        .unwrap();
    assert_error(&app.send(sign_out).await, StatusCode::FORBIDDEN, "forbidden");
    let still = app.session_call(&session, Method::GET, "/api/v1/questions", None).await;
    assert_eq!(still.status, StatusCode::OK, "the session was not ended");

    // Behind a proxy that rewrites the Host header, the public URL is the site's origin.
    let (_, proxied) = app.restart(|c| c.public_url = Some("https://holdpoint.example.com/".into())).await;
    let request = sign_in_form()
        .header("host", "127.0.0.1:3000")
        .header("origin", "https://holdpoint.example.com")
        .body(Body::from(form.clone()))
        .unwrap();
    use tower::ServiceExt;
    let response = proxied.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(response.headers().get(header::SET_COOKIE).is_some());
}

async fn refusals_name_an_error_code_and_the_pages_show_only_fixed_sentences(app: TestApp) {
    let refused = post_sign_in(&app, "token=hp_wrong&next=%2Finbox", &[]).await;
    assert_eq!(location(&refused), "/signin?error=wrong_token&next=/inbox");

    let spoof = "Your%20account%20is%20locked.%20Call%20%2B1%20555%200100";
    for (url, fixed) in [
        (format!("/signin?error={spoof}"), "Sign-in failed. Try again."),
        ("/signin?error=wrong_token".to_owned(), "That token is not valid. Check it and try again."),
        ("/signin?error=rate_limited&retry_after=7".to_owned(), "Too many sign-in attempts. Try again in 7 s."),
    ] {
        let page = app.send(Request::get(url.as_str()).body(Body::empty()).unwrap()).await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(!page.text.contains("Your account is locked"), "{url} shows the URL's text");
        assert!(page.text.contains(fixed), "{url} does not say {fixed:?}");
    }

    let session = app.sign_in_with(&format!("token={}", app.token)).await.unwrap();
    let id = app.post("/api/v1/questions", json!({"title": "Deploy?"})).await.json["id"].as_str().unwrap().to_owned();
    app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": "first"})).await;
    let answer = Request::post(format!("/ui/answer/{id}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, &session.cookie)
        .body(Body::from(format!("csrf={}&value=second", session.csrf)))
        .unwrap();
    let conflict = app.send(answer).await;
    assert_eq!(location(&conflict), format!("/questions/{id}?error=conflict"));
    for (query, fixed) in [(spoof, "The answer could not be saved. Try again."), ("conflict", "already answered")] {
        let page = Request::get(format!("/questions/{id}?error={query}"))
            .header(header::COOKIE, &session.cookie)
            .body(Body::empty())
            .unwrap();
        let page = app.send(page).await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(!page.text.contains("Your account is locked"), "the question page shows the URL's text");
        assert!(page.text.contains(fixed), "the question page does not say {fixed:?}");
    }
}

async fn pages_and_api_responses_with_private_data_are_never_stored(app: TestApp) {
    let session = app.sign_in_with(&format!("token={}", app.token)).await.unwrap();
    let page = |path: &str| Request::get(path).header(header::COOKIE, &session.cookie).body(Body::empty()).unwrap();
    let responses = [
        ("sign-in page", app.send(Request::get("/signin").body(Body::empty()).unwrap()).await),
        ("inbox", app.send(page("/inbox")).await),
        ("404 page", app.send(page("/no-such-page")).await),
        ("API list", app.get("/api/v1/questions").await),
        ("API error", app.call(Method::GET, "/api/v1/questions", None, None).await),
        ("API in a session", app.session_call(&session, Method::GET, "/api/v1/questions", None).await),
    ];
    for (what, response) in responses {
        let cache = response.headers.get(header::CACHE_CONTROL).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(cache.as_deref(), Some("no-store"), "{what} ({})", response.status);
    }
}

async fn a_bootstrap_token_too_short_published_or_unsendable_stops_the_server_at_start(app: TestApp) {
    let with = |token: &str| {
        let mut config = ServeConfig::for_tests(app.database_url.clone());
        config.bootstrap_token = Some(token.parse().unwrap());
        holdpoint::server::build_state(config)
    };
    let short = "hp_".to_owned() + &"x".repeat(28);
    let err = with(&short).await.err().expect("a 31-character bootstrap token is refused");
    let message = err.to_string();
    assert!(message.contains("HOLDPOINT_BOOTSTRAP_TOKEN") && message.contains("32"), "{message}");
    assert!(!message.contains(&short), "the error shows the token: {message}");
    let long = "hp_".to_owned() + &"x".repeat(29);
    assert!(with(&long).await.is_ok(), "a 32-character bootstrap token is taken");
    // The example settings' placeholder, uncommented as it stands, would be an admin token anyone can read.
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../packaging/holdpoint.toml")).unwrap();
    let placeholder =
        example.lines().find_map(|line| line.strip_prefix("# bootstrap_token = ")).unwrap().trim_matches('"');
    let err = with(placeholder).await.err().expect("the placeholder is refused");
    assert!(err.to_string().contains("placeholder"), "{err}");
    // No header can carry a space, a line break or a non-ASCII character: such a token would lock everyone out.
    for (token, position) in [(format!("{long}\n"), 33), (format!("{long} "), 33), (format!("hp_ {long}"), 4)] {
        let err = with(&token).await.err().expect("a token no request can send is refused");
        let message = err.to_string();
        assert!(message.contains("visible ASCII") && message.contains(&format!("position {position}")), "{message}");
        assert!(!message.contains(&long), "the error shows the token: {message}");
    }
    let err = with(&format!("{long}é")).await.err().expect("a non-ASCII token is refused");
    assert!(err.to_string().contains("visible ASCII"), "{err}");
    // A database URL of a kind no backend opens is refused before anything starts (`config check` says so too).
    let mut config = ServeConfig::for_tests("mysql://db.example/holdpoint".into());
    config.bootstrap_token = None;
    let err = holdpoint::server::check_settings(&config).expect_err("mysql is refused");
    assert!(err.to_string().contains("unsupported database URL"), "{err}");
}

async fn failed_bearer_authentications_are_limited_per_address_and_successful_ones_are_not_counted(backend: Backend) {
    let Some(app) = TestApp::start_with(backend, |c| {
        c.limits.auth_failure_attempts = 5;
        c.limits.auth_failure_window_seconds = 2;
    })
    .await
    else {
        return;
    };
    let get = |token: &str, peer: &str| {
        let request = Request::get("/api/v1/questions")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        from_peer(request, peer)
    };
    let attacker = "203.0.113.9";
    for _ in 0..50 {
        assert_eq!(app.send(get(&app.token, attacker)).await.status, StatusCode::OK, "successes are not counted");
    }
    let (mut checked, mut limited) = (0, 0);
    for n in 0..200 {
        let response = app.send(get(&format!("hp_guess{n}"), attacker)).await;
        match response.status {
            StatusCode::UNAUTHORIZED => checked += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                let error = assert_error(&response, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
                assert_eq!(error["details"]["limit"], "auth_failures_per_ip");
                assert!(response.headers.contains_key(header::RETRY_AFTER));
                limited += 1;
            }
            other => panic!("unexpected {other}: {}", response.text),
        }
    }
    assert!((5..=8).contains(&checked), "{checked} wrong tokens were checked");
    assert_eq!(checked + limited, 200);
    // While it lasts, the address learns nothing, not even that a token is right.
    let during = app.send(get(&app.token, attacker)).await;
    assert_error(&during, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // Another address is not held up.
    assert_eq!(app.send(get(&app.token, "198.51.100.7")).await.status, StatusCode::OK);
    assert_eq!(app.send(get("hp_wrong", "198.51.100.7")).await.status, StatusCode::UNAUTHORIZED);

    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(app.send(get(&app.token, attacker)).await.status, StatusCode::OK);
}

/// A test server on a loopback socket with these connection settings.
async fn serve_with(configure: impl FnOnce(&mut ServeConfig)) -> (TestApp, SocketAddr) {
    let app = TestApp::start_with(Backend::Sqlite, configure).await.unwrap();
    let base = app.serve().await;
    let addr = base.trim_start_matches("http://").parse().unwrap();
    (app, addr)
}

/// Reads until the server closes the connection; how long that took, or `None` if it stayed open for `limit`.
async fn closed_within(stream: &mut tokio::net::TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + limit).into(), stream.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => continue,
            Err(_) => return None,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_its_headers_too_slowly_is_disconnected() {
    let (_app, addr) = serve_with(|c| {
        c.connections.header_read_timeout_seconds = 1;
        c.connections.idle_timeout_seconds = 30;
    })
    .await;
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut dripping = tokio::net::TcpStream::connect(addr).await.unwrap();
    dripping.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    let drip = async {
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if dripping.write_all(b"X-A: b\r\n").await.is_err() {
                break;
            }
        }
        closed_within(&mut dripping, Duration::from_secs(5)).await
    };
    let (slow_closed, drip_closed) = tokio::join!(closed_within(&mut slow, Duration::from_secs(5)), drip);
    let slow_closed = slow_closed.expect("a half-sent request is cut off");
    assert!(slow_closed < Duration::from_secs(3), "{slow_closed:?}");
    drip_closed.expect("a request whose headers trickle in is cut off too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_but_long_polls_and_event_streams_are_not_cut() {
    let (app, addr) = serve_with(|c| {
        c.connections.header_read_timeout_seconds = 1;
        c.connections.idle_timeout_seconds = 1;
    })
    .await;
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let closed = closed_within(&mut silent, Duration::from_secs(5)).await.expect("a silent connection is closed");
    assert!(closed < Duration::from_secs(3), "{closed:?}");

    let mut kept_alive = tokio::net::TcpStream::connect(addr).await.unwrap();
    kept_alive.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut response = [0u8; 1024];
    let read = kept_alive.read(&mut response).await.unwrap();
    assert!(String::from_utf8_lossy(&response[..read]).starts_with("HTTP/1.1 200"));
    closed_within(&mut kept_alive, Duration::from_secs(5)).await.expect("an idle keep-alive connection is closed");

    let base = format!("http://{addr}");
    let id =
        app.post("/api/v1/questions", json!({"title": "Wait for me"})).await.json["id"].as_str().unwrap().to_owned();
    let events = common::connect_events(&base, &app.token, None).await;
    let started = Instant::now();
    let waited = reqwest::Client::new()
        .get(format!("{base}/api/v1/questions/{id}/wait?timeout_seconds=3"))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(waited.status(), 200, "the long-poll was cut");
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(waited.json::<serde_json::Value>().await.unwrap()["status"], "pending");
    // The event stream, open all along, still delivers.
    app.post(&format!("/api/v1/questions/{id}/answer"), json!({"value": "done"})).await;
    let delivered = common::read_events(events, 1).await;
    assert_eq!(delivered[0].1, "question_answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let (_app, addr) = serve_with(|c| {
        c.connections.max_connections = 2;
        c.connections.idle_timeout_seconds = 30;
    })
    .await;
    let first = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _second = tokio::net::TcpStream::connect(addr).await.unwrap();
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let third = client.get(format!("http://{addr}/healthz")).timeout(Duration::from_secs(1)).send().await;
    assert!(third.is_err_and(|e| e.is_timeout()), "a third connection was served while two were open");
    drop(first);
    let fourth = client.get(format!("http://{addr}/healthz")).timeout(Duration::from_secs(5)).send().await.unwrap();
    assert_eq!(fourth.status(), 200, "a freed slot is used");
}

/// The NUL character (U+0000) is refused wherever a request carries text, the same way on both databases
/// (PostgreSQL's text cannot hold it), before anything is stored or looked up.
async fn the_nul_character_is_refused_in_urls_and_bodies_and_nothing_is_stored(app: TestApp) {
    for body in [json!({"title": "a\u{0}b"}), json!({"title": "t", "context": {"note": "a\u{0}"}})] {
        let refused = app.post("/api/v1/questions", body).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["message"].as_str().unwrap().contains("U+0000"), "{error}");
    }
    assert_eq!(app.get("/api/v1/questions").await.json["items"], json!([]), "nothing was stored");
    // The text `\u0000` (an escaped backslash) is no NUL.
    let kept = app.post("/api/v1/questions", json!({"title": "a\\u0000b"})).await;
    assert_eq!(kept.status, StatusCode::CREATED, "{}", kept.text);
    assert_eq!(kept.json["title"], "a\\u0000b");
    for url in ["/api/v1/questions?q=a%00b", "/api/v1/questions?project=a%00b", "/api/v1/upstreams/a%00b"] {
        assert_error(&app.get(url).await, StatusCode::BAD_REQUEST, "bad_request");
    }
    let sign_in = post_sign_in(&app, "username=a%00b&password=long%20enough%20password", &[]).await;
    assert_error(&sign_in, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
}

/// A body whose values are not of the shape asked for is refused naming the field, as every other 422 does, so a
/// client (and a form) can point at it; nothing is stored.
async fn a_body_that_does_not_fit_names_the_field_in_the_errors_details(app: TestApp) {
    for (path, body, field, problem) in [
        ("/api/v1/questions", json!({"title": 5}), "title", "invalid type: integer `5`, expected a string"),
        ("/api/v1/upstreams", json!({"name": "docs"}), "url", "is required"),
        (
            "/api/v1/upstreams",
            json!({"name": "docs", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": 1}}),
            "headers.X-Key",
            "invalid type: integer `1`, expected a string",
        ),
    ] {
        let refused = app.post(path, body.clone()).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert_eq!(refused.json["error"]["details"]["fields"][field], problem, "{body}: {}", refused.text);
        assert!(refused.json["error"]["message"].as_str().unwrap().contains(field), "{}", refused.text);
    }
    assert_eq!(app.get("/api/v1/questions").await.json["items"], json!([]), "nothing was asked");
    assert_eq!(app.get("/api/v1/upstreams").await.json["items"], json!([]), "nothing was added");
}

/// A script that posts JSON to the sign-in form, or uses another method, gets the API's error shape, not axum's
/// plain text; no session is opened.
async fn the_sign_in_endpoints_refuse_what_is_not_their_form_in_the_one_error_shape(app: TestApp) {
    let json_body = Request::post("/auth/signin")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"token": app.token}).to_string()))
        .unwrap();
    let refused = app.send(json_body).await;
    assert_error(&refused, StatusCode::BAD_REQUEST, "bad_request");
    assert!(refused.headers.get(header::SET_COOKIE).is_none(), "no session was opened");
    let got = app.send(Request::get("/auth/signin").body(Body::empty()).unwrap()).await;
    assert_error(&got, StatusCode::METHOD_NOT_ALLOWED, "bad_request");
    let unreadable = Request::post("/auth/signout")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("nothing=here"))
        .unwrap();
    assert_error(&app.send(unreadable).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
}

/// A server function the UI calls with what a use case refuses (a search longer than the API takes) answers with
/// the refusal's status: logs and metrics count it as refused, not as a fault of the server.
async fn a_server_functions_refusal_is_answered_as_one_not_as_a_fault_of_the_server(app: TestApp) {
    use leptos::server_fn::ServerFn;
    let session = app.sign_in_with(&format!("token={}", app.token)).await.unwrap();
    let search = |text: String| {
        Request::post(<app::InboxSummaries as ServerFn>::PATH)
            .header(header::COOKIE, &session.cookie)
            .header("x-csrf-token", &session.csrf)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("filter[text]={text}&filter[by_deadline]=false")))
            .unwrap()
    };
    let refused = app.send(search("x".repeat(600))).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert!(refused.text.contains("at most 200 characters"), "{}", refused.text);
    let found = app.send(search("deploy".into())).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.text);
}
