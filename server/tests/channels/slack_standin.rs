//! A stand-in of Slack's Web API for the tests: an HTTP server on loopback that answers `chat.postMessage`,
//! `chat.update`, `chat.postEphemeral`, `views.open` and `users.lookupByEmail` (a GET, from its own directory) as
//! Slack does, after checking each request as Slack documents
//! it (bearer token, JSON with its charset, the method's required fields) and every block against Block Kit's
//! reference: its limits, which elements an input block takes, and each input element's fields (`number_input`'s
//! required `is_decimal_allowed` and numeric-string bounds, a date picker's `YYYY-MM-DD`, a time picker's `HH:mm`, a
//! date-and-time picker's ten digits of seconds, options and initial options, `max_selected_items`). It records the calls it accepted. And what Slack sends back: interactions signed as Slack signs them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hmac::{Hmac, Mac};
use holdpoint::channels::slack::MessageRef;
use serde_json::{Value, json};
use sha2::Sha256;

pub const BOT_TOKEN: &str = "xoxb-1111-2222-standin";
pub const SIGNING_SECRET: &str = "3f1c2b6a9d0e4f5a8b7c6d5e4f3a2b1c";

#[derive(Clone, Default)]
pub struct StandIn {
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    /// Messages posted so far: each gets a `ts` of its own, as in Slack.
    posted: Arc<AtomicU64>,
    /// The workspace's people by email, for `users.lookupByEmail`.
    directory: Arc<Mutex<std::collections::HashMap<String, String>>>,
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

/// The elements an input block takes (Block Kit's input block reference); `number_input`, `email_text_input`,
/// `url_text_input` and `datetimepicker` live in input blocks only.
const INPUT_ELEMENTS: [&str; 11] = [
    "plain_text_input",
    "number_input",
    "email_text_input",
    "url_text_input",
    "datepicker",
    "timepicker",
    "datetimepicker",
    "static_select",
    "multi_static_select",
    "radio_buttons",
    "checkboxes",
];

/// A placeholder, when given: `plain_text` of at most 150 characters.
fn check_placeholder(element: &Value, errors: &mut Vec<String>) {
    if !element["placeholder"].is_null() {
        check_text(&element["placeholder"], 150, true, "placeholder", errors);
    }
}

/// Option objects: 1..=`max` of them, each `plain_text` of at most 75 characters and a value of at most 150.
fn check_options(element: &Value, max: usize, what: &str, errors: &mut Vec<String>) -> Vec<Value> {
    let options = element["options"].as_array().cloned().unwrap_or_default();
    if options.is_empty() || options.len() > max {
        errors.push(format!("{what} with {} options, not 1..={max}", options.len()));
    }
    for option in &options {
        check_text(&option["text"], 75, what != "checkboxes" && what != "radio_buttons", "option text", errors);
        too_long(&option["value"], 150, "option value", errors);
    }
    options
}

/// Initial options must be exactly options of the element.
fn check_initial(element: &Value, options: &[Value], errors: &mut Vec<String>) {
    let initial: Vec<&Value> = match (&element["initial_option"], &element["initial_options"]) {
        (Value::Null, Value::Array(all)) => all.iter().collect(),
        (one, Value::Null) if !one.is_null() => vec![one],
        (Value::Null, Value::Null) => Vec::new(),
        _ => return errors.push("both initial_option and initial_options".into()),
    };
    for chosen in initial {
        if !options.contains(chosen) {
            errors.push(format!("initial option {chosen} is not one of the options"));
        }
    }
}

/// A numeric string, as `number_input`'s `min_value`, `max_value` and `initial_value` are.
fn number_field(element: &Value, field: &str, errors: &mut Vec<String>) -> Option<f64> {
    match &element[field] {
        Value::Null => None,
        Value::String(text) => match text.parse::<f64>() {
            Ok(number) if element["is_decimal_allowed"] == false && number.fract() != 0.0 => {
                errors.push(format!("number_input {field} {text} has decimals, which it does not allow"));
                None
            }
            Ok(number) => Some(number),
            Err(_) => {
                errors.push(format!("number_input {field} {text:?} is not a number"));
                None
            }
        },
        other => {
            errors.push(format!("number_input {field} must be a string, not {other}"));
            None
        }
    }
}

fn check_element(element: &Value, errors: &mut Vec<String>) {
    if !element["action_id"].is_null() {
        too_long(&element["action_id"], 255, "action_id", errors);
    }
    match element["type"].as_str() {
        Some("button") => {
            check_text(&element["text"], 75, true, "button text", errors);
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
            check_placeholder(element, errors);
            if element["max_length"].as_u64().is_some_and(|max| max > 3000) {
                errors.push("plain_text_input max_length above 3000".into());
            }
            if !element["multiline"].is_null() && !element["multiline"].is_boolean() {
                errors.push("plain_text_input multiline is not a boolean".into());
            }
        }
        Some("email_text_input" | "url_text_input") => {
            check_placeholder(element, errors);
            if !element["initial_value"].is_null() && !element["initial_value"].is_string() {
                errors.push("initial_value is not a string".into());
            }
        }
        Some("number_input") => {
            check_placeholder(element, errors);
            // Required, and a boolean.
            if !element["is_decimal_allowed"].is_boolean() {
                errors.push("number_input needs is_decimal_allowed (a boolean)".into());
            }
            let min = number_field(element, "min_value", errors);
            let max = number_field(element, "max_value", errors);
            let initial = number_field(element, "initial_value", errors);
            if let (Some(min), Some(max)) = (min, max)
                && min > max
            {
                errors.push(format!("number_input min_value {min} is greater than max_value {max}"));
            }
            if let Some(initial) = initial
                && (min.is_some_and(|min| initial < min) || max.is_some_and(|max| initial > max))
            {
                errors.push(format!("number_input initial_value {initial} is out of its bounds"));
            }
        }
        Some("datepicker") => {
            check_placeholder(element, errors);
            if let Some(date) = element["initial_date"].as_str()
                && chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_err()
            {
                errors.push(format!("datepicker initial_date {date:?} is not YYYY-MM-DD"));
            }
        }
        Some("timepicker") => {
            check_placeholder(element, errors);
            if let Some(time) = element["initial_time"].as_str()
                && (time.len() != 5 || chrono::NaiveTime::parse_from_str(time, "%H:%M").is_err())
            {
                errors.push(format!("timepicker initial_time {time:?} is not HH:mm"));
            }
        }
        Some("datetimepicker") => {
            if !element["placeholder"].is_null() {
                errors.push("datetimepicker takes no placeholder".into());
            }
            match &element["initial_date_time"] {
                Value::Null => {}
                Value::Number(at) if at.as_i64().is_some_and(|at| (1_000_000_000..10_000_000_000).contains(&at)) => {}
                other => errors.push(format!("datetimepicker initial_date_time {other} is not 10 digits of seconds")),
            }
        }
        Some("static_select") => {
            check_placeholder(element, errors);
            let options = check_options(element, 100, "static_select", errors);
            check_initial(element, &options, errors);
        }
        Some("multi_static_select") => {
            check_placeholder(element, errors);
            let options = check_options(element, 100, "multi_static_select", errors);
            check_initial(element, &options, errors);
            match &element["max_selected_items"] {
                Value::Null => {}
                Value::Number(n) if n.as_u64().is_some_and(|n| n >= 1) => {}
                other => errors.push(format!("max_selected_items {other} is not 1 or more")),
            }
        }
        Some(kind @ ("radio_buttons" | "checkboxes")) => {
            if !element["placeholder"].is_null() {
                errors.push(format!("{kind} takes no placeholder"));
            }
            let options = check_options(element, 10, kind, errors);
            check_initial(element, &options, errors);
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
                for element in elements {
                    if matches!(
                        element["type"].as_str(),
                        Some("number_input" | "email_text_input" | "url_text_input" | "plain_text_input")
                    ) {
                        errors.push(format!("{} belongs in an input block", element["type"]));
                    }
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
                if !block["hint"].is_null() {
                    check_text(&block["hint"], 2000, true, "input hint", errors);
                }
                if !block["optional"].is_null() && !block["optional"].is_boolean() {
                    errors.push("input optional is not a boolean".into());
                }
                if !block["element"]["type"].as_str().is_some_and(|kind| INPUT_ELEMENTS.contains(&kind)) {
                    errors.push(format!("element {} cannot be in an input block", block["element"]["type"]));
                }
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
    // Both optional; when given, strings within their limits.
    if !view["callback_id"].is_null() {
        too_long(&view["callback_id"], 255, "callback_id", errors);
    }
    if !view["private_metadata"].is_null() {
        too_long(&view["private_metadata"], 3000, "private_metadata", errors);
    }
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
                let ts = format!("1700000000.{:06}", 100 + stand_in.posted.fetch_add(1, Ordering::SeqCst));
                json!({"ok": true, "channel": conversation, "ts": ts,
                       "message": {"type": "message", "text": args["text"], "blocks": args["blocks"]}})
            }
        }
        "chat.postEphemeral" => {
            if args["channel"].as_str().is_none_or(str::is_empty) {
                return slack_error("channel_not_found", vec![]);
            }
            if args["user"].as_str().is_none_or(str::is_empty) {
                return slack_error("user_not_in_channel", vec![]);
            }
            if args["text"].as_str().is_none_or(str::is_empty) && args["blocks"].is_null() {
                return slack_error("no_text", vec![]);
            }
            too_long(&args["text"], 40_000, "text", &mut errors);
            json!({"ok": true, "message_ts": "1700000000.900000"})
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

/// `users.lookupByEmail`: a GET with the bearer token and `email` in the query, as Slack documents it.
async fn lookup_by_email(
    State(stand_in): State<StandIn>,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {BOT_TOKEN}")) {
        return slack_error("invalid_auth", vec![]);
    }
    let Some(email) = query.get("email").filter(|e| !e.is_empty()) else {
        return slack_error("invalid_arguments", vec!["[ERROR] missing required field: email".into()]);
    };
    stand_in.calls.lock().unwrap().push(("users.lookupByEmail".into(), json!({ "email": email })));
    match stand_in.directory.lock().unwrap().get(email) {
        Some(id) => axum::Json(json!({"ok": true, "user": {"id": id, "team_id": "T0001", "name": email,
                                                            "profile": {"email": email}}}))
        .into_response(),
        None => slack_error("users_not_found", vec![]),
    }
}

impl StandIn {
    /// Puts a person with `email` and Slack user id `id` in the stand-in's workspace.
    pub fn add_person(&self, email: &str, id: &str) {
        self.directory.lock().unwrap().insert(email.to_owned(), id.to_owned());
    }

    pub async fn start() -> (StandIn, String) {
        let stand_in = StandIn::default();
        let app = Router::new()
            .route("/api/users.lookupByEmail", axum::routing::get(lookup_by_email))
            .route("/api/{method}", post(api))
            .with_state(stand_in.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (stand_in, url)
    }

    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

/// The headers Slack sends with `body`, signed at `timestamp` with `secret` as Slack's documented recipe says.
pub fn slack_signed(secret: &str, body: &str, timestamp: i64) -> HeaderMap {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let mut headers = HeaderMap::new();
    headers.insert("x-slack-request-timestamp", timestamp.to_string().parse().unwrap());
    headers.insert("x-slack-signature", format!("v0={}", hex::encode(mac.finalize().into_bytes())).parse().unwrap());
    headers.insert("content-type", "application/x-www-form-urlencoded".parse().unwrap());
    headers
}

/// The form body Slack posts for a click on `button` in the message at `at`.
pub fn click_body(button: &Value, at: &MessageRef, user: &str) -> String {
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
