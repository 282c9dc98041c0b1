//! The PostgreSQL store under the domain areas written once: a write is a transaction on the pool, whose events
//! get their ids at commit and are announced to every instance, this one included, by notification.

use std::borrow::Cow;

use async_trait::async_trait;
use sqlx::{PgPool, Postgres, Transaction};
use tokio::sync::watch;
use uuid::Uuid;

use super::{PostgresStore, RESOLVE_LOCKING_RUN};
use crate::backend::{SqlBackend, Statement, impl_sql};
use crate::sqlite::WriterThread;
use crate::token_cache::TokenCache;
use crate::{
    AuditRow, Backend, Caches, Committed, Created, NewAuditEntry, NewEvent, QuestionRow, QuestionTransition,
    StoreResult,
};

/// The pool, as [`Sql`].
pub(crate) struct Pool<'a>(&'a PgPool);

impl_sql!(Pool<'_>, on_postgres, |this| this.0);
impl_sql!(Transaction<'static, Postgres>, on_postgres, |this| &mut **this);

#[async_trait]
impl SqlBackend for PostgresStore {
    type Write = Transaction<'static, Postgres>;
    type Read<'a> = Pool<'a>;

    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    /// jsonb compares objects by their contents.
    const APPROVED_CALL: &'static str =
        " AND action->>'tool_name' = $2 AND action->'arguments' = $3 AND response->'value' = 'true'::jsonb";

    fn read(&self) -> Pool<'_> {
        Pool(&self.pool)
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

    type Alone<'a> = Pool<'a>;

    fn write_alone(&self) -> Pool<'_> {
        Pool(&self.pool)
    }

    /// Concurrent claimers, on any instance, skip the rows another is claiming instead of queueing behind them, and
    /// the claim checks again, holding the row, that no other claim took it meanwhile.
    fn claimable(due: &str, of: Option<&str>) -> String {
        let of = of.map(|alias| format!(" OF {alias}")).unwrap_or_default();
        format!("id IN ({due} FOR UPDATE{of} SKIP LOCKED) AND (claimed_until IS NULL OR claimed_until <= $1)")
    }

    async fn rollback_write(&self, write: Transaction<'static, Postgres>) -> StoreResult<()> {
        Ok(write.rollback().await?)
    }

    fn token_cache(&self) -> &TokenCache {
        &self.tokens
    }

    async fn tell_others_of_a_revocation(&self, write: &mut Transaction<'static, Postgres>) -> StoreResult<()> {
        sqlx::query(Self::TELL_OTHERS_OF_A_REVOCATION).execute(&mut **write).await?;
        Ok(())
    }

    async fn lock_run_and_parent(&self, write: &mut Transaction<'static, Postgres>, run_id: Uuid) -> StoreResult<()> {
        match parent_of(write, run_id).await? {
            Some(parent) => lock_runs(write, &[run_id, parent]).await,
            // One run: the release's update of it locks it, before any of its questions.
            None => Ok(()),
        }
    }

    async fn lock_run_tree(&self, write: &mut Transaction<'static, Postgres>, root: Uuid) -> StoreResult<()> {
        let mut tree = vec![root];
        let mut level = vec![root];
        while !level.is_empty() {
            let children: Vec<(Uuid,)> = sqlx::query_as("SELECT id FROM runs WHERE parent_run_id = ANY($1)")
                .bind(&level)
                .fetch_all(&mut **write)
                .await?;
            level = children.into_iter().map(|(id,)| id).collect();
            tree.extend_from_slice(&level);
        }
        tree.extend(parent_of(write, root).await?);
        lock_runs(write, &tree).await
    }

    // Questions, events, the audit log, workspaces, tokens and sessions (`store::questions`).

    const BACKEND: Backend = Backend::Postgres;
    /// Entries are drafts until the commit seals them (see `PostgresStore::append_audit_in`).
    const SEALS_AUDIT_AT_COMMIT: bool = true;

    fn committed(&self) -> &watch::Sender<Committed> {
        &self.committed
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

/// Every transaction that changes several runs locks them first, all in one statement and in id order, and only then
/// touches questions and the audit chain, as an answer does after locking its question's run (`resolve_question`).
/// Taken as the work reached them instead (a child after its parent's audit entry, a parent after its child's
/// questions), two such transactions could each hold what the other waits for, and PostgreSQL would abort one of
/// them.
async fn lock_runs(write: &mut Transaction<'static, Postgres>, ids: &[Uuid]) -> StoreResult<()> {
    sqlx::query("SELECT id FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE")
        .bind(ids)
        .execute(&mut **write)
        .await?;
    Ok(())
}

async fn parent_of(write: &mut Transaction<'static, Postgres>, run_id: Uuid) -> StoreResult<Option<Uuid>> {
    let parent: Option<(Option<Uuid>,)> = sqlx::query_as("SELECT parent_run_id FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_optional(&mut **write)
        .await?;
    Ok(parent.and_then(|(parent,)| parent))
}
