//! The outbound guard from the outside: a push endpoint at a loopback address is refused when it is subscribed, a
//! push to one stored under another setting is never attempted, and a redirect is never followed. Every listener is
//! a real socket on loopback, and the tests assert what reached it.

use crate::channels::mailing;
use crate::common;

use std::time::Duration;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{Backend, TestApp, assert_error};
use mailing::person;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

on_both_backends!(
    a_push_endpoint_at_a_loopback_address_is_refused_and_nothing_is_stored,
    a_push_to_a_loopback_endpoint_never_connects_when_private_addresses_are_not_allowed,
    a_push_services_redirect_is_not_followed,
);

const PUSH_PATH: &str = "/api/v1/me/push-subscriptions";

/// A browser's subscription to `endpoint` (with a valid P-256 point and secret).
fn subscription(endpoint: &str) -> Value {
    json!({ "endpoint": endpoint, "expirationTime": null,
            "keys": { "p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
                      "auth": "tBHItJI5svbpez7KI4CCXg" } })
}

/// A server that pushes (plain-HTTP endpoints allowed, as a push service on loopback needs), with private
/// destinations allowed or not.
async fn pushing(backend: Backend, allow_private: bool) -> Option<TestApp> {
    TestApp::start_with(backend, |config| {
        config.channels.vapid_subject = Some("mailto:ops@example.com".into());
        config.channels.push_allow_http = true;
        config.channels.push_allow_private = allow_private;
    })
    .await
}

/// Whether anything connects to `listener` within half a second.
async fn connected(listener: &TcpListener) -> bool {
    tokio::time::timeout(Duration::from_millis(500), listener.accept()).await.is_ok()
}

async fn a_push_endpoint_at_a_loopback_address_is_refused_and_nothing_is_stored(backend: Backend) {
    let Some(app) = pushing(backend, false).await else { return };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // A viewer may subscribe a browser: any signed-in person may name an endpoint.
    let vic = person(&app, "vic", Role::Viewer, None).await;
    for endpoint in [
        format!("https://127.0.0.1:{port}/push/1"),
        format!("http://127.0.0.1:{port}/push/1"),
        format!("https://[::ffff:127.0.0.1]:{port}/push/1"),
        format!("https://[::127.0.0.1]:{port}/push/1"),
        format!("https://[::1]:{port}/push/1"),
        format!("http://2130706433:{port}/push/1"),
        format!("http://0x7f.1:{port}/push/1"),
        format!("https://localhost:{port}/push/1"),
        "https://169.254.169.254/latest/meta-data".to_owned(),
        "https://192.0.0.170/push/1".to_owned(),
        "https://[2002:7f00:1::1]/push/1".to_owned(),
        "https://[fec0::1]/push/1".to_owned(),
    ] {
        let refused = app.session_call(&vic, Method::POST, PUSH_PATH, Some(subscription(&endpoint))).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        let reason = error["details"]["fields"]["endpoint"].as_str().unwrap_or_default();
        assert!(reason.contains("HOLDPOINT_PUSH_ALLOW_PRIVATE"), "{endpoint}: {}", refused.text);
    }
    let listed = app.session_call(&vic, Method::GET, PUSH_PATH, None).await;
    assert_eq!(listed.json["items"], json!([]), "nothing is stored: {}", listed.text);
    let body = json!({ "channel": "push" });
    let tested = app.session_call(&vic, Method::POST, "/api/v1/me/notifications/test", Some(body)).await;
    assert!(assert_error(&tested, StatusCode::CONFLICT, "conflict").to_string().contains("subscribed no browser"));
    assert!(!connected(&listener).await, "nothing was sent to the loopback listener");
}

async fn a_push_to_a_loopback_endpoint_never_connects_when_private_addresses_are_not_allowed(backend: Backend) {
    // Subscribed while the setting allowed it; the server then runs without it.
    let Some(mut app) = pushing(backend, true).await else { return };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let alice = person(&app, "alice", Role::Approver, None).await;
    for endpoint in [format!("http://127.0.0.1:{port}/push/1"), format!("http://[::ffff:127.0.0.1]:{port}/push/2")] {
        let subscribed = app.session_call(&alice, Method::POST, PUSH_PATH, Some(subscription(&endpoint))).await;
        assert_eq!(subscribed.status, StatusCode::CREATED, "{}", subscribed.text);
    }
    let (state, router) = app
        .restart(|config| {
            config.channels.vapid_subject = Some("mailto:ops@example.com".into());
            config.channels.push_allow_http = true;
        })
        .await;
    (app.state, app.router) = (state, router);

    let body = json!({ "channel": "push" });
    let tested = app.session_call(&alice, Method::POST, "/api/v1/me/notifications/test", Some(body)).await;
    assert!(!connected(&listener).await, "the loopback listener was connected to: {}", tested.text);
    assert_eq!(tested.status, StatusCode::OK, "{}", tested.text);
    assert_eq!(tested.json["sent"], false, "{}", tested.text);
    assert!(tested.json["error"].as_str().unwrap().contains("HOLDPOINT_PUSH_ALLOW_PRIVATE"), "{}", tested.text);
}

async fn a_push_services_redirect_is_not_followed(backend: Backend) {
    // Private destinations allowed, so the first listener is reached; it redirects to the second.
    let Some(app) = pushing(backend, true).await else { return };
    let first = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let second = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/push/1", first.local_addr().unwrap());
    let onward = format!("http://{}/elsewhere", second.local_addr().unwrap());
    let redirecting = tokio::spawn(async move {
        let (mut stream, _) = first.accept().await.unwrap();
        let mut request = vec![0; 16 * 1024];
        let read = stream.read(&mut request).await.unwrap();
        let answer =
            format!("HTTP/1.1 302 Found\r\nLocation: {onward}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        stream.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&request[..read]).into_owned()
    });
    let alice = person(&app, "alice", Role::Approver, None).await;
    let subscribed = app.session_call(&alice, Method::POST, PUSH_PATH, Some(subscription(&endpoint))).await;
    assert_eq!(subscribed.status, StatusCode::CREATED, "{}", subscribed.text);

    let body = json!({ "channel": "push" });
    let tested = app.session_call(&alice, Method::POST, "/api/v1/me/notifications/test", Some(body)).await;
    assert!(!connected(&second).await, "the redirect was followed: {}", tested.text);
    let request = tokio::time::timeout(Duration::from_secs(5), redirecting).await.unwrap().unwrap();
    assert!(request.starts_with("POST /push/1 "), "the push went to the first listener: {request}");
    assert_eq!(tested.status, StatusCode::OK, "{}", tested.text);
    assert_eq!(tested.json["sent"], false, "{}", tested.text);
    assert!(tested.json["error"].as_str().unwrap().contains("302"), "{}", tested.text);
}
