//! Webhooks, on SQLite: every write goes through the one writer, so a claim is exactly once.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::*;
use crate::store::webhooks::*;

#[async_trait]
impl WebhookStore for SqliteStore {
    async fn webhooks(&self, workspace_id: Uuid) -> StoreResult<Vec<WebhookRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE workspace_id = $1 ORDER BY created_at, id"
        ))
        .bind(workspace_id)
        .fetch_all(&self.read)
        .await?)
    }

    fn webhook_cache(&self) -> &ReadCache<Vec<WebhookRow>> {
        &self.caches.webhooks
    }

    async fn webhook(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<WebhookRow>> {
        Ok(sqlx::query_as(&format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE workspace_id = $1 AND id = $2"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.read)
            .await?)
    }

    async fn create_webhook(&self, row: &WebhookRow, audit: &NewAuditEntry) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(INSERT_WEBHOOK)
            .bind(row.id)
            .bind(row.workspace_id)
            .bind(&row.url)
            .bind(&row.events)
            .bind(&row.description)
            .bind(&row.secret)
            .bind(row.created_at)
            .bind(row.updated_at)
            .bind(row.disabled_at)
            .bind(&row.disabled_reason)
            .execute(&mut *tx)
            .await?;
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        self.caches.webhooks.forget(row.workspace_id);
        Ok(())
    }

    async fn update_webhook(&self, row: &WebhookRow, audit: Option<&NewAuditEntry>) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let updated = sqlx::query(UPDATE_WEBHOOK)
            .bind(&row.url)
            .bind(&row.events)
            .bind(&row.description)
            .bind(row.updated_at)
            .bind(row.disabled_at)
            .bind(&row.disabled_reason)
            .bind(row.workspace_id)
            .bind(row.id)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() != 1 {
            return Ok(false);
        }
        if let Some(audit) = audit {
            self.append_audit_in(&mut tx, audit).await?;
        }
        tx.commit().await?;
        self.caches.webhooks.forget(row.workspace_id);
        Ok(true)
    }

    async fn delete_webhook(&self, workspace_id: Uuid, id: Uuid, audit: &NewAuditEntry) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM webhook_deliveries WHERE workspace_id = $1 AND webhook_id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query("DELETE FROM webhooks WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if deleted.rows_affected() != 1 {
            return Ok(false);
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        self.caches.webhooks.forget(workspace_id);
        Ok(true)
    }

    async fn callback_secret(&self, workspace_id: Uuid) -> StoreResult<Option<CallbackSecretRow>> {
        Ok(sqlx::query_as("SELECT workspace_id, secret, created_at FROM callback_secrets WHERE workspace_id = $1")
            .bind(workspace_id)
            .fetch_optional(&self.read)
            .await?)
    }

    async fn save_callback_secret(
        &self,
        row: &CallbackSecretRow,
        audit: Option<&NewAuditEntry>,
    ) -> StoreResult<CallbackSecretRow> {
        let mut tx = self.begin_write().await?;
        let on_conflict = if audit.is_some() {
            "DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at"
        } else {
            "DO UPDATE SET secret = callback_secrets.secret"
        };
        let saved = sqlx::query_as(&format!(
            "INSERT INTO callback_secrets (workspace_id, secret, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (workspace_id) {on_conflict} RETURNING workspace_id, secret, created_at"
        ))
        .bind(row.workspace_id)
        .bind(&row.secret)
        .bind(row.created_at)
        .fetch_one(&mut *tx)
        .await?;
        if let Some(audit) = audit {
            self.append_audit_in(&mut tx, audit).await?;
        }
        tx.commit().await?;
        Ok(saved)
    }

    async fn queue_webhook_deliveries(
        &self,
        deliveries: &[WebhookDeliveryRow],
        cursor: Option<i64>,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for d in deliveries {
            sqlx::query(QUEUE_DELIVERY)
                .bind(d.id)
                .bind(d.workspace_id)
                .bind(d.webhook_id)
                .bind(&d.endpoint)
                .bind(&d.url)
                .bind(d.sequence)
                .bind(&d.message_id)
                .bind(&d.event_type)
                .bind(&d.body)
                .bind(d.status)
                .bind(d.attempts)
                .bind(d.next_attempt_at)
                .bind(d.claimed_until)
                .bind(&d.last_error)
                .bind(d.response_status)
                .bind(d.sent_at)
                .bind(d.created_at)
                .bind(d.updated_at)
                .bind(d.give_up_at)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(cursor) = cursor {
            sqlx::query(ADVANCE_CURSOR).bind(cursor).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn webhook_cursor(&self) -> StoreResult<Option<i64>> {
        let cursor: Option<(i64,)> =
            sqlx::query_as("SELECT event_id FROM webhook_cursor WHERE id = 1").fetch_optional(&self.read).await?;
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
             WHERE id IN ({}) RETURNING {DELIVERY_COLUMNS}",
            due_heads(queue.is_some())
        );
        let mut claim = sqlx::query_as(&sql).bind(now).bind(i64::from(limit)).bind(until);
        if let Some(queue) = queue {
            claim = claim.bind(queue.workspace_id).bind(queue.endpoint);
        }
        Ok(claim.fetch_all(&self.write).await?)
    }

    async fn finish_webhook_delivery(&self, d: &WebhookDeliveryRow) -> StoreResult<bool> {
        let finished = sqlx::query(FINISH_DELIVERY)
            .bind(d.status)
            .bind(d.next_attempt_at)
            .bind(&d.last_error)
            .bind(d.response_status)
            .bind(d.sent_at)
            .bind(d.updated_at)
            .bind(d.id)
            .bind(d.claimed_until)
            .execute(&self.write)
            .await?;
        Ok(finished.rows_affected() == 1)
    }

    async fn endpoint_gone(
        &self,
        queue: QueueKey<'_>,
        webhook_id: Option<Uuid>,
        at: DateTime<Utc>,
        reason: &str,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(GIVE_UP_ENDPOINT)
            .bind(at)
            .bind(reason)
            .bind(queue.workspace_id)
            .bind(queue.endpoint)
            .execute(&mut *tx)
            .await?;
        let mut workspace = None;
        if let Some(id) = webhook_id {
            let disabled: Option<(Uuid,)> = sqlx::query_as(
                "UPDATE webhooks SET disabled_at = $1, disabled_reason = $2, updated_at = $1 \
                 WHERE id = $3 AND disabled_at IS NULL RETURNING workspace_id",
            )
            .bind(at)
            .bind(reason)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            workspace = disabled.map(|(workspace_id,)| workspace_id);
        }
        tx.commit().await?;
        if let Some(workspace_id) = workspace {
            self.caches.webhooks.forget(workspace_id);
        }
        Ok(())
    }

    async fn next_webhook_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) = sqlx::query_as(NEXT_DUE).fetch_one(&self.read).await?;
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
        let mut select = sqlx::query_as(&sql).bind(workspace_id).bind(webhook_id).bind(i64::from(limit));
        if let Some((at, id)) = before {
            select = select.bind(at).bind(id);
        }
        Ok(select.fetch_all(&self.read).await?)
    }

    async fn webhook_delivery(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<WebhookDeliveryRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.read)
        .await?)
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
        let mut tx = self.begin_write().await?;
        let queued = sqlx::query(REDELIVER)
            .bind(at)
            .bind(give_up_at)
            .bind(workspace_id)
            .bind(webhook_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if queued.rows_affected() != 1 {
            return Ok(false);
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }
}
