//! The questions this server's gateway calls are waiting on: their approvals, and the forms an upstream's
//! elicitations became.
//!
//! A gateway call lives in the server that took it: the upstream's connection and the call's arguments as they are
//! to be sent are in its memory, and no other instance or later start makes the call (a task taken up after a
//! restart ends without making it, see [`super::door::resume`]). So a server that stops cancels the questions its
//! calls still wait on, before it closes their streams: the waiting call ends saying why, and nobody approves or
//! answers something that would do nothing. `/mcp`'s own questions are not here: an agent reads their outcome
//! again after a restart, so they outlive the server.

use std::collections::{HashMap, HashSet};
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

    /// Cancels every question a call still waits on, as the caller who asked it, with [`CANCELLED_AT_SHUTDOWN`]
    /// (within [`CANCEL_WITHIN`]); then gives the calls, woken by their questions' events, up to [`DRAIN`] to send
    /// their results. A question resolved meanwhile stays as it was resolved.
    pub async fn cancel_all(&self, state: &AppState) {
        if self.is_empty() {
            return;
        }
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
        let deadline = tokio::time::Instant::now() + DRAIN;
        while !self.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
