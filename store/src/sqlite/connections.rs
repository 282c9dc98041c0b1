//! SQLite's connections, handed out without sqlx's pool.
//!
//! sqlx's pool pings every connection it takes back (`PoolConnection::return_to_pool` in sqlx-core 0.8, with no
//! setting to turn it off), to flush what a query dropped half-way may have left on the connection. On SQLite a
//! ping is a hand-off to the connection's thread and back, so with the pool every statement run outside a
//! transaction would cost two of them, and each batch of the group commit one more. There is nothing for it to
//! flush: sqlx-sqlite's worker runs a connection's commands in order, resets a statement whose reader went away
//! before it takes the next command, and a dropped transaction queues its rollback when it is dropped, so whoever
//! takes the connection next finds it clean (docs/benchmarks.md has the measurements).
//!
//! PostgreSQL keeps sqlx's pool: there a connection is a socket that can break between uses, which the ping finds.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use sqlx::sqlite::{SqliteConnectOptions, SqliteQueryResult, SqliteRow, SqliteStatement, SqliteTypeInfo};
use sqlx::{ConnectOptions, Describe, Either, Execute, Executor, Sqlite, SqliteConnection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a caller waits for a free connection before it gets `PoolTimedOut` (sqlx's pool's default).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// Up to `size` connections to one database, opened when first needed and reused most recently used first (its
/// pages are the likeliest in the cache). Cheap to clone.
#[derive(Clone)]
pub(crate) struct SqliteConnections {
    shared: Arc<Shared>,
}

struct Shared {
    options: SqliteConnectOptions,
    idle: Mutex<Vec<SqliteConnection>>,
    /// One permit per connection that may exist; a caller holds one for as long as it holds a connection.
    available: Arc<Semaphore>,
}

impl fmt::Debug for SqliteConnections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteConnections").field("filename", &self.shared.options.get_filename()).finish()
    }
}

impl SqliteConnections {
    /// Opens the first connection now, so that a database that cannot be opened fails here.
    pub(crate) async fn open(options: SqliteConnectOptions, size: usize) -> Result<Self, sqlx::Error> {
        let connections = Self {
            shared: Arc::new(Shared {
                options,
                idle: Mutex::new(Vec::with_capacity(size)),
                available: Arc::new(Semaphore::new(size.max(1))),
            }),
        };
        drop(connections.acquire().await?);
        Ok(connections)
    }

    /// A connection of its own for the caller until the returned handle is dropped.
    pub(crate) async fn acquire(&self) -> Result<HeldConnection, sqlx::Error> {
        let permit = tokio::time::timeout(ACQUIRE_TIMEOUT, Arc::clone(&self.shared.available).acquire_owned())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = self.shared.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let connection = match idle {
            Some(connection) => connection,
            // Fewer connections are open than permits: the first uses, or one was discarded.
            None => self.shared.options.connect().await?,
        };
        Ok(HeldConnection { connection: Some(connection), shared: Arc::clone(&self.shared), _permit: permit })
    }
}

/// A connection taken from [`SqliteConnections`]; dropping it puts it back.
pub(crate) struct HeldConnection {
    /// `None` once discarded.
    connection: Option<SqliteConnection>,
    shared: Arc<Shared>,
    _permit: OwnedSemaphorePermit,
}

impl HeldConnection {
    /// Closes the connection instead of putting it back (its state is unknown); the next caller opens a fresh one.
    pub(crate) fn discard(&mut self) {
        self.connection = None;
    }

    /// Discards the connection when `err` says it no longer works.
    fn discard_if_broken(&mut self, err: &sqlx::Error) {
        if matches!(err, sqlx::Error::WorkerCrashed | sqlx::Error::Io(_)) {
            self.discard();
        }
    }

    /// Passes `result` on, discarding the connection first if it failed because the connection no longer works.
    fn checked<T>(&mut self, result: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        if let Err(err) = &result {
            self.discard_if_broken(err);
        }
        result
    }
}

impl std::ops::Deref for HeldConnection {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        self.connection.as_ref().expect("a held connection is not used after it was discarded")
    }
}

impl std::ops::DerefMut for HeldConnection {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.connection.as_mut().expect("a held connection is not used after it was discarded")
    }
}

impl Drop for HeldConnection {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            self.shared.idle.lock().unwrap_or_else(PoisonError::into_inner).push(connection);
        }
    }
}

/// Runs each query on a connection of its own, as `&SqlitePool` does, so the store's queries read the same on both.
/// Like sqlx's pool, each query holds a clone of the handle, not the borrow, so any lifetime will do. `fetch_all`,
/// `execute` and the rest are sqlx's defaults, which go through `fetch_many` (as the connection's own do).
impl<'c> Executor<'c> for &'_ SqliteConnections {
    type Database = Sqlite;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<SqliteQueryResult, SqliteRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        let connections = self.clone();
        Box::pin(async_stream::try_stream! {
            let mut connection = connections.acquire().await?;
            let mut results = connection.fetch_many(query);
            let failed = loop {
                match results.next().await {
                    Some(Ok(result)) => yield result,
                    None => break None,
                    Some(Err(err)) => break Some(err),
                }
            };
            drop(results);
            if let Some(err) = failed {
                connection.discard_if_broken(&err);
                Err(err)?;
            }
        })
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<SqliteRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        let connections = self.clone();
        Box::pin(async move {
            let mut connection = connections.acquire().await?;
            let row = connection.fetch_optional(query).await;
            connection.checked(row)
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [SqliteTypeInfo],
    ) -> BoxFuture<'e, Result<SqliteStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        let connections = self.clone();
        Box::pin(async move { connections.acquire().await?.prepare_with(sql, parameters).await })
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<Sqlite>, sqlx::Error>>
    where
        'c: 'e,
    {
        let connections = self.clone();
        Box::pin(async move { connections.acquire().await?.describe(sql).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes its directory when the test ends.
    struct TempDir(std::path::PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    async fn connections(size: usize) -> (SqliteConnections, TempDir) {
        let dir = TempDir(std::env::temp_dir().join(format!("holdpoint-connections-{}", uuid::Uuid::now_v7())));
        std::fs::create_dir_all(&dir.0).unwrap();
        let options = SqliteConnectOptions::new().filename(dir.0.join("db.sqlite")).create_if_missing(true);
        (SqliteConnections::open(options, size).await.unwrap(), dir)
    }

    #[tokio::test]
    async fn a_connection_goes_back_for_the_next_caller_and_no_more_than_size_are_open_at_once() {
        let (connections, _dir) = connections(2).await;
        sqlx::query("CREATE TEMP TABLE mine (n INTEGER)").execute(&connections).await.unwrap();
        // A temporary table lives on its connection only: the most recently used one is handed out again.
        sqlx::query("INSERT INTO mine VALUES (1)").execute(&connections).await.unwrap();
        let (n,): (i64,) = sqlx::query_as("SELECT n FROM mine").fetch_one(&connections).await.unwrap();
        assert_eq!(n, 1);

        let first = connections.acquire().await.unwrap();
        let second = connections.acquire().await.unwrap();
        let third = tokio::time::timeout(Duration::from_millis(50), connections.acquire()).await;
        assert!(third.is_err(), "a third connection was handed out while two were held");
        drop(first);
        let third = tokio::time::timeout(Duration::from_secs(5), connections.acquire()).await;
        assert!(third.is_ok(), "the connection given back was not handed out again");
        drop(second);
    }

    #[tokio::test]
    async fn a_discarded_connection_is_replaced_by_a_fresh_one() {
        let (connections, _dir) = connections(1).await;
        sqlx::query("CREATE TEMP TABLE mine (n INTEGER)").execute(&connections).await.unwrap();
        connections.acquire().await.unwrap().discard();
        let gone = sqlx::query("SELECT n FROM mine").fetch_all(&connections).await;
        assert!(gone.is_err(), "the discarded connection (with its temporary table) was handed out again");
    }

    #[tokio::test]
    async fn a_query_dropped_half_way_leaves_the_connection_clean_for_the_next_caller() {
        let (connections, _dir) = connections(1).await;
        sqlx::query("CREATE TABLE numbers (n INTEGER)").execute(&connections).await.unwrap();
        sqlx::query("WITH RECURSIVE up(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM up WHERE n < 5000) INSERT INTO numbers SELECT n FROM up")
            .execute(&connections)
            .await
            .unwrap();
        {
            let mut rows = sqlx::query("SELECT n FROM numbers").fetch(&connections);
            rows.next().await.unwrap().unwrap();
        }
        // A transaction dropped open queues its rollback on the connection.
        {
            let mut held = connections.acquire().await.unwrap();
            let mut tx = sqlx::Connection::begin(&mut *held).await.unwrap();
            sqlx::query("DELETE FROM numbers").execute(&mut *tx).await.unwrap();
        }
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM numbers").fetch_one(&connections).await.unwrap();
        assert_eq!(count, 5000);
        // Another connection writes: the first holds no read snapshot or lock left behind.
        let other = SqliteConnections::open(connections.shared.options.clone(), 1).await.unwrap();
        sqlx::query("DELETE FROM numbers WHERE n > 10").execute(&other).await.unwrap();
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM numbers").fetch_one(&connections).await.unwrap();
        assert_eq!(count, 10);
    }
}
