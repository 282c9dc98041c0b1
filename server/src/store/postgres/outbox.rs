//! Notifications and the outbox, on PostgreSQL: concurrent claimers, on any instance, skip the deliveries another is
//! claiming instead of queueing behind them, and the claim re-checks that each is still due.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use app::types::Channel;

use super::*;
use crate::store::outbox::*;

#[async_trait]
impl OutboxStore for PostgresStore {
    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRow>> {
        let claimed = sqlx::query_as(&format!(
            "UPDATE deliveries SET claimed_until = $3, attempts = attempts + 1, updated_at = $1 \
             WHERE id IN ({DUE_DELIVERIES} FOR UPDATE SKIP LOCKED) AND (claimed_until IS NULL OR claimed_until <= $1) \
             RETURNING {DELIVERY_COLUMNS}"
        ))
        .bind(now)
        .bind(i64::from(limit))
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        Ok(claimed)
    }

    async fn finish_delivery(&self, d: &DeliveryRow) -> StoreResult<bool> {
        let finished = sqlx::query(FINISH_DELIVERY)
            .bind(d.status)
            .bind(d.next_attempt_at)
            .bind(&d.last_error)
            .bind(d.sent_at)
            .bind(d.updated_at)
            .bind(&d.reference)
            .bind(d.followed_up_at)
            .bind(d.id)
            .bind(d.claimed_until)
            .execute(&self.pool)
            .await?;
        Ok(finished.rows_affected() == 1)
    }

    async fn claim_follow_ups(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRow>> {
        let claimed = sqlx::query_as(&format!(
            "UPDATE deliveries SET claimed_until = $3 WHERE id IN ({DUE_FOLLOW_UPS} FOR UPDATE OF d SKIP LOCKED) \
             AND (claimed_until IS NULL OR claimed_until <= $1) \
             RETURNING {DELIVERY_COLUMNS}"
        ))
        .bind(now)
        .bind(i64::from(limit))
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        Ok(claimed)
    }

    async fn follow_ups_due(&self, now: DateTime<Utc>) -> StoreResult<bool> {
        let due: Option<(Uuid,)> =
            sqlx::query_as(DUE_FOLLOW_UPS).bind(now).bind(1_i64).fetch_optional(&self.pool).await?;
        Ok(due.is_some())
    }

    async fn slack_memberships(&self, slack_user_id: &str) -> StoreResult<Vec<(Uuid, Uuid)>> {
        Ok(sqlx::query_as(SLACK_MEMBERSHIPS).bind(slack_user_id).fetch_all(&self.pool).await?)
    }

    async fn save_push_subscription(
        &self,
        row: &PushSubscriptionRow,
        audit: &NewAuditEntry,
    ) -> StoreResult<PushSubscriptionRow> {
        let mut tx = self.pool.begin().await?;
        let saved = sqlx::query_as(SAVE_PUSH_SUBSCRIPTION)
            .bind(row.id)
            .bind(row.workspace_id)
            .bind(row.user_id)
            .bind(&row.endpoint)
            .bind(&row.p256dh)
            .bind(&row.auth)
            .bind(row.created_at)
            .fetch_one(&mut *tx)
            .await?;
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        self.caches.push_subscribers.forget(row.workspace_id);
        Ok(saved)
    }

    async fn push_subscriptions(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<Vec<PushSubscriptionRow>> {
        Ok(sqlx::query_as(PUSH_SUBSCRIPTIONS).bind(workspace_id).bind(user_id).fetch_all(&self.pool).await?)
    }

    async fn delete_push_subscription(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        id: Uuid,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let deleted =
            sqlx::query(DELETE_PUSH_SUBSCRIPTION).bind(workspace_id).bind(user_id).bind(id).execute(&mut *tx).await?;
        if deleted.rows_affected() != 1 {
            return Ok(false);
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        self.caches.push_subscribers.forget(workspace_id);
        Ok(true)
    }

    async fn forget_push_endpoint(&self, workspace_id: Uuid, user_id: Uuid, endpoint: &str) -> StoreResult<()> {
        sqlx::query(FORGET_PUSH_ENDPOINT).bind(workspace_id).bind(user_id).bind(endpoint).execute(&self.pool).await?;
        self.caches.push_subscribers.forget(workspace_id);
        Ok(())
    }

    async fn channel_summary(&self, workspace_id: Uuid, channel: Channel) -> StoreResult<ChannelSummary> {
        let (last_sent_at, waiting): (Option<DateTime<Utc>>, i64) =
            sqlx::query_as(CHANNEL_SUMMARY).bind(workspace_id).bind(channel).fetch_one(&self.pool).await?;
        let failure: Option<(DateTime<Utc>, Option<String>)> =
            sqlx::query_as(CHANNEL_LAST_FAILURE).bind(workspace_id).bind(channel).fetch_optional(&self.pool).await?;
        let (last_failure_at, last_error) = failure.map_or((None, None), |(at, error)| (Some(at), error));
        Ok(ChannelSummary { last_sent_at, last_failure_at, last_error, waiting })
    }

    async fn push_subscribers(&self, workspace_id: Uuid) -> StoreResult<Vec<Uuid>> {
        if let Some(subscribers) = self.caches.push_subscribers.fresh(workspace_id) {
            return Ok(subscribers.as_ref().clone());
        }
        let rows: Vec<(Uuid,)> = sqlx::query_as(PUSH_SUBSCRIBERS).bind(workspace_id).fetch_all(&self.pool).await?;
        let subscribers = rows.into_iter().map(|(user_id,)| user_id).collect();
        Ok(self.caches.push_subscribers.remember(workspace_id, subscribers).as_ref().clone())
    }

    async fn next_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) = sqlx::query_as(NEXT_DELIVERY_DUE).fetch_one(&self.pool).await?;
        Ok(next)
    }

    async fn deliveries_of_question(&self, workspace_id: Uuid, question_id: Uuid) -> StoreResult<Vec<ListedDelivery>> {
        let rows =
            sqlx::query_as(DELIVERIES_OF_QUESTION).bind(workspace_id).bind(question_id).fetch_all(&self.pool).await?;
        Ok(rows)
    }

    async fn notifications(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        query: &NotificationQuery,
    ) -> StoreResult<Vec<ListedNotification>> {
        let sql = notifications_sql(query);
        let mut select = sqlx::query_as::<_, NotificationWithQuestion>(&sql)
            .bind(workspace_id)
            .bind(user_id)
            .bind(i64::from(query.limit));
        if let Some((at, id)) = query.before {
            select = select.bind(at).bind(id);
        }
        let rows = select.fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(|row| row.listed(user_id)).collect())
    }

    async fn unread_notifications(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<u32> {
        let (count,): (i64,) =
            sqlx::query_as(UNREAD_COUNT).bind(workspace_id).bind(user_id).fetch_one(&self.pool).await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    async fn mark_notification_read(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let marked =
            sqlx::query(MARK_READ).bind(at).bind(workspace_id).bind(user_id).bind(id).execute(&self.pool).await?;
        Ok(marked.rows_affected() == 1)
    }

    async fn mark_all_notifications_read(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let marked = sqlx::query(MARK_ALL_READ).bind(at).bind(workspace_id).bind(user_id).execute(&self.pool).await?;
        Ok(marked.rows_affected())
    }
}
