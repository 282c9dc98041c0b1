//! Web push: a question sent to a browser's push subscription, as RFC 8030 describes, encrypted for that
//! browser with RFC 8291's `aes128gcm` and signed for the push service with RFC 8292's VAPID.
//!
//! - The payload is JSON for Holdpoint's service worker ([`notification_payload`]): the title, a short body, the
//!   quick answers as notification actions each with its signed action link, and the question's address. Its
//!   `tag` is the question's id, so the push sent when the question is resolved ([`resolved_payload`]) replaces the
//!   notification instead of adding one.
//! - Encryption is web-push-native's (RustCrypto's P-256, HKDF and AES-GCM; no OpenSSL).
//! - The VAPID `Authorization` is `vapid t=<JWT>, k=<public key>`: an ES256 JWT whose `aud` is the origin of the
//!   push endpoint (its port included when it is not the scheme's default), `exp` at most 24 hours ahead and `sub`
//!   a contact (`mailto:` or `https:`), signed with the server's VAPID key, whose public half the browser was given
//!   when it subscribed.
//! - The service's answer decides the outcome: 201 is sent; 404 or 410 means the subscription is gone for good (the
//!   outbox deletes it); 429 and 5xx are retried, as is a network error; any other 4xx is a failure.
//! - Whoever signs in names their push endpoint, so it passes the outbound guard ([`crate::egress`]) when it is
//!   subscribed and at every send: no private, loopback or other special-purpose address, no redirect followed,
//!   unless `HOLDPOINT_PUSH_ALLOW_PRIVATE` says otherwise.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use holdpoint_types::{Question, Urgency};
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::action_links::ActionLink;
use super::{DeliveryOutcome, truncate_chars};
use crate::egress::{EgressError, EgressPolicy, GuardedClient};

/// How long a VAPID JWT is valid: RFC 8292 allows at most 24 hours; half leaves room for clocks that disagree.
const JWT_VALIDITY: chrono::Duration = chrono::Duration::hours(12);

/// The largest payload sent: a push service must take 4096 bytes of encrypted content (RFC 8291 §4), which is 3993
/// bytes of plain text in one `aes128gcm` record (86 bytes of header, 16 of tag, 1 of padding delimiter).
pub const MAX_PAYLOAD_BYTES: usize = 4096 - 86 - 16 - 1;

/// How long one request to a push service may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The server's VAPID key pair (a P-256 key). Every instance of one deployment must hold the same key, as browsers
/// subscribed with its public half; `Debug` never shows the private half.
#[derive(Clone)]
pub struct VapidKey(SigningKey);

impl std::fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("VapidKey").field(&self.public_key_encoded()).finish()
    }
}

impl std::str::FromStr for VapidKey {
    type Err = InvalidVapidKey;

    fn from_str(encoded: &str) -> Result<Self, Self::Err> {
        VapidKey::from_encoded(encoded)
    }
}

/// A VAPID private key that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a VAPID private key is a P-256 private key of 32 bytes, base64url-encoded without padding: {0}")]
pub struct InvalidVapidKey(String);

impl VapidKey {
    /// A new random key pair.
    pub fn generate() -> Self {
        // p256 0.13 takes a `rand_core` 0.6 generator; the key is made from 32 bytes of the operating system's
        // generator instead, through the same check as a stored key (a scalar of zero or above the order is
        // refused, once in 2^128 draws).
        loop {
            let bytes: [u8; 32] = rand::random();
            if let Ok(key) = SigningKey::from_slice(&bytes) {
                return VapidKey(key);
            }
        }
    }

    /// The key from its stored form, `HOLDPOINT_VAPID_PRIVATE_KEY`'s: the private scalar, 32 bytes, base64url
    /// without padding (as web-push libraries write it).
    pub fn from_encoded(encoded: &str) -> Result<Self, InvalidVapidKey> {
        let bytes = URL_SAFE_NO_PAD.decode(encoded.trim()).map_err(|e| InvalidVapidKey(e.to_string()))?;
        if bytes.len() != 32 {
            return Err(InvalidVapidKey(format!("got {} bytes", bytes.len())));
        }
        SigningKey::from_slice(&bytes).map(VapidKey).map_err(|e| InvalidVapidKey(e.to_string()))
    }

    /// The private key's stored form.
    pub fn encoded(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.to_bytes())
    }

    /// The public key as a browser's `pushManager.subscribe({applicationServerKey})` takes it and VAPID's `k`
    /// sends it: the uncompressed point (65 bytes), base64url without padding.
    pub fn public_key_encoded(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.verifying_key().to_encoded_point(false).as_bytes())
    }

    /// The VAPID `Authorization` header value for a request to `endpoint`, valid from `now` for 12 hours.
    pub fn authorization(&self, endpoint: &url::Url, subject: &str, now: DateTime<Utc>) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        // The origin as RFC 6454 serializes it: scheme, host and a port that is not the scheme's default.
        let audience = endpoint.origin().ascii_serialization();
        let claims = json!({"aud": audience, "exp": (now + JWT_VALIDITY).timestamp(), "sub": subject});
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{claims}");
        // ES256 (RFC 7518 §3.4): ECDSA P-256 over SHA-256, the signature as r and s, 32 bytes each.
        let signature: Signature = self.0.sign(signing_input.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(signature.to_bytes());
        format!("vapid t={signing_input}.{signature}, k={}", self.public_key_encoded())
    }
}

/// A browser's push subscription, as `PushSubscription.toJSON()` gives it: `{"endpoint", "keys": {"p256dh",
/// "auth"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushSubscription {
    pub endpoint: String,
    pub keys: SubscriptionKeys,
}

/// The browser's keys: its P-256 public key and its authentication secret, both base64url.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionKeys {
    pub p256dh: String,
    pub auth: String,
}

/// Which push endpoints may be sent to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushEndpoints {
    /// `http` endpoints too (`HOLDPOINT_PUSH_ALLOW_HTTP`): only for a push service on the machine itself.
    pub allow_http: bool,
    /// Endpoints at private, loopback, link-local and other special-purpose addresses
    /// (`HOLDPOINT_PUSH_ALLOW_PRIVATE`): only for a push service inside the operator's own network.
    pub allow_private: bool,
}

impl PushEndpoints {
    /// The outbound guard of pushes.
    pub fn egress(&self) -> EgressPolicy {
        EgressPolicy::new("HOLDPOINT_PUSH_ALLOW_PRIVATE", self.allow_private)
    }
}

/// A subscription that cannot be sent to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSubscription {
    #[error("the endpoint is not an https URL: {0}")]
    Endpoint(String),
    #[error("the endpoint may not be sent to: {0}")]
    Destination(String),
    #[error("p256dh is not a P-256 public key in base64url")]
    PublicKey,
    #[error("auth is not 16 bytes in base64url")]
    Auth,
}

/// A subscription whose keys have been read.
struct Target {
    endpoint: url::Url,
    public_key: p256::PublicKey,
    auth: web_push_native::Auth,
}

fn decode_base64url(text: &str) -> Option<Vec<u8>> {
    // Browsers send base64url without padding, some libraries with it.
    URL_SAFE_NO_PAD.decode(text.trim().trim_end_matches('=')).ok()
}

impl PushSubscription {
    /// Checks the subscription: an `https` endpoint (or `http` when `endpoints` allows it, for a push service on
    /// the machine itself) whose host as written the guard allows, a P-256 point and a 16-byte secret. A host name
    /// is checked when it is resolved, at every send.
    pub fn validate(&self, endpoints: PushEndpoints) -> Result<(), InvalidSubscription> {
        self.target(endpoints).map(drop)
    }

    fn target(&self, endpoints: PushEndpoints) -> Result<Target, InvalidSubscription> {
        let endpoint =
            url::Url::parse(&self.endpoint).map_err(|_| InvalidSubscription::Endpoint(self.endpoint.clone()))?;
        let scheme_ok = endpoint.scheme() == "https" || (endpoints.allow_http && endpoint.scheme() == "http");
        if !scheme_ok || endpoint.host_str().is_none() {
            return Err(InvalidSubscription::Endpoint(self.endpoint.clone()));
        }
        if let Some(refusal) = endpoints.egress().refusal(&endpoint) {
            return Err(InvalidSubscription::Destination(refusal));
        }
        let point = decode_base64url(&self.keys.p256dh).ok_or(InvalidSubscription::PublicKey)?;
        let public_key = p256::PublicKey::from_sec1_bytes(&point).map_err(|_| InvalidSubscription::PublicKey)?;
        let auth = decode_base64url(&self.keys.auth).filter(|a| a.len() == 16).ok_or(InvalidSubscription::Auth)?;
        Ok(Target { endpoint, public_key, auth: web_push_native::Auth::clone_from_slice(&auth) })
    }
}

/// RFC 8030's `Urgency` header: how soon the push service should wake the device (and spend its battery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushUrgency {
    VeryLow,
    Low,
    Normal,
    High,
}

impl PushUrgency {
    pub fn as_str(self) -> &'static str {
        match self {
            PushUrgency::VeryLow => "very-low",
            PushUrgency::Low => "low",
            PushUrgency::Normal => "normal",
            PushUrgency::High => "high",
        }
    }
}

impl From<Urgency> for PushUrgency {
    /// A question's urgency as the push's: `high` and `critical` wake the device at once.
    fn from(urgency: Urgency) -> Self {
        match urgency {
            Urgency::Low => PushUrgency::Low,
            Urgency::Normal => PushUrgency::Normal,
            Urgency::High | Urgency::Critical => PushUrgency::High,
        }
    }
}

/// One push: the payload (JSON for the service worker), how long the service keeps it for an offline device, its
/// urgency, and its topic (a newer push with the same topic replaces one not yet delivered).
#[derive(Debug, Clone, PartialEq)]
pub struct PushMessage {
    pub payload: Vec<u8>,
    pub ttl: Duration,
    pub urgency: PushUrgency,
    /// At most 32 characters of the base64url alphabet (RFC 8030 §5.4).
    pub topic: Option<String>,
}

impl PushMessage {
    /// The push of `question`'s payload: kept until the question's deadline (at most four weeks, the longest a
    /// service is expected to keep one), with the question's urgency, and the question's id as its topic.
    pub fn for_question(question: &Question, payload: &Value, now: DateTime<Utc>) -> Self {
        let four_weeks = Duration::from_secs(28 * 24 * 3600);
        let ttl = question
            .timeout_at
            .map(|at| (at - now).to_std().unwrap_or(Duration::ZERO).min(four_weeks))
            .unwrap_or(four_weeks);
        PushMessage {
            payload: payload.to_string().into_bytes(),
            ttl,
            urgency: question.urgency.into(),
            topic: Some(question.id.simple().to_string()),
        }
    }
}

/// The payload of the notification of `question`: what the service worker shows, with one action per link
/// (`links`, made for this recipient with [`super::PUSH_MAX_CHOICES`]) and the question's address. It always fits
/// in [`MAX_PAYLOAD_BYTES`], the most a push service must take: a question whose links (each carries its value)
/// make it longer goes without them, answered through its Open action, and then with a shorter body.
pub fn notification_payload(question: &Question, links: &[ActionLink], open_url: &str) -> Value {
    let actions: Vec<Value> = links
        .iter()
        .enumerate()
        .map(|(i, link)| json!({"action": format!("answer:{i}"), "title": link.answer.label, "url": link.url}))
        .collect();
    let mut payload = json!({
        "type": "question",
        "question_id": question.id,
        "tag": question.id,
        "title": truncate_chars(&question.title, 120),
        "body": truncate_chars(question.body.trim(), 400),
        "urgency": question.urgency,
        "kind": question.kind,
        "actions": actions,
        "url": open_url,
        "require_interaction": matches!(question.urgency, Urgency::High | Urgency::Critical),
    });
    let fits = |payload: &Value| payload.to_string().len() <= MAX_PAYLOAD_BYTES;
    if !fits(&payload) {
        payload["actions"] = json!([]);
    }
    let mut body_chars = 400;
    while !fits(&payload) && body_chars > 0 {
        body_chars /= 2;
        payload["body"] = json!(truncate_chars(question.body.trim(), body_chars));
    }
    payload
}

/// The payload that replaces the notification of a resolved question (same `tag`).
pub fn resolved_payload(question: &Question, open_url: &str) -> Value {
    let how = match (question.status, &question.answered_by) {
        (holdpoint_types::QuestionStatus::Answered, Some(by)) => format!("Answered by {by}"),
        (holdpoint_types::QuestionStatus::Cancelled, Some(by)) => format!("Cancelled by {by}"),
        (status, _) => format!("No longer waiting ({status})"),
    };
    json!({
        "type": "resolved",
        "question_id": question.id,
        "tag": question.id,
        "title": truncate_chars(&question.title, 120),
        "body": how,
        "status": question.status,
        "actions": [],
        "url": open_url,
        "require_interaction": false,
    })
}

/// Sends pushes signed with the server's VAPID key. Cheap to clone.
#[derive(Clone)]
pub struct WebPushSender {
    http: GuardedClient,
    key: VapidKey,
    subject: String,
    endpoints: PushEndpoints,
}

impl std::fmt::Debug for WebPushSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebPushSender").field("key", &self.key).field("subject", &self.subject).finish()
    }
}

impl WebPushSender {
    /// A sender signing with `key`, naming `subject` (`mailto:` or `https:`) as the contact push services may
    /// write to about its traffic, to the `endpoints` allowed.
    pub fn new(key: VapidKey, subject: &str, endpoints: PushEndpoints) -> Result<Self, String> {
        if !(subject.starts_with("mailto:") || subject.starts_with("https://")) {
            return Err(format!("the VAPID subject must be a mailto: or https: URL, not {subject:?}"));
        }
        let http = endpoints
            .egress()
            .client(reqwest::Client::builder().timeout(REQUEST_TIMEOUT))
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(WebPushSender { http, key, subject: subject.to_owned(), endpoints })
    }

    /// The key the sender signs with.
    pub fn key(&self) -> &VapidKey {
        &self.key
    }

    /// Encrypts `message` for `subscription`, posts it to the subscription's endpoint and says how it went.
    pub async fn send(&self, subscription: &PushSubscription, message: &PushMessage) -> DeliveryOutcome {
        let target = match subscription.target(self.endpoints) {
            Ok(target) => target,
            Err(error) => return DeliveryOutcome::Failed { reason: error.to_string(), address_gone: true },
        };
        if message.payload.len() > MAX_PAYLOAD_BYTES {
            return DeliveryOutcome::failed(format!(
                "the payload is {} bytes, more than the {MAX_PAYLOAD_BYTES} a push service must take",
                message.payload.len()
            ));
        }
        let body = match web_push_native::encrypt(message.payload.clone(), &target.public_key, &target.auth) {
            Ok(body) => body,
            Err(error) => return DeliveryOutcome::failed(format!("cannot encrypt the payload: {error}")),
        };
        let mut request = self
            .http
            .post(target.endpoint.clone())
            .header("TTL", message.ttl.as_secs().to_string())
            .header("Urgency", message.urgency.as_str())
            .header(reqwest::header::CONTENT_ENCODING, "aes128gcm")
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .header(reqwest::header::AUTHORIZATION, self.key.authorization(&target.endpoint, &self.subject, Utc::now()))
            .body(body);
        if let Some(topic) = &message.topic {
            request = request.header("Topic", topic);
        }
        let response = match self.http.send(request).await {
            Ok(response) => response,
            Err(EgressError::Refused(reason)) => return DeliveryOutcome::Failed { reason, address_gone: true },
            Err(error) => {
                return DeliveryOutcome::retry(format!("the push service could not be reached: {error}"), None);
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let reason = format!("the push service answered HTTP {}", status.as_u16());
        match status.as_u16() {
            200..=299 => DeliveryOutcome::Sent { reference: None },
            404 | 410 => DeliveryOutcome::Failed { reason, address_gone: true },
            408 | 429 | 500..=599 => DeliveryOutcome::retry(reason, retry_after),
            _ => DeliveryOutcome::failed(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_questions::*;
    use chrono::TimeZone;
    use p256::ecdsa::signature::Verifier as _;
    use p256::elliptic_curve::sec1::ToEncodedPoint as _;

    #[test]
    fn a_vapid_key_round_trips_through_its_stored_form() {
        let key = VapidKey::generate();
        let again = VapidKey::from_encoded(&key.encoded()).unwrap();
        assert_eq!(again.public_key_encoded(), key.public_key_encoded());
        assert_eq!(URL_SAFE_NO_PAD.decode(key.public_key_encoded()).unwrap().len(), 65);
        assert!(!format!("{key:?}").contains(&key.encoded()));
        assert!(VapidKey::from_encoded("c2hvcnQ").is_err());
        assert!(VapidKey::from_encoded(&URL_SAFE_NO_PAD.encode([0u8; 32])).is_err(), "zero is no private key");
    }

    fn decode_jwt_part(part: &str) -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn the_vapid_jwt_names_the_endpoints_origin_and_verifies_with_the_public_key() {
        let key = VapidKey::generate();
        let now = Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, 0).unwrap();
        for (endpoint, origin) in [
            ("https://push.example.net/wpush/v2/abc?x=1", "https://push.example.net"),
            ("https://push.example.net:443/abc", "https://push.example.net"),
            ("http://127.0.0.1:8123/push/1", "http://127.0.0.1:8123"),
        ] {
            let header = key.authorization(&url::Url::parse(endpoint).unwrap(), "mailto:ops@example.com", now);
            let (token, k) = header.strip_prefix("vapid t=").unwrap().split_once(", k=").unwrap();
            assert_eq!(k, key.public_key_encoded());
            let parts: Vec<&str> = token.split('.').collect();
            assert_eq!(decode_jwt_part(parts[0]), json!({"typ": "JWT", "alg": "ES256"}));
            let claims = decode_jwt_part(parts[1]);
            assert_eq!(claims["aud"], origin);
            assert_eq!(claims["sub"], "mailto:ops@example.com");
            assert_eq!(claims["exp"], (now + chrono::Duration::hours(12)).timestamp());
            let public = p256::ecdsa::VerifyingKey::from_sec1_bytes(&URL_SAFE_NO_PAD.decode(k).unwrap()).unwrap();
            let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap()).unwrap();
            public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature).unwrap();
        }
    }

    fn subscription(endpoint: &str) -> (PushSubscription, p256::SecretKey, [u8; 16]) {
        let secret = p256::SecretKey::from_slice(&rand::random::<[u8; 32]>()).unwrap();
        let auth: [u8; 16] = rand::random();
        let subscription = PushSubscription {
            endpoint: endpoint.into(),
            keys: SubscriptionKeys {
                p256dh: URL_SAFE_NO_PAD.encode(secret.public_key().to_encoded_point(false).as_bytes()),
                auth: URL_SAFE_NO_PAD.encode(auth),
            },
        };
        (subscription, secret, auth)
    }

    #[test]
    fn a_subscription_needs_an_https_endpoint_a_p256_key_and_a_16_byte_secret() {
        let strict = PushEndpoints::default();
        let local_service = PushEndpoints { allow_http: true, allow_private: true };
        let (good, _, _) = subscription("https://push.example.net/abc");
        assert_eq!(good.validate(strict), Ok(()));
        let (local, _, _) = subscription("http://127.0.0.1:9/abc");
        assert!(matches!(local.validate(strict), Err(InvalidSubscription::Endpoint(_))));
        assert_eq!(local.validate(local_service), Ok(()));
        let (loopback, _, _) = subscription("https://127.0.0.1:9/abc");
        assert!(matches!(loopback.validate(strict), Err(InvalidSubscription::Destination(_))));
        let mut bad_key = good.clone();
        bad_key.keys.p256dh = URL_SAFE_NO_PAD.encode([4u8; 65]);
        assert_eq!(bad_key.validate(strict), Err(InvalidSubscription::PublicKey));
        let mut bad_auth = good.clone();
        bad_auth.keys.auth = URL_SAFE_NO_PAD.encode([1u8; 8]);
        assert_eq!(bad_auth.validate(strict), Err(InvalidSubscription::Auth));
        let mut padded = good.clone();
        padded.keys.auth.push_str("==");
        assert_eq!(padded.validate(strict), Ok(()));
    }

    /// The links a push of `question` carries for someone, made at `now`.
    fn push_links(
        key: &crate::action_links::ActionLinkKey,
        question: &Question,
        now: DateTime<Utc>,
    ) -> Vec<ActionLink> {
        let recipient = uuid::Uuid::now_v7();
        let (channel, choices) = (crate::Channel::Push, crate::PUSH_MAX_CHOICES);
        crate::action_links::links_for(key, question, recipient, channel, choices, "https://hp.example.com", now)
    }

    #[test]
    fn a_payload_too_long_for_a_push_service_goes_without_its_links_then_with_a_shorter_body() {
        let long = |c: char| std::iter::repeat_n(c, 1500).collect::<String>();
        let option = |c: char| holdpoint_types::QuestionOption { value: long(c), label: long(c), description: None };
        let question = Question {
            kind: holdpoint_types::QuestionKind::Blocking,
            response_type: holdpoint_types::ResponseType::Choice,
            action: None,
            options: vec![option('a'), option('b')],
            body: "é".repeat(400),
            ..approval()
        };
        let key = crate::action_links::ActionLinkKey::generate();
        let now = Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, 0).unwrap();
        let links = push_links(&key, &question, now);
        assert_eq!(links.len(), 2, "the question offers its two options as links");
        let payload = notification_payload(&question, &links, "https://hp.example.com/questions/1");
        assert!(payload.to_string().len() <= MAX_PAYLOAD_BYTES, "{} bytes", payload.to_string().len());
        assert_eq!(payload["actions"], json!([]), "answered through Open instead");
        assert_eq!(payload["title"], json!(truncate_chars(&question.title, 120)));
        assert!(payload["body"].as_str().unwrap().starts_with("éé"));

        let option = |value: &str| holdpoint_types::QuestionOption {
            value: value.into(),
            label: value.to_uppercase(),
            description: None,
        };
        let short = Question { options: vec![option("a"), option("b")], ..question.clone() };
        let links = push_links(&key, &short, now);
        let payload = notification_payload(&short, &links, "https://hp.example.com/questions/1");
        assert_eq!(payload["actions"].as_array().map(Vec::len), Some(2), "a payload that fits keeps its links");
        assert_eq!(payload["body"], json!(truncate_chars(&short.body, 400)));
    }

    #[test]
    fn the_payload_carries_the_actions_with_their_links_and_the_question_as_tag() {
        let question = approval();
        let key = crate::action_links::ActionLinkKey::generate();
        let now = Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, 0).unwrap();
        let links = push_links(&key, &question, now);
        let payload = notification_payload(&question, &links, "https://hp.example.com/questions/1");
        assert_eq!(payload["tag"], json!(question.id));
        assert_eq!(payload["actions"][0]["title"], "Approve");
        assert_eq!(payload["actions"][1]["url"], json!(links[1].url));
        assert_eq!(payload["require_interaction"], true);
        assert!(payload.to_string().len() <= MAX_PAYLOAD_BYTES);
        let message = PushMessage::for_question(&question, &payload, now);
        assert_eq!(message.ttl, Duration::from_secs(2 * 3600 + 5 * 60));
        assert_eq!(message.urgency, PushUrgency::High);
        assert_eq!(message.topic.as_deref().map(str::len), Some(32));
        let resolved = resolved_payload(
            &Question {
                status: holdpoint_types::QuestionStatus::Answered,
                answered_by: Some("alice".into()),
                ..question.clone()
            },
            "u",
        );
        assert_eq!(
            (resolved["tag"].clone(), resolved["body"].clone()),
            (json!(question.id), json!("Answered by alice"))
        );
        let cancelled = Question {
            status: holdpoint_types::QuestionStatus::Cancelled,
            answered_by: Some("dave".into()),
            ..question.clone()
        };
        assert_eq!(resolved_payload(&cancelled, "u")["body"], "Cancelled by dave");
    }

    #[test]
    fn a_payload_too_large_for_every_push_service_is_refused_before_sending() {
        let (subscription, _, _) = subscription("https://push.example.net/abc");
        let sender =
            WebPushSender::new(VapidKey::generate(), "mailto:ops@example.com", PushEndpoints::default()).unwrap();
        let message = PushMessage {
            payload: vec![b'x'; MAX_PAYLOAD_BYTES + 1],
            ttl: Duration::from_secs(60),
            urgency: PushUrgency::Normal,
            topic: None,
        };
        let outcome = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(sender.send(&subscription, &message));
        assert!(matches!(outcome, DeliveryOutcome::Failed { address_gone: false, .. }), "{outcome:?}");
    }

    #[test]
    fn the_subject_must_be_a_contact() {
        assert!(WebPushSender::new(VapidKey::generate(), "ops@example.com", PushEndpoints::default()).is_err());
        assert!(WebPushSender::new(VapidKey::generate(), "https://hp.example.com", PushEndpoints::default()).is_ok());
    }

    #[test]
    fn encryption_round_trips_with_the_subscriptions_private_key() {
        let (subscription, secret, auth) = subscription("https://push.example.net/abc");
        let target = subscription.target(PushEndpoints::default()).unwrap();
        let body = web_push_native::encrypt(b"hello".to_vec(), &target.public_key, &target.auth).unwrap();
        let plain = web_push_native::decrypt(body, &secret, &web_push_native::Auth::clone_from_slice(&auth)).unwrap();
        assert_eq!(plain, b"hello");
    }
}
