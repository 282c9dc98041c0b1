//! Webhooks as stored: each workspace's subscriptions, its callback secret, the deliveries of events to
//! endpoints, and how far the event log has been queued; with the SQL both backends use, and the [`WebhookStore`]
//! trait with its one implementation for both.
//!
//! A queue is a workspace's endpoint (`workspace_id`, `endpoint`): a subscription, or a URL the workspace's questions
//! name as their callback. Its deliveries are sent one at a time, oldest first: only its head (the queued delivery
//! with the lowest `sequence`) is ever claimed, so a receiver that fails holds its own queue back, in order, and
//! nobody else's. Two workspaces naming the same callback URL have a queue each: the receiver may refuse one
//! workspace's signature for days (or answer it `410 Gone`) and the other's callbacks still go.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use holdpoint_types::{DeliveryStatus, EventType};

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::{Bind, TableRow, table_row};
use super::{NewAuditEntry, StoreResult};

table_row!(WEBHOOK_COLUMNS = WebhookRow in "webhooks": id, workspace_id, url, events, description, secret, created_at,
    updated_at, disabled_at, disabled_reason);
/// Writes a subscription's changeable columns (`$1` url, `$2` events, `$3` description, `$4` updated_at, `$5`
/// disabled_at, `$6` disabled_reason; `$7` workspace, `$8` id).
const UPDATE_WEBHOOK: &str = "UPDATE webhooks SET url = $1, events = $2, description = $3, \
     updated_at = $4, disabled_at = $5, disabled_reason = $6 WHERE workspace_id = $7 AND id = $8";
/// Points the deliveries still waiting in a subscription's queue (`$2` workspace, `$3` subscription) at its URL `$1`.
const REDIRECT_WAITING_DELIVERIES: &str = "UPDATE webhook_deliveries SET url = $1 \
     WHERE workspace_id = $2 AND webhook_id = $3 AND (status = 'queued' OR status = 'retrying')";
table_row!(DELIVERY_COLUMNS = WebhookDeliveryRow in "webhook_deliveries": id, workspace_id, webhook_id, endpoint, url,
    sequence, message_id, event_type, body, status, attempts, next_attempt_at, claimed_until, last_error,
    response_status, sent_at, created_at, updated_at, give_up_at);
/// Queues a delivery, unless its endpoint has that message already (another instance queued the event, or this one
/// before a restart).
static QUEUE_DELIVERY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("{} ON CONFLICT (endpoint, message_id) DO NOTHING", WebhookDeliveryRow::insert())
});
/// The condition that the pending delivery `d` heads its queue (no delivery of the same workspace's endpoint is
/// still to send before it) and that its subscription, if it has one, is not disabled: what a claim may take, once
/// due and unclaimed. A macro, so that the statements below are written with it as literals.
macro_rules! heads_an_enabled_queue {
    () => {
        "NOT EXISTS (SELECT 1 FROM webhook_deliveries e \
         WHERE e.workspace_id = d.workspace_id AND e.endpoint = d.endpoint \
         AND (e.status = 'queued' OR e.status = 'retrying') \
         AND (e.sequence < d.sequence OR (e.sequence = d.sequence AND e.id < d.id))) \
         AND NOT EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.disabled_at IS NOT NULL)"
    };
}

/// The heads of the queues due at `$1` and not claimed by a live worker, soonest first (at most `$2`): the oldest
/// delivery still to send of each workspace's endpoint, unless its subscription is disabled. `{queue}` is empty or
/// narrows it to one queue (`$4` workspace, `$5` endpoint).
const DUE_HEADS: &str = concat!(
    "SELECT d.id FROM webhook_deliveries d \
     WHERE (d.status = 'queued' OR d.status = 'retrying') AND d.next_attempt_at <= $1 \
     AND (d.claimed_until IS NULL OR d.claimed_until <= $1){queue} AND ",
    heads_an_enabled_queue!(),
    " ORDER BY d.next_attempt_at LIMIT $2"
);
/// Writes an attempt's outcome and releases the claim (`$1` status, `$2` next_attempt_at, `$3` last_error, `$4`
/// response_status, `$5` sent_at, `$6` updated_at; `$7` id, `$8` the claim).
const FINISH_DELIVERY: &str = "UPDATE webhook_deliveries SET status = $1, next_attempt_at = $2, \
     last_error = $3, response_status = $4, sent_at = $5, updated_at = $6, claimed_until = NULL \
     WHERE id = $7 AND claimed_until = $8";
/// Gives up every delivery still to send in the queue of an endpoint that said it is gone (`$1` at, `$2` why, `$3`
/// workspace, `$4` endpoint).
const GIVE_UP_ENDPOINT: &str = "UPDATE webhook_deliveries SET status = 'failed', last_error = $2, \
     updated_at = $1, claimed_until = NULL \
     WHERE workspace_id = $3 AND endpoint = $4 AND (status = 'queued' OR status = 'retrying')";
/// When a claim could next take a delivery: the soonest, over the heads of the enabled queues, of the later of a
/// head's next attempt and the end of a claim on it (a head being sent is taken again only if its sender stalls).
/// Deliveries behind a head wait for it to be done with, and a disabled subscription's for it to be enabled, so
/// neither counts: the claim loop, which sleeps until then, would otherwise wake every few milliseconds while a
/// slow receiver holds its queue's head, and for good once a subscription with deliveries due was disabled.
const NEXT_DUE: &str = concat!(
    "SELECT MIN(CASE WHEN d.claimed_until > d.next_attempt_at THEN d.claimed_until ELSE d.next_attempt_at END) \
     FROM webhook_deliveries d WHERE (d.status = 'queued' OR d.status = 'retrying') AND ",
    heads_an_enabled_queue!()
);
/// Queues a delivery again (`$1` at, `$2` give_up_at; `$3` workspace, `$4` subscription, `$5` id), unless it is
/// being sent right now. Its attempts start over, and with them its retries (about 1 s, 5 s, 30 s, ...).
const REDELIVER: &str = "UPDATE webhook_deliveries SET status = 'queued', next_attempt_at = $1, \
     give_up_at = $2, updated_at = $1, last_error = NULL, claimed_until = NULL, attempts = 0 \
     WHERE workspace_id = $3 AND webhook_id = $4 AND id = $5 AND (claimed_until IS NULL OR claimed_until <= $1)";
/// Raises the cursor to `$1` (never lowers it: another instance may be ahead).
const ADVANCE_CURSOR: &str = "INSERT INTO webhook_cursor (id, event_id) VALUES (1, $1) \
     ON CONFLICT (id) DO UPDATE SET event_id = excluded.event_id WHERE webhook_cursor.event_id < excluded.event_id";

/// [`DUE_HEADS`] for every queue, or for one (`$4` workspace, `$5` endpoint).
fn due_heads(one_queue: bool) -> String {
    DUE_HEADS.replace("{queue}", if one_queue { " AND d.workspace_id = $4 AND d.endpoint = $5" } else { "" })
}

/// One queue of deliveries: a workspace's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueKey<'a> {
    pub workspace_id: Uuid,
    /// The subscription's id, or the callback URL.
    pub endpoint: &'a str,
}

impl WebhookDeliveryRow {
    /// The queue the delivery is in.
    pub fn queue(&self) -> QueueKey<'_> {
        QueueKey { workspace_id: self.workspace_id, endpoint: &self.endpoint }
    }
}

/// A workspace's subscription.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct WebhookRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub url: String,
    pub events: Json<Vec<EventType>>,
    pub description: String,
    /// `whsec_…`: kept, since every delivery is signed with it.
    pub secret: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
    pub disabled_reason: Option<String>,
}

/// The secret a workspace's callbacks are signed with.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CallbackSecretRow {
    pub workspace_id: Uuid,
    pub secret: String,
    pub created_at: DateTime<Utc>,
}

/// One message to one endpoint.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct WebhookDeliveryRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    /// The subscription; `None` for a question's callback URL.
    pub webhook_id: Option<Uuid>,
    /// Whose queue it is in, with `workspace_id`: the subscription's id, or the callback URL.
    pub endpoint: String,
    pub url: String,
    /// Its place in the endpoint's queue: the event's id.
    pub sequence: i64,
    /// The `webhook-id` header.
    pub message_id: String,
    pub event_type: String,
    pub body: String,
    pub status: DeliveryStatus,
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub claimed_until: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub response_status: Option<i32>,
    pub sent_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub give_up_at: DateTime<Utc>,
}

/// Webhooks. Implemented by both stores.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// A workspace's subscriptions, oldest first.
    async fn webhooks(&self, workspace_id: Uuid) -> StoreResult<Vec<WebhookRow>>;
    /// A workspace's subscriptions as read within the read cache's TTL: what each event is matched against.
    async fn webhooks_cached(&self, workspace_id: Uuid) -> StoreResult<std::sync::Arc<Vec<WebhookRow>>>;
    async fn webhook(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<WebhookRow>>;
    /// Stores a new subscription with the audit entry recording it.
    async fn create_webhook(&self, row: &WebhookRow, audit: &NewAuditEntry) -> StoreResult<()>;
    /// Writes a subscription's changed columns, with the audit entry (if any) recording it; `false` if it is gone.
    async fn update_webhook(&self, row: &WebhookRow, audit: Option<&NewAuditEntry>) -> StoreResult<bool>;
    /// Removes a subscription and its deliveries, with the audit entry; `false` (nothing written) if it is gone.
    async fn delete_webhook(&self, workspace_id: Uuid, id: Uuid, audit: &NewAuditEntry) -> StoreResult<bool>;
    async fn callback_secret(&self, workspace_id: Uuid) -> StoreResult<Option<CallbackSecretRow>>;
    /// Stores a workspace's callback secret: the first one (`audit` none: kept only if there is none yet, and the
    /// one kept returned), or a new one replacing it, with the audit entry.
    async fn save_callback_secret(
        &self,
        row: &CallbackSecretRow,
        audit: Option<&NewAuditEntry>,
    ) -> StoreResult<CallbackSecretRow>;
    /// Queues deliveries (those an endpoint has already are skipped) and raises the cursor to `cursor`, if given,
    /// in one transaction.
    async fn queue_webhook_deliveries(&self, deliveries: &[WebhookDeliveryRow], cursor: Option<i64>)
    -> StoreResult<()>;
    /// How far the event log has been queued, if it ever was.
    async fn webhook_cursor(&self) -> StoreResult<Option<i64>>;
    /// Claims the heads of the queues due at `now` (of one queue, or of all), until `until`, counting the attempt:
    /// each to one worker at a time, across instances.
    async fn claim_webhook_heads(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
        queue: Option<QueueKey<'_>>,
    ) -> StoreResult<Vec<WebhookDeliveryRow>>;
    /// Writes an attempt's outcome (`status`, `next_attempt_at`, `last_error`, `response_status`, `sent_at`,
    /// `updated_at`) and releases the claim; `false` if the claim was lost meanwhile.
    async fn finish_webhook_delivery(&self, delivery: &WebhookDeliveryRow) -> StoreResult<bool>;
    /// Gives up everything still to send in `queue` (its endpoint answered `410 Gone`), and disables its
    /// subscription if it is one.
    async fn endpoint_gone(
        &self,
        queue: QueueKey<'_>,
        webhook_id: Option<Uuid>,
        at: DateTime<Utc>,
        reason: &str,
    ) -> StoreResult<()>;
    /// When a claim could next take a delivery (see [`NEXT_DUE`]): the soonest of the enabled queues' heads, a head
    /// being sent when its claim ends; `None` with nothing a claim could ever take.
    async fn next_webhook_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>>;
    /// A subscription's deliveries, newest first: those created before `before` (`created_at`, `id`), at most
    /// `limit`.
    async fn webhook_deliveries(
        &self,
        workspace_id: Uuid,
        webhook_id: Uuid,
        before: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> StoreResult<Vec<WebhookDeliveryRow>>;
    async fn webhook_delivery(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<WebhookDeliveryRow>>;
    /// Queues a subscription's delivery again at `at`, to be given up at `give_up_at`, with the audit entry; `false`
    /// (nothing written) if there is no such delivery or it is being sent right now.
    async fn redeliver_webhook(
        &self,
        workspace_id: Uuid,
        webhook_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        give_up_at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool>;
}

#[async_trait]
impl<B: SqlBackend> WebhookStore for B {
    async fn webhooks(&self, workspace_id: Uuid) -> StoreResult<Vec<WebhookRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE workspace_id = $1 ORDER BY created_at, id"
                ))
                .bind(workspace_id),
            )
            .await
    }

    async fn webhooks_cached(&self, workspace_id: Uuid) -> StoreResult<std::sync::Arc<Vec<WebhookRow>>> {
        let cache = &self.caches().webhooks;
        match cache.fresh(workspace_id) {
            Some(webhooks) => Ok(webhooks),
            None => Ok(cache.remember(workspace_id, self.webhooks(workspace_id).await?)),
        }
    }

    async fn webhook(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<WebhookRow>> {
        self.read().fetch_optional(Statement::by_id(WEBHOOK_COLUMNS, "webhooks", workspace_id, id)).await
    }

    async fn create_webhook(&self, row: &WebhookRow, audit: &NewAuditEntry) -> StoreResult<()> {
        let insert = Statement::insert(row);
        self.write_audited(insert, Some(audit)).await?;
        self.caches().webhooks.forget(row.workspace_id);
        Ok(())
    }

    async fn update_webhook(&self, row: &WebhookRow, audit: Option<&NewAuditEntry>) -> StoreResult<bool> {
        let update = Statement::new(UPDATE_WEBHOOK)
            .bind(&row.url)
            .bind(&row.events)
            .bind(&row.description)
            .bind(row.updated_at)
            .bind(row.disabled_at)
            .bind(&row.disabled_reason)
            .bind(row.workspace_id)
            .bind(row.id);
        let mut write = self.begin_write().await?;
        if write.execute(update).await? == 0 {
            self.rollback_write(write).await?;
            return Ok(false);
        }
        // What still waits in the queue goes to the address the endpoint has now; what was sent or given up keeps
        // the address it went to.
        write
            .execute(Statement::new(REDIRECT_WAITING_DELIVERIES).bind(&row.url).bind(row.workspace_id).bind(row.id))
            .await?;
        if let Some(audit) = audit {
            self.append_audit_in(&mut write, audit).await?;
        }
        self.commit_write(write, None).await?;
        self.caches().webhooks.forget(row.workspace_id);
        Ok(true)
    }

    async fn delete_webhook(&self, workspace_id: Uuid, id: Uuid, audit: &NewAuditEntry) -> StoreResult<bool> {
        let mut write = self.begin_write().await?;
        write
            .execute(
                Statement::new("DELETE FROM webhook_deliveries WHERE workspace_id = $1 AND webhook_id = $2")
                    .bind(workspace_id)
                    .bind(id),
            )
            .await?;
        let deleted = write
            .execute(
                Statement::new("DELETE FROM webhooks WHERE workspace_id = $1 AND id = $2").bind(workspace_id).bind(id),
            )
            .await?;
        if deleted != 1 {
            return Ok(false);
        }
        self.append_audit_in(&mut write, audit).await?;
        self.commit_write(write, None).await?;
        self.caches().webhooks.forget(workspace_id);
        Ok(true)
    }

    async fn callback_secret(&self, workspace_id: Uuid) -> StoreResult<Option<CallbackSecretRow>> {
        self.read()
            .fetch_optional(
                Statement::new("SELECT workspace_id, secret, created_at FROM callback_secrets WHERE workspace_id = $1")
                    .bind(workspace_id),
            )
            .await
    }

    async fn save_callback_secret(
        &self,
        row: &CallbackSecretRow,
        audit: Option<&NewAuditEntry>,
    ) -> StoreResult<CallbackSecretRow> {
        let mut write = self.begin_write().await?;
        let on_conflict = if audit.is_some() {
            "DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at"
        } else {
            "DO UPDATE SET secret = callback_secrets.secret"
        };
        let saved = write
            .fetch_one(
                Statement::new(format!(
                    "INSERT INTO callback_secrets (workspace_id, secret, created_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (workspace_id) {on_conflict} RETURNING workspace_id, secret, created_at"
                ))
                .bind(row.workspace_id)
                .bind(&row.secret)
                .bind(row.created_at),
            )
            .await?;
        if let Some(audit) = audit {
            self.append_audit_in(&mut write, audit).await?;
        }
        self.commit_write(write, None).await?;
        Ok(saved)
    }

    async fn queue_webhook_deliveries(
        &self,
        deliveries: &[WebhookDeliveryRow],
        cursor: Option<i64>,
    ) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        for d in deliveries {
            write.execute(Statement::new(QUEUE_DELIVERY.as_str()).bind_row(d)).await?;
        }
        if let Some(cursor) = cursor {
            write.execute(Statement::new(ADVANCE_CURSOR).bind(cursor)).await?;
        }
        self.commit_write(write, None).await?;
        Ok(())
    }

    async fn webhook_cursor(&self) -> StoreResult<Option<i64>> {
        let cursor: Option<(i64,)> =
            self.read().fetch_optional(Statement::new("SELECT event_id FROM webhook_cursor WHERE id = 1")).await?;
        Ok(cursor.map(|(id,)| id))
    }

    async fn claim_webhook_heads(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
        queue: Option<QueueKey<'_>>,
    ) -> StoreResult<Vec<WebhookDeliveryRow>> {
        let sql = format!(
            "UPDATE webhook_deliveries SET claimed_until = $3, attempts = attempts + 1, updated_at = $1 \
             WHERE {} RETURNING {DELIVERY_COLUMNS}",
            B::claimable(&due_heads(queue.is_some()), Some("d"))
        );
        let mut claim = Statement::new(sql).bind(now).bind(i64::from(limit)).bind(until);
        if let Some(queue) = queue {
            claim = claim.bind(queue.workspace_id).bind(queue.endpoint);
        }
        self.write_alone().fetch_all(claim).await
    }

    async fn finish_webhook_delivery(&self, d: &WebhookDeliveryRow) -> StoreResult<bool> {
        let finished = self
            .write_alone()
            .execute(
                Statement::new(FINISH_DELIVERY)
                    .bind(d.status)
                    .bind(d.next_attempt_at)
                    .bind(&d.last_error)
                    .bind(d.response_status)
                    .bind(d.sent_at)
                    .bind(d.updated_at)
                    .bind(d.id)
                    .bind(d.claimed_until),
            )
            .await?;
        Ok(finished == 1)
    }

    async fn endpoint_gone(
        &self,
        queue: QueueKey<'_>,
        webhook_id: Option<Uuid>,
        at: DateTime<Utc>,
        reason: &str,
    ) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        write
            .execute(
                Statement::new(GIVE_UP_ENDPOINT).bind(at).bind(reason).bind(queue.workspace_id).bind(queue.endpoint),
            )
            .await?;
        let mut workspace = None;
        if let Some(id) = webhook_id {
            let disabled: Option<(Uuid,)> = write
                .fetch_optional(
                    Statement::new(
                        "UPDATE webhooks SET disabled_at = $1, disabled_reason = $2, updated_at = $1 \
                         WHERE id = $3 AND disabled_at IS NULL RETURNING workspace_id",
                    )
                    .bind(at)
                    .bind(reason)
                    .bind(id),
                )
                .await?;
            workspace = disabled.map(|(workspace_id,)| workspace_id);
        }
        self.commit_write(write, None).await?;
        if let Some(workspace_id) = workspace {
            self.caches().webhooks.forget(workspace_id);
        }
        Ok(())
    }

    async fn next_webhook_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) = self.read().fetch_one(Statement::new(NEXT_DUE)).await?;
        Ok(next)
    }

    async fn webhook_deliveries(
        &self,
        workspace_id: Uuid,
        webhook_id: Uuid,
        before: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> StoreResult<Vec<WebhookDeliveryRow>> {
        let after_cursor =
            if before.is_some() { " AND (created_at < $4 OR (created_at = $4 AND id < $5))" } else { "" };
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE workspace_id = $1 AND webhook_id = $2\
             {after_cursor} ORDER BY created_at DESC, id DESC LIMIT $3"
        );
        let mut select = Statement::new(sql).bind(workspace_id).bind(webhook_id).bind(i64::from(limit));
        if let Some((at, id)) = before {
            select = select.bind(at).bind(id);
        }
        self.read().fetch_all(select).await
    }

    async fn webhook_delivery(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<WebhookDeliveryRow>> {
        self.read().fetch_optional(Statement::by_id(DELIVERY_COLUMNS, "webhook_deliveries", workspace_id, id)).await
    }

    async fn redeliver_webhook(
        &self,
        workspace_id: Uuid,
        webhook_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        give_up_at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool> {
        let redeliver =
            Statement::new(REDELIVER).bind(at).bind(give_up_at).bind(workspace_id).bind(webhook_id).bind(id);
        self.write_audited(redeliver, Some(audit)).await
    }
}
