//! Slack against a stand-in of its Web API: an HTTP server on loopback that answers `chat.postMessage`,
//! `chat.update` and `views.open` as Slack does, after checking each request as Slack documents it (bearer token,
//! JSON with its charset, the method's required fields) and every block against Block Kit's limits. It records the
//! calls it accepted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::types::{AnswerBody, Question, QuestionStatus};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hmac::{Hmac, Mac};
use holdpoint::channels::DeliveryOutcome;
use holdpoint::channels::slack::{
    Interaction, MessageRef, SlackClient, SlackError, SlackMessage, answer_modal, parse_interaction, question_message,
    resolved_message, verify_request,
};
use serde_json::{Value, json};
use sha2::Sha256;
use uuid::Uuid;

const BOT_TOKEN: &str = "xoxb-1111-2222-standin";
const SIGNING_SECRET: &str = "3f1c2b6a9d0e4f5a8b7c6d5e4f3a2b1c";

#[derive(Clone, Default)]
struct StandIn {
    calls: Arc<Mutex<Vec<(String, Value)>>>,
}

/// Block Kit's documented limits for what a check reads: `(what, at most)`.
fn too_long(text: &Value, max: usize, what: &str, errors: &mut Vec<String>) {
    match text.as_str() {
        Some(text) if text.chars().count() <= max => {}
        Some(text) => errors.push(format!("{what} has {} characters, more than {max}", text.chars().count())),
        None => errors.push(format!("{what} is missing or not a string")),
    }
}

/// A text object: `plain_text` or `mrkdwn` with a non-empty `text`.
fn check_text(object: &Value, max: usize, plain_only: bool, what: &str, errors: &mut Vec<String>) {
    match object["type"].as_str() {
        Some("plain_text") => {}
        Some("mrkdwn") if !plain_only => {}
        other => errors.push(format!("{what} has text type {other:?}")),
    }
    if object["text"].as_str().is_some_and(str::is_empty) {
        errors.push(format!("{what} is empty"));
    }
    too_long(&object["text"], max, what, errors);
}

fn check_element(element: &Value, errors: &mut Vec<String>) {
    match element["type"].as_str() {
        Some("button") => {
            check_text(&element["text"], 75, true, "button text", errors);
            too_long(&element["action_id"], 255, "action_id", errors);
            if !element["value"].is_null() {
                too_long(&element["value"], 2000, "button value", errors);
            }
            if !element["url"].is_null() {
                too_long(&element["url"], 3000, "button url", errors);
            }
            if let Some(style) = element.get("style")
                && !matches!(style.as_str(), Some("primary" | "danger"))
            {
                errors.push(format!("button style {style}"));
            }
        }
        Some("plain_text_input") => {
            too_long(&element["action_id"], 255, "action_id", errors);
            if element["max_length"].as_u64().is_some_and(|max| max > 3000) {
                errors.push("plain_text_input max_length above 3000".into());
            }
        }
        Some("static_select") => {
            let options = element["options"].as_array().map(Vec::as_slice).unwrap_or_default();
            if options.is_empty() || options.len() > 100 {
                errors.push(format!("static_select with {} options", options.len()));
            }
            for option in options {
                check_text(&option["text"], 75, true, "option text", errors);
                too_long(&option["value"], 150, "option value", errors);
            }
        }
        other => errors.push(format!("element type {other:?} is not one this stand-in knows")),
    }
}

/// Checks blocks as Slack does before it takes a message or a view.
fn check_blocks(blocks: &Value, max_blocks: usize, errors: &mut Vec<String>) {
    let Some(blocks) = blocks.as_array() else {
        errors.push("blocks is not an array".into());
        return;
    };
    if blocks.len() > max_blocks {
        errors.push(format!("{} blocks, more than {max_blocks}", blocks.len()));
    }
    let mut block_ids = std::collections::HashSet::new();
    for block in blocks {
        if let Some(id) = block["block_id"].as_str() {
            too_long(&block["block_id"], 255, "block_id", errors);
            if !block_ids.insert(id.to_owned()) {
                errors.push(format!("block_id {id} appears twice"));
            }
        }
        match block["type"].as_str() {
            Some("header") => check_text(&block["text"], 150, true, "header text", errors),
            Some("section") => check_text(&block["text"], 3000, false, "section text", errors),
            Some("divider") => {}
            Some("context") => {
                let elements = block["elements"].as_array().map(Vec::as_slice).unwrap_or_default();
                if elements.is_empty() || elements.len() > 10 {
                    errors.push(format!("context with {} elements", elements.len()));
                }
                for element in elements {
                    check_text(element, 3000, false, "context element", errors);
                }
            }
            Some("actions") => {
                let elements = block["elements"].as_array().map(Vec::as_slice).unwrap_or_default();
                if elements.is_empty() || elements.len() > 25 {
                    errors.push(format!("actions with {} elements", elements.len()));
                }
                let mut action_ids = std::collections::HashSet::new();
                for element in elements {
                    if let Some(id) = element["action_id"].as_str()
                        && !action_ids.insert(id.to_owned())
                    {
                        errors.push(format!("action_id {id} appears twice in a block"));
                    }
                    check_element(element, errors);
                }
            }
            Some("input") => {
                check_text(&block["label"], 2000, true, "input label", errors);
                check_element(&block["element"], errors);
            }
            other => errors.push(format!("block type {other:?}")),
        }
    }
}

fn check_view(view: &Value, errors: &mut Vec<String>) {
    if view["type"] != "modal" {
        errors.push(format!("view type {}", view["type"]));
    }
    check_text(&view["title"], 24, true, "view title", errors);
    for button in ["submit", "close"] {
        if !view[button].is_null() {
            check_text(&view[button], 24, true, button, errors);
        }
    }
    if view["blocks"].as_array().is_some_and(|b| b.iter().any(|b| b["type"] == "input")) && view["submit"].is_null() {
        errors.push("a view with inputs needs submit".into());
    }
    too_long(&view["callback_id"], 255, "callback_id", errors);
    too_long(&view["private_metadata"], 3000, "private_metadata", errors);
    check_blocks(&view["blocks"], 100, errors);
}

fn slack_error(error: &str, messages: Vec<String>) -> Response {
    // Slack answers refusals with HTTP 200 and `ok: false`.
    axum::Json(json!({"ok": false, "error": error, "response_metadata": {"messages": messages}})).into_response()
}

async fn api(
    State(stand_in): State<StandIn>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {BOT_TOKEN}")) {
        return slack_error("invalid_auth", vec![]);
    }
    if headers.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/json; charset=utf-8") {
        return slack_error(
            "invalid_arguments",
            vec!["[ERROR] JSON bodies need application/json; charset=utf-8".into()],
        );
    }
    let Ok(args) = serde_json::from_str::<Value>(&body) else {
        return slack_error("invalid_json", vec![]);
    };
    let mut errors = Vec::new();
    let reply = match method.as_str() {
        "chat.postMessage" | "chat.update" => {
            let channel = args["channel"].as_str().unwrap_or_default();
            if channel.is_empty() {
                return slack_error("channel_not_found", vec![]);
            }
            if channel == "C_RATELIMITED" {
                return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "7")], "").into_response();
            }
            if channel == "C_BROKEN" {
                return (StatusCode::SERVICE_UNAVAILABLE, "upstream connect error").into_response();
            }
            if channel.starts_with("C_UNKNOWN") {
                return slack_error("channel_not_found", vec![]);
            }
            if args["text"].as_str().is_none_or(str::is_empty) && args["blocks"].is_null() {
                return slack_error("no_text", vec![]);
            }
            too_long(&args["text"], 40_000, "text", &mut errors);
            check_blocks(&args["blocks"], 50, &mut errors);
            if method == "chat.update" {
                if args["ts"].as_str().is_none_or(str::is_empty) {
                    return slack_error("message_not_found", vec![]);
                }
                json!({"ok": true, "channel": channel, "ts": args["ts"], "text": args["text"]})
            } else {
                // A message to a user id lands in the app's direct message with them.
                let conversation = if channel.starts_with('U') { "D0APPDM01" } else { channel };
                json!({"ok": true, "channel": conversation, "ts": "1700000000.000100",
                       "message": {"type": "message", "text": args["text"], "blocks": args["blocks"]}})
            }
        }
        "views.open" => {
            if args["trigger_id"].as_str().is_none_or(str::is_empty) {
                return slack_error("invalid_trigger_id", vec![]);
            }
            check_view(&args["view"], &mut errors);
            json!({"ok": true, "view": {"id": "V0001", "type": "modal"}})
        }
        _ => return slack_error("unknown_method", vec![]),
    };
    if !errors.is_empty() {
        return slack_error("invalid_blocks", errors);
    }
    stand_in.calls.lock().unwrap().push((method, args));
    axum::Json(reply).into_response()
}

impl StandIn {
    async fn start() -> (StandIn, String) {
        let stand_in = StandIn::default();
        let app = Router::new().route("/api/{method}", post(api)).with_state(stand_in.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (stand_in, url)
    }

    fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

fn approval() -> Question {
    serde_json::from_value(json!({
        "id": Uuid::now_v7(), "workspace": "default", "project": "infra", "run_id": null, "tool_call_id": null,
        "parent_run_ids": [], "kind": "approval", "response_type": "approval",
        "title": "Deploy <web> & restart?", "body": "Deploys **v2** to production.",
        "options": [], "fields": [],
        "action": {"tool_name": "deploy", "arguments": {"service": "web", "version": "v2"}},
        "allow_edit": false, "context": {}, "urgency": "critical", "timeout_at": "2099-01-01T00:00:00Z",
        "default_response": null, "status": "pending", "response": null, "answered_by": null, "resolution": null,
        "created_at": "2026-11-27T12:00:00Z", "updated_at": "2026-11-27T12:00:00Z", "resolved_at": null
    }))
    .unwrap()
}

fn choice(options: usize) -> Question {
    let options: Vec<Value> =
        (0..options).map(|i| json!({"value": format!("v{i}"), "label": format!("Option {i}")})).collect();
    let mut question = approval();
    question.kind = app::types::QuestionKind::Blocking;
    question.response_type = app::types::ResponseType::Choice;
    question.action = None;
    question.options = serde_json::from_value(Value::Array(options)).unwrap();
    question
}

/// Signs `body` as Slack signs a request to the interactions endpoint, from the documented recipe.
fn slack_signed(body: &str, timestamp: i64) -> HeaderMap {
    let mut mac = Hmac::<Sha256>::new_from_slice(SIGNING_SECRET.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let mut headers = HeaderMap::new();
    headers.insert("x-slack-request-timestamp", timestamp.to_string().parse().unwrap());
    headers.insert("x-slack-signature", format!("v0={}", hex::encode(mac.finalize().into_bytes())).parse().unwrap());
    headers.insert("content-type", "application/x-www-form-urlencoded".parse().unwrap());
    headers
}

/// The form body Slack posts for a click on `button` in the message at `at`.
fn click_body(button: &Value, at: &MessageRef, user: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "username": "alice", "name": "alice", "team_id": "T0001"},
        "api_app_id": "A0001", "token": "legacy", "trigger_id": "1337.42.abcdef",
        "container": {"type": "message", "message_ts": at.ts, "channel_id": at.channel, "is_ephemeral": false},
        "team": {"id": "T0001", "domain": "example"},
        "channel": {"id": at.channel, "name": "directmessage"},
        "response_url": "https://hooks.slack.com/actions/T0001/1/abc",
        "actions": [{"type": "button", "block_id": "b", "action_id": button["action_id"], "value": button["value"],
                     "text": button["text"], "action_ts": "1700000001.000200"}]
    });
    url::form_urlencoded::Serializer::new(String::new()).append_pair("payload", &payload.to_string()).finish()
}

#[tokio::test]
async fn a_question_is_posted_with_its_buttons_and_a_signed_click_reads_back_as_its_answer() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN).unwrap();
    let question = approval();
    let message = question_message(&question, &format!("https://hp.example.com/questions/{}", question.id));

    let outcome = client.deliver("U0ALICE", &message).await;
    assert_eq!(outcome, DeliveryOutcome::Sent { reference: Some("D0APPDM01:1700000000.000100".into()) });
    let calls = stand_in.calls();
    assert_eq!(calls.len(), 1);
    let (method, args) = &calls[0];
    assert_eq!(method, "chat.postMessage");
    assert_eq!(args["channel"], "U0ALICE");
    assert_eq!(args["text"], "[CRITICAL] Approval: Deploy <web> & restart?");

    // Slack shows the buttons it was sent; a click on Reject comes back signed.
    let actions = args["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap();
    let reject = actions["elements"].as_array().unwrap().iter().find(|b| b["text"]["text"] == "Reject").unwrap();
    let at = MessageRef::from_reference("D0APPDM01:1700000000.000100").unwrap();
    let body = click_body(reject, &at, "U0ALICE");
    let now = chrono::Utc::now().timestamp();
    let headers = slack_signed(&body, now - 2);
    verify_request(SIGNING_SECRET, &headers, body.as_bytes(), now).unwrap();
    assert_eq!(
        parse_interaction(body.as_bytes()).unwrap(),
        Interaction::Answer {
            user_id: "U0ALICE".into(),
            question_id: question.id,
            value: json!(false),
            message: Some(at)
        }
    );

    // The same click with a stale timestamp, another secret, or a changed body is refused.
    let stale = slack_signed(&body, now - 301);
    assert!(verify_request(SIGNING_SECRET, &stale, body.as_bytes(), now).is_err());
    assert!(verify_request("another-secret", &headers, body.as_bytes(), now).is_err());
    let changed = body.replace("U0ALICE", "U0MALLORY");
    assert!(verify_request(SIGNING_SECRET, &headers, changed.as_bytes(), now).is_err());
}

#[tokio::test]
async fn the_answer_button_opens_a_modal_slack_accepts() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN).unwrap();
    for question in [approval(), {
        let mut q = approval();
        q.response_type = app::types::ResponseType::Text;
        q.action = None;
        q
    }] {
        client.open_view("1337.42.abcdef", &answer_modal(&question)).await.unwrap();
    }
    let calls = stand_in.calls();
    assert_eq!(calls.iter().filter(|(method, _)| method == "views.open").count(), 2);
    assert_eq!(calls[0].1["view"]["blocks"][1]["element"]["type"], "static_select");
    assert_eq!(calls[1].1["view"]["blocks"][1]["element"]["type"], "plain_text_input");
}

#[tokio::test]
async fn a_choice_of_twenty_options_stays_within_an_actions_blocks_limit() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN).unwrap();
    let question = choice(20);
    let message = question_message(&question, "https://hp.example.com/q");
    assert!(matches!(client.deliver("C0TEAM", &message).await, DeliveryOutcome::Sent { .. }));
    let (_, args) = &stand_in.calls()[0];
    let actions = args["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap();
    assert_eq!(actions["elements"].as_array().unwrap().len(), 22, "20 options, the modal, Open");
}

#[tokio::test]
async fn the_message_is_updated_without_buttons_once_the_question_is_resolved() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN).unwrap();
    let question = Question {
        status: QuestionStatus::Answered,
        answered_by: Some("alice".into()),
        response: Some(AnswerBody { value: json!(true), comment: None, edited_arguments: None }),
        ..approval()
    };
    let at = MessageRef { channel: "D0APPDM01".into(), ts: "1700000000.000100".into() };
    client.update_message(&at, &resolved_message(&question, "https://hp.example.com/q")).await.unwrap();
    let (method, args) = &stand_in.calls()[0];
    assert_eq!(method, "chat.update");
    assert_eq!((args["channel"].as_str(), args["ts"].as_str()), (Some("D0APPDM01"), Some("1700000000.000100")));
    let blocks = args["blocks"].as_array().unwrap();
    assert!(blocks.iter().all(|b| b["type"] != "actions"), "{blocks:?}");
    assert!(args["text"].as_str().unwrap().contains("Answered by alice: *Approved*"), "{args}");
}

#[tokio::test]
async fn the_stand_in_refuses_what_slack_refuses_and_the_client_says_so() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN).unwrap();
    // 26 buttons in one actions block: Slack's limit is 25.
    let buttons: Vec<Value> = (0..26)
        .map(|i| json!({"type": "button", "text": {"type": "plain_text", "text": "b"}, "action_id": format!("a{i}")}))
        .collect();
    let too_many = SlackMessage { text: "t".into(), blocks: vec![json!({"type": "actions", "elements": buttons})] };
    let outcome = client.deliver("C0TEAM", &too_many).await;
    assert!(
        matches!(&outcome, DeliveryOutcome::Failed { reason, .. } if reason.contains("invalid_blocks")),
        "{outcome:?}"
    );
    let long_header = SlackMessage {
        text: "t".into(),
        blocks: vec![json!({"type": "header", "text": {"type": "plain_text", "text": "h".repeat(151)}})],
    };
    assert!(matches!(client.deliver("C0TEAM", &long_header).await, DeliveryOutcome::Failed { .. }));
    assert!(stand_in.calls().is_empty());

    let message = question_message(&approval(), "https://hp.example.com/q");
    let outcome = client.deliver("C_UNKNOWN", &message).await;
    assert!(matches!(&outcome, DeliveryOutcome::Failed { reason, .. } if reason.contains("channel_not_found")));
    let wrong_token = SlackClient::new(&url, "xoxb-revoked").unwrap();
    let outcome = wrong_token.deliver("C0TEAM", &message).await;
    assert!(matches!(&outcome, DeliveryOutcome::Failed { reason, .. } if reason.contains("invalid_auth")));
}

#[tokio::test]
async fn rate_limits_outages_and_an_unreachable_api_are_retried() {
    let (_stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN).unwrap();
    let message = question_message(&approval(), "https://hp.example.com/q");
    assert_eq!(
        client.post_message("C_RATELIMITED", &message).await,
        Err(SlackError::Api { error: "ratelimited".into(), retry_after: Some(Duration::from_secs(7)) })
    );
    assert!(matches!(
        client.deliver("C_RATELIMITED", &message).await,
        DeliveryOutcome::Retry { after: Some(after), .. } if after == Duration::from_secs(7)
    ));
    assert!(matches!(client.deliver("C_BROKEN", &message).await, DeliveryOutcome::Retry { after: None, .. }));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let unreachable = SlackClient::new(&format!("http://127.0.0.1:{port}/api"), BOT_TOKEN).unwrap();
    assert!(matches!(unreachable.deliver("C0TEAM", &message).await, DeliveryOutcome::Retry { .. }));
}
