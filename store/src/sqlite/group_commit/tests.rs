//! The group commit's tests, each on a database file of its own: writes that queue together share one commit, a
//! failed or dropped write is undone whole without taking its batch with it, a lone failed write frees the writer,
//! a batch whose `COMMIT` fails fails every write of it, inline and direct writes batch as the others do and a
//! write of one kind commits the other kind's batch first, and a runtime shutting down with a batch open stops.

use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};

use super::*;

/// A writer on a fresh database file with a table of names (unique) and one whose rows must name an existing
/// name by the time of `COMMIT` (a deferred foreign key), to make a batch's commit fail.
async fn writer() -> (GroupCommit, SqliteConnections, DatabaseFile) {
    let file = DatabaseFile(std::env::temp_dir().join(format!("holdpoint-group-commit-{}.db", uuid::Uuid::now_v7())));
    let options = SqliteConnectOptions::new()
        .filename(&file.0)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .foreign_keys(true);
    let pool = SqliteConnections::open(options, 1).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE names (name TEXT PRIMARY KEY); \
         CREATE TABLE refs (name TEXT REFERENCES names (name) DEFERRABLE INITIALLY DEFERRED)",
    )
    .execute(&pool)
    .await
    .unwrap();
    (GroupCommit::new(pool.clone()), pool, file)
}

/// A writer whose first write has inserted `a` and holds it, so that the writes spawned next queue for it.
async fn writer_held_by_a_first_write() -> (GroupCommit, SqliteConnections, DatabaseFile, BatchedWrite) {
    let (group, pool, file) = writer().await;
    let mut first = group.begin().await.unwrap();
    insert(&mut first, "a").await.unwrap();
    (group, pool, file, first)
}

/// Removes the database's files when the test ends.
struct DatabaseFile(std::path::PathBuf);

impl Drop for DatabaseFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

async fn insert(write: &mut BatchedWrite, name: &str) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO names (name) VALUES ($1)").bind(name).execute(&mut **write).await.map(|_| ())
}

async fn stored(pool: &SqliteConnections) -> Vec<String> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT name FROM names ORDER BY name").fetch_all(pool).await.unwrap();
    rows.into_iter().map(|(name,)| name).collect()
}

/// Waits until `n` writes queue for the writer behind the one holding it.
async fn until_waiting(group: &GroupCommit, n: usize) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while group.waiting.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the writes queue for the writer");
}

/// Spawns a write that inserts `names` in turn and commits, returning what its commit returned.
fn spawn_write(group: &GroupCommit, names: &[&str]) -> tokio::task::JoinHandle<Result<(), sqlx::Error>> {
    let group = group.clone();
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    tokio::spawn(async move {
        let mut write = group.begin().await?;
        for name in &names {
            insert(&mut write, name).await?;
        }
        write.commit().await
    })
}

/// Spawns a write that inserts `name` and then never ends: it holds the writer until its task is dropped.
/// `inline`: begun with `begin_inline`, its savepoint opened by the insert's own query.
fn spawn_stuck_write(group: &GroupCommit, name: &'static str, inline: bool) -> tokio::task::JoinHandle<()> {
    let group = group.clone();
    tokio::spawn(async move {
        let mut write = if inline { group.begin_inline().await } else { group.begin().await }.unwrap();
        let sql = format!("{}INSERT INTO names (name) VALUES ('{name}')", write.savepoint());
        sqlx::Executor::execute(&mut *write, sql.as_str()).await.unwrap();
        std::future::pending::<()>().await;
    })
}

/// Spawns a write begun inline that inserts `names` with one multi-statement query, releasing its savepoint in
/// that query when `released_in_it`, and commits; returns what it returned.
fn spawn_inline_write(
    group: &GroupCommit,
    names: &[&str],
    released_in_it: bool,
) -> tokio::task::JoinHandle<Result<(), sqlx::Error>> {
    let (group, inserts) = (group.clone(), insert_statements(names));
    tokio::spawn(async move {
        let mut write = group.begin_inline().await?;
        let (open, close) =
            if released_in_it { write.savepoint_released_in_one_query() } else { (write.savepoint(), "") };
        let sql = format!("{open}{inserts}{close}");
        sqlx::Executor::execute(&mut *write, sql.as_str()).await?;
        write.commit().await
    })
}

/// One query that inserts `names` in turn.
fn insert_statements(names: &[&str]) -> String {
    names.iter().map(|name| format!("INSERT INTO names VALUES ('{name}')")).collect::<Vec<_>>().join("; ")
}

/// Spawns a direct write that inserts `names` (one query) and commits, or, `dropped`, is dropped instead.
fn spawn_direct_write(
    group: &GroupCommit,
    names: &[&str],
    dropped: bool,
) -> tokio::task::JoinHandle<Result<(), sqlx::Error>> {
    let (group, inserts) = (group.clone(), insert_statements(names));
    tokio::spawn(async move {
        let mut write = group.begin_direct().await?;
        write.direct_inserted_rowids(&Statements::new(&inserts), &DirectArguments::default())?;
        if dropped {
            return Ok(());
        }
        write.commit().await
    })
}

async fn direct_writer() -> (GroupCommit, SqliteConnections, DatabaseFile) {
    let (group, pool, file) = writer().await;
    let direct = DirectConnection::open(&file.0, Duration::from_secs(5)).unwrap();
    (group.with_direct(direct), pool, file)
}

#[tokio::test]
async fn direct_writes_queued_together_share_one_commit_and_a_failed_or_dropped_one_is_undone_whole() {
    let (group, pool, _file) = direct_writer().await;
    // On this test's one thread, the writes run in turn, each up to its commit, where it lets the others join.
    let writes = [
        spawn_direct_write(&group, &["a"], false),
        spawn_direct_write(&group, &["b", "c"], false),
        // Its second insert repeats a name: neither of its rows is kept.
        spawn_direct_write(&group, &["d", "a"], false),
        spawn_direct_write(&group, &["e"], true),
        spawn_direct_write(&group, &["f"], false),
    ];
    let mut outcomes = Vec::new();
    for write in writes {
        outcomes.push(write.await.unwrap());
    }
    assert!(outcomes[0].is_ok() && outcomes[1].is_ok() && outcomes[4].is_ok(), "{outcomes:?}");
    assert!(matches!(&outcomes[2], Err(sqlx::Error::Database(db)) if db.is_unique_violation()), "{outcomes:?}");
    assert_eq!(stored(&pool).await, ["a", "b", "c", "f"]);
    assert_eq!(group.commits.load(Ordering::SeqCst), 1, "one batch for the writes that queued together");
}

#[tokio::test]
async fn a_direct_write_that_opened_its_batch_and_fails_or_is_dropped_is_undone_whole_and_ends_its_batch() {
    let (group, pool, _file) = direct_writer().await;
    // One after another, each write opens a batch of its own and runs in its transaction, not in a savepoint.
    spawn_direct_write(&group, &["a"], false).await.unwrap().unwrap();
    let failed = spawn_direct_write(&group, &["b", "a"], false).await.unwrap();
    assert!(matches!(&failed, Err(sqlx::Error::Database(db)) if db.is_unique_violation()), "{failed:?}");
    spawn_direct_write(&group, &["c"], true).await.unwrap().unwrap();
    spawn_direct_write(&group, &["d"], false).await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["a", "d"]);
    assert_eq!(group.commits.load(Ordering::SeqCst), 2, "the undone writes' batches ended without a commit");
    // The next write through sqlx finds the database free: no transaction was left open on the direct
    // connection.
    spawn_write(&group, &["e"]).await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["a", "d", "e"]);
}

#[tokio::test]
async fn a_write_through_sqlx_and_a_direct_one_each_commit_the_batch_of_the_other_kind_before_theirs() {
    let (group, pool, _file) = direct_writer().await;
    let mut direct = group.begin_direct().await.unwrap();
    direct
        .direct_inserted_rowids(&Statements::new("INSERT INTO names VALUES ('a')"), &DirectArguments::default())
        .unwrap();
    let through_sqlx = spawn_write(&group, &["b"]);
    until_waiting(&group, 1).await;
    // The write through sqlx joins no direct batch: it commits it, then opens its own.
    direct.commit().await.unwrap();
    through_sqlx.await.unwrap().unwrap();
    assert_eq!(group.commits.load(Ordering::SeqCst), 2);

    let mut through_sqlx = group.begin().await.unwrap();
    insert(&mut through_sqlx, "c").await.unwrap();
    let direct = spawn_direct_write(&group, &["d"], false);
    until_waiting(&group, 1).await;
    through_sqlx.commit().await.unwrap();
    direct.await.unwrap().unwrap();
    assert_eq!(group.commits.load(Ordering::SeqCst), 4);
    assert_eq!(stored(&pool).await, ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn inline_writes_share_the_batch_and_a_failed_one_is_undone_whole() {
    let (group, pool, _file, first) = writer_held_by_a_first_write().await;
    let released = spawn_inline_write(&group, &["b", "c"], true);
    until_waiting(&group, 1).await;
    // Its second insert repeats a name: the query stops there, before its release.
    let failing = spawn_inline_write(&group, &["d", "a"], true);
    until_waiting(&group, 2).await;
    let released_at_commit = spawn_inline_write(&group, &["e"], false);
    until_waiting(&group, 3).await;
    let after = spawn_write(&group, &["f"]);
    until_waiting(&group, 4).await;
    first.commit().await.unwrap();
    released.await.unwrap().unwrap();
    assert!(failing.await.unwrap().is_err(), "the repeated name is refused");
    released_at_commit.await.unwrap().unwrap();
    after.await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["a", "b", "c", "e", "f"], "the failed write's first insert was undone");
    assert_eq!(group.commits.load(Ordering::SeqCst), 1, "the writes committed together");
    // An inline write alone opens a batch and commits it, and one that failed alone leaves nothing.
    spawn_inline_write(&group, &["g"], true).await.unwrap().unwrap();
    assert!(spawn_inline_write(&group, &["h", "g"], true).await.unwrap().is_err());
    spawn_inline_write(&group, &["i"], false).await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["a", "b", "c", "e", "f", "g", "i"]);
}

#[tokio::test]
async fn an_inline_write_dropped_with_its_savepoint_open_is_undone_and_its_batch_still_commits() {
    a_write_dropped_mid_way_is_undone(true).await;
}

#[tokio::test]
async fn writes_that_queue_for_the_writer_share_one_commit_and_each_is_stored() {
    let (group, pool, _file, first) = writer_held_by_a_first_write().await;
    let queued: Vec<_> = ["b", "c", "d", "e"].iter().map(|name| spawn_write(&group, &[name])).collect();
    until_waiting(&group, queued.len()).await;
    first.commit().await.unwrap();
    for write in queued {
        write.await.unwrap().unwrap();
    }
    assert_eq!(stored(&pool).await, ["a", "b", "c", "d", "e"]);
    assert_eq!(group.commits.load(Ordering::SeqCst), 1, "the five writes committed together");
    // A write alone commits by itself, at once.
    spawn_write(&group, &["f"]).await.unwrap().unwrap();
    assert_eq!(group.commits.load(Ordering::SeqCst), 2);
    assert_eq!(stored(&pool).await.len(), 6);
}

#[tokio::test]
async fn a_failed_write_takes_nothing_of_its_batch_with_it_and_leaves_nothing_of_its_own() {
    let (group, pool, _file, first) = writer_held_by_a_first_write().await;
    let before = spawn_write(&group, &["b"]);
    until_waiting(&group, 1).await;
    // Its second insert repeats a name: the write fails after its first insert succeeded.
    let failing = spawn_write(&group, &["c", "a"]);
    until_waiting(&group, 2).await;
    let after = spawn_write(&group, &["d"]);
    until_waiting(&group, 3).await;
    first.commit().await.unwrap();
    before.await.unwrap().unwrap();
    assert!(failing.await.unwrap().is_err(), "the repeated name is refused");
    after.await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["a", "b", "d"], "the failed write's first insert was undone");
    assert_eq!(group.commits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_write_dropped_mid_way_is_undone_and_its_batch_still_commits() {
    a_write_dropped_mid_way_is_undone(false).await;
}

/// A request whose client went away: the handler's future is dropped before it commits (`inline`: a write
/// begun with `begin_inline`, and so is the one after it).
async fn a_write_dropped_mid_way_is_undone(inline: bool) {
    let (group, pool, _file, first) = writer_held_by_a_first_write().await;
    let abandoned = spawn_stuck_write(&group, "b", inline);
    until_waiting(&group, 1).await;
    let after = if inline { spawn_inline_write(&group, &["c"], true) } else { spawn_write(&group, &["c"]) };
    until_waiting(&group, 2).await;
    // The first write's commit waits for its batch, which waits for the abandoned write to let go.
    let first = tokio::spawn(first.commit());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!first.is_finished() && !after.is_finished());
    abandoned.abort();
    first.await.unwrap().unwrap();
    after.await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["a", "c"]);
}

#[tokio::test]
async fn a_lone_write_that_fails_frees_the_writer_for_the_pool() {
    let (group, pool, _file) = writer().await;
    let mut write = group.begin().await.unwrap();
    insert(&mut write, "a").await.unwrap();
    drop(write);
    // Statements outside the batches use the pool's one connection: the undone batch must have returned it.
    tokio::time::timeout(Duration::from_secs(10), sqlx::query("INSERT INTO names VALUES ('b')").execute(&pool))
        .await
        .expect("the writer's connection is back in the pool")
        .unwrap();
    assert_eq!(stored(&pool).await, ["b"]);
}

/// A batch still open when the runtime shuts down (a server stopping under load) is dropped with its tasks;
/// the task that would finish it is dropped too, and must not hand it to yet another task.
#[test]
fn a_runtime_shutting_down_with_a_batch_open_stops() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let file = runtime.block_on(async {
        let (group, _pool, file, first) = writer_held_by_a_first_write().await;
        spawn_stuck_write(&group, "b", false);
        until_waiting(&group, 1).await;
        // Only the runtime's tasks hold the writer now, and its batch cannot finish: it is dropped with them.
        tokio::spawn(first.commit());
        file
    });
    drop(runtime);
    drop(file);
}

/// No write is told it is stored unless its batch's COMMIT succeeded.
#[tokio::test]
async fn when_a_batch_fails_to_commit_every_write_of_it_gets_the_error_and_none_is_stored() {
    let (group, pool, _file, first) = writer_held_by_a_first_write().await;
    // Its savepoint releases fine, but its row names nothing, which the deferred key refuses at COMMIT.
    let dangling = {
        let group = group.clone();
        tokio::spawn(async move {
            let mut write = group.begin().await?;
            sqlx::query("INSERT INTO refs VALUES ('nobody')").execute(&mut *write).await?;
            write.commit().await
        })
    };
    until_waiting(&group, 1).await;
    let after = spawn_write(&group, &["c"]);
    until_waiting(&group, 2).await;
    assert!(first.commit().await.is_err());
    assert!(dangling.await.unwrap().is_err());
    assert!(after.await.unwrap().is_err());
    assert!(stored(&pool).await.is_empty());
    assert_eq!(group.commits.load(Ordering::SeqCst), 0);
    // The writer recovers: the next write commits.
    spawn_write(&group, &["d"]).await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["d"]);
}

#[tokio::test]
async fn when_a_direct_batch_fails_to_commit_every_write_of_it_gets_the_error_and_none_is_stored() {
    let (group, pool, _file) = direct_writer().await;
    let writes = [
        spawn_direct_write(&group, &["a"], false),
        // Its row names nothing, which the deferred key refuses at COMMIT.
        {
            let group = group.clone();
            tokio::spawn(async move {
                let mut write = group.begin_direct().await?;
                write.direct_inserted_rowids(
                    &Statements::new("INSERT INTO refs VALUES ('nobody')"),
                    &DirectArguments::default(),
                )?;
                write.commit().await
            })
        },
        spawn_direct_write(&group, &["b"], false),
    ];
    for write in writes {
        assert!(write.await.unwrap().is_err());
    }
    assert!(stored(&pool).await.is_empty());
    assert_eq!(group.commits.load(Ordering::SeqCst), 0);
    // The direct connection is out of its failed transaction, and the writer goes on, either kind of write.
    spawn_direct_write(&group, &["c"], false).await.unwrap().unwrap();
    spawn_write(&group, &["d"]).await.unwrap().unwrap();
    assert_eq!(stored(&pool).await, ["c", "d"]);
}
