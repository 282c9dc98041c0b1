//! Escalation policies and steps, on SQLite.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::*;
use crate::store::escalation::*;
use crate::store::outbox::INSERT_DELIVERY;

#[async_trait]
impl EscalationStore for SqliteStore {
    async fn escalation_policies(&self, workspace_id: Uuid) -> StoreResult<Vec<EscalationPolicyRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {POLICY_COLUMNS} FROM escalation_policies WHERE workspace_id = $1 ORDER BY kind, urgency"
        ))
        .bind(workspace_id)
        .fetch_all(&self.read)
        .await?)
    }

    fn policy_cache(&self) -> &ReadCache<Vec<EscalationPolicyRow>> {
        &self.escalation_policies
    }

    async fn replace_escalation_policies(
        &self,
        workspace_id: Uuid,
        policies: &[EscalationPolicyRow],
        audit: &NewAuditEntry,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM escalation_policies WHERE workspace_id = $1")
            .bind(workspace_id)
            .execute(&mut *tx)
            .await?;
        for policy in policies {
            sqlx::query(INSERT_POLICY)
                .bind(policy.workspace_id)
                .bind(policy.kind)
                .bind(policy.urgency)
                .bind(policy.remind_after_seconds)
                .bind(policy.escalate_after_seconds)
                .bind(&policy.escalate_to)
                .bind(policy.updated_at)
                .execute(&mut *tx)
                .await?;
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        self.escalation_policies.forget(workspace_id);
        Ok(())
    }

    async fn due_escalations(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<QuestionRow>> {
        Ok(sqlx::query_as(&DUE_ESCALATIONS).bind(now).bind(limit).fetch_all(&self.read).await?)
    }

    async fn next_escalation_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) = sqlx::query_as(NEXT_ESCALATION_DUE).fetch_one(&self.read).await?;
        Ok(next)
    }

    async fn take_escalation_step(&self, step: &EscalationTransition) -> StoreResult<bool> {
        let question = &step.question;
        let mut tx = self.begin_write().await?;
        let taken: Option<(Uuid,)> = sqlx::query_as(TAKE_ESCALATION_STEP)
            .bind(&question.assignee)
            .bind(&question.escalation)
            .bind(question.next_escalation_at)
            .bind(question.updated_at)
            .bind(question.workspace_id)
            .bind(question.id)
            .bind(step.due_at)
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_none() {
            return Ok(false);
        }
        let event_id = self.append_event_and_audit(&mut tx, &step.event, &step.audit).await?;
        write_reach(&mut tx, &step.reach).await?;
        self.commit_events(tx, Some(event_id)).await?;
        Ok(true)
    }
}

/// Writes whom a change reaches, in the change's transaction: their notifications (marked unread again where they
/// had one) and its deliveries.
pub(super) async fn write_reach(connection: &mut sqlx::SqliteConnection, reach: &Reach) -> StoreResult<()> {
    for notification in &reach.notifications {
        Bind::bind_notification(sqlx::query(NOTIFY_AGAIN), notification).execute(&mut *connection).await?;
    }
    for delivery in &reach.deliveries {
        Bind::bind_delivery(sqlx::query(INSERT_DELIVERY), delivery).execute(&mut *connection).await?;
    }
    Ok(())
}
