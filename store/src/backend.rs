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

use super::sql::TableRow;
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

    /// The row of a workspace's `table` with id `id`, its `columns` read: `SELECT` by `workspace_id` (`$1`) and `id`
    /// (`$2`).
    pub(crate) fn by_id(columns: &str, table: &str, workspace_id: Uuid, id: Uuid) -> Self {
        Self::new(format!("SELECT {columns} FROM {table} WHERE workspace_id = $1 AND id = $2"))
            .bind(workspace_id)
            .bind(id)
    }

    /// Inserts a whole row into its table.
    pub(crate) fn insert<R: TableRow>(row: &'q R) -> Self {
        row.bind_to(Self::new(R::insert()))
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

    /// Appends ` AND {condition}` and the next placeholder bound to `value`, if there is one: a listing's optional
    /// filter (`condition` ends with its operator: `"status = "`).
    pub(crate) fn push_filter(&mut self, condition: &str, value: Option<impl Both<'q>>) -> &mut Self {
        if let Some(value) = value {
            self.push(" AND ").push(condition).push_bind(value);
        }
        self
    }

    /// Appends the next placeholder (`$N`) and binds it.
    pub(crate) fn push_bind(&mut self, value: impl Both<'q>) -> &mut Self {
        self.arguments.push(Box::new(value));
        let placeholder = format!("${}", self.arguments.len());
        self.sql.to_mut().push_str(&placeholder);
        self
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

/// Stamps, as module `$module`, the statements of [`Sql`] on any executor of `$database`: the same code for both
/// databases, over each one's types and its way of adding a bound value (`$add`), as vaultwarden's `db_run!` stamps
/// one query per backend.
macro_rules! statements_on {
    ($module:ident, $database:ty, $add:ident) => {
        #[doc = concat!("The statements of [`Sql`] on any ", stringify!($database), " executor.")]
        pub(crate) mod $module {
            use super::*;

            fn prepared<'q>(
                statement: Statement<'q>,
            ) -> StoreResult<(Cow<'static, str>, <$database as sqlx::Database>::Arguments<'q>)> {
                let mut arguments = <$database as sqlx::Database>::Arguments::default();
                for argument in statement.arguments {
                    argument.$add(&mut arguments).map_err(encoding_failed)?;
                }
                Ok((statement.sql, arguments))
            }

            pub(crate) async fn fetch_all<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<Vec<R>>
            where
                E: Executor<'e, Database = $database>,
                R: FromBoth,
            {
                let (sql, arguments) = prepared(statement)?;
                Ok(sqlx::query_as_with::<$database, R, _>(&sql, arguments).fetch_all(executor).await?)
            }

            pub(crate) async fn fetch_optional<'e, E, R>(
                executor: E,
                statement: Statement<'_>,
            ) -> StoreResult<Option<R>>
            where
                E: Executor<'e, Database = $database>,
                R: FromBoth,
            {
                let (sql, arguments) = prepared(statement)?;
                Ok(sqlx::query_as_with::<$database, R, _>(&sql, arguments).fetch_optional(executor).await?)
            }

            pub(crate) async fn fetch_one<'e, E, R>(executor: E, statement: Statement<'_>) -> StoreResult<R>
            where
                E: Executor<'e, Database = $database>,
                R: FromBoth,
            {
                let (sql, arguments) = prepared(statement)?;
                Ok(sqlx::query_as_with::<$database, R, _>(&sql, arguments).fetch_one(executor).await?)
            }

            pub(crate) async fn execute<'e, E>(executor: E, statement: Statement<'_>) -> StoreResult<u64>
            where
                E: Executor<'e, Database = $database>,
            {
                let (sql, arguments) = prepared(statement)?;
                Ok(sqlx::query_with::<$database, _>(&sql, arguments).execute(executor).await?.rows_affected())
            }
        }
    };
}

statements_on!(on_sqlite, Sqlite, add_to_sqlite);
statements_on!(on_postgres, Postgres, add_to_postgres);

/// Implements [`Sql`] for `$type`, each statement running on `$executor` (made of `self`, named `$this`) through
/// `$module`'s functions ([`on_sqlite`] or [`on_postgres`]).
macro_rules! impl_sql {
    ($type:ty, $module:ident, |$this:ident| $executor:expr) => {
        #[async_trait::async_trait]
        impl $crate::backend::Sql for $type {
            async fn fetch_all<R: $crate::backend::FromBoth>(
                &mut self,
                statement: $crate::backend::Statement<'_>,
            ) -> $crate::StoreResult<Vec<R>> {
                let $this = self;
                $crate::backend::$module::fetch_all($executor, statement).await
            }

            async fn fetch_optional<R: $crate::backend::FromBoth>(
                &mut self,
                statement: $crate::backend::Statement<'_>,
            ) -> $crate::StoreResult<Option<R>> {
                let $this = self;
                $crate::backend::$module::fetch_optional($executor, statement).await
            }

            async fn fetch_one<R: $crate::backend::FromBoth>(
                &mut self,
                statement: $crate::backend::Statement<'_>,
            ) -> $crate::StoreResult<R> {
                let $this = self;
                $crate::backend::$module::fetch_one($executor, statement).await
            }

            async fn execute(&mut self, statement: $crate::backend::Statement<'_>) -> $crate::StoreResult<u64> {
                let $this = self;
                $crate::backend::$module::execute($executor, statement).await
            }
        }
    };
}

pub(crate) use impl_sql;

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

    /// Runs `statement` in a write of its own with the audit entries that record it, and commits: whether it changed
    /// a row. A statement that changed none is rolled back, with no entry appended.
    async fn write_audited<'a, I>(&self, statement: Statement<'_>, audit: I) -> StoreResult<bool>
    where
        I: IntoIterator<Item = &'a NewAuditEntry> + Send + 'a,
        I::IntoIter: Send,
    {
        let mut write = self.begin_write().await?;
        if write.execute(statement).await? == 0 {
            self.rollback_write(write).await?;
            return Ok(false);
        }
        for entry in audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        self.commit_write(write, None).await?;
        Ok(true)
    }

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
    async fn lock_run_in(&self, _write: &mut Self::Write, _workspace_id: Uuid, _run_id: Uuid) -> StoreResult<()> {
        Ok(())
    }

    /// Before a run's worker releases it, as the write's first statements: locks the run and its parent (which its
    /// ending may requeue), before the write touches any question or the audit chain (nothing on SQLite).
    async fn lock_run_and_parent(&self, _write: &mut Self::Write, _run_id: Uuid) -> StoreResult<()> {
        Ok(())
    }

    /// Before cancelling `root`: locks it, every run below it and its parent (which cancelling may requeue), before
    /// the write touches any question or the audit chain (nothing on SQLite).
    async fn lock_run_tree(&self, _write: &mut Self::Write, _root: Uuid) -> StoreResult<()> {
        Ok(())
    }

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
    async fn tell_others_of_a_revocation(&self, _write: &mut Self::Write) -> StoreResult<()> {
        Ok(())
    }
}
