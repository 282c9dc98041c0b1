//! The PostgreSQL store, for several instances over one database: the hot writes of a HITL cycle commit in
//! batches (`write_batch`), event ids are drawn at commit and announced to the other instances by notification.

mod backend;
mod events;
mod write_batch;

use std::sync::Arc;

use sqlx::{PgPool, Postgres};
use tokio::sync::watch;

use write_batch::{BatchQuery, BatchableWrite, WriteBatches};

use super::sql::*;
use super::token_cache::TokenCache;
use super::*;

/// The PostgreSQL store.
#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    committed: watch::Sender<Committed>,
    /// Serves only while the listener hears the other instances' revocations.
    pub(crate) tokens: Arc<TokenCache>,
    /// Stops the listener when the store is dropped, and only then: nobody follows the store's commits at start,
    /// before the event hub's task subscribes, and revocations through other instances must be heard from the
    /// first moment the token cache serves.
    _stop_listening: Arc<tokio_util::sync::DropGuard>,
    /// Where asking and resolving run, committed in batches.
    batches: WriteBatches,
    /// What this store keeps in memory of each workspace.
    pub(crate) caches: Arc<super::Caches>,
}

impl PostgresStore {
    /// Appends the event under a draft id; migration 0008's deferred trigger gives it its id when the transaction
    /// commits, under the event log's lock, and tells the other instances (LISTEN/NOTIFY, delivered on commit). The
    /// log stays the source of truth, so a lost notification only delays an event until the hub's next poll.
    pub(crate) const INSERT_EVENT: &'static str = "INSERT INTO events (id, workspace_id, event_type, project, run_id, question_id, data, created_at) \
         OVERRIDING SYSTEM VALUE VALUES (-nextval('events_draft_id_seq'), $1, $2, $3, $4, $5, $6, $7) RETURNING id";

    /// The other instances forget the tokens they trusted (see `token_cache`); delivered when the revocation commits.
    pub(crate) const TELL_OTHERS_OF_A_REVOCATION: &'static str = "SELECT pg_notify('holdpoint_credentials', '')";

    pub async fn new(pool: PgPool, token_cache: std::time::Duration) -> StoreResult<Self> {
        let last = last_event_id(&pool).await?;
        let committed = watch::channel(Committed { last, read_through: last, ..Committed::default() }).0;
        let tokens = Arc::new(TokenCache::new(false, token_cache));
        let stop = tokio_util::sync::CancellationToken::new();
        let (schema,): (String,) = sqlx::query_as("SELECT current_schema()").fetch_one(&pool).await?;
        let listening =
            Listening { pool: pool.clone(), schema, committed: committed.clone(), tokens: Arc::clone(&tokens) };
        tokio::spawn(listen_to_other_instances(listening, stop.clone()));
        let batches = WriteBatches::start(pool.clone());
        Ok(Self {
            pool,
            committed,
            tokens,
            _stop_listening: Arc::new(stop.drop_guard()),
            batches,
            caches: Arc::default(),
        })
    }
}

/// What the listener follows, and for whom.
pub(crate) struct Listening {
    pub(crate) pool: PgPool,
    /// The schema of this store's tables: a notification names the schema of the log its id is in (migration 0012).
    pub(crate) schema: String,
    pub(crate) committed: watch::Sender<Committed>,
    pub(crate) tokens: Arc<TokenCache>,
}

/// Follows the other instances' commits (each notification on [`EVENTS_CHANNEL`] carries the newest event id of a
/// commit, after the schema of its log) and revocations ([`CREDENTIALS_CHANNEL`]). The token cache serves only
/// while this listens: a notification sent while the connection is down is lost, so a lost connection forgets
/// every token and the cache waits for a new one to be listening again.
pub(crate) async fn listen_to_other_instances(listening: Listening, stop: tokio_util::sync::CancellationToken) {
    let Listening { pool, schema, committed, tokens } = listening;
    while !stop.is_cancelled() {
        let listening = async {
            let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await?;
            listener.listen_all([EVENTS_CHANNEL, CREDENTIALS_CHANNEL]).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = match listening.await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for other instances' events; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
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
                    if let Some(id) = event_of_this_log(notification.payload(), &schema) {
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

/// The event id a notification on [`EVENTS_CHANNEL`] announces, if it is one of the log in `schema`: other
/// schemas of the same database number their own logs, and their ids say nothing of this one's.
pub(crate) fn event_of_this_log(payload: &str, schema: &str) -> Option<i64> {
    let (of, id) = payload.rsplit_once(':')?;
    if of != schema {
        return None;
    }
    id.parse().ok()
}

/// The channel on which PostgreSQL instances announce committed events to each other.
pub(crate) const EVENTS_CHANNEL: &str = "holdpoint_events";
/// The channel on which a PostgreSQL instance tells the others that a token was revoked.
pub(crate) const CREDENTIALS_CHANNEL: &str = "holdpoint_credentials";

impl PostgresStore {
    /// Asks a question (of no run, without an idempotency key): the question and its `question_asked` event, one
    /// statement, committed in a batch with the other hot writes queued with it (see `write_batch`).
    pub(crate) async fn insert_question_directly(
        &self,
        q: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<Option<Created<QuestionRow>>> {
        self.batches.run(AskWrite { question: q.clone(), event: event.clone() }).await?;
        Ok(Some(Created { value: q.clone(), created: true }))
    }

    /// Resolves a pending question (of no run) with one statement (`RESOLVE_AS_EXPRESSIONS`), committed in a
    /// batch (see `write_batch`). `false`, with nothing written, when someone was first.
    pub(crate) async fn resolve_in_one_query(&self, transition: &QuestionTransition) -> StoreResult<bool> {
        let write = ResolveWrite {
            row: transition.resolved.clone(),
            event: transition.event.clone(),
            draft: AuditRow::unsealed(&transition.audit),
        };
        Ok(!self.batches.run(write).await?.is_empty())
    }
}

/// How many values a question binds (`QUESTION_COLUMNS`).
pub(crate) const QUESTION_ARGUMENTS: usize = 39;
/// How many values an event binds (`INSERT_EVENT`).
pub(crate) const EVENT_ARGUMENTS: usize = 7;
/// How many values an answer's hot write binds (`RESOLVE_AS_EXPRESSIONS`).
pub(crate) const RESOLVE_ARGUMENTS: usize = 26;

/// PostgreSQL's hot write of a question: the question and its `question_asked` event, as `write_batch` runs it.
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
        Bind::bind_event(Bind::bind_row(query, &self.question), &self.event)
    }

    fn kind(&self) -> u8 {
        0
    }
}

/// PostgreSQL's hot write of an answer (`RESOLVE_AS_EXPRESSIONS`), as `write_batch` runs it.
struct ResolveWrite {
    row: QuestionRow,
    event: NewEvent,
    draft: AuditRow,
}

impl BatchableWrite for ResolveWrite {
    fn as_expressions(&self, name: &str, offset: usize) -> String {
        shift_placeholders(&RESOLVE_AS_EXPRESSIONS.replace("NAME", name), offset)
    }

    fn arguments(&self) -> usize {
        RESOLVE_ARGUMENTS
    }

    fn bind<'q>(&'q self, query: BatchQuery<'q>) -> BatchQuery<'q> {
        let query = Bind::bind_event(Bind::bind_resolved(query, &self.row), &self.event);
        Bind::bind_audit_draft(query, &self.draft)
    }

    fn kind(&self) -> u8 {
        1
    }
}

/// Resolves a pending question, locking its run first (`$6` the workspace, `$7` the question). Resolving a run's
/// question ends by requeueing the run, and cancelling a run cancels its questions: locking the run first, as
/// cancelling does, keeps the two from each holding what the other waits for (the database would abort one of them
/// as a deadlock). The lock is a CTE of the `UPDATE`, so it costs no round trip of its own: the condition on the CTE
/// refers to no column of the question, so PostgreSQL checks it once, before it scans for the question, and the
/// run is locked first. The status is tested as `STILL_PENDING` does, for the reason it gives.
pub(crate) static RESOLVE_LOCKING_RUN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH run_lock AS MATERIALIZED (SELECT r.id FROM questions q \
         JOIN runs r ON r.id = q.run_id AND r.workspace_id = q.workspace_id \
         WHERE q.workspace_id = $6 AND q.id = $7 AND q.status = 'pending' FOR UPDATE OF r) \
         {} AND (SELECT COUNT(*) FROM run_lock) >= 0 RETURNING id",
        *RESOLVE_PENDING
    )
});

/// Resolving a pending question as common table expressions of a batch's statement (see `write_batch`), `NAME`
/// standing for the write's name: the update (`$1`..`$7`, as `bind_resolved` binds them), the audit draft
/// (`$15`..`$26`) and the event (`$8`..`$14`, as `INSERT_EVENT` binds them), the last two only if the update changed
/// the row, so a question no longer pending writes nothing and returns no row.
pub(crate) static RESOLVE_AS_EXPRESSIONS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "NAME_resolved AS ({} RETURNING id), \
         NAME_draft AS (INSERT INTO audit_drafts (id, workspace_id, actor, actor_id, actor_kind, action, subject_type, \
         subject_id, before, after, diff, created_at) \
         SELECT $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26 FROM NAME_resolved), \
         NAME AS (INSERT INTO events (id, workspace_id, event_type, project, run_id, question_id, data, created_at) \
         OVERRIDING SYSTEM VALUE SELECT -nextval('events_draft_id_seq'), $8, $9, $10, $11, $12, $13, $14 \
         FROM NAME_resolved RETURNING id)",
        *RESOLVE_PENDING
    )
});
