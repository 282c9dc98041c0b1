//! Approval rules as stored: each workspace's one document and its version, with the SQL both backends use.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use holdpoint_types::RulesDocument;

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::{Bind, TableRow, table_row};
use super::{NewAuditEntry, StoreResult};

table_row!(RULES_COLUMNS = RulesRow in "rules_documents": workspace_id, version, document, updated_at, updated_by);
/// The first save of a workspace's rules; changes nothing if another save came first.
static INSERT_RULES: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{} ON CONFLICT (workspace_id) DO NOTHING", RulesRow::insert()));
/// A later save: version `$2`, only if the stored one is still `$6`.
const REPLACE_RULES: &str = "UPDATE rules_documents SET version = $2, document = $3, updated_at = $4, \
     updated_by = $5 WHERE workspace_id = $1 AND version = $6";

/// A workspace's rules document as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RulesRow {
    pub workspace_id: Uuid,
    /// 1 for the first save, one more for each after it.
    pub version: i64,
    pub document: Json<RulesDocument>,
    pub updated_at: DateTime<Utc>,
    pub updated_by: String,
}

/// Approval rules. Implemented by both stores.
#[async_trait]
pub trait RulesStore: Send + Sync {
    /// The workspace's rules document; `None` before its first save.
    async fn rules_document(&self, workspace_id: Uuid) -> StoreResult<Option<RulesRow>>;
    /// The version of the workspace's rules document (0 before its first save): one indexed read, by which an
    /// instance learns whether the rules it compiled are still the workspace's.
    async fn rules_version(&self, workspace_id: Uuid) -> StoreResult<i64>;
    /// Stores `row` with the audit entry recording it, in one transaction, if the stored version is still
    /// `previous_version` (0: none stored); `false`, and nothing written, if another save came first.
    async fn save_rules(&self, row: &RulesRow, previous_version: i64, audit: &NewAuditEntry) -> StoreResult<bool>;
}

#[async_trait]
impl<B: SqlBackend> RulesStore for B {
    async fn rules_document(&self, workspace_id: Uuid) -> StoreResult<Option<RulesRow>> {
        self.read()
            .fetch_optional(
                Statement::new(format!("SELECT {RULES_COLUMNS} FROM rules_documents WHERE workspace_id = $1"))
                    .bind(workspace_id),
            )
            .await
    }

    async fn rules_version(&self, workspace_id: Uuid) -> StoreResult<i64> {
        let version: Option<(i64,)> = self
            .read()
            .fetch_optional(
                Statement::new("SELECT version FROM rules_documents WHERE workspace_id = $1").bind(workspace_id),
            )
            .await?;
        Ok(version.map_or(0, |(version,)| version))
    }

    async fn save_rules(&self, row: &RulesRow, previous_version: i64, audit: &NewAuditEntry) -> StoreResult<bool> {
        let statement =
            Statement::new(if previous_version == 0 { INSERT_RULES.as_str() } else { REPLACE_RULES }).bind_row(row);
        let statement = if previous_version == 0 { statement } else { statement.bind(previous_version) };
        self.write_audited(statement, Some(audit)).await
    }
}
