//! The deadline worker: resolves pending questions whose timeout has passed, to `defaulted` (their default
//! response applied) or `expired` (none given), and takes the escalation steps that are due (see [`crate::escalation`]).
//!
//! It looks again at the sooner of the next deadline or step and half a second from now, so a question is resolved
//! (or reminded, or escalated) within a second of its time, including those that fell due while the server was down
//! (found on the first pass).
//! Resolution is the same conditional update as an answer, so when several instances race for one question, or a
//! person answers at the last moment, exactly one transition happens.

use std::sync::Arc;
use std::time::Duration;

use app::types::{QuestionStatus, Resolution};

use crate::events::EventHub;
use crate::metrics::Metrics;
use crate::notifications::SendsOn;
use crate::questions::pending_for;
use crate::store::{AuditActor, QuestionResolution, ResolveOutcome, Store, StoreResult, now};

/// The longest the worker sleeps, so deadlines of questions created meanwhile are not missed by more than this.
const MAX_SLEEP: Duration = Duration::from_millis(500);
const BATCH: i64 = 200;

pub fn spawn(
    store: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    hub: EventHub,
    sends_on: SendsOn,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(err) = resolve_overdue(store.as_ref(), &metrics).await {
                tracing::warn!(error = %err, "could not resolve overdue questions; retrying");
            }
            if let Err(err) = crate::escalation::take_due_steps(store.as_ref(), Some(&hub), &sends_on).await {
                tracing::warn!(error = %err, "could not take the escalation steps due; retrying");
            }
            let next = match (store.next_deadline().await, store.next_escalation_due().await) {
                (Ok(deadline), Ok(step)) => deadline.into_iter().chain(step).min(),
                _ => None,
            };
            let sleep = match next {
                Some(next) => (next - now()).to_std().unwrap_or(Duration::ZERO).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            tokio::time::sleep(sleep.max(Duration::from_millis(10))).await;
        }
    })
}

/// Resolves every question overdue now; returns how many this call resolved.
pub async fn resolve_overdue(store: &dyn Store, metrics: &Metrics) -> StoreResult<usize> {
    let mut resolved = 0;
    loop {
        let at = now();
        let overdue = store.overdue_questions(at, BATCH).await?;
        let full = overdue.len() as i64 == BATCH;
        for question in overdue {
            let change = match &question.default_response {
                Some(default) => QuestionResolution {
                    status: QuestionStatus::Defaulted,
                    response: Some(default.0.clone()),
                    answered_by: None,
                    resolution: Some(Resolution::DefaultOnTimeout),
                    at,
                    actor: AuditActor::timeout(),
                },
                None => QuestionResolution {
                    status: QuestionStatus::Expired,
                    response: None,
                    answered_by: None,
                    resolution: None,
                    at,
                    actor: AuditActor::timeout(),
                },
            };
            let workspace = store.workspace_name(question.workspace_id).await?;
            if let ResolveOutcome::Resolved(row) =
                crate::questions::resolve(store, &question, &change, &workspace).await?
            {
                metrics.question_resolved(row.kind.as_str(), row.status.as_str(), pending_for(&row));
                resolved += 1;
            }
        }
        if !full {
            return Ok(resolved);
        }
    }
}
