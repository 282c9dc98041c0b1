//! The OpenAPI document is served, public, and matches the router: every documented operation is routed, every
//! endpoint of the spec is documented, and what an operation answers is among its documented responses.

mod common;

use axum::http::{Method, StatusCode};
use common::{Backend, TestApp};
use serde_json::{Value, json};

/// The endpoints of spec §4 that exist so far, as `(method, path)` of the document.
const SPEC_ENDPOINTS: &[(&str, &str)] = &[
    ("post", "/api/v1/questions"),
    ("get", "/api/v1/questions"),
    ("get", "/api/v1/questions/{id}"),
    ("get", "/api/v1/questions/{id}/wait"),
    ("post", "/api/v1/questions/{id}/answer"),
    ("post", "/api/v1/questions/answer-batch"),
    ("post", "/api/v1/questions/{id}/cancel"),
    ("get", "/api/v1/events"),
    ("post", "/api/v1/agents"),
    ("get", "/api/v1/agents"),
    ("get", "/api/v1/agents/{id}"),
    ("put", "/api/v1/agents/{id}"),
    ("post", "/api/v1/runs"),
    ("get", "/api/v1/runs"),
    ("get", "/api/v1/runs/{id}"),
    ("get", "/api/v1/runs/{id}/messages"),
    ("get", "/api/v1/runs/{id}/messages/{mid}"),
    ("get", "/api/v1/runs/{id}/tool-calls"),
    ("get", "/api/v1/runs/{id}/tool-calls/{cid}"),
    ("post", "/api/v1/runs/{id}/resume"),
    ("post", "/api/v1/runs/{id}/cancel"),
    ("get", "/api/v1/audit"),
    ("get", "/api/v1/audit/export"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
];

#[tokio::test]
async fn the_document_covers_every_endpoint_and_every_documented_operation_is_routed() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let document = app.call(Method::GET, "/api/v1/openapi.json", None, None).await;
    assert_eq!(document.status, StatusCode::OK, "the document is public");
    let document = document.json;
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    let paths = document["paths"].as_object().unwrap();

    for (method, path) in SPEC_ENDPOINTS {
        assert!(paths.get(*path).and_then(|p| p.get(*method)).is_some(), "{method} {path} is not documented");
    }
    let schemas = document["components"]["schemas"].as_object().unwrap();
    for schema in ["Question", "NewQuestion", "AnswerBody", "ErrorBody", "QuestionKind", "ResponseType"] {
        assert!(schemas.contains_key(schema), "schema {schema} is missing");
    }

    let question = app.post("/api/v1/questions", json!({"title": "probe", "kind": "non_blocking"})).await.json;
    let id = question["id"].as_str().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            operations += 1;
            let documented: Vec<u16> =
                operation["responses"].as_object().unwrap().keys().map(|s| s.parse().unwrap()).collect();
            let concrete = path.replace("{id}", id);
            let method: Method = method.to_uppercase().parse().unwrap();
            let body = (method == Method::POST).then(|| json!({}));
            // The event stream never ends; only its refusal without a token is probed here.
            let token = if path.ends_with("/events") { None } else { Some(app.token.as_str()) };
            let response = app.call(method.clone(), &concrete, token, body).await;
            assert_ne!(response.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path} is documented but not routed");
            assert_ne!(
                response.json["error"]["message"],
                Value::String("route not found".into()),
                "{method} {path} is documented but not routed"
            );
            assert!(
                documented.contains(&response.status.as_u16()),
                "{method} {path} answered {} which is not among its documented responses {documented:?}: {}",
                response.status,
                response.text
            );
        }
    }
    assert!(operations >= SPEC_ENDPOINTS.len());
}
