//! A push service and a browser for the tests, independent of Holdpoint's code: a push endpoint on loopback that
//! records what it receives, and `push_check.py`, which makes a browser's keys with Python's `cryptography` and reads
//! what the endpoint received with http_ece (RFC 8291) and py_vapid (RFC 8292).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};

use super::python::{here, python};

/// What the push endpoint received.
#[derive(Clone, Default)]
pub struct Endpoint {
    pub received: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

/// `/push/{id}` takes a push with 201 Created, as push services do; `/gone`, `/busy` and `/broken` answer as a
/// service does for an expired subscription, a rate limit and an outage.
async fn push(
    State(endpoint): State<Endpoint>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    match id.as_str() {
        "gone" => (StatusCode::GONE, HeaderMap::new()),
        "busy" => {
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", "30".parse().unwrap());
            (StatusCode::TOO_MANY_REQUESTS, headers)
        }
        "broken" => (StatusCode::BAD_GATEWAY, HeaderMap::new()),
        _ => {
            endpoint.received.lock().unwrap().push((headers, body));
            let mut headers = HeaderMap::new();
            headers.insert("location", format!("/message/{id}").parse().unwrap());
            (StatusCode::CREATED, headers)
        }
    }
}

pub async fn start_endpoint() -> (Endpoint, String) {
    let endpoint = Endpoint::default();
    let app = Router::new().route("/push/{id}", post(push)).with_state(endpoint.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (endpoint, origin)
}

/// Runs push_check.py with `args` and `input` on its standard input, and returns what it printed, as JSON.
pub async fn push_check(args: &[&str], input: Option<Value>) -> Value {
    let python = tokio::task::spawn_blocking(python).await.unwrap();
    let mut command = tokio::process::Command::new(python);
    command.arg(here().join("push_check.py")).args(args);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        tokio::io::AsyncWriteExt::write_all(&mut stdin, input.to_string().as_bytes()).await.unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success(), "push_check.py {args:?} failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

pub fn base64_standard(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decrypts a push the endpoint received with the browser `browser` made (`push_check.py subscribe`) and verifies its
/// VAPID JWT: `{"plaintext", "jwt_header", "k", "claims"}`.
pub async fn read_push(browser: &Value, headers: &HeaderMap, body: &[u8]) -> Value {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    push_check(
        &["check"],
        Some(json!({
            "private_key": browser["private_key"],
            "auth": browser["auth"],
            "body": base64_standard(body),
            "authorization": header("authorization"),
            "content_encoding": header("content-encoding"),
        })),
    )
    .await
}
