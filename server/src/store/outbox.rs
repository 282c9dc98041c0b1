//! How questions reach people (spec §11), as stored: each person's notifications and the outbox's deliveries, and the
//! SQL both backends use for them.
//!
//! Both are written in the transaction of the question they come from (see [`Reach`]). A delivery is then claimed by
//! one worker at a time: the claim sets `claimed_until` and counts the attempt, so a worker that dies mid-send leaves
//! the delivery to be claimed again once the claim runs out, and a crash costs at most one duplicate attempt.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use app::types::{Channel, DeliveryStatus};

use super::sql::QUESTION_COLUMNS;
use super::*;

pub(super) const DELIVERY_COLUMNS: &str = "id, workspace_id, question_id, user_id, channel, address, status, attempts, \
     next_attempt_at, claimed_until, last_error, sent_at, created_at, updated_at";

/// Inserts a notification ([`Bind::bind_notification`]'s order).
pub(super) const INSERT_NOTIFICATION: &str = "INSERT INTO notifications (id, workspace_id, question_id, user_id, \
     created_at, read_at) VALUES ($1, $2, $3, $4, $5, $6)";
/// Inserts a delivery ([`Bind::bind_delivery`]'s order).
pub(super) const INSERT_DELIVERY: &str = "INSERT INTO deliveries (id, workspace_id, question_id, user_id, channel, \
     address, status, attempts, next_attempt_at, claimed_until, last_error, sent_at, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
/// Deliveries to send at `$1`, soonest first (at most `$2`): not sent, not given up, not claimed by a live worker.
pub(super) const DUE_DELIVERIES: &str = "SELECT id FROM deliveries WHERE (status = 'queued' OR status = 'retrying') \
     AND next_attempt_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1) ORDER BY next_attempt_at LIMIT $2";
/// Writes an attempt's outcome and releases the claim (`$1` status .. `$5` updated_at, `$6` id, `$7` the claim).
pub(super) const FINISH_DELIVERY: &str = "UPDATE deliveries SET status = $1, next_attempt_at = $2, last_error = $3, \
     sent_at = $4, updated_at = $5, claimed_until = NULL WHERE id = $6 AND claimed_until = $7";
/// When the soonest delivery still to send is due.
pub(super) const NEXT_DELIVERY_DUE: &str = "SELECT MIN(next_attempt_at) FROM deliveries \
     WHERE status = 'queued' OR status = 'retrying'";
/// A question's deliveries with their recipients' usernames (`$1` workspace, `$2` question).
pub(super) const DELIVERIES_OF_QUESTION: &str = "SELECT d.id, d.workspace_id, d.question_id, d.user_id, d.channel, \
     d.address, d.status, d.attempts, d.next_attempt_at, d.claimed_until, d.last_error, d.sent_at, d.created_at, \
     d.updated_at, u.username FROM deliveries d JOIN users u ON u.id = d.user_id \
     WHERE d.workspace_id = $1 AND d.question_id = $2 ORDER BY d.created_at, d.channel";
/// Marks one of a person's notifications read (`$1` at, `$2` workspace, `$3` person, `$4` id).
pub(super) const MARK_READ: &str = "UPDATE notifications SET read_at = COALESCE(read_at, $1) \
     WHERE workspace_id = $2 AND user_id = $3 AND id = $4";
/// Marks every unread notification of a person read (`$1` at, `$2` workspace, `$3` person).
pub(super) const MARK_ALL_READ: &str =
    "UPDATE notifications SET read_at = $1 WHERE workspace_id = $2 AND user_id = $3 AND read_at IS NULL";
/// How many of a person's notifications are unread (`$1` workspace, `$2` person).
pub(super) const UNREAD_COUNT: &str =
    "SELECT COUNT(*) FROM notifications WHERE workspace_id = $1 AND user_id = $2 AND read_at IS NULL";

/// A person's notification of a question.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct NotificationRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub question_id: Uuid,
    pub user_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub read_at: Option<DateTime<Utc>>,
}

/// One message of the outbox: a question to one person on one channel.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct DeliveryRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub question_id: Uuid,
    pub user_id: Uuid,
    pub channel: Channel,
    /// Where it goes on its channel (an email address, a Slack user id), as it was when the question was asked.
    pub address: String,
    pub status: DeliveryStatus,
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    /// Until when the worker that claimed it holds it.
    pub claimed_until: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub sent_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A delivery as listed, with its recipient's username.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ListedDelivery {
    #[sqlx(flatten)]
    pub delivery: DeliveryRow,
    pub username: String,
}

/// A notification as a person's list shows it, with its question.
#[derive(Debug, Clone)]
pub struct ListedNotification {
    pub notification: NotificationRow,
    pub question: QuestionRow,
}

/// Who a new question reaches, written in its transaction: each person's notification and the outbox's deliveries.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    pub notifications: Vec<NotificationRow>,
    pub deliveries: Vec<DeliveryRow>,
}

impl Reach {
    pub fn is_empty(&self) -> bool {
        self.notifications.is_empty() && self.deliveries.is_empty()
    }
}

/// What is written with a new question, in its transaction: the older questions of its run it supersedes, and who it
/// reaches.
#[derive(Debug, Clone, Default)]
pub struct AskedWith {
    pub supersedes: Vec<QuestionTransition>,
    pub reach: Reach,
}

impl AskedWith {
    /// Whether the question is written alone (what the backends' fast paths write).
    pub fn is_empty(&self) -> bool {
        self.supersedes.is_empty() && self.reach.is_empty()
    }
}

/// A page of a person's notifications.
#[derive(Debug, Clone, Copy)]
pub struct NotificationQuery {
    pub unread_only: bool,
    /// Those created before this one (`created_at`, `id`), for the next page.
    pub before: Option<(DateTime<Utc>, Uuid)>,
    pub limit: u32,
}

/// Notifications and the outbox. Implemented by both stores.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Claims up to `limit` deliveries due at `now` until `until`, counting the attempt: each is handed to one worker
    /// at a time, across instances.
    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRow>>;
    /// Writes an attempt's outcome (the row's `status`, `next_attempt_at`, `last_error`, `sent_at`, `updated_at`) and
    /// releases the claim; `false` if the claim was lost meanwhile (it ran out and another worker took the delivery).
    async fn finish_delivery(&self, delivery: &DeliveryRow) -> StoreResult<bool>;
    /// When the soonest delivery still to send is due.
    async fn next_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>>;
    /// A question's deliveries, oldest first.
    async fn deliveries_of_question(&self, workspace_id: Uuid, question_id: Uuid) -> StoreResult<Vec<ListedDelivery>>;
    /// A person's notifications, newest first.
    async fn notifications(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        query: &NotificationQuery,
    ) -> StoreResult<Vec<ListedNotification>>;
    async fn unread_notifications(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<u32>;
    /// Marks one notification of the person read; `false` if they have none of that id.
    async fn mark_notification_read(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Marks every unread notification of the person read; returns how many.
    async fn mark_all_notifications_read(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<u64>;
}

/// The `SELECT` of a person's notifications with their questions (`$1` workspace, `$2` person, `$3` limit, then
/// `$4`/`$5` the cursor when `before`), newest first.
pub(super) fn notifications_sql(query: &NotificationQuery) -> String {
    let mut sql = format!(
        "SELECT n.id AS n_id, n.created_at AS n_created_at, n.read_at AS n_read_at, {} FROM notifications n \
         JOIN questions q ON q.id = n.question_id WHERE n.workspace_id = $1 AND n.user_id = $2",
        QUESTION_COLUMNS.split(", ").map(|column| format!("q.{column}")).collect::<Vec<_>>().join(", ")
    );
    if query.unread_only {
        sql.push_str(" AND n.read_at IS NULL");
    }
    if query.before.is_some() {
        sql.push_str(" AND (n.created_at < $4 OR (n.created_at = $4 AND n.id < $5))");
    }
    sql.push_str(" ORDER BY n.created_at DESC, n.id DESC LIMIT $3");
    sql
}

/// A row of [`notifications_sql`]: the notification's own columns, then the question's.
#[derive(sqlx::FromRow)]
pub(super) struct NotificationWithQuestion {
    pub n_id: Uuid,
    pub n_created_at: DateTime<Utc>,
    pub n_read_at: Option<DateTime<Utc>>,
    #[sqlx(flatten)]
    pub question: QuestionRow,
}

impl NotificationWithQuestion {
    pub(super) fn listed(self, user_id: Uuid) -> ListedNotification {
        ListedNotification {
            notification: NotificationRow {
                id: self.n_id,
                workspace_id: self.question.workspace_id,
                question_id: self.question.id,
                user_id,
                created_at: self.n_created_at,
                read_at: self.n_read_at,
            },
            question: self.question,
        }
    }
}
