//! Grants as stored: their rows, the SQL both backends use, and the [`GrantStore`] trait with its one
//! implementation for both.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use holdpoint_types::{ArgumentMatcher, Grant, GrantScope};

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::table_row;
use super::{NewAuditEntry, StoreResult};

table_row!(GRANT_COLUMNS = GrantRow in "grants": id, workspace_id, scope, run_id, agent, tool_name, matcher,
    created_by, created_by_id, question_id, created_at, expires_at, revoked_at, revoked_by, uses, last_used_at);

/// Counts a use of a grant (`$1` workspace, `$2` id) at `$3`, if it is still live then.
pub(super) const USE_GRANT: &str = "UPDATE grants SET uses = uses + 1, last_used_at = $3 \
     WHERE workspace_id = $1 AND id = $2 AND revoked_at IS NULL AND expires_at > $3";
/// Revokes a live grant (`$1` workspace, `$2` id) at `$3` by `$4`.
const REVOKE_GRANT: &str = "UPDATE grants SET revoked_at = $3, revoked_by = $4 \
     WHERE workspace_id = $1 AND id = $2 AND revoked_at IS NULL";

/// A grant as stored (and as the worker protocol carries it).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize, serde::Deserialize)]
pub struct GrantRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub scope: GrantScope,
    pub run_id: Option<Uuid>,
    pub agent: Option<String>,
    pub tool_name: String,
    pub matcher: Json<ArgumentMatcher>,
    pub created_by: String,
    pub created_by_id: Option<Uuid>,
    pub question_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
    pub uses: i64,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl GrantRow {
    pub fn to_grant(&self) -> Grant {
        Grant {
            id: self.id,
            scope: self.scope,
            run_id: self.run_id,
            agent: self.agent.clone(),
            tool_name: self.tool_name.clone(),
            matcher: self.matcher.0.clone(),
            created_by: self.created_by.clone(),
            question_id: self.question_id,
            created_at: self.created_at,
            expires_at: self.expires_at,
            revoked_at: self.revoked_at,
            revoked_by: self.revoked_by.clone(),
            uses: self.uses,
            last_used_at: self.last_used_at,
        }
    }
}

/// Grants. Implemented by both stores.
#[async_trait]
pub trait GrantStore: Send + Sync {
    /// Stores a grant with the audit entry recording it, in one transaction.
    async fn insert_grant(&self, grant: &GrantRow, audit: &NewAuditEntry) -> StoreResult<()>;
    async fn grant(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<GrantRow>>;
    /// A workspace's grants, newest first, from before `before` (an id) on; only the live ones at `live_at` if
    /// given.
    async fn grants(
        &self,
        workspace_id: Uuid,
        live_at: Option<DateTime<Utc>>,
        before: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<GrantRow>>;
    /// The grants of a tool in a workspace live at `at` (not revoked, not expired), oldest first.
    async fn live_grants(&self, workspace_id: Uuid, tool_name: &str, at: DateTime<Utc>) -> StoreResult<Vec<GrantRow>>;
    /// Counts a use of a grant at `at` with the audit entry recording the call it let through, in one transaction;
    /// `false`, and nothing written, if the grant was revoked or expired meanwhile.
    async fn use_grant(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool>;
    /// How many approval questions of the workspace asked since `since` for exactly this call (tool and
    /// arguments) a person approved, counting no further than `cap`.
    async fn approved_by_hand(
        &self,
        workspace_id: Uuid,
        tool_name: &str,
        arguments: &serde_json::Value,
        since: DateTime<Utc>,
        cap: u32,
    ) -> StoreResult<u32>;
    /// Revokes a live grant with its audit entry; `false`, and nothing written, if it was revoked already.
    async fn revoke_grant(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        by: &str,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool>;
}

#[async_trait]
impl<B: SqlBackend> GrantStore for B {
    async fn insert_grant(&self, grant: &GrantRow, audit: &NewAuditEntry) -> StoreResult<()> {
        self.write_audited(Statement::insert(grant), Some(audit)).await?;
        Ok(())
    }

    async fn grant(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<GrantRow>> {
        self.read().fetch_optional(Statement::by_id(GRANT_COLUMNS, "grants", workspace_id, id)).await
    }

    async fn grants(
        &self,
        workspace_id: Uuid,
        live_at: Option<DateTime<Utc>>,
        before: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<GrantRow>> {
        // Ids are v7 UUIDs: newest first is descending id.
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {GRANT_COLUMNS} FROM grants WHERE workspace_id = $1 \
                     AND ($2 IS NULL OR (revoked_at IS NULL AND expires_at > $2)) AND ($3 IS NULL OR id < $3) \
                     ORDER BY id DESC LIMIT $4"
                ))
                .bind(workspace_id)
                .bind(live_at)
                .bind(before)
                .bind(i64::from(limit)),
            )
            .await
    }

    async fn live_grants(&self, workspace_id: Uuid, tool_name: &str, at: DateTime<Utc>) -> StoreResult<Vec<GrantRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {GRANT_COLUMNS} FROM grants WHERE workspace_id = $1 AND tool_name = $2 \
                     AND revoked_at IS NULL AND expires_at > $3 ORDER BY id"
                ))
                .bind(workspace_id)
                .bind(tool_name)
                .bind(at),
            )
            .await
    }

    async fn use_grant(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool> {
        self.write_audited(Statement::new(USE_GRANT).bind(workspace_id).bind(id).bind(at), Some(audit)).await
    }

    async fn approved_by_hand(
        &self,
        workspace_id: Uuid,
        tool_name: &str,
        arguments: &serde_json::Value,
        since: DateTime<Utc>,
        cap: u32,
    ) -> StoreResult<u32> {
        let (count,): (i64,) = self
            .read()
            .fetch_one(
                Statement::new(format!(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM questions WHERE workspace_id = $1 AND kind = 'approval' \
                     AND status = 'answered' AND resolution = 'human' AND created_at >= $4{} LIMIT $5) AS capped",
                    B::APPROVED_CALL
                ))
                .bind(workspace_id)
                .bind(tool_name)
                .bind(Json(arguments))
                .bind(since)
                .bind(i64::from(cap)),
            )
            .await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    async fn revoke_grant(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        by: &str,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool> {
        self.write_audited(Statement::new(REVOKE_GRANT).bind(workspace_id).bind(id).bind(at).bind(by), Some(audit))
            .await
    }
}
