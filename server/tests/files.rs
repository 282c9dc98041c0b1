//! Files (docs/api.md): uploads, the `file` form field and the file question that reference them, downloads by whoever
//! sees the question, the removal of uploads no answer took, and the storage on an S3-compatible server (moto's, on
//! loopback).

use crate::common;

use app::types::Role;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{TestApp, TestResponse, assert_error};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MIB: usize = 1024 * 1024;

/// Bytes that are not all the same, so a truncated or reordered copy would not hash alike.
fn bytes_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `POST /api/v1/files?name=` with `token`, the raw body declared with its length.
async fn upload(app: &TestApp, token: &str, name: &str, media_type: &str, bytes: Vec<u8>) -> TestResponse {
    let request = Request::post(format!("/api/v1/files?name={name}"))
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, media_type)
        .header(header::CONTENT_LENGTH, bytes.len())
        .body(Body::from(bytes))
        .unwrap();
    app.send(request).await
}

pub(crate) async fn uploaded(app: &TestApp, token: &str, name: &str, media_type: &str, bytes: Vec<u8>) -> Value {
    let response = upload(app, token, name, media_type, bytes).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.json
}

async fn download(app: &TestApp, token: &str, file_id: &Value) -> TestResponse {
    let path = format!("/api/v1/files/{}", file_id.as_str().unwrap());
    app.call(Method::GET, &path, Some(token), None).await
}

/// What a download sends, byte for byte (`TestResponse::text` is lossy).
pub(crate) async fn downloaded_bytes(app: &TestApp, token: &str, file_id: &Value) -> bytes::Bytes {
    let request = Request::get(format!("/api/v1/files/{}", file_id.as_str().unwrap()))
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let response = tower::ServiceExt::oneshot(app.router.clone(), request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes()
}

/// A form question with a file field `doc` (and a text field), asked with `token`.
async fn form_question(app: &TestApp, token: &str, doc: Value) -> String {
    let mut field = json!({"key": "doc", "label": "The document", "response_type": "file", "required": true});
    field.as_object_mut().unwrap().extend(doc.as_object().unwrap().clone());
    let asked = app
        .call(
            Method::POST,
            "/api/v1/questions",
            Some(token),
            Some(json!({"title": "Send the screenshot", "response_type": "form",
                "fields": [field, {"key": "note", "label": "Note", "response_type": "text"}]})),
        )
        .await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    asked.json["id"].as_str().unwrap().to_owned()
}

async fn answer(app: &TestApp, token: &str, question: &str, value: Value) -> TestResponse {
    let path = format!("/api/v1/questions/{question}/answer");
    app.call(Method::POST, &path, Some(token), Some(json!({ "value": value }))).await
}

/// Every file of the test's storage directory (its `file://` URL's), bytes and all.
fn stored_files(app: &TestApp) -> Vec<std::path::PathBuf> {
    let url = app.state.config.files.files_url.clone().unwrap();
    let root = std::path::PathBuf::from(url.strip_prefix("file://").unwrap());
    let mut found = Vec::new();
    let mut pending = vec![root];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() { pending.push(path) } else { found.push(path) }
        }
    }
    found
}

async fn an_uploaded_file_answers_a_form_and_the_agent_that_asked_downloads_the_same_bytes(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let responder = app.create_token("default", Role::Responder).await;
    let question = form_question(&app, &agent, json!({"accept": ["image/*"], "max_bytes": 2 * MIB})).await;
    let bytes = bytes_of(MIB + 17);
    let file = uploaded(&app, &responder, "screen%20shot.png", "image/png", bytes.clone()).await;
    assert_eq!(file["name"], "screen shot.png");
    assert_eq!(file["size"], bytes.len());
    assert_eq!(file["media_type"], "image/png");
    assert_eq!(file["sha256"], sha256_hex(&bytes), "hashed while it streamed in");

    // Before an answer references it, it is its uploader's alone.
    assert_eq!(download(&app, &responder, &file["file_id"]).await.status, StatusCode::OK);
    assert_error(&download(&app, &agent, &file["file_id"]).await, StatusCode::NOT_FOUND, "not_found");

    // What the answer says of the file is replaced by what was stored.
    let lies = json!({"file_id": file["file_id"], "name": "innocent.txt", "size": 1, "sha256": "00"});
    let answered = answer(&app, &responder, &question, json!({"doc": lies, "note": "here"})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.json["response"]["value"]["doc"], file);

    let downloaded = download(&app, &agent, &file["file_id"]).await;
    assert_eq!(downloaded.status, StatusCode::OK, "{}", downloaded.text);
    assert_eq!(sha256_hex(&downloaded_bytes(&app, &agent, &file["file_id"]).await), sha256_hex(&bytes));
    let headers = &downloaded.headers;
    assert_eq!(headers[header::CONTENT_TYPE], "image/png");
    assert_eq!(headers[header::CONTENT_LENGTH], bytes.len().to_string().as_str());
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(
        headers[header::CONTENT_DISPOSITION],
        "attachment; filename=\"screen shot.png\"; filename*=UTF-8''screen%20shot.png"
    );

    // Whoever sees the question sees its files; another agent does not see the question.
    let viewer = app.create_token("default", Role::Viewer).await;
    assert_eq!(download(&app, &viewer, &file["file_id"]).await.status, StatusCode::OK);
    let other_agent = app.create_token("default", Role::Agent).await;
    assert_error(&download(&app, &other_agent, &file["file_id"]).await, StatusCode::NOT_FOUND, "not_found");
}

async fn a_page_or_a_script_is_downloaded_as_bytes_never_as_itself(app: TestApp) {
    let html = b"<html><script>alert(1)</script></html>".to_vec();
    let file = uploaded(&app, &app.token, "page.html", "text/html; charset=utf-8", html).await;
    assert_eq!(file["media_type"], "text/html", "stored as sent, without parameters");
    let downloaded = download(&app, &app.token, &file["file_id"]).await;
    assert_eq!(downloaded.status, StatusCode::OK);
    assert_eq!(downloaded.headers[header::CONTENT_TYPE], "application/octet-stream");
    assert_eq!(downloaded.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(downloaded.headers[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("attachment;"));
}

async fn an_upload_one_byte_over_the_limit_is_refused_and_nothing_is_stored(app: TestApp) {
    let limit = 10 * MIB;
    assert_eq!(app.state.config.files.max_upload_bytes, limit as u64, "the default limit is 10 MiB");
    // Declared: refused before the body is read.
    let declared = upload(&app, &app.token, "big.bin", "application/octet-stream", bytes_of(limit + 1)).await;
    assert_error(&declared, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    // Streamed with no length: refused at the byte that passes the limit.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(bytes_of(limit)), Ok(vec![7])];
    let request = Request::post("/api/v1/files?name=big.bin")
        .header(header::AUTHORIZATION, format!("Bearer {}", app.token))
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    assert_error(&app.send(request).await, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    // A multipart form's file part alike.
    let (content_type, body) = multipart("file", "big.bin", "application/octet-stream", &bytes_of(limit + 1));
    let request = Request::post("/api/v1/files")
        .header(header::AUTHORIZATION, format!("Bearer {}", app.token))
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap();
    assert_error(&app.send(request).await, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let later = chrono::Utc::now() + chrono::Duration::days(30);
    assert!(app.state.store.unreferenced_files(later, 10).await.unwrap().is_empty(), "no row");
    assert!(stored_files(&app).is_empty(), "no bytes: {:?}", stored_files(&app));

    // The limit itself is taken, and a file of several parts (the store receives it in parts as it arrives) comes
    // back whole.
    let file = uploaded(&app, &app.token, "exact.bin", "application/octet-stream", bytes_of(limit)).await;
    assert_eq!(file["size"], limit);
    let downloaded = downloaded_bytes(&app, &app.token, &file["file_id"]).await;
    assert_eq!((downloaded.len(), sha256_hex(&downloaded)), (limit, sha256_hex(&bytes_of(limit))));
    assert_eq!(stored_files(&app).len(), 1, "only the file: {:?}", stored_files(&app));
}

/// A `multipart/form-data` body with one file part; returns its content type and bytes.
fn multipart(part: &str, file_name: &str, media_type: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "hp-boundary-7MA4YWxkTrZu0gW";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\nignored\r\n--{boundary}\r\n\
         Content-Disposition: form-data; name=\"{part}\"; filename=\"{file_name}\"\r\nContent-Type: {media_type}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn a_browser_session_uploads_with_a_multipart_form(app: TestApp) {
    app.add_person("rita", "a long enough password", Role::Responder).await;
    let session = app.sign_in_with("username=rita&password=a+long+enough+password").await.unwrap();
    let bytes = bytes_of(5000);
    let (content_type, body) = multipart("file", "scan.pdf", "application/pdf", &bytes);
    let request = Request::post("/api/v1/files")
        .header(header::COOKIE, &session.cookie)
        .header("x-csrf-token", &session.csrf)
        .header(header::CONTENT_TYPE, &content_type)
        .body(Body::from(body.clone()))
        .unwrap();
    let response = app.send(request).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert_eq!(response.json["name"], "scan.pdf");
    assert_eq!(response.json["media_type"], "application/pdf");
    assert_eq!(response.json["sha256"], sha256_hex(&bytes));
    // A form without its CSRF token changes nothing.
    let request = Request::post("/api/v1/files")
        .header(header::COOKIE, &session.cookie)
        .header(header::CONTENT_TYPE, &content_type)
        .body(Body::from(body))
        .unwrap();
    assert_error(&app.send(request).await, StatusCode::FORBIDDEN, "forbidden");
    // A form without a file part is a 422 naming it.
    let (content_type, body) = multipart("attachment", "scan.pdf", "application/pdf", &bytes);
    let request = Request::post("/api/v1/files")
        .header(header::COOKIE, &session.cookie)
        .header("x-csrf-token", &session.csrf)
        .header(header::CONTENT_TYPE, &content_type)
        .body(Body::from(body))
        .unwrap();
    let error = assert_error(&app.send(request).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["file"].is_string(), "{error}");
}

async fn only_those_who_may_answer_upload(app: TestApp) {
    for role in [Role::Agent, Role::Viewer] {
        let token = app.create_token("default", role).await;
        assert_error(
            &upload(&app, &token, "a.txt", "text/plain", b"a".to_vec()).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        );
    }
    let missing_name = app
        .send(
            Request::post("/api/v1/files")
                .header(header::AUTHORIZATION, format!("Bearer {}", app.token))
                .body(Body::from("a"))
                .unwrap(),
        )
        .await;
    let error = assert_error(&missing_name, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["name"].is_string(), "{error}");
    let later = chrono::Utc::now() + chrono::Duration::days(30);
    assert!(app.state.store.unreferenced_files(later, 10).await.unwrap().is_empty(), "nothing stored");
}

/// A reference that does not fit is a 422 naming the field; the question stays pending and the file free.
async fn refused_answers_name_the_field_and_store_nothing(app: TestApp) {
    let responder = app.create_token("default", Role::Responder).await;
    let question = form_question(&app, &app.token, json!({"accept": ["image/*"], "max_bytes": 1000})).await;
    let refused = |response: TestResponse, why: &str| {
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        let fields = error["details"]["fields"].as_object().unwrap().clone();
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["value.doc"], "{why}: {error}");
    };
    let text = uploaded(&app, &responder, "notes.txt", "text/plain", b"notes".to_vec()).await;
    refused(answer(&app, &responder, &question, json!({"doc": {"file_id": text["file_id"]}})).await, "media type");
    let big = uploaded(&app, &responder, "big.png", "image/png", bytes_of(1001)).await;
    refused(answer(&app, &responder, &question, json!({"doc": {"file_id": big["file_id"]}})).await, "max_bytes");
    let admins = uploaded(&app, &app.token, "admin.png", "image/png", bytes_of(10)).await;
    refused(answer(&app, &responder, &question, json!({"doc": {"file_id": admins["file_id"]}})).await, "not theirs");
    let elsewhere = app.create_token("elsewhere", Role::Admin).await;
    let foreign = uploaded(&app, &elsewhere, "foreign.png", "image/png", bytes_of(10)).await;
    refused(answer(&app, &responder, &question, json!({"doc": {"file_id": foreign["file_id"]}})).await, "workspace");
    assert_error(&download(&app, &app.token, &foreign["file_id"]).await, StatusCode::NOT_FOUND, "not_found");
    refused(answer(&app, &responder, &question, json!({"doc": {"file_id": uuid::Uuid::now_v7()}})).await, "unknown");
    refused(answer(&app, &responder, &question, json!({"doc": "screenshot.png"})).await, "not a reference");

    let question_now = app.get(&format!("/api/v1/questions/{question}")).await.json;
    assert_eq!(question_now["status"], "pending");
    let fitting = uploaded(&app, &responder, "ok.png", "image/png", bytes_of(1000)).await;
    let answered = answer(&app, &responder, &question, json!({"doc": {"file_id": fitting["file_id"]}})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    // One question per file: it cannot answer another.
    let second = form_question(&app, &app.token, json!({})).await;
    refused(answer(&app, &responder, &second, json!({"doc": {"file_id": fitting["file_id"]}})).await, "taken");
}

async fn a_file_field_is_checked_when_the_question_is_asked(app: TestApp) {
    let ask = |fields: Value, default: Option<Value>| {
        let mut body = json!({"title": "Files", "response_type": "form", "fields": fields});
        if let Some(default) = default {
            body["default_response"] = default;
        }
        app.post("/api/v1/questions", body)
    };
    let invalid = |response: TestResponse| {
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        error["details"]["fields"].as_object().unwrap().keys().cloned().collect::<Vec<_>>()
    };
    let over = json!([{"key": "doc", "label": "Doc", "response_type": "file", "max_bytes": 10 * MIB + 1}]);
    assert_eq!(invalid(ask(over, None).await), ["fields[0].max_bytes"]);
    let accept = json!([{"key": "doc", "label": "Doc", "response_type": "file", "accept": ["image/*", "png"]}]);
    assert_eq!(invalid(ask(accept, None).await), ["fields[0].accept[1]"]);
    let not_a_file = json!([{"key": "n", "label": "N", "response_type": "number", "accept": ["image/*"]}]);
    assert_eq!(invalid(ask(not_a_file, None).await), ["fields[0].accept"]);
    let fields = json!([{"key": "doc", "label": "Doc", "response_type": "file"}]);
    let default = json!({"value": {"doc": {"file_id": uuid::Uuid::now_v7()}}});
    assert_eq!(invalid(ask(fields.clone(), Some(default)).await), ["default_response.value.doc"]);
    let asked = ask(fields, None).await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    assert_eq!(asked.json["fields"][0]["response_type"], "file");
}

/// A question that is itself a file: asked with `accept` and `max_bytes` at its top, checked as a field's are, and
/// answered with one upload that the agent downloads.
async fn a_file_question_is_answered_with_one_upload_checked_as_a_fields_is(app: TestApp) {
    let agent = app.create_token("default", Role::Agent).await;
    let responder = app.create_token("default", Role::Responder).await;
    let ask = |extra: Value| {
        let mut body = json!({"title": "Scan of the signed form", "response_type": "file"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        app.call(Method::POST, "/api/v1/questions", Some(&agent), Some(body))
    };
    let invalid = |response: TestResponse| {
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        error["details"]["fields"].as_object().unwrap().keys().cloned().collect::<Vec<_>>()
    };
    assert_eq!(invalid(ask(json!({"max_bytes": 10 * MIB + 1})).await), ["max_bytes"]);
    assert_eq!(invalid(ask(json!({"max_bytes": 0})).await), ["max_bytes"]);
    assert_eq!(invalid(ask(json!({"accept": ["image/*", "png"]})).await), ["accept[1]"]);
    let default = json!({"default_response": {"value": {"file_id": uuid::Uuid::now_v7()}}});
    assert_eq!(invalid(ask(default).await), ["default_response.value"]);
    // Another type's `max_bytes` is refused for being there, whatever its size.
    let number = json!({"title": "N", "response_type": "number", "accept": ["image/*"], "max_bytes": 10 * MIB + 1});
    assert_eq!(invalid(app.post("/api/v1/questions", number).await), ["accept", "max_bytes"]);

    let asked = ask(json!({"accept": ["image/*"], "max_bytes": 1000})).await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    assert_eq!((&asked.json["accept"], &asked.json["max_bytes"]), (&json!(["image/*"]), &json!(1000)));
    let question = asked.json["id"].as_str().unwrap().to_owned();
    let shown = app.get(&format!("/api/v1/questions/{question}")).await.json;
    assert_eq!((&shown["accept"], &shown["max_bytes"]), (&json!(["image/*"]), &json!(1000)), "stored");

    let refused = |response: TestResponse, why: &str| {
        let error = assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
        let fields = error["details"]["fields"].as_object().unwrap().clone();
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["value"], "{why}: {error}");
    };
    let text = uploaded(&app, &responder, "notes.txt", "text/plain", b"notes".to_vec()).await;
    refused(answer(&app, &responder, &question, json!({"file_id": text["file_id"]})).await, "media type");
    let big = uploaded(&app, &responder, "big.png", "image/png", bytes_of(1001)).await;
    refused(answer(&app, &responder, &question, json!({"file_id": big["file_id"]})).await, "max_bytes");
    let admins = uploaded(&app, &app.token, "admin.png", "image/png", bytes_of(10)).await;
    refused(answer(&app, &responder, &question, json!({"file_id": admins["file_id"]})).await, "not theirs");
    refused(answer(&app, &responder, &question, json!("scan.png")).await, "not a reference");
    assert_eq!(app.get(&format!("/api/v1/questions/{question}")).await.json["status"], "pending");

    let bytes = bytes_of(1000);
    let scan = uploaded(&app, &responder, "scan.png", "image/png", bytes.clone()).await;
    let lies = json!({"file_id": scan["file_id"], "name": "other.png", "size": 1});
    let answered = answer(&app, &responder, &question, lies).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.json["response"]["value"], scan, "the stored file, whatever the answer said of it");
    assert_eq!(sha256_hex(&downloaded_bytes(&app, &agent, &scan["file_id"]).await), sha256_hex(&bytes));
    // One question per file.
    let second = ask(json!({})).await.json["id"].as_str().unwrap().to_owned();
    refused(answer(&app, &responder, &second, json!({"file_id": scan["file_id"]})).await, "taken");
}

/// The answer's write takes the files: a file gone between the check and the write leaves the question pending.
async fn an_answer_whose_file_cannot_be_taken_writes_nothing(app: TestApp) {
    use holdpoint::store::{FileClaim, QuestionResolution, ResolveOutcome, StoreError};
    let question = form_question(&app, &app.token, json!({})).await;
    let workspace = app.state.store.ensure_workspace("default").await.unwrap();
    let row = app.state.store.question(workspace.id, question.parse().unwrap()).await.unwrap().unwrap();
    let change = QuestionResolution {
        status: app::types::QuestionStatus::Answered,
        response: Some(app::types::AnswerBody {
            value: json!({"doc": {"file_id": uuid::Uuid::nil()}}),
            comment: None,
            edited_arguments: None,
        }),
        answered_by: Some("someone".into()),
        resolution: Some(app::types::Resolution::Human),
        at: holdpoint::store::now(),
        actor: holdpoint::store::AuditActor::policy("test", None),
    };
    let mut transition = holdpoint::questions::transition(&row, &change, "default").unwrap();
    let missing = uuid::Uuid::now_v7();
    transition.files = vec![FileClaim { file_id: missing, uploaded_by: uuid::Uuid::now_v7() }];
    match app.state.store.resolve_question(transition).await {
        Err(StoreError::FileUnavailable(id)) => assert_eq!(id, missing),
        Err(other) => panic!("{other}"),
        Ok(ResolveOutcome::Resolved(_)) => panic!("resolved with a file that is not there"),
        Ok(_) => panic!("not resolved for another reason"),
    }
    let question_now = app.get(&format!("/api/v1/questions/{question}")).await.json;
    assert_eq!(question_now["status"], "pending", "{question_now}");
}

async fn uploads_no_answer_took_are_removed_after_a_day_and_answered_ones_stay(app: TestApp) {
    let responder = app.create_token("default", Role::Responder).await;
    let question = form_question(&app, &app.token, json!({})).await;
    let kept = uploaded(&app, &responder, "kept.txt", "text/plain", b"kept".to_vec()).await;
    let dropped = uploaded(&app, &responder, "dropped.txt", "text/plain", b"dropped".to_vec()).await;
    let answered = answer(&app, &responder, &question, json!({"doc": {"file_id": kept["file_id"]}})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(stored_files(&app).len(), 2);

    let (store, storage) = (app.state.store.as_ref(), &app.state.files);
    let now = holdpoint::store::now();
    // A day has not passed: nothing goes.
    let early = now + chrono::Duration::hours(23);
    assert_eq!(holdpoint::files::remove_unreferenced(store, storage, early).await.unwrap(), 0);
    assert_eq!(download(&app, &responder, &dropped["file_id"]).await.status, StatusCode::OK);

    let later = now + chrono::Duration::hours(25);
    assert_eq!(holdpoint::files::remove_unreferenced(store, storage, later).await.unwrap(), 1);
    assert_error(&download(&app, &responder, &dropped["file_id"]).await, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(stored_files(&app).len(), 1, "the bytes went with the row");
    let still = download(&app, &app.token, &kept["file_id"]).await;
    assert_eq!(still.status, StatusCode::OK);
    assert_eq!(still.text, "kept");
    assert_eq!(holdpoint::files::remove_unreferenced(store, storage, later).await.unwrap(), 0, "once");
}

backend_tests!(
    an_uploaded_file_answers_a_form_and_the_agent_that_asked_downloads_the_same_bytes,
    a_page_or_a_script_is_downloaded_as_bytes_never_as_itself,
    an_upload_one_byte_over_the_limit_is_refused_and_nothing_is_stored,
    a_browser_session_uploads_with_a_multipart_form,
    only_those_who_may_answer_upload,
    refused_answers_name_the_field_and_store_nothing,
    a_file_field_is_checked_when_the_question_is_asked,
    a_file_question_is_answered_with_one_upload_checked_as_a_fields_is,
    an_answer_whose_file_cannot_be_taken_writes_nothing,
    uploads_no_answer_took_are_removed_after_a_day_and_answered_ones_stay,
);

/// Storage on an S3-compatible bucket: the real `holdpoint serve` with `HOLDPOINT_FILES_URL=s3://...` and the
/// usual `AWS_*` variables, against moto's server on loopback. The file's bytes (several parts of a multipart
/// upload) are in the bucket under the prefix, and the agent that asked downloads them whole; a file refused for its
/// size midway leaves nothing in the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_kept_in_an_s3_compatible_bucket() {
    let s3 = crate::channels::s3::S3Server::start("hp-files").await;
    let app = TestApp::start(common::Backend::Sqlite).await.unwrap();
    let agent = app.create_token("default", Role::Agent).await;
    let responder = app.create_token("default", Role::Responder).await;
    let server = app
        .spawn_process_with(&[
            ("HOLDPOINT_FILES_URL", "s3://hp-files/uploads".to_owned()),
            ("AWS_ENDPOINT", s3.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("HOLDPOINT_MAX_UPLOAD_BYTES", (16 * MIB).to_string()),
        ])
        .await;
    let client = reqwest::Client::new();
    let base = &server.base_url;
    let question: Value = client
        .post(format!("{base}/api/v1/questions"))
        .bearer_auth(&agent)
        .json(&json!({"title": "The report", "response_type": "form",
            "fields": [{"key": "doc", "label": "Report", "response_type": "file", "accept": ["application/pdf"]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bytes = bytes_of(12 * MIB + 5);
    let response = client
        .post(format!("{base}/api/v1/files?name=report.pdf"))
        .bearer_auth(&responder)
        .header(header::CONTENT_TYPE, "application/pdf")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let file: Value = response.json().await.unwrap();
    assert_eq!(file["sha256"], sha256_hex(&bytes));
    let workspace = app.state.store.ensure_workspace("default").await.unwrap();
    let key = format!("uploads/{}/{}", workspace.id, file["file_id"].as_str().unwrap());
    assert!(s3.keys().await.contains(&key), "{key} is not in the bucket: {:?}", s3.keys().await);
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(bytes_of(16 * MIB)), Ok(vec![7])];
    let refused = client
        .post(format!("{base}/api/v1/files?name=big.pdf"))
        .bearer_auth(&responder)
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 413);
    assert_eq!(s3.keys().await, vec![key.clone()], "nothing of the refused file is in the bucket");

    let answered = client
        .post(format!("{base}/api/v1/questions/{}/answer", question["id"].as_str().unwrap()))
        .bearer_auth(&responder)
        .json(&json!({"value": {"doc": {"file_id": file["file_id"]}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200, "{}", answered.text().await.unwrap());
    let downloaded = client
        .get(format!("{base}/api/v1/files/{}", file["file_id"].as_str().unwrap()))
        .bearer_auth(&agent)
        .send()
        .await
        .unwrap();
    assert_eq!(downloaded.status(), 200);
    assert_eq!(downloaded.headers()[header::CONTENT_TYPE], "application/pdf");
    assert_eq!(sha256_hex(&downloaded.bytes().await.unwrap()), sha256_hex(&bytes));
}
