//! Models: what turns a conversation into the next assistant message.
//!
//! Both kinds take the same request, the Chat Completions JSON (`model`, `messages`, `tools`) built from the stored
//! messages, and answer with one assistant message in the same format, which is stored as it is. So the request
//! after a resume is byte for byte the one the model would have seen without the pause.
//!
//! A provider's outage (a network error, a timeout, 408, 429, 5xx) is not the run's failure: the call is retried
//! for up to `HOLDPOINT_MODEL_RETRY_SECONDS`, then reported as [`ModelError::Unavailable`], on which the executor
//! pauses the run so that a resume retries the same call. Any other refusal (401, 400, ...) will not mend by
//! itself and fails the run at once.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use holdpoint_types::{AgentSpec, ModelSettings};
use rand::Rng;
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::settings::{RuntimeConfig, normalize_base_url};
use crate::egress::{EgressError, EgressPolicy, GuardedClient};
use crate::metrics::Metrics;

/// Why a model could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model {0:?} is not supported: use openai:<model> or script:<file>")]
    Unsupported(String),
    #[error("the script {path} cannot be used: {reason}")]
    Script { path: String, reason: String },
    #[error("the model provider failed: {0}")]
    Provider(String),
    /// An outage that outlasted the retry window: the run pauses, and a resume retries the call.
    #[error("the model provider is unavailable: {0}")]
    Unavailable(String),
    #[error("the model's answer is not a chat message: {0}")]
    BadAnswer(String),
}

/// A Chat Completions request, borrowing the stored messages: each model turn of a long run sends its whole
/// conversation, which is serialised straight from the rows as they were read instead of copied first.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: Vec<&'a Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
}

/// A model an agent talks to.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The next assistant message for `request`.
    async fn complete(&self, request: &ChatRequest<'_>) -> Result<Value, ModelError>;
}

/// The model named by an agent's `model` (`provider:name`).
pub fn model_for(
    spec: &AgentSpec,
    config: &RuntimeConfig,
    scripts_dir: &Path,
    metrics: Arc<Metrics>,
) -> Result<Arc<dyn ChatModel>, ModelError> {
    match spec.model.split_once(':') {
        Some(("openai", name)) if !name.is_empty() => Ok(Arc::new(OpenAiModel::new(spec, config, metrics)?)),
        Some(("script", file)) if !file.is_empty() => Ok(Arc::new(ScriptModel::load(scripts_dir, file)?)),
        _ => Err(ModelError::Unsupported(spec.model.clone())),
    }
}

/// The model name sent in requests: what follows the provider.
pub fn model_name(spec: &AgentSpec) -> &str {
    spec.model.split_once(':').map_or(spec.model.as_str(), |(_, name)| name)
}

/// An OpenAI-compatible Chat Completions API (OpenAI, Ollama, vLLM, llama.cpp server, ...).
pub struct OpenAiModel {
    client: async_openai::Client<OpenAIConfig>,
    /// For how long an outage is retried, from its first failed request.
    retry_window: Duration,
    /// Where its retries and the providers' token counts are counted.
    metrics: Arc<Metrics>,
}

/// Why an agent's model settings name an endpoint or key the operator did not allow: the field and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRefused {
    pub field: &'static str,
    pub reason: String,
}

/// The conventional variable of `OPENAI_BASE_URL`'s key.
pub const DEFAULT_KEY_VARIABLE: &str = "OPENAI_API_KEY";

/// The endpoint an agent's settings name and the key the server sends there.
///
/// An agent may only name an endpoint the operator allowed (`OPENAI_BASE_URL`, `HOLDPOINT_MODEL_ENDPOINTS`), and
/// its key is always that endpoint's own: `api_key_env` may only repeat the endpoint's variable. So no workspace
/// can point the server at a listener of its own, nor have it send any of the server's variables anywhere.
pub fn resolve_endpoint(settings: &ModelSettings, config: &RuntimeConfig) -> Result<(String, String), EndpointRefused> {
    let default_url = normalize_base_url(&config.openai_base_url);
    let requested = settings.base_url.as_deref().map_or_else(|| default_url.clone(), normalize_base_url);
    let (key_variable, key) = if requested == default_url {
        let key = config.openai_api_key.as_ref().map(|k| k.expose().to_owned()).unwrap_or_default();
        (Some(DEFAULT_KEY_VARIABLE.to_owned()), key)
    } else {
        let endpoint =
            config.model_endpoints.iter().find(|e| e.base_url == requested).ok_or_else(|| EndpointRefused {
                field: "model_settings.base_url",
                reason: format!(
                    "{requested:?} is not a model endpoint this server allows (OPENAI_BASE_URL or \
                     HOLDPOINT_MODEL_ENDPOINTS)"
                ),
            })?;
        let key = endpoint.api_key_env.as_deref().and_then(|v| std::env::var(v).ok()).unwrap_or_default();
        (endpoint.api_key_env.clone(), key)
    };
    if let Some(variable) = &settings.api_key_env
        && key_variable.as_deref() != Some(variable.as_str())
    {
        return Err(EndpointRefused {
            field: "model_settings.api_key_env",
            reason: match key_variable {
                Some(own) => format!("the key of {requested} is {own}; an agent cannot choose another variable"),
                None => format!("the server holds no key for {requested}"),
            },
        });
    }
    Ok((requested, key))
}

impl OpenAiModel {
    pub fn new(spec: &AgentSpec, config: &RuntimeConfig, metrics: Arc<Metrics>) -> Result<Self, ModelError> {
        // Checked again here, not only when the agent was saved: the operator may have narrowed the list since.
        let (base_url, api_key) = resolve_endpoint(&spec.model_settings, config)
            .map_err(|refused| ModelError::Provider(format!("{}: {}", refused.field, refused.reason)))?;
        // Through the outbound guard: the endpoint's own address when the operator wrote one, public addresses of a
        // name (any with HOLDPOINT_MODEL_ALLOW_PRIVATE), and no redirect, so a provider cannot send the request on.
        let http = EgressPolicy::new("HOLDPOINT_MODEL_ALLOW_PRIVATE", config.model_allow_private)
            .naming([base_url.as_str()])
            .client(
                reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .timeout(Duration::from_secs(config.model_timeout_seconds)),
            )
            .map_err(|e| ModelError::Provider(e.to_string()))?;
        // No retry layer: the retries are `complete`'s, which are timed by a window rather than counted, and which
        // a run's cancellation or lost lease interrupts (the executor drops the call).
        let service = tower::service_fn(move |factory: HttpRequestFactory| send(http.clone(), factory));
        let openai = OpenAIConfig::new().with_api_base(base_url).with_api_key(api_key);
        Ok(OpenAiModel {
            client: async_openai::Client::with_config(openai).with_http_service(service),
            retry_window: Duration::from_secs(config.model_retry_seconds),
            metrics,
        })
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    async fn complete(&self, request: &ChatRequest<'_>) -> Result<Value, ModelError> {
        let mut retries = Retries::new(self.retry_window, tokio::time::Instant::now());
        let response: Value = loop {
            let outage = match self.client.chat().create_byot(request).await {
                Ok(response) => break response,
                Err(error) => outage_of(error)?,
            };
            let Some(wait) = retries.next_wait(outage.retry_after, tokio::time::Instant::now()) else {
                return Err(ModelError::Unavailable(retries.gave_up(&outage, tokio::time::Instant::now())));
            };
            tracing::warn!(error = %outage.message, wait_ms = wait.as_millis(), "model call failed; retrying");
            self.metrics.model_retry(outage.reason);
            tokio::time::sleep(wait).await;
        };
        if let Some(usage) = response.get("usage") {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.metrics.model_tokens(count("prompt_tokens"), count("completion_tokens"));
        }
        let message = response
            .pointer("/choices/0/message")
            .ok_or_else(|| ModelError::BadAnswer(format!("no choices[0].message in {response}")))?;
        Ok(normalize_assistant_message(message))
    }
}

/// A model request that got no answer this time but may get one later: a network error, a timeout, 408, 429 or
/// 5xx. The HTTP service hands it to async-openai as a boxed error, so it reaches `complete` with the provider's
/// `Retry-After`, which async-openai's own errors do not carry.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct Outage {
    message: String,
    retry_after: Option<Duration>,
    /// The `reason` label of the retry it causes.
    reason: &'static str,
}

/// Whether a status is an outage: the request may succeed as it is later.
fn is_outage(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::REQUEST_TIMEOUT || status.is_server_error()
}

/// Sends one model request; an outage comes back as an [`Outage`].
async fn send(http: GuardedClient, factory: HttpRequestFactory) -> Result<reqwest::Response, OpenAIError> {
    let request = factory.build().await?;
    let response = match http.execute(request).await {
        Ok(response) => response,
        // Refused by the guard: no retry mends that.
        Err(EgressError::Refused(reason)) => return Err(OpenAIError::Boxed(reason.into())),
        Err(EgressError::Http(error)) => {
            let message = format!("the request did not get an answer: {}", crate::error::error_chain(&error));
            return Err(OpenAIError::Boxed(Box::new(Outage { message, retry_after: None, reason: "network" })));
        }
    };
    let status = response.status();
    if !is_outage(status) {
        return Ok(response);
    }
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, Utc::now()));
    let body = response.text().await.unwrap_or_default();
    let message = format!("it answered {status}: {}", error_detail(&body));
    let reason = if status == StatusCode::TOO_MANY_REQUESTS { "rate_limited" } else { "server_error" };
    Err(OpenAIError::Boxed(Box::new(Outage { message, retry_after, reason })))
}

/// What a failed model call came to: an outage to retry, or the error that fails the run.
fn outage_of(error: OpenAIError) -> Result<Outage, ModelError> {
    match error {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<Outage>() {
            Ok(outage) => Ok(*outage),
            Err(other) => Err(ModelError::Provider(other.to_string())),
        },
        // The answer's body was cut off or timed out while it was read: the connection failed, not the request.
        OpenAIError::Reqwest(error) => {
            let message = format!("the answer could not be read: {}", crate::error::error_chain(&error));
            Ok(Outage { message, retry_after: None, reason: "network" })
        }
        other => Err(ModelError::Provider(other.to_string())),
    }
}

/// The message of an error body (`{"error": {"message": ...}}`, as OpenAI-compatible APIs send), else the body
/// itself, clipped.
fn error_detail(body: &str) -> String {
    const MAX_CHARS: usize = 300;
    let parsed = serde_json::from_str::<Value>(body).ok();
    let text = parsed.as_ref().and_then(|v| v.pointer("/error/message").and_then(Value::as_str)).unwrap_or(body).trim();
    if text.is_empty() {
        return "(no message)".to_owned();
    }
    if text.chars().count() <= MAX_CHARS {
        return text.to_owned();
    }
    let mut clipped: String = text.chars().take(MAX_CHARS).collect();
    clipped.push('…');
    clipped
}

/// A `Retry-After` value: a number of seconds or an HTTP date (RFC 9110 §10.2.3), as a wait from `now`.
fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    // The IMF-fixdate senders must use is an RFC 2822 date.
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    Some((at.with_timezone(&Utc) - now).to_std().unwrap_or(Duration::ZERO))
}

/// The first wait between two attempts without a `Retry-After`; each further one doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts without a `Retry-After`: a provider that is back is soon seen back.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The retries of one model call: when the next attempt is, until the window is spent.
struct Retries {
    window: Duration,
    started: tokio::time::Instant,
    /// The failed attempts so far.
    failures: u32,
}

impl Retries {
    fn new(window: Duration, started: tokio::time::Instant) -> Self {
        Retries { window, started, failures: 0 }
    }

    /// How long to wait before the next attempt after a failure at `now`, or `None` when the window is spent or the
    /// provider asks to wait past it.
    ///
    /// Without a `Retry-After`, the wait grows exponentially with jitter (half of it random), so runs that met one
    /// outage together do not come back all at once. A `Retry-After` is waited as it says, but never less than the
    /// first backoff, so that `Retry-After: 0` makes no busy loop.
    fn next_wait(&mut self, retry_after: Option<Duration>, now: tokio::time::Instant) -> Option<Duration> {
        self.failures += 1;
        let remaining = (self.started + self.window).checked_duration_since(now).filter(|r| !r.is_zero())?;
        let wait = match retry_after {
            Some(asked) => asked.max(FIRST_BACKOFF),
            None => {
                let exponent = self.failures.saturating_sub(1).min(16);
                let backoff = FIRST_BACKOFF.saturating_mul(1 << exponent).min(MAX_BACKOFF);
                let half = backoff / 2;
                half + half.mul_f64(rand::rng().random_range(0.0..=1.0))
            }
        };
        // A last attempt at the window's end is worth making, unless the provider said it would still be down.
        match retry_after {
            Some(_) if wait > remaining => None,
            _ => Some(wait.min(remaining)),
        }
    }

    /// The error a run pauses with once the retries are over, after the last at `now`.
    fn gave_up(&self, last: &Outage, now: tokio::time::Instant) -> String {
        let (attempts, elapsed) = (self.failures, now.duration_since(self.started).as_secs());
        match last.retry_after {
            Some(asked) if now + asked > self.started + self.window => format!(
                "{last}; the provider asked to retry in {} s, past the {} s retry window ({attempts} attempts)",
                asked.as_secs(),
                self.window.as_secs()
            ),
            _ => format!("{last}; retried for {elapsed} s ({attempts} attempts)"),
        }
    }
}

/// Keeps what the conversation needs of an assistant message (`content`, `tool_calls`), in one form, so that
/// providers' extra fields (`refusal`, `annotations`, ...) are not sent back to providers that refuse them.
fn normalize_assistant_message(message: &Value) -> Value {
    let mut out = json!({ "role": "assistant", "content": message.get("content").cloned().unwrap_or(Value::Null) });
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
        let calls: Vec<Value> = calls
            .iter()
            .map(|call| {
                let arguments = match call.pointer("/function/arguments") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => "{}".to_owned(),
                };
                json!({
                    "id": call.get("id").cloned().unwrap_or(Value::Null),
                    "type": "function",
                    "function": {
                        "name": call.pointer("/function/name").cloned().unwrap_or(Value::Null),
                        "arguments": arguments,
                    },
                })
            })
            .collect();
        out["tool_calls"] = Value::Array(calls);
    }
    out
}

/// One scripted model turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// The call id; `call_<turn>_<n>` when left out.
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    json!({})
}

/// A `script:<file>` model: turn *n* of the file answers the conversation's *n*-th model call, whatever the
/// conversation says. For demos and deterministic tests; labelled as scripted wherever a run shows.
pub struct ScriptModel {
    turns: Vec<ScriptTurn>,
}

impl ScriptModel {
    /// Reads a JSON (`.json`) or YAML (other names) list of turns from `dir`; the name may not leave `dir`.
    pub fn load(dir: &Path, file: &str) -> Result<Self, ModelError> {
        let path = script_path(dir, file)?;
        let error = |reason: String| ModelError::Script { path: file.to_owned(), reason };
        let text = std::fs::read_to_string(&path).map_err(|e| error(e.to_string()))?;
        Self::parse(file, &text)
    }

    pub fn parse(file: &str, text: &str) -> Result<Self, ModelError> {
        let error = |reason: String| ModelError::Script { path: file.to_owned(), reason };
        let turns: Vec<ScriptTurn> = if file.ends_with(".json") {
            serde_json::from_str(text).map_err(|e| error(e.to_string()))?
        } else {
            serde_norway::from_str(text).map_err(|e| error(e.to_string()))?
        };
        Ok(ScriptModel { turns })
    }

    /// The assistant message of turn `index` (from 0).
    pub fn turn(&self, index: usize) -> Value {
        let Some(turn) = self.turns.get(index) else {
            return json!({ "role": "assistant", "content": "(The script has no more turns.)" });
        };
        let mut message = json!({ "role": "assistant", "content": turn.content });
        if !turn.tool_calls.is_empty() {
            let calls: Vec<Value> = turn
                .tool_calls
                .iter()
                .enumerate()
                .map(|(n, call)| {
                    json!({
                        "id": call.id.clone().unwrap_or_else(|| format!("call_{}_{}", index + 1, n + 1)),
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments.to_string() },
                    })
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        message
    }
}

#[async_trait]
impl ChatModel for ScriptModel {
    async fn complete(&self, request: &ChatRequest<'_>) -> Result<Value, ModelError> {
        let answered = request.messages.iter().filter(|m| m["role"] == "assistant").count();
        Ok(self.turn(answered))
    }
}

/// `file` under `dir`, refusing absolute paths and `..`.
pub fn script_path(dir: &Path, file: &str) -> Result<PathBuf, ModelError> {
    let relative = Path::new(file);
    if relative.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(ModelError::Script {
            path: file.to_owned(),
            reason: "a script is named relative to the scripts directory, without `..`".into(),
        });
    }
    Ok(dir.join(relative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_answers_the_nth_model_call_with_its_nth_turn() {
        let script = ScriptModel::parse(
            "t.yaml",
            "- content: thinking\n  tool_calls:\n    - name: shell\n      arguments: {command: ls}\n- content: done\n",
        )
        .unwrap();
        let first = script.turn(0);
        assert_eq!(first["tool_calls"][0]["id"], "call_1_1");
        assert_eq!(first["tool_calls"][0]["function"]["arguments"], r#"{"command":"ls"}"#);
        assert_eq!(script.turn(1)["content"], "done");
        assert!(script.turn(1).get("tool_calls").is_none());
        assert!(script.turn(5)["content"].as_str().unwrap().contains("no more turns"));
    }

    #[test]
    fn script_names_may_not_leave_the_scripts_directory() {
        let dir = Path::new("/srv/scripts");
        assert!(script_path(dir, "../etc/passwd").is_err());
        assert!(script_path(dir, "/etc/passwd").is_err());
        assert_eq!(script_path(dir, "demo/release.yaml").unwrap(), dir.join("demo/release.yaml"));
    }

    fn config_with(endpoints: &str) -> RuntimeConfig {
        let mut config = RuntimeConfig::defaults();
        config.openai_base_url = "https://api.openai.com/v1/".into();
        config.openai_api_key = Some("sk-server".parse().unwrap());
        config.model_endpoints = endpoints.split(',').filter(|e| !e.is_empty()).map(|e| e.parse().unwrap()).collect();
        config
    }

    fn settings(base_url: Option<&str>, api_key_env: Option<&str>) -> ModelSettings {
        ModelSettings { base_url: base_url.map(Into::into), api_key_env: api_key_env.map(Into::into) }
    }

    #[test]
    fn the_servers_key_goes_to_the_default_endpoint_only() {
        let config = config_with("http://127.0.0.1:11434/v1");
        let default = resolve_endpoint(&settings(None, None), &config).unwrap();
        assert_eq!(default, ("https://api.openai.com/v1".to_owned(), "sk-server".to_owned()));
        let named = resolve_endpoint(&settings(Some("https://api.openai.com/v1"), Some("OPENAI_API_KEY")), &config);
        assert_eq!(named.unwrap().1, "sk-server", "a trailing slash makes no other endpoint");
        let local = resolve_endpoint(&settings(Some("http://127.0.0.1:11434/v1/"), None), &config).unwrap();
        assert_eq!(local, ("http://127.0.0.1:11434/v1".to_owned(), String::new()), "no key of the server's");
        let refused = resolve_endpoint(&settings(Some("http://127.0.0.1:11434/v1"), Some("OPENAI_API_KEY")), &config);
        assert_eq!(refused.unwrap_err().field, "model_settings.api_key_env");
    }

    #[test]
    fn endpoints_and_variables_the_operator_did_not_name_are_refused() {
        let config = config_with("https://models.example/v1=EXAMPLE_KEY");
        let elsewhere = resolve_endpoint(&settings(Some("https://attacker.example/v1"), None), &config);
        assert_eq!(elsewhere.unwrap_err().field, "model_settings.base_url");
        for variable in ["HOLDPOINT_BOOTSTRAP_TOKEN", "DATABASE_URL", "EXAMPLE_KEY"] {
            let refused = resolve_endpoint(&settings(None, Some(variable)), &config);
            assert_eq!(refused.unwrap_err().field, "model_settings.api_key_env", "{variable}");
        }
        assert!(resolve_endpoint(&settings(Some("https://models.example/v1"), Some("EXAMPLE_KEY")), &config).is_ok());
    }

    #[test]
    fn model_endpoints_parse_with_or_without_their_key_variable() {
        let plain: crate::runtime::settings::ModelEndpoint = "http://127.0.0.1:11434/v1/".parse().unwrap();
        assert_eq!((plain.base_url.as_str(), plain.api_key_env), ("http://127.0.0.1:11434/v1", None));
        let keyed: crate::runtime::settings::ModelEndpoint =
            "https://api.groq.com/openai/v1=GROQ_API_KEY".parse().unwrap();
        assert_eq!(keyed.base_url, "https://api.groq.com/openai/v1");
        assert_eq!(keyed.api_key_env.as_deref(), Some("GROQ_API_KEY"));
        let query: crate::runtime::settings::ModelEndpoint = "https://x.example/v1?a=b".parse().unwrap();
        assert_eq!((query.base_url.as_str(), query.api_key_env), ("https://x.example/v1?a=b", None));
        assert!("ftp://x.example".parse::<crate::runtime::settings::ModelEndpoint>().is_err());
        assert!("not a url".parse::<crate::runtime::settings::ModelEndpoint>().is_err());
    }

    #[test]
    fn retry_after_is_read_as_seconds_or_as_an_http_date() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(parse_retry_after("1", now), Some(Duration::from_secs(1)));
        assert_eq!(parse_retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Thu, 26 Nov 2026 12:00:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Thu, 26 Nov 2026 11:59:00 GMT", now), Some(Duration::ZERO), "a past date");
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }

    #[test]
    fn outages_are_429_408_and_server_errors_only() {
        for status in [429, 408, 500, 502, 503, 504] {
            assert!(is_outage(StatusCode::from_u16(status).unwrap()), "{status}");
        }
        for status in [400, 401, 403, 404, 422] {
            assert!(!is_outage(StatusCode::from_u16(status).unwrap()), "{status}");
        }
    }

    #[test]
    fn backoff_grows_with_jitter_up_to_its_cap_within_the_window() {
        let start = tokio::time::Instant::now();
        let mut retries = Retries::new(Duration::from_secs(600), start);
        let waits: Vec<Duration> = (0..12).map(|_| retries.next_wait(None, start).unwrap()).collect();
        for (n, wait) in waits.iter().enumerate() {
            let full = FIRST_BACKOFF.saturating_mul(1 << n).min(MAX_BACKOFF);
            assert!(*wait >= full / 2 && *wait <= full, "wait {n} is {wait:?}, not within half of {full:?}");
        }
        assert_eq!(waits.iter().max().copied().map(|w| w <= MAX_BACKOFF), Some(true));
        let near_the_end = start + Duration::from_millis(599_900);
        assert!(retries.next_wait(None, near_the_end).unwrap() <= Duration::from_millis(100), "cut to the window");
        assert_eq!(retries.next_wait(None, start + Duration::from_secs(600)), None, "the window is spent");
    }

    #[test]
    fn retry_after_is_waited_unless_it_goes_past_the_window() {
        let start = tokio::time::Instant::now();
        let mut retries = Retries::new(Duration::from_secs(10), start);
        assert_eq!(retries.next_wait(Some(Duration::from_secs(3)), start), Some(Duration::from_secs(3)));
        assert_eq!(retries.next_wait(Some(Duration::ZERO), start), Some(FIRST_BACKOFF), "no busy loop");
        assert_eq!(retries.next_wait(Some(Duration::from_secs(11)), start), None);
        let outage = Outage {
            message: "it answered 429".into(),
            retry_after: Some(Duration::from_secs(11)),
            reason: "rate_limited",
        };
        assert!(
            retries.gave_up(&outage, start).contains("asked to retry in 11 s"),
            "{}",
            retries.gave_up(&outage, start)
        );
    }

    #[test]
    fn error_bodies_give_their_message() {
        assert_eq!(error_detail(r#"{"error": {"message": "slow down", "type": "rate_limit_error"}}"#), "slow down");
        assert_eq!(error_detail("<html>Bad Gateway</html>"), "<html>Bad Gateway</html>");
        assert_eq!(error_detail(""), "(no message)");
        assert_eq!(error_detail(&"x".repeat(1000)).chars().count(), 301);
    }

    #[test]
    fn provider_extras_are_dropped_from_assistant_messages() {
        let raw = json!({"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]});
        let clean = normalize_assistant_message(&raw);
        assert!(clean.get("refusal").is_none());
        assert_eq!(clean["tool_calls"][0]["id"], "c1");
    }
}
