//! The agent runtime: workers that claim queued runs and execute them.
//!
//! A run is executed by exactly one worker at a time: claiming is a conditional update (with
//! `FOR UPDATE SKIP LOCKED` on PostgreSQL), and the claim is a lease the worker renews while it works. A run that
//! waits for a person holds nothing: its state is in the database, and when its last question is resolved the
//! resolution itself puts it back in the queue, in the same transaction. Any instance may then claim it.

pub mod children;
pub mod executor;
pub mod ledger;
pub mod model;
pub mod queued;
pub mod remote;
pub mod settings;
pub mod tools;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use holdpoint_types::EventType;
use tokio::sync::{Semaphore, watch};
use uuid::Uuid;

use crate::events::{EventHub, HubEvent};
use crate::metrics::Metrics;
use crate::notifications::SendsOn;
use crate::questions::TimeoutBounds;
use crate::store::{Store, now};
use ledger::{LocalLedger, RunLedger};
use settings::RuntimeConfig;

/// How often a worker looks for claimable runs when no event told it of one (runs queued by other instances
/// are announced through the shared event log too; this is the safety net).
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How often waiting runs are checked for a reason to wait that is gone.
const SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// What executing runs needs.
pub struct Runtime {
    /// Where the runs this runtime executes are kept.
    pub ledger: Arc<dyn RunLedger>,
    pub metrics: Arc<Metrics>,
    pub config: RuntimeConfig,
    /// Where `script:` files are read from.
    pub scripts_dir: PathBuf,
    /// The client of the `http_request` tool ([`tools::http_client`]).
    pub http: crate::egress::GuardedClient,
    /// This instance's identity as a lease holder.
    pub instance: Uuid,
}

impl Runtime {
    /// A runtime that keeps its runs in `store`, with what the server's configuration says: the runtime's own
    /// settings, where `script:` files are read from, the timeouts the runs' questions may have and the channels
    /// those questions are sent on.
    pub fn new(
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        hub: EventHub,
        config: RuntimeConfig,
        scripts_dir: PathBuf,
        bounds: TimeoutBounds,
        sends_on: SendsOn,
    ) -> Arc<Self> {
        let ledger = LocalLedger {
            store,
            metrics: Arc::clone(&metrics),
            hub: Some(hub),
            bounds,
            sends_on,
            rules_cache: Default::default(),
        };
        Arc::new(Runtime {
            ledger: Arc::new(ledger),
            metrics,
            http: tools::http_client(&config),
            config,
            scripts_dir,
            instance: Uuid::now_v7(),
        })
    }

    fn lease(&self) -> chrono::Duration {
        chrono::Duration::seconds(i64::from(self.config.run_lease_seconds.max(3)))
    }

    /// Renews the lease on `run_id` in the background for as long as the returned [`Lease`] lives.
    pub(crate) fn keep_lease(&self, run_id: Uuid) -> Lease {
        let ledger = Arc::clone(&self.ledger);
        let (owner, lease) = (self.instance, self.lease());
        let length = lease.to_std().unwrap_or(Duration::from_secs(30));
        let every = length / 3;
        let (lost_tx, lost) = watch::channel(false);
        let renewal = tokio::spawn(async move {
            // Until when the lease is this worker's for sure, by its own clock: the claim happened just before.
            let mut held_until = tokio::time::Instant::now() + length;
            loop {
                tokio::time::sleep_until((tokio::time::Instant::now() + every).min(held_until)).await;
                let asked = tokio::time::Instant::now();
                match tokio::time::timeout_at(held_until, ledger.renew_lease(run_id, owner, now() + lease)).await {
                    Ok(Ok(true)) => held_until = asked + length,
                    // Another worker took the run over, or it left `running` (cancelled).
                    Ok(Ok(false)) => break,
                    Ok(Err(err)) => {
                        tracing::warn!(run = %run_id, error = %err, "could not renew a run's lease");
                        if tokio::time::Instant::now() >= held_until {
                            break;
                        }
                    }
                    // Not renewed before it ran out: another instance may claim the run from now on.
                    Err(_) => break,
                }
            }
            let _ = lost_tx.send(true);
        });
        Lease { renewal, lost }
    }
}

/// A run's lease as the worker executing the run holds it: renewed in the background until dropped.
pub(crate) struct Lease {
    renewal: tokio::task::JoinHandle<()>,
    lost: watch::Receiver<bool>,
}

impl Lease {
    /// Resolves once the lease is lost: another worker holds it, the run left `running`, or it could not be
    /// renewed before it ran out.
    pub(crate) async fn lost(&mut self) {
        if self.lost.wait_for(|lost| *lost).await.is_err() {
            // The renewal ended without saying so (it panicked): keep going; the fenced writes still decide.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

/// Starts the worker loop: claims runs of `store` (the one `runtime` keeps its runs in) while it has capacity and
/// executes each in its own task.
pub fn spawn_workers(runtime: Arc<Runtime>, store: Arc<dyn Store>, hub: EventHub) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let capacity = Arc::new(Semaphore::new(runtime.config.run_concurrency.max(1)));
        let (mut events, _) = hub.subscribe();
        let mut last_sweep = tokio::time::Instant::now();
        loop {
            while let Ok(permit) = Arc::clone(&capacity).try_acquire_owned() {
                let claimed = store.claim_run(runtime.instance, now() + runtime.lease(), now()).await;
                match claimed {
                    Ok(Some(run)) => {
                        runtime.metrics.run_claim_attempt("claimed");
                        let runtime = Arc::clone(&runtime);
                        tokio::spawn(async move {
                            executor::execute(&runtime, run).await;
                            drop(permit);
                        });
                    }
                    Ok(None) => {
                        runtime.metrics.run_claim_attempt("none");
                        break;
                    }
                    Err(err) => {
                        runtime.metrics.run_claim_attempt("error");
                        tracing::warn!(error = %err, "could not claim a run; retrying");
                        break;
                    }
                }
            }
            if last_sweep.elapsed() >= SWEEP_INTERVAL {
                last_sweep = tokio::time::Instant::now();
                if let Err(err) = store.requeue_stalled_runs(now()).await {
                    tracing::warn!(error = %err, "could not check waiting runs");
                }
            }
            until_a_run_may_be_claimable(&mut events).await;
        }
    })
}

/// Waits for a `run_status` event (a run was queued or requeued, or one finished and freed a worker), for the hub
/// to report lost events, or for the poll interval. Question events are most of the log and never queue a run by
/// themselves (an answer that requeues one appends its `run_status` too): waking on them made every question cost
/// a claim attempt, a write transaction that on SQLite queued behind the one writer with the questions' own.
async fn until_a_run_may_be_claimable(events: &mut tokio::sync::broadcast::Receiver<Arc<HubEvent>>) {
    use tokio::sync::broadcast::error::RecvError;
    let poll = tokio::time::sleep(POLL_INTERVAL);
    tokio::pin!(poll);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) if event.event_type != EventType::RunStatus.as_str() => {}
                Ok(_) | Err(RecvError::Lagged(_)) => return,
                Err(RecvError::Closed) => return poll.await,
            },
            () = &mut poll => return,
        }
    }
}
