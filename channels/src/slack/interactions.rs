//! What Slack's interactivity sends back: the request's signature, and the interaction its body carries.

use super::*;

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
pub(super) struct Payload {
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
pub(super) struct PayloadUser {
    id: String,
}

#[derive(Deserialize)]
pub(super) struct PayloadAction {
    action_id: String,
    #[serde(default)]
    value: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct PayloadContainer {
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    message_ts: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct PayloadView {
    #[serde(default)]
    callback_id: Option<String>,
    #[serde(default)]
    private_metadata: Option<String>,
    state: PayloadState,
}

#[derive(Deserialize)]
pub(super) struct PayloadState {
    values: std::collections::HashMap<String, std::collections::HashMap<String, StateValue>>,
}

#[derive(Deserialize)]
pub(super) struct StateValue {
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
pub(super) struct SelectedOption {
    value: String,
}

#[derive(Deserialize)]
pub(super) struct ButtonValue {
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
