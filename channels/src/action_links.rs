//! Action links: the Approve / Reject / option links of an email or a push notification.
//!
//! A link carries a token that names what it does — which question, answered as whom, with which value, through
//! which channel, until when — and a MAC (HMAC-SHA256 with a key only the server holds) over all of it, so nobody
//! can make one up or change what one says. A token is `payload.tag`, both base64url without padding: the payload is
//! the claims as JSON, the tag the MAC of the payload's text. It travels in a URL path as it is.
//!
//! A link answers at most once because what it does happens once: an answer takes the question out of `pending`, once,
//! and an approval among several counts its person once, however often it is followed. Whether the question is still
//! pending and whether the recipient may answer it is decided when the link is confirmed (`POST /act/{token}`), by the
//! answer use case with every rule of answering; opening a link (`GET`) only reads the token. Each token carries an id
//! of its own ([`ActionClaims::id`]), so no two links are the same text.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;
use uuid::Uuid;

use holdpoint_types::Question;

use super::{Channel, QuickAnswer};

/// The longest a link stays valid, however far off the question's deadline is.
pub const MAX_VALIDITY: Duration = Duration::days(7);

/// The length of a key, in bytes: HMAC-SHA256's block-sized security needs no more than the hash's 32.
pub const KEY_BYTES: usize = 32;

/// Refuses a token longer than this before decoding it: a real one (an option value of a few hundred characters at
/// most) is far shorter, and a URL of megabytes is someone probing.
const MAX_TOKEN_CHARS: usize = 8 * 1024;

/// The key action links are signed with. Every instance of one deployment must hold the same key, so it is kept
/// with the server's other shared secrets; `Debug` never shows it.
#[derive(Clone)]
pub struct ActionLinkKey([u8; KEY_BYTES]);

impl std::fmt::Debug for ActionLinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActionLinkKey([redacted])")
    }
}

/// A key that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an action link key is {KEY_BYTES} bytes, base64url-encoded without padding: {0}")]
pub struct InvalidKey(String);

impl ActionLinkKey {
    /// A new random key, from the operating system's generator.
    pub fn generate() -> Self {
        ActionLinkKey(rand::random())
    }

    /// The key from its stored form ([`ActionLinkKey::encoded`]).
    pub fn from_encoded(encoded: &str) -> Result<Self, InvalidKey> {
        let bytes = URL_SAFE_NO_PAD.decode(encoded.trim()).map_err(|e| InvalidKey(e.to_string()))?;
        let bytes: [u8; KEY_BYTES] =
            bytes.try_into().map_err(|bytes: Vec<u8>| InvalidKey(format!("got {} bytes", bytes.len())))?;
        Ok(ActionLinkKey(bytes))
    }

    /// The key's stored form: base64url without padding.
    pub fn encoded(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }

    /// The token of a link that does what `claims` say.
    pub fn sign(&self, claims: &ActionClaims) -> String {
        let json = serde_json::to_vec(&WireClaims::from(claims)).expect("claims serialize to JSON");
        let payload = URL_SAFE_NO_PAD.encode(json);
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{payload}.{tag}")
    }

    /// What the link of `token` does, if this key signed it and it has not expired at `now`. The tag is compared in
    /// constant time, and nothing of the payload is trusted (not even its expiry) before the tag is verified.
    pub fn verify(&self, token: &str, now: DateTime<Utc>) -> Result<ActionClaims, ActionLinkError> {
        if token.len() > MAX_TOKEN_CHARS {
            return Err(ActionLinkError::Malformed);
        }
        let (payload, tag) = token.split_once('.').ok_or(ActionLinkError::Malformed)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| ActionLinkError::Malformed)?;
        let json = URL_SAFE_NO_PAD.decode(payload).map_err(|_| ActionLinkError::Malformed)?;
        // A tag of another length, or nothing to sign, was never a token: not worth calling forged.
        if tag.len() != 32 || json.is_empty() {
            return Err(ActionLinkError::Malformed);
        }
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        mac.verify_slice(&tag).map_err(|_| ActionLinkError::Forged)?;
        // Only a token this key signed gets here, so a payload that does not parse was signed by a version of
        // Holdpoint that wrote claims differently: it is refused like any other token that cannot be read.
        let wire: WireClaims = serde_json::from_slice(&json).map_err(|_| ActionLinkError::Malformed)?;
        let claims = ActionClaims::try_from(wire)?;
        if claims.expires_at <= now {
            return Err(ActionLinkError::Expired { expired_at: claims.expires_at });
        }
        Ok(claims)
    }
}

/// Why a token was refused. Each reason gets its own page: a person should know whether the link is too old or
/// was never one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionLinkError {
    /// Not a token at all: cut off, mistyped, or not in the token's format.
    #[error("this is not a valid action link")]
    Malformed,
    /// Well formed, but not signed with our key: made up, altered, or from another Holdpoint.
    #[error("this action link was not issued by this Holdpoint")]
    Forged,
    /// Genuine, but past its expiry.
    #[error("this action link expired at {expired_at}")]
    Expired { expired_at: DateTime<Utc> },
}

/// What an action link does.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionClaims {
    /// The link's own id, which tells two links of one question and recipient apart.
    pub id: Uuid,
    pub question_id: Uuid,
    /// The member (user id) the link was sent to, and so the only one it answers as.
    pub recipient_id: Uuid,
    /// The answer's `value`.
    pub value: Value,
    /// The channel the link was sent through, for the audit entry of the answer.
    pub channel: Channel,
    pub expires_at: DateTime<Utc>,
}

impl ActionClaims {
    /// The claims of a new link, with an id of its own (a UUIDv7: unique, and in time order in the store's index),
    /// valid until `expires_at` (see [`link_expiry`]).
    pub fn new(
        question_id: Uuid,
        recipient_id: Uuid,
        value: Value,
        channel: Channel,
        expires_at: DateTime<Utc>,
    ) -> Self {
        ActionClaims { id: Uuid::now_v7(), question_id, recipient_id, value, channel, expires_at }
    }
}

/// The claims as the token's JSON has them: short names keep the URL short. Times are Unix seconds.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireClaims {
    jti: Uuid,
    q: Uuid,
    r: Uuid,
    v: Value,
    ch: Channel,
    exp: i64,
}

impl From<&ActionClaims> for WireClaims {
    fn from(claims: &ActionClaims) -> Self {
        WireClaims {
            jti: claims.id,
            q: claims.question_id,
            r: claims.recipient_id,
            v: claims.value.clone(),
            ch: claims.channel,
            exp: claims.expires_at.timestamp(),
        }
    }
}

impl TryFrom<WireClaims> for ActionClaims {
    type Error = ActionLinkError;

    fn try_from(wire: WireClaims) -> Result<Self, Self::Error> {
        let expires_at = DateTime::from_timestamp(wire.exp, 0).ok_or(ActionLinkError::Malformed)?;
        Ok(ActionClaims {
            id: wire.jti,
            question_id: wire.q,
            recipient_id: wire.r,
            value: wire.v,
            channel: wire.ch,
            expires_at,
        })
    }
}

/// When a link sent at `now` for a question with deadline `timeout_at` stops working: at the deadline (the question
/// cannot be answered after it anyway), and never more than [`MAX_VALIDITY`] from now.
pub fn link_expiry(timeout_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DateTime<Utc> {
    let longest = now + MAX_VALIDITY;
    timeout_at.map_or(longest, |deadline| deadline.min(longest))
}

/// An action link made for one recipient: the answer it gives and its address.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionLink {
    pub answer: QuickAnswer,
    /// `{public_url}/act/{token}`.
    pub url: String,
    /// The token's id ([`ActionClaims::id`]).
    pub id: Uuid,
}

/// One signed link per quick answer of `question` (see [`super::quick_answers`]; `max_choices` is the channel's
/// limit), each answering as `recipient_id` through `channel`, valid until [`link_expiry`].
pub fn links_for(
    key: &ActionLinkKey,
    question: &Question,
    recipient_id: Uuid,
    channel: Channel,
    max_choices: usize,
    public_url: &str,
    now: DateTime<Utc>,
) -> Vec<ActionLink> {
    let expires_at = link_expiry(question.timeout_at, now);
    super::quick_answers(question, max_choices)
        .into_iter()
        .map(|answer| {
            let claims = ActionClaims::new(question.id, recipient_id, answer.value.clone(), channel, expires_at);
            ActionLink { url: action_url(public_url, &key.sign(&claims)), id: claims.id, answer }
        })
        .collect()
}

/// The address of the link of `token`, under `public_url` (the address people reach Holdpoint at).
pub fn action_url(public_url: &str, token: &str) -> String {
    format!("{}/act/{token}", public_url.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, 0).unwrap()
    }

    fn claims() -> ActionClaims {
        ActionClaims::new(Uuid::now_v7(), Uuid::now_v7(), json!(true), Channel::Email, now() + Duration::hours(1))
    }

    #[test]
    fn a_signed_token_verifies_to_the_same_claims() {
        let key = ActionLinkKey::generate();
        let claims = claims();
        let token = key.sign(&claims);
        assert_eq!(key.verify(&token, now()).unwrap(), claims);
    }

    #[test]
    fn a_token_is_url_safe_as_it_is() {
        let key = ActionLinkKey::generate();
        let claims = ActionClaims { value: json!("eu-west/1 ?&#+ ünïcode"), ..claims() };
        let token = key.sign(&claims);
        assert!(token.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)), "{token}");
        assert_eq!(key.verify(&token, now()).unwrap().value, json!("eu-west/1 ?&#+ ünïcode"));
    }

    #[test]
    fn every_link_has_an_id_of_its_own_for_single_use() {
        let key = ActionLinkKey::generate();
        let (first, second) = (claims(), claims());
        assert_ne!(first.id, second.id);
        assert_ne!(key.sign(&first), key.sign(&second));
        assert_eq!(key.verify(&key.sign(&first), now()).unwrap().id, first.id);
    }

    #[test]
    fn a_token_signed_with_another_key_is_forged() {
        let token = ActionLinkKey::generate().sign(&claims());
        assert_eq!(ActionLinkKey::generate().verify(&token, now()), Err(ActionLinkError::Forged));
    }

    #[test]
    fn changing_any_claim_makes_the_token_forged() {
        let key = ActionLinkKey::generate();
        let claims = claims();
        let token = key.sign(&claims);
        let (_, tag) = token.split_once('.').unwrap();
        // Each claim changed in turn, keeping the genuine tag: answering another question, as someone else, with
        // another value, through another channel, or for longer.
        let changed = [
            ActionClaims { question_id: Uuid::now_v7(), ..claims.clone() },
            ActionClaims { recipient_id: Uuid::now_v7(), ..claims.clone() },
            ActionClaims { value: json!(false), ..claims.clone() },
            ActionClaims { channel: Channel::Push, ..claims.clone() },
            ActionClaims { expires_at: claims.expires_at + Duration::days(30), ..claims.clone() },
            ActionClaims { id: Uuid::now_v7(), ..claims.clone() },
        ];
        for other in changed {
            let other_token = key.sign(&other);
            let (payload, _) = other_token.split_once('.').unwrap();
            assert_eq!(key.verify(&format!("{payload}.{tag}"), now()), Err(ActionLinkError::Forged), "{other:?}");
        }
        // And the tag itself, one character changed.
        let mut altered = token.clone().into_bytes();
        let last = altered.len() - 2;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(key.verify(&String::from_utf8(altered).unwrap(), now()), Err(ActionLinkError::Forged));
    }

    #[test]
    fn a_token_past_its_expiry_is_expired_and_says_when() {
        let key = ActionLinkKey::generate();
        let claims = claims();
        let token = key.sign(&claims);
        assert!(key.verify(&token, claims.expires_at - Duration::seconds(1)).is_ok());
        assert_eq!(
            key.verify(&token, claims.expires_at),
            Err(ActionLinkError::Expired { expired_at: claims.expires_at })
        );
    }

    #[test]
    fn an_expired_token_that_was_also_altered_is_forged_not_expired() {
        let key = ActionLinkKey::generate();
        let token = ActionLinkKey::generate().sign(&claims());
        assert_eq!(key.verify(&token, now() + Duration::days(365)), Err(ActionLinkError::Forged));
    }

    #[test]
    fn anything_that_is_not_a_token_is_malformed() {
        let key = ActionLinkKey::generate();
        let token = key.sign(&claims());
        let (payload, tag) = token.split_once('.').unwrap();
        let too_long = "a".repeat(MAX_TOKEN_CHARS + 1);
        for not_a_token in ["", ".", "abc", payload, "not base64!.abc", &format!("{payload}.{tag}="), &too_long] {
            assert_eq!(key.verify(not_a_token, now()), Err(ActionLinkError::Malformed), "{not_a_token:?}");
        }
    }

    #[test]
    fn a_payload_of_other_claims_signed_with_our_key_is_malformed() {
        let key = ActionLinkKey::generate();
        let payload = URL_SAFE_NO_PAD.encode(br#"{"q":"not a uuid"}"#);
        let mut mac = key.mac();
        mac.update(payload.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        assert_eq!(key.verify(&format!("{payload}.{tag}"), now()), Err(ActionLinkError::Malformed));
    }

    #[test]
    fn the_tag_is_an_hmac_sha256_of_the_payload_text() {
        // Recomputed here from the definition (RFC 2104 over SHA-256), not through the key's own method.
        let key = ActionLinkKey::generate();
        let token = key.sign(&claims());
        let (payload, tag) = token.split_once('.').unwrap();
        let raw_key = URL_SAFE_NO_PAD.decode(key.encoded()).unwrap();
        let mut inner_key = [0u8; 64];
        inner_key[..32].copy_from_slice(&raw_key);
        let ipad: Vec<u8> = inner_key.iter().map(|b| b ^ 0x36).collect();
        let opad: Vec<u8> = inner_key.iter().map(|b| b ^ 0x5c).collect();
        use sha2::Digest;
        let inner = Sha256::new().chain_update(&ipad).chain_update(payload.as_bytes()).finalize();
        let outer = Sha256::new().chain_update(&opad).chain_update(inner).finalize();
        assert_eq!(URL_SAFE_NO_PAD.decode(tag).unwrap(), outer.to_vec());
    }

    #[test]
    fn a_key_round_trips_through_its_stored_form_and_never_shows_in_debug() {
        let key = ActionLinkKey::generate();
        let again = ActionLinkKey::from_encoded(&key.encoded()).unwrap();
        let token = key.sign(&claims());
        assert!(again.verify(&token, now()).is_ok());
        assert!(!format!("{key:?}").contains(&key.encoded()));
        assert!(ActionLinkKey::from_encoded("c2hvcnQ").is_err());
        assert!(ActionLinkKey::from_encoded("not base64 at all!").is_err());
    }

    #[test]
    fn a_link_expires_at_the_deadline_or_after_seven_days_whichever_is_first() {
        let soon = now() + Duration::minutes(15);
        assert_eq!(link_expiry(Some(soon), now()), soon);
        assert_eq!(link_expiry(Some(now() + Duration::days(30)), now()), now() + Duration::days(7));
        assert_eq!(link_expiry(None, now()), now() + Duration::days(7));
    }

    #[test]
    fn an_approval_gets_an_approve_and_a_reject_link_for_its_recipient() {
        let key = ActionLinkKey::generate();
        let question = crate::test_questions::approval();
        let recipient = Uuid::now_v7();
        let links = links_for(&key, &question, recipient, Channel::Email, 6, "https://hp.example.com", now());
        assert_eq!(links.len(), 2);
        for (link, value) in links.iter().zip([json!(true), json!(false)]) {
            let token = link.url.strip_prefix("https://hp.example.com/act/").unwrap();
            let claims = key.verify(token, now()).unwrap();
            assert_eq!(
                (claims.question_id, claims.recipient_id, &claims.value, claims.channel, claims.id),
                (question.id, recipient, &value, Channel::Email, link.id)
            );
            assert_eq!(link.answer.value, value);
            assert_eq!(claims.expires_at, question.timeout_at.unwrap());
        }
    }

    #[test]
    fn the_link_is_under_the_public_url() {
        assert_eq!(action_url("https://hp.example.com/", "abc.def"), "https://hp.example.com/act/abc.def");
    }
}
