//! The SQL of both backends, written once.
//!
//! `sql_store!` expands to the [`Store`] implementation for one sqlx database type. The statements use `$N`
//! placeholders, which SQLite and PostgreSQL both accept; where the dialects differ, each store names its own
//! statement in its `Dialect` constants.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgPool, Postgres, QueryBuilder, Sqlite};
use tokio::sync::watch;
use uuid::Uuid;

use app::types::{AnswerBody, QuestionKind, QuestionStatus, Resolution};

use super::group_commit::{BatchedWrite, GroupCommit};
use super::pg_write_batch::{BatchQuery, BatchableWrite, WriteBatches};
use super::sqlite_connections::SqliteConnections;
use super::sqlite_direct::{DirectArguments, Statements};
use super::token_cache::TokenCache;
use super::*;

/// The columns of `questions`, in the order of [`QuestionRow`].
pub(super) const QUESTION_COLUMNS: &str = "id, workspace_id, project, run_id, tool_call_id, parent_run_ids, kind, response_type, \
     title, body, options, fields, action, allow_edit, context, urgency, timeout_at, default_response, status, \
     response, answered_by, resolution, created_by, created_at, updated_at, resolved_at, assignee";

/// The columns of `audit_log`, in the order of [`AuditRow`].
pub(super) const AUDIT_COLUMNS: &str = "id, workspace_id, seq, prev_hash, hash, actor, actor_id, actor_kind, action, \
     subject_type, subject_id, before, after, diff, created_at";

/// Claims a workspace's audit chain head, creating it at `seq` 0 on the first entry (SQLite, when its guess of the
/// head was wrong; SQLite's one writer serialises appends by itself). PostgreSQL claims the head in the trigger that
/// seals an entry at commit (migration 0010), under the event log's lock.
const CLAIM_AUDIT_HEAD: &str = "INSERT INTO audit_heads (workspace_id, seq, hash) VALUES ($1, 0, $2) \
     ON CONFLICT (workspace_id) DO UPDATE SET seq = audit_heads.seq RETURNING seq, hash";

/// Appends an audit entry whose `seq` and `prev_hash` were taken from the claimed head; returns its `seq`.
static APPEND_AUDIT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO audit_log ({AUDIT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
         RETURNING seq"
    )
});

/// `bind`, which `sqlx::query` and `sqlx::query_as` each have, so that one function can bind a row to either.
trait Bind<'q, DB: sqlx::Database>: Sized {
    fn bind_arg<T: 'q + sqlx::Encode<'q, DB> + sqlx::Type<DB>>(self, value: T) -> Self;
}

impl<'q, DB: sqlx::Database> Bind<'q, DB> for sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>> {
    fn bind_arg<T: 'q + sqlx::Encode<'q, DB> + sqlx::Type<DB>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, DB: sqlx::Database, O> Bind<'q, DB>
    for sqlx::query::QueryAs<'q, DB, O, <DB as sqlx::Database>::Arguments<'q>>
{
    fn bind_arg<T: 'q + sqlx::Encode<'q, DB> + sqlx::Type<DB>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q> Bind<'q, Sqlite> for super::sqlite_direct::DirectArguments<'q> {
    fn bind_arg<T: 'q + sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite>>(mut self, value: T) -> Self {
        self.add(value);
        self
    }
}

/// The test that a question named by its id is still pending, in an `UPDATE` that resolves it. Written plainly,
/// `workspace_id = .. AND id = .. AND status = 'pending'`, PostgreSQL's planner, on a table autovacuum has not
/// analyzed yet (a new database, or one that grew fast), rates `questions_status_deadline` (workspace, status,
/// deadline, id, ...) as good as the primary key and takes it, then walks the workspace's pending entries, the
/// dead ones of questions resolved since the last vacuum included, to find the id: 40 buffers and ~0.2 ms a resolve
/// in the HITL benchmark, against 3 through the key. A test on an expression cannot come from that index.
const STILL_PENDING: &str = "status || '' = 'pending'";

/// Writes an entry as a draft, without its place in the chain, for the commit to seal (PostgreSQL, migration 0010).
const INSERT_AUDIT_DRAFT: &str = "INSERT INTO audit_drafts (id, workspace_id, actor, actor_id, actor_kind, action, \
     subject_type, subject_id, before, after, diff, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// Appends an audit entry only if the stored head is the one its `seq` (`$3`) and `prev_hash` (`$4`) follow; returns
/// its `seq` if it did.
static APPEND_AUDIT_IF_HEAD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO audit_log ({AUDIT_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 \
         WHERE EXISTS (SELECT 1 FROM audit_heads WHERE workspace_id = $2 AND seq = $3 - 1 AND hash = $4) RETURNING seq"
    )
});

/// The highest `$N` placeholder of `sql`: how many arguments it takes.
fn placeholder_count(sql: &str) -> usize {
    sql.split('$')
        .skip(1)
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// Principals of tokens.
const TOKEN_PRINCIPAL: &str = "SELECT t.id, CAST('token' AS TEXT) AS kind, t.workspace_id, w.name AS workspace, \
     t.name, t.role FROM tokens t JOIN workspaces w ON w.id = t.workspace_id";

/// The SQLite store: one writer connection, whose write transactions commit in batches, and a pool of read-only
/// ones.
#[derive(Clone)]
pub struct SqliteStore {
    pub(super) read: SqliteConnections,
    pub(super) write: SqliteConnections,
    writer: GroupCommit,
    committed: watch::Sender<Committed>,
    pub(super) tokens: Arc<TokenCache>,
    writer_thread: WriterThread,
    /// The names of the workspaces this store has read.
    pub(super) workspace_names: Arc<super::WorkspaceNames>,
    /// Where this store last saw each workspace's audit chain end.
    pub(super) audit_heads: Arc<super::AuditHeads>,
}

/// A runtime of its own, on a thread of its own, for the two writes of a HITL cycle (asking and resolving a
/// question). A write holds the one writer from its first statement to its last; on the server's runtime each of
/// its awaits (its turn at the writer, each statement's reply from SQLite's thread) waited for a worker busy with
/// other requests, and the writer sat idle meanwhile. Here nothing else runs. A write sent here runs to its end
/// even if its caller goes away (a client that disconnects), as one that committed just before would have. The
/// thread stops once the last clone of its store is dropped.
#[derive(Clone)]
struct WriterThread {
    handle: tokio::runtime::Handle,
    _stop: Arc<tokio::sync::oneshot::Sender<()>>,
}

impl WriterThread {
    fn start() -> StoreResult<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| StoreError::WriterThread(format!("cannot start its runtime: {err}")))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("holdpoint-writer".into())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .map_err(|err| StoreError::WriterThread(format!("cannot start it: {err}")))?;
        Ok(Self { handle, _stop: Arc::new(stop) })
    }

    /// `Some` unless the caller already runs on this writer's runtime.
    fn elsewhere(&self) -> Option<&Self> {
        let here = tokio::runtime::Handle::try_current().is_ok_and(|current| current.id() == self.handle.id());
        (!here).then_some(self)
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = StoreResult<T>> + Send + 'static,
    ) -> StoreResult<T> {
        self.handle
            .spawn(work)
            .await
            .map_err(|err| StoreError::WriterThread(format!("a write ended without an outcome: {err}")))?
    }
}

impl SqliteStore {
    /// SQLite runs one writer at a time, so event ids are committed in order without a lock; one process per
    /// database file in practice, and other writers are seen by the hub's poll, so nobody is notified.
    const INSERT_EVENT: &'static str = "INSERT INTO events (workspace_id, event_type, project, run_id, question_id, data, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id";
    /// The id `INSERT_EVENT` returns is the event's, so a commit can hand the event to the hub.
    const EVENT_ID_FINAL_AT_INSERT: bool = true;
    /// A question and its `question_asked` event go in as two statements of one query: the connection's thread
    /// runs them in turn, `$N` naming the same argument in both, so the pair costs one hand-off to that thread.
    const QUESTION_THEN_EVENT: (&'static str, &'static str) = ("", "; ");
    /// `BEGIN IMMEDIATE` makes the writer the only one, so an append can check its guess of the chain's head in the
    /// same statement that inserts the entry, which spares the claim's statement (see [`super::AuditHeads`]).
    const GUESS_AUDIT_HEAD: bool = true;
    /// Entries are sealed as they are written: the one writer already appends one at a time.
    const AUDIT_SEALED_AT_COMMIT: bool = false;
    /// Nothing to lock: `BEGIN IMMEDIATE` on the one writer already runs write transactions one at a time.
    const RESOLVE_LOCKING_RUN: (&'static str, &'static str) = ("", "");
    /// One process per database: no other instance caches tokens.
    pub(super) const TELL_OTHERS_OF_A_REVOCATION: Option<&'static str> = None;

    /// The text search's condition: the `regex` crate's case-insensitive match (Unicode's case folding), which sqlx
    /// registers as SQLite's `REGEXP`. SQLite's own `LOWER` and `LIKE` fold ASCII letters only, so `überweisung`
    /// would never find `Überweisung`.
    fn push_text_match(query: &mut QueryBuilder<'static, Sqlite>, text: &str) {
        let pattern = format!("(?i){}", regex::escape(text));
        query.push(" AND (title REGEXP ").push_bind(pattern.clone());
        query.push(" OR body REGEXP ").push_bind(pattern);
        query.push(")");
    }

    pub(super) async fn new(
        read: SqliteConnections,
        write: SqliteConnections,
        direct: Option<super::sqlite_direct::DirectConnection>,
        token_cache: std::time::Duration,
    ) -> StoreResult<Self> {
        let last = last_event_id(&write).await?;
        let writer = GroupCommit::new(write.clone());
        let writer = match direct {
            Some(direct) => writer.with_direct(direct),
            None => writer,
        };
        let committed = watch::channel(Committed { last, read_through: last, ..Committed::default() }).0;
        // Nobody else revokes tokens in this database: the cache serves from the start.
        let tokens = Arc::new(TokenCache::new(true, token_cache));
        Ok(Self {
            read,
            write,
            writer,
            committed,
            tokens,
            writer_thread: WriterThread::start()?,
            workspace_names: Arc::default(),
            audit_heads: Arc::default(),
        })
    }

    /// A write transaction, run in the batch the writer has open (see [`GroupCommit`]). Batches begin with
    /// `BEGIN IMMEDIATE`, which takes the write lock up front, so a transaction that reads before it writes cannot
    /// fail with `SQLITE_BUSY` half-way when another process writes too.
    pub(super) async fn begin_write(&self) -> Result<BatchedWrite, sqlx::Error> {
        self.writer.begin().await
    }

    /// The writer's thread, when the caller runs elsewhere: the hot writes move there.
    fn writer_elsewhere(&self) -> Option<&WriterThread> {
        self.writer_thread.elsewhere()
    }

    /// A write transaction whose queries open (and may release) its savepoint themselves (see [`WriteSql`]).
    pub(super) async fn begin_write_inline(&self) -> Result<BatchedWrite, sqlx::Error> {
        self.writer.begin_inline().await
    }
}

/// SQL that a write transaction puts around its own statements: on SQLite, the savepoint of a write begun inline
/// (see `GroupCommit::begin_inline`), which spares the hot writes a trip to the connection's thread for each
/// savepoint statement; on PostgreSQL nothing (each statement is a round trip either way).
trait WriteSql {
    /// Goes before the write's first statement.
    fn savepoint(&mut self) -> &'static str;
    /// Go before and after a write's one and only query, read to its end.
    fn savepoint_released_in_one_query(&mut self) -> (&'static str, &'static str);
}

impl WriteSql for BatchedWrite {
    fn savepoint(&mut self) -> &'static str {
        BatchedWrite::savepoint(self)
    }

    fn savepoint_released_in_one_query(&mut self) -> (&'static str, &'static str) {
        BatchedWrite::savepoint_released_in_one_query(self)
    }
}

impl WriteSql for sqlx::Transaction<'static, Postgres> {
    fn savepoint(&mut self) -> &'static str {
        ""
    }

    fn savepoint_released_in_one_query(&mut self) -> (&'static str, &'static str) {
        ("", "")
    }
}

/// The PostgreSQL store.
#[derive(Clone)]
pub struct PostgresStore {
    pub(super) pool: PgPool,
    committed: watch::Sender<Committed>,
    /// Serves only while the listener hears the other instances' revocations.
    pub(super) tokens: Arc<TokenCache>,
    /// Stops the listener when the store is dropped, and only then: nobody follows the store's commits at start,
    /// before the event hub's task subscribes, and revocations through other instances must be heard from the
    /// first moment the token cache serves.
    _stop_listening: Arc<tokio_util::sync::DropGuard>,
    /// Where asking and resolving run, committed in batches.
    batches: WriteBatches,
    /// The names of the workspaces this store has read.
    pub(super) workspace_names: Arc<super::WorkspaceNames>,
    /// Stays empty: a PostgreSQL append claims its chain's head (`GUESS_AUDIT_HEAD`); here for the code both
    /// stores share.
    pub(super) audit_heads: Arc<super::AuditHeads>,
}

impl PostgresStore {
    pub(super) async fn begin_write(&self) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
        self.pool.begin().await
    }

    /// Writes run on the caller's task.
    fn writer_elsewhere(&self) -> Option<&WriterThread> {
        None
    }

    /// The same as `begin_write`: each statement is a round trip to PostgreSQL whatever it holds.
    pub(super) async fn begin_write_inline(&self) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
        self.begin_write().await
    }

    /// Appends the event under a draft id; migration 0008's deferred trigger gives it its id when the transaction
    /// commits, under the event log's lock, and tells the other instances (LISTEN/NOTIFY, delivered on commit). The
    /// log stays the source of truth, so a lost notification only delays an event until the hub's next poll.
    const INSERT_EVENT: &'static str = "INSERT INTO events (id, workspace_id, event_type, project, run_id, question_id, data, created_at) \
         OVERRIDING SYSTEM VALUE VALUES (-nextval('events_draft_id_seq'), $1, $2, $3, $4, $5, $6, $7) RETURNING id";
    /// Resolving a pending question as common table expressions of a batch's statement (see `pg_write_batch`),
    /// `NAME` standing for the write's name: the update (`$1`..`$7`, as `bind_resolved` binds them), the audit
    /// draft (`$15`..`$26`) and the event (`$8`..`$14`, as `INSERT_EVENT` binds them), the last two only if the
    /// update changed the row, so a question no longer pending writes nothing and returns no row. The status is
    /// tested as `STILL_PENDING` does, for the reason it gives.
    const RESOLVE_AS_EXPRESSIONS: &'static str = "NAME_resolved AS (UPDATE questions SET status = $1, response = $2, answered_by = $3, \
         resolution = $4, resolved_at = $5, updated_at = $5 WHERE workspace_id = $6 AND id = $7 AND status || '' = 'pending' \
         RETURNING id), \
         NAME_draft AS (INSERT INTO audit_drafts (id, workspace_id, actor, actor_id, actor_kind, action, subject_type, \
         subject_id, before, after, diff, created_at) \
         SELECT $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26 FROM NAME_resolved), \
         NAME AS (INSERT INTO events (id, workspace_id, event_type, project, run_id, question_id, data, created_at) \
         OVERRIDING SYSTEM VALUE SELECT -nextval('events_draft_id_seq'), $8, $9, $10, $11, $12, $13, $14 FROM NAME_resolved \
         RETURNING id)";
    /// Ids are drawn at commit: the hub learns of this instance's events as of the others', by notification.
    const EVENT_ID_FINAL_AT_INSERT: bool = false;
    /// Instances append concurrently: only the commit that seals an entry can know the head it follows.
    const GUESS_AUDIT_HEAD: bool = false;
    /// Entries are written as drafts and sealed into the chain inside COMMIT (migration 0010), so no transaction
    /// holds the chain's head over its own statements.
    const AUDIT_SEALED_AT_COMMIT: bool = true;
    /// A question and its `question_asked` event go in with one statement (one round trip): the question's
    /// insert is a data-modifying `WITH`, which PostgreSQL runs to completion whatever the main statement reads.
    const QUESTION_THEN_EVENT: (&'static str, &'static str) = ("WITH asked AS (", ") ");
    /// Resolving a run's question ends by requeueing the run, and cancelling a run cancels its questions: locking
    /// the run first, as cancelling does, keeps the two from each holding what the other waits for (the database
    /// would abort one of them as a deadlock). Wrapped around the resolving `UPDATE` (`$6` the workspace, `$7` the
    /// question), so it costs no round trip of its own: the condition on the CTE refers to no column of the
    /// question, so PostgreSQL checks it once, before it scans for the question, and the run is locked first.
    const RESOLVE_LOCKING_RUN: (&'static str, &'static str) = (
        "WITH run_lock AS MATERIALIZED (SELECT r.id FROM questions q \
         JOIN runs r ON r.id = q.run_id AND r.workspace_id = q.workspace_id \
         WHERE q.workspace_id = $6 AND q.id = $7 AND q.status = 'pending' FOR UPDATE OF r) ",
        " AND (SELECT COUNT(*) FROM run_lock) >= 0",
    );
    /// The other instances forget the tokens they trusted (see `token_cache`); delivered when the revocation commits.
    pub(super) const TELL_OTHERS_OF_A_REVOCATION: Option<&'static str> =
        Some("SELECT pg_notify('holdpoint_credentials', '')");

    /// The text search's condition: the pattern lowered as the columns are, by the database's `LOWER` (its locale's
    /// case mapping: every letter under a UTF-8 locale); `%`, `_` and `\` match themselves.
    fn push_text_match(query: &mut QueryBuilder<'static, Postgres>, text: &str) {
        let pattern = format!("%{}%", text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        query.push(" AND (LOWER(title) LIKE LOWER(").push_bind(pattern.clone());
        query.push(") ESCAPE '\\' OR LOWER(body) LIKE LOWER(").push_bind(pattern);
        query.push(") ESCAPE '\\')");
    }

    pub async fn new(pool: PgPool, token_cache: std::time::Duration) -> StoreResult<Self> {
        let last = last_event_id(&pool).await?;
        let committed = watch::channel(Committed { last, read_through: last, ..Committed::default() }).0;
        let tokens = Arc::new(TokenCache::new(false, token_cache));
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(listen_to_other_instances(pool.clone(), committed.clone(), Arc::clone(&tokens), stop.clone()));
        let batches = WriteBatches::start(pool.clone());
        Ok(Self {
            pool,
            committed,
            tokens,
            _stop_listening: Arc::new(stop.drop_guard()),
            batches,
            workspace_names: Arc::default(),
            audit_heads: Arc::default(),
        })
    }
}

/// Follows the other instances' commits (each notification on [`EVENTS_CHANNEL`] carries the newest event id of a
/// commit) and revocations ([`CREDENTIALS_CHANNEL`]). The token cache serves only while this listens: a
/// notification sent while the connection is down is lost, so a lost connection forgets every token and the cache
/// waits for a new one to be listening again.
async fn listen_to_other_instances(
    pool: PgPool,
    committed: watch::Sender<Committed>,
    tokens: Arc<TokenCache>,
    stop: tokio_util::sync::CancellationToken,
) {
    while !stop.is_cancelled() {
        let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for other instances' events; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(err) = listener.listen_all([EVENTS_CHANNEL, CREDENTIALS_CHANNEL]).await {
            tracing::warn!(error = %err, "cannot listen for other instances' events; retrying");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        tokens.listening(true);
        loop {
            // `try_recv` says when the connection was lost (`None`), where `recv` would reconnect silently.
            let received = tokio::select! {
                received = listener.try_recv() => received,
                () = stop.cancelled() => return,
            };
            match received {
                Ok(Some(notification)) if notification.channel() == CREDENTIALS_CHANNEL => tokens.forget_all(),
                Ok(Some(notification)) => {
                    if let Ok(id) = notification.payload().parse::<i64>() {
                        announce(&committed, id, None);
                    }
                }
                Ok(None) => {
                    tracing::warn!("lost the other instances' notifications; reconnecting");
                    break;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "lost the other instances' notifications; reconnecting");
                    break;
                }
            }
        }
        tokens.listening(false);
    }
}

async fn last_event_id<'e, E>(executor: E) -> StoreResult<i64>
where
    E: sqlx::Executor<'e>,
    i64: for<'r> sqlx::Decode<'r, E::Database> + sqlx::Type<E::Database>,
    for<'q> <E::Database as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, E::Database>,
    usize: sqlx::ColumnIndex<<E::Database as sqlx::Database>::Row>,
{
    let (id,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(id), 0) FROM events").fetch_one(executor).await?;
    Ok(id)
}

/// Tells the hub that the event with id `last` is committed, handing it over if given (then the hub is woken even
/// when a later event's commit was told first: it may be the one the hub waits for).
fn announce(committed: &watch::Sender<Committed>, last: i64, event: Option<HubEvent>) {
    committed.send_if_modified(|current| {
        let mut changed = false;
        match event {
            Some(event) => {
                current.handed_over.insert(event);
                changed = true;
            }
            None if last > current.read_through => {
                current.read_through = last;
                changed = true;
            }
            None => {}
        }
        if last > current.last {
            current.last = last;
            changed = true;
        }
        changed
    });
}

/// The channel on which PostgreSQL instances announce committed events to each other.
const EVENTS_CHANNEL: &str = "holdpoint_events";
/// The channel on which a PostgreSQL instance tells the others that a token was revoked.
const CREDENTIALS_CHANNEL: &str = "holdpoint_credentials";

/// `sql` with each `$N` placeholder raised by `by`, so it can follow a statement that takes `$1`..`$by`.
fn shift_placeholders(sql: &str, by: usize) -> String {
    let mut shifted = String::with_capacity(sql.len() + 8);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        shifted.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => shifted.push_str(&(n + by).to_string()),
            Err(_) => shifted.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    shifted.push_str(rest);
    shifted
}

/// `INSERT INTO questions` with one argument per column of [`QUESTION_COLUMNS`] (`$1`..`$27`), followed by what
/// `(open, close)` needs to make it and the event's insert (`$28`..) one query.
fn insert_question_then_event(open: &str, close: &str, insert_event: &str) -> String {
    let arguments = QUESTION_COLUMNS.split(',').count();
    let placeholders = (1..=arguments).map(|n| format!("${n}")).collect::<Vec<_>>().join(", ");
    format!(
        "{open}INSERT INTO questions ({QUESTION_COLUMNS}) VALUES ({placeholders}){close}{}",
        shift_placeholders(insert_event, arguments)
    )
}

pub(super) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

macro_rules! sql_store {
    ($store:ty, $db:ty, read = $read:ident, write = $write:ident, tx = $tx:ty) => {
        impl $store {
            /// `head` (a `SELECT ... FROM questions`) with the filter's conditions on the workspace's questions (not
            /// its cursor, order or limit).
            fn filtered_questions(head: &str, workspace_id: Uuid, filter: &QuestionFilter) -> QueryBuilder<'static, $db> {
                let mut query = QueryBuilder::<$db>::new(format!("{head} WHERE workspace_id = "));
                query.push_bind(workspace_id);
                if let Some(status) = filter.status {
                    query.push(" AND status = ").push_bind(status.as_str());
                }
                if let Some(kind) = filter.kind {
                    query.push(" AND kind = ").push_bind(kind.as_str());
                }
                if let Some(project) = &filter.project {
                    query.push(" AND project = ").push_bind(project.clone());
                }
                if let Some(urgency) = filter.urgency {
                    query.push(" AND urgency = ").push_bind(urgency.as_str());
                }
                if let Some(run_id) = filter.run_id {
                    query.push(" AND run_id = ").push_bind(run_id);
                }
                if let Some(created_by) = filter.created_by {
                    query.push(" AND created_by = ").push_bind(created_by);
                }
                if let Some(text) = &filter.text {
                    Self::push_text_match(&mut query, text);
                }
                query
            }

            /// One page of questions in the filter's order, starting after its cursor, as rows of `columns`.
            async fn list_question_rows<R>(
                &self,
                columns: &str,
                workspace_id: Uuid,
                filter: &QuestionFilter,
            ) -> StoreResult<Vec<R>>
            where
                R: for<'r> sqlx::FromRow<'r, <$db as sqlx::Database>::Row> + Send + Unpin,
            {
                let head = format!("SELECT {columns} FROM questions");
                let limit = i64::from(filter.limit);
                if filter.sort == QuestionSort::CreatedDesc {
                    let mut query = Self::filtered_questions(&head, workspace_id, filter);
                    if let Some(QuestionCursor::Created { id }) = &filter.after {
                        query.push(" AND id < ").push_bind(*id);
                    }
                    query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
                    return Ok(query.build_query_as().fetch_all(&self.$read).await?);
                }
                // Soonest deadline first, then the questions without one, oldest first: two queries rather than one
                // `ORDER BY timeout_at NULLS LAST`, because each can walk an index in its order and stop after a
                // page, where the single query sorted every matching question for every page (SQLite's indexes
                // keep NULLs first, so none can serve NULLS LAST).
                let mut rows: Vec<R> = Vec::new();
                let past_dated = matches!(filter.after, Some(QuestionCursor::Deadline { timeout_at: None, .. }));
                if !past_dated {
                    let mut query = Self::filtered_questions(&head, workspace_id, filter);
                    query.push(" AND timeout_at IS NOT NULL");
                    if let Some(QuestionCursor::Deadline { timeout_at: Some(at), id }) = &filter.after {
                        query.push(" AND (timeout_at > ").push_bind(*at);
                        query.push(" OR (timeout_at = ").push_bind(*at);
                        query.push(" AND id > ").push_bind(*id);
                        query.push("))");
                    }
                    query.push(" ORDER BY timeout_at ASC, id ASC LIMIT ").push_bind(limit);
                    rows = query.build_query_as().fetch_all(&self.$read).await?;
                }
                let missing = limit - rows.len() as i64;
                if missing > 0 {
                    let mut query = Self::filtered_questions(&head, workspace_id, filter);
                    query.push(" AND timeout_at IS NULL");
                    if let Some(QuestionCursor::Deadline { timeout_at: None, id }) = &filter.after {
                        query.push(" AND id > ").push_bind(*id);
                    }
                    query.push(" ORDER BY id ASC LIMIT ").push_bind(missing);
                    rows.extend(query.build_query_as::<R>().fetch_all(&self.$read).await?);
                }
                Ok(rows)
            }

            /// Appends an event inside the caller's transaction; returns its id.
            pub(super) async fn append_event(tx: &mut $tx, event: &NewEvent) -> StoreResult<i64> {
                let (id,): (i64,) = Self::bind_event(sqlx::query_as::<_, (i64,)>(Self::INSERT_EVENT), event).fetch_one(&mut **tx).await?;
                Ok(id)
            }

            /// Binds an event's values, in the order of `INSERT_EVENT`'s placeholders, after what `query` has.
            fn bind_event<'q, Q: Bind<'q, $db>>(query: Q, event: &'q NewEvent) -> Q {
                query
                    .bind_arg(event.workspace_id)
                    .bind_arg(event.event_type.as_str())
                    .bind_arg(&event.project)
                    .bind_arg(event.run_id)
                    .bind_arg(event.question_id)
                    .bind_arg(Json(&event.data))
                    .bind_arg(event.created_at)
            }

            /// Binds what resolving a question writes and which question it is, `resolved` being the row as it
            /// leaves `pending`: `$1`..`$7` of the stores' one-query resolving writes.
            fn bind_resolved<'q, Q: Bind<'q, $db>>(query: Q, resolved: &'q QuestionRow) -> Q {
                query
                    .bind_arg(&resolved.status)
                    .bind_arg(&resolved.response)
                    .bind_arg(&resolved.answered_by)
                    .bind_arg(&resolved.resolution)
                    .bind_arg(resolved.updated_at)
                    .bind_arg(resolved.workspace_id)
                    .bind_arg(resolved.id)
            }

            /// Binds a question's columns, in the order of [`QUESTION_COLUMNS`], after what `query` has.
            fn bind_question<'q, Q: Bind<'q, $db>>(query: Q, q: &'q QuestionRow) -> Q {
                query
                    .bind_arg(q.id)
                    .bind_arg(q.workspace_id)
                    .bind_arg(&q.project)
                    .bind_arg(q.run_id)
                    .bind_arg(&q.tool_call_id)
                    .bind_arg(&q.parent_run_ids)
                    .bind_arg(&q.kind)
                    .bind_arg(&q.response_type)
                    .bind_arg(&q.title)
                    .bind_arg(&q.body)
                    .bind_arg(&q.options)
                    .bind_arg(&q.fields)
                    .bind_arg(&q.action)
                    .bind_arg(q.allow_edit)
                    .bind_arg(&q.context)
                    .bind_arg(&q.urgency)
                    .bind_arg(q.timeout_at)
                    .bind_arg(&q.default_response)
                    .bind_arg(&q.status)
                    .bind_arg(&q.response)
                    .bind_arg(&q.answered_by)
                    .bind_arg(&q.resolution)
                    .bind_arg(q.created_by)
                    .bind_arg(q.created_at)
                    .bind_arg(q.updated_at)
                    .bind_arg(q.resolved_at)
                    .bind_arg(&q.assignee)
            }

            /// The query that stores a question and appends its `question_asked` event (see `QUESTION_THEN_EVENT`).
            fn insert_question_then_event_sql() -> &'static str {
                static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
                    let (open, close) = <$store>::QUESTION_THEN_EVENT;
                    insert_question_then_event(open, close, <$store>::INSERT_EVENT)
                });
                &SQL
            }

            /// Appends an audit entry to its workspace's chain inside the caller's transaction, so the entry
            /// commits if and only if the change it records does.
            /// Returns the entry as stored, or where the commit seals it (`AUDIT_SEALED_AT_COMMIT`), its draft.
            pub(crate) async fn append_audit_in(
                &self,
                tx: &mut $tx,
                entry: &NewAuditEntry,
            ) -> StoreResult<AuditRow> {
                if Self::AUDIT_SEALED_AT_COMMIT {
                    let draft = AuditRow::unsealed(entry);
                    Self::bind_audit_draft(sqlx::query(INSERT_AUDIT_DRAFT), &draft).execute(&mut **tx).await?;
                    return Ok(draft);
                }
                if let Some(row) = self.sealed_on_guessed_head(entry) {
                    let guess_held =
                        Self::bind_audit_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT_IF_HEAD), &row).fetch_optional(&mut **tx).await?;
                    if guess_held.is_some() {
                        self.audit_heads.remember(row.workspace_id, row.seq, &row.hash);
                        return Ok(row);
                    }
                }
                self.append_audit_claiming_head(tx, entry).await
            }

            /// The entry sealed as the successor of the head this store guesses (see [`super::AuditHeads`]), where the
            /// store appends on a guess and has one.
            fn sealed_on_guessed_head(&self, entry: &NewAuditEntry) -> Option<AuditRow> {
                if !Self::GUESS_AUDIT_HEAD {
                    return None;
                }
                let (seq, hash) = self.audit_heads.guess(entry.workspace_id)?;
                Some(AuditRow::seal(entry, seq + 1, hash))
            }

            /// Appends an audit entry after the head it claims (see `CLAIM_AUDIT_HEAD`).
            async fn append_audit_claiming_head(&self, tx: &mut $tx, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
                let (seq, prev_hash): (i64, String) = sqlx::query_as(CLAIM_AUDIT_HEAD)
                    .bind(entry.workspace_id)
                    .bind(super::GENESIS_HASH)
                    .fetch_one(&mut **tx)
                    .await?;
                let row = AuditRow::seal(entry, seq + 1, prev_hash);
                Self::bind_audit_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT), &row).fetch_one(&mut **tx).await?;
                // The insert's trigger (migration 0007) has moved the head to this entry.
                if Self::GUESS_AUDIT_HEAD {
                    self.audit_heads.remember(row.workspace_id, row.seq, &row.hash);
                }
                Ok(row)
            }

            /// Appends an event and then an audit entry inside the caller's transaction; returns the event's id.
            /// Where the store guesses the audit chain's head (SQLite) and has a guess, both go in with one query,
            /// one hand-off to the connection's thread: the event's insert, then the entry's checked insert (as in
            /// `append_audit_in`), `$N` of the second shifted past the first's arguments.
            pub(super) async fn append_event_and_audit(
                &self,
                tx: &mut $tx,
                event: &NewEvent,
                entry: &NewAuditEntry,
            ) -> StoreResult<i64> {
                if Self::AUDIT_SEALED_AT_COMMIT {
                    // One statement: the draft's insert is a data-modifying `WITH` around the event's.
                    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
                        let insert_event = <$store>::INSERT_EVENT;
                        let draft = shift_placeholders(INSERT_AUDIT_DRAFT, placeholder_count(insert_event));
                        format!("WITH draft AS ({draft}) {insert_event}")
                    });
                    let draft = AuditRow::unsealed(entry);
                    let query = Self::bind_event(sqlx::query_as::<_, (i64,)>(&SQL), event);
                    let (event_id,) = Self::bind_audit_draft(query, &draft).fetch_one(&mut **tx).await?;
                    return Ok(event_id);
                }
                let Some(row) = self.sealed_on_guessed_head(entry) else {
                    let id = Self::append_event(tx, event).await?;
                    self.append_audit_in(tx, entry).await?;
                    return Ok(id);
                };
                static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
                    let insert_event = <$store>::INSERT_EVENT;
                    format!("{insert_event}; {}", shift_placeholders(&APPEND_AUDIT_IF_HEAD, placeholder_count(insert_event)))
                });
                let query = Self::bind_event(sqlx::query_as::<_, (i64,)>(&SQL), event);
                // One row from the event's `RETURNING id`, and a second from the entry's if the guess held.
                let returned: Vec<(i64,)> = Self::bind_audit_row(query, &row).fetch_all(&mut **tx).await?;
                let Some(&(event_id,)) = returned.first() else {
                    return Err(StoreError::Corrupt("the event's insert returned no id".into()));
                };
                if returned.len() == 2 {
                    self.audit_heads.remember(row.workspace_id, row.seq, &row.hash);
                } else {
                    self.append_audit_claiming_head(tx, entry).await?;
                }
                Ok(event_id)
            }

            /// Binds a draft's columns, in the order of [`INSERT_AUDIT_DRAFT`], after what `query` has.
            fn bind_audit_draft<'q, Q: Bind<'q, $db>>(query: Q, row: &'q AuditRow) -> Q {
                Self::bind_audited(query.bind_arg(row.id).bind_arg(row.workspace_id), row)
            }

            /// Binds what an entry records, `actor` to `created_at`, the columns a draft and a sealed entry share.
            fn bind_audited<'q, Q: Bind<'q, $db>>(query: Q, row: &'q AuditRow) -> Q {
                query
                    .bind_arg(&row.actor)
                    .bind_arg(&row.actor_id)
                    .bind_arg(&row.actor_kind)
                    .bind_arg(&row.action)
                    .bind_arg(&row.subject_type)
                    .bind_arg(&row.subject_id)
                    .bind_arg(&row.before)
                    .bind_arg(&row.after)
                    .bind_arg(&row.diff)
                    .bind_arg(row.created_at)
            }

            /// Binds an audit entry's columns, in the order of [`AUDIT_COLUMNS`], after what `query` has.
            fn bind_audit_row<'q, Q: Bind<'q, $db>>(query: Q, row: &'q AuditRow) -> Q {
                let sealed = query
                    .bind_arg(row.id)
                    .bind_arg(row.workspace_id)
                    .bind_arg(row.seq)
                    .bind_arg(&row.prev_hash)
                    .bind_arg(&row.hash);
                Self::bind_audited(sealed, row)
            }

            /// Commits and announces the newest event id to the hub (other instances were told by the append). On
            /// PostgreSQL the ids are drawn by the commit, so the notification the commit sends is the announcement.
            pub(super) async fn commit_events(&self, tx: $tx, last_event: Option<i64>) -> StoreResult<()> {
                tx.commit().await?;
                if let (Some(id), true) = (last_event, Self::EVENT_ID_FINAL_AT_INSERT) {
                    announce(&self.committed, id, None);
                }
                Ok(())
            }

            /// Commits a transaction that appended exactly one event, `event` with id `id`, and hands that event
            /// to the hub, which can pass it on without reading it back (on SQLite; see `commit_events`).
            pub(super) async fn commit_one_event(&self, tx: $tx, id: i64, event: &NewEvent) -> StoreResult<()> {
                tx.commit().await?;
                if !Self::EVENT_ID_FINAL_AT_INSERT {
                    return Ok(());
                }
                announce(&self.committed, id, Some(HubEvent::committed(id, event)));
                Ok(())
            }

            /// The id of what a creation with this key made before; [`StoreError::IdempotencyMismatch`] if the key
            /// came with another request then.
            pub(super) async fn idempotent_resource(&self, key: &IdempotencyKey) -> StoreResult<Option<Uuid>> {
                let found: Option<(Uuid, Vec<u8>)> = sqlx::query_as(
                    "SELECT resource_id, request_hash FROM idempotency_keys \
                     WHERE workspace_id = $1 AND scope = $2 AND key = $3",
                )
                .bind(key.workspace_id)
                .bind(key.scope)
                .bind(&key.key)
                .fetch_optional(&self.$write)
                .await?;
                let Some((resource_id, request_hash)) = found else { return Ok(None) };
                if request_hash != key.request_hash {
                    return Err(StoreError::IdempotencyMismatch);
                }
                Ok(Some(resource_id))
            }

            /// Records the key for `resource_id` inside the creating transaction; a unique violation means a
            /// concurrent request with the same key won the race.
            pub(super) async fn claim_idempotency_key(
                tx: &mut $tx,
                key: &IdempotencyKey,
                resource_id: Uuid,
                at: DateTime<Utc>,
            ) -> Result<(), sqlx::Error> {
                sqlx::query(
                    "INSERT INTO idempotency_keys (workspace_id, scope, key, request_hash, resource_id, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(key.workspace_id)
                .bind(key.scope)
                .bind(&key.key)
                .bind(&key.request_hash)
                .bind(resource_id)
                .bind(at)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn question_by_idempotency_key(&self, key: &IdempotencyKey) -> StoreResult<Option<QuestionRow>> {
                match self.idempotent_resource(key).await? {
                    Some(id) => self.question(key.workspace_id, id).await,
                    None => Ok(None),
                }
            }
        }

        #[async_trait]
        impl Store for $store {
            fn backend(&self) -> Backend {
                Self::BACKEND
            }

            fn committed_events(&self) -> watch::Receiver<Committed> {
                self.committed.subscribe()
            }

            async fn ping(&self) -> StoreResult<()> {
                sqlx::query("SELECT 1").execute(&self.$read).await?;
                Ok(())
            }

            async fn ensure_workspace(&self, name: &str) -> StoreResult<WorkspaceRow> {
                sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
                    .bind(Uuid::now_v7())
                    .bind(name)
                    .bind(crate::store::now())
                    .execute(&self.$write)
                    .await?;
                let row = sqlx::query_as("SELECT id, name, created_at FROM workspaces WHERE name = $1")
                    .bind(name)
                    .fetch_one(&self.$write)
                    .await?;
                Ok(row)
            }

            async fn insert_token(&self, token: &TokenRow, audit: &NewAuditEntry) -> StoreResult<bool> {
                let mut tx = self.begin_write().await?;
                let result = sqlx::query(
                    "INSERT INTO tokens (id, workspace_id, name, role, secret_hash, created_at, created_by) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (secret_hash) DO NOTHING",
                )
                .bind(token.id)
                .bind(token.workspace_id)
                .bind(&token.name)
                .bind(token.role.as_str())
                .bind(&token.secret_hash)
                .bind(token.created_at)
                .bind(&token.created_by)
                .execute(&mut *tx)
                .await?;
                let created = result.rows_affected() == 1;
                if created {
                    self.append_audit_in(&mut tx, audit).await?;
                }
                tx.commit().await?;
                Ok(created)
            }

            async fn principal_by_token_hash(&self, secret_hash: &[u8]) -> StoreResult<Option<Principal>> {
                if let Some(principal) = self.tokens.get(secret_hash) {
                    return Ok(Some(principal));
                }
                let generation = self.tokens.generation();
                let record: Option<PrincipalRecord> =
                    sqlx::query_as(&format!("{TOKEN_PRINCIPAL} WHERE t.secret_hash = $1 AND t.revoked_at IS NULL"))
                        .bind(secret_hash)
                        .fetch_optional(&self.$read)
                        .await?;
                let principal = record.map(PrincipalRecord::into_principal).transpose()?;
                if let Some(principal) = &principal {
                    self.tokens.remember(secret_hash, principal, generation);
                }
                Ok(principal)
            }

            async fn insert_session(&self, session: &SessionRow) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO sessions (id_hash, workspace_id, token_id, user_id, csrf_token, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(&session.id_hash)
                .bind(session.workspace_id)
                .bind((session.principal_kind == PrincipalKind::Token).then_some(session.principal_id))
                .bind((session.principal_kind == PrincipalKind::User).then_some(session.principal_id))
                .bind(&session.csrf_token)
                .bind(session.created_at)
                .bind(session.expires_at)
                .execute(&self.$write)
                .await?;
                Ok(())
            }

            async fn session_by_hash(
                &self,
                id_hash: &[u8],
                now: DateTime<Utc>,
            ) -> StoreResult<Option<(Principal, String)>> {
                #[derive(sqlx::FromRow)]
                struct Found {
                    #[sqlx(flatten)]
                    principal: PrincipalRecord,
                    csrf_token: String,
                }
                // A revoked token, a disabled account or a removed membership ends the session at once: the
                // principal is looked up afresh on every request, never cached in the session.
                let found: Option<Found> = sqlx::query_as(&format!(
                    "SELECT p.*, s.csrf_token FROM sessions s JOIN ({TOKEN_PRINCIPAL} WHERE t.revoked_at IS NULL) p \
                     ON p.id = s.token_id WHERE s.id_hash = $1 AND s.expires_at > $2 \
                     UNION ALL \
                     SELECT p.*, s.csrf_token FROM sessions s JOIN ({} WHERE u.disabled_at IS NULL) p \
                     ON p.id = s.user_id AND p.workspace_id = s.workspace_id WHERE s.id_hash = $1 AND s.expires_at > $2",
                    super::people::USER_PRINCIPAL
                ))
                .bind(id_hash)
                .bind(now)
                .fetch_optional(&self.$read)
                .await?;
                found.map(|f| Ok((f.principal.into_principal()?, f.csrf_token))).transpose()
            }

            async fn delete_session(&self, id_hash: &[u8]) -> StoreResult<()> {
                sqlx::query("DELETE FROM sessions WHERE id_hash = $1").bind(id_hash).execute(&self.$write).await?;
                Ok(())
            }

            async fn create_question(
                &self,
                q: &QuestionRow,
                event: &NewEvent,
                idempotency: Option<&IdempotencyKey>,
            ) -> StoreResult<Created<QuestionRow>> {
                if let Some(writer) = self.writer_elsewhere() {
                    let (store, q, event, key) = (self.clone(), q.clone(), event.clone(), idempotency.cloned());
                    return writer.run(async move { store.create_question(&q, &event, key.as_ref()).await }).await;
                }
                if let Some(key) = idempotency {
                    if let Some(existing) = self.question_by_idempotency_key(key).await? {
                        return Ok(Created { value: existing, created: false });
                    }
                }
                // A question that may supersede its run's blocking one runs more statements after its insert.
                let may_supersede = q.run_id.is_some() && q.kind == QuestionKind::Blocking;
                if idempotency.is_none() && !may_supersede {
                    if let Some(created) = self.insert_question_directly(q, event).await? {
                        return Ok(created);
                    }
                }
                // The key's claim runs before the question's insert: such a write opens its savepoint apart.
                let mut tx =
                    if idempotency.is_some() { self.begin_write().await? } else { self.begin_write_inline().await? };
                if let Some(key) = idempotency {
                    let claimed = Self::claim_idempotency_key(&mut tx, key, q.id, q.created_at).await;
                    if let Err(err) = claimed {
                        // A concurrent request with the same key won the race: answer with its question.
                        if is_unique_violation(&err) {
                            drop(tx);
                            if let Some(existing) = self.question_by_idempotency_key(key).await? {
                                return Ok(Created { value: existing, created: false });
                            }
                        }
                        return Err(err.into());
                    }
                }
                let (open, close) =
                    if may_supersede { (tx.savepoint(), "") } else { tx.savepoint_released_in_one_query() };
                let sql = format!("{open}{}{close}", Self::insert_question_then_event_sql());
                let query = Self::bind_question(sqlx::query_as(&sql), q);
                // Read to the end: the savepoint's release may follow the insert in the same query.
                let returned: Vec<(i64,)> = Self::bind_event(query, event).fetch_all(&mut *tx).await?;
                let Some(&(asked,)) = returned.first() else {
                    return Err(StoreError::Corrupt("the question's event returned no id".into()));
                };
                let mut last = asked;
                if let (Some(run_id), true) = (q.run_id, may_supersede) {
                    // Spec §3: a new blocking question on a run cancels that run's older pending blocking one.
                    let superseded: Vec<QuestionRow> = sqlx::query_as(&format!(
                        "UPDATE questions SET status = 'cancelled', resolution = 'cancelled', response = $1, \
                         resolved_at = $2, updated_at = $2 WHERE run_id = $3 AND workspace_id = $5 \
                         AND kind = 'blocking' AND status = 'pending' AND id <> $4 RETURNING {QUESTION_COLUMNS}"
                    ))
                    .bind(Json(AnswerBody {
                        value: serde_json::Value::Null,
                        comment: Some("superseded by a newer blocking question of the same run".into()),
                        edited_arguments: None,
                    }))
                    .bind(q.created_at)
                    .bind(run_id)
                    .bind(q.id)
                    .bind(q.workspace_id)
                    .fetch_all(&mut *tx)
                    .await?;
                    if !superseded.is_empty() {
                        let workspace = self.workspace_name_in(&mut tx, q.workspace_id).await?;
                        for old in superseded {
                            let cancelled = NewEvent {
                                workspace_id: old.workspace_id,
                                event_type: app::types::EventType::QuestionCancelled,
                                project: old.project.clone(),
                                run_id: old.run_id,
                                question_id: Some(old.id),
                                data: question_event_data(&old.to_question(&workspace)?)?,
                                created_at: q.created_at,
                            };
                            let actor = AuditActor::policy(crate::audit::RUN_LIFECYCLE, Some(run_id.to_string()));
                            let audit_entry = crate::audit::question_resolved(&old, &actor);
                            last = self.append_event_and_audit(&mut tx, &cancelled, &audit_entry).await?;
                        }
                    }
                }
                if last == asked {
                    self.commit_one_event(tx, asked, event).await?;
                } else {
                    self.commit_events(tx, Some(last)).await?;
                }
                Ok(Created { value: q.clone(), created: true })
            }

            async fn question(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>> {
                let row = sqlx::query_as(&format!(
                    "SELECT {QUESTION_COLUMNS} FROM questions WHERE workspace_id = $1 AND id = $2"
                ))
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&self.$read)
                .await?;
                Ok(row)
            }

            async fn list_questions(
                &self,
                workspace_id: Uuid,
                filter: &QuestionFilter,
            ) -> StoreResult<Vec<QuestionRow>> {
                self.list_question_rows(QUESTION_COLUMNS, workspace_id, filter).await
            }

            async fn list_question_summaries(
                &self,
                workspace_id: Uuid,
                filter: &QuestionFilter,
            ) -> StoreResult<Vec<QuestionSummaryRow>> {
                self.list_question_rows(QUESTION_SUMMARY_COLUMNS, workspace_id, filter).await
            }

            async fn count_questions(&self, workspace_id: Uuid, filter: &QuestionFilter) -> StoreResult<u32> {
                // Counting stops at the filter's limit: a badge that says "200+" needs no more, and the index walk
                // stays one page long however many questions the workspace has.
                let mut query =
                    Self::filtered_questions("SELECT COUNT(*) FROM (SELECT 1 FROM questions", workspace_id, filter);
                query.push(" LIMIT ").push_bind(i64::from(filter.limit)).push(") AS capped");
                let (count,): (i64,) = query.build_query_as().fetch_one(&self.$read).await?;
                Ok(u32::try_from(count).unwrap_or(u32::MAX))
            }

            async fn resolve_question(
                &self,
                workspace_id: Uuid,
                id: Uuid,
                change: &QuestionResolution,
            ) -> StoreResult<ResolveOutcome> {
                if let Some(writer) = self.writer_elsewhere() {
                    let (store, change) = (self.clone(), change.clone());
                    return writer.run(async move { store.resolve_question(workspace_id, id, &change).await }).await;
                }
                let mut tx = self.begin_write_inline().await?;
                let (lock_run, run_locked) = Self::RESOLVE_LOCKING_RUN;
                let savepoint = tx.savepoint();
                let updated: Vec<QuestionRow> = sqlx::query_as(&format!(
                    "{savepoint}{lock_run}UPDATE questions SET status = $1, response = $2, answered_by = $3, resolution = $4, \
                     resolved_at = $5, updated_at = $5 \
                     WHERE workspace_id = $6 AND id = $7 AND {STILL_PENDING}{run_locked} RETURNING {QUESTION_COLUMNS}"
                ))
                .bind(change.status.as_str())
                .bind(change.response.as_ref().map(Json))
                .bind(&change.answered_by)
                .bind(change.resolution.map(Resolution::as_str))
                .bind(change.at)
                .bind(workspace_id)
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
                let Some(row) = updated.into_iter().next() else {
                    drop(tx);
                    return Ok(match self.question(workspace_id, id).await? {
                        Some(current) => ResolveOutcome::NotPending(current),
                        None => ResolveOutcome::NotFound,
                    });
                };
                let workspace = self.workspace_name_in(&mut tx, workspace_id).await?;
                let event = change.event(&row, &workspace)?;
                let audit_entry = crate::audit::question_resolved(&row, &change.actor);
                let resolved = self.append_event_and_audit(&mut tx, &event, &audit_entry).await?;
                // In the same transaction: a run whose last holding question this was goes back to the queue, so
                // an answer can never be acknowledged without its run being picked up.
                let requeued = match row.run_id {
                    Some(run_id) => Self::requeue_if_unheld(&mut tx, workspace_id, run_id, change.at).await?,
                    None => None,
                };
                match requeued {
                    Some(last) => self.commit_events(tx, Some(last)).await?,
                    None => self.commit_one_event(tx, resolved, &event).await?,
                }
                Ok(ResolveOutcome::Resolved(row))
            }

            async fn resolve_pending_question(
                &self,
                read: &QuestionRow,
                change: &QuestionResolution,
            ) -> StoreResult<ResolveOutcome> {
                // A question of a run may requeue it, which takes statements of its own.
                if read.run_id.is_none() && read.status == QuestionStatus::Pending {
                    if let Some(workspace) = self.workspace_names.get(read.workspace_id) {
                        if let Some(resolved) = self.resolve_pending_in_one_query(read, change, &workspace).await? {
                            return Ok(ResolveOutcome::Resolved(resolved));
                        }
                    }
                }
                self.resolve_question(read.workspace_id, read.id, change).await
            }

            async fn overdue_questions(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<OverdueQuestion>> {
                let rows = sqlx::query_as(
                    "SELECT id, workspace_id, default_response FROM questions \
                     WHERE status = 'pending' AND timeout_at IS NOT NULL AND timeout_at <= $1 \
                     ORDER BY timeout_at LIMIT $2",
                )
                .bind(now)
                .bind(limit)
                .fetch_all(&self.$read)
                .await?;
                Ok(rows)
            }

            async fn pending_counts(&self) -> StoreResult<Vec<(String, i64)>> {
                let rows = sqlx::query_as("SELECT kind, COUNT(*) FROM questions WHERE status = 'pending' GROUP BY kind")
                    .fetch_all(&self.$read)
                    .await?;
                Ok(rows)
            }

            async fn next_deadline(&self) -> StoreResult<Option<DateTime<Utc>>> {
                let (next,): (Option<DateTime<Utc>>,) = sqlx::query_as(
                    "SELECT MIN(timeout_at) FROM questions WHERE status = 'pending' AND timeout_at IS NOT NULL",
                )
                .fetch_one(&self.$read)
                .await?;
                Ok(next)
            }

            async fn events_after(&self, after: i64, limit: i64) -> StoreResult<Vec<EventRow>> {
                let rows = sqlx::query_as(
                    "SELECT id, workspace_id, event_type, project, run_id, question_id, data, created_at \
                     FROM events WHERE id > $1 ORDER BY id LIMIT $2",
                )
                .bind(after)
                .bind(limit)
                .fetch_all(&self.$read)
                .await?;
                Ok(rows)
            }

            async fn workspace_events_after(
                &self,
                workspace_id: Uuid,
                after: i64,
                limit: i64,
            ) -> StoreResult<Vec<EventRow>> {
                let rows = sqlx::query_as(
                    "SELECT id, workspace_id, event_type, project, run_id, question_id, data, created_at \
                     FROM events WHERE workspace_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                )
                .bind(workspace_id)
                .bind(after)
                .bind(limit)
                .fetch_all(&self.$read)
                .await?;
                Ok(rows)
            }

            async fn last_event_id(&self) -> StoreResult<i64> {
                last_event_id(&self.$read).await
            }

            async fn append_audit(&self, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
                let mut tx = self.begin_write().await?;
                let row = self.append_audit_in(&mut tx, entry).await?;
                tx.commit().await?;
                if !Self::AUDIT_SEALED_AT_COMMIT {
                    return Ok(row);
                }
                let id = row.id;
                sqlx::query_as(&format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id = $1"))
                    .bind(id)
                    .fetch_optional(&self.$write)
                    .await?
                    .ok_or_else(|| StoreError::Corrupt(format!("audit entry {id} is not in the log after its commit")))
            }

            async fn list_audit(&self, workspace_id: Uuid, query: &AuditQuery) -> StoreResult<Vec<AuditRow>> {
                let mut sql = QueryBuilder::<$db>::new(format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE workspace_id = "));
                sql.push_bind(workspace_id);
                let filter = &query.filter;
                if let Some(action) = &filter.action {
                    sql.push(" AND action = ").push_bind(action.clone());
                }
                if let Some(actor) = &filter.actor {
                    sql.push(" AND actor = ").push_bind(actor.clone());
                }
                if let Some(kind) = filter.actor_kind {
                    sql.push(" AND actor_kind = ").push_bind(kind.as_str());
                }
                if let Some(subject_id) = &filter.subject_id {
                    sql.push(" AND subject_id = ").push_bind(subject_id.clone());
                }
                if let Some(since) = filter.since {
                    sql.push(" AND created_at >= ").push_bind(since);
                }
                if let Some(until) = filter.until {
                    sql.push(" AND created_at < ").push_bind(until);
                }
                if let Some(cursor) = query.cursor_seq {
                    sql.push(if query.ascending { " AND seq > " } else { " AND seq < " }).push_bind(cursor);
                }
                sql.push(if query.ascending { " ORDER BY seq LIMIT " } else { " ORDER BY seq DESC LIMIT " });
                sql.push_bind(i64::from(query.limit));
                Ok(sql.build_query_as().fetch_all(&self.$read).await?)
            }

            async fn audit_heads(&self) -> StoreResult<Vec<AuditHead>> {
                // Workspaces with a head or with entries: a chain whose head row was deleted is still walked.
                let rows = sqlx::query_as(
                    "SELECT w.id AS workspace_id, w.name AS workspace, h.seq, h.hash FROM workspaces w \
                     LEFT JOIN audit_heads h ON h.workspace_id = w.id \
                     WHERE h.workspace_id IS NOT NULL OR EXISTS (SELECT 1 FROM audit_log a WHERE a.workspace_id = w.id) \
                     ORDER BY w.name",
                )
                .fetch_all(&self.$read)
                .await?;
                Ok(rows)
            }

            async fn audit_chain(&self, workspace_id: Uuid, after_seq: i64, limit: u32) -> StoreResult<Vec<AuditRow>> {
                let rows = sqlx::query_as(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE workspace_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
                ))
                .bind(workspace_id)
                .bind(after_seq)
                .bind(i64::from(limit))
                .fetch_all(&self.$read)
                .await?;
                Ok(rows)
            }
        }
    };
}

impl SqliteStore {
    pub(super) const BACKEND: Backend = Backend::Sqlite;

    /// Resolves a pending question (of no run) as `read` shows it and appends its event and audit entry, in one
    /// direct write (see `sqlite_direct`): no trip to SQLite's thread, where the general path takes three. A
    /// pending question changes only by leaving `pending`, so the resolved row, its event and its entry can all be
    /// made before the write. The entry is sealed on the guessed chain head; the database refuses it if the guess
    /// is wrong (migration 0009), which fails the write, so it is undone. `None`, with nothing written, when
    /// someone was first, the guess was wrong, or there is none: the general path then runs.
    async fn resolve_pending_in_one_query(
        &self,
        read: &QuestionRow,
        change: &QuestionResolution,
        workspace: &str,
    ) -> StoreResult<Option<QuestionRow>> {
        // Built on the caller's thread: the writer's thread is the one part of every write that runs one at a time,
        // so whatever can be done before the write is done before it.
        let row = read.resolved_with(change);
        let audit_entry = crate::audit::question_resolved(&row, &change.actor);
        let event = change.event(&row, workspace)?;
        if let Some(writer) = self.writer_elsewhere() {
            let store = self.clone();
            return writer
                .run(async move { store.resolve_pending_on_the_writer(row, &audit_entry, event).await })
                .await;
        }
        self.resolve_pending_on_the_writer(row, &audit_entry, event).await
    }

    /// The part of `resolve_pending_in_one_query` that holds the writer.
    async fn resolve_pending_on_the_writer(
        &self,
        row: QuestionRow,
        audit_entry: &NewAuditEntry,
        event: NewEvent,
    ) -> StoreResult<Option<QuestionRow>> {
        let mut tx = self.writer.begin_direct().await?;
        // Guessed while holding the writer: the writes before this one have moved the head as far as it goes.
        let Some(sealed) = self.sealed_on_guessed_head(audit_entry) else { return Ok(None) };
        let arguments = Self::bind_resolved(DirectArguments::default(), &row);
        let arguments = Self::bind_audit_row(Self::bind_event(arguments, &event), &sealed);
        // The rowids of the update (none of its own), the event and the entry, or nothing if the question had left
        // `pending`.
        let inserted = match tx.direct_inserted_rowids(&RESOLVE_PENDING_WITH_EVENT_AND_AUDIT, &arguments) {
            Ok(inserted) => inserted,
            // Dropping the write undoes it.
            Err(sqlx::Error::Database(err)) if err.message().contains(AUDIT_ENTRY_OFF_ITS_HEAD) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        match inserted[..] {
            [] => Ok(None),
            [_, event_id, _] => {
                self.audit_heads.remember(sealed.workspace_id, sealed.seq, &sealed.hash);
                self.commit_one_event(tx, event_id, &event).await?;
                Ok(Some(row))
            }
            _ => Err(StoreError::Corrupt("resolving a question appended its event without its audit entry".into())),
        }
    }
}

impl SqliteStore {
    /// Asks a question (of no run, without an idempotency key) on the writer's direct connection: the question
    /// and its `question_asked` event, one query run on this thread (see `GroupCommit::begin_direct`).
    async fn insert_question_directly(
        &self,
        q: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<Option<Created<QuestionRow>>> {
        let mut tx = self.writer.begin_direct().await?;
        let arguments = Self::bind_event(Self::bind_question(DirectArguments::default(), q), event);
        let inserted = tx.direct_inserted_rowids(&INSERT_QUESTION_THEN_EVENT_DIRECTLY, &arguments)?;
        let [_, asked] = inserted[..] else {
            return Err(StoreError::Corrupt("asking a question stored it without its event".into()));
        };
        self.commit_one_event(tx, asked, event).await?;
        Ok(Some(Created { value: q.clone(), created: true }))
    }
}

/// What migration 0009's trigger says when an audit entry does not follow its chain's stored head.
const AUDIT_ENTRY_OFF_ITS_HEAD: &str = "the audit entry does not follow its chain's head";

/// `SqliteStore::INSERT_EVENT` for the direct connection, which reads the event's id from `last_insert_rowid`
/// (see `DirectConnection::inserted_rowids` for why not `RETURNING`).
const INSERT_EVENT_DIRECTLY: &str = "INSERT INTO events (workspace_id, event_type, project, run_id, question_id, data, \
     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// SQLite's asking write on the direct connection (see `SqliteStore::insert_question_directly`): the question
/// (`$1`..`$27`) and its event (`$28`.., as `INSERT_EVENT` binds them).
static INSERT_QUESTION_THEN_EVENT_DIRECTLY: std::sync::LazyLock<Statements> =
    std::sync::LazyLock::new(|| Statements::new(&insert_question_then_event("", "; ", INSERT_EVENT_DIRECTLY)));

/// SQLite's resolving write (see `SqliteStore::resolve_pending_in_one_query`): the update (`$1`..`$7`), the event
/// (`$8`..`$14`, as `INSERT_EVENT` binds them) and the audit entry (`$15`..`$29`, as `APPEND_AUDIT` binds them).
/// The direct connection runs each statement only if the one before it changed a row, so a question no longer
/// pending writes nothing.
static RESOLVE_PENDING_WITH_EVENT_AND_AUDIT: std::sync::LazyLock<Statements> = std::sync::LazyLock::new(|| {
    Statements::new(&format!(
        "UPDATE questions SET status = $1, response = $2, answered_by = $3, resolution = $4, resolved_at = $5, \
         updated_at = $5 WHERE workspace_id = $6 AND id = $7 AND status = 'pending'; \
         {}; \
         INSERT INTO audit_log ({AUDIT_COLUMNS}) VALUES ($15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, \
         $27, $28, $29)",
        shift_placeholders(INSERT_EVENT_DIRECTLY, 7)
    ))
});

impl PostgresStore {
    pub(super) const BACKEND: Backend = Backend::Postgres;

    /// Asks a question (of no run, without an idempotency key): the question and its `question_asked` event, one
    /// statement, committed in a batch with the other hot writes queued with it (see `pg_write_batch`).
    async fn insert_question_directly(
        &self,
        q: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<Option<Created<QuestionRow>>> {
        self.batches.run(AskWrite { question: q.clone(), event: event.clone() }).await?;
        Ok(Some(Created { value: q.clone(), created: true }))
    }

    /// Resolves a pending question (of no run) with one statement (`RESOLVE_AS_EXPRESSIONS`), committed in a
    /// batch (see `pg_write_batch`). `None`, with nothing written, when someone was first: the general path then
    /// reads the question.
    async fn resolve_pending_in_one_query(
        &self,
        read: &QuestionRow,
        change: &QuestionResolution,
        workspace: &str,
    ) -> StoreResult<Option<QuestionRow>> {
        let row = read.resolved_with(change);
        let event = change.event(&row, workspace)?;
        let draft = AuditRow::unsealed(&crate::audit::question_resolved(&row, &change.actor));
        let written = self.batches.run(ResolveWrite { row: row.clone(), event, draft }).await?;
        Ok(written.first().map(|_| row))
    }
}

/// How many values a question binds (`QUESTION_COLUMNS`).
const QUESTION_ARGUMENTS: usize = 27;
/// How many values an event binds (`INSERT_EVENT`).
const EVENT_ARGUMENTS: usize = 7;
/// How many values an answer's hot write binds (`RESOLVE_AS_EXPRESSIONS`).
const RESOLVE_ARGUMENTS: usize = 26;

/// PostgreSQL's hot write of a question: the question and its `question_asked` event, as `pg_write_batch` runs it.
struct AskWrite {
    question: QuestionRow,
    event: NewEvent,
}

impl BatchableWrite for AskWrite {
    fn as_expressions(&self, name: &str, offset: usize) -> String {
        let placeholders = (1..=QUESTION_ARGUMENTS).map(|n| format!("${}", n + offset)).collect::<Vec<_>>().join(", ");
        let event = shift_placeholders(PostgresStore::INSERT_EVENT, offset + QUESTION_ARGUMENTS);
        format!(
            "{name}_question AS (INSERT INTO questions ({QUESTION_COLUMNS}) VALUES ({placeholders})), {name} AS ({event})"
        )
    }

    fn arguments(&self) -> usize {
        QUESTION_ARGUMENTS + EVENT_ARGUMENTS
    }

    fn bind<'q>(&'q self, query: BatchQuery<'q>) -> BatchQuery<'q> {
        PostgresStore::bind_event(PostgresStore::bind_question(query, &self.question), &self.event)
    }

    fn kind(&self) -> u8 {
        0
    }
}

/// PostgreSQL's hot write of an answer (`RESOLVE_AS_EXPRESSIONS`), as `pg_write_batch` runs it.
struct ResolveWrite {
    row: QuestionRow,
    event: NewEvent,
    draft: AuditRow,
}

impl BatchableWrite for ResolveWrite {
    fn as_expressions(&self, name: &str, offset: usize) -> String {
        shift_placeholders(&PostgresStore::RESOLVE_AS_EXPRESSIONS.replace("NAME", name), offset)
    }

    fn arguments(&self) -> usize {
        RESOLVE_ARGUMENTS
    }

    fn bind<'q>(&'q self, query: BatchQuery<'q>) -> BatchQuery<'q> {
        let query = PostgresStore::bind_event(PostgresStore::bind_resolved(query, &self.row), &self.event);
        PostgresStore::bind_audit_draft(query, &self.draft)
    }

    fn kind(&self) -> u8 {
        1
    }
}

sql_store!(SqliteStore, Sqlite, read = read, write = write, tx = BatchedWrite);
sql_store!(PostgresStore, Postgres, read = pool, write = pool, tx = sqlx::Transaction<'static, Postgres>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_postgres::PostgresSchema;

    /// A SQLite database file of one test's own, removed with its WAL when the test ends.
    struct TestDatabase(std::path::PathBuf);

    impl TestDatabase {
        fn new(name: &str) -> Self {
            Self(std::env::temp_dir().join(format!("holdpoint-{name}-{}.db", Uuid::now_v7())))
        }

        fn url(&self) -> String {
            format!("sqlite://{}", self.0.display())
        }
    }

    impl Drop for TestDatabase {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
            }
        }
    }

    /// The ops of SQLite's plan for each statement of `sql`, on the store's schema.
    async fn sqlite_plans(database: &TestDatabase, sql: &Statements) -> Vec<Vec<String>> {
        super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
        let connection = rusqlite::Connection::open(&database.0).unwrap();
        sql.iter()
            .map(|statement| {
                let mut plan = connection.prepare(&format!("EXPLAIN {statement}")).unwrap();
                plan.raw_query().mapped(|op| op.get::<_, String>(1)).map(Result::unwrap).collect()
            })
            .collect()
    }

    /// SQLite builds a temporary b-tree for every run of a statement that returns rows (`RETURNING`) or checks a
    /// `CHECK (x IN (3 or more values))`; the hot writes ran seven of them per HITL cycle (migration 0010).
    #[tokio::test]
    async fn sqlite_asks_and_answers_without_building_temporary_tables() {
        let database = TestDatabase::new("no-temporary-tables");
        for sql in [&*INSERT_QUESTION_THEN_EVENT_DIRECTLY, &*RESOLVE_PENDING_WITH_EVENT_AND_AUDIT] {
            for (plan, statement) in sqlite_plans(&database, sql).await.iter().zip(sql.iter()) {
                assert!(!plan.iter().any(|op| op == "OpenEphemeral"), "{statement}: {plan:?}");
            }
        }
    }

    /// Migration 0010's comparisons refuse what the IN lists refused, let a NULL through as they did, and leave no
    /// IN list of three or more values in any table's CHECK.
    #[tokio::test]
    async fn sqlite_checks_refuse_the_values_they_refused_before_migration_0010() {
        let database = TestDatabase::new("checks");
        let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
        let workspace = store.ensure_workspace("checks").await.unwrap();
        let (row, asked) =
            question_and_event(workspace.id, serde_json::json!({ "title": "checked", "response_type": "boolean" }));
        store.create_question(&row, &asked, None).await.unwrap();
        let connection = rusqlite::Connection::open(&database.0).unwrap();
        for change in [
            "UPDATE questions SET status = 'answred'",
            "UPDATE questions SET kind = 'Blocking'",
            "UPDATE questions SET urgency = ''",
            "UPDATE questions SET resolution = 'person'",
        ] {
            let err = connection.execute(change, []).unwrap_err();
            assert!(err.to_string().contains("CHECK constraint failed"), "{change}: {err}");
        }
        assert_eq!(connection.execute("UPDATE questions SET resolution = NULL, status = 'expired'", []).unwrap(), 1);
        let tables: Vec<String> = connection
            .prepare("SELECT sql FROM sqlite_schema WHERE type = 'table'")
            .unwrap()
            .query_map([], |table| table.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(
            tables.iter().any(|sql| sql.contains("CHECK (kind = 'blocking' OR kind = 'non_blocking'")),
            "{tables:?}"
        );
        for sql in &tables {
            for (at, _) in sql.match_indices(" IN (") {
                let list = &sql[at + 5..at + 5 + sql[at + 5..].find(')').unwrap()];
                assert!(list.matches(',').count() < 2, "an IN list of three or more values is left: {sql}");
            }
        }
        assert_eq!(connection.query_row("PRAGMA integrity_check", [], |ok| ok.get::<_, String>(0)).unwrap(), "ok");
    }

    /// A person's answer `value`, as `resolve_question` takes it.
    fn answered_with(value: serde_json::Value) -> QuestionResolution {
        QuestionResolution {
            status: app::types::QuestionStatus::Answered,
            response: Some(AnswerBody { value, comment: None, edited_arguments: None }),
            answered_by: Some("tester".into()),
            resolution: Some(Resolution::Human),
            at: crate::store::now(),
            actor: AuditActor::policy("test", None),
        }
    }

    #[test]
    fn a_postgres_revocation_notifies_on_the_channel_the_instances_listen_to() {
        let notify = PostgresStore::TELL_OTHERS_OF_A_REVOCATION.unwrap();
        assert_eq!(notify, format!("SELECT pg_notify('{CREDENTIALS_CHANNEL}', '')"));
        assert_eq!(SqliteStore::TELL_OTHERS_OF_A_REVOCATION, None);
    }

    /// A notification that comes before any event hub follows the store (at start, while the hub's task has not
    /// run yet) must not stop the listener: stopped, it would leave the token cache serving without hearing the
    /// other instances' revocations, and their events reaching this one only by the hub's poll.
    #[tokio::test]
    async fn the_listener_keeps_listening_through_a_notification_that_comes_before_the_hub() {
        let url = std::env::var("HOLDPOINT_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let pool = match PgPool::connect(&url).await {
            Ok(pool) => pool,
            Err(err) if std::env::var("CI").as_deref() == Ok("true") => panic!("PostgreSQL is required in CI: {err}"),
            Err(err) => return eprintln!("SKIPPED: PostgreSQL at {url} is unreachable ({err})"),
        };
        let committed = watch::channel(Committed::default()).0;
        let tokens = Arc::new(TokenCache::new(false, std::time::Duration::from_secs(600)));
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(listen_to_other_instances(pool.clone(), committed.clone(), Arc::clone(&tokens), stop.clone()));
        let _stop_when_done = stop.drop_guard();
        let principal = Principal {
            id: Uuid::now_v7(),
            kind: PrincipalKind::Token,
            workspace_id: Uuid::now_v7(),
            workspace: "default".into(),
            name: "agent".into(),
            role: app::types::Role::Agent,
        };
        let remembered = || {
            tokens.remember(b"secret", &principal, tokens.generation());
            tokens.get(b"secret").is_some()
        };
        eventually(remembered, "the cache serves once the listener listens").await;
        let notify = |channel: &'static str| {
            let pool = pool.clone();
            async move { sqlx::query("SELECT pg_notify($1, '0')").bind(channel).execute(&pool).await.unwrap() }
        };
        // Nobody follows the events yet: no hub has subscribed to the store's commits.
        notify(EVENTS_CHANNEL).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        notify(CREDENTIALS_CHANNEL).await;
        eventually(|| tokens.get(b"secret").is_none(), "the revocation is heard").await;
    }

    async fn eventually(condition: impl Fn() -> bool, what: &str) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while !condition() {
            assert!(tokio::time::Instant::now() < deadline, "not within 10 s: {what}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    fn entry(workspace_id: Uuid, n: usize) -> NewAuditEntry {
        NewAuditEntry {
            workspace_id,
            actor: AuditActor::policy("test", None),
            action: "test.appended".into(),
            subject_type: "test".into(),
            subject_id: Some(n.to_string()),
            before: None,
            after: Some(serde_json::json!({ "n": n })),
            diff: None,
            created_at: crate::store::now(),
        }
    }

    /// A question built from `input` as the API builds it, with its `question_asked` event.
    fn question_and_event(workspace_id: Uuid, input: serde_json::Value) -> (QuestionRow, NewEvent) {
        let bounds = crate::questions::TimeoutBounds { min_seconds: 1, max_seconds: 86_400 };
        let input = serde_json::from_value(input).unwrap();
        let row = crate::questions::build_question(input, workspace_id, None, bounds, crate::store::now()).unwrap();
        let asked = NewEvent {
            workspace_id,
            event_type: app::types::EventType::QuestionAsked,
            project: None,
            run_id: None,
            question_id: Some(row.id),
            data: event_data(&serde_json::json!({})).unwrap(),
            created_at: row.created_at,
        };
        (row, asked)
    }

    /// What a store remembers is its own: two stores in one process (two servers in one test process) share no
    /// workspace names and no audit chain heads.
    #[tokio::test]
    async fn two_stores_in_one_process_share_no_workspace_names_and_no_audit_heads() {
        let (first, second) = (TestDatabase::new("own-caches-a"), TestDatabase::new("own-caches-b"));
        let first = super::super::connect_sqlite(&first.url(), StoreSettings::defaults()).await.unwrap();
        let second_store = super::super::connect_sqlite(&second.url(), StoreSettings::defaults()).await.unwrap();
        let workspace = first.ensure_workspace("mine").await.unwrap();
        first.append_audit(&entry(workspace.id, 1)).await.unwrap();
        assert_eq!(first.workspace_name(workspace.id).await.unwrap(), "mine");
        assert_eq!(first.workspace_names.get(workspace.id).as_deref(), Some("mine"));
        assert!(first.audit_heads.guess(workspace.id).is_some(), "the first store guesses its chain's head");
        assert_eq!(second_store.workspace_names.get(workspace.id), None);
        assert_eq!(second_store.audit_heads.guess(workspace.id), None);
    }

    /// An answer's event and audit entry go in with one query while SQLite's guess of the chain's head holds; when
    /// it does not (ahead of the head, as after a rolled-back append, or behind it, as after another process's), the
    /// event still goes in and the entry follows the stored head.
    #[tokio::test]
    async fn an_answer_stores_its_event_and_its_audit_entry_whatever_the_guess_of_the_head() {
        let database = TestDatabase::new("answer-guess");
        let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
        let workspace = store.ensure_workspace("answers").await.unwrap();
        for n in 0..4 {
            let (row, asked) = question_and_event(
                workspace.id,
                serde_json::json!({ "title": format!("q{n}"), "response_type": "boolean" }),
            );
            store.create_question(&row, &asked, None).await.unwrap();
            // The first answer finds no guess, the second one ahead, the third one behind, the fourth the right one.
            match n {
                1 => store.audit_heads.remember(workspace.id, 50, "not-the-head"),
                2 => store.audit_heads.remember(workspace.id, 0, "not-the-head"),
                _ => {}
            }
            let change = answered_with(serde_json::json!(true));
            let outcome = store.resolve_question(workspace.id, row.id, &change).await.unwrap();
            assert!(matches!(outcome, ResolveOutcome::Resolved(_)), "answer {n}");
        }
        let events = store.events_after(0, 100).await.unwrap();
        assert_eq!(events.iter().filter(|event| event.event_type == "question_answered").count(), 4);
        let verified = crate::audit::verify(&store).await.unwrap().expect("an unbroken chain");
        assert_eq!(verified.entries, 4, "one entry per answer");
    }

    /// SQLite resolves a pending question in one query only on a right guess of the audit chain's head: with none,
    /// or one ahead of the head (as after a rolled-back append) or behind it (as after another process's append),
    /// the database refuses the entry, the query stops before it releases its savepoint, and nothing of it is
    /// stored. The general path then answers with the entry on the stored head; a question no longer pending
    /// writes nothing either way.
    #[tokio::test]
    async fn on_sqlite_the_one_query_answer_stores_nothing_unless_its_guess_of_the_head_holds() {
        let database = TestDatabase::new("one-query-answer");
        let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
        let workspace = store.ensure_workspace("one-query").await.unwrap();
        let answer = |value: bool| answered_with(serde_json::json!(value));
        let stored = |id: Uuid| {
            let store = store.clone();
            async move {
                let question = store.question(workspace.id, id).await.unwrap().unwrap();
                let events = store.events_after(0, 100).await.unwrap();
                let answered = events.iter().filter(|e| e.event_type == "question_answered").count();
                let entries = crate::audit::verify(&store).await.unwrap().expect("an unbroken chain").entries;
                let entries = usize::try_from(entries).unwrap();
                (question.status.as_str().to_owned(), answered, entries)
            }
        };
        let ask = |n: usize| {
            let store = store.clone();
            async move {
                let input = serde_json::json!({ "title": format!("q{n}"), "response_type": "boolean" });
                let (row, asked) = question_and_event(workspace.id, input);
                store.create_question(&row, &asked, None).await.unwrap();
                row
            }
        };

        let first = ask(0).await;
        assert!(
            store.resolve_pending_in_one_query(&first, &answer(true), "one-query").await.unwrap().is_none(),
            "no guess"
        );
        assert_eq!(stored(first.id).await, ("pending".to_owned(), 0, 0), "nothing stored without a guess");
        let ResolveOutcome::Resolved(_) = store.resolve_pending_question(&first, &answer(true)).await.unwrap() else {
            panic!("the general path answers");
        };
        assert_eq!(stored(first.id).await, ("answered".to_owned(), 1, 1));

        for (n, (seq, hash)) in [(50, "ahead"), (0, "behind")].into_iter().enumerate() {
            let question = ask(n + 1).await;
            store.audit_heads.remember(workspace.id, seq, hash);
            let refused = store.resolve_pending_in_one_query(&question, &answer(false), "one-query").await.unwrap();
            assert!(refused.is_none(), "a guess {hash} of the head");
            assert_eq!(stored(question.id).await, ("pending".to_owned(), n + 1, n + 1), "nothing stored, {hash}");
            let ResolveOutcome::Resolved(_) = store.resolve_pending_question(&question, &answer(false)).await.unwrap()
            else {
                panic!("the general path answers after a guess {hash} of the head");
            };
            assert_eq!(stored(question.id).await, ("answered".to_owned(), n + 2, n + 2));
        }

        // The general path left the right guess: the one query stores the answer, its event and its entry.
        let question = ask(3).await;
        let resolved = store.resolve_pending_in_one_query(&question, &answer(true), "one-query").await.unwrap();
        let resolved = resolved.expect("a right guess resolves in one query");
        let read_back = store.question(workspace.id, question.id).await.unwrap().unwrap();
        assert_eq!(read_back.to_question("one-query").unwrap(), resolved.to_question("one-query").unwrap());
        assert_eq!(stored(question.id).await, ("answered".to_owned(), 4, 4));
        // Once answered, the same read resolves nothing more.
        assert!(store.resolve_pending_in_one_query(&question, &answer(false), "one-query").await.unwrap().is_none());
        let ResolveOutcome::NotPending(current) =
            store.resolve_pending_question(&question, &answer(false)).await.unwrap()
        else {
            panic!("a second answer finds the question answered");
        };
        assert_eq!(current.to_question("one-query").unwrap(), resolved.to_question("one-query").unwrap());
        assert_eq!(stored(question.id).await, ("answered".to_owned(), 4, 4));
    }

    /// The trigger that refuses an audit entry off its chain's head (migration 0009) says what
    /// `AUDIT_ENTRY_OFF_ITS_HEAD` looks for.
    #[tokio::test]
    async fn on_sqlite_an_audit_entry_off_its_head_is_refused_with_the_message_the_store_looks_for() {
        let database = TestDatabase::new("off-head");
        let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
        let workspace = store.ensure_workspace("off-head").await.unwrap();
        let first = store.append_audit(&entry(workspace.id, 1)).await.unwrap();
        for (seq, prev_hash) in [(first.seq + 2, first.hash.clone()), (first.seq + 1, "0".repeat(64))] {
            let row = AuditRow::seal(&entry(workspace.id, 2), seq, prev_hash);
            let err = SqliteStore::bind_audit_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT), &row)
                .fetch_one(&store.write)
                .await
                .expect_err("an entry off its head");
            let sqlx::Error::Database(err) = err else { panic!("not the database's refusal: {err}") };
            assert!(err.message().contains(AUDIT_ENTRY_OFF_ITS_HEAD), "{}", err.message());
        }
        let row = AuditRow::seal(&entry(workspace.id, 2), first.seq + 1, first.hash.clone());
        SqliteStore::bind_audit_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT), &row)
            .fetch_one(&store.write)
            .await
            .unwrap();
    }

    /// On SQLite, asking runs on the writer's own thread: a caller that goes away once the write was handed over
    /// (a client that disconnected) does not cut it short, and the question is stored whole, with its event.
    #[tokio::test]
    async fn on_sqlite_a_question_whose_caller_goes_away_is_still_stored_whole() {
        let database = TestDatabase::new("writer-thread");
        let store = connect(&database.url()).await.unwrap();
        let workspace = store.ensure_workspace("abandoned").await.unwrap();
        let (row, asked) = question_and_event(workspace.id, serde_json::json!({ "title": "Still there?" }));
        // Polled once (which hands the write over), then dropped: a write takes trips to SQLite's thread, so it
        // cannot have ended within that one poll.
        let abandoned = futures::FutureExt::now_or_never(store.create_question(&row, &asked, None));
        assert!(abandoned.is_none(), "the caller gave up before the write ended");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while store.question(workspace.id, row.id).await.unwrap().is_none() {
            assert!(tokio::time::Instant::now() < deadline, "the question was not stored within 10 s");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let events = store.events_after(0, 100).await.unwrap();
        assert!(events.iter().any(|event| event.question_id == Some(row.id) && event.event_type == "question_asked"));
    }

    #[test]
    fn the_batched_writes_bind_as_many_values_as_their_statements_name() {
        assert_eq!(QUESTION_ARGUMENTS, QUESTION_COLUMNS.split(',').count());
        assert_eq!(EVENT_ARGUMENTS, placeholder_count(PostgresStore::INSERT_EVENT));
        assert_eq!(RESOLVE_ARGUMENTS, placeholder_count(PostgresStore::RESOLVE_AS_EXPRESSIONS));
    }

    #[test]
    fn placeholder_count_is_the_highest_placeholder() {
        assert_eq!(placeholder_count(SqliteStore::INSERT_EVENT), 7);
        assert_eq!(placeholder_count(&APPEND_AUDIT_IF_HEAD), 15);
        assert_eq!(placeholder_count("SELECT 1"), 0);
    }

    /// The SQLite store appends on its guess of the chain's head; a wrong guess (another process appended, or an
    /// append was rolled back after the guess moved) must fall back to the stored head, never fork the chain.
    #[tokio::test]
    async fn a_wrong_guess_of_the_audit_head_still_links_each_entry_to_the_stored_head() {
        let database = TestDatabase::new("audit-guess");
        let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
        let workspace = store.ensure_workspace("guess").await.unwrap();
        for n in 1..=3 {
            assert_eq!(store.append_audit(&entry(workspace.id, n)).await.unwrap().seq, n as i64);
        }
        // Ahead of the stored head, as after a rolled-back append; then behind it, as after another process's.
        store.audit_heads.remember(workspace.id, 7, "not-the-head");
        assert_eq!(store.append_audit(&entry(workspace.id, 4)).await.unwrap().seq, 4);
        store.audit_heads.remember(workspace.id, 2, "not-the-head");
        let fifth = store.append_audit(&entry(workspace.id, 5)).await.unwrap();
        assert_eq!(fifth.seq, 5);
        assert_eq!(store.append_audit(&entry(workspace.id, 6)).await.unwrap().prev_hash, fifth.hash);
        let verified = crate::audit::verify(&store).await.unwrap().expect("an unbroken chain");
        assert_eq!(verified.entries, 6);
    }

    #[test]
    fn placeholders_shift_past_the_question_arguments_and_nothing_else_changes() {
        assert_eq!(shift_placeholders("VALUES ($1, $2, $10) RETURNING id", 27), "VALUES ($28, $29, $37) RETURNING id");
        assert_eq!(shift_placeholders("a '$' b $x", 5), "a '$' b $x");
        let sql = insert_question_then_event(
            "WITH asked AS (",
            ") ",
            "INSERT INTO events (a, b) VALUES ($1, $2) RETURNING id",
        );
        assert!(sql.starts_with("WITH asked AS (INSERT INTO questions (id, "), "{sql}");
        assert!(sql.ends_with("$26, $27)) INSERT INTO events (a, b) VALUES ($28, $29) RETURNING id"), "{sql}");
    }

    /// How PostgreSQL's generic plan for `sql` (of `arguments` placeholders) reads `questions`: each scan's index.
    async fn question_indexes_planned(connection: &mut sqlx::PgConnection, sql: &str, arguments: usize) -> Vec<String> {
        sqlx::query(&format!("PREPARE planned AS {sql}")).execute(&mut *connection).await.unwrap();
        sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *connection).await.unwrap();
        let nulls = vec!["NULL"; arguments].join(", ");
        let (plan,): (serde_json::Value,) = sqlx::query_as(&format!("EXPLAIN (FORMAT JSON) EXECUTE planned({nulls})"))
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        sqlx::query("DEALLOCATE planned").execute(&mut *connection).await.unwrap();
        fn walk(node: &serde_json::Value, found: &mut Vec<String>) {
            let scan = node["Node Type"].as_str().is_some_and(|kind| kind.ends_with("Scan"));
            if scan && node["Relation Name"] == "questions" {
                found.push(node["Index Name"].as_str().unwrap_or("(a sequential scan)").to_owned());
            }
            for child in node["Plans"].as_array().into_iter().flatten() {
                walk(child, found);
            }
        }
        let mut found = Vec::new();
        walk(&plan[0]["Plan"], &mut found);
        found
    }

    /// Before autovacuum had analyzed `questions` (a new database, as in the HITL benchmark), PostgreSQL planned the
    /// resolving statement through `questions_status_deadline` and walked every pending entry, dead ones included,
    /// to find the question (see `STILL_PENDING`); it must find it by its id.
    #[tokio::test]
    async fn postgres_resolves_a_question_found_by_its_id() {
        let Some(schema) = PostgresSchema::new().await else { return };
        let url = schema.url.clone();
        let store = connect(&url).await.unwrap();
        let workspace = store.ensure_workspace("busy").await.unwrap();
        let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO questions (id, workspace_id, kind, response_type, title, urgency, status, created_at, \
             updated_at) SELECT gen_random_uuid(), $1, 'blocking', 'text', 'q', 'normal', \
             CASE WHEN n % 500 = 0 THEN 'pending' ELSE 'answered' END, now(), now() \
             FROM generate_series(1, 3000) AS n",
        )
        .bind(workspace.id)
        .execute(&mut connection)
        .await
        .unwrap();

        // The statement of a batch that holds one resolve (`pg_write_batch`).
        let resolve_alone =
            format!("WITH {} SELECT 0, id FROM w0", PostgresStore::RESOLVE_AS_EXPRESSIONS.replace("NAME", "w0"));
        let resolving = question_indexes_planned(&mut connection, &resolve_alone, RESOLVE_ARGUMENTS).await;
        let by_id = ["questions_pkey", "questions_workspace_created"];
        assert!(resolving.iter().all(|index| by_id.contains(&index.as_str())), "{resolving:?}");
        assert_eq!(resolving.len(), 1, "{resolving:?}");
    }

    /// Asks and answers that reach PostgreSQL together go in as one statement (`pg_write_batch`), each stored once
    /// with its event and, for an answer, its audit entry. Of two answers to one question in one batch, one
    /// resolves it and the other finds it resolved.
    #[tokio::test]
    async fn on_postgres_asks_and_answers_queued_together_are_each_stored_once() {
        let Some(schema) = PostgresSchema::new().await else { return };
        let store = super::super::connect_postgres(&schema.url, StoreSettings::defaults()).await.unwrap();
        let workspace = store.ensure_workspace("batched").await.unwrap();
        store.workspace_names.remember(workspace.id, "batched");
        let question = |n: usize| {
            question_and_event(
                workspace.id,
                serde_json::json!({ "title": format!("q{n}"), "response_type": "boolean" }),
            )
        };
        let transactions = |ids: Vec<Uuid>| {
            let url = schema.url.clone();
            async move {
                let pool = PgPool::connect(&url).await.unwrap();
                let (count,): (i64,) =
                    sqlx::query_as("SELECT count(DISTINCT xmin::text) FROM questions WHERE id = ANY($1)")
                        .bind(ids)
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                count
            }
        };
        // The test's runtime has one thread: every write below is queued before the batch's worker runs.
        let first: Vec<(QuestionRow, NewEvent)> = (0..5).map(question).collect();
        let created =
            futures::future::join_all(first.iter().map(|(row, event)| store.create_question(row, event, None)));
        assert!(created.await.iter().all(Result::is_ok));
        assert_eq!(transactions(first.iter().map(|(row, _)| row.id).collect()).await, 1, "one statement");

        let second: Vec<(QuestionRow, NewEvent)> = (5..7).map(question).collect();
        let asks = futures::future::join_all(second.iter().map(|(row, event)| store.create_question(row, event, None)));
        let answer = answered_with(serde_json::json!(true));
        let answered = [0, 1, 2, 0].map(|n| &first[n].0);
        let answers =
            futures::future::join_all(answered.iter().map(|row| store.resolve_pending_question(row, &answer)));
        let (asks, answers) = tokio::join!(asks, answers);
        assert!(asks.iter().all(Result::is_ok));
        let outcomes: Vec<&str> = answers
            .iter()
            .map(|outcome| match outcome.as_ref().unwrap() {
                ResolveOutcome::Resolved(_) => "resolved",
                ResolveOutcome::NotPending(_) => "not pending",
                ResolveOutcome::NotFound => "not found",
            })
            .collect();
        assert_eq!(outcomes.iter().filter(|o| **o == "resolved").count(), 3, "{outcomes:?}");
        assert_eq!(outcomes.iter().filter(|o| **o == "not pending").count(), 1, "{outcomes:?}");
        let together = [&second[0].0, &second[1].0, &first[1].0, &first[2].0].map(|row| row.id);
        assert_eq!(transactions(together.to_vec()).await, 1, "the second batch is one statement too");

        let events = store.events_after(0, 100).await.unwrap();
        assert!(events.windows(2).all(|pair| pair[0].id < pair[1].id));
        let count = |kind: &str| events.iter().filter(|event| event.event_type == kind).count();
        assert_eq!((count("question_asked"), count("question_answered")), (7, 3));
        let verified = crate::audit::verify(&store).await.unwrap().expect("an unbroken chain");
        assert_eq!(verified.entries, 3, "one entry per answer");
        for (n, (row, _)) in first.iter().chain(&second).enumerate() {
            let status = store.question(workspace.id, row.id).await.unwrap().unwrap().status;
            assert_eq!(status.as_str(), if n < 3 { "answered" } else { "pending" }, "q{n}");
        }
    }
}
