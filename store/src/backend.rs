//! What the two databases do differently, as one trait, so that each domain area's store is written once, generic
//! over it.
//!
//! A domain area's statements are [`Statement`]s: SQL with `$N` placeholders (both databases read them) and the
//! values bound to them, each of a type both databases encode. They run on the backend's read connections
//! ([`SqlBackend::read`]) or inside a write ([`SqlBackend::begin_write`], [`SqlBackend::commit_write`]), through
//! [`Sql`]. What really differs stays behind the trait: how a write opens and commits (SQLite's group commit on one
//! writer, PostgreSQL's transaction whose events get their ids at commit), how an event and its audit entry are
//! appended, and the dialect's few words ([`SqlBackend::FOR_UPDATE`], [`SqlBackend::FOR_UPDATE_SKIP_LOCKED`]). The
//! hot paths of a HITL cycle (asking and resolving a question) stay each backend's own code, behind
//! [`SqlBackend::ask_on_hot_path`] and [`SqlBackend::resolve_on_hot_path`].

use std::borrow::Cow;

use async_trait::async_trait;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments, Executor, FromRow, Postgres, Sqlite};
use tokio::sync::watch;
use uuid::Uuid;

use super::sqlite::WriterThread;
use super::token_cache::TokenCache;
use super::{
    AuditRow, Backend, Committed, Created, NewAuditEntry, NewEvent, QuestionRow, QuestionTransition, StoreError,
    StoreResult,
};

/// A value bound to a statement: of a type both databases encode.
pub(crate) trait Both<'q>:
    'q + sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite> + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + Send
{
}

impl<'q, T> Both<'q> for T where
    T: 'q + sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite> + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + Send
{
}

/// A bound value, kept until the statement runs on one database or the other.
trait Argument<'q>: Send {
    fn add_to_sqlite(self: Box<Self>, arguments: &mut SqliteArguments<'q>) -> Result<(), BoxDynError>;
    fn add_to_postgres(self: Box<Self>, arguments: &mut PgArguments) -> Result<(), BoxDynError>;
}

impl<'q, T: Both<'q>> Argument<'q> for T {
    fn add_to_sqlite(self: Box<Self>, arguments: &mut SqliteArguments<'q>) -> Result<(), BoxDynError> {
        arguments.add(*self)
    }

    fn add_to_postgres(self: Box<Self>, arguments: &mut PgArguments) -> Result<(), BoxDynError> {
        arguments.add(*self)
    }
}

/// A row type both databases decode (every `#[derive(sqlx::FromRow)]` row, and tuples of column types).
pub(crate) trait FromBoth: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin {}

impl<T> FromBoth for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin {}

/// A statement written once for both databases: its SQL, with `$N` placeholders, and the values bound to them.
#[must_use]
pub(crate) struct Statement<'q> {
    sql: Cow<'static, str>,
    arguments: Vec<Box<dyn Argument<'q> + 'q>>,
}

impl<'q> Statement<'q> {
    pub(crate) fn new(sql: impl Into<Cow<'static, str>>) -> Self {
        Self { sql: sql.into(), arguments: Vec::new() }
    }

    /// Binds the next placeholder.
    pub(crate) fn bind(mut self, value: impl Both<'q>) -> Self {
        self.arguments.push(Box::new(value));
        self
    }

    /// Appends SQL text, for a statement built piece by piece.
    pub(crate) fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.to_mut().push_str(sql);
        self
    }

    /// Appends the next placeholder (`$N`) and binds it.
    pub(crate) fn push_bind(&mut self, value: impl Both<'q>) -> &mut Self {
        self.arguments.push(Box::new(value));
        let placeholder = format!("${}", self.arguments.len());
        self.sql.to_mut().push_str(&placeholder);
        self
    }

    fn for_sqlite(self) -> StoreResult<(Cow<'static, str>, SqliteArguments<'q>)> {
        let mut arguments = SqliteArguments::default();
        for argument in self.arguments {
            argument.add_to_sqlite(&mut arguments).map_err(encoding_failed)?;
        }
        Ok((self.sql, arguments))
    }

    fn for_postgres(self) -> StoreResult<(Cow<'static, str>, PgArguments)> {
        let mut arguments = PgArguments::default();
        for argument in self.arguments {
            argument.add_to_postgres(&mut arguments).map_err(encoding_failed)?;
        }
        Ok((self.sql, arguments))
    }
}

impl std::fmt::Debug for Statement<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Statement").field("sql", &self.sql).field("bound", &self.arguments.len()).finish()
    }
}

fn encoding_failed(err: BoxDynError) -> StoreError {
    StoreError::Database(sqlx::Error::Encode(err))
}

/// Where statements run: a backend's read connections, or a write in progress.
#[async_trait]
pub(crate) trait Sql: Send {
    async fn fetch_all<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Vec<R>>;
    async fn fetch_optional<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<Option<R>>;
    /// The one row; an error if there is none.
    async fn fetch_one<R: FromBoth>(&mut self, statement: Statement<'_>) -> StoreResult<R>;
    /// How many rows the statement changed.
    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<u64>;
}

/// The statements of [`Sql`] on any SQLite executor.
pub(crate) mod on_sqlite {
    use super::*;

    pub(crate) async fn fetch_all<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<Vec<R>>
    where
        E: Executor<'e, Database = Sqlite>,
        R: FromBoth,
    {
        let (sql, arguments) = statement.for_sqlite()?;
        Ok(sqlx::query_as_with::<Sqlite, R, _>(&sql, arguments).fetch_all(executor).await?)
    }

    pub(crate) async fn fetch_optional<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<Option<R>>
    where
        E: Executor<'e, Database = Sqlite>,
        R: FromBoth,
    {
        let (sql, arguments) = statement.for_sqlite()?;
        Ok(sqlx::query_as_with::<Sqlite, R, _>(&sql, arguments).fetch_optional(executor).await?)
    }

    pub(crate) async fn fetch_one<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<R>
    where
        E: Executor<'e, Database = Sqlite>,
        R: FromBoth,
    {
        let (sql, arguments) = statement.for_sqlite()?;
        Ok(sqlx::query_as_with::<Sqlite, R, _>(&sql, arguments).fetch_one(executor).await?)
    }

    pub(crate) async fn execute<'e, E>(executor: E, statement: Statement<'_>) -> StoreResult<u64>
    where
        E: Executor<'e, Database = Sqlite>,
    {
        let (sql, arguments) = statement.for_sqlite()?;
        Ok(sqlx::query_with::<Sqlite, _>(&sql, arguments).execute(executor).await?.rows_affected())
    }
}

/// The statements of [`Sql`] on any PostgreSQL executor.
pub(crate) mod on_postgres {
    use super::*;

    pub(crate) async fn fetch_all<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<Vec<R>>
    where
        E: Executor<'e, Database = Postgres>,
        R: FromBoth,
    {
        let (sql, arguments) = statement.for_postgres()?;
        Ok(sqlx::query_as_with::<Postgres, R, _>(&sql, arguments).fetch_all(executor).await?)
    }

    pub(crate) async fn fetch_optional<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<Option<R>>
    where
        E: Executor<'e, Database = Postgres>,
        R: FromBoth,
    {
        let (sql, arguments) = statement.for_postgres()?;
        Ok(sqlx::query_as_with::<Postgres, R, _>(&sql, arguments).fetch_optional(executor).await?)
    }

    pub(crate) async fn fetch_one<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<R>
    where
        E: Executor<'e, Database = Postgres>,
        R: FromBoth,
    {
        let (sql, arguments) = statement.for_postgres()?;
        Ok(sqlx::query_as_with::<Postgres, R, _>(&sql, arguments).fetch_one(executor).await?)
    }

    pub(crate) async fn execute<'e, E>(executor: E, statement: Statement<'_>) -> StoreResult<u64>
    where
        E: Executor<'e, Database = Postgres>,
    {
        let (sql, arguments) = statement.for_postgres()?;
        Ok(sqlx::query_with::<Postgres, _>(&sql, arguments).execute(executor).await?.rows_affected())
    }
}

/// What a database does its own way, under the domain areas written once. Implemented by the SQLite and the
/// PostgreSQL store.
#[async_trait]
pub(crate) trait SqlBackend: Clone + Send + Sync + 'static {
    // The backend itself: which database, and what it keeps in memory of the workspaces and of the tokens it saw.

    /// Which database this is.
    const BACKEND: Backend;

    /// What this store keeps in memory of each workspace.
    fn caches(&self) -> &super::Caches;

    /// The tokens this instance has recently seen valid (see `token_cache`).
    fn token_cache(&self) -> &TokenCache;

    // Connections, and opening and committing writes: a write commits whole or not at all (SQLite's batches on its
    // one writer, PostgreSQL's transactions).

    /// A write in progress: its statements commit together or not at all.
    type Write: Sql;

    /// Connections a statement runs on by itself: the read connections ([`SqlBackend::read`]) or the write
    /// connection ([`SqlBackend::write_alone`]).
    type Read<'a>: Sql
    where
        Self: 'a;

    /// Connections where a write of one statement runs on its own, committed when it returns.
    type Alone<'a>: Sql
    where
        Self: 'a;

    fn read(&self) -> Self::Read<'_>;

    /// Where a write of one statement runs on its own, outside any write in progress, committed when it returns;
    /// and where a read runs that must see the writes begun before it (SQLite's writer connection, where it waits
    /// for the batch in progress to commit; PostgreSQL's pool).
    fn write_alone(&self) -> Self::Alone<'_>;

    async fn begin_write(&self) -> StoreResult<Self::Write>;

    /// Commits the write, and tells the event hub of `last_event`, the newest event it appended, if any.
    async fn commit_write(&self, write: Self::Write, last_event: Option<i64>) -> StoreResult<()>;

    /// Commits a write that appended exactly one event, `event` with id `id` (SQLite hands it to the event hub, which
    /// passes it on without reading it back).
    async fn commit_one_event(&self, write: Self::Write, id: i64, event: &NewEvent) -> StoreResult<()>;

    /// Ends a write without storing anything of it, before the caller goes on: a dropped PostgreSQL transaction
    /// would keep its row locks until its connection is next used.
    async fn rollback_write(&self, write: Self::Write) -> StoreResult<()>;

    // Locking clauses and locks: what a write locks of the rows it reads to change them, each claim going to one
    // claimer across instances, and the runs a write that changes several of them locks first, so that two such
    // writes never wait for each other.

    /// Locks the rows a `SELECT` read for the rest of the write (nothing on SQLite, whose one writer holds the
    /// whole database).
    const FOR_UPDATE: &'static str;

    /// Locks the rows a `SELECT` read, passing over those another instance holds (nothing on SQLite).
    const FOR_UPDATE_SKIP_LOCKED: &'static str;

    /// Locks, for the rest of the write, the rows of `table` (a table or alias of its `FROM`) that a `SELECT` read
    /// ([`SqlBackend::FOR_UPDATE`] narrowed to it; nothing on SQLite, whose one writer holds the whole database).
    fn for_update_of(table: &str) -> String {
        if Self::FOR_UPDATE.is_empty() { String::new() } else { format!("{} OF {table}", Self::FOR_UPDATE) }
    }

    /// The condition of a claim's `UPDATE` of a table with `claimed_until`: its `id` is one of those `due` selects (a
    /// `SELECT` of the ids of rows due and not claimed at `$1`; `of`, the claimed table's alias in it, where it joins
    /// others). Each row goes to one claimer, across instances.
    fn claimable(due: &str, of: Option<&str>) -> String;

    /// Locks a run for the rest of the write, before one of its questions changes in a way that may resolve it:
    /// every resolving write of a run's question locks the run first (nothing on SQLite, whose one writer holds the
    /// whole database).
    async fn lock_run_in(&self, write: &mut Self::Write, workspace_id: Uuid, run_id: Uuid) -> StoreResult<()>;

    /// Before a run's worker releases it, as the write's first statements: locks the run and its parent (which its
    /// ending may requeue), before the write touches any question or the audit chain.
    async fn lock_run_and_parent(&self, write: &mut Self::Write, run_id: Uuid) -> StoreResult<()>;

    /// Before cancelling `root`: locks it, every run below it and its parent (which cancelling may requeue), before
    /// the write touches any question or the audit chain.
    async fn lock_run_tree(&self, write: &mut Self::Write, root: Uuid) -> StoreResult<()>;

    // SQL dialect pieces: the operators that differ between the databases (JSON, text search).

    /// The condition, beginning with its own ` AND `, that an approval question's `action` called tool `$2` with
    /// the arguments `$3` (bound as `sqlx::types::Json`) and its `response` approved it.
    const APPROVED_CALL: &'static str;

    /// Appends the text search's condition (on a question's title and body) to `statement`.
    fn push_text_match(statement: &mut Statement<'_>, text: &str);

    // Asking and resolving a question: the hot paths' entry points, and the general path's steps that differ per
    // database.

    /// The thread the writes of a question run on (asking, resolving, changing it while pending), when the caller
    /// runs on another: SQLite's writer has one of its own; PostgreSQL's writes run anywhere.
    fn writer_elsewhere(&self) -> Option<&WriterThread>;

    /// Asks a question of no run, without an idempotency key and with nothing else to write, on this backend's hot
    /// path (SQLite's direct connection, PostgreSQL's write batches); `None` if that path did not write it.
    async fn ask_on_hot_path(
        &self,
        question: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<Option<Created<QuestionRow>>>;

    /// Resolves a pending question of no run on this backend's hot path: whether it did, or `None` where that path
    /// cannot tell and the general one is to find out (SQLite, whose guess of the audit chain's head may be wrong).
    async fn resolve_on_hot_path(&self, transition: &QuestionTransition) -> StoreResult<Option<bool>>;

    /// Opens the write that asks a question off the hot path; `claims_key`: its first statement claims an
    /// idempotency key.
    async fn begin_asking(&self, claims_key: bool) -> StoreResult<Self::Write>;

    /// Inserts a question and appends its `question_asked` event inside the write, in one query; the event's id.
    /// `more_follow`: the write runs more statements after it.
    async fn insert_question_in(
        &self,
        write: &mut Self::Write,
        question: &QuestionRow,
        event: &NewEvent,
        more_follow: bool,
    ) -> StoreResult<i64>;

    /// Opens the write that resolves a question off the hot path, with the update that resolves it there (`$1`..`$7`
    /// as `Bind::bind_resolved` binds them, returning the question's id if it changed the row).
    async fn begin_resolving(&self) -> StoreResult<(Self::Write, Cow<'static, str>)>;

    // Events and audit entries, appended inside a write so that they commit if and only if the change they record
    // does.

    /// Whether an audit entry takes its place in its chain only when its write commits (PostgreSQL's drafts), so
    /// that what [`SqlBackend::append_audit_in`] returned is not yet the entry as stored.
    const SEALS_AUDIT_AT_COMMIT: bool;

    /// Appends an event inside the write; its id.
    async fn append_event_in(&self, write: &mut Self::Write, event: &NewEvent) -> StoreResult<i64>;

    /// Appends an audit entry to its workspace's chain inside the write, so it commits if and only if the change it
    /// records does.
    async fn append_audit_in(&self, write: &mut Self::Write, entry: &NewAuditEntry) -> StoreResult<AuditRow>;

    /// Appends an event and then an audit entry inside the write; the event's id.
    async fn append_event_and_audit_in(
        &self,
        write: &mut Self::Write,
        event: &NewEvent,
        entry: &NewAuditEntry,
    ) -> StoreResult<i64>;

    // Notifications: telling this instance's event hub of committed events, and the other instances of revocations.

    /// Where this store announces the events it committed, for the event hub.
    fn committed(&self) -> &watch::Sender<Committed>;

    /// Has the other instances forget the tokens they trust once the write commits (nothing on SQLite, where no
    /// other instance trusts any).
    async fn tell_others_of_a_revocation(&self, write: &mut Self::Write) -> StoreResult<()>;
}
