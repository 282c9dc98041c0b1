//! Persistence: one [`Store`] trait with a SQLite and a PostgreSQL implementation, chosen by the URL scheme.
//!
//! Each domain area (questions, runs, people, outbox, escalation, grants, webhooks, rules, upstreams, files) is written
//! once, generic over [`backend::SqlBackend`], which holds what the two databases do differently: opening and
//! committing a write, appending events and audit entries, the dialect's few words, and the entry points of each
//! backend's own hot paths (`sqlite`, `postgres`). Every state change appends its event to the log in the same transaction, and every commit that
//! appended events announces the newest event id on a watch channel, which the event hub follows.

mod audit_rows;
mod backend;
mod escalation;
mod files;
mod gateway_holds;
mod grants;
mod idempotency;
mod outbox;
mod people;
mod people_rows;
mod postgres;
mod questions;
mod rows;
mod rules;
mod run_rows;
mod run_steps;
mod runs;
mod sql;
mod sqlite;
#[cfg(test)]
mod test_postgres;
mod token_cache;
mod upstreams;
mod webhooks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Connection;
use sqlx::pool::PoolOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use tokio::sync::watch;
use uuid::Uuid;

pub use audit_rows::*;
pub use escalation::{EscalationPolicyRow, EscalationStore, EscalationTransition};
pub use files::{FileClaim, FileRow, FileStore};
pub use gateway_holds::{GatewayHoldRow, GatewayHoldStore, HOLD_ENDED, HOLD_LAPSED};
pub use grants::{GrantRow, GrantStore};
pub use outbox::{
    AnsweredByGrant, AskedWith, ChannelSummary, DeliveryRow, ListedDelivery, ListedNotification, NotificationQuery,
    NotificationRow, OutboxStore, PushSubscriptionRow, Reach,
};
pub use people::*;
pub use people_rows::*;
use postgres::PostgresStore;
pub use rows::*;
pub use rules::{RulesRow, RulesStore};
pub use run_rows::*;
pub use runs::{CascadeRecords, POLICY_DECIDER, RunStore};
use sqlite::SqliteConnections;
use sqlite::SqliteStore;
/// A value stored as JSON (the rows' JSON columns), as the use cases build them.
pub use sqlx::types::Json;
use token_cache::TTL as TOKEN_CACHE_TTL;
pub use upstreams::{UpstreamRow, UpstreamStore};
pub use webhooks::{CallbackSecretRow, QueueKey, WebhookDeliveryRow, WebhookRow, WebhookStore};

/// What can go wrong below the HTTP layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("{}", migration_failure(.0))]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use sqlite:... or postgres://...")]
    UnsupportedUrl(String),
    #[error("stored data is not readable: {0}")]
    Corrupt(String),
    #[error("the Idempotency-Key was already used with a different request")]
    IdempotencyMismatch {
        /// What the first request with the key created.
        resource_id: Uuid,
    },
    #[error("another {0} already exists")]
    Duplicate(&'static str),
    #[error("cannot open the SQLite database {file}: the directory {directory} does not exist")]
    NoSqliteDirectory { file: String, directory: String },
    /// The SQLite writer's own thread (see `sqlite::WriterThread`) could not start, or a write on it ended without an
    /// outcome (it panicked, or the store was shutting down).
    #[error("the SQLite writer's thread: {0}")]
    WriterThread(String),
    /// A PostgreSQL write batched with others (see `postgres::write_batch`) got no connection, the store was shutting
    /// down, or its batch's statement got no answer (it may be stored).
    #[error("a batched write: {0}")]
    BatchedWrite(String),
    /// The worker no longer holds the run: its lease ran out and another took over, or the run was cancelled.
    #[error("the run is no longer held by this worker")]
    LeaseLost,
    /// The server keeping a run its client executes (see `runtime::remote`) could not be reached, or its reply
    /// could not be read.
    #[error("the server is unreachable: {0}")]
    Unreachable(String),
    /// The grant a new question was to be answered by was revoked or ran out before the question's write.
    #[error("the grant is no longer live")]
    GrantNotLive,
    /// A file an answer references could not be taken by its question in the answer's write: it is gone, another
    /// question took it, or someone else uploaded it. Nothing of the write is stored.
    #[error("the file {0} is not available to this answer")]
    FileUnavailable(Uuid),
    /// The server keeping a run its client executes refused an operation of the worker protocol.
    #[error("the server refused a worker call ({status}): {message}")]
    Refused { status: u16, message: String },
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The outcome of a transition out of `pending` that changed nothing: someone was first, or there is no such question.
async fn not_resolved<S: Store + ?Sized>(store: &S, workspace_id: Uuid, id: Uuid) -> StoreResult<ResolveOutcome> {
    Ok(match store.question(workspace_id, id).await? {
        Some(current) => ResolveOutcome::NotPending(current),
        None => ResolveOutcome::NotFound,
    })
}

/// The current time at the precision both databases keep (microseconds), so a value read back equals the one
/// written.
pub fn now() -> DateTime<Utc> {
    use chrono::SubsecRound;
    Utc::now().trunc_subsecs(6)
}

/// Workspace names by id, as this store has read them. A workspace row is never renamed or deleted and its id (a
/// v7 UUID) is never reused, so a name once read stays true; knowing it spares a read in every transaction that
/// writes an event carrying a question (the hot path of a cycle).
#[derive(Debug, Default)]
pub(crate) struct WorkspaceNames(std::sync::RwLock<std::collections::HashMap<Uuid, String>>);

impl WorkspaceNames {
    pub(crate) fn get(&self, id: Uuid) -> Option<String> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&id).cloned()
    }

    pub(crate) fn remember(&self, id: Uuid, name: &str) {
        self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id, name.to_owned());
    }
}

/// What a store keeps in memory of each workspace, whichever database it stores in.
#[derive(Debug, Default)]
pub(crate) struct Caches {
    /// The names of the workspaces this store has read.
    pub(crate) workspace_names: WorkspaceNames,
    /// Each workspace's escalation policies, as last read.
    pub(crate) escalation_policies: ReadCache<Vec<EscalationPolicyRow>>,
    /// Each workspace's members with a subscribed browser, as last read.
    pub(crate) push_subscribers: ReadCache<Vec<Uuid>>,
    /// Each workspace's webhook subscriptions, as last read.
    pub(crate) webhooks: ReadCache<Vec<WebhookRow>>,
    /// Each workspace's upstreams of the MCP gateway, as last read.
    pub(crate) upstreams: ReadCache<Vec<UpstreamRow>>,
}

/// How long what a [`ReadCache`] read is trusted without reading it again.
const READ_CACHE_TTL: Duration = Duration::from_secs(1);

/// What this store last read of each workspace, for data every question asked needs and that changes rarely (its
/// escalation policies, who subscribed browsers to pushes): read about once a second per workspace instead of once
/// per question. A change made through this store is forgotten at once; one made on another instance is seen within
/// [`READ_CACHE_TTL`].
#[derive(Debug)]
pub struct ReadCache<T>(std::sync::Mutex<std::collections::HashMap<Uuid, (std::time::Instant, Arc<T>)>>);

impl<T> Default for ReadCache<T> {
    fn default() -> Self {
        ReadCache(std::sync::Mutex::default())
    }
}

impl<T> ReadCache<T> {
    fn entries(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Uuid, (std::time::Instant, Arc<T>)>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What was read of the workspace, if within the TTL.
    pub(crate) fn fresh(&self, workspace_id: Uuid) -> Option<Arc<T>> {
        let entries = self.entries();
        let (read_at, value) = entries.get(&workspace_id)?;
        (read_at.elapsed() < READ_CACHE_TTL).then(|| Arc::clone(value))
    }

    pub(crate) fn remember(&self, workspace_id: Uuid, value: T) -> Arc<T> {
        let value = Arc::new(value);
        self.entries().insert(workspace_id, (std::time::Instant::now(), Arc::clone(&value)));
        value
    }

    pub(crate) fn forget(&self, workspace_id: Uuid) {
        self.entries().remove(&workspace_id);
    }
}

/// The audit chain head each workspace had after this store's last append to it, by workspace id: `(seq, hash)`.
/// Only a guess: the SQLite store appends on the strength of it with a statement that checks it against the
/// stored head, and claims the head as before when it is wrong (another process wrote, or the append was rolled
/// back), so a stale entry costs a statement and never a wrong link.
#[derive(Debug, Default)]
pub(crate) struct AuditHeads(std::sync::Mutex<std::collections::HashMap<Uuid, (i64, String)>>);

impl AuditHeads {
    pub(crate) fn guess(&self, workspace_id: Uuid) -> Option<(i64, String)> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&workspace_id).cloned()
    }

    pub(crate) fn remember(&self, workspace_id: Uuid, seq: i64, hash: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(workspace_id, (seq, hash.to_owned()));
    }
}

/// What a store tells the event hub after a commit that appended events.
#[derive(Debug, Clone, Default)]
pub struct Committed {
    /// The id of the newest event known to be committed.
    pub last: i64,
    /// The newest id whose commit did not hand its events over: the hub reads up to here from the log (a commit of
    /// several events, or one another instance made).
    pub read_through: i64,
    /// Events their commits handed over (SQLite, where an event's id is final at its insert), which the hub passes
    /// on without reading them back from the log. Shared by every value of the channel.
    pub handed_over: Arc<HandedOver>,
}

/// The newest events commits handed over, by id. Commits finish in any order, so the hub takes from here the run
/// that follows the last event it sent, and waits a moment for a missing one before it reads the log.
#[derive(Debug, Default)]
pub struct HandedOver(std::sync::Mutex<std::collections::BTreeMap<i64, Arc<HubEvent>>>);

impl HandedOver {
    /// How many are kept: a hub further behind than this reads the log.
    const KEPT: usize = 256;

    /// Keeps a committed event for the hub, dropping the oldest beyond [`Self::KEPT`].
    pub fn insert(&self, event: HubEvent) {
        let mut events = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        events.insert(event.id, Arc::new(event));
        while events.len() > Self::KEPT {
            events.pop_first();
        }
    }

    /// The events with ids `after + 1`, `after + 2`, ... as far as they run without a gap.
    pub fn following(&self, after: i64) -> Vec<Arc<HubEvent>> {
        let events = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        events
            .range(after + 1..)
            .zip(after + 1..)
            .take_while(|((id, _), next)| *id == next)
            .map(|((_, event), _)| Arc::clone(event))
            .collect()
    }

    /// The event with this id, if its commit handed it over and it is still kept.
    pub fn get(&self, id: i64) -> Option<Arc<HubEvent>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&id).cloned()
    }
}

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Everything Holdpoint keeps. Methods that change state append their events in the same transaction.
#[async_trait]
pub trait Store:
    RunStore
    + PeopleStore
    + OutboxStore
    + EscalationStore
    + WebhookStore
    + GrantStore
    + RulesStore
    + UpstreamStore
    + FileStore
    + GatewayHoldStore
    + Send
    + Sync
    + 'static
{
    fn backend(&self) -> Backend;

    /// The newest event known to be committed; changes after every commit that appended events.
    fn committed_events(&self) -> watch::Receiver<Committed>;

    /// Succeeds when the database answers.
    async fn ping(&self) -> StoreResult<()>;

    /// The workspace with this name, created if it does not exist.
    async fn ensure_workspace(&self, name: &str) -> StoreResult<WorkspaceRow>;

    /// The server secret named `name`: the one stored, or, when none is, `generated`, stored first. Of instances
    /// that start at once, the first insert wins and every instance returns what it stored, so all share one value.
    async fn server_secret(&self, name: &str, generated: &str) -> StoreResult<String>;

    /// Stores a token and the audit entry recording it, in one transaction; `false`, and nothing stored, if a token
    /// with the same secret already exists (a restart with the same bootstrap token).
    async fn insert_token(&self, token: &TokenRow, audit: &NewAuditEntry) -> StoreResult<bool>;

    /// The live (not revoked) token whose secret hashes to `secret_hash`.
    async fn principal_by_token_hash(&self, secret_hash: &[u8]) -> StoreResult<Option<Principal>>;

    async fn insert_session(&self, session: &SessionRow) -> StoreResult<()>;

    /// The session with this id hash if it has not expired and its token is live, with its CSRF token.
    async fn session_by_hash(&self, id_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<(Principal, String)>>;

    async fn delete_session(&self, id_hash: &[u8]) -> StoreResult<()>;

    /// Inserts a question and its `question_asked` event, the transitions out of `pending` it makes of the questions
    /// it supersedes (those still pending), and the notifications and deliveries of who it reaches, all in one
    /// transaction. With an idempotency key that was seen before, returns the question created then instead (and
    /// writes nothing).
    async fn create_question(
        &self,
        question: &QuestionRow,
        event: &NewEvent,
        idempotency: Option<&IdempotencyKey>,
        with: &AskedWith,
    ) -> StoreResult<Created<QuestionRow>>;

    async fn question(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>>;

    /// One page of questions, in the filter's order, starting after its cursor.
    async fn list_questions(&self, workspace_id: Uuid, filter: &QuestionFilter) -> StoreResult<Vec<QuestionRow>>;

    /// The same page as [`Store::list_questions`], reading only what a list of questions shows.
    async fn list_question_summaries(
        &self,
        workspace_id: Uuid,
        filter: &QuestionFilter,
    ) -> StoreResult<Vec<QuestionSummaryRow>>;

    /// How many questions match the filter's conditions, counting no further than its `limit`.
    async fn count_questions(&self, workspace_id: Uuid, filter: &QuestionFilter) -> StoreResult<u32>;

    /// Writes a question's transition out of `pending` (its row, event and audit entry) in one transaction, if the
    /// question is still pending: only one caller can ever win, the update being conditional on its status. In the
    /// same transaction, a run that this question was the last to hold goes back to the queue.
    async fn resolve_question(&self, transition: QuestionTransition) -> StoreResult<ResolveOutcome>;

    /// Writes a pending question's change with what records it (its event and audit entry, or the transition out
    /// of `pending` it completes, with the requeue of its run as [`Store::resolve_question`] does) in one
    /// transaction; `false`, and nothing written, if the question left `pending` or took another change first.
    async fn change_pending_question(&self, change: &PendingQuestionChange) -> StoreResult<bool>;

    /// Pending questions whose deadline is at or before `now`, soonest first.
    async fn overdue_questions(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<QuestionRow>>;

    /// How many questions are pending, by kind.
    async fn pending_counts(&self) -> StoreResult<Vec<(String, i64)>>;

    /// The soonest deadline of any pending question.
    async fn next_deadline(&self) -> StoreResult<Option<DateTime<Utc>>>;

    /// Events with ids above `after`, oldest first, across all workspaces (the hub filters).
    async fn events_after(&self, after: i64, limit: i64) -> StoreResult<Vec<EventRow>>;
    /// One workspace's events with ids above `after`, oldest first: what a stream replays.
    async fn workspace_events_after(&self, workspace_id: Uuid, after: i64, limit: i64) -> StoreResult<Vec<EventRow>>;

    /// The id of the newest event, or 0.
    async fn last_event_id(&self) -> StoreResult<i64>;

    /// Appends an entry to its workspace's audit chain, in a transaction of its own. For actions whose change is
    /// not a store transaction of its own (a sign-in); changes the store makes append inside their transaction.
    async fn append_audit(&self, entry: &NewAuditEntry) -> StoreResult<AuditRow>;

    /// One page of a workspace's audit log, newest first.
    async fn list_audit(&self, workspace_id: Uuid, query: &AuditQuery) -> StoreResult<Vec<AuditRow>>;

    /// Every workspace that has an audit chain, with where its head row says the chain ends.
    async fn audit_heads(&self) -> StoreResult<Vec<AuditHead>>;

    /// A workspace's audit entries with `seq` above `after_seq`, oldest first (for verification).
    async fn audit_chain(&self, workspace_id: Uuid, after_seq: i64, limit: u32) -> StoreResult<Vec<AuditRow>>;
}

/// A connection that sat in the pool longer than this is pinged before it is handed out.
pub(crate) const PING_AFTER_IDLE: Duration = Duration::from_secs(10);

/// PostgreSQL's pool settings (SQLite's connections are not pooled by sqlx: see `sqlite::connections`): sqlx pings
/// each connection on every acquire by default, which adds a round trip to every statement run outside a
/// transaction. A connection that was in use moments ago is known to be alive; only one that sat idle is checked
/// (a dead one is replaced by a fresh connection within the same acquire).
fn pool_options() -> PoolOptions<sqlx::Postgres> {
    PoolOptions::new().test_before_acquire(false).before_acquire(|connection: &mut sqlx::PgConnection, meta| {
        Box::pin(async move {
            if meta.idle_for >= PING_AFTER_IDLE {
                connection.ping().await?;
            }
            Ok(true)
        })
    })
}

/// What Holdpoint's PostgreSQL sessions set, unless the database URL's `options` names the setting itself.
///
/// `max_parallel_workers_per_gather = 0`: every query Holdpoint runs reads a page, or a row, through an index and
/// stops, so launching parallel workers costs more than it saves (docs/decisions.md, "No parallel query on
/// PostgreSQL"; measured in docs/benchmarks.md under the same title).
const POSTGRES_SESSION_SETTINGS: &[(&str, &str)] = &[("max_parallel_workers_per_gather", "0")];

/// The connection options for `url`, with [`POSTGRES_SESSION_SETTINGS`] sent in the startup packet (no round
/// trip, and they hold for the session's life).
fn postgres_options(url: &str) -> StoreResult<PgConnectOptions> {
    let options = PgConnectOptions::from_str(url)?;
    let named_in_url = options.get_options().unwrap_or_default().to_owned();
    let ours: Vec<_> =
        POSTGRES_SESSION_SETTINGS.iter().filter(|(name, _)| !named_in_url.contains(name)).copied().collect();
    Ok(if ours.is_empty() { options } else { options.options(ours) })
}

/// How a store uses its database, beyond where it is.
#[derive(Debug, Clone, Copy)]
pub struct StoreSettings {
    /// How long tokens seen valid are trusted without a database read (see `token_cache`; zero reads every time).
    pub token_cache: Duration,
    /// The most connections the store opens to PostgreSQL (the event listener's comes on top). SQLite has its own
    /// fixed pools: one writer, eight readers.
    pub postgres_connections: u32,
}

impl StoreSettings {
    /// What `holdpoint serve` uses unless told otherwise, and what the CLI's short-lived stores use.
    pub fn defaults() -> Self {
        Self { token_cache: TOKEN_CACHE_TTL, postgres_connections: default_postgres_connections() }
    }
}

/// Four connections per CPU core, at least eight: statements wait on the network and the disk as well as on the
/// CPU, so a few per core keep the cores busy, while more only add backends that compete for the same cores
/// (docs/decisions.md, "Connections to PostgreSQL").
pub fn default_postgres_connections() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    u32::try_from(cores * 4).unwrap_or(u32::MAX).max(8)
}

/// The page size of a new SQLite database. Each commit appends every page it changed to the WAL, whole, and a HITL
/// cycle changes a few dozen (the question's row and its nine indexes, two events, an audit entry and the chain's
/// head), each by a few hundred bytes, so a page smaller than SQLite's default of 4 096 bytes means less for every
/// cycle to write and flush (docs/benchmarks.md has the figures). 1 024 is no faster and would
/// push an index entry of a project name in non-Latin script (100 characters, up to 400 bytes) off its page. An
/// existing database keeps the size it was made with: in WAL mode the pragma changes nothing.
const SQLITE_PAGE_SIZE: u32 = 2048;

/// Opens the database named by `url` (`sqlite:...` or `postgres://...`) and brings its schema up to date.
pub async fn connect(url: &str) -> StoreResult<Arc<dyn Store>> {
    connect_with(url, StoreSettings::defaults()).await
}

/// Whether [`connect`] opens databases of this URL's kind: `sqlite:` or `postgres:` (`postgresql:`).
pub fn is_supported_url(url: &str) -> bool {
    ["sqlite:", "postgres:", "postgresql:"].iter().any(|scheme| url.starts_with(scheme))
}

/// [`connect`] with settings of the caller's.
pub async fn connect_with(url: &str, settings: StoreSettings) -> StoreResult<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(connect_sqlite(url, settings).await?))
    } else if is_supported_url(url) {
        Ok(Arc::new(connect_postgres(url, settings).await?))
    } else {
        Err(StoreError::UnsupportedUrl(redacted_url(url)))
    }
}

/// The PostgreSQL store [`connect_with`] opens, as its own type.
async fn connect_postgres(url: &str, settings: StoreSettings) -> StoreResult<PostgresStore> {
    let options = postgres_options(url)?;
    let pool = pool_options()
        .max_connections(settings.postgres_connections.max(1))
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await?;
    sqlx::migrate!("../migrations/postgres").run(&pool).await?;
    PostgresStore::new(pool, settings.token_cache).await
}

/// Whether the PostgreSQL database at `url` holds Holdpoint's tables (the record of its migrations), read without
/// creating anything: the administrative commands refuse one that does not, so a mistyped URL gets no schema.
pub async fn postgres_holds_a_schema(url: &str) -> StoreResult<bool> {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect_with(&postgres_options(url)?).await?;
    let (found,): (bool,) =
        sqlx::query_as("SELECT to_regclass('_sqlx_migrations') IS NOT NULL").fetch_one(&mut connection).await?;
    connection.close().await?;
    Ok(found)
}

/// What a failed migration says: a database a newer version migrated is named as such, with what to do.
fn migration_failure(error: &sqlx::migrate::MigrateError) -> String {
    match error {
        sqlx::migrate::MigrateError::VersionMissing(version) => format!(
            "the database was migrated by a newer version of Holdpoint (its migration {version} is unknown to this \
             one): run that version or a later one, or restore the backup taken before the upgrade"
        ),
        other => format!("migration failed: {other}"),
    }
}

/// `url` with the password of its user info (`postgres://user:secret@host`) and of a `password=` parameter replaced
/// by `[redacted]`, for logs and error messages.
pub fn redacted_url(url: &str) -> String {
    const REDACTED: &str = "[redacted]";
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let authority_start = scheme_end + 3;
        let authority_end = out[authority_start..].find(['/', '?', '#']).map_or(out.len(), |at| authority_start + at);
        if let Some(at) = out[authority_start..authority_end].rfind('@')
            && let Some(colon) = out[authority_start..authority_start + at].find(':')
        {
            out.replace_range(authority_start + colon + 1..authority_start + at, REDACTED);
        }
    }
    if let Some(query_start) = out.find('?') {
        let (head, query) = out.split_at(query_start + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}={REDACTED}"),
                _ => pair.to_owned(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

/// How long a SQLite connection waits for another process's write lock before it fails.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a SQLite connection's filename names an in-memory database (sqlx names those `file:...`), not a file.
fn in_memory(filename: &std::path::Path) -> bool {
    filename.to_string_lossy().starts_with("file:") || filename.as_os_str() == ":memory:"
}

/// The SQLite store [`connect_with`] opens, as its own type.
async fn connect_sqlite(url: &str, settings: StoreSettings) -> StoreResult<SqliteStore> {
    let options = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // FULL: a question or an answer acknowledged to a client survives a power cut.
        .synchronous(SqliteSynchronous::Full)
        .page_size(SQLITE_PAGE_SIZE)
        .foreign_keys(true)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
        // The text search's matcher (see `SqlBackend::push_text_match` on SQLite).
        .with_regexp();
    // SQLite creates the file but not its directory, and says only "unable to open database file".
    if let Some(directory) = options.get_filename().parent().filter(|dir| !dir.as_os_str().is_empty())
        && !in_memory(options.get_filename())
        && !directory.is_dir()
    {
        return Err(StoreError::NoSqliteDirectory {
            file: options.get_filename().display().to_string(),
            directory: directory.display().to_string(),
        });
    }
    // One writer connection: SQLite serialises writers anyway, and queueing them here instead of in the busy
    // handler keeps latency flat. Readers run in parallel thanks to WAL.
    let write = SqliteConnections::open(options.clone(), 1).await?;
    sqlx::migrate!("../migrations/sqlite").run(&mut *write.acquire().await?).await?;
    // sqlx hands each row from the connection's thread to the reader through a channel of 50 by default; a
    // reader that decodes slower than SQLite steps (JSON columns) then wakes that thread for every row. Every
    // read is collected whole (`fetch_all`), so a deeper channel costs no memory the result would not: a
    // 500-message conversation loads in 3.2 ms instead of 5.
    let read_options = options.clone().read_only(true).row_buffer_size(1024);
    let read = SqliteConnections::open(read_options, 8).await?;
    // The hot writes' connection (see `direct`), opened once the file is migrated. An in-memory database
    // (sqlx names those `file:...`) would be another database to a second connection: its writes all keep sqlx.
    let file = options.get_filename();
    let direct = if in_memory(file) { None } else { Some(sqlite::DirectConnection::open(file, SQLITE_BUSY_TIMEOUT)?) };
    SqliteStore::new(read, write, direct, settings.token_cache).await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn page_size(path: &std::path::Path) -> i64 {
        let options = SqliteConnectOptions::new().filename(path).read_only(true);
        let mut connection = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
        sqlx::query_scalar("PRAGMA page_size").fetch_one(&mut connection).await.unwrap()
    }

    #[tokio::test]
    async fn a_new_sqlite_database_has_small_pages_and_an_existing_one_keeps_its_own() {
        let dir = std::env::temp_dir().join(format!("holdpoint-page-size-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();

        let new = dir.join("new.db");
        let store = connect(&format!("sqlite:{}", new.display())).await.unwrap();
        assert_eq!(page_size(&new).await, i64::from(SQLITE_PAGE_SIZE));
        drop(store);

        let existing = dir.join("existing.db");
        let options = SqliteConnectOptions::new()
            .filename(&existing)
            .create_if_missing(true)
            .page_size(4096)
            .journal_mode(SqliteJournalMode::Wal);
        let mut connection = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
        sqlx::query("CREATE TABLE made_before (x)").execute(&mut connection).await.unwrap();
        connection.close().await.unwrap();
        let store = connect(&format!("sqlite:{}", existing.display())).await.unwrap();
        assert_eq!(page_size(&existing).await, 4096);
        // Opened, brought up to date and written to as any database.
        assert_eq!(store.ensure_workspace("made-before").await.unwrap().name, "made-before");
        drop(store);

        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn the_bundled_sqlite_shares_no_mutex_between_connections_for_memory() {
        // `.cargo/config.toml` compiles it so (docs/decisions.md): memory statistics made every allocation SQLite
        // makes take a mutex that every connection of the process shares, and memory management one page cache
        // for all of them, behind another.
        let mut connection = sqlx::SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let options: Vec<String> =
            sqlx::query_scalar("PRAGMA compile_options").fetch_all(&mut connection).await.unwrap();
        assert!(options.iter().any(|option| option == "DEFAULT_MEMSTATUS=0"), "{options:?}");
        assert!(!options.iter().any(|option| option == "ENABLE_MEMORY_MANAGEMENT"), "{options:?}");
    }

    #[tokio::test]
    async fn a_sqlite_url_into_a_missing_directory_names_the_directory_and_creates_nothing() {
        let missing = std::env::temp_dir().join(format!("holdpoint-missing-{}", uuid::Uuid::now_v7()));
        let file = missing.join("h.db");
        let err = connect(&format!("sqlite:{}", file.display())).await.err().expect("no database to open");
        assert_eq!(
            err.to_string(),
            format!(
                "cannot open the SQLite database {}: the directory {} does not exist",
                file.display(),
                missing.display()
            )
        );
        assert!(!missing.exists());
    }

    #[test]
    fn postgres_sessions_plan_without_parallel_workers_unless_the_url_says_otherwise() {
        let ours = postgres_options("postgres://h/db").unwrap();
        assert_eq!(ours.get_options(), Some("-c max_parallel_workers_per_gather=0"));

        let url = "postgres://h/db?options=-c%20search_path%3Dt1";
        let with_other_options = postgres_options(url).unwrap();
        assert_eq!(with_other_options.get_options(), Some("-c search_path=t1 -c max_parallel_workers_per_gather=0"));

        let url = "postgres://h/db?options=-c%20max_parallel_workers_per_gather%3D2";
        let operators = postgres_options(url).unwrap();
        assert_eq!(operators.get_options(), Some("-c max_parallel_workers_per_gather=2"));
    }

    /// The settings reach the session: a misspelt name or value would fail the connection instead.
    #[tokio::test]
    async fn a_postgres_session_has_the_settings_it_was_opened_with() {
        let url = std::env::var("HOLDPOINT_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let mut connection = match sqlx::PgConnection::connect_with(&postgres_options(&url).unwrap()).await {
            Ok(connection) => connection,
            Err(err) if std::env::var("CI").as_deref() == Ok("true") => panic!("PostgreSQL is required in CI: {err}"),
            Err(err) => return eprintln!("SKIPPED: PostgreSQL at {url} is unreachable ({err})"),
        };
        for (name, value) in POSTGRES_SESSION_SETTINGS {
            let (shown,): (String,) = sqlx::query_as(&format!("SHOW {name}")).fetch_one(&mut connection).await.unwrap();
            assert_eq!(&shown, value, "{name}");
        }
    }
}
