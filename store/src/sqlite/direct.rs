//! A SQLite connection that runs statements on the calling thread.
//!
//! sqlx runs each SQLite connection on a thread of its own: every statement is sent there and its results sent
//! back, row by row, each a wake of the other thread. On the writer's path that ping-pong is most of the cost of a
//! HITL cycle's writes, mostly context switches and wake-ups, and every other write waits on it while it lasts
//! (docs/benchmarks.md has the figures). The hot writes (asking and answering a question) run
//! here instead, on the writer's own thread, through rusqlite on the same `libsqlite3-sys` sqlx links. The rest of
//! the store keeps sqlx.
//!
//! Arguments are encoded by sqlx's own `Encode` impls ([`DirectArguments`]), so a value is stored exactly as the
//! sqlx queries store it and read it back. Errors come back as `sqlx::Error::Database`, with the kinds sqlx gives
//! SQLite's constraint errors, so callers handle both paths alike.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{OpenFlags, ffi};
use sqlx::Sqlite;
use sqlx::encode::{Encode, IsNull};
use sqlx::error::{BoxDynError, DatabaseError, ErrorKind};
use sqlx::sqlite::SqliteArgumentValue;

/// The statements a connection keeps prepared: the hot writes' few, with room to spare.
const PREPARED_STATEMENTS: usize = 32;

/// A connection to the database file, for statements run on the caller's thread.
pub(crate) struct DirectConnection {
    connection: rusqlite::Connection,
}

impl DirectConnection {
    /// Opens `path` (an existing database, migrated) with the settings the store's sqlx writer has: `synchronous`
    /// FULL, foreign keys on and the same busy timeout. (WAL and the page size are the file's own.)
    pub(crate) fn open(path: &Path, busy_timeout: Duration) -> Result<Self, sqlx::Error> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = rusqlite::Connection::open_with_flags(path, flags).map_err(into_sqlx)?;
        connection.busy_timeout(busy_timeout).map_err(into_sqlx)?;
        connection.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON").map_err(into_sqlx)?;
        connection.set_prepared_statement_cache_capacity(PREPARED_STATEMENTS);
        Ok(Self { connection })
    }

    /// Runs SQL without arguments (`BEGIN IMMEDIATE`, `COMMIT`, savepoints), one or more statements, each prepared
    /// once per connection: every write that joins a batch opens and releases a savepoint, and parsing them again
    /// each time was a few percent of the writer's work.
    pub(crate) fn execute(&mut self, sql: &str) -> Result<(), sqlx::Error> {
        for statement in statements(sql) {
            self.connection
                .prepare_cached(statement)
                .and_then(|mut prepared| prepared.raw_execute())
                .map_err(into_sqlx)?;
        }
        Ok(())
    }

    /// Whether a transaction is open.
    pub(crate) fn in_transaction(&self) -> bool {
        !self.connection.is_autocommit()
    }

    /// Runs the data changes of `statements` (`INSERT`, `UPDATE` or `DELETE` statements, each reading
    /// the `$N` it names from `arguments`, as sqlx binds them) in turn, until one changes no row. Returns, for each
    /// statement that changed rows, the rowid the connection inserted last (an insert's own; an update leaves the
    /// one before), so `[]` when the first changed nothing.
    ///
    /// The ids come from `last_insert_rowid`, not from `RETURNING`: SQLite buffers a `RETURNING` statement's rows
    /// in a temporary b-tree it builds and drops for each run (and an `INSERT ... SELECT` into a table with
    /// triggers, a second), work that serves nothing when the ids are known from the rowids (docs/decisions.md,
    /// "SQLite's hot writes build no temporary b-trees").
    pub(crate) fn inserted_rowids(
        &mut self,
        statements: &Statements,
        arguments: &DirectArguments<'_>,
    ) -> Result<Vec<i64>, sqlx::Error> {
        if let Some(err) = &arguments.error {
            return Err(sqlx::Error::Encode(err.to_string().into()));
        }
        let mut rowids = Vec::new();
        for statement in &statements.0 {
            let mut prepared = self.connection.prepare_cached(statement).map_err(into_sqlx)?;
            for index in 1..=prepared.parameter_count() {
                let value = match prepared.parameter_name(index).and_then(|name| name.strip_prefix('$')) {
                    Some(number) => {
                        let number: usize = number.parse().map_err(|_| {
                            sqlx::Error::Protocol(format!("a parameter named ${number} is not a number"))
                        })?;
                        arguments.values.get(number.wrapping_sub(1))
                    }
                    None => return Err(sqlx::Error::Protocol("a statement has a parameter not written $N".into())),
                };
                // SQLite reads an argument the query was not given as NULL, as sqlx lets it.
                prepared
                    .raw_bind_parameter(index, value.map_or(ToSqlOutput::Borrowed(ValueRef::Null), to_sql))
                    .map_err(into_sqlx)?;
            }
            if prepared.raw_execute().map_err(into_sqlx)? == 0 {
                break;
            }
            rowids.push(self.connection.last_insert_rowid());
        }
        Ok(rowids)
    }
}

/// SQL split into its statements once, for [`DirectConnection::inserted_rowids`]: splitting the hot writes' SQL
/// at every run was a few percent of the writer's work.
pub(crate) struct Statements(Vec<String>);

impl Statements {
    pub(crate) fn new(sql: &str) -> Self {
        Self(statements(sql).map(str::to_owned).collect())
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// The statements of `sql`: split at each `;` outside a quoted string or identifier.
fn statements(sql: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut start, mut quote) = (0, None::<char>);
    for (at, c) in sql.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, ';') => {
                parts.push(&sql[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&sql[start..]);
    parts.into_iter().map(str::trim).filter(|statement| !statement.is_empty())
}

fn to_sql<'a>(value: &'a SqliteArgumentValue<'_>) -> ToSqlOutput<'a> {
    ToSqlOutput::Borrowed(match value {
        SqliteArgumentValue::Null => ValueRef::Null,
        SqliteArgumentValue::Text(text) => ValueRef::Text(text.as_bytes()),
        SqliteArgumentValue::Blob(blob) => ValueRef::Blob(blob),
        SqliteArgumentValue::Double(double) => ValueRef::Real(*double),
        SqliteArgumentValue::Int(int) => ValueRef::Integer(i64::from(*int)),
        SqliteArgumentValue::Int64(int) => ValueRef::Integer(*int),
    })
}

/// A statement's arguments, encoded as sqlx encodes them for SQLite.
#[derive(Default)]
pub(crate) struct DirectArguments<'q> {
    values: Vec<SqliteArgumentValue<'q>>,
    /// The first value that could not be encoded: the statement is not run.
    error: Option<BoxDynError>,
}

impl<'q> DirectArguments<'q> {
    pub(crate) fn add<T: 'q + Encode<'q, Sqlite>>(&mut self, value: T) {
        if self.error.is_some() {
            return;
        }
        let before = self.values.len();
        match value.encode(&mut self.values) {
            Ok(IsNull::Yes) => {
                self.values.truncate(before);
                self.values.push(SqliteArgumentValue::Null);
            }
            Ok(IsNull::No) => {}
            Err(err) => self.error = Some(err),
        }
    }
}

/// An error SQLite reported, as sqlx's `DatabaseError`.
#[derive(Debug)]
struct DirectError {
    extended_code: i32,
    message: String,
}

impl std::fmt::Display for DirectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.extended_code, self.message)
    }
}

impl std::error::Error for DirectError {}

impl DatabaseError for DirectError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(self.extended_code.to_string().into())
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    /// As sqlx's `SqliteError` classifies the same codes.
    fn kind(&self) -> ErrorKind {
        match self.extended_code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => ErrorKind::UniqueViolation,
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

fn into_sqlx(err: rusqlite::Error) -> sqlx::Error {
    match err {
        rusqlite::Error::SqliteFailure(failure, message) => sqlx::Error::Database(Box::new(DirectError {
            extended_code: failure.extended_code,
            message: message.unwrap_or_else(|| failure.to_string()),
        })),
        other => sqlx::Error::Protocol(format!("SQLite: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_at_semicolons_outside_quotes() {
        let sql = "UPDATE t SET a = 'x;y' WHERE b = $1; INSERT INTO \"odd;name\" VALUES ($2) RETURNING id;  ";
        let split: Vec<&str> = statements(sql).collect();
        assert_eq!(split, ["UPDATE t SET a = 'x;y' WHERE b = $1", "INSERT INTO \"odd;name\" VALUES ($2) RETURNING id"]);
    }

    #[test]
    fn values_round_trip_as_sqlx_stores_them_and_errors_keep_their_kind() {
        let path = std::env::temp_dir().join(format!("holdpoint-direct-{}.db", uuid::Uuid::now_v7()));
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, u BLOB, s TEXT UNIQUE, n TEXT, b INTEGER)")
            .unwrap();
        let mut direct = DirectConnection::open(&path, Duration::from_secs(1)).unwrap();
        let id = uuid::Uuid::now_v7();
        let mut arguments = DirectArguments::default();
        arguments.add(id);
        arguments.add("text");
        arguments.add(None::<String>);
        arguments.add(true);
        let sql = Statements::new(
            "INSERT INTO t (u, s, n, b) VALUES ($1, $2, $3, $4); INSERT INTO t (u, s) SELECT $1, $2 || '2'",
        );
        assert_eq!(direct.inserted_rowids(&sql, &arguments).unwrap(), [1, 2]);
        let again = direct.inserted_rowids(&sql, &arguments).unwrap_err();
        assert!(matches!(&again, sqlx::Error::Database(db) if db.is_unique_violation()), "{again}");
        assert!(!direct.in_transaction());

        let row: (Vec<u8>, String, Option<String>, i64) = rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("SELECT u, s, n, b FROM t WHERE id = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .unwrap();
        assert_eq!(row, (id.as_bytes().to_vec(), "text".to_owned(), None, 1));
        drop(direct);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
