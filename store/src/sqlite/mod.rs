//! The SQLite store: one writer connection whose write transactions commit in batches (`group_commit`), a
//! direct connection for the two hot writes of a HITL cycle (`direct`), and a pool of read-only connections.

mod backend;
mod connections;
mod direct;
mod events;
mod group_commit;

use std::sync::Arc;

use tokio::sync::watch;

pub(crate) use connections::SqliteConnections;
pub(crate) use direct::Statements;
pub(crate) use direct::{DirectArguments, DirectConnection};
use group_commit::{BatchedWrite, GroupCommit};

use super::sql::*;
use super::token_cache::TokenCache;
use super::*;

/// The SQLite store: one writer connection, whose write transactions commit in batches, and a pool of read-only
/// ones.
#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) read: SqliteConnections,
    pub(crate) write: SqliteConnections,
    writer: GroupCommit,
    committed: watch::Sender<Committed>,
    pub(crate) tokens: Arc<TokenCache>,
    writer_thread: WriterThread,
    /// What this store keeps in memory of each workspace.
    pub(crate) caches: Arc<super::Caches>,
    /// Where this store last saw each workspace's audit chain end.
    pub(crate) audit_heads: Arc<super::AuditHeads>,
}

/// A runtime of its own, on a thread of its own, for the two writes of a HITL cycle (asking and resolving a
/// question). A write holds the one writer from its first statement to its last; on the server's runtime each of
/// its awaits (its turn at the writer, each statement's reply from SQLite's thread) waited for a worker busy with
/// other requests, and the writer sat idle meanwhile. Here nothing else runs. A write sent here runs to its end
/// even if its caller goes away (a client that disconnects), as one that committed just before would have. The
/// thread stops once the last clone of its store is dropped.
#[derive(Clone)]
pub(crate) struct WriterThread {
    handle: tokio::runtime::Handle,
    _stop: Arc<tokio::sync::oneshot::Sender<()>>,
}

impl WriterThread {
    pub(crate) fn start() -> StoreResult<Self> {
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
    pub(crate) fn elsewhere(&self) -> Option<&Self> {
        let here = tokio::runtime::Handle::try_current().is_ok_and(|current| current.id() == self.handle.id());
        (!here).then_some(self)
    }

    pub(crate) async fn run<T: Send + 'static>(
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
    pub(crate) const INSERT_EVENT: &'static str = "INSERT INTO events (workspace_id, event_type, project, run_id, question_id, data, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id";

    pub(crate) async fn new(
        read: SqliteConnections,
        write: SqliteConnections,
        direct: Option<DirectConnection>,
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
            caches: Arc::default(),
            audit_heads: Arc::default(),
        })
    }

    /// A write transaction, run in the batch the writer has open (see [`GroupCommit`]). Batches begin with
    /// `BEGIN IMMEDIATE`, which takes the write lock up front, so a transaction that reads before it writes cannot
    /// fail with `SQLITE_BUSY` half-way when another process writes too.
    pub(crate) async fn begin_write(&self) -> Result<BatchedWrite, sqlx::Error> {
        self.writer.begin().await
    }

    /// A write transaction whose queries open (and may release) its savepoint themselves (see `GroupCommit::begin_inline`): this spares the hot writes a trip to the connection's
    /// thread for each savepoint statement.
    pub(crate) async fn begin_write_inline(&self) -> Result<BatchedWrite, sqlx::Error> {
        self.writer.begin_inline().await
    }
}

impl SqliteStore {
    /// Resolves a pending question (of no run) and appends its event and audit entry, in one direct write (see
    /// `direct`): no trip to SQLite's thread, where the general path takes three. The entry is sealed on the guessed
    /// chain head; the database refuses it if the guess is wrong (migration 0009), which fails the write, so it is
    /// undone. `false`, with nothing written, when someone was first, the guess was wrong, or there is none: the
    /// general path then runs.
    pub(crate) async fn resolve_in_one_query(&self, transition: &QuestionTransition) -> StoreResult<bool> {
        let mut tx = self.writer.begin_direct().await?;
        // Guessed while holding the writer: the writes before this one have moved the head as far as it goes.
        let Some(sealed) = self.sealed_on_guessed_head(&transition.audit) else { return Ok(false) };
        let arguments = Bind::bind_resolved(DirectArguments::default(), &transition.resolved);
        let arguments = Bind::bind_row(Bind::bind_event(arguments, &transition.event), &sealed);
        // The rowids of the update (none of its own), the event and the entry, or nothing if the question had left
        // `pending`.
        let inserted = match tx.direct_inserted_rowids(&RESOLVE_PENDING_WITH_EVENT_AND_AUDIT, &arguments) {
            Ok(inserted) => inserted,
            // Dropping the write undoes it.
            Err(sqlx::Error::Database(err)) if err.message().contains(AUDIT_ENTRY_OFF_ITS_HEAD) => return Ok(false),
            Err(err) => return Err(err.into()),
        };
        match inserted[..] {
            [] => Ok(false),
            [_, event_id, _] => {
                self.audit_heads.remember(sealed.workspace_id, sealed.seq, &sealed.hash);
                self.commit_one_event(tx, event_id, &transition.event).await?;
                Ok(true)
            }
            _ => Err(StoreError::Corrupt("resolving a question appended its event without its audit entry".into())),
        }
    }
}

impl SqliteStore {
    /// Asks a question (of no run, without an idempotency key) on the writer's direct connection: the question
    /// and its `question_asked` event, one query run on this thread (see `GroupCommit::begin_direct`).
    pub(crate) async fn insert_question_directly(
        &self,
        q: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<Option<Created<QuestionRow>>> {
        let mut tx = self.writer.begin_direct().await?;
        let arguments = Bind::bind_event(Bind::bind_row(DirectArguments::default(), q), event);
        let inserted = tx.direct_inserted_rowids(&INSERT_QUESTION_THEN_EVENT_DIRECTLY, &arguments)?;
        let [_, asked] = inserted[..] else {
            return Err(StoreError::Corrupt("asking a question stored it without its event".into()));
        };
        self.commit_one_event(tx, asked, event).await?;
        Ok(Some(Created { value: q.clone(), created: true }))
    }
}

/// What migration 0009's trigger says when an audit entry does not follow its chain's stored head.
pub(crate) const AUDIT_ENTRY_OFF_ITS_HEAD: &str = "the audit entry does not follow its chain's head";

/// `SqliteStore::INSERT_EVENT` for the direct connection, which reads the event's id from `last_insert_rowid`
/// (see `DirectConnection::inserted_rowids` for why not `RETURNING`).
pub(crate) const INSERT_EVENT_DIRECTLY: &str = "INSERT INTO events (workspace_id, event_type, project, run_id, question_id, data, \
     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// SQLite's asking write on the direct connection (see `SqliteStore::insert_question_directly`): the question
/// (`$1`..`$29`) and its event (`$30`.., as `INSERT_EVENT` binds them).
pub(crate) static INSERT_QUESTION_THEN_EVENT_DIRECTLY: std::sync::LazyLock<Statements> =
    std::sync::LazyLock::new(|| Statements::new(&insert_question_then_event("", "; ", INSERT_EVENT_DIRECTLY)));

/// SQLite's resolving write (see `SqliteStore::resolve_in_one_query`): the update (`$1`..`$7`), the event
/// (`$8`..`$14`, as `INSERT_EVENT` binds them) and the audit entry (`$15`..`$29`, as `APPEND_AUDIT` binds them).
/// The direct connection runs each statement only if the one before it changed a row, so a question no longer
/// pending writes nothing.
pub(crate) static RESOLVE_PENDING_WITH_EVENT_AND_AUDIT: std::sync::LazyLock<Statements> =
    std::sync::LazyLock::new(|| {
        Statements::new(&format!(
            "{}; {}; {}",
            *RESOLVE_PENDING,
            shift_placeholders(INSERT_EVENT_DIRECTLY, 7),
            shift_placeholders(AuditRow::insert(), 14)
        ))
    });
