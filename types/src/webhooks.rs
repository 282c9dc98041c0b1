//! Wire types of webhooks: a workspace's subscriptions, the deliveries of its events to them, and the
//! secret questions' own callbacks are signed with.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{DeliveryStatus, EventType};

/// The body of `POST /api/v1/webhooks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where events are sent: an `http` or `https` URL of at most 2 000 characters, not into a private, loopback or
    /// link-local range unless the server allows it (`HOLDPOINT_WEBHOOK_ALLOW_PRIVATE`).
    pub url: String,
    /// The event types sent to it: at least one.
    pub events: Vec<EventType>,
    /// At most 200 characters.
    #[serde(default)]
    pub description: String,
}

/// The body of `PATCH /api/v1/webhooks/{id}`: what is given changes, the rest stays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WebhookPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<EventType>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `true` stops sending to it (its queue waits); `false` sends again, from where its queue stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
}

/// A webhook subscription as the API shows it (its secret only once, when it is created).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Webhook {
    pub id: Uuid,
    pub url: String,
    pub events: Vec<EventType>,
    pub description: String,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "super::time::required")]
    pub updated_at: DateTime<Utc>,
    /// When sending to it stopped: an admin disabled it, or it answered `410 Gone`; `null` while it is sent to.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub disabled_at: Option<DateTime<Utc>>,
    pub disabled_reason: Option<String>,
}

/// A new subscription with the secret its deliveries are signed with, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct CreatedWebhook {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// `whsec_` + base64 of the key: what a Standard Webhooks library verifies signatures with.
    pub secret: String,
}

/// A workspace's subscriptions, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct WebhookList {
    pub items: Vec<Webhook>,
}

/// One event (or test message) sent, or to be sent, to one endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct WebhookDelivery {
    pub id: Uuid,
    /// The subscription it goes to; `null` for a question's `callback_url`.
    pub webhook_id: Option<Uuid>,
    pub url: String,
    /// The `webhook-id` header: the event's id (`test_…` for a test message), the same on every attempt.
    pub message_id: String,
    /// The event's type (`webhook_test` for a test message).
    pub event_type: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due; `null` once sent or given up.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
    /// The HTTP status the endpoint answered the last attempt with, if it answered.
    pub response_status: Option<u16>,
    #[serde(default, deserialize_with = "super::time::optional")]
    pub sent_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    /// The body as sent: `{"type", "timestamp", "data"}`.
    pub body: serde_json::Value,
}

/// A page of deliveries, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct WebhookDeliveryPage {
    pub items: Vec<WebhookDelivery>,
    pub next_cursor: Option<String>,
}

/// The secret the events sent to questions' `callback_url`s are signed with (`GET`/`POST
/// /api/v1/webhooks/callback-secret`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct CallbackSecret {
    /// `whsec_` + base64 of the key.
    pub secret: String,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
}
