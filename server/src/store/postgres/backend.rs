//! The PostgreSQL store under the domain areas written once: a write is a transaction on the pool, whose events
//! get their ids at commit and are announced to every instance, this one included, by notification.

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgPool, Postgres, Transaction};
use tokio::sync::watch;
use uuid::Uuid;

use super::{PostgresStore, RESOLVE_LOCKING_RUN};
use crate::store::backend::{FromBoth, Sql, SqlBackend, Statement, on_postgres};
use crate::store::sqlite::WriterThread;
use crate::store::token_cache::TokenCache;
use crate::store::{
    AuditRow, Backend, Caches, Committed, Created, NewAuditEntry, NewEvent, QuestionRow, QuestionTransition,
    StoreResult,
};

/// The pool, as [`Sql`].
pub(in crate::store) struct Reads<'a>(&'a PgPool);

#[async_trait]
impl Sql for Reads<'_> {
    async fn fetch_all<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Vec<R>> {
        on_postgres::fetch_all(self.0, statement).await
    }

    async fn fetch_optional<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Option<R>> {
        on_postgres::fetch_optional(self.0, statement).await
    }

    async fn fetch_one<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<R> {
        on_postgres::fetch_one(self.0, statement).await
    }

    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<u64> {
        on_postgres::execute(self.0, statement).await
    }
}

#[async_trait]
impl Sql for Transaction<'static, Postgres> {
    async fn fetch_all<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Vec<R>> {
        on_postgres::fetch_all(&mut **self, statement).await
    }

    async fn fetch_optional<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Option<R>> {
        on_postgres::fetch_optional(&mut **self, statement).await
    }

    async fn fetch_one<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<R> {
        on_postgres::fetch_one(&mut **self, statement).await
    }

    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<u64> {
        on_postgres::execute(&mut **self, statement).await
    }
}

#[async_trait]
impl SqlBackend for PostgresStore {
    type Write = Transaction<'static, Postgres>;
    type Read<'a> = Reads<'a>;

    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";

    fn read(&self) -> Reads<'_> {
        Reads(&self.pool)
    }

    fn caches(&self) -> &Caches {
        &self.caches
    }

    async fn begin_write(&self) -> StoreResult<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    /// The commit's notification tells every instance's hub, this one's too, of the events it appended.
    async fn commit_write(&self, write: Transaction<'static, Postgres>, _last_event: Option<i64>) -> StoreResult<()> {
        Ok(write.commit().await?)
    }

    async fn append_event_in(&self, write: &mut Transaction<'static, Postgres>, event: &NewEvent) -> StoreResult<i64> {
        Self::append_event(write, event).await
    }

    async fn append_audit_in(
        &self,
        write: &mut Transaction<'static, Postgres>,
        entry: &NewAuditEntry,
    ) -> StoreResult<AuditRow> {
        PostgresStore::append_audit_in(self, write, entry).await
    }

    async fn append_event_and_audit_in(
        &self,
        write: &mut Transaction<'static, Postgres>,
        event: &NewEvent,
        entry: &NewAuditEntry,
    ) -> StoreResult<i64> {
        self.append_event_and_audit(write, event, entry).await
    }

    // Questions, events, the audit log, workspaces, tokens and sessions (`store::questions`).

    const BACKEND: Backend = Backend::Postgres;
    /// Entries are drafts until the commit seals them (see `PostgresStore::append_audit_in`).
    const SEALS_AUDIT_AT_COMMIT: bool = true;

    fn committed(&self) -> &watch::Sender<Committed> {
        &self.committed
    }

    fn token_cache(&self) -> &TokenCache {
        &self.tokens
    }

    fn writer(&self) -> Reads<'_> {
        Reads(&self.pool)
    }

    fn writer_elsewhere(&self) -> Option<&WriterThread> {
        None
    }

    /// The pattern lowered as the columns are, by the database's `LOWER` (its locale's case mapping: every letter
    /// under a UTF-8 locale); `%`, `_` and `\` match themselves.
    fn push_text_match(statement: &mut Statement<'_>, text: &str) {
        let pattern = format!("%{}%", text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        statement.push(" AND (LOWER(title) LIKE LOWER(").push_bind(pattern.clone());
        statement.push(") ESCAPE '\\' OR LOWER(body) LIKE LOWER(").push_bind(pattern);
        statement.push(") ESCAPE '\\')");
    }

    async fn ask_on_hot_path(
        &self,
        question: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<Option<Created<QuestionRow>>> {
        self.insert_question_directly(question, event).await
    }

    async fn resolve_on_hot_path(&self, transition: &QuestionTransition) -> StoreResult<Option<bool>> {
        Ok(Some(self.resolve_in_one_query(transition).await?))
    }

    async fn begin_asking(&self, _claims_key: bool) -> StoreResult<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    async fn insert_question_in(
        &self,
        write: &mut Transaction<'static, Postgres>,
        question: &QuestionRow,
        event: &NewEvent,
        _more_follow: bool,
    ) -> StoreResult<i64> {
        Self::insert_question_then_event(write, question, event).await
    }

    /// The update locks the question's run first (`RESOLVE_LOCKING_RUN`).
    async fn begin_resolving(&self) -> StoreResult<(Transaction<'static, Postgres>, Cow<'static, str>)> {
        Ok((self.pool.begin().await?, Cow::Borrowed(&**RESOLVE_LOCKING_RUN)))
    }

    async fn lock_run_in(
        &self,
        write: &mut Transaction<'static, Postgres>,
        workspace_id: Uuid,
        run_id: Uuid,
    ) -> StoreResult<()> {
        sqlx::query("SELECT id FROM runs WHERE workspace_id = $1 AND id = $2 FOR UPDATE")
            .bind(workspace_id)
            .bind(run_id)
            .execute(&mut **write)
            .await?;
        Ok(())
    }

    async fn requeue_if_unheld_in(
        &self,
        write: &mut Transaction<'static, Postgres>,
        workspace_id: Uuid,
        run_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        Self::requeue_if_unheld(write, workspace_id, run_id, at).await
    }

    /// The commit's notification tells every instance's hub, this one's too, of the event.
    async fn commit_one_event(
        &self,
        write: Transaction<'static, Postgres>,
        _id: i64,
        _event: &NewEvent,
    ) -> StoreResult<()> {
        Ok(write.commit().await?)
    }
}
