//! The SQLite store under the domain areas written once: writes run in the writer's open batch (see
//! `group_commit`), reads on the read-only connections.

use async_trait::async_trait;
use uuid::Uuid;

use super::group_commit::BatchedWrite;
use super::{SqliteConnections, SqliteStore};
use crate::store::backend::{FromBoth, Sql, SqlBackend, Statement, on_sqlite};
use crate::store::{AuditRow, Caches, NewAuditEntry, NewEvent, StoreResult};

/// The read-only connections, or the write connection, as [`Sql`].
pub(in crate::store) struct Reads<'a>(&'a SqliteConnections);

#[async_trait]
impl Sql for Reads<'_> {
    async fn fetch_all<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Vec<R>> {
        on_sqlite::fetch_all(self.0, statement).await
    }

    async fn fetch_optional<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Option<R>> {
        on_sqlite::fetch_optional(self.0, statement).await
    }

    async fn fetch_one<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<R> {
        on_sqlite::fetch_one(self.0, statement).await
    }

    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<u64> {
        on_sqlite::execute(self.0, statement).await
    }
}

#[async_trait]
impl Sql for BatchedWrite {
    async fn fetch_all<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Vec<R>> {
        on_sqlite::fetch_all(&mut **self, statement).await
    }

    async fn fetch_optional<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Option<R>> {
        on_sqlite::fetch_optional(&mut **self, statement).await
    }

    async fn fetch_one<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<R> {
        on_sqlite::fetch_one(&mut **self, statement).await
    }

    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<u64> {
        on_sqlite::execute(&mut **self, statement).await
    }
}

#[async_trait]
impl SqlBackend for SqliteStore {
    type Write = BatchedWrite;
    type Read<'a> = Reads<'a>;

    const FOR_UPDATE: &'static str = "";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = "";

    fn read(&self) -> Reads<'_> {
        Reads(&self.read)
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

    fn write_connection(&self) -> Reads<'_> {
        Reads(&self.write)
    }

    /// Nothing to lock: `BEGIN IMMEDIATE` on the one writer runs write transactions one at a time.
    async fn lock_run_and_parent(&self, _write: &mut BatchedWrite, _run_id: Uuid) -> StoreResult<()> {
        Ok(())
    }

    /// Nothing to lock: `BEGIN IMMEDIATE` on the one writer runs write transactions one at a time.
    async fn lock_run_tree(&self, _write: &mut BatchedWrite, _root: Uuid) -> StoreResult<()> {
        Ok(())
    }
}
