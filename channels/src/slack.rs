//! Slack: a question as a Block Kit message with buttons, the modal that answers it (every field type Block Kit
//! has an input for), the Web API calls that post, update and open them, and the checks and parsing of what Slack's
//! interactivity sends back.
//!
//! - A message has a header (the title), a context line (urgency, kind, deadline, project), the body, an approval's
//!   tool and arguments, what a form or a rich value asks for ([`crate::asked`]), and an actions block: one button
//!   per quick answer, an "Answer…" button that opens a modal, and "Open in Holdpoint" ("Answer in Holdpoint" when
//!   Slack cannot take the answer: a file or a table). Each answer button's
//!   `action_id` is `answer:{index}` and its `value` is `{"q": question id, "v": the answer's value}`; the modal
//!   button's `action_id` is [`MODAL_ACTION`] and its `value` `{"q": question id}`.
//! - The Web API is called at a configurable base URL (`HOLDPOINT_SLACK_API_URL`, Slack's own by default) with the
//!   bot token as a bearer token and JSON bodies, as Slack documents for `chat.postMessage`, `chat.update` and
//!   `views.open`. Slack answers HTTP 200 with `{"ok": false, "error"}` for most failures and 429 with
//!   `Retry-After` when rate limited; [`SlackError::outcome`] sorts them into retryable and permanent.
//! - The modal has an input of Block Kit's own for each value: `plain_text_input` (multiline for Markdown),
//!   `number_input` with `min_value`/`max_value` and `is_decimal_allowed` (integers not), `datepicker`,
//!   `timepicker`, `datetimepicker`, `email_text_input`, `url_text_input`, `static_select` for a choice, a rating's
//!   stars and error recovery, `multi_static_select` with `max_selected_items`, `radio_buttons` for a form's yes or
//!   no. A form's inputs have the `block_id` `field:{index}`; a single value's is `answer`, the comment's `comment`.
//!   [`ModalAnswer::answer_for`] reads the submitted state back into the answer (a date and time's Unix seconds
//!   into RFC 3339 in UTC, a menu's index into its option's value), and [`ModalAnswer::errors`] turns the server's
//!   field errors into `response_action: errors` keyed by those blocks.
//! - Interactions (`POST /integrations/slack/interactions`) are signed by Slack: `X-Slack-Signature` is `v0=` and
//!   the hex HMAC-SHA256, keyed by the app's signing secret, of `v0:{X-Slack-Request-Timestamp}:{raw body}`.
//!   [`verify_signature`] checks it in constant time and refuses a timestamp more than five minutes away from now
//!   (a replayed request). The body is form-encoded with the interaction as JSON in `payload`.

use std::time::Duration;

use hmac::{Hmac, Mac};
use holdpoint_types::{
    AnswerBody, FieldRules, FormField, Question, QuestionKind, QuestionOption, QuestionStatus, RECOVERY_ACTIONS,
    ResponseType,
};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Sha256;
use uuid::Uuid;

use super::asked::{asked, asked_lines, kind_text, needs_holdpoint, only_in_holdpoint};
use super::{
    AnswerStyle, DeliveryOutcome, QuickAnswer, deadline_text, pretty_arguments, quick_answers, truncate_chars,
};
use crate::egress::{EgressPolicy, GuardedClient};

/// Slack's own Web API: the default of `HOLDPOINT_SLACK_API_URL`.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

/// How far a request's timestamp may be from now, in seconds, before it is refused as a replay (Slack's advice).
pub const MAX_SIGNATURE_AGE_SECONDS: i64 = 5 * 60;

/// The `action_id` of the button that opens the answer modal.
pub const MODAL_ACTION: &str = "answer_modal";
/// The `action_id` of the "Open in Holdpoint" link button (Slack reports its clicks too; they need no answer).
pub const OPEN_ACTION: &str = "open";
/// The `callback_id` of the answer modal.
pub const MODAL_CALLBACK: &str = "holdpoint_answer";

/// Block Kit's limits (Slack's reference), which the messages built here keep to by cutting long text.
mod limits {
    pub const HEADER_TEXT: usize = 150;
    pub const SECTION_TEXT: usize = 3000;
    pub const BUTTON_TEXT: usize = 75;
    pub const BUTTON_VALUE: usize = 2000;
    pub const CONTEXT_ELEMENTS: usize = 10;
    pub const ACTION_ELEMENTS: usize = 25;
    pub const OPTION_TEXT: usize = 75;
    pub const MODAL_TITLE: usize = 24;
    pub const INPUT_MAX_LENGTH: usize = 3000;
    pub const INPUT_LABEL: usize = 2000;
    pub const PLACEHOLDER: usize = 150;
    /// An error shown under an input: Slack documents no limit; kept to what reads under one input.
    pub const ERROR_TEXT: usize = 500;
    /// A message's `text`: Slack advises at most 4,000 characters (and cuts at 40,000).
    pub const MESSAGE_TEXT: usize = 4000;
}

/// How long one Web API call may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// A message: the fallback `text` (what notifications and screen readers show) and its blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct SlackMessage {
    pub text: String,
    pub blocks: Vec<Value>,
}

/// Where a posted message is, to update it: the conversation's id (a DM's `D…` id when posted to a user) and the
/// message's `ts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRef {
    pub channel: String,
    pub ts: String,
}

impl MessageRef {
    /// The form a delivery stores it in ([`DeliveryOutcome::Sent`]'s `reference`): `channel:ts`. Neither a
    /// conversation id nor a `ts` contains a `:`.
    pub fn to_reference(&self) -> String {
        format!("{}:{}", self.channel, self.ts)
    }

    /// Reads the form [`MessageRef::to_reference`] writes.
    pub fn from_reference(reference: &str) -> Option<Self> {
        let (channel, ts) = reference.split_once(':')?;
        (!channel.is_empty() && !ts.is_empty()).then(|| MessageRef { channel: channel.to_owned(), ts: ts.to_owned() })
    }
}

/// Escapes text for Slack's `mrkdwn`: `&`, `<` and `>` are the control characters there (links and mentions).
pub fn escape_mrkdwn(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn plain_text(text: &str, max: usize) -> Value {
    json!({"type": "plain_text", "text": truncate_chars(text, max), "emoji": true})
}

fn mrkdwn(text: &str) -> Value {
    json!({"type": "mrkdwn", "text": text})
}

/// A section of `text` (already mrkdwn), cut to the section limit; a cut code block is closed again.
fn section(text: &str) -> Value {
    let mut text = truncate_chars(text, limits::SECTION_TEXT);
    if text.ends_with('…') && text.matches("```").count() % 2 == 1 {
        text = truncate_chars(&text, limits::SECTION_TEXT - 4);
        text.push_str("\n```");
    }
    json!({"type": "section", "text": mrkdwn(&text)})
}

fn kind_label(kind: QuestionKind) -> &'static str {
    match kind {
        QuestionKind::Blocking => "Question",
        QuestionKind::NonBlocking => "Question (the agent goes on)",
        QuestionKind::Approval => "Approval",
        QuestionKind::ErrorRecovery => "Error recovery",
    }
}

/// The context line under the header: urgency, kind, deadline, project.
fn context_block(question: &Question) -> Value {
    let mut elements =
        vec![mrkdwn(&format!("*{}*", question.urgency.as_str().to_uppercase())), mrkdwn(kind_label(question.kind))];
    if let Some(deadline) = deadline_text(question) {
        elements.push(mrkdwn(&format!("Deadline {}", escape_mrkdwn(&deadline))));
    }
    if let Some(project) = &question.project {
        elements.push(mrkdwn(&format!("Project {}", escape_mrkdwn(project))));
    }
    elements.truncate(limits::CONTEXT_ELEMENTS);
    json!({"type": "context", "elements": elements})
}

/// The blocks every form of the message starts with: header, context, body, and an approval's call.
fn question_blocks(question: &Question) -> Vec<Value> {
    let mut blocks = vec![
        json!({"type": "header", "text": plain_text(&question.title, limits::HEADER_TEXT)}),
        context_block(question),
    ];
    if !question.body.trim().is_empty() {
        blocks.push(section(&escape_mrkdwn(question.body.trim())));
    }
    if let (ResponseType::Approval, Some(action)) = (question.response_type, &question.action) {
        blocks.push(section(&format!(
            "Tool `{}` with the arguments:\n```{}```",
            escape_mrkdwn(&action.tool_name),
            escape_mrkdwn(&pretty_arguments(&action.arguments))
        )));
    }
    blocks
}

fn fallback_text(question: &Question) -> String {
    let text =
        format!("[{}] {}: {}", question.urgency.as_str().to_uppercase(), kind_label(question.kind), question.title);
    truncate_chars(&text, limits::MESSAGE_TEXT)
}

/// The button `value` of a quick answer: which question, which value.
fn answer_value(question_id: Uuid, value: &Value) -> String {
    json!({"q": question_id, "v": value}).to_string()
}

fn button(text: &str, action_id: &str, value: Option<String>, style: AnswerStyle) -> Value {
    let mut button = json!({"type": "button", "text": plain_text(text, limits::BUTTON_TEXT), "action_id": action_id});
    if let Some(value) = value {
        button["value"] = Value::String(value);
    }
    match style {
        AnswerStyle::Primary => button["style"] = json!("primary"),
        AnswerStyle::Danger => button["style"] = json!("danger"),
        AnswerStyle::Plain => {}
    }
    button
}

/// The most options of a `choice` question shown as buttons: with the modal and "Open" buttons, all of the 20 a
/// question may have fit in one actions block.
const SLACK_MAX_CHOICES: usize = limits::ACTION_ELEMENTS - 2;

/// The quick answers a Slack message offers as buttons (a value too long for a button's `value` is answered in
/// the modal or in Holdpoint instead).
fn slack_quick_answers(question: &Question) -> Vec<QuickAnswer> {
    quick_answers(question, SLACK_MAX_CHOICES)
        .into_iter()
        .filter(|answer| answer_value(question.id, &answer.value).len() <= limits::BUTTON_VALUE)
        .collect()
}

/// How the modal asks for a question's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModalKind {
    /// A menu of the quick answers (approval, yes or no, a choice), with a comment.
    Quick,
    /// One input of the question's own type (text, a number, a date, several choices, ...).
    Single,
    /// One input per form field; a file or table field (optional ones only) is left to Holdpoint.
    Form,
}

/// How `question` is answered in the modal, or `None` when it is answered in Holdpoint only: a file or a table (the
/// question itself, or a required field of its form), or a question no longer pending.
fn modal_kind(question: &Question) -> Option<ModalKind> {
    if question.status != QuestionStatus::Pending {
        return None;
    }
    if !slack_quick_answers(question).is_empty() {
        return Some(ModalKind::Quick);
    }
    match question.response_type {
        ResponseType::Form => {
            let answerable = question.fields.iter().any(|f| !only_in_holdpoint(f.response_type));
            (answerable && !needs_holdpoint(question)).then_some(ModalKind::Form)
        }
        ResponseType::Approval | ResponseType::Boolean | ResponseType::Table | ResponseType::File => None,
        _ => Some(ModalKind::Single),
    }
}

/// Whether a question can be answered in the modal.
fn has_modal(question: &Question) -> bool {
    modal_kind(question).is_some()
}

/// What the question asks for, as a section of mrkdwn: the fields of a form with their bounds, or what its one value
/// is (see [`crate::asked`]).
fn asked_block(question: &Question) -> Option<Value> {
    let items = asked(question);
    if items.is_empty() {
        return None;
    }
    let heading = if question.response_type == ResponseType::Form { "*What is asked*" } else { "*The answer is*" };
    let lines: Vec<String> = asked_lines(&items).iter().map(|line| escape_mrkdwn(line)).collect();
    Some(section(&format!("{heading}\n{}", lines.join("\n"))))
}

/// The message that asks `question`: what it asks for, buttons for its quick answers, "Answer…" for the modal, and
/// a link to it in Holdpoint (`open_url`), which says "Answer in Holdpoint" when Slack cannot take the answer (a
/// file, a table).
pub fn question_message(question: &Question, open_url: &str) -> SlackMessage {
    let mut blocks = question_blocks(question);
    let quick = slack_quick_answers(question);
    if quick.is_empty() {
        // Where buttons answer, they say what the answers are.
        blocks.extend(asked_block(question));
    }
    let mut buttons: Vec<Value> = quick
        .iter()
        .enumerate()
        .map(|(i, answer)| {
            button(&answer.label, &format!("answer:{i}"), Some(answer_value(question.id, &answer.value)), answer.style)
        })
        .collect();
    if has_modal(question) {
        let label = if buttons.is_empty() { "Answer…" } else { "With a comment…" };
        buttons.push(button(label, MODAL_ACTION, Some(json!({"q": question.id}).to_string()), AnswerStyle::Plain));
    }
    let open_label = if buttons.is_empty() && question.status == QuestionStatus::Pending {
        "Answer in Holdpoint"
    } else {
        "Open in Holdpoint"
    };
    let mut open = button(open_label, OPEN_ACTION, None, AnswerStyle::Plain);
    open["url"] = Value::String(open_url.to_owned());
    buttons.push(open);
    buttons.truncate(limits::ACTION_ELEMENTS);
    blocks.push(json!({"type": "actions", "block_id": format!("q:{}", question.id), "elements": buttons}));
    SlackMessage { text: fallback_text(question), blocks }
}

/// How a resolved question was resolved, in words, with the answer's label when it has one.
fn resolution_text(question: &Question) -> String {
    let by = question.answered_by.as_deref().map(|name| format!(" by {}", escape_mrkdwn(name))).unwrap_or_default();
    let value = question.response.as_ref().map(|response| &response.value);
    let answer = value.map(|value| match (question.response_type, value) {
        (ResponseType::Approval, Value::Bool(true)) => "Approved".to_owned(),
        (ResponseType::Approval, Value::Bool(false)) => "Rejected".to_owned(),
        (ResponseType::Boolean, Value::Bool(true)) => "Yes".to_owned(),
        (ResponseType::Boolean, Value::Bool(false)) => "No".to_owned(),
        (_, Value::String(chosen)) => {
            let label = question.options.iter().find(|o| &o.value == chosen).map_or(chosen, |o| &o.label);
            truncate_chars(label, 500)
        }
        (_, other) => truncate_chars(&other.to_string(), 500),
    });
    let answer = answer.map(|a| format!(": *{}*", escape_mrkdwn(&a))).unwrap_or_default();
    match question.status {
        QuestionStatus::Pending => "Waiting for an answer".to_owned(),
        QuestionStatus::Answered => format!(":white_check_mark: Answered{by}{answer}"),
        QuestionStatus::Defaulted => format!(":hourglass: The deadline passed; the default applied{answer}"),
        QuestionStatus::Expired => ":hourglass: The deadline passed with no answer".to_owned(),
        QuestionStatus::Cancelled => ":no_entry_sign: Cancelled".to_owned(),
    }
}

/// The message once `question` is resolved (anywhere): how and by whom, with no buttons left.
pub fn resolved_message(question: &Question, open_url: &str) -> SlackMessage {
    let mut blocks = question_blocks(question);
    let outcome = resolution_text(question);
    blocks.push(section(&format!("{outcome}\n<{open_url}|Open in Holdpoint>")));
    let text = truncate_chars(&format!("{} — {}", fallback_text(question), outcome), limits::MESSAGE_TEXT);
    SlackMessage { text, blocks }
}

/// The `block_id` of a form field's input in the modal: its index, as a field's key may be long.
fn field_block(index: usize) -> String {
    format!("field:{index}")
}

/// The single answer's input, and the comment's.
const ANSWER_BLOCK: &str = "answer";
const COMMENT_BLOCK: &str = "comment";

/// What an input is built from: a form field's, or a single-value question's, type, options and bounds.
struct InputDef<'a> {
    response_type: ResponseType,
    options: &'a [QuestionOption],
    rules: &'a FieldRules,
    placeholder: Option<&'a str>,
    default: Option<&'a Value>,
    /// A text question's answer box is a paragraph; a form's text field one line.
    multiline: bool,
}

fn option_object(label: &str, value: String) -> Value {
    json!({"text": plain_text(label, limits::OPTION_TEXT), "value": value})
}

/// The menu's options of a definition, each valued by what [`value_of`] reads back: the option's index for choices
/// and error recovery, the number of stars for a rating, `true`/`false` for yes or no.
fn options_of(def: &InputDef<'_>) -> Vec<Value> {
    match def.response_type {
        ResponseType::Choice | ResponseType::MultiChoice => {
            def.options.iter().enumerate().map(|(i, o)| option_object(&o.label, i.to_string())).collect()
        }
        ResponseType::ErrorRecovery => recovery_choices(def.options)
            .iter()
            .enumerate()
            .map(|(i, (_, label))| option_object(label, i.to_string()))
            .collect(),
        ResponseType::Rating => (1..=def.rules.rating_max())
            .map(|n| option_object(&format!("{} {n}", "★".repeat(n as usize)), n.to_string()))
            .collect(),
        ResponseType::Boolean => vec![option_object("Yes", "true".into()), option_object("No", "false".into())],
        _ => Vec::new(),
    }
}

/// The choices of an error recovery question: retry, skip and abort, then its own options, as `(value, label)`.
fn recovery_choices(options: &[QuestionOption]) -> Vec<(String, String)> {
    let mut choices: Vec<(String, String)> =
        RECOVERY_ACTIONS.iter().map(|(value, label, _)| ((*value).to_owned(), (*label).to_owned())).collect();
    choices.extend(options.iter().map(|o| (o.value.clone(), o.label.clone())));
    choices
}

/// The options of `options` whose values read back as `default`.
fn default_options(def: &InputDef<'_>, options: &[Value]) -> Vec<Value> {
    let Some(default) = def.default else { return Vec::new() };
    let wanted: Vec<String> = match (def.response_type, default) {
        (ResponseType::Choice, Value::String(chosen)) => {
            def.options.iter().position(|o| &o.value == chosen).map(|i| i.to_string()).into_iter().collect()
        }
        (ResponseType::MultiChoice, Value::Array(chosen)) => chosen
            .iter()
            .filter_map(|c| def.options.iter().position(|o| Some(o.value.as_str()) == c.as_str()))
            .map(|i| i.to_string())
            .collect(),
        (ResponseType::Rating, Value::Number(n)) => vec![n.to_string()],
        (ResponseType::Boolean, Value::Bool(b)) => vec![b.to_string()],
        _ => Vec::new(),
    };
    options.iter().filter(|o| o["value"].as_str().is_some_and(|v| wanted.iter().any(|w| w == v))).cloned().collect()
}

/// The Block Kit element that takes a value of `def`'s type, with its bounds and default; `None` for a file or a
/// table, which only Holdpoint's pages take.
fn input_element(def: &InputDef<'_>) -> Option<Value> {
    let default_text = def.default.and_then(Value::as_str);
    let mut element = match def.response_type {
        ResponseType::Text | ResponseType::Markdown => {
            let multiline = def.multiline || def.response_type == ResponseType::Markdown;
            let mut element = json!({"type": "plain_text_input", "multiline": multiline,
                                     "max_length": limits::INPUT_MAX_LENGTH});
            if let Some(text) = default_text {
                element["initial_value"] = json!(truncate_chars(text, limits::INPUT_MAX_LENGTH));
            }
            element
        }
        ResponseType::Email | ResponseType::Url => {
            let kind = if def.response_type == ResponseType::Email { "email_text_input" } else { "url_text_input" };
            let mut element = json!({"type": kind});
            if let Some(text) = default_text {
                element["initial_value"] = json!(text);
            }
            element
        }
        ResponseType::Number | ResponseType::Integer => {
            let mut element =
                json!({"type": "number_input", "is_decimal_allowed": def.response_type == ResponseType::Number});
            if let Some(min) = &def.rules.min {
                element["min_value"] = json!(min.to_string());
            }
            if let Some(max) = &def.rules.max {
                element["max_value"] = json!(max.to_string());
            }
            if let Some(Value::Number(n)) = def.default {
                element["initial_value"] = json!(n.to_string());
            }
            element
        }
        ResponseType::Date => {
            let mut element = json!({"type": "datepicker"});
            if let Some(date) = default_text {
                element["initial_date"] = json!(date);
            }
            element
        }
        ResponseType::Time => {
            let mut element = json!({"type": "timepicker"});
            if let Some(time) = default_text {
                element["initial_time"] = json!(time);
            }
            element
        }
        ResponseType::Datetime => {
            let mut element = json!({"type": "datetimepicker"});
            if let Some(at) = default_text.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) {
                element["initial_date_time"] = json!(at.timestamp());
            }
            element
        }
        ResponseType::Choice | ResponseType::Rating | ResponseType::ErrorRecovery => {
            let options = options_of(def);
            let mut element = json!({"type": "static_select", "options": options});
            if let Some(chosen) = default_options(def, &options).into_iter().next() {
                element["initial_option"] = chosen;
            }
            element
        }
        ResponseType::MultiChoice => {
            let options = options_of(def);
            let mut element = json!({"type": "multi_static_select", "options": options});
            if let Some(max) = def.rules.max_items.filter(|max| *max >= 1) {
                element["max_selected_items"] = json!(max);
            }
            let chosen = default_options(def, &options);
            if !chosen.is_empty() {
                element["initial_options"] = Value::Array(chosen);
            }
            element
        }
        ResponseType::Boolean => {
            let options = options_of(def);
            let mut element = json!({"type": "radio_buttons", "options": options});
            if let Some(chosen) = default_options(def, &options).into_iter().next() {
                element["initial_option"] = chosen;
            }
            element
        }
        ResponseType::Table | ResponseType::File | ResponseType::Approval | ResponseType::Form => return None,
    };
    element["action_id"] = json!("value");
    let takes_placeholder = !matches!(def.response_type, ResponseType::Boolean | ResponseType::Datetime);
    if let Some(placeholder) = def.placeholder.filter(|p| takes_placeholder && !p.trim().is_empty()) {
        element["placeholder"] = plain_text(placeholder, limits::PLACEHOLDER);
    }
    Some(element)
}

/// The grey line under an input: the field's description, and a number's step, which no element enforces.
fn hint_of(description: Option<&str>, def: &InputDef<'_>) -> Option<String> {
    let mut parts: Vec<String> =
        description.filter(|d| !d.trim().is_empty()).map(|d| d.trim().to_owned()).into_iter().collect();
    if let (ResponseType::Number | ResponseType::Integer, Some(step)) = (def.response_type, &def.rules.step) {
        parts.push(format!("In steps of {step}."));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

fn input_block(block_id: &str, label: &str, element: Value, optional: bool, hint: Option<String>) -> Value {
    let mut block = json!({"type": "input", "block_id": block_id, "label": plain_text(label, limits::INPUT_LABEL),
                           "element": element, "optional": optional});
    if let Some(hint) = hint {
        block["hint"] = plain_text(&hint, limits::INPUT_LABEL);
    }
    block
}

fn field_def(field: &FormField) -> InputDef<'_> {
    InputDef {
        response_type: field.response_type,
        options: &field.options,
        rules: &field.rules,
        placeholder: field.placeholder.as_deref(),
        default: field.default.as_ref(),
        multiline: false,
    }
}

fn question_def(question: &Question) -> InputDef<'_> {
    InputDef {
        response_type: question.response_type,
        options: &question.options,
        rules: &question.rules,
        placeholder: None,
        default: None,
        multiline: true,
    }
}

/// A modal that only says why a question cannot be answered here (a click on "Answer…" always opens something).
pub fn notice_modal(title: &str, text: &str) -> Value {
    json!({
        "type": "modal",
        "title": plain_text(title, limits::MODAL_TITLE),
        "close": plain_text("Close", limits::MODAL_TITLE),
        "blocks": [section(&escape_mrkdwn(text))],
    })
}

/// The modal a person answers in, whose `private_metadata` names the question: the question's title, then a menu
/// of the quick answers (approval, yes or no, a choice), or an input of the question's own type (a text box, a
/// number input with its bounds, a date, time or date-and-time picker, an email or URL input, a menu of stars,
/// several choices), or one input per form field, each labelled, with its description as a hint, its default filled
/// in and optional unless required; and an optional comment. A form's optional file and table fields are listed with
/// a link to answer in Holdpoint (`open_url`) instead; a question Slack cannot take at all gets a modal that says
/// so, with that link.
pub fn answer_modal(question: &Question, open_url: &str) -> Value {
    let Some(kind) = modal_kind(question) else {
        let why = if question.status == QuestionStatus::Pending {
            "This question asks for a file or a table, which Slack cannot take"
        } else {
            "This question is no longer open"
        };
        let mut modal = notice_modal("Holdpoint", why);
        modal["blocks"] = json!([section(&format!("{why}: <{open_url}|Answer in Holdpoint>"))]);
        return modal;
    };
    let mut blocks = vec![section(&format!("*{}*", escape_mrkdwn(&question.title)))];
    match kind {
        ModalKind::Quick => {
            let options: Vec<Value> = slack_quick_answers(question)
                .iter()
                .enumerate()
                .map(|(i, answer)| option_object(&answer.label, i.to_string()))
                .collect();
            let element = json!({"type": "static_select", "action_id": "value", "options": options});
            blocks.push(input_block(ANSWER_BLOCK, "Your answer", element, false, None));
        }
        ModalKind::Single => {
            let def = question_def(question);
            if let Some(element) = input_element(&def) {
                blocks.push(input_block(ANSWER_BLOCK, "Your answer", element, false, hint_of(None, &def)));
            }
        }
        ModalKind::Form => {
            let mut elsewhere = Vec::new();
            for (i, field) in question.fields.iter().enumerate() {
                let def = field_def(field);
                match input_element(&def) {
                    Some(element) => blocks.push(input_block(
                        &field_block(i),
                        &field.label,
                        element,
                        !field.required,
                        hint_of(field.description.as_deref(), &def),
                    )),
                    None => elsewhere.push(format!(
                        "*{}* ({})",
                        escape_mrkdwn(&field.label),
                        escape_mrkdwn(&kind_text(field.response_type, &field.options, &field.rules))
                    )),
                }
            }
            if !elsewhere.is_empty() {
                blocks.push(section(&format!(
                    "{} can only be given in Holdpoint: Send answers without it; to give it, \
                     <{open_url}|answer in Holdpoint> instead.",
                    elsewhere.join(", ")
                )));
            }
        }
    }
    blocks.push(input_block(
        COMMENT_BLOCK,
        "Comment",
        json!({"type": "plain_text_input", "action_id": "value", "multiline": true,
               "max_length": limits::INPUT_MAX_LENGTH}),
        true,
        None,
    ));
    json!({
        "type": "modal",
        "callback_id": MODAL_CALLBACK,
        "private_metadata": json!({"q": question.id}).to_string(),
        "title": plain_text("Answer", limits::MODAL_TITLE),
        "submit": plain_text("Send", limits::MODAL_TITLE),
        "close": plain_text("Cancel", limits::MODAL_TITLE),
        "blocks": blocks,
    })
}

/// Why a Web API call did not work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlackError {
    /// Slack answered `{"ok": false, "error": ...}`, or 429 (`ratelimited`).
    #[error("Slack refused the call: {error}")]
    Api { error: String, retry_after: Option<Duration> },
    /// An HTTP status Slack does not send for a refusal it explains (a proxy's, or an outage's).
    #[error("Slack answered HTTP {status}")]
    Status { status: u16 },
    /// No answer: a connection or timeout error.
    #[error("Slack could not be reached: {0}")]
    Network(String),
    /// An answer that is not the JSON Slack documents.
    #[error("Slack's answer could not be read: {0}")]
    Protocol(String),
}

/// Errors that are Slack's own trouble and pass: every other `error` (an unknown channel, a revoked token, a
/// missing scope, invalid blocks) stays until someone changes something.
const TRANSIENT_API_ERRORS: [&str; 5] =
    ["ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"];

impl SlackError {
    /// The delivery outcome of a failed post or update.
    pub fn outcome(&self) -> DeliveryOutcome {
        let reason = self.to_string();
        match self {
            SlackError::Api { error, retry_after } if TRANSIENT_API_ERRORS.contains(&error.as_str()) => {
                DeliveryOutcome::retry(reason, *retry_after)
            }
            SlackError::Api { .. } => DeliveryOutcome::failed(reason),
            SlackError::Status { status } if *status >= 500 || *status == 408 => DeliveryOutcome::retry(reason, None),
            SlackError::Status { .. } => DeliveryOutcome::failed(reason),
            SlackError::Network(_) | SlackError::Protocol(_) => DeliveryOutcome::retry(reason, None),
        }
    }
}

/// A client of Slack's Web API with the bot token. Cheap to clone.
#[derive(Clone)]
pub struct SlackClient {
    http: GuardedClient,
    api_url: String,
    bot_token: String,
}

impl std::fmt::Debug for SlackClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackClient").field("api_url", &self.api_url).field("bot_token", &"[redacted]").finish()
    }
}

#[derive(Deserialize)]
struct ApiReply {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    ts: Option<String>,
}

impl SlackClient {
    /// A client of the Web API at `api_url` (Slack's is [`DEFAULT_API_URL`]) with `bot_token` (`xoxb-…`), through
    /// the outbound guard: an address written in `api_url` is reached whatever its range (the operator wrote it), a
    /// name only at public addresses unless `allow_private` (`HOLDPOINT_SLACK_ALLOW_PRIVATE`).
    pub fn new(api_url: &str, bot_token: &str, allow_private: bool) -> Result<Self, SlackError> {
        let http = EgressPolicy::new("HOLDPOINT_SLACK_ALLOW_PRIVATE", allow_private)
            .naming([api_url])
            .client(reqwest::Client::builder().timeout(REQUEST_TIMEOUT))
            .map_err(|e| SlackError::Network(format!("cannot make an HTTP client: {e}")))?;
        Ok(SlackClient { http, api_url: api_url.trim_end_matches('/').to_owned(), bot_token: bot_token.to_owned() })
    }

    async fn call(&self, method: &str, body: &Value) -> Result<ApiReply, SlackError> {
        let request = self
            .http
            .post(format!("{}/{method}", self.api_url))
            .bearer_auth(&self.bot_token)
            // Slack reads a JSON body only with this type, and warns (`missing_charset`) without the charset.
            .header(reqwest::header::CONTENT_TYPE, "application/json; charset=utf-8")
            .body(body.to_string());
        let response = self.http.send(request).await.map_err(|e| SlackError::Network(e.to_string()))?;
        let status = response.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            return Err(SlackError::Api { error: "ratelimited".into(), retry_after });
        }
        if !status.is_success() {
            return Err(SlackError::Status { status: status.as_u16() });
        }
        let reply: ApiReply = response.json().await.map_err(|e| SlackError::Protocol(e.to_string()))?;
        if !reply.ok {
            let error = reply.error.unwrap_or_else(|| "unknown_error".into());
            return Err(SlackError::Api { error, retry_after: None });
        }
        Ok(reply)
    }

    /// `chat.postMessage`: posts `message` to `channel` (a conversation id, or a user id for a direct message from
    /// the app) and returns where it is.
    pub async fn post_message(&self, channel: &str, message: &SlackMessage) -> Result<MessageRef, SlackError> {
        let body = json!({"channel": channel, "text": message.text, "blocks": message.blocks,
                          "unfurl_links": false, "unfurl_media": false});
        let reply = self.call("chat.postMessage", &body).await?;
        match (reply.channel, reply.ts) {
            (Some(channel), Some(ts)) => Ok(MessageRef { channel, ts }),
            _ => Err(SlackError::Protocol("chat.postMessage answered ok without channel and ts".into())),
        }
    }

    /// Posts `message` and says how it went, as the outbox records it.
    pub async fn deliver(&self, channel: &str, message: &SlackMessage) -> DeliveryOutcome {
        match self.post_message(channel, message).await {
            Ok(at) => DeliveryOutcome::Sent { reference: Some(at.to_reference()) },
            Err(error) => error.outcome(),
        }
    }

    /// `chat.update`: replaces the message at `at` with `message`.
    pub async fn update_message(&self, at: &MessageRef, message: &SlackMessage) -> Result<(), SlackError> {
        let body = json!({"channel": at.channel, "ts": at.ts, "text": message.text, "blocks": message.blocks});
        self.call("chat.update", &body).await.map(drop)
    }

    /// `views.open`: opens `view` for the person whose click gave `trigger_id` (valid for three seconds).
    /// Shows `text` to `user` only, in `channel` (`chat.postEphemeral`): why a click of theirs answered nothing.
    pub async fn post_ephemeral(&self, channel: &str, user: &str, text: &str) -> Result<(), SlackError> {
        let body = json!({"channel": channel, "user": user, "text": truncate_chars(text, limits::MESSAGE_TEXT)});
        self.call("chat.postEphemeral", &body).await.map(drop)
    }

    /// `users.lookupByEmail` (scope `users:read.email`): the Slack user id of the workspace member with `email`;
    /// `None` when Slack has nobody with it.
    pub async fn user_id_by_email(&self, email: &str) -> Result<Option<String>, SlackError> {
        #[derive(serde::Deserialize)]
        struct Found {
            ok: bool,
            #[serde(default)]
            error: Option<String>,
            #[serde(default)]
            user: Option<FoundUser>,
        }
        #[derive(serde::Deserialize)]
        struct FoundUser {
            id: String,
        }
        let request = self
            .http
            .request(reqwest::Method::GET, format!("{}/users.lookupByEmail", self.api_url))
            .bearer_auth(&self.bot_token)
            .query(&[("email", email)]);
        let response = self.http.send(request).await.map_err(|e| SlackError::Network(e.to_string()))?;
        if !response.status().is_success() {
            return Err(SlackError::Status { status: response.status().as_u16() });
        }
        let found: Found = response.json().await.map_err(|e| SlackError::Protocol(e.to_string()))?;
        match (found.ok, found.user, found.error.as_deref()) {
            (true, Some(user), _) => Ok(Some(user.id)),
            (false, _, Some("users_not_found")) => Ok(None),
            (_, _, error) => {
                Err(SlackError::Api { error: error.unwrap_or("unknown_error").to_owned(), retry_after: None })
            }
        }
    }

    pub async fn open_view(&self, trigger_id: &str, view: &Value) -> Result<(), SlackError> {
        self.call("views.open", &json!({"trigger_id": trigger_id, "view": view})).await.map(drop)
    }
}

/// Why an interaction request was refused before it was read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the request has no {0} header")]
    Missing(&'static str),
    #[error("X-Slack-Request-Timestamp is not a Unix time")]
    BadTimestamp,
    /// More than five minutes from now: a replayed (or badly delayed) request.
    #[error("the request's timestamp is {age_seconds} s away from now, more than 300 s")]
    Stale { age_seconds: i64 },
    #[error("the request's signature does not match")]
    Mismatch,
}

/// Checks a request Slack signed: `signature` (`X-Slack-Signature`) must be `v0=` and the hex HMAC-SHA256 of
/// `v0:{timestamp}:{body}` keyed by `signing_secret`, and `timestamp` (`X-Slack-Request-Timestamp`) within five
/// minutes of `now_unix`. Compared in constant time.
pub fn verify_signature(
    signing_secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Result<(), SignatureError> {
    let timestamp = timestamp.ok_or(SignatureError::Missing("X-Slack-Request-Timestamp"))?;
    let signature = signature.ok_or(SignatureError::Missing("X-Slack-Signature"))?;
    let sent_at: i64 = timestamp.trim().parse().map_err(|_| SignatureError::BadTimestamp)?;
    let age_seconds = now_unix.saturating_sub(sent_at).saturating_abs();
    if age_seconds > MAX_SIGNATURE_AGE_SECONDS {
        return Err(SignatureError::Stale { age_seconds });
    }
    let given = signature.strip_prefix("v0=").and_then(|hex_digest| hex::decode(hex_digest).ok());
    let given = given.ok_or(SignatureError::Mismatch)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    mac.verify_slice(&given).map_err(|_| SignatureError::Mismatch)
}

/// [`verify_signature`] on a request's headers.
pub fn verify_request(
    signing_secret: &str,
    headers: &http::HeaderMap,
    body: &[u8],
    now_unix: i64,
) -> Result<(), SignatureError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    verify_signature(signing_secret, header("x-slack-request-timestamp"), header("x-slack-signature"), body, now_unix)
}

/// What a person did in Slack, as far as Holdpoint cares.
#[derive(Debug, Clone, PartialEq)]
pub enum Interaction {
    /// Clicked an answer button of a question's message.
    Answer {
        /// The Slack user who clicked (mapped to a member by `slack_user_id`).
        user_id: String,
        question_id: Uuid,
        value: Value,
        /// The message clicked in, to update it.
        message: Option<MessageRef>,
    },
    /// Clicked "Answer…": the modal is to be opened with `trigger_id`.
    OpenModal { user_id: String, question_id: Uuid, trigger_id: String },
    /// Submitted the modal.
    Submit { user_id: String, question_id: Uuid, answer: ModalAnswer },
    /// Anything else (a click on the "Open in Holdpoint" link, a closed modal, another app surface): acknowledged
    /// and otherwise left alone.
    Ignored { kind: String },
}

/// What one input of the modal held, as Slack reports it in the view's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModalInput {
    /// A text, email, URL or number input's `value` (a number input's too: Slack sends its text).
    Text(String),
    /// A date picker's `selected_date`, `YYYY-MM-DD`.
    Date(String),
    /// A time picker's `selected_time`, `HH:mm`.
    Time(String),
    /// A date-and-time picker's `selected_date_time`: Unix seconds.
    DateTime(i64),
    /// A menu's or radio group's `selected_option`'s value.
    Chosen(String),
    /// A multi-select menu's `selected_options`' values.
    ChosenMany(Vec<String>),
    /// Left empty.
    Empty,
}

/// What the modal held: its inputs by `block_id`, and the comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModalAnswer {
    pub inputs: std::collections::BTreeMap<String, ModalInput>,
    pub comment: Option<String>,
}

/// `secs` as RFC 3339 in UTC: a date-and-time picker's answer as a `datetime` takes it.
fn rfc3339(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// The option of `index` (a menu option's value) among `count`.
fn index_of(chosen: &str, count: usize) -> Result<usize, InteractionError> {
    chosen.parse::<usize>().ok().filter(|i| *i < count).ok_or(InteractionError::Invalid("a menu option of another app"))
}

/// A number input's text as a JSON number; text that is none is sent as it is, and the server names it.
fn number_of(text: &str) -> Value {
    let text = text.trim();
    text.parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number))
        .unwrap_or_else(|| Value::String(text.to_owned()))
}

/// The value an input held, as a value of `def`'s type; `None` when it was left empty.
fn value_of(def: &InputDef<'_>, input: &ModalInput) -> Result<Option<Value>, InteractionError> {
    let value = match (def.response_type, input) {
        (_, ModalInput::Empty) => return Ok(None),
        (ResponseType::Number | ResponseType::Integer, ModalInput::Text(text)) => number_of(text),
        (_, ModalInput::Text(text)) => Value::String(text.clone()),
        (_, ModalInput::Date(date)) => Value::String(date.clone()),
        (_, ModalInput::Time(time)) => Value::String(time.clone()),
        (_, ModalInput::DateTime(secs)) => {
            Value::String(rfc3339(*secs).ok_or(InteractionError::Invalid("a date and time out of range"))?)
        }
        (ResponseType::Choice, ModalInput::Chosen(chosen)) => {
            Value::String(def.options[index_of(chosen, def.options.len())?].value.clone())
        }
        (ResponseType::ErrorRecovery, ModalInput::Chosen(chosen)) => {
            let choices = recovery_choices(def.options);
            Value::String(choices[index_of(chosen, choices.len())?].0.clone())
        }
        (ResponseType::Rating, ModalInput::Chosen(stars)) => number_of(stars),
        (ResponseType::Boolean, ModalInput::Chosen(yes)) => Value::Bool(yes == "true"),
        (ResponseType::MultiChoice, ModalInput::ChosenMany(chosen)) => {
            let values: Result<Vec<Value>, _> = chosen
                .iter()
                .map(|c| index_of(c, def.options.len()).map(|i| Value::String(def.options[i].value.clone())))
                .collect();
            Value::Array(values?)
        }
        _ => return Err(InteractionError::Invalid("an input of another kind than Holdpoint made")),
    };
    Ok(Some(value))
}

impl ModalAnswer {
    /// The answer body for `question` (the one the modal was opened for), read back through the same layout the
    /// modal was built with: the menu's index among the quick answers, the question's own input, or each form
    /// field's input (those left empty are left out, and the server says which were required).
    pub fn answer_for(&self, question: &Question) -> Result<AnswerBody, InteractionError> {
        let kind = modal_kind(question).ok_or(InteractionError::Invalid("a question Slack cannot answer"))?;
        let input = |block: &str| self.inputs.get(block).unwrap_or(&ModalInput::Empty);
        let value = match kind {
            ModalKind::Quick => {
                let ModalInput::Chosen(chosen) = input(ANSWER_BLOCK) else {
                    return Err(InteractionError::Invalid("a modal submitted without an answer"));
                };
                let answers = slack_quick_answers(question);
                let index = index_of(chosen, answers.len())
                    .map_err(|_| InteractionError::Invalid("the chosen answer is not offered"))?;
                answers[index].value.clone()
            }
            ModalKind::Single => value_of(&question_def(question), input(ANSWER_BLOCK))?.unwrap_or(Value::Null),
            ModalKind::Form => {
                let mut object = serde_json::Map::new();
                for (i, field) in question.fields.iter().enumerate() {
                    if let Some(value) = value_of(&field_def(field), input(&field_block(i)))? {
                        object.insert(field.key.clone(), value);
                    }
                }
                Value::Object(object)
            }
        };
        Ok(AnswerBody { value, comment: self.comment.clone(), edited_arguments: None })
    }

    /// The input block a refusal that names no input is shown under: the answer's, else the first field's, else
    /// the comment's.
    fn first_block(&self) -> String {
        let first_field = self
            .inputs
            .keys()
            .filter_map(|block| block.strip_prefix("field:").and_then(|i| i.parse::<usize>().ok()))
            .min()
            .map(field_block);
        match (self.inputs.contains_key(ANSWER_BLOCK), first_field) {
            (true, _) => ANSWER_BLOCK.to_owned(),
            (false, Some(field)) => field,
            (false, None) => COMMENT_BLOCK.to_owned(),
        }
    }

    /// The reply that keeps the modal open and shows why it answered nothing (`response_action: errors`, keyed by
    /// block): each of the server's field errors (`value`, `value.<key>`, `value.<key>[row].<column>`, `comment`)
    /// under the input it is about, and the rest, or `message` when there is no field error, under the first input.
    pub fn errors(&self, question: Option<&Question>, fields: &[(String, String)], message: &str) -> Value {
        let first = self.first_block();
        let block_of = |path: &str| -> String {
            if path == "comment" {
                return COMMENT_BLOCK.to_owned();
            }
            if path == "value" && self.inputs.contains_key(ANSWER_BLOCK) {
                return ANSWER_BLOCK.to_owned();
            }
            let key = path.strip_prefix("value.").map(|rest| rest.split(['.', '[']).next().unwrap_or(rest));
            let index = key.and_then(|key| question?.fields.iter().position(|f| f.key == key));
            match index.map(field_block) {
                Some(block) if self.inputs.contains_key(&block) => block,
                _ => first.clone(),
            }
        };
        let mut errors: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
        for (path, problem) in fields {
            let block = block_of(path);
            // Under an input of its own, the problem speaks for itself; elsewhere it says what it is about.
            let own = block != first || path == "value" || path == "comment" || {
                let key = path.strip_prefix("value.").map(|rest| rest.split(['.', '[']).next().unwrap_or(rest));
                key.and_then(|key| question?.fields.iter().position(|f| f.key == key)).map(field_block)
                    == Some(first.clone())
            };
            let text = if own { problem.clone() } else { format!("{path}: {problem}") };
            errors.entry(block).and_modify(|e| e.push_str(&format!("; {text}"))).or_insert(text);
        }
        if errors.is_empty() {
            errors.insert(first, message.to_owned());
        }
        for text in errors.values_mut() {
            *text = truncate_chars(text, limits::ERROR_TEXT);
        }
        json!({"response_action": "errors", "errors": errors})
    }
}

/// An interaction body that is not what Slack sends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InteractionError {
    #[error("the body has no `payload` field")]
    NoPayload,
    #[error("the payload is not JSON of an interaction: {0}")]
    NotJson(String),
    #[error("the interaction is not one Holdpoint made: {0}")]
    Invalid(&'static str),
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: String,
    user: PayloadUser,
    #[serde(default)]
    trigger_id: Option<String>,
    #[serde(default)]
    actions: Vec<PayloadAction>,
    #[serde(default)]
    container: Option<PayloadContainer>,
    #[serde(default)]
    view: Option<PayloadView>,
}

#[derive(Deserialize)]
struct PayloadUser {
    id: String,
}

#[derive(Deserialize)]
struct PayloadAction {
    action_id: String,
    #[serde(default)]
    value: Option<String>,
}

#[derive(Deserialize)]
struct PayloadContainer {
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    message_ts: Option<String>,
}

#[derive(Deserialize)]
struct PayloadView {
    #[serde(default)]
    callback_id: Option<String>,
    #[serde(default)]
    private_metadata: Option<String>,
    state: PayloadState,
}

#[derive(Deserialize)]
struct PayloadState {
    values: std::collections::HashMap<String, std::collections::HashMap<String, StateValue>>,
}

#[derive(Deserialize)]
struct StateValue {
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    selected_option: Option<SelectedOption>,
    #[serde(default)]
    selected_options: Option<Vec<SelectedOption>>,
    #[serde(default)]
    selected_date: Option<String>,
    #[serde(default)]
    selected_time: Option<String>,
    #[serde(default)]
    selected_date_time: Option<i64>,
}

impl StateValue {
    fn input(&self) -> ModalInput {
        if let Some(secs) = self.selected_date_time {
            return ModalInput::DateTime(secs);
        }
        if let Some(date) = &self.selected_date {
            return ModalInput::Date(date.clone());
        }
        if let Some(time) = &self.selected_time {
            return ModalInput::Time(time.clone());
        }
        if let Some(options) = &self.selected_options {
            return match &options[..] {
                [] => ModalInput::Empty,
                chosen => ModalInput::ChosenMany(chosen.iter().map(|o| o.value.clone()).collect()),
            };
        }
        if let Some(option) = &self.selected_option {
            return ModalInput::Chosen(option.value.clone());
        }
        match &self.value {
            Some(text) if !text.trim().is_empty() => ModalInput::Text(text.clone()),
            _ => ModalInput::Empty,
        }
    }
}

#[derive(Deserialize)]
struct SelectedOption {
    value: String,
}

#[derive(Deserialize)]
struct ButtonValue {
    q: Uuid,
    #[serde(default)]
    v: Option<Value>,
}

/// Reads an interaction request's body (`application/x-www-form-urlencoded` with the JSON in `payload`). Call it
/// only after [`verify_request`] accepted the request.
pub fn parse_interaction(body: &[u8]) -> Result<Interaction, InteractionError> {
    let payload = url::form_urlencoded::parse(body)
        .find(|(key, _)| key == "payload")
        .map(|(_, value)| value.into_owned())
        .ok_or(InteractionError::NoPayload)?;
    let payload: Payload = serde_json::from_str(&payload).map_err(|e| InteractionError::NotJson(e.to_string()))?;
    let user_id = payload.user.id;
    match payload.kind.as_str() {
        "block_actions" => {
            let Some(action) = payload.actions.into_iter().next() else {
                return Err(InteractionError::Invalid("block_actions without an action"));
            };
            let button = || -> Result<ButtonValue, InteractionError> {
                let value = action.value.as_deref().ok_or(InteractionError::Invalid("a button without a value"))?;
                serde_json::from_str(value)
                    .map_err(|_| InteractionError::Invalid("a button value Holdpoint did not make"))
            };
            if action.action_id == MODAL_ACTION {
                let trigger_id = payload.trigger_id.ok_or(InteractionError::Invalid("a click without trigger_id"))?;
                return Ok(Interaction::OpenModal { user_id, question_id: button()?.q, trigger_id });
            }
            if action.action_id.starts_with("answer:") {
                let ButtonValue { q, v } = button()?;
                let value = v.ok_or(InteractionError::Invalid("an answer button without a value"))?;
                let message = payload.container.and_then(|c| match (c.channel_id, c.message_ts) {
                    (Some(channel), Some(ts)) => Some(MessageRef { channel, ts }),
                    _ => None,
                });
                return Ok(Interaction::Answer { user_id, question_id: q, value, message });
            }
            Ok(Interaction::Ignored { kind: format!("block_actions {}", action.action_id) })
        }
        "view_submission" => {
            let view = payload.view.ok_or(InteractionError::Invalid("view_submission without a view"))?;
            if view.callback_id.as_deref() != Some(MODAL_CALLBACK) {
                return Ok(Interaction::Ignored { kind: "view_submission of another view".into() });
            }
            let metadata = view.private_metadata.as_deref().unwrap_or_default();
            let ButtonValue { q, .. } = serde_json::from_str(metadata)
                .map_err(|_| InteractionError::Invalid("a modal whose metadata Holdpoint did not write"))?;
            let field = |block: &str| view.state.values.get(block).and_then(|actions| actions.get("value"));
            let comment = field(COMMENT_BLOCK).and_then(|f| f.value.clone()).filter(|c| !c.trim().is_empty());
            let inputs = view
                .state
                .values
                .iter()
                .filter(|(block, _)| block.as_str() != COMMENT_BLOCK)
                .filter_map(|(block, actions)| Some((block.clone(), actions.get("value")?.input())))
                .collect();
            let answer = ModalAnswer { inputs, comment };
            Ok(Interaction::Submit { user_id, question_id: q, answer })
        }
        other => Ok(Interaction::Ignored { kind: other.to_owned() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_questions::*;

    /// The example of Slack's "Verifying requests from Slack": its signing secret, timestamp, body and signature.
    const DOC_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const DOC_TIMESTAMP: &str = "1531420618";
    const DOC_BODY: &str = concat!(
        "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V",
        "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=",
        "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN",
        "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    );
    const DOC_SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    #[test]
    fn slacks_documented_example_request_verifies() {
        let now = 1_531_420_618 + 30;
        assert_eq!(
            verify_signature(DOC_SECRET, Some(DOC_TIMESTAMP), Some(DOC_SIGNATURE), DOC_BODY.as_bytes(), now),
            Ok(())
        );
    }

    #[test]
    fn a_changed_body_secret_or_signature_does_not_verify() {
        let now = 1_531_420_618;
        let verify = |secret: &str, body: &str, signature: &str| {
            verify_signature(secret, Some(DOC_TIMESTAMP), Some(signature), body.as_bytes(), now)
        };
        let mismatch = Err(SignatureError::Mismatch);
        assert_eq!(verify(DOC_SECRET, &DOC_BODY.replace("roadrunner", "coyote"), DOC_SIGNATURE), mismatch);
        assert_eq!(verify("another-secret", DOC_BODY, DOC_SIGNATURE), mismatch);
        assert_eq!(verify(DOC_SECRET, DOC_BODY, &DOC_SIGNATURE.replace("v0=a2", "v0=b2")), mismatch);
        assert_eq!(verify(DOC_SECRET, DOC_BODY, DOC_SIGNATURE.trim_start_matches("v0=")), mismatch);
        assert_eq!(verify(DOC_SECRET, DOC_BODY, "v0=not-hex"), mismatch);
        // The timestamp is signed too: the same signature with another timestamp does not verify.
        assert_eq!(
            verify_signature(DOC_SECRET, Some("1531420619"), Some(DOC_SIGNATURE), DOC_BODY.as_bytes(), now),
            mismatch
        );
    }

    #[test]
    fn a_timestamp_more_than_five_minutes_away_is_refused_even_when_signed() {
        let sent = 1_531_420_618;
        let verify =
            |now: i64| verify_signature(DOC_SECRET, Some(DOC_TIMESTAMP), Some(DOC_SIGNATURE), DOC_BODY.as_bytes(), now);
        assert_eq!(verify(sent + 300), Ok(()));
        assert_eq!(verify(sent + 301), Err(SignatureError::Stale { age_seconds: 301 }));
        assert_eq!(verify(sent - 301), Err(SignatureError::Stale { age_seconds: 301 }));
    }

    #[test]
    fn missing_headers_and_bad_timestamps_are_refused() {
        let body = DOC_BODY.as_bytes();
        assert_eq!(
            verify_signature(DOC_SECRET, None, Some(DOC_SIGNATURE), body, 0),
            Err(SignatureError::Missing("X-Slack-Request-Timestamp"))
        );
        assert_eq!(
            verify_signature(DOC_SECRET, Some(DOC_TIMESTAMP), None, body, 0),
            Err(SignatureError::Missing("X-Slack-Signature"))
        );
        assert_eq!(
            verify_signature(DOC_SECRET, Some("yesterday"), Some(DOC_SIGNATURE), body, 0),
            Err(SignatureError::BadTimestamp)
        );
    }

    #[test]
    fn headers_are_read_whatever_their_case() {
        let mut headers = http::HeaderMap::new();
        headers.insert("X-Slack-Request-Timestamp", DOC_TIMESTAMP.parse().unwrap());
        headers.insert("x-slack-signature", DOC_SIGNATURE.parse().unwrap());
        assert_eq!(verify_request(DOC_SECRET, &headers, DOC_BODY.as_bytes(), 1_531_420_618), Ok(()));
    }

    fn form(payload: &Value) -> Vec<u8> {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish()
            .into_bytes()
    }

    /// A `block_actions` payload as Slack sends it for a click on `button` of a message.
    fn click(button: &Value) -> Value {
        json!({
            "type": "block_actions",
            "user": {"id": "U0123ABCD", "username": "alice", "name": "alice", "team_id": "T0001"},
            "api_app_id": "A0001",
            "token": "legacy-verification-token",
            "container": {"type": "message", "message_ts": "1700000000.000100", "channel_id": "D0001",
                          "is_ephemeral": false},
            "trigger_id": "123.456.abc",
            "team": {"id": "T0001", "domain": "example"},
            "channel": {"id": "D0001", "name": "directmessage"},
            "response_url": "https://hooks.slack.com/actions/T0001/1/abc",
            "actions": [{
                "type": "button", "block_id": "q:x", "action_id": button["action_id"], "value": button["value"],
                "text": button["text"], "action_ts": "1700000001.000200"
            }]
        })
    }

    fn actions_of(message: &SlackMessage) -> Vec<Value> {
        let actions = message.blocks.iter().find(|b| b["type"] == "actions").expect("an actions block");
        actions["elements"].as_array().unwrap().clone()
    }

    #[test]
    fn an_approval_message_has_approve_reject_comment_and_open_buttons() {
        let question = approval();
        let message = question_message(&question, "https://hp.example.com/questions/1");
        assert_eq!(message.blocks[0]["type"], "header");
        assert_eq!(message.blocks[0]["text"]["text"], "Run <rm -rf /tmp/build> & clean?");
        let all = serde_json::to_string(&message.blocks).unwrap();
        assert!(all.contains("Tool `shell` with the arguments:"), "{all}");
        assert!(all.contains("echo '&lt;done&gt;'"), "mrkdwn escapes the arguments: {all}");
        let buttons = actions_of(&message);
        let labels: Vec<&str> = buttons.iter().map(|b| b["text"]["text"].as_str().unwrap()).collect();
        assert_eq!(labels, ["Approve", "Reject", "With a comment…", "Open in Holdpoint"]);
        assert_eq!(buttons[0]["style"], "primary");
        assert_eq!(buttons[1]["style"], "danger");
        assert_eq!(buttons[3]["url"], "https://hp.example.com/questions/1");
        assert_eq!(message.text, "[HIGH] Approval: Run <rm -rf /tmp/build> & clean?");
    }

    #[test]
    fn a_click_on_a_button_reads_back_as_the_answer_it_carries() {
        let question = choice(3);
        let message = question_message(&question, "https://hp.example.com/questions/1");
        let buttons = actions_of(&message);
        let interaction = parse_interaction(&form(&click(&buttons[1]))).unwrap();
        assert_eq!(
            interaction,
            Interaction::Answer {
                user_id: "U0123ABCD".into(),
                question_id: question.id,
                value: json!("region-1"),
                message: Some(MessageRef { channel: "D0001".into(), ts: "1700000000.000100".into() }),
            }
        );
    }

    #[test]
    fn the_answer_button_opens_the_modal_and_its_submission_reads_back() {
        let question = text();
        let message = question_message(&question, "https://hp.example.com/questions/1");
        let buttons = actions_of(&message);
        assert_eq!(buttons[0]["text"]["text"], "Answer…");
        assert_eq!(
            parse_interaction(&form(&click(&buttons[0]))).unwrap(),
            Interaction::OpenModal {
                user_id: "U0123ABCD".into(),
                question_id: question.id,
                trigger_id: "123.456.abc".into()
            }
        );
        let modal = answer_modal(&question, "https://hp.example.com/questions/1");
        let submission = json!({
            "type": "view_submission",
            "team": {"id": "T0001", "domain": "example"},
            "user": {"id": "U0123ABCD", "username": "alice", "name": "alice", "team_id": "T0001"},
            "api_app_id": "A0001",
            "trigger_id": "789.012.def",
            "view": {
                "id": "V0001", "type": "modal", "callback_id": modal["callback_id"],
                "private_metadata": modal["private_metadata"], "hash": "1700000002.abc",
                "state": {"values": {
                    "answer": {"value": {"type": "plain_text_input", "value": "Comet"}},
                    "comment": {"value": {"type": "plain_text_input", "value": null}}
                }}
            }
        });
        let Interaction::Submit { user_id, question_id, answer } = parse_interaction(&form(&submission)).unwrap()
        else {
            panic!("not a submission");
        };
        assert_eq!((user_id.as_str(), question_id), ("U0123ABCD", question.id));
        assert_eq!(answer.inputs[ANSWER_BLOCK], ModalInput::Text("Comet".into()));
        assert_eq!(answer.comment, None);
        assert_eq!(answer.answer_for(&question).unwrap().value, json!("Comet"));
    }

    #[test]
    fn a_modal_choice_with_a_comment_answers_with_that_quick_answer() {
        let question = approval();
        let modal = answer_modal(&question, "https://hp.example.com/questions/1");
        let options = modal["blocks"][1]["element"]["options"].as_array().unwrap();
        assert_eq!(options[1]["text"]["text"], "Reject");
        let chosen = |index: &str, comment: Option<&str>| ModalAnswer {
            inputs: [(ANSWER_BLOCK.to_owned(), ModalInput::Chosen(index.into()))].into(),
            comment: comment.map(str::to_owned),
        };
        let body = chosen("1", Some("not on a Friday")).answer_for(&question).unwrap();
        assert_eq!((body.value, body.comment.as_deref()), (json!(false), Some("not on a Friday")));
        assert!(chosen("2", None).answer_for(&question).is_err());
    }

    /// The input block of `modal` with `block_id`.
    fn block<'a>(modal: &'a Value, block_id: &str) -> &'a Value {
        modal["blocks"].as_array().unwrap().iter().find(|b| b["block_id"] == block_id).unwrap()
    }

    /// A view submission of `modal` whose state holds `values` (block id to the element's state).
    fn submitted(modal: &Value, values: Value) -> ModalAnswer {
        let submission = json!({
            "type": "view_submission", "user": {"id": "U0123ABCD"}, "trigger_id": "789.012.def",
            "view": {"id": "V0001", "type": "modal", "callback_id": modal["callback_id"],
                     "private_metadata": modal["private_metadata"], "state": {"values": values}}
        });
        match parse_interaction(&form(&submission)).unwrap() {
            Interaction::Submit { answer, .. } => answer,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_form_opens_a_modal_of_block_kit_inputs_and_leaves_files_and_tables_to_holdpoint() {
        let question = rich_form();
        let message = question_message(&question, "https://hp.example.com/questions/7");
        let asked = message.blocks.iter().filter_map(|b| b["text"]["text"].as_str()).find(|t| t.starts_with("*What"));
        assert!(
            asked
                .unwrap()
                .starts_with("*What is asked*\n- Nodes (required): a whole number from 1 to 9, in steps of 2"),
            "{:?}",
            message.blocks
        );
        let buttons = actions_of(&message);
        let labels: Vec<&str> = buttons.iter().map(|b| b["text"]["text"].as_str().unwrap()).collect();
        assert_eq!(labels, ["Answer…", "Open in Holdpoint"]);

        let modal = answer_modal(&question, "https://hp.example.com/questions/7");
        let nodes = block(&modal, "field:0");
        assert_eq!(nodes["label"]["text"], "Nodes");
        assert_eq!(nodes["optional"], false);
        assert_eq!(nodes["hint"]["text"], "Worker nodes · In steps of 2.");
        assert_eq!(
            nodes["element"],
            json!({"type": "number_input", "action_id": "value", "is_decimal_allowed": false,
                   "min_value": "1", "max_value": "9", "initial_value": "3"})
        );
        assert_eq!(block(&modal, "field:1")["element"]["type"], "datepicker");
        let budget = &block(&modal, "field:2")["element"];
        assert_eq!(
            (budget["type"].as_str(), budget["is_decimal_allowed"].as_bool()),
            (Some("number_input"), Some(true))
        );
        let stars = &block(&modal, "field:3")["element"];
        assert_eq!((stars["type"].as_str(), stars["options"].as_array().unwrap().len()), (Some("static_select"), 10));
        let regions = &block(&modal, "field:4")["element"];
        assert_eq!(
            (regions["type"].as_str(), regions["max_selected_items"].as_u64()),
            (Some("multi_static_select"), Some(1))
        );
        let ids: Vec<&str> =
            modal["blocks"].as_array().unwrap().iter().filter_map(|b| b["block_id"].as_str()).collect();
        assert_eq!(
            ids,
            ["field:0", "field:1", "field:2", "field:3", "field:4", "comment"],
            "no input for the table or the file"
        );
        let note = modal["blocks"].as_array().unwrap().iter().rev().nth(1).unwrap()["text"]["text"].as_str().unwrap();
        assert!(
            note.contains("*Disks*")
                && note.contains("*Plan*")
                && note.contains("<https://hp.example.com/questions/7|answer in Holdpoint>"),
            "{note}"
        );

        // Slack's state comes back as the form's answer: numbers, dates, stars, choices; empty inputs left out.
        let answer = submitted(
            &modal,
            json!({
                "field:0": {"value": {"type": "number_input", "value": "5"}},
                "field:1": {"value": {"type": "datepicker", "selected_date": "2026-03-01"}},
                "field:2": {"value": {"type": "number_input", "value": null}},
                "field:3": {"value": {"type": "static_select", "selected_option": {"text": {"type": "plain_text", "text": "★★★★ 4"}, "value": "4"}}},
                "field:4": {"value": {"type": "multi_static_select", "selected_options": [{"text": {"type": "plain_text", "text": "US"}, "value": "1"}]}},
                "comment": {"value": {"type": "plain_text_input", "value": "sized"}}
            }),
        );
        let body = answer.answer_for(&question).unwrap();
        assert_eq!(body.value, json!({"nodes": 5, "start": "2026-03-01", "stars": 4, "regions": ["us"]}));
        assert_eq!(body.comment.as_deref(), Some("sized"));

        // The server's field errors land under their inputs; the rest under the first one.
        let fields = [
            ("value.nodes".to_owned(), "must be at most 9".to_owned()),
            ("value.disks[0].size".to_owned(), "is required".to_owned()),
            ("comment".to_owned(), "too long".to_owned()),
        ];
        let errors = answer.errors(Some(&question), &fields, "Holdpoint refused this answer");
        assert_eq!(
            errors,
            json!({"response_action": "errors", "errors": {
                "field:0": "must be at most 9; value.disks[0].size: is required", "comment": "too long"}})
        );
        assert_eq!(
            answer.errors(None, &[], "not linked")["errors"],
            json!({"field:0": "not linked"}),
            "without the question, under the first input"
        );
    }

    #[test]
    fn a_required_file_or_a_table_is_answered_in_holdpoint_with_a_link() {
        let mut question = rich_form();
        question.fields.last_mut().unwrap().required = true;
        let message = question_message(&question, "https://hp.example.com/questions/7");
        let buttons = actions_of(&message);
        let labels: Vec<&str> = buttons.iter().map(|b| b["text"]["text"].as_str().unwrap()).collect();
        assert_eq!(labels, ["Answer in Holdpoint"]);
        let modal = answer_modal(&question, "https://hp.example.com/questions/7");
        assert!(modal["submit"].is_null(), "{modal}");
        assert!(modal.to_string().contains("<https://hp.example.com/questions/7|Answer in Holdpoint>"), "{modal}");
    }

    #[test]
    fn single_values_have_the_input_of_their_type_and_read_back_as_it() {
        let open = "https://hp.example.com/q";
        let of = |response_type: ResponseType, rules: Value| Question {
            response_type,
            rules: serde_json::from_value(rules).unwrap(),
            ..text()
        };
        let cases = [
            (
                of(ResponseType::Datetime, json!({})),
                "datetimepicker",
                json!({"type": "datetimepicker", "selected_date_time": 1_772_353_800}),
                json!("2026-03-01T08:30:00Z"),
            ),
            (
                of(ResponseType::Time, json!({})),
                "timepicker",
                json!({"type": "timepicker", "selected_time": "09:30"}),
                json!("09:30"),
            ),
            (
                of(ResponseType::Email, json!({})),
                "email_text_input",
                json!({"type": "email_text_input", "value": "ops@example.com"}),
                json!("ops@example.com"),
            ),
            (
                of(ResponseType::Url, json!({})),
                "url_text_input",
                json!({"type": "url_text_input", "value": "https://example.com"}),
                json!("https://example.com"),
            ),
            (
                of(ResponseType::Markdown, json!({})),
                "plain_text_input",
                json!({"type": "plain_text_input", "value": "# Plan"}),
                json!("# Plan"),
            ),
            (
                of(ResponseType::Number, json!({"min": 0.5})),
                "number_input",
                json!({"type": "number_input", "value": "2.75"}),
                json!(2.75),
            ),
            (
                of(ResponseType::Rating, json!({"max": 3})),
                "static_select",
                json!({"type": "static_select", "selected_option": {"value": "3"}}),
                json!(3),
            ),
            (
                Question { response_type: ResponseType::ErrorRecovery, ..choice(2) },
                "static_select",
                json!({"type": "static_select", "selected_option": {"value": "4"}}),
                json!("region-1"),
            ),
        ];
        for (question, element, state, value) in cases {
            let modal = answer_modal(&question, open);
            assert_eq!(block(&modal, "answer")["element"]["type"], element, "{}", question.response_type);
            let answer = submitted(&modal, json!({"answer": {"value": state}}));
            assert_eq!(answer.answer_for(&question).unwrap().value, value, "{}", question.response_type);
        }
        let markdown = answer_modal(&of(ResponseType::Markdown, json!({})), open);
        assert_eq!(block(&markdown, "answer")["element"]["multiline"], true);
        let table = of(ResponseType::Table, json!({"columns": [{"key": "a", "label": "A", "response_type": "text"}]}));
        assert!(!has_modal(&table));
        let labels: Vec<String> = actions_of(&question_message(&table, open))
            .iter()
            .map(|b| b["text"]["text"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(labels, ["Answer in Holdpoint"]);
    }

    #[test]
    fn clicks_holdpoint_does_not_handle_are_ignored_and_garbage_is_refused() {
        let message = question_message(&approval(), "https://hp.example.com/questions/1");
        let open = actions_of(&message).pop().unwrap();
        assert!(matches!(parse_interaction(&form(&click(&open))).unwrap(), Interaction::Ignored { .. }));
        assert!(matches!(
            parse_interaction(&form(&json!({"type": "view_closed", "user": {"id": "U1"}}))).unwrap(),
            Interaction::Ignored { .. }
        ));
        assert_eq!(parse_interaction(b"token=abc"), Err(InteractionError::NoPayload));
        assert!(matches!(parse_interaction(b"payload=%7Bnot-json"), Err(InteractionError::NotJson(_))));
        let forged = json!({"action_id": "answer:0", "value": "{\"q\":\"not-a-uuid\",\"v\":true}",
                            "text": {"type": "plain_text", "text": "x"}});
        assert!(matches!(parse_interaction(&form(&click(&forged))), Err(InteractionError::Invalid(_))));
    }

    #[test]
    fn the_resolved_message_says_who_answered_what_and_has_no_buttons() {
        let question = Question {
            status: QuestionStatus::Answered,
            answered_by: Some("alice".into()),
            response: Some(AnswerBody { value: json!(false), comment: None, edited_arguments: None }),
            ..approval()
        };
        let message = resolved_message(&question, "https://hp.example.com/questions/1");
        assert!(message.blocks.iter().all(|b| b["type"] != "actions"));
        let last = message.blocks.last().unwrap()["text"]["text"].as_str().unwrap();
        assert_eq!(
            last,
            ":white_check_mark: Answered by alice: *Rejected*\n<https://hp.example.com/questions/1|Open in Holdpoint>"
        );
        let picked = Question {
            status: QuestionStatus::Answered,
            answered_by: Some("bob".into()),
            response: Some(AnswerBody { value: json!("region-2"), comment: None, edited_arguments: None }),
            ..choice(3)
        };
        let last = resolved_message(&picked, "u").blocks.last().unwrap()["text"]["text"].clone();
        assert!(last.as_str().unwrap().starts_with(":white_check_mark: Answered by bob: *Region &lt;2&gt;*"), "{last}");
    }

    #[test]
    fn long_text_is_cut_to_block_kits_limits() {
        let question = Question {
            title: "t".repeat(400),
            body: "b".repeat(5000),
            action: Some(holdpoint_types::ApprovalAction {
                tool_name: "shell".into(),
                arguments: json!({"command": "x".repeat(5000)}),
            }),
            ..approval()
        };
        let message = question_message(&question, "https://hp.example.com/questions/1");
        assert_eq!(message.blocks[0]["text"]["text"].as_str().unwrap().chars().count(), 150);
        for block in message.blocks.iter().filter(|b| b["type"] == "section") {
            let text = block["text"]["text"].as_str().unwrap();
            assert!(text.chars().count() <= 3000, "{}", text.len());
        }
        let arguments =
            message.blocks.iter().find(|b| b["text"]["text"].as_str().is_some_and(|t| t.starts_with("Tool")));
        assert!(arguments.unwrap()["text"]["text"].as_str().unwrap().ends_with("…\n```"));
    }

    #[test]
    fn a_message_reference_round_trips_through_its_stored_form() {
        let at = MessageRef { channel: "D0001".into(), ts: "1700000000.000100".into() };
        assert_eq!(MessageRef::from_reference(&at.to_reference()), Some(at));
        assert_eq!(MessageRef::from_reference("no-separator"), None);
    }

    #[test]
    fn api_errors_are_sorted_into_retryable_and_permanent() {
        let api = |error: &str| SlackError::Api { error: error.into(), retry_after: None };
        assert!(matches!(api("ratelimited").outcome(), DeliveryOutcome::Retry { .. }));
        assert!(matches!(api("internal_error").outcome(), DeliveryOutcome::Retry { .. }));
        for permanent in ["channel_not_found", "invalid_auth", "token_revoked", "invalid_blocks", "missing_scope"] {
            assert!(matches!(api(permanent).outcome(), DeliveryOutcome::Failed { .. }), "{permanent}");
        }
        assert!(matches!(SlackError::Status { status: 503 }.outcome(), DeliveryOutcome::Retry { .. }));
        assert!(matches!(SlackError::Status { status: 404 }.outcome(), DeliveryOutcome::Failed { .. }));
        assert!(matches!(SlackError::Network("reset".into()).outcome(), DeliveryOutcome::Retry { .. }));
    }
}
