//! Webhooks on the wire: Standard Webhooks signatures, which URLs may be sent to, and one attempt of a
//! delivery over HTTP.
//!
//! A receiver's URL is checked twice by the outbound guard ([`crate::egress`]): when it is given (so a mistake is
//! refused with a reason), and at every connection, so a name that resolves to a public address when checked and to
//! an internal one later (DNS rebinding) is still not reached. Redirects are not followed: a receiver answers for
//! itself.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::DeliveryOutcome;
use crate::egress::{EgressError, EgressPolicy, GuardedClient};

/// The prefix of a Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// The longest URL accepted.
pub const URL_MAX: usize = 2000;
/// How long one attempt may take, connecting included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a refusing receiver's answer is kept as the delivery's error.
const ERROR_BODY_KEPT: usize = 200;

/// A new secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> String {
    let key: [u8; 32] = rand::random();
    format!("{SECRET_PREFIX}{}", BASE64.encode(key))
}

/// The key a `whsec_` secret stands for; `None` if it is not one.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    let key = BASE64.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()?;
    (!key.is_empty()).then_some(key)
}

/// The `webhook-signature` header of a message: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`
/// keyed by the secret's key.
pub fn signature(key: &[u8], message_id: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// Which receivers may be sent to.
#[derive(Debug, Clone, Copy, Default)]
pub struct UrlPolicy {
    /// Whether private, loopback, link-local and other special-purpose addresses may be reached
    /// (`HOLDPOINT_WEBHOOK_ALLOW_PRIVATE`).
    pub allow_private: bool,
}

impl UrlPolicy {
    /// The outbound guard of webhooks and callbacks.
    pub fn egress(&self) -> EgressPolicy {
        EgressPolicy::new("HOLDPOINT_WEBHOOK_ALLOW_PRIVATE", self.allow_private)
    }

    /// Checks a receiver's URL as it is given: `http` or `https`, a host, no credentials, and every address the host
    /// resolves to allowed. `Err` says what is wrong with it.
    pub async fn check(&self, url: &str) -> Result<url::Url, String> {
        if url.len() > URL_MAX {
            return Err(format!("at most {URL_MAX} characters"));
        }
        let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("only http and https URLs, not {}:", parsed.scheme()));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("no user name or password in the URL: the signature says who sends".into());
        }
        self.egress().check_resolved(&parsed).await?;
        Ok(parsed)
    }
}

/// One message to one receiver.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    pub url: &'a str,
    /// The `webhook-id` header.
    pub id: &'a str,
    pub body: &'a str,
    /// The key of the secret it is signed with.
    pub key: &'a [u8],
}

/// How an attempt went, with the receiver's HTTP status when it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub outcome: DeliveryOutcome,
    pub status: Option<u16>,
    /// The receiver answered `410 Gone`: it wants nothing more.
    pub gone: bool,
}

/// Sends signed messages to receivers.
#[derive(Clone)]
pub struct WebhookSender {
    http: GuardedClient,
}

impl WebhookSender {
    pub fn new(policy: UrlPolicy) -> Result<Self, String> {
        let builder = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .user_agent(concat!("Holdpoint-Webhooks/", env!("CARGO_PKG_VERSION")));
        let http = policy.egress().client(builder).map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(WebhookSender { http })
    }

    /// Makes one attempt: a `2xx` is delivered; `410 Gone` is given up for good; any other answer or a network error
    /// is tried again (after the receiver's `Retry-After`, when it says).
    pub async fn send(&self, message: &Message<'_>, timestamp: i64) -> Attempt {
        let not_sent = |outcome| Attempt { outcome, status: None, gone: false };
        let Ok(url) = url::Url::parse(message.url) else {
            return not_sent(DeliveryOutcome::failed("the URL is not valid"));
        };
        let request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", message.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature(message.key, message.id, timestamp, message.body))
            .body(message.body.to_owned());
        let response = match self.http.send(request).await {
            Ok(response) => response,
            Err(EgressError::Refused(reason)) => return not_sent(DeliveryOutcome::failed(reason)),
            Err(EgressError::Http(err)) => return not_sent(DeliveryOutcome::retry(network_error(&err), None)),
        };
        let status = response.status();
        if status.is_success() {
            return Attempt {
                outcome: DeliveryOutcome::Sent { reference: None },
                status: Some(status.as_u16()),
                gone: false,
            };
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = response.text().await.unwrap_or_default();
        let mut reason = format!("the receiver answered {status}");
        let excerpt: String = text.trim().chars().take(ERROR_BODY_KEPT).collect();
        if !excerpt.is_empty() {
            reason.push_str(": ");
            reason.push_str(&excerpt);
        }
        let gone = status == reqwest::StatusCode::GONE;
        let outcome = if gone { DeliveryOutcome::failed(reason) } else { DeliveryOutcome::retry(reason, retry_after) };
        Attempt { outcome, status: Some(status.as_u16()), gone }
    }
}

/// A network error, said with its causes (reqwest's own message alone is "error sending request").
fn network_error(err: &reqwest::Error) -> String {
    let mut message = if err.is_timeout() { "the receiver did not answer in time".to_owned() } else { err.to_string() };
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification's reference implementations.
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_secret_is_whsec_and_32_bytes() {
        let secret = new_secret();
        assert_eq!(secret_key(&secret).unwrap().len(), 32);
        assert_ne!(secret, new_secret());
        assert!(secret_key("whsec_").is_none());
        assert!(secret_key("abc").is_none());
    }

    #[tokio::test]
    async fn urls_are_checked_before_anything_is_sent() {
        let strict = UrlPolicy::default();
        for (url, problem) in [
            ("ftp://example.com/x", "only http and https"),
            ("http://127.0.0.1:9/hook", "private"),
            ("http://[::1]/hook", "private"),
            ("http://169.254.169.254/latest/meta-data", "private"),
            ("http://localhost:8080/hook", "private"),
            ("https://user:pw@example.com/", "no user name"),
            ("not a url", "not a URL"),
        ] {
            let refused = strict.check(url).await.expect_err(url);
            assert!(refused.contains(problem), "{url}: {refused}");
        }
        assert!(strict.check(&format!("https://example.com/{}", "a".repeat(URL_MAX))).await.is_err());
        let open = UrlPolicy { allow_private: true };
        assert!(open.check("http://127.0.0.1:9/hook").await.is_ok());
    }

    #[tokio::test]
    async fn the_sender_refuses_a_private_address_at_connection_time() {
        let sender = WebhookSender::new(UrlPolicy::default()).unwrap();
        let key = [1u8; 32];
        for url in ["http://127.0.0.1:9/hook", "http://localhost:9/hook"] {
            let attempt = sender.send(&Message { url, id: "1", body: "{}", key: &key }, 0).await;
            assert_eq!(attempt.status, None, "{url}");
            assert!(!matches!(attempt.outcome, DeliveryOutcome::Sent { .. }), "{url}: {attempt:?}");
        }
    }
}
