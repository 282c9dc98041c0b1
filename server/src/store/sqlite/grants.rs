//! Grants, on SQLite.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::*;
use crate::store::grants::*;

#[async_trait]
impl GrantStore for SqliteStore {
    async fn insert_grant(&self, grant: &GrantRow, audit: &NewAuditEntry) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        Bind::bind_grant(sqlx::query(INSERT_GRANT), grant).execute(&mut *tx).await?;
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn grant(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<GrantRow>> {
        Ok(sqlx::query_as(&format!("SELECT {GRANT_COLUMNS} FROM grants WHERE workspace_id = $1 AND id = $2"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.read)
            .await?)
    }

    async fn grants(
        &self,
        workspace_id: Uuid,
        live_at: Option<DateTime<Utc>>,
        before: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<GrantRow>> {
        // Ids are v7 UUIDs: newest first is descending id.
        Ok(sqlx::query_as(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE workspace_id = $1 \
             AND ($2 IS NULL OR (revoked_at IS NULL AND expires_at > $2)) AND ($3 IS NULL OR id < $3) \
             ORDER BY id DESC LIMIT $4"
        ))
        .bind(workspace_id)
        .bind(live_at)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await?)
    }

    async fn live_grants(&self, workspace_id: Uuid, tool_name: &str, at: DateTime<Utc>) -> StoreResult<Vec<GrantRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE workspace_id = $1 AND tool_name = $2 \
             AND revoked_at IS NULL AND expires_at > $3 ORDER BY id"
        ))
        .bind(workspace_id)
        .bind(tool_name)
        .bind(at)
        .fetch_all(&self.read)
        .await?)
    }

    async fn use_grant(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        let used = sqlx::query(USE_GRANT).bind(workspace_id).bind(id).bind(at).execute(&mut *tx).await?;
        if used.rows_affected() == 0 {
            return Ok(false);
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn approved_by_hand(
        &self,
        workspace_id: Uuid,
        tool_name: &str,
        arguments: &serde_json::Value,
        since: DateTime<Utc>,
        cap: u32,
    ) -> StoreResult<u32> {
        // Both sides are serde's compact JSON text of the same value (keys in one order), as SQLite's
        // `json_extract` writes an object back.
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM (SELECT 1 FROM questions WHERE workspace_id = $1 AND kind = 'approval' \
             AND status = 'answered' AND resolution = 'human' AND created_at >= $4 \
             AND json_extract(action, '$.tool_name') = $2 AND json_extract(action, '$.arguments') = $3 \
             AND json_extract(response, '$.value') = 1 LIMIT $5) AS capped",
        )
        .bind(workspace_id)
        .bind(tool_name)
        .bind(serde_json::to_string(arguments).map_err(|e| StoreError::Corrupt(e.to_string()))?)
        .bind(since)
        .bind(i64::from(cap))
        .fetch_one(&self.read)
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
        let mut tx = self.begin_write().await?;
        let revoked = sqlx::query(REVOKE_GRANT).bind(workspace_id).bind(id).bind(at).bind(by).execute(&mut *tx).await?;
        if revoked.rows_affected() == 0 {
            return Ok(false);
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }
}
