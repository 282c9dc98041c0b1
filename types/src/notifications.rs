//! Wire types of how questions reach people: their notifications and the outbox's deliveries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Question, UnknownVariant};

wire_enum! {
    /// A channel a notification is delivered on outside Holdpoint: what a delivery records, and what a person's
    /// thresholds name (`PUT /api/v1/me/notifications`).
    Channel {
        Email = "email",
        Slack = "slack",
        /// Web push to a browser's subscription.
        Push = "push",
    }
}

wire_enum! {
    /// Where a delivery is: waiting for its first attempt, waiting for another, delivered, or given up.
    DeliveryStatus {
        Queued = "queued",
        Retrying = "retrying",
        Sent = "sent",
        Failed = "failed",
    }
}

wire_enum! {
    /// Why a delivery was sent: its question was asked, its people reminded, or it was escalated to someone.
    DeliveryCause {
        Asked = "asked",
        Reminded = "reminded",
        Escalated = "escalated",
    }
}

wire_enum! {
    /// What a notification still asks of its person: `pending` while its question is, `done` once anyone resolved it.
    ActionStatus {
        Pending = "pending",
        Done = "done",
    }
}

/// One message of a question to one person on one channel (`GET /api/v1/questions/{id}/deliveries`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Delivery {
    pub id: Uuid,
    pub channel: Channel,
    /// The recipient's username.
    pub recipient: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due; `null` once sent or given up.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
    #[serde(default, deserialize_with = "super::time::optional")]
    pub sent_at: Option<DateTime<Utc>>,
    /// Why it was sent.
    pub cause: DeliveryCause,
}

/// A page of deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct DeliveryPage {
    pub items: Vec<Delivery>,
}

/// A person's notification of a question (`GET /api/v1/notifications`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Notification {
    pub id: Uuid,
    pub question: Question,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    /// When the person read it; `null` while unread.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub read_at: Option<DateTime<Utc>>,
    pub action_status: ActionStatus,
}

/// A page of a person's notifications, newest first, with how many are unread in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NotificationPage {
    pub items: Vec<Notification>,
    pub unread: u32,
    /// The cursor of the next page (`?before=`), if there is one.
    pub next_cursor: Option<String>,
}

/// A browser's push subscription as `PushSubscription.toJSON()` gives it (`POST /api/v1/me/push-subscriptions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewPushSubscription {
    /// The push service's URL for this browser (`https`).
    pub endpoint: String,
    pub keys: PushSubscriptionKeys,
    /// What browsers send beside the subscription; Holdpoint keeps pushing until the push service says it is gone.
    #[serde(default, rename = "expirationTime", skip_serializing_if = "Option::is_none")]
    pub expiration_time: Option<f64>,
}

/// The browser's keys: its P-256 public key and its authentication secret, both base64url.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PushSubscriptionKeys {
    pub p256dh: String,
    pub auth: String,
}

/// A subscribed browser as listed: never its endpoint, which lets whoever knows it push to the browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct PushSubscriptionInfo {
    pub id: Uuid,
    /// The host of the browser's push service (`fcm.googleapis.com`, `updates.push.services.mozilla.com`, ...).
    pub push_service: String,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
}

/// The browsers a person subscribed (`GET /api/v1/me/push-subscriptions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct PushSubscriptionList {
    pub items: Vec<PushSubscriptionInfo>,
}

/// The key browsers subscribe with (`applicationServerKey`): the server's VAPID public key, base64url
/// (`GET /api/v1/push/public-key`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct PushPublicKey {
    pub public_key: String,
    /// Whether this server sends pushes (a VAPID subject is configured or derived); without it subscribing is
    /// refused.
    pub enabled: bool,
}

/// How one channel is doing in a workspace (`GET /api/v1/channels`, admins): whether this server sends on it, its
/// last delivery that went out and its last failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ChannelHealth {
    pub channel: Channel,
    /// Whether this server sends on the channel (it is configured).
    pub configured: bool,
    /// When the last delivery on it went out.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub last_sent_at: Option<DateTime<Utc>>,
    /// When the last attempt on it failed, and why.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// Deliveries waiting for their first attempt or another.
    pub waiting: u32,
}

/// Every channel's health (`GET /api/v1/channels`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ChannelHealthList {
    pub items: Vec<ChannelHealth>,
}

/// `POST /api/v1/me/notifications/test`: which channel to send the caller a test message on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TestMessageRequest {
    pub channel: Channel,
}

/// How a test message went: `sent` (the channel's service took it) or `failed`, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct TestMessageOutcome {
    pub channel: Channel,
    pub sent: bool,
    pub error: Option<String>,
}
