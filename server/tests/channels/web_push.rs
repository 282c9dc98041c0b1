//! Web push checked by an independent implementation ([`super::push_service`]): a browser's keys made by Python's
//! `cryptography`, a push endpoint on loopback that records what it receives, and http_ece (RFC 8291) and py_vapid
//! (RFC 8292) reading it.

use std::time::Duration;

use chrono::Utc;
use holdpoint::channels::action_links::{ActionLinkKey, links_for};
use holdpoint::channels::web_push::{
    PushEndpoints, PushMessage, PushSubscription, PushUrgency, SubscriptionKeys, VapidKey, WebPushSender,
    notification_payload,
};
use holdpoint::channels::{Channel, DeliveryOutcome, PUSH_MAX_CHOICES};
use serde_json::{Value, json};
use uuid::Uuid;

use super::push_service::{push_check, read_push, start_endpoint};

/// The push service of these tests: on loopback, over plain HTTP.
const LOCAL_SERVICE: PushEndpoints = PushEndpoints { allow_http: true, allow_private: true };

fn question() -> app::types::Question {
    serde_json::from_value(json!({
        "id": Uuid::now_v7(), "workspace": "default", "project": null, "run_id": null, "tool_call_id": null,
        "parent_run_ids": [], "kind": "approval", "response_type": "approval",
        "title": "Delete the staging database?", "body": "The agent wants to drop `staging`. ✨",
        "options": [], "fields": [], "action": {"tool_name": "sql", "arguments": {"query": "DROP DATABASE staging"}},
        "allow_edit": false, "context": {}, "urgency": "high",
        "timeout_at": (Utc::now() + chrono::Duration::minutes(15)).to_rfc3339(),
        "default_response": null, "status": "pending", "response": null, "answered_by": null, "resolution": null,
        "created_at": "2026-11-27T12:00:00Z", "updated_at": "2026-11-27T12:00:00Z", "resolved_at": null
    }))
    .unwrap()
}

#[tokio::test]
async fn an_independent_implementation_decrypts_the_push_and_verifies_its_vapid_jwt() {
    let (endpoint, origin) = start_endpoint().await;
    let browser = push_check(&["subscribe"], None).await;
    let subscription = PushSubscription {
        endpoint: format!("{origin}/push/sub-1"),
        keys: SubscriptionKeys {
            p256dh: browser["p256dh"].as_str().unwrap().into(),
            auth: browser["auth"].as_str().unwrap().into(),
        },
    };
    let vapid = VapidKey::generate();
    let sender = WebPushSender::new(vapid.clone(), "mailto:ops@example.com", LOCAL_SERVICE).unwrap();
    let question = question();
    let links = links_for(
        &ActionLinkKey::generate(),
        &question,
        Uuid::now_v7(),
        Channel::Push,
        PUSH_MAX_CHOICES,
        "https://hp.example.com",
        Utc::now(),
    );
    let payload = notification_payload(&question, &links, "https://hp.example.com/questions/1");
    let message = PushMessage::for_question(&question, &payload, Utc::now());
    let sent_at = Utc::now().timestamp();

    assert_eq!(sender.send(&subscription, &message).await, DeliveryOutcome::Sent { reference: None });

    let (headers, body) = endpoint.received.lock().unwrap().pop().expect("the endpoint received the push");
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    assert_eq!(header("content-encoding"), "aes128gcm");
    assert_eq!(header("content-type"), "application/octet-stream");
    assert_eq!(header("urgency"), "high");
    assert_eq!(header("topic"), question.id.simple().to_string());
    let ttl: u64 = header("ttl").parse().unwrap();
    assert!((14 * 60..=15 * 60).contains(&ttl), "the push is kept until the deadline: {ttl}");

    let checked = read_push(&browser, &headers, &body).await;
    let plaintext: Value = serde_json::from_str(checked["plaintext"].as_str().unwrap()).unwrap();
    assert_eq!(plaintext, payload);
    assert_eq!(plaintext["actions"][0]["url"], json!(links[0].url));
    assert_eq!(checked["jwt_header"], json!({"typ": "JWT", "alg": "ES256"}));
    assert_eq!(checked["k"], vapid.public_key_encoded());
    let claims = &checked["claims"];
    assert_eq!(claims["aud"], origin, "aud is the endpoint's origin, port included");
    assert_eq!(claims["sub"], "mailto:ops@example.com");
    let exp = claims["exp"].as_i64().unwrap();
    assert!(exp > sent_at && exp <= sent_at + 24 * 3600 + 5, "RFC 8292: at most 24 hours ahead: {exp}");
}

#[tokio::test]
async fn the_push_services_answers_decide_the_outcome() {
    let (_endpoint, origin) = start_endpoint().await;
    let browser = push_check(&["subscribe"], None).await;
    let sender = WebPushSender::new(VapidKey::generate(), "https://hp.example.com", LOCAL_SERVICE).unwrap();
    let message =
        PushMessage { payload: b"{}".to_vec(), ttl: Duration::from_secs(60), urgency: PushUrgency::Low, topic: None };
    let to = |path: &str| PushSubscription {
        endpoint: format!("{origin}/push/{path}"),
        keys: SubscriptionKeys {
            p256dh: browser["p256dh"].as_str().unwrap().into(),
            auth: browser["auth"].as_str().unwrap().into(),
        },
    };
    assert!(matches!(sender.send(&to("gone"), &message).await, DeliveryOutcome::Failed { address_gone: true, .. }));
    assert!(matches!(
        sender.send(&to("busy"), &message).await,
        DeliveryOutcome::Retry { after: Some(after), .. } if after == Duration::from_secs(30)
    ));
    assert!(matches!(sender.send(&to("broken"), &message).await, DeliveryOutcome::Retry { after: None, .. }));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut unreachable = to("x");
    unreachable.endpoint = format!("http://127.0.0.1:{port}/push/x");
    assert!(matches!(sender.send(&unreachable, &message).await, DeliveryOutcome::Retry { .. }));
    // Without `allow_http`, a plain-HTTP endpoint is no subscription at all.
    let https_only = PushEndpoints { allow_http: false, ..LOCAL_SERVICE };
    let https_only = WebPushSender::new(VapidKey::generate(), "https://hp.example.com", https_only).unwrap();
    assert!(matches!(https_only.send(&to("x"), &message).await, DeliveryOutcome::Failed { address_gone: true, .. }));
}
