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
    ResponseType, answer_in_words,
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

mod api;
mod interactions;
mod message;
mod modal;
#[cfg(test)]
mod tests;

pub use api::*;
pub use interactions::*;
pub use message::*;
pub use modal::*;

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
