//! Wire types of how questions reach people (spec §11): their notifications and the outbox's deliveries.

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
    /// What a notification still asks of its person: `pending` while its question is, `done` once anyone resolved it.
    ActionStatus {
        Pending = "pending",
        Done = "done",
    }
}

/// One message of a question to one person on one channel (`GET /api/v1/questions/{id}/deliveries`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Delivery {
    pub id: Uuid,
    pub channel: Channel,
    /// The recipient's username.
    pub recipient: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due; `null` once sent or given up.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
    pub sent_at: Option<DateTime<Utc>>,
}

/// A page of deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct DeliveryPage {
    pub items: Vec<Delivery>,
}

/// A person's notification of a question (`GET /api/v1/notifications`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Notification {
    pub id: Uuid,
    pub question: Question,
    pub created_at: DateTime<Utc>,
    /// When the person read it; `null` while unread.
    pub read_at: Option<DateTime<Utc>>,
    pub action_status: ActionStatus,
}

/// A page of a person's notifications, newest first, with how many are unread in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NotificationPage {
    pub items: Vec<Notification>,
    pub unread: u32,
    /// The cursor of the next page (`?before=`), if there is one.
    pub next_cursor: Option<String>,
}
