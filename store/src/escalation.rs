//! Escalation as stored: each workspace's policies, and the steps questions take by them, with the SQL
//! both backends use.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use holdpoint_types::{Assignee, QuestionKind, Urgency};

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::{Bind, QUESTION_COLUMNS, TableRow, table_row};
use super::{DeliveryRow, NewAuditEntry, NewEvent, NotificationRow, QuestionRow, Reach, StoreResult};

table_row!(POLICY_COLUMNS = EscalationPolicyRow in "escalation_policies": workspace_id, kind, urgency,
    remind_after_seconds, escalate_after_seconds, escalate_to, updated_at);
/// Takes a question's escalation step: its new assignee (`$1`), plan (`$2`), next step's time (`$3`) and claim
/// (`$8`–`$10`, ended when its holder is not among the new assignees) at `$4`, if it is still pending and its next
/// step is still the one due at `$7` (`$5` workspace, `$6` id). Whoever takes the step
/// first changes the row; every other instance's try changes nothing. The step is a change of the pending question
/// like a claim: it moves the revision on, so a claim or an approval decided from the row before it is decided again
/// (and cannot write the old assignee back).
pub(super) const TAKE_ESCALATION_STEP: &str = "UPDATE questions SET assignee = $1, escalation = $2, \
     next_escalation_at = $3, updated_at = $4, claimed_by = $8, claim_expires_at = $9, claimed_by_id = $10, \
     revision = revision + 1 WHERE workspace_id = $5 AND id = $6 AND status = 'pending' AND next_escalation_at = $7 \
     RETURNING id";
/// A person's notification of a question, or, when they have one already, that one marked unread and moved to the
/// top of their list: a reminder or an escalation reaches them again.
pub(super) static NOTIFY_AGAIN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} ON CONFLICT (question_id, user_id) DO UPDATE SET read_at = NULL, created_at = excluded.created_at",
        NotificationRow::insert()
    )
});
/// A delivery a change of a pending question queues. A person it reached for the same cause on the same channel
/// already (a delegate handed the question, then an escalation to a role of theirs) keeps the one delivery: their
/// notification comes back unread, and they are not sent the same message twice.
pub(super) static INSERT_DELIVERY_ONCE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("{} ON CONFLICT (question_id, user_id, channel, cause) DO NOTHING", DeliveryRow::insert())
});
/// Pending questions whose next escalation step is due at `$1`, soonest first (at most `$2`).
pub(super) static DUE_ESCALATIONS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {} FROM questions WHERE status = 'pending' AND next_escalation_at IS NOT NULL \
         AND next_escalation_at <= $1 ORDER BY next_escalation_at LIMIT $2",
        QUESTION_COLUMNS
    )
});
/// When the soonest escalation step of a pending question is due.
pub(super) const NEXT_ESCALATION_DUE: &str =
    "SELECT MIN(next_escalation_at) FROM questions WHERE status = 'pending' AND next_escalation_at IS NOT NULL";

/// A workspace's policy for questions of one kind and urgency.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct EscalationPolicyRow {
    pub workspace_id: Uuid,
    pub kind: QuestionKind,
    pub urgency: Urgency,
    pub remind_after_seconds: Option<i64>,
    pub escalate_after_seconds: Option<i64>,
    pub escalate_to: Option<Json<Assignee>>,
    pub updated_at: DateTime<Utc>,
}

/// A question's escalation step, decided whole: the question as the step leaves it, its event and audit entry, and
/// who it reaches. Written only if the question is still pending and `due_at` is still its next step's time.
#[derive(Debug, Clone)]
pub struct EscalationTransition {
    pub question: QuestionRow,
    pub due_at: DateTime<Utc>,
    pub event: NewEvent,
    pub audit: NewAuditEntry,
    pub reach: Reach,
}

/// Escalation policies and steps. Implemented by both stores.
#[async_trait]
pub trait EscalationStore: Send + Sync {
    /// A workspace's policies, by kind and urgency.
    async fn escalation_policies(&self, workspace_id: Uuid) -> StoreResult<Vec<EscalationPolicyRow>>;
    /// The policy for questions of `kind` and `urgency` in a workspace, if it has one, from the policies read within
    /// the read cache's TTL.
    async fn escalation_policy(
        &self,
        workspace_id: Uuid,
        kind: QuestionKind,
        urgency: Urgency,
    ) -> StoreResult<Option<EscalationPolicyRow>>;
    /// Replaces a workspace's policies with `policies`, with the audit entry recording it.
    async fn replace_escalation_policies(
        &self,
        workspace_id: Uuid,
        policies: &[EscalationPolicyRow],
        audit: &NewAuditEntry,
    ) -> StoreResult<()>;
    /// Pending questions whose next escalation step is due at `now`, soonest first.
    async fn due_escalations(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<QuestionRow>>;
    /// When the soonest escalation step is due.
    async fn next_escalation_due(&self) -> StoreResult<Option<DateTime<Utc>>>;
    /// Writes a step with its event, audit entry, notifications and deliveries, in one transaction; `false` (and
    /// nothing written) if the question left `pending` or another instance took the step first.
    async fn take_escalation_step(&self, step: &EscalationTransition) -> StoreResult<bool>;
}

#[async_trait]
impl<B: SqlBackend> EscalationStore for B {
    async fn escalation_policies(&self, workspace_id: Uuid) -> StoreResult<Vec<EscalationPolicyRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {POLICY_COLUMNS} FROM escalation_policies WHERE workspace_id = $1 ORDER BY kind, urgency"
                ))
                .bind(workspace_id),
            )
            .await
    }

    async fn escalation_policy(
        &self,
        workspace_id: Uuid,
        kind: QuestionKind,
        urgency: Urgency,
    ) -> StoreResult<Option<EscalationPolicyRow>> {
        let cache = &self.caches().escalation_policies;
        let policies = match cache.fresh(workspace_id) {
            Some(policies) => policies,
            None => cache.remember(workspace_id, self.escalation_policies(workspace_id).await?),
        };
        Ok(policies.iter().find(|p| p.kind == kind && p.urgency == urgency).cloned())
    }

    async fn replace_escalation_policies(
        &self,
        workspace_id: Uuid,
        policies: &[EscalationPolicyRow],
        audit: &NewAuditEntry,
    ) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        write
            .execute(Statement::new("DELETE FROM escalation_policies WHERE workspace_id = $1").bind(workspace_id))
            .await?;
        for policy in policies {
            write.execute(Statement::insert(policy)).await?;
        }
        self.append_audit_in(&mut write, audit).await?;
        self.commit_write(write, None).await?;
        self.caches().escalation_policies.forget(workspace_id);
        Ok(())
    }

    async fn due_escalations(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<QuestionRow>> {
        self.read().fetch_all(Statement::new(&**DUE_ESCALATIONS).bind(now).bind(limit)).await
    }

    async fn next_escalation_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) = self.read().fetch_one(Statement::new(NEXT_ESCALATION_DUE)).await?;
        Ok(next)
    }

    async fn take_escalation_step(&self, step: &EscalationTransition) -> StoreResult<bool> {
        let question = &step.question;
        let mut write = self.begin_write().await?;
        let taken: Option<(Uuid,)> = write
            .fetch_optional(
                Statement::new(TAKE_ESCALATION_STEP)
                    .bind(&question.assignee)
                    .bind(&question.escalation)
                    .bind(question.next_escalation_at)
                    .bind(question.updated_at)
                    .bind(question.workspace_id)
                    .bind(question.id)
                    .bind(step.due_at)
                    .bind(&question.claimed_by)
                    .bind(question.claim_expires_at)
                    .bind(question.claimed_by_id),
            )
            .await?;
        if taken.is_none() {
            return Ok(false);
        }
        let event_id = self.append_event_and_audit_in(&mut write, &step.event, &step.audit).await?;
        write_reach(&mut write, &step.reach).await?;
        self.commit_write(write, Some(event_id)).await?;
        Ok(true)
    }
}

/// Writes whom a change reaches, in the change's write: their notifications (marked unread again where they had
/// one) and its deliveries.
pub(super) async fn write_reach(write: &mut impl Sql, reach: &Reach) -> StoreResult<()> {
    for notification in &reach.notifications {
        write.execute(Statement::new(NOTIFY_AGAIN.as_str()).bind_row(notification)).await?;
    }
    for delivery in &reach.deliveries {
        write.execute(Statement::new(INSERT_DELIVERY_ONCE.as_str()).bind_row(delivery)).await?;
    }
    Ok(())
}
