//! Group commit for PostgreSQL's hot writes: asking a question and resolving one.
//!
//! Each of them is one statement. Committed alone, every such commit takes the event log's lock inside its
//! `COMMIT` (migration 0008 numbers events there) and holds it over its own WAL flush, so under load the commits of
//! concurrent asks and answers would run one after another, each flushing alone (docs/benchmarks.md
//! has the figures). Here the writes that queue while the workers are busy become one statement: each
//! write's statement is a list of common table expressions, and the batch's statement runs all of them, committed
//! by itself. One round trip, one lock, one flush and one commit's bookkeeping for the lot.
//!
//! - A write that finds nobody queued with it runs alone, as a batch of one.
//! - A write is told it is stored only once its batch's statement has returned, committed.
//! - A batch whose statement PostgreSQL refused (any write's error, or a deferred trigger's at the commit) stored
//!   nothing; then each of its writes runs alone, so each gets its own outcome and one write's failure costs the
//!   others only time. A batch whose statement got no answer (the connection broke) may be stored or not: every
//!   write of it is told so, and none is run again.
//! - A write whose caller has gone (the request was cancelled) before its batch starts is not run.
//! - Two resolves of one question in one batch: PostgreSQL changes a row once per statement, so one resolves it and
//!   the other returns no row, as it would have run second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgDatabaseError, PgSeverity};
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{PING_AFTER_IDLE, StoreError, StoreResult};

/// The rows a write returns (its last expression's `RETURNING id`).
pub(crate) type Returned = Vec<(i64,)>;

/// A batch's statement: each row is a write's place in the batch and one id it returned.
pub(crate) type BatchQuery<'q> = sqlx::query::QueryAs<'q, Postgres, (i32, i64), PgArguments>;

/// A write of one statement, written as common table expressions so that a batch can hold several.
pub(crate) trait BatchableWrite: Send + Sync + 'static {
    /// The write as common table expressions: the last one is named `name` and returns the write's rows as `id`;
    /// any other is named `name` and a suffix. Its placeholders come after the first `offset`.
    fn as_expressions(&self, name: &str, offset: usize) -> String;
    /// How many values the write binds.
    fn arguments(&self) -> usize;
    /// Binds the write's values after what `query` has.
    fn bind<'q>(&'q self, query: BatchQuery<'q>) -> BatchQuery<'q>;
    /// Writes of one kind go together in a batch, so that batches come in few shapes and PostgreSQL plans each
    /// shape once per connection.
    fn kind(&self) -> u8;
}

/// The most writes one statement holds: past a dozen or so, a batch only makes its first writes wait longer.
const MOST_WRITES_IN_A_BATCH: usize = 16;

/// How many batches run at once, each on a connection of its own: while one waits for its flush, the next one's
/// statement runs.
const WORKERS: usize = 2;

struct Job {
    write: Box<dyn BatchableWrite>,
    reply: oneshot::Sender<StoreResult<Returned>>,
}

/// The queue of hot writes and the workers that run them in batches. The workers stop when the last clone is
/// dropped.
#[derive(Clone)]
pub(crate) struct WriteBatches {
    queue: mpsc::UnboundedSender<Job>,
}

impl WriteBatches {
    pub(crate) fn start(pool: PgPool) -> Self {
        Self::start_with(pool, WORKERS, PING_AFTER_IDLE)
    }

    /// [`WriteBatches::start`] with `workers` workers, which check a connection they held unused for `idle` before
    /// a batch.
    fn start_with(pool: PgPool, workers: usize, idle: Duration) -> Self {
        let (queue, jobs) = mpsc::unbounded_channel();
        let jobs = Arc::new(Mutex::new(jobs));
        for _ in 0..workers {
            tokio::spawn(work(pool.clone(), Arc::clone(&jobs), idle));
        }
        Self { queue }
    }

    /// Runs `write`, in a batch with whatever else is queued, and returns its rows once they are committed.
    pub(crate) async fn run(&self, write: impl BatchableWrite) -> StoreResult<Returned> {
        let (reply, outcome) = oneshot::channel();
        self.queue.send(Job { write: Box::new(write), reply }).map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }
}

fn stopped() -> StoreError {
    StoreError::BatchedWrite("the store is shutting down".into())
}

/// A worker's connection, held from batch to batch: handing it back to the pool and taking it again cost more than
/// a batch's statement.
struct Held {
    connection: PoolConnection<Postgres>,
    last_used: Instant,
}

/// The connection for the next batch: the one held, checked first if it sat unused for `idle` or longer, as the
/// pool checks its own (`PING_AFTER_IDLE`): it may have broken unseen (the database restarted, a proxy dropped it).
async fn connection_for_a_batch(
    pool: &PgPool,
    held: Option<Held>,
    idle: Duration,
) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    if let Some(Held { mut connection, last_used }) = held {
        if last_used.elapsed() < idle || connection.ping().await.is_ok() {
            return Ok(connection);
        }
        drop(connection.detach());
    }
    pool.acquire().await
}

async fn work(pool: PgPool, jobs: Arc<Mutex<mpsc::UnboundedReceiver<Job>>>, idle: Duration) {
    let mut held: Option<Held> = None;
    loop {
        let mut batch = {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else { return };
            let mut batch = vec![first];
            while batch.len() < MOST_WRITES_IN_A_BATCH {
                let Ok(next) = jobs.try_recv() else { break };
                batch.push(next);
            }
            batch
        };
        batch.retain(|job| !job.reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        batch.sort_by_key(|job| job.write.kind());
        let mut connection = match connection_for_a_batch(&pool, held.take(), idle).await {
            Ok(connection) => connection,
            Err(err) => {
                fail(batch, &format!("no connection: {err}"));
                continue;
            }
        };
        if run_batch(&mut connection, batch).await {
            held = Some(Held { connection, last_used: Instant::now() });
        } else {
            drop(connection.detach());
        }
    }
}

/// Runs `batch` and tells each write how it went. `false` when the connection may be broken.
async fn run_batch(connection: &mut PgConnection, batch: Vec<Job>) -> bool {
    match in_one_statement(connection, &batch).await {
        Ok(returned) => {
            for (job, returned) in batch.into_iter().zip(returned) {
                let _ = job.reply.send(Ok(returned));
            }
            true
        }
        Err(err) if batch.len() == 1 => {
            let usable = refused(&err);
            if let Some(job) = batch.into_iter().next() {
                let _ = job.reply.send(Err(err.into()));
            }
            usable
        }
        // The statement stored nothing: each write runs again alone, for its own outcome.
        Err(err) if refused(&err) => {
            let mut jobs = batch.into_iter();
            while let Some(job) = jobs.next() {
                let outcome = in_one_statement(connection, std::slice::from_ref(&job)).await;
                let broken = matches!(outcome, Err(ref err) if !refused(err));
                let _ = job.reply.send(outcome.map(|mut returned| returned.remove(0)).map_err(StoreError::from));
                if broken {
                    fail(jobs, "the connection broke before the write could run again alone");
                    return false;
                }
            }
            true
        }
        Err(err) => {
            fail(batch, &format!("no answer to the statement, which may or may not have been stored: {err}"));
            false
        }
    }
}

/// Tells each of `jobs` that it did not run, or may not have, and why.
fn fail(jobs: impl IntoIterator<Item = Job>, reason: &str) {
    for job in jobs {
        let _ = job.reply.send(Err(StoreError::BatchedWrite(reason.to_owned())));
    }
}

/// Whether PostgreSQL refused the statement, storing nothing of it, on a connection that still serves: an `ERROR`.
/// A `FATAL` ends the session, and may come after the statement's commit (an administrator's termination is
/// processed wherever the backend next checks for it); an I/O error tells nothing of the outcome.
fn refused(err: &sqlx::Error) -> bool {
    let sqlx::Error::Database(err) = err else { return false };
    err.try_downcast_ref::<PgDatabaseError>().is_none_or(|err| matches!(err.severity(), PgSeverity::Error))
}

/// Runs `batch` as one statement, committed by itself, and returns each write's rows in the batch's order.
async fn in_one_statement(connection: &mut PgConnection, batch: &[Job]) -> Result<Vec<Returned>, sqlx::Error> {
    let mut expressions = Vec::with_capacity(batch.len());
    let mut results = Vec::with_capacity(batch.len());
    let mut offset = 0;
    for (place, job) in batch.iter().enumerate() {
        let name = format!("w{place}");
        expressions.push(job.write.as_expressions(&name, offset));
        results.push(format!("SELECT {place}, id FROM {name}"));
        offset += job.write.arguments();
    }
    let sql = format!("WITH {} {}", expressions.join(", "), results.join(" UNION ALL "));
    let query = batch.iter().fold(sqlx::query_as(&sql), |query, job| job.write.bind(query));
    let mut returned = vec![Returned::new(); batch.len()];
    for (place, id) in query.fetch_all(connection).await? {
        if let Some(rows) = usize::try_from(place).ok().and_then(|place| returned.get_mut(place)) {
            rows.push((id,));
        }
    }
    Ok(returned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_postgres::PostgresSchema;

    /// Inserts `100 / n * n` into the test's table and returns it; `n` = 0 divides by zero, so the statement fails,
    /// and a negative `n` sleeps for half a minute first.
    struct Insert(i64);

    impl BatchableWrite for Insert {
        fn as_expressions(&self, name: &str, offset: usize) -> String {
            let n = offset + 1;
            format!(
                "{name} AS (INSERT INTO batched (n) SELECT 100 / ${n} * ${n} \
                 FROM pg_sleep(CASE WHEN ${n} < 0 THEN 30 ELSE 0 END) RETURNING n AS id)"
            )
        }

        fn arguments(&self) -> usize {
            1
        }

        fn bind<'q>(&'q self, query: BatchQuery<'q>) -> BatchQuery<'q> {
            query.bind(self.0)
        }

        fn kind(&self) -> u8 {
            0
        }
    }

    /// A pool on a schema of the test's own, with the table `batched`, whose `n` is unique only at commit; and
    /// the schema, dropped with it.
    async fn database() -> Option<(PgPool, PostgresSchema)> {
        let schema = PostgresSchema::new().await?;
        let pool = PgPool::connect(&schema.url).await.unwrap();
        sqlx::query("CREATE TABLE batched (n BIGINT NOT NULL, UNIQUE (n) DEFERRABLE INITIALLY DEFERRED)")
            .execute(&pool)
            .await
            .unwrap();
        Some((pool, schema))
    }

    /// Queues the writes at once (the test's runtime has one thread, so the workers see them all queued), and
    /// returns each one's outcome.
    async fn run_together(batches: &WriteBatches, values: &[i64]) -> Vec<StoreResult<Returned>> {
        futures::future::join_all(values.iter().map(|&n| batches.run(Insert(n)))).await
    }

    /// How many transactions wrote the table's rows, and the rows.
    async fn stored(pool: &PgPool) -> (i64, Vec<i64>) {
        let (transactions,): (i64,) =
            sqlx::query_as("SELECT count(DISTINCT xmin::text) FROM batched").fetch_one(pool).await.unwrap();
        let rows: Vec<(i64,)> = sqlx::query_as("SELECT n FROM batched ORDER BY n").fetch_all(pool).await.unwrap();
        (transactions, rows.into_iter().map(|(n,)| n).collect())
    }

    #[tokio::test]
    async fn writes_queued_together_commit_in_one_transaction_and_each_gets_its_rows() {
        let Some((pool, _schema)) = database().await else { return };
        let batches = WriteBatches::start(pool.clone());
        let outcomes = run_together(&batches, &[1, 3, 6, 7]).await;
        let returned: Vec<Returned> = outcomes.into_iter().map(Result::unwrap).collect();
        assert_eq!(returned, vec![vec![(100,)], vec![(99,)], vec![(96,)], vec![(98,)]]);
        assert_eq!(stored(&pool).await, (1, vec![96, 98, 99, 100]));
    }

    #[tokio::test]
    async fn a_failing_write_fails_alone_and_the_rest_of_its_batch_is_stored() {
        let Some((pool, _schema)) = database().await else { return };
        let batches = WriteBatches::start(pool.clone());
        let outcomes = run_together(&batches, &[7, 0, 9]).await;
        assert!(matches!(&outcomes[1], Err(StoreError::Database(sqlx::Error::Database(_)))), "{:?}", outcomes[1]);
        assert_eq!(outcomes[0].as_ref().unwrap(), &vec![(98,)]);
        assert_eq!(outcomes[2].as_ref().unwrap(), &vec![(99,)]);
        // Run again alone, each in a transaction of its own.
        assert_eq!(stored(&pool).await, (2, vec![98, 99]));
    }

    #[tokio::test]
    async fn a_commit_postgresql_refuses_sends_each_write_on_alone() {
        let Some((pool, _schema)) = database().await else { return };
        let batches = WriteBatches::start(pool.clone());
        // 3 and 9 both store 99 (100 / n * n): fine statement by statement, refused at the batch's COMMIT.
        let outcomes = run_together(&batches, &[3, 9, 6]).await;
        assert_eq!(outcomes[0].as_ref().unwrap(), &vec![(99,)]);
        assert!(matches!(&outcomes[1], Err(StoreError::Database(sqlx::Error::Database(_)))), "{:?}", outcomes[1]);
        assert_eq!(outcomes[2].as_ref().unwrap(), &vec![(96,)]);
        assert_eq!(stored(&pool).await, (2, vec![96, 99]));
    }

    /// A connection a worker held while PostgreSQL ended it (a restart, a failover, a proxy's timeout) is found
    /// broken before the next batch, which runs on a fresh one.
    #[tokio::test]
    async fn a_held_connection_that_broke_while_unused_is_replaced_before_the_next_batch() {
        let Some((pool, _schema)) = database().await else { return };
        // One worker, so that the second write runs on the connection the first one left it holding.
        let batches = WriteBatches::start_with(pool.clone(), 1, Duration::ZERO);
        assert_eq!(batches.run(Insert(1)).await.unwrap(), vec![(100,)]);
        let (ended,): (i64,) = sqlx::query_as(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = current_setting('application_name') AND pid <> pg_backend_pid()",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(ended >= 1, "the worker's connection was ended");
        assert_eq!(batches.run(Insert(3)).await.unwrap(), vec![(99,)]);
        assert_eq!(stored(&pool).await.1, vec![99, 100]);
    }

    /// A session that ends in the middle of a batch's statement (an administrator's termination, a failover) may
    /// have ended after the commit: each write is told it may be stored, none runs again, and the next batch runs
    /// on a fresh connection.
    #[tokio::test]
    async fn a_batch_whose_session_ends_mid_statement_is_reported_as_possibly_stored_and_not_run_again() {
        let Some((pool, _schema)) = database().await else { return };
        let batches = WriteBatches::start_with(pool.clone(), 1, PING_AFTER_IDLE);
        let terminate_the_sleeper = async {
            for _ in 0..500 {
                let (ended,): (i64,) = sqlx::query_as(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name = current_setting('application_name') AND pid <> pg_backend_pid() \
                     AND state = 'active' AND query LIKE '%pg_sleep%'",
                )
                .fetch_one(&pool)
                .await
                .unwrap();
                if ended > 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("the batch's statement never ran");
        };
        let (outcomes, ()) = tokio::join!(run_together(&batches, &[-1, 3]), terminate_the_sleeper);
        for outcome in &outcomes {
            assert!(matches!(outcome, Err(StoreError::BatchedWrite(_))), "{outcome:?}");
        }
        assert_eq!(stored(&pool).await.1, Vec::<i64>::new());
        assert_eq!(batches.run(Insert(6)).await.unwrap(), vec![(96,)]);
    }
}
