//! The MCP gateway's upstreams as stored: their rows, the SQL both backends use, and the [`UpstreamStore`] trait with
//! its one implementation for both.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::{is_unique_violation_of, table_row};
use super::{NewAuditEntry, StoreError, StoreResult};

table_row!(UPSTREAM_COLUMNS = UpstreamRow in "upstreams": id, workspace_id, name, url, headers, created_at, updated_at,
    last_success_at, last_error_at, last_error);
/// Writes an upstream's changeable columns (`$1` url, `$2` headers, `$3` updated_at; `$4` workspace, `$5` id).
/// Its health starts over: it is another server now, or the same one reached otherwise.
const UPDATE_UPSTREAM: &str = "UPDATE upstreams SET url = $1, headers = $2, updated_at = $3, \
     last_success_at = NULL, last_error_at = NULL, last_error = NULL WHERE workspace_id = $4 AND id = $5";
/// Records that an upstream answered at `$3` (`$1` workspace, `$2` id).
const UPSTREAM_SUCCEEDED: &str = "UPDATE upstreams SET last_success_at = $3 WHERE workspace_id = $1 AND id = $2";
/// Records that an upstream failed at `$3` with `$4` (`$1` workspace, `$2` id).
const UPSTREAM_FAILED: &str =
    "UPDATE upstreams SET last_error_at = $3, last_error = $4 WHERE workspace_id = $1 AND id = $2";

/// An upstream MCP server of a workspace.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct UpstreamRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub name: String,
    pub url: String,
    /// Sent with every request to it; the values are secrets, kept because every request needs them.
    pub headers: Json<BTreeMap<String, String>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// The gateway's upstreams. Implemented by both stores.
#[async_trait]
pub trait UpstreamStore: Send + Sync {
    /// A workspace's upstreams, by name.
    async fn upstreams(&self, workspace_id: Uuid) -> StoreResult<Vec<UpstreamRow>>;
    /// A workspace's upstreams as read within the read cache's TTL: what each gateway request is served from.
    async fn upstreams_cached(&self, workspace_id: Uuid) -> StoreResult<std::sync::Arc<Vec<UpstreamRow>>>;
    async fn upstream(&self, workspace_id: Uuid, name: &str) -> StoreResult<Option<UpstreamRow>>;
    /// Stores a new upstream with the audit entry recording it; [`StoreError::Duplicate`] if the workspace has one
    /// of that name.
    async fn create_upstream(&self, row: &UpstreamRow, audit: &NewAuditEntry) -> StoreResult<()>;
    /// Writes an upstream's URL and headers with the audit entry; `false` (nothing written) if it is gone.
    async fn update_upstream(&self, row: &UpstreamRow, audit: &NewAuditEntry) -> StoreResult<bool>;
    /// Removes an upstream with the audit entry; `false` (nothing written) if it is gone.
    async fn delete_upstream(&self, workspace_id: Uuid, id: Uuid, audit: &NewAuditEntry) -> StoreResult<bool>;
    /// Records how the gateway found an upstream at `at`: it answered (`error` none), or it failed with `error`.
    async fn record_upstream_health(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        error: Option<&str>,
    ) -> StoreResult<()>;
}

#[async_trait]
impl<B: SqlBackend> UpstreamStore for B {
    async fn upstreams(&self, workspace_id: Uuid) -> StoreResult<Vec<UpstreamRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {UPSTREAM_COLUMNS} FROM upstreams WHERE workspace_id = $1 ORDER BY name"
                ))
                .bind(workspace_id),
            )
            .await
    }

    async fn upstreams_cached(&self, workspace_id: Uuid) -> StoreResult<std::sync::Arc<Vec<UpstreamRow>>> {
        let cache = &self.caches().upstreams;
        match cache.fresh(workspace_id) {
            Some(upstreams) => Ok(upstreams),
            None => Ok(cache.remember(workspace_id, self.upstreams(workspace_id).await?)),
        }
    }

    async fn upstream(&self, workspace_id: Uuid, name: &str) -> StoreResult<Option<UpstreamRow>> {
        self.read()
            .fetch_optional(
                Statement::new(format!(
                    "SELECT {UPSTREAM_COLUMNS} FROM upstreams WHERE workspace_id = $1 AND name = $2"
                ))
                .bind(workspace_id)
                .bind(name),
            )
            .await
    }

    async fn create_upstream(&self, row: &UpstreamRow, audit: &NewAuditEntry) -> StoreResult<()> {
        let insert = Statement::insert(row);
        match self.write_audited(insert, Some(audit)).await {
            Err(err) if is_unique_violation_of(&err) => return Err(StoreError::Duplicate("upstream of that name")),
            other => other?,
        };
        self.caches().upstreams.forget(row.workspace_id);
        Ok(())
    }

    async fn update_upstream(&self, row: &UpstreamRow, audit: &NewAuditEntry) -> StoreResult<bool> {
        let update = Statement::new(UPDATE_UPSTREAM)
            .bind(&row.url)
            .bind(&row.headers)
            .bind(row.updated_at)
            .bind(row.workspace_id)
            .bind(row.id);
        let updated = self.write_audited(update, Some(audit)).await?;
        if updated {
            self.caches().upstreams.forget(row.workspace_id);
        }
        Ok(updated)
    }

    async fn delete_upstream(&self, workspace_id: Uuid, id: Uuid, audit: &NewAuditEntry) -> StoreResult<bool> {
        let delete =
            Statement::new("DELETE FROM upstreams WHERE workspace_id = $1 AND id = $2").bind(workspace_id).bind(id);
        let deleted = self.write_audited(delete, Some(audit)).await?;
        if deleted {
            self.caches().upstreams.forget(workspace_id);
        }
        Ok(deleted)
    }

    async fn record_upstream_health(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        error: Option<&str>,
    ) -> StoreResult<()> {
        let statement = match error {
            None => Statement::new(UPSTREAM_SUCCEEDED).bind(workspace_id).bind(id).bind(at),
            Some(error) => Statement::new(UPSTREAM_FAILED).bind(workspace_id).bind(id).bind(at).bind(error.to_owned()),
        };
        self.write_audited(statement, None).await?;
        self.caches().upstreams.forget(workspace_id);
        Ok(())
    }
}
