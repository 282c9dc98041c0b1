//! The questions this server's gateway calls are waiting on: their approvals, and the forms an upstream's
//! elicitations became.
//!
//! A gateway call lives in the server that took it: the upstream's connection and the call's arguments as they are
//! to be sent are in its memory, and no other instance or later start makes the call (a task read from another
//! instance, or after a restart, never makes it, see [`super::door::resume`]). So:
//!
//! - A server that stops cancels the questions its calls still wait on, before it closes their streams: the waiting
//!   call ends saying why, and nobody approves or answers something that would do nothing.
//! - Each waiting call is held in the store ([`crate::store::GatewayHoldRow`]) by this instance, which says in the
//!   store that it runs while it does ([`spawn_keeper`]; [`Waits::start`] and [`Waits::stop`]). Another instance
//!   asked about the call's task learns from it that the call is held, or ended, by an instance still running.
//!   A call still held by an instance gone without stopping (killed, or its machine lost) will not be made: the
//!   keeper of any instance cancels the question it waited on, within about one hold's length
//!   ([`HOLD_LAPSED_REASON`]).
//!
//! `/mcp`'s own questions are not here: an agent reads their outcome again after a restart, so they outlive the
//! server.
//!
//! A call's result is sent on its response's event stream by rmcp's session, after the call's code has returned,
//! and the streams end when the server's shutdown token is cancelled. So the stop also waits for the gateway's
//! response streams still open ([`Waits::sending`], taken by [`hold_stop_for_responses`]) to end: otherwise a
//! cancelled call's result could be cut off, and its client, which never heard how the call ended, would try the
//! stream again and again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use app::types::QuestionStatus;
use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::metrics::Metrics;
use crate::state::AppState;
use crate::store::{
    AuditActor, GatewayHoldRow, HOLD_ENDED, HOLD_LAPSED, QuestionResolution, ResolveOutcome, Store, StoreResult,
};

/// The reason a question gets when the server stopped while a gateway call waited on it.
pub const CANCELLED_AT_SHUTDOWN: &str = "the server stopped while the MCP gateway call this question was for waited \
     on it";
/// How long a stopping server spends cancelling: a store that does not answer does not hold the shutdown up.
const CANCEL_WITHIN: Duration = Duration::from_secs(10);
/// How long a stopping server waits for its cancelled calls to send their results before it closes their streams.
const DRAIN: Duration = Duration::from_secs(3);
/// The reason a question gets when the instance whose gateway call waited on it died without stopping.
pub const HOLD_LAPSED_REASON: &str = "the server that held the MCP gateway call this question was for stopped \
     without ending it; the call will not be made";
/// Who cancels the question of a call whose instance died, in the audit log.
const HOLD_KEEPER: &str = "MCP gateway hold keeper";
/// How many calls left by gone instances one pass of the keeper takes up.
const LAPSED_BATCH: i64 = 100;
/// How long a gone instance is remembered: its calls' tasks are told apart from those of a running instance.
const GONE_KEPT: chrono::Duration = chrono::Duration::days(2);

/// The questions this server's gateway calls wait on, with who asked each (who cancels it at shutdown), and their
/// holds in the store.
pub struct Waits {
    asked: Mutex<HashMap<Uuid, Caller>>,
    /// How many of the gateway's response event streams are still open.
    streams: AtomicUsize,
    store: Arc<dyn Store>,
    /// This instance, as the holder of its calls.
    instance: Uuid,
    /// How long this instance counts as running unless it says so again.
    hold: chrono::Duration,
}

/// One open response event stream of the gateway, counted in [`Waits`] until it is dropped.
pub struct Sending(Arc<Waits>);

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A question in [`Waits`] while its call waits on it: dropped when the call ends, however it ends, which releases
/// its hold as ended.
pub struct Waiting {
    waits: Arc<Waits>,
    question: Uuid,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waits.book().remove(&self.question);
        let (store, question, instance) = (Arc::clone(&self.waits.store), self.question, self.waits.instance);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(err) = store.release_gateway_hold(question, instance, HOLD_ENDED).await {
                    // It reads as held while this instance runs; once it is gone, a keeper finds its question
                    // no longer pending and releases it as lapsed.
                    tracing::warn!(error = %err, %question, "could not release a gateway call's hold");
                }
            });
        }
    }
}

impl Waits {
    /// The waits of instance `instance`, which counts as running `hold_seconds` after it last said so.
    pub fn new(store: Arc<dyn Store>, instance: Uuid, hold_seconds: u32) -> Self {
        Waits {
            asked: Mutex::default(),
            streams: AtomicUsize::new(0),
            store,
            instance,
            hold: chrono::Duration::seconds(i64::from(hold_seconds.max(3))),
        }
    }

    /// This instance, as the holder of its calls.
    pub fn instance(&self) -> Uuid {
        self.instance
    }

    /// Records in the store that this instance runs, before it takes any call.
    pub async fn start(&self) -> StoreResult<()> {
        self.store.keep_instance(self.instance, crate::store::now() + self.hold).await
    }

    /// Records in the store that this instance stopped: the calls it held are at once known to be left.
    pub async fn stop(&self) {
        if let Err(err) = self.store.keep_instance(self.instance, crate::store::now()).await {
            tracing::warn!(error = %err, "could not record this instance's stop; the others see it within its hold");
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Caller>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that a call of `caller` waits on `question` until the returned guard drops, and holds the call in the
    /// store. A hold that could not be written leaves the call waiting all the same, known to this instance only:
    /// another instance asked about its task takes it for one a restart left.
    pub async fn wait_on(self: &Arc<Self>, question: Uuid, caller: &Caller) -> Waiting {
        self.book().insert(question, caller.clone());
        let waiting = Waiting { waits: Arc::clone(self), question };
        let hold = GatewayHoldRow {
            question_id: question,
            workspace_id: caller.workspace_id(),
            instance_id: self.instance,
            released: None,
        };
        if let Err(err) = self.store.hold_gateway_call(&hold).await {
            tracing::warn!(error = %err, %question, "could not hold a gateway call in the store");
        }
        waiting
    }

    /// How many calls wait now.
    pub fn len(&self) -> usize {
        self.book().len()
    }

    /// Whether no call waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts a response event stream as open until the returned guard drops.
    pub fn sending(self: &Arc<Self>) -> Sending {
        self.streams.fetch_add(1, Ordering::AcqRel);
        Sending(Arc::clone(self))
    }

    /// Whether every call has ended and every response stream has been sent to its end.
    fn drained(&self) -> bool {
        self.is_empty() && self.streams.load(Ordering::Acquire) == 0
    }

    /// Cancels every question a call still waits on, as the caller who asked it, with [`CANCELLED_AT_SHUTDOWN`]
    /// (within [`CANCEL_WITHIN`]); then gives the calls, woken by their questions' events, and every response
    /// stream still open (a call answered just before the stop too) up to [`DRAIN`] to send their results to the
    /// end. A question resolved meanwhile stays as it was resolved.
    pub async fn cancel_all(&self, state: &AppState) {
        if self.drained() {
            return;
        }
        if !self.is_empty() {
            self.cancel_waiting(state).await;
        }
        let deadline = tokio::time::Instant::now() + DRAIN;
        while !self.drained() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The cancelling part of [`Self::cancel_all`].
    async fn cancel_waiting(&self, state: &AppState) {
        tracing::info!(calls = self.len(), "cancelling the questions of the MCP gateway calls still waiting");
        let cancelling = async {
            // Until no call waits on a question not yet cancelled: one may start waiting while others are cancelled.
            let mut cancelled = HashSet::new();
            loop {
                let asked: Vec<(Uuid, Caller)> = self
                    .book()
                    .iter()
                    .filter(|(id, _)| !cancelled.contains(*id))
                    .map(|(id, caller)| (*id, caller.clone()))
                    .collect();
                if asked.is_empty() {
                    break;
                }
                for (id, caller) in asked {
                    cancelled.insert(id);
                    let reason = Some(CANCELLED_AT_SHUTDOWN.to_owned());
                    let (store, now) = (state.store.as_ref(), crate::store::now());
                    match crate::questions::cancel_question(store, &state.metrics, &caller, id, reason, now).await {
                        Ok(_) | Err(AppError::Conflict { .. }) => {}
                        Err(err) => {
                            tracing::warn!(error = %err, question = %id, "could not cancel a gateway call's question");
                        }
                    }
                }
            }
        };
        if tokio::time::timeout(CANCEL_WITHIN, cancelling).await.is_err() {
            tracing::warn!("the store did not take every gateway call's cancellation in time; stopping all the same");
        }
    }
}

/// Says in the store that this instance runs, every third of a hold's length, and cancels the questions of the calls
/// whose instance is gone, on every instance: whichever comes first takes each up.
pub fn spawn_keeper(waits: Arc<Waits>, metrics: Arc<Metrics>) -> tokio::task::JoinHandle<()> {
    let every = (waits.hold / 3).to_std().unwrap_or(Duration::from_secs(10));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            if let Err(err) = waits.start().await {
                tracing::warn!(error = %err, "could not record that this instance runs; retrying");
            }
            if let Err(err) = waits.take_up_left(&metrics).await {
                tracing::warn!(error = %err, "could not take up the gateway calls of gone instances; retrying");
            }
        }
    })
}

impl Waits {
    /// Cancels the questions of the calls still held by instances gone, with [`HOLD_LAPSED_REASON`], and releases
    /// those holds as lapsed; forgets the instances gone long ago. Returns how many questions it cancelled.
    pub async fn take_up_left(&self, metrics: &Metrics) -> StoreResult<usize> {
        let store = self.store.as_ref();
        let mut cancelled = 0;
        loop {
            let left = store.orphaned_gateway_holds(crate::store::now(), LAPSED_BATCH).await?;
            let full = left.len() as i64 == LAPSED_BATCH;
            for hold in left {
                cancelled += usize::from(cancel_left(store, metrics, &hold).await?);
                store.release_gateway_hold(hold.question_id, hold.instance_id, HOLD_LAPSED).await?;
            }
            if !full {
                store.forget_instances(crate::store::now() - GONE_KEPT).await?;
                return Ok(cancelled);
            }
        }
    }
}

/// Cancels the question of a call whose instance died, if it is still pending: whether it did.
async fn cancel_left(store: &dyn Store, metrics: &Metrics, hold: &GatewayHoldRow) -> StoreResult<bool> {
    let Some(row) = store.question(hold.workspace_id, hold.question_id).await? else { return Ok(false) };
    if row.status != QuestionStatus::Pending {
        return Ok(false);
    }
    let actor = AuditActor::policy(HOLD_KEEPER, Some(hold.instance_id.to_string()));
    let change = QuestionResolution::cancelled(Some(HOLD_LAPSED_REASON.to_owned()), None, crate::store::now(), actor);
    let workspace = store.workspace_name(row.workspace_id).await?;
    match crate::questions::resolve(store, &row, &change, &workspace).await? {
        ResolveOutcome::Resolved(row) => {
            metrics.question_resolved(row.kind.as_str(), row.status.as_str(), crate::questions::pending_for(&row));
            Ok(true)
        }
        ResolveOutcome::NotPending(_) | ResolveOutcome::NotFound => Ok(false),
    }
}

/// Keeps a POST's response event stream counted in the server's [`Waits`] until hyper has sent it to its end (or the
/// client went away), so that a stopping server does not cut a call's result off (see the module's note).
pub async fn hold_stop_for_responses(
    axum::extract::State(waits): axum::extract::State<Arc<Waits>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let sending = waits.sending();
    let response = next.run(request).await;
    let streams = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"));
    if !streams {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
        let _counted = &sending;
        chunk
    });
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
}
