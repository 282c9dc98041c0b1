//! Group commit for SQLite's one writer connection.
//!
//! Each SQLite commit flushes the WAL (`synchronous=FULL`, as shipped), and with one writer the flushes of
//! concurrent writes ran one after the other. Here, the write transactions that queue for the writer while one runs
//! share its transaction, and the batch commits once, when nobody is left waiting:
//!
//! - The first write of a batch opens it with `BEGIN IMMEDIATE`, and each later one runs in a savepoint of its own,
//!   which it releases when it is done or rolls back when it fails or is dropped. So a failed write takes nothing
//!   of the others' with it, and a batch of one costs the statements a lone transaction did.
//! - A write's `commit` returns only once its batch's `COMMIT` has returned: what a caller is told is stored is on
//!   disk. If that `COMMIT` fails, every write of the batch gets the error and none is stored.
//! - The last write of a batch, when nobody waits for the writer, commits it itself. When others wait, they join
//!   the batch, and a task queued behind them commits it (the writer's lock is fair, first come first served, so a
//!   batch holds at most the writes that were waiting when it closed).
//!
//! sqlx's own transaction bookkeeping (`TransactionManager`, what `sqlx::Transaction` runs on) issues the
//! statements, so a write cancelled at any point, even mid-statement, is undone by the connection's worker, as a
//! dropped `sqlx::Transaction` would be.
//!
//! A write begun with [`GroupCommit::begin_inline`] instead names its savepoint in its own SQL: it puts
//! [`BatchedWrite::savepoint`] before its first statement or, where its whole work is one query,
//! [`BatchedWrite::savepoint_released_in_one_query`] around that query. Each statement sqlx runs on SQLite is a trip to the connection's thread and
//! back while the writer is locked, so a question asked this way holds the writer for one trip instead of three.
//! A write dropped with its savepoint open is undone before the batch runs anything else.
//!
//! A write begun with [`GroupCommit::begin_direct`] runs its statements on a second connection to the database,
//! on the caller's thread ([`DirectConnection`]), with no trip to a connection's thread at all: the hot writes of a
//! HITL cycle, on the writer's own thread. A batch is of one kind: a write of the other kind commits the open batch
//! before it opens its own. A direct batch holds the sqlx writer connection unused, so that nothing writes through
//! it meanwhile. Its first write runs in its transaction, as in a batch through sqlx, and is undone by rolling that
//! back; each later one runs in a savepoint of its own, undone on the spot if it fails or is dropped.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::{Connection, Sqlite, SqliteConnection, TransactionManager};
use tokio::sync::{Mutex, OwnedMutexGuard, watch};

use super::connections::{HeldConnection, SqliteConnections};
use super::direct::{DirectArguments, DirectConnection, Statements};

type Manager = <Sqlite as sqlx::Database>::TransactionManager;

/// The savepoint of a write begun with [`GroupCommit::begin_inline`]. Writes run one after another under the
/// writer's lock and each ends its savepoint (or has it undone) before the next begins, so one name serves all.
const INLINE_SAVEPOINT: &str = "SAVEPOINT holdpoint_write; ";
const INLINE_RELEASE: &str = "; RELEASE holdpoint_write";
const INLINE_RELEASE_ALONE: &str = "RELEASE holdpoint_write";
const INLINE_UNDO: &str = "ROLLBACK TO holdpoint_write; RELEASE holdpoint_write";
/// The same savepoint, for a direct write (see [`GroupCommit::begin_direct`]).
const DIRECT_SAVEPOINT: &str = "SAVEPOINT holdpoint_write";

/// The connection direct writes run on, shared by the clones of a [`GroupCommit`]. Only the holder of the writer's
/// lock touches it, so its mutex is never contended; it makes the connection `Sync`.
type Direct = Arc<std::sync::Mutex<DirectConnection>>;

/// How a batch ended: `Ok` once its `COMMIT` returned, or why nothing of it was stored.
type Outcome = Option<Result<(), Arc<str>>>;

/// The writer: hands out [`BatchedWrite`]s and commits them in batches.
#[derive(Clone)]
pub(crate) struct GroupCommit {
    pool: SqliteConnections,
    /// Where direct writes run; `None` if the writer was made without.
    direct: Option<Direct>,
    open: Arc<Mutex<Option<Batch>>>,
    /// How many are waiting for `open`'s lock: a write that sees none commits its batch itself.
    waiting: Arc<AtomicUsize>,
    #[cfg(test)]
    commits: Arc<AtomicUsize>,
}

/// A transaction shared by the writes that queued for the writer while it was open.
struct Batch {
    /// `Some` until the batch has committed or rolled back. In a direct batch, the writer's sqlx connection is
    /// held unused, so that nothing writes through it while the direct connection's transaction is open.
    connection: Option<HeldConnection>,
    /// `Some` for a batch of direct writes, whose transaction is open on this connection.
    direct: Option<Direct>,
    /// A direct write's savepoint could not be undone: what the transaction holds is unknown, and it rolls back.
    direct_failed: bool,
    outcome: watch::Sender<Outcome>,
    #[cfg(test)]
    commits: Arc<AtomicUsize>,
    /// A task will commit this batch once the writes waiting now have run.
    commit_scheduled: bool,
    /// A write left without releasing its savepoint: the connection's worker rolls it back before its next command.
    /// Whether it could is checked before the batch takes another write or commits.
    undo_queued: bool,
    /// A write begun inline left with its savepoint perhaps open: it is rolled back before the batch takes another
    /// write or commits.
    inline_undo_queued: bool,
    /// Handed to a task of its own to finish (see `Drop`).
    orphan: bool,
}

/// One write transaction. Dereferences to the connection, for queries; `commit` stores it, dropping it undoes it.
pub(crate) struct BatchedWrite {
    group: GroupCommit,
    /// `Some` until committed.
    held: Option<Held>,
    /// Runs in a savepoint (it joined an open batch); the first write of a batch runs in the batch's transaction.
    in_savepoint: bool,
    /// `Some` for a write that names its savepoint in its own SQL ([`GroupCommit::begin_inline`]).
    inline: Option<Inline>,
    /// `Some` for a direct write ([`GroupCommit::begin_direct`]).
    direct: Option<DirectWrite>,
}

/// Where a direct write runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DirectWrite {
    /// In the batch's transaction, which it opened: nobody else's write is in it while it runs (it holds the
    /// writer), so undoing it is rolling that back, and a savepoint would only cost its statements and SQLite's
    /// copy of every page it changes into the statement journal.
    OpenedTheBatch,
    /// In a savepoint of its own (it joined an open batch); whether that is open yet.
    Savepoint { open: bool },
}

/// Where a write begun inline stands with its savepoint.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inline {
    /// Nothing was sent yet.
    NotOpened,
    /// SQL that opens it was sent: it is open, or its opening failed (an undo of a savepoint that does not exist
    /// changes nothing).
    Open,
    /// SQL that opens and then releases it was sent in one query. Once that query returned without an error (the
    /// only way to `commit`), the write is in the batch's transaction; dropped, it is undone if the query stopped
    /// before the release, and commits with the batch if not, as a write whose caller went away just after its
    /// commit would.
    OpenUntilTheQueryEnds,
}

/// The writer's lock. Whoever lets go of it leaving an open batch that nobody will commit schedules its commit, so
/// no batch stays open, holding the only write connection, whatever path a write took out of it.
struct Held {
    group: GroupCommit,
    guard: OwnedMutexGuard<Option<Batch>>,
}

impl GroupCommit {
    pub(crate) fn new(pool: SqliteConnections) -> Self {
        Self {
            pool,
            direct: None,
            open: Arc::new(Mutex::new(None)),
            waiting: Arc::new(AtomicUsize::new(0)),
            #[cfg(test)]
            commits: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Lets writes begun with [`GroupCommit::begin_direct`] run on `direct`, a connection to the same database.
    pub(crate) fn with_direct(mut self, direct: DirectConnection) -> Self {
        self.direct = Some(Arc::new(std::sync::Mutex::new(direct)));
        self
    }

    async fn lock(&self) -> Held {
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        Held { group: self.clone(), guard: self.open.clone().lock_owned().await }
    }

    /// Starts a write: joins the open batch, or opens one (`BEGIN IMMEDIATE`) if there is none.
    pub(crate) async fn begin(&self) -> Result<BatchedWrite, sqlx::Error> {
        let mut held = self.lock().await;
        Self::finish_batch_of_the_other_kind(&mut held, false).await;
        Self::undo_left_writes(&mut held).await;
        if let Some(batch) = held.guard.as_mut() {
            Manager::begin(batch.connection(), None).await?;
            return Ok(self.write(held, true, None));
        }
        self.open_batch(&mut held).await?;
        Ok(self.write(held, false, None))
    }

    fn write(&self, held: Held, in_savepoint: bool, inline: Option<Inline>) -> BatchedWrite {
        BatchedWrite { group: self.clone(), held: Some(held), in_savepoint, inline, direct: None }
    }

    /// Starts a write whose statements run on the writer's direct connection ([`DirectConnection`]), on the
    /// caller's thread, through [`BatchedWrite::direct_inserted_rowids`]: no trip to a connection's thread at all. It
    /// joins an open batch of direct writes, or opens one; a batch of sqlx writes open is committed first. Falls
    /// back to [`GroupCommit::begin_inline`] on a writer made without a direct connection.
    pub(crate) async fn begin_direct(&self) -> Result<BatchedWrite, sqlx::Error> {
        let Some(direct) = &self.direct else { return self.begin_inline().await };
        let mut held = self.lock().await;
        Self::finish_batch_of_the_other_kind(&mut held, true).await;
        let mut place = DirectWrite::Savepoint { open: false };
        if held.guard.is_none() {
            let connection = self.pool.acquire().await?;
            lock_direct(direct).execute("BEGIN IMMEDIATE")?;
            *held.guard = Some(self.batch(connection, Some(Arc::clone(direct))));
            place = DirectWrite::OpenedTheBatch;
        }
        let mut write = self.write(held, false, None);
        write.direct = Some(place);
        Ok(write)
    }

    /// Commits the open batch unless it is of the kind a write needs (`direct`, or through sqlx): a batch's
    /// writes all run on one connection. A batch through sqlx undoes what its writes left first, as at any commit.
    async fn finish_batch_of_the_other_kind(held: &mut Held, direct: bool) {
        if held.guard.as_ref().is_some_and(|batch| batch.direct.is_some() != direct)
            && let Some(batch) = held.guard.take()
        {
            let _ = batch.finish().await;
        }
    }

    /// A batch whose transaction was just opened on `connection`, or on `direct` while it holds `connection`.
    fn batch(&self, connection: HeldConnection, direct: Option<Direct>) -> Batch {
        Batch {
            connection: Some(connection),
            direct,
            direct_failed: false,
            outcome: watch::channel(None).0,
            #[cfg(test)]
            commits: self.commits.clone(),
            commit_scheduled: false,
            undo_queued: false,
            inline_undo_queued: false,
            orphan: false,
        }
    }

    /// Starts a write that, joining an open batch, opens its savepoint in its own first query (see
    /// [`BatchedWrite::savepoint`]), which costs no trip to the connection's thread of its own.
    pub(crate) async fn begin_inline(&self) -> Result<BatchedWrite, sqlx::Error> {
        let mut held = self.lock().await;
        Self::finish_batch_of_the_other_kind(&mut held, false).await;
        Self::undo_left_writes(&mut held).await;
        if held.guard.is_none() {
            // The first write of a batch runs in the batch's transaction, as `begin` has it: a savepoint would only
            // add its release, a trip of its own when the write takes more than one query.
            self.open_batch(&mut held).await?;
            return Ok(self.write(held, false, None));
        }
        Ok(self.write(held, false, Some(Inline::NotOpened)))
    }

    async fn open_batch(&self, held: &mut Held) -> Result<(), sqlx::Error> {
        let mut connection = self.pool.acquire().await?;
        Manager::begin(&mut connection, Some("BEGIN IMMEDIATE".into())).await?;
        *held.guard = Some(self.batch(connection, None));
        Ok(())
    }

    /// Undoes what writes that left without ending their savepoint left in the open batch; a batch whose state
    /// that leaves unknown is finished (its commit fails it), so the next write opens a new one.
    async fn undo_left_writes(held: &mut Held) {
        let Some(batch) = held.guard.as_mut() else { return };
        if !batch.undo_queued && !batch.inline_undo_queued {
            return;
        }
        let (undo_queued, inline_undo_queued) = (batch.undo_queued, batch.inline_undo_queued);
        if left_writes_undone(batch.connection(), undo_queued, inline_undo_queued).await.is_ok() {
            batch.undo_queued = false;
            batch.inline_undo_queued = false;
        } else if let Some(batch) = held.guard.take() {
            let _ = batch.finish().await;
        }
    }

    /// Commits the open batch once the writes waiting for the writer now have joined it.
    async fn commit_when_free(self) {
        let mut held = self.lock().await;
        if let Some(batch) = held.guard.take() {
            let _ = batch.finish().await;
        }
    }
}

impl Batch {
    fn connection(&mut self) -> &mut SqliteConnection {
        self.connection.as_mut().expect("a batch has its connection until it finishes")
    }

    /// Commits the batch and tells every write of it how that went.
    async fn finish(mut self) -> Result<(), sqlx::Error> {
        if self.direct.is_some() {
            return self.finish_direct();
        }
        let (undo_queued, inline_undo_queued) = (self.undo_queued, self.inline_undo_queued);
        let result = commit_batch(self.connection(), undo_queued, inline_undo_queued).await;
        let mut connection = self.connection.take().expect("a batch has its connection until it finishes");
        if let Err(err) = &result {
            tracing::error!(error = %err, "a batch of SQLite writes failed to commit; none of them was stored");
            // What the connection holds is unknown: closing it rolls back whatever is open, and the next batch opens
            // a fresh one.
            connection.discard();
        }
        drop(connection);
        self.tell(&result);
        result
    }

    /// Tells every write of the batch how its commit went.
    fn tell(&mut self, result: &Result<(), sqlx::Error>) {
        #[cfg(test)]
        if result.is_ok() {
            self.commits.fetch_add(1, Ordering::SeqCst);
        }
        let told = result.as_ref().map(|_| ()).map_err(|err| Arc::from(err.to_string()));
        self.outcome.send_replace(Some(told));
    }

    /// Commits a batch of direct writes, on the caller's thread, and tells every write of it how that went.
    fn finish_direct(&mut self) -> Result<(), sqlx::Error> {
        let Some(direct) = self.direct.take() else { return Ok(()) };
        let mut connection = lock_direct(&direct);
        let result = if self.direct_failed {
            Err(sqlx::Error::Protocol("a write's savepoint could not be rolled back".into()))
        } else {
            connection.execute("COMMIT")
        };
        if let Err(err) = &result {
            tracing::error!(error = %err, "a batch of SQLite writes failed to commit; none of them was stored");
            if connection.in_transaction() {
                let _ = connection.execute("ROLLBACK");
            }
        }
        drop(connection);
        // Lets writes through sqlx use the database again.
        self.connection = None;
        self.tell(&result);
        result
    }
}

/// The direct connection; one that a panic left locked is as usable as before (its savepoint is undone by its
/// write's drop, or its transaction by the batch's rollback).
fn lock_direct(direct: &Direct) -> std::sync::MutexGuard<'_, DirectConnection> {
    direct.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn commit_batch(
    connection: &mut SqliteConnection,
    undo_queued: bool,
    inline_undo_queued: bool,
) -> Result<(), sqlx::Error> {
    left_writes_undone(connection, undo_queued, inline_undo_queued).await?;
    Manager::commit(connection).await
}

/// Fails unless the rollbacks queued for writes that left without ending their savepoint have run and left only
/// the batch's transaction open.
async fn left_writes_undone(
    connection: &mut SqliteConnection,
    undo_queued: bool,
    inline_undo_queued: bool,
) -> Result<(), sqlx::Error> {
    if inline_undo_queued {
        match sqlx::Executor::execute(&mut *connection, INLINE_UNDO).await {
            Ok(_) => {}
            // The write's query had released it, or never opened it: nothing of it is left to undo.
            Err(sqlx::Error::Database(err)) if err.message().contains("no such savepoint") => {}
            Err(err) => return Err(err),
        }
    }
    if undo_queued {
        // The worker runs commands in order: once the ping returns, the queued rollbacks have run.
        connection.ping().await?;
    }
    if Manager::get_transaction_depth(connection) != 1 {
        return Err(sqlx::Error::Protocol("a write's savepoint could not be rolled back".into()));
    }
    Ok(())
}

impl Drop for Batch {
    /// A batch dropped before it finished (the write committing it was cancelled mid-commit) still finishes: its
    /// writes were released into it and are waiting for the outcome. A second `COMMIT` after one the worker ran
    /// but could not acknowledge is a no-op there, so this is right whether the first reached the database or not.
    fn drop(&mut self) {
        if self.direct.is_some() {
            // Nothing to wait for: its commit runs here.
            let _ = self.finish_direct();
            return;
        }
        let Some(mut connection) = self.connection.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if self.orphan {
            // Its task was dropped before it ran: the runtime is shutting down, and nothing of the batch commits.
            Manager::start_rollback(&mut connection);
            return;
        }
        let orphan = Batch {
            connection: Some(connection),
            direct: None,
            direct_failed: false,
            outcome: std::mem::replace(&mut self.outcome, watch::channel(None).0),
            #[cfg(test)]
            commits: self.commits.clone(),
            commit_scheduled: true,
            undo_queued: self.undo_queued,
            inline_undo_queued: self.inline_undo_queued,
            orphan: true,
        };
        runtime.spawn(async move {
            let _ = orphan.finish().await;
        });
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(batch) = self.guard.as_mut() else { return };
        if batch.commit_scheduled {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        batch.commit_scheduled = true;
        runtime.spawn(self.group.clone().commit_when_free());
    }
}

impl BatchedWrite {
    fn batch(&mut self) -> &mut Batch {
        self.held.as_mut().and_then(|held| held.guard.as_mut()).expect("a write holds its open batch until it ends")
    }

    /// What a write begun inline puts before its first statement: opens its savepoint (nothing for other writes,
    /// or once it is open).
    pub(crate) fn savepoint(&mut self) -> &'static str {
        if self.inline != Some(Inline::NotOpened) {
            return "";
        }
        self.inline = Some(Inline::Open);
        INLINE_SAVEPOINT
    }

    /// What a write begun inline whose whole work is one query puts before and after it: the savepoint opens and
    /// is released in that one trip to the connection's thread. The query must be read to its end (`fetch_all` or
    /// `execute`: sqlx stops a query's statements where its reader stops). Nothing for other writes.
    pub(crate) fn savepoint_released_in_one_query(&mut self) -> (&'static str, &'static str) {
        if self.inline != Some(Inline::NotOpened) {
            return ("", "");
        }
        self.inline = Some(Inline::OpenUntilTheQueryEnds);
        (INLINE_SAVEPOINT, INLINE_RELEASE)
    }

    /// Stores the write: returns once the batch it is part of has committed, or with the error that stopped it.
    pub(crate) async fn commit(mut self) -> Result<(), sqlx::Error> {
        if self.direct.is_some() {
            self.release_direct_savepoint()?;
            // Direct writes run without awaiting anything: the writes queued on this thread get to join the batch
            // (and count as waiting) before it is committed.
            tokio::task::yield_now().await;
        }
        if self.in_savepoint {
            // On failure the savepoint is still open, and dropping `self` queues its rollback.
            Manager::commit(self.batch().connection()).await?;
        }
        if self.inline == Some(Inline::Open) {
            sqlx::Executor::execute(self.batch().connection(), INLINE_RELEASE_ALONE).await?;
        }
        self.inline = None;
        let mut held = self.held.take().expect("a write holds the writer until it ends");
        let batch = held.guard.as_mut().expect("a write holds its open batch until it ends");
        let alone = self.group.waiting.load(Ordering::SeqCst) == 0 && !batch.commit_scheduled;
        if alone {
            let batch = held.guard.take().expect("checked above");
            // The writer stays locked until the batch is on disk: nothing may run on its connection meanwhile.
            let result = batch.finish().await;
            drop(held);
            return result;
        }
        let mut outcome = batch.outcome.subscribe();
        // Those waiting join the batch; letting go schedules its commit behind them.
        drop(held);
        let told = outcome.wait_for(Option::is_some).await.map(|told| told.clone());
        match told {
            Ok(Some(Ok(()))) => Ok(()),
            Ok(Some(Err(reason))) => Err(shared_commit_failed(&reason)),
            Ok(None) | Err(_) => Err(shared_commit_failed("the writer stopped before committing")),
        }
    }

    /// Runs `sql` for a write begun with [`GroupCommit::begin_direct`] (see [`DirectConnection::inserted_rowids`]),
    /// inside the write's savepoint, which its first call opens.
    pub(crate) fn direct_inserted_rowids(
        &mut self,
        sql: &Statements,
        arguments: &DirectArguments<'_>,
    ) -> Result<Vec<i64>, sqlx::Error> {
        let Some(place) = self.direct else {
            return Err(sqlx::Error::Protocol("a write through sqlx ran a direct statement".into()));
        };
        let direct = self.batch().direct.clone().expect("a direct write holds a direct batch");
        let mut connection = lock_direct(&direct);
        if place == (DirectWrite::Savepoint { open: false }) {
            connection.execute(DIRECT_SAVEPOINT)?;
            self.direct = Some(DirectWrite::Savepoint { open: true });
        }
        connection.inserted_rowids(sql, arguments)
    }

    fn release_direct_savepoint(&mut self) -> Result<(), sqlx::Error> {
        if self.direct != Some(DirectWrite::Savepoint { open: true }) {
            return Ok(());
        }
        let direct = self.batch().direct.clone().expect("a direct write holds a direct batch");
        lock_direct(&direct).execute(INLINE_RELEASE_ALONE)?;
        self.direct = Some(DirectWrite::Savepoint { open: false });
        Ok(())
    }

    /// Undoes the write (as dropping it does).
    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        drop(self);
        Ok(())
    }
}

fn shared_commit_failed(reason: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other(format!("the commit this write was part of failed: {reason}")))
}

impl Drop for BatchedWrite {
    fn drop(&mut self) {
        let Some(mut held) = self.held.take() else { return };
        let Some(batch) = held.guard.as_mut() else { return };
        match (self.direct, batch.direct.clone()) {
            (None, _) => {}
            (Some(_), None) => return,
            (Some(DirectWrite::Savepoint { open }), Some(direct)) => {
                if open && lock_direct(&direct).execute(INLINE_UNDO).is_err() {
                    batch.direct_failed = true;
                }
                return;
            }
            (Some(DirectWrite::OpenedTheBatch), Some(direct)) => {
                if lock_direct(&direct).execute("ROLLBACK").is_err() {
                    // Left for the batch's commit, which fails it and rolls back what is left.
                    batch.direct_failed = true;
                    return;
                }
                // The batch held only this write, which is undone: it is over, and nobody waits for it. Its
                // writer's connection goes back, so the next write opens a batch of its own.
                if let Some(mut batch) = held.guard.take() {
                    batch.direct = None;
                    batch.connection = None;
                }
                return;
            }
        }
        match self.inline {
            Some(Inline::NotOpened) => return,
            Some(Inline::Open | Inline::OpenUntilTheQueryEnds) => {
                batch.inline_undo_queued = true;
                return;
            }
            None => {}
        }
        // The worker runs the rollback before its next command (ROLLBACK TO the savepoint, or ROLLBACK of the
        // batch's transaction if this write opened it).
        Manager::start_rollback(batch.connection());
        if self.in_savepoint {
            batch.undo_queued = true;
        } else {
            // The batch held only this write, which is undone: it is over, and nobody waits for it. Its connection
            // goes back at once: its worker runs the rollback before anything the next user sends.
            if let Some(mut batch) = held.guard.take() {
                batch.connection = None;
            }
        }
    }
}

impl Deref for BatchedWrite {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        assert!(self.direct.is_none(), "a direct write runs its statements through direct_inserted_rowids");
        self.held
            .as_ref()
            .and_then(|held| held.guard.as_ref())
            .and_then(|batch| batch.connection.as_deref())
            .expect("a write holds its open batch until it ends")
    }
}

impl DerefMut for BatchedWrite {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        assert!(self.direct.is_none(), "a direct write runs its statements through direct_inserted_rowids");
        self.batch().connection()
    }
}

#[cfg(test)]
mod tests;
