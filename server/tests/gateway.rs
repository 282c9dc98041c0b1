//! The MCP gateway (spec §16): upstream MCP servers registered per workspace, and `/mcp/gateway`, where each tool
//! call is decided by the approval rules before it reaches its upstream. The upstreams are real MCP servers (the
//! official Python SDK's FastMCP, which report each call they receive) and the gateway's client is rmcp's.

use crate::common;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{Backend, TestApp, assert_error};
use serde_json::json;

on_both_backends!(upstreams_are_registered_listed_changed_and_removed_by_admins, private_upstream_urls_are_refused);

async fn allowing_private(backend: Backend) -> Option<TestApp> {
    TestApp::start_with(backend, |config| config.upstream_allow_private = true).await
}

async fn upstreams_are_registered_listed_changed_and_removed_by_admins(backend: Backend) {
    let Some(app) = allowing_private(backend).await else { return };
    // Registering does not need the server up: nothing listens on this port.
    let created = app
        .post(
            "/api/v1/upstreams",
            json!({ "name": "files", "url": "http://127.0.0.1:9/mcp",
                    "headers": { "Authorization": "Bearer upstream-secret-1", "X-Team": "ops" } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.json["name"], "files");
    assert_eq!(created.json["headers"], json!(["Authorization", "X-Team"]), "names only");
    assert_eq!(created.json["health"], json!({ "last_success_at": null, "last_error_at": null, "last_error": null }));
    assert!(!created.text.contains("upstream-secret-1"), "a header value is never returned: {}", created.text);

    let again = app.post("/api/v1/upstreams", json!({ "name": "files", "url": "http://127.0.0.1:10/mcp" })).await;
    assert_error(&again, StatusCode::CONFLICT, "conflict");
    for (body, field) in [
        (json!({ "name": "Files!", "url": "http://127.0.0.1:9/mcp" }), "name"),
        (json!({ "name": "a".repeat(33), "url": "http://127.0.0.1:9/mcp" }), "name"),
        (json!({ "name": "ftp", "url": "ftp://127.0.0.1/mcp" }), "url"),
        (json!({ "name": "creds", "url": "http://u:p@127.0.0.1:9/mcp" }), "url"),
        (json!({ "name": "hdr", "url": "http://127.0.0.1:9/mcp", "headers": { "Accept": "x" } }), "headers.Accept"),
        (json!({ "name": "hdr", "url": "http://127.0.0.1:9/mcp", "headers": { "X-A": "line\nbreak" } }), "headers.X-A"),
    ] {
        let refused = app.post("/api/v1/upstreams", body.clone()).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        assert!(error["details"]["fields"][field].is_string(), "{body} names {field}: {error}");
    }

    let listed = app.get("/api/v1/upstreams").await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.json["items"].as_array().unwrap().len(), 1, "nothing refused was stored: {}", listed.text);
    assert!(!listed.text.contains("upstream-secret-1"));
    let one = app.get("/api/v1/upstreams/files").await;
    assert_eq!(one.json, created.json);

    let patched = app
        .call(
            Method::PATCH,
            "/api/v1/upstreams/files",
            Some(&app.token),
            Some(json!({ "url": "http://127.0.0.1:11/mcp", "headers": { "X-Api-Key": "upstream-secret-2" } })),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(patched.json["url"], "http://127.0.0.1:11/mcp");
    assert_eq!(patched.json["headers"], json!(["X-Api-Key"]));
    assert!(!patched.text.contains("upstream-secret-2"));

    // Admins only; another workspace sees none of it.
    let approver = app.create_token("default", Role::Approver).await;
    let refused = app.call(Method::GET, "/api/v1/upstreams", Some(&approver), None).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    let other = app.create_token("other", Role::Admin).await;
    let hidden = app.call(Method::GET, "/api/v1/upstreams/files", Some(&other), None).await;
    assert_error(&hidden, StatusCode::NOT_FOUND, "not_found");

    let deleted = app.call(Method::DELETE, "/api/v1/upstreams/files", Some(&app.token), None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_error(&app.get("/api/v1/upstreams/files").await, StatusCode::NOT_FOUND, "not_found");

    for action in ["upstream.created", "upstream.changed", "upstream.deleted"] {
        let audit = app.get(&format!("/api/v1/audit?action={action}")).await;
        assert_eq!(audit.json["items"].as_array().unwrap().len(), 1, "{action}: {}", audit.text);
        assert!(!audit.text.contains("upstream-secret"), "the audit keeps header names only: {}", audit.text);
    }
}

async fn private_upstream_urls_are_refused(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    for url in [
        "http://127.0.0.1:9/mcp",
        "http://localhost:9/mcp",
        "http://LOCALHOST./mcp",
        "http://api.localhost:9/mcp",
        "http://[::1]:9/mcp",
        "http://[::ffff:127.0.0.1]:9/mcp",
        "http://2130706433:9/mcp",
        "http://0x7f.1:9/mcp",
        "http://0177.0.0.1:9/mcp",
        "http://127.1:9/mcp",
        "http://0.0.0.0:9/mcp",
        "http://169.254.169.254/mcp",
        "http://10.0.0.1/mcp",
    ] {
        let refused = app.post("/api/v1/upstreams", json!({ "name": "local", "url": url })).await;
        let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        let why = error["details"]["fields"]["url"].as_str().unwrap_or_else(|| panic!("{url}: {error}"));
        assert!(why.contains("HOLDPOINT_UPSTREAM_ALLOW_PRIVATE"), "{url}: {why}");
    }
    let listed = app.get("/api/v1/upstreams").await;
    assert_eq!(listed.json["items"], json!([]), "nothing stored");
    // A change to such a URL is refused the same way, and changes nothing.
    let public = app.post("/api/v1/upstreams", json!({ "name": "public", "url": "http://93.184.216.34/mcp" })).await;
    assert_eq!(public.status, StatusCode::CREATED, "{}", public.text);
    let patch = json!({ "url": "http://[::1]:9/mcp" });
    let refused = app.call(Method::PATCH, "/api/v1/upstreams/public", Some(&app.token), Some(patch)).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["url"].is_string(), "{error}");
    assert_eq!(app.get("/api/v1/upstreams/public").await.json["url"], "http://93.184.216.34/mcp");
}
