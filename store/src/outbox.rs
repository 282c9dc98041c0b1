//! How questions reach people, as stored: each person's notifications and the outbox's deliveries, the SQL both
//! backends use for them, and the [`OutboxStore`] trait with its one implementation for both.
//!
//! Both are written in the transaction of the question they come from (see [`Reach`]). A delivery is then claimed by
//! one worker at a time: the claim sets `claimed_until` and counts the attempt, so a worker that dies mid-send leaves
//! the delivery to be claimed again once the claim runs out, and a crash costs at most one duplicate attempt.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use holdpoint_types::{Channel, DeliveryCause, DeliveryStatus};

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::{Bind, QUESTION_COLUMNS, TableRow, table_row};
use super::*;

table_row!(DELIVERY_COLUMNS = DeliveryRow in "deliveries": id, workspace_id, question_id, user_id, channel, address,
    status, attempts, next_attempt_at, claimed_until, last_error, sent_at, created_at, updated_at, reference,
    followed_up_at, cause);
table_row!(NotificationRow in "notifications": id, workspace_id, question_id, user_id, created_at, read_at);
/// Deliveries to send at `$1`, soonest first (at most `$2`): not sent, not given up, not claimed by a live worker.
const DUE_DELIVERIES: &str = "SELECT id FROM deliveries WHERE (status = 'queued' OR status = 'retrying') \
     AND next_attempt_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1) ORDER BY next_attempt_at LIMIT $2";
/// Writes an attempt's outcome and releases the claim (`$1` status .. `$5` updated_at, `$6` reference, `$7`
/// followed_up_at, `$8` id, `$9` the claim). A follow-up's outcome is written the same way.
const FINISH_DELIVERY: &str = "UPDATE deliveries SET status = $1, next_attempt_at = $2, last_error = $3, \
     sent_at = $4, updated_at = $5, reference = $6, followed_up_at = $7, claimed_until = NULL \
     WHERE id = $8 AND claimed_until = $9";
/// Sent messages of resolved questions still to bring up to date at `$1` (at most `$2`), soonest first, not claimed
/// by a live worker.
const DUE_FOLLOW_UPS: &str = "SELECT d.id FROM deliveries d JOIN questions q ON q.id = d.question_id \
     WHERE d.status = 'sent' AND d.followed_up_at IS NULL AND d.channel <> 'email' AND q.status <> 'pending' \
     AND d.next_attempt_at <= $1 AND (d.claimed_until IS NULL OR d.claimed_until <= $1) \
     ORDER BY d.next_attempt_at LIMIT $2";
table_row!(PUSH_SUBSCRIPTION_COLUMNS = PushSubscriptionRow in "push_subscriptions": id, workspace_id, user_id, endpoint,
    p256dh, auth, created_at);
/// Saves a browser's subscription, replacing the keys of one already saved for the same endpoint.
static SAVE_PUSH_SUBSCRIPTION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} ON CONFLICT (workspace_id, user_id, endpoint) DO UPDATE SET p256dh = excluded.p256dh, \
         auth = excluded.auth RETURNING {PUSH_SUBSCRIPTION_COLUMNS}",
        PushSubscriptionRow::insert()
    )
});
/// A member's subscribed browsers, oldest first (`$1` workspace, `$2` person).
static PUSH_SUBSCRIPTIONS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {PUSH_SUBSCRIPTION_COLUMNS} FROM push_subscriptions WHERE workspace_id = $1 AND user_id = $2 \
         ORDER BY created_at, id"
    )
});
/// The members of a workspace with at least one subscribed browser (`$1` workspace).
const PUSH_SUBSCRIBERS: &str = "SELECT DISTINCT user_id FROM push_subscriptions WHERE workspace_id = $1";
/// Removes one of a member's subscriptions (`$1` workspace, `$2` person, `$3` id).
const DELETE_PUSH_SUBSCRIPTION: &str =
    "DELETE FROM push_subscriptions WHERE workspace_id = $1 AND user_id = $2 AND id = $3";
/// Removes a member's subscription by its endpoint (`$1` workspace, `$2` person, `$3` endpoint): one the push
/// service says is gone.
const FORGET_PUSH_ENDPOINT: &str =
    "DELETE FROM push_subscriptions WHERE workspace_id = $1 AND user_id = $2 AND endpoint = $3";
/// A workspace's deliveries on one channel, summed up (`$1` workspace, `$2` channel): when the last went out, and
/// how many wait for an attempt.
const CHANNEL_SUMMARY: &str = "SELECT MAX(sent_at), \
     COUNT(CASE WHEN status = 'queued' OR status = 'retrying' THEN 1 END) FROM deliveries \
     WHERE workspace_id = $1 AND channel = $2";
/// A workspace's last failed attempt on one channel (`$1` workspace, `$2` channel): when, and why.
const CHANNEL_LAST_FAILURE: &str = "SELECT updated_at, last_error FROM deliveries \
     WHERE workspace_id = $1 AND channel = $2 AND last_error IS NOT NULL ORDER BY updated_at DESC LIMIT 1";
/// The memberships a Slack user id is proven to be (`(workspace_id, user_id)`): an id a member only claimed maps
/// nobody's clicks.
const SLACK_MEMBERSHIPS: &str = "SELECT workspace_id, user_id FROM memberships \
     WHERE slack_user_id = $1 AND slack_user_id_proven ORDER BY workspace_id";
/// When the soonest delivery still to send is due.
const NEXT_DELIVERY_DUE: &str = "SELECT MIN(next_attempt_at) FROM deliveries \
     WHERE status = 'queued' OR status = 'retrying'";
/// A question's deliveries with their recipients' usernames (`$1` workspace, `$2` question).
const DELIVERIES_OF_QUESTION: &str = "SELECT d.id, d.workspace_id, d.question_id, d.user_id, d.channel, \
     d.address, d.status, d.attempts, d.next_attempt_at, d.claimed_until, d.last_error, d.sent_at, d.created_at, \
     d.updated_at, d.reference, d.followed_up_at, d.cause, u.username FROM deliveries d JOIN users u ON u.id = d.user_id \
     WHERE d.workspace_id = $1 AND d.question_id = $2 ORDER BY d.created_at, d.channel";
/// Marks one of a person's notifications read (`$1` at, `$2` workspace, `$3` person, `$4` id).
const MARK_READ: &str = "UPDATE notifications SET read_at = COALESCE(read_at, $1) \
     WHERE workspace_id = $2 AND user_id = $3 AND id = $4";
/// Marks every unread notification of a person read (`$1` at, `$2` workspace, `$3` person).
const MARK_ALL_READ: &str =
    "UPDATE notifications SET read_at = $1 WHERE workspace_id = $2 AND user_id = $3 AND read_at IS NULL";
/// How many of a person's notifications are unread (`$1` workspace, `$2` person).
const UNREAD_COUNT: &str =
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
    /// What the channel calls the sent message, when it can be changed later (Slack's `channel:ts`).
    pub reference: Option<String>,
    /// When a message sent on a channel that can change it was brought up to date after its question was resolved
    /// (or that was given up on); `None` while there is nothing to do or it is still to do.
    pub followed_up_at: Option<DateTime<Utc>>,
    /// Why it was sent: the question was asked, its people reminded, or it was escalated.
    pub cause: DeliveryCause,
}

/// A browser a member subscribed to web pushes.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PushSubscriptionRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub user_id: Uuid,
    /// The push service's URL for this browser: whoever knows it can push to the browser, so it is never listed.
    pub endpoint: String,
    /// The browser's P-256 public key, base64url.
    pub p256dh: String,
    /// The browser's authentication secret, base64url.
    pub auth: String,
    pub created_at: DateTime<Utc>,
}

/// How a workspace's deliveries on one channel went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelSummary {
    pub last_sent_at: Option<DateTime<Utc>>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub waiting: i64,
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

/// What is written with a new question, in its transaction: the older questions of its run it supersedes, who it
/// reaches, and the grant that answers it as it is asked.
#[derive(Debug, Clone, Default)]
pub struct AskedWith {
    pub supersedes: Vec<QuestionTransition>,
    pub reach: Reach,
    /// Audit entries of how the question was asked (its delegation to who stands in for its assignee).
    pub audit: Vec<NewAuditEntry>,
    pub answered_by_grant: Option<AnsweredByGrant>,
}

impl AskedWith {
    /// Whether the question is written alone (what the backends' fast paths write).
    pub fn is_empty(&self) -> bool {
        self.supersedes.is_empty() && self.reach.is_empty() && self.audit.is_empty() && self.answered_by_grant.is_none()
    }
}

/// The approval of a tool call a grant gives as the question is asked: the question's transition out of
/// `pending`, and the grant's use with its audit entry. The store writes the question only if the grant is still
/// live at the transition's time, and fails with [`StoreError::GrantNotLive`] (writing nothing) otherwise.
#[derive(Debug, Clone)]
pub struct AnsweredByGrant {
    pub grant_id: Uuid,
    pub transition: QuestionTransition,
    pub used: NewAuditEntry,
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
    /// Writes an attempt's outcome (the row's `status`, `next_attempt_at`, `last_error`, `sent_at`, `updated_at`,
    /// `reference`, `followed_up_at`) and releases the claim; `false` if the claim was lost meanwhile (it ran out and
    /// another worker took the delivery). Finishes a follow-up as well.
    async fn finish_delivery(&self, delivery: &DeliveryRow) -> StoreResult<bool>;
    /// Claims up to `limit` sent messages whose questions are resolved and which are still to be brought up to date
    /// (due at `now`), until `until`: each to one worker at a time, across instances. Counts no attempt.
    async fn claim_follow_ups(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRow>>;
    /// Whether any sent message is due to be brought up to date at `now` (a read, so looking costs no write).
    async fn follow_ups_due(&self, now: DateTime<Utc>) -> StoreResult<bool>;
    /// How a workspace's deliveries on `channel` went: the last sent, the last failure and its error, how many wait.
    async fn channel_summary(&self, workspace_id: Uuid, channel: Channel) -> StoreResult<ChannelSummary>;
    /// The memberships Slack user `slack_user_id` is mapped to, as `(workspace_id, user_id)`.
    async fn slack_memberships(&self, slack_user_id: &str) -> StoreResult<Vec<(Uuid, Uuid)>>;
    /// Saves a browser's push subscription with the audit entry recording it; one saved before for the same endpoint
    /// keeps its id and takes the new keys. Returns the subscription as saved.
    async fn save_push_subscription(
        &self,
        row: &PushSubscriptionRow,
        audit: &NewAuditEntry,
    ) -> StoreResult<PushSubscriptionRow>;
    /// The members of a workspace with at least one subscribed browser.
    async fn push_subscribers(&self, workspace_id: Uuid) -> StoreResult<Vec<Uuid>>;
    /// A member's subscribed browsers, oldest first.
    async fn push_subscriptions(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<Vec<PushSubscriptionRow>>;
    /// Removes one of a member's subscriptions with the audit entry recording it; `false` (and nothing written) if
    /// they have none of that id.
    async fn delete_push_subscription(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        id: Uuid,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool>;
    /// Removes a member's subscription whose push service said it is gone.
    async fn forget_push_endpoint(&self, workspace_id: Uuid, user_id: Uuid, endpoint: &str) -> StoreResult<()>;
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

#[async_trait]
impl<B: SqlBackend> OutboxStore for B {
    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRow>> {
        self.write_alone()
            .fetch_all(
                Statement::new(format!(
                    "UPDATE deliveries SET claimed_until = $3, attempts = attempts + 1, updated_at = $1 \
                     WHERE {} RETURNING {DELIVERY_COLUMNS}",
                    B::claimable(DUE_DELIVERIES, None)
                ))
                .bind(now)
                .bind(i64::from(limit))
                .bind(until),
            )
            .await
    }

    async fn finish_delivery(&self, d: &DeliveryRow) -> StoreResult<bool> {
        let finished = self
            .write_alone()
            .execute(
                Statement::new(FINISH_DELIVERY)
                    .bind(d.status)
                    .bind(d.next_attempt_at)
                    .bind(&d.last_error)
                    .bind(d.sent_at)
                    .bind(d.updated_at)
                    .bind(&d.reference)
                    .bind(d.followed_up_at)
                    .bind(d.id)
                    .bind(d.claimed_until),
            )
            .await?;
        Ok(finished == 1)
    }

    async fn claim_follow_ups(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRow>> {
        self.write_alone()
            .fetch_all(
                Statement::new(format!(
                    "UPDATE deliveries SET claimed_until = $3 WHERE {} RETURNING {DELIVERY_COLUMNS}",
                    B::claimable(DUE_FOLLOW_UPS, Some("d"))
                ))
                .bind(now)
                .bind(i64::from(limit))
                .bind(until),
            )
            .await
    }

    async fn follow_ups_due(&self, now: DateTime<Utc>) -> StoreResult<bool> {
        let due: Option<(Uuid,)> =
            self.read().fetch_optional(Statement::new(DUE_FOLLOW_UPS).bind(now).bind(1_i64)).await?;
        Ok(due.is_some())
    }

    async fn slack_memberships(&self, slack_user_id: &str) -> StoreResult<Vec<(Uuid, Uuid)>> {
        self.read().fetch_all(Statement::new(SLACK_MEMBERSHIPS).bind(slack_user_id)).await
    }

    async fn save_push_subscription(
        &self,
        row: &PushSubscriptionRow,
        audit: &NewAuditEntry,
    ) -> StoreResult<PushSubscriptionRow> {
        let mut write = self.begin_write().await?;
        let saved = write.fetch_one(Statement::new(SAVE_PUSH_SUBSCRIPTION.as_str()).bind_row(row)).await?;
        self.append_audit_in(&mut write, audit).await?;
        self.commit_write(write, None).await?;
        self.caches().push_subscribers.forget(row.workspace_id);
        Ok(saved)
    }

    async fn push_subscriptions(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<Vec<PushSubscriptionRow>> {
        self.read().fetch_all(Statement::new(PUSH_SUBSCRIPTIONS.as_str()).bind(workspace_id).bind(user_id)).await
    }

    async fn delete_push_subscription(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        id: Uuid,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool> {
        let delete = Statement::new(DELETE_PUSH_SUBSCRIPTION).bind(workspace_id).bind(user_id).bind(id);
        let deleted = self.write_audited(delete, Some(audit)).await?;
        if deleted {
            self.caches().push_subscribers.forget(workspace_id);
        }
        Ok(deleted)
    }

    async fn forget_push_endpoint(&self, workspace_id: Uuid, user_id: Uuid, endpoint: &str) -> StoreResult<()> {
        self.write_alone()
            .execute(Statement::new(FORGET_PUSH_ENDPOINT).bind(workspace_id).bind(user_id).bind(endpoint))
            .await?;
        self.caches().push_subscribers.forget(workspace_id);
        Ok(())
    }

    async fn channel_summary(&self, workspace_id: Uuid, channel: Channel) -> StoreResult<ChannelSummary> {
        let (last_sent_at, waiting): (Option<DateTime<Utc>>, i64) =
            self.read().fetch_one(Statement::new(CHANNEL_SUMMARY).bind(workspace_id).bind(channel)).await?;
        let failure: Option<(DateTime<Utc>, Option<String>)> =
            self.read().fetch_optional(Statement::new(CHANNEL_LAST_FAILURE).bind(workspace_id).bind(channel)).await?;
        let (last_failure_at, last_error) = failure.map_or((None, None), |(at, error)| (Some(at), error));
        Ok(ChannelSummary { last_sent_at, last_failure_at, last_error, waiting })
    }

    async fn push_subscribers(&self, workspace_id: Uuid) -> StoreResult<Vec<Uuid>> {
        let cache = &self.caches().push_subscribers;
        if let Some(subscribers) = cache.fresh(workspace_id) {
            return Ok(subscribers.as_ref().clone());
        }
        let rows: Vec<(Uuid,)> = self.read().fetch_all(Statement::new(PUSH_SUBSCRIBERS).bind(workspace_id)).await?;
        let subscribers = rows.into_iter().map(|(user_id,)| user_id).collect();
        Ok(cache.remember(workspace_id, subscribers).as_ref().clone())
    }

    async fn next_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) = self.read().fetch_one(Statement::new(NEXT_DELIVERY_DUE)).await?;
        Ok(next)
    }

    async fn deliveries_of_question(&self, workspace_id: Uuid, question_id: Uuid) -> StoreResult<Vec<ListedDelivery>> {
        self.read().fetch_all(Statement::new(DELIVERIES_OF_QUESTION).bind(workspace_id).bind(question_id)).await
    }

    async fn notifications(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        query: &NotificationQuery,
    ) -> StoreResult<Vec<ListedNotification>> {
        let mut select =
            Statement::new(notifications_sql(query)).bind(workspace_id).bind(user_id).bind(i64::from(query.limit));
        if let Some((at, id)) = query.before {
            select = select.bind(at).bind(id);
        }
        let rows: Vec<NotificationWithQuestion> = self.read().fetch_all(select).await?;
        Ok(rows.into_iter().map(|row| row.listed(user_id)).collect())
    }

    async fn unread_notifications(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<u32> {
        let (count,): (i64,) =
            self.read().fetch_one(Statement::new(UNREAD_COUNT).bind(workspace_id).bind(user_id)).await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    async fn mark_notification_read(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let marked = self
            .write_alone()
            .execute(Statement::new(MARK_READ).bind(at).bind(workspace_id).bind(user_id).bind(id))
            .await?;
        Ok(marked == 1)
    }

    async fn mark_all_notifications_read(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<u64> {
        self.write_alone().execute(Statement::new(MARK_ALL_READ).bind(at).bind(workspace_id).bind(user_id)).await
    }
}

/// The `SELECT` of a person's notifications with their questions (`$1` workspace, `$2` person, `$3` limit, then
/// `$4`/`$5` the cursor when `before`), newest first.
fn notifications_sql(query: &NotificationQuery) -> String {
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
struct NotificationWithQuestion {
    n_id: Uuid,
    n_created_at: DateTime<Utc>,
    n_read_at: Option<DateTime<Utc>>,
    #[sqlx(flatten)]
    question: QuestionRow,
}

impl NotificationWithQuestion {
    fn listed(self, user_id: Uuid) -> ListedNotification {
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
