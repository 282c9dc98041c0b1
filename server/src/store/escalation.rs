//! Escalation as stored: each workspace's policies, and the steps questions take by them, with the SQL
//! both backends use.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use app::types::{Assignee, QuestionKind, Urgency};

use super::{NewAuditEntry, NewEvent, QuestionRow, Reach, StoreResult};

pub(super) const POLICY_COLUMNS: &str =
    "workspace_id, kind, urgency, remind_after_seconds, escalate_after_seconds, escalate_to, updated_at";
/// Inserts a policy (`$1`..`$7` in [`POLICY_COLUMNS`]' order).
pub(super) const INSERT_POLICY: &str = "INSERT INTO escalation_policies (workspace_id, kind, urgency, \
     remind_after_seconds, escalate_after_seconds, escalate_to, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
/// Takes a question's escalation step: its new assignee (`$1`), plan (`$2`), next step's time (`$3`) at `$4`, if it
/// is still pending and its next step is still the one due at `$7` (`$5` workspace, `$6` id). Whoever takes the step
/// first changes the row; every other instance's try changes nothing. The step is a change of the pending question
/// like a claim: it moves the revision on, so a claim or an approval decided from the row before it is decided again
/// (and cannot write the old assignee back).
pub(super) const TAKE_ESCALATION_STEP: &str = "UPDATE questions SET assignee = $1, escalation = $2, \
     next_escalation_at = $3, updated_at = $4, revision = revision + 1 WHERE workspace_id = $5 AND id = $6 \
     AND status = 'pending' AND next_escalation_at = $7 RETURNING id";
/// A person's notification of a question, or, when they have one already, that one marked unread and moved to the
/// top of their list: a reminder or an escalation reaches them again (the notification's columns as
/// `INSERT_NOTIFICATION` binds them).
pub(super) const NOTIFY_AGAIN: &str = "INSERT INTO notifications (id, workspace_id, question_id, user_id, \
     created_at, read_at) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (question_id, user_id) DO UPDATE SET read_at = NULL, created_at = excluded.created_at";
/// Pending questions whose next escalation step is due at `$1`, soonest first (at most `$2`).
pub(super) static DUE_ESCALATIONS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {} FROM questions WHERE status = 'pending' AND next_escalation_at IS NOT NULL \
         AND next_escalation_at <= $1 ORDER BY next_escalation_at LIMIT $2",
        super::sql::QUESTION_COLUMNS
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
    /// What this store last read of each workspace's policies.
    fn policy_cache(&self) -> &super::ReadCache<Vec<EscalationPolicyRow>>;
    /// The policy for questions of `kind` and `urgency` in a workspace, if it has one, from the policies read within
    /// the read cache's TTL.
    async fn escalation_policy(
        &self,
        workspace_id: Uuid,
        kind: QuestionKind,
        urgency: Urgency,
    ) -> StoreResult<Option<EscalationPolicyRow>> {
        let policies = match self.policy_cache().fresh(workspace_id) {
            Some(policies) => policies,
            None => self.policy_cache().remember(workspace_id, self.escalation_policies(workspace_id).await?),
        };
        Ok(policies.iter().find(|p| p.kind == kind && p.urgency == urgency).cloned())
    }
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
