//! Webhooks on the wire (spec §12): Standard Webhooks signatures, which URLs may be sent to, and one attempt of a
//! delivery over HTTP.
//!
//! A receiver's URL is checked twice against private ranges: when it is given (so a mistake is refused with a
//! reason), and at every connection, by the HTTP client's own resolver ([`GuardedResolver`]), so a name that
//! resolves to a public address when checked and to an internal one later (DNS rebinding) is still not reached.
//! Redirects are not followed: a receiver answers for itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::DeliveryOutcome;

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
    /// Whether private, loopback and link-local addresses may be reached (`HOLDPOINT_WEBHOOK_ALLOW_PRIVATE`).
    pub allow_private: bool,
}

impl UrlPolicy {
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
        let Some(host) = parsed.host() else { return Err("the URL has no host".into()) };
        let port = parsed.port_or_known_default().unwrap_or(443);
        let addresses: Vec<IpAddr> = match host {
            url::Host::Ipv4(ip) => vec![IpAddr::V4(ip)],
            url::Host::Ipv6(ip) => vec![IpAddr::V6(ip)],
            url::Host::Domain(name) => tokio::net::lookup_host((name, port))
                .await
                .map_err(|e| format!("{name} could not be resolved: {e}"))?
                .map(|address| address.ip())
                .collect(),
        };
        if addresses.is_empty() {
            return Err("its host resolves to no address".into());
        }
        if let Some(ip) = addresses.iter().find(|ip| !self.allows(**ip)) {
            return Err(format!(
                "{ip} is in a private, loopback or link-local range (allowed only with HOLDPOINT_WEBHOOK_ALLOW_PRIVATE)"
            ));
        }
        Ok(parsed)
    }

    /// Whether `ip` may be connected to.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip)
    }
}

/// Whether an address is on the public internet: not private, loopback, link-local, shared (CGNAT), unspecified,
/// broadcast, multicast, documentation or benchmarking space, nor an IPv6 form of one (mapped, unique local).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || first == 0x2001 && v6.segments()[1] == 0x0db8
                || first == 0x0064 && v6.segments()[1] == 0xff9b)
        }
    }
}

/// The HTTP client's resolver: the system's, with every address the policy does not allow taken out (a host with
/// none left cannot be reached).
struct GuardedResolver(UrlPolicy);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addresses.into_iter().filter(|a| policy.allows(a.ip())).collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves to no address webhooks may be sent to").into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
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
    http: reqwest::Client,
    policy: UrlPolicy,
}

impl WebhookSender {
    pub fn new(policy: UrlPolicy) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver(policy)))
            .user_agent(concat!("Holdpoint-Webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(WebhookSender { http, policy })
    }

    /// Makes one attempt: a `2xx` is delivered; `410 Gone` is given up for good; any other answer or a network error
    /// is tried again (after the receiver's `Retry-After`, when it says).
    pub async fn send(&self, message: &Message<'_>, timestamp: i64) -> Attempt {
        let not_sent = |outcome| Attempt { outcome, status: None, gone: false };
        let Ok(url) = url::Url::parse(message.url) else {
            return not_sent(DeliveryOutcome::failed("the URL is not valid"));
        };
        // An address in the URL itself is never resolved, so the resolver cannot refuse it: it is checked here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal
            && !self.policy.allows(ip)
        {
            return not_sent(DeliveryOutcome::failed(format!("{ip} is in a private range: not sent")));
        }
        let response = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", message.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature(message.key, message.id, timestamp, message.body))
            .body(message.body.to_owned())
            .send()
            .await;
        let response = match response {
            Ok(response) => response,
            Err(err) => return not_sent(DeliveryOutcome::retry(network_error(&err), None)),
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

    #[test]
    fn private_loopback_and_link_local_addresses_are_not_public() {
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
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
