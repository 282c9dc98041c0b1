//! The SQLite store under the domain areas written once: writes run in the writer's open batch (see
//! `group_commit`), reads on the read-only connections.

use std::borrow::Cow;

use async_trait::async_trait;
use tokio::sync::watch;

use super::group_commit::BatchedWrite;
use super::{SqliteConnections, SqliteStore, WriterThread};
use crate::backend::{SqlBackend, Statement, impl_sql};
use crate::sql::RESOLVE_PENDING_RETURNING;
use crate::token_cache::TokenCache;
use crate::{
    AuditRow, Backend, Caches, Committed, Created, NewAuditEntry, NewEvent, QuestionRow, QuestionTransition,
    StoreResult,
};

/// A pool of connections (the read-only ones, or the writer's), as [`Sql`].
pub(crate) struct Connections<'a>(&'a SqliteConnections);

impl_sql!(Connections<'_>, on_sqlite, |this| this.0);
impl_sql!(BatchedWrite, on_sqlite, |this| &mut **this);

#[async_trait]
impl SqlBackend for SqliteStore {
    type Write = BatchedWrite;
    type Read<'a> = Connections<'a>;

    const FOR_UPDATE: &'static str = "";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = "";
    /// The bound arguments are serde's compact JSON text, as `json_extract` writes an object back (keys in one order).
    const APPROVED_CALL: &'static str = " AND json_extract(action, '$.tool_name') = $2 \
         AND json_extract(action, '$.arguments') = $3 AND json_extract(response, '$.value') = 1";

    fn read(&self) -> Connections<'_> {
        Connections(&self.read)
    }

    fn caches(&self) -> &Caches {
        &self.caches
    }

    async fn begin_write(&self) -> StoreResult<BatchedWrite> {
        Ok(SqliteStore::begin_write(self).await?)
    }

    async fn commit_write(&self, write: BatchedWrite, last_event: Option<i64>) -> StoreResult<()> {
        self.commit_events(write, last_event).await
    }

    async fn append_event_in(&self, write: &mut BatchedWrite, event: &NewEvent) -> StoreResult<i64> {
        Self::append_event(write, event).await
    }

    async fn append_audit_in(&self, write: &mut BatchedWrite, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
        SqliteStore::append_audit_in(self, write, entry).await
    }

    async fn append_event_and_audit_in(
        &self,
        write: &mut BatchedWrite,
        event: &NewEvent,
        entry: &NewAuditEntry,
    ) -> StoreResult<i64> {
        self.append_event_and_audit(write, event, entry).await
    }

    type Alone<'a> = Connections<'a>;

    /// The writer's connection, between the group commit's batches.
    fn write_alone(&self) -> Connections<'_> {
        Connections(&self.write)
    }

    /// Every write goes through the one writer, so a claim is exactly once: what `due` read still holds.
    fn claimable(due: &str, _of: Option<&str>) -> String {
        format!("id IN ({due})")
    }

    async fn rollback_write(&self, write: BatchedWrite) -> StoreResult<()> {
        Ok(write.rollback().await?)
    }

    fn token_cache(&self) -> &TokenCache {
        &self.tokens
    }

    // Questions, events, the audit log, workspaces, tokens and sessions (`store::questions`).

    const BACKEND: Backend = Backend::Sqlite;
    /// The one writer seals an entry as it appends it.
    const SEALS_AUDIT_AT_COMMIT: bool = false;

    fn committed(&self) -> &watch::Sender<Committed> {
        &self.committed
    }

    fn writer_elsewhere(&self) -> Option<&WriterThread> {
        self.writer_thread.elsewhere()
    }

    /// The `regex` crate's case-insensitive match (Unicode's case folding), which sqlx registers as SQLite's
    /// `REGEXP`. SQLite's own `LOWER` and `LIKE` fold ASCII letters only, so `überweisung` would never find
    /// `Überweisung`.
    fn push_text_match(statement: &mut Statement<'_>, text: &str) {
        let pattern = format!("(?i){}", regex::escape(text));
        statement.push(" AND (title REGEXP ").push_bind(pattern.clone());
        statement.push(" OR body REGEXP ").push_bind(pattern);
        statement.push(")");
    }

    async fn ask_on_hot_path(
        &self,
        question: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<Option<Created<QuestionRow>>> {
        self.insert_question_directly(question, event).await
    }

    /// `false` from the one query (someone was first, or the guess of the chain's head was wrong) leaves it to the
    /// general path.
    async fn resolve_on_hot_path(&self, transition: &QuestionTransition) -> StoreResult<Option<bool>> {
        Ok(self.resolve_in_one_query(transition).await?.then_some(true))
    }

    /// Inline (see `GroupCommit::begin_inline`), unless the key's claim runs before the question's insert: such a
    /// write opens its savepoint apart.
    async fn begin_asking(&self, claims_key: bool) -> StoreResult<BatchedWrite> {
        Ok(if claims_key { SqliteStore::begin_write(self).await? } else { self.begin_write_inline().await? })
    }

    async fn insert_question_in(
        &self,
        write: &mut BatchedWrite,
        question: &QuestionRow,
        event: &NewEvent,
        more_follow: bool,
    ) -> StoreResult<i64> {
        Self::insert_question_then_event(write, question, event, more_follow).await
    }

    /// An inline write, whose update opens its savepoint. Nothing to lock before it: `BEGIN IMMEDIATE` on the one
    /// writer already runs write transactions one at a time.
    async fn begin_resolving(&self) -> StoreResult<(BatchedWrite, Cow<'static, str>)> {
        let mut write = self.begin_write_inline().await?;
        let update = format!("{}{}", write.savepoint(), *RESOLVE_PENDING_RETURNING);
        Ok((write, update.into()))
    }

    async fn commit_one_event(&self, write: BatchedWrite, id: i64, event: &NewEvent) -> StoreResult<()> {
        SqliteStore::commit_one_event(self, write, id, event).await
    }
}
