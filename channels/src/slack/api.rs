//! The Web API calls that post and update messages and open views, and how their failures sort.

use super::*;

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
pub(super) const TRANSIENT_API_ERRORS: [&str; 5] =
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
pub(super) struct ApiReply {
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
