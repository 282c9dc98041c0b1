//! `holdpoint backup` and `holdpoint restore`: a consistent copy of the embedded SQLite database, taken while the
//! server runs, and putting one back into an empty data directory.
//!
//! The copy is SQLite's `VACUUM INTO`: one read transaction, so it holds exactly what was committed when it began
//! (every answer acknowledged before the backup started, none half-written), while the server goes on writing
//! through WAL. It is written beside the target under a temporary name and renamed when complete and checked, so
//! a backup file that exists is a whole one, readable by its owner only (it holds the webhooks' secrets). PostgreSQL
//! has its own tool for this, `pg_dump`.
//!
//! The database is the backup; what the data directory holds beside it (uploaded files kept there rather than in a
//! bucket, scripts) is copied as files, and `backup` names what it found there.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Row, SqliteConnection};

use crate::config::DatabaseLocation;

/// What a finished backup or restore reports.
#[derive(Debug)]
pub struct Copied {
    pub file: PathBuf,
    pub bytes: u64,
    pub questions: i64,
    /// The directories beside the database that hold something and are not in the copy.
    pub left_beside: Vec<PathBuf>,
}

/// What the data directory may hold beside the database: uploaded files (unless they are kept in a bucket) and
/// the scripts of `script:` agents.
const BESIDE_THE_DATABASE: [&str; 2] = ["files", "scripts"];

/// Copies the live SQLite database named by `location` to `to`, which must not exist yet.
pub async fn backup(location: &DatabaseLocation, to: &Path) -> Result<Copied, String> {
    let source = sqlite_file(location, "backup")?;
    if !source.is_file() {
        return Err(format!("there is no database at {}: nothing to back up", source.display()));
    }
    super::say_database(&std::path::absolute(&source).unwrap_or_else(|_| source.clone()).display().to_string());
    if to.exists() {
        return Err(format!("{} exists already: a backup never overwrites a file", to.display()));
    }
    let partial = partial_name(to);
    let _ = std::fs::remove_file(&partial);
    let mut connection = open(&source, false).await?;
    let copied = sqlx::query("VACUUM INTO ?")
        .bind(partial.display().to_string())
        .execute(&mut connection)
        .await
        .map_err(|e| format!("cannot copy {} to {}: {e}", source.display(), partial.display()));
    let _ = connection.close().await;
    if let Err(error) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(error);
    }
    let checked = match owner_only(&partial) {
        Ok(()) => check(&partial).await,
        Err(error) => Err(error),
    };
    match checked {
        Ok(questions) => {
            std::fs::rename(&partial, to).map_err(|e| format!("cannot name the backup {}: {e}", to.display()))?;
            let directory = source.parent().unwrap_or(Path::new("."));
            let left_beside = BESIDE_THE_DATABASE
                .iter()
                .map(|name| directory.join(name))
                .filter(|dir| std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()))
                .collect();
            Ok(Copied { file: to.to_owned(), bytes: file_size(to), questions, left_beside })
        }
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            Err(error)
        }
    }
}

/// Puts the backup `from` in place as the database named by `location`, which must not exist yet.
pub async fn restore(location: &DatabaseLocation, from: &Path) -> Result<Copied, String> {
    let target = sqlite_file(location, "restore")?;
    if !from.is_file() {
        return Err(format!("there is no backup at {}", from.display()));
    }
    for existing in [target.clone(), sidecar(&target, "-wal"), sidecar(&target, "-shm")] {
        if existing.exists() {
            return Err(format!(
                "{} exists: restore only into an empty data directory (move the old database away first)",
                existing.display()
            ));
        }
    }
    super::say_database(&std::path::absolute(&target).unwrap_or_else(|_| target.clone()).display().to_string());
    let questions = check(from).await?;
    let directory = target.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(directory).map_err(|e| format!("cannot create {}: {e}", directory.display()))?;
    let partial = partial_name(&target);
    let placed = std::fs::copy(from, &partial)
        .map_err(|e| format!("cannot copy {}: {e}", from.display()))
        .and_then(|_| owner_only(&partial))
        .and_then(|()| owned_as(&partial, directory))
        .and_then(|()| {
            std::fs::rename(&partial, &target).map_err(|e| format!("cannot name {}: {e}", target.display()))
        });
    if let Err(error) = placed {
        let _ = std::fs::remove_file(&partial);
        return Err(error);
    }
    Ok(Copied { file: target.clone(), bytes: file_size(&target), questions, left_beside: Vec::new() })
}

/// Makes `file` readable and writable by its owner only: a database holds the webhooks' and the callbacks' secrets.
fn owner_only(file: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot make {} private: {e}", file.display()))
}

/// Gives `file` the owner and group of `directory`: a restore run as root into the service's data directory leaves
/// a database the service's own user may open, not one only root may write.
fn owned_as(file: &Path, directory: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let wanted = std::fs::metadata(directory).map_err(|e| format!("cannot read {}: {e}", directory.display()))?;
    let current = std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if (wanted.uid(), wanted.gid()) == (current.uid(), current.gid()) {
        return Ok(());
    }
    std::os::unix::fs::chown(file, Some(wanted.uid()), Some(wanted.gid())).map_err(|e| {
        format!(
            "cannot give {} the owner of {} (run the restore as that user, or as root): {e}",
            file.display(),
            directory.display()
        )
    })
}

/// The SQLite file of `location`; PostgreSQL is refused with what to use instead.
fn sqlite_file(location: &DatabaseLocation, verb: &str) -> Result<PathBuf, String> {
    let url = location.url();
    if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        return Err(format!(
            "holdpoint {verb} works on the embedded SQLite database; for PostgreSQL use its own tools: \
             `pg_dump --format=custom --file=holdpoint.dump \"$DATABASE_URL\"` and `pg_restore`"
        ));
    }
    let options = SqliteConnectOptions::from_str(&url).map_err(|e| format!("not a SQLite database URL: {e}"))?;
    Ok(options.get_filename().to_owned())
}

/// A connection of its own to `file`; never creates one.
async fn open(file: &Path, read_only: bool) -> Result<SqliteConnection, String> {
    SqliteConnectOptions::new()
        .filename(file)
        .create_if_missing(false)
        .read_only(read_only)
        // The journal mode is left as the file has it: the server's WAL, or a copy's own.
        .busy_timeout(std::time::Duration::from_secs(30))
        .connect()
        .await
        .map_err(|e| format!("cannot open {}: {e}", file.display()))
}

/// That `file` is an intact Holdpoint database of a version this binary knows; its number of questions.
async fn check(file: &Path) -> Result<i64, String> {
    let mut connection = open(file, true).await?;
    let outcome = async {
        let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(&mut connection)
            .await
            .map_err(|e| format!("{} is not a SQLite database: {e}", file.display()))?;
        if integrity != "ok" {
            return Err(format!("{} is damaged: {integrity}", file.display()));
        }
        let applied = sqlx::query("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(&mut connection)
            .await
            .map_err(|_| format!("{} is not a Holdpoint database (it has no migrations)", file.display()))?;
        let known: Vec<i64> = sqlx::migrate!("../migrations/sqlite").iter().map(|m| m.version).collect();
        if let Some(newer) = applied.iter().map(|row| row.get::<i64, _>(0)).find(|version| !known.contains(version)) {
            return Err(format!(
                "{} was written by a newer Holdpoint (migration {newer}); restore it with that version",
                file.display()
            ));
        }
        sqlx::query_scalar("SELECT count(*) FROM questions")
            .fetch_one(&mut connection)
            .await
            .map_err(|e| format!("cannot read {}: {e}", file.display()))
    }
    .await;
    let _ = connection.close().await;
    outcome
}

fn partial_name(file: &Path) -> PathBuf {
    sidecar(file, ".partial")
}

fn sidecar(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn file_size(file: &Path) -> u64 {
    std::fs::metadata(file).map(|m| m.len()).unwrap_or(0)
}
