//! The questions this server's gateway calls are waiting on: their approvals, and the forms an upstream's
//! elicitations became.
//!
//! A gateway call lives in the server that took it: the upstream's connection and the call's arguments as they are
//! to be sent are in its memory, and no other instance or later start makes the call (a task taken up after a
//! restart ends without making it, see [`super::door::resume`]). So a server that stops cancels the questions its
//! calls still wait on, before it closes their streams: the waiting call ends saying why, and nobody approves or
//! answers something that would do nothing. `/mcp`'s own questions are not here: an agent reads their outcome
//! again after a restart, so they outlive the server.
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

use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::state::AppState;

/// The reason a question gets when the server stopped while a gateway call waited on it.
pub const CANCELLED_AT_SHUTDOWN: &str = "the server stopped while the MCP gateway call this question was for waited \
     on it";
/// How long a stopping server spends cancelling: a store that does not answer does not hold the shutdown up.
const CANCEL_WITHIN: Duration = Duration::from_secs(10);
/// How long a stopping server waits for its cancelled calls to send their results before it closes their streams.
const DRAIN: Duration = Duration::from_secs(3);

/// The questions this server's gateway calls wait on, with who asked each (who cancels it at shutdown).
#[derive(Default)]
pub struct Waits {
    asked: Mutex<HashMap<Uuid, Caller>>,
    /// How many of the gateway's response event streams are still open.
    streams: AtomicUsize,
}

/// One open response event stream of the gateway, counted in [`Waits`] until it is dropped.
pub struct Sending(Arc<Waits>);

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A question in [`Waits`] while its call waits on it: dropped when the call ends, however it ends.
pub struct Waiting {
    waits: Arc<Waits>,
    question: Uuid,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waits.book().remove(&self.question);
    }
}

impl Waits {
    fn book(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Caller>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that a call of `caller` waits on `question` until the returned guard drops.
    pub fn wait_on(self: &Arc<Self>, question: Uuid, caller: &Caller) -> Waiting {
        self.book().insert(question, caller.clone());
        Waiting { waits: Arc::clone(self), question }
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
