//! The webhooks' worker, on every instance: queues each event for the endpoints it goes to, and sends each
//! endpoint its queue in order.
//!
//! Queueing follows the event hub, so an event is queued the moment this instance sees it committed, and records how
//! far it got (the cursor) in the same transaction as the deliveries it queued: after a crash or a restart the events
//! since the cursor are queued again, and an endpoint's key on each message (`UNIQUE (endpoint, message_id)`) makes
//! that, and every other instance queueing the same events, change nothing. Events that go nowhere move the cursor
//! only every few seconds, so a server without webhooks writes nothing for them.
//!
//! Sending claims the head of each queue — a workspace's endpoint (see
//! [`crate::store::WebhookStore::claim_webhook_heads`]); one task per queue sends its head and, once that is done
//! with, claims the next, so a receiver sees each workspace's events one at a time, in order, and a slow or failing
//! receiver — or one refusing a workspace's signature — holds up no other queue.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::channels::DeliveryOutcome;
use crate::channels::webhooks::{Message, WebhookSender, secret_key};
use crate::events::EventHub;
use crate::store::{HubEvent, QueueKey, Store, StoreResult, WebhookDeliveryRow, now};
use crate::webhooks::{after_attempt, deliveries_for, may_go_anywhere};

/// How long a claimed delivery is a worker's: longer than an attempt may take (10 s); a worker that died leaves it to
/// be claimed again this long after.
const CLAIM: chrono::Duration = chrono::Duration::seconds(15);
/// Heads claimed at once.
const BATCH: u32 = 64;
/// The longest the sender sleeps with nothing due: what it waits at most for a delivery another instance queued
/// that this one did not (its hub saw the event later).
const MAX_SLEEP: Duration = Duration::from_secs(5);
/// How often the cursor is written when events went nowhere.
const CURSOR_EVERY: Duration = Duration::from_secs(5);
/// Events read from the log at a time when catching up, and queued at a time from the hub.
const READ_BATCH: i64 = 500;
/// How long queueing waits after an event for the ones that follow it, to queue them together.
const COALESCE: Duration = Duration::from_millis(5);

/// The worker's parts.
pub struct WebhookWorker {
    pub store: Arc<dyn Store>,
    pub sender: WebhookSender,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Raised when deliveries were queued here (by the worker, or by hand through the API), or an endpoint's
    /// queue stopped short: time to claim.
    wake: Arc<tokio::sync::Notify>,
}

impl WebhookWorker {
    pub fn new(
        store: Arc<dyn Store>,
        sender: WebhookSender,
        metrics: Arc<crate::metrics::Metrics>,
        wake: Arc<tokio::sync::Notify>,
    ) -> Self {
        WebhookWorker { store, sender, metrics, wake }
    }

    /// Starts queueing and sending.
    pub fn spawn(self: Arc<Self>, hub: &EventHub) -> Vec<tokio::task::JoinHandle<()>> {
        let (events, _) = hub.subscribe();
        let queueing = Arc::clone(&self);
        let sending = Arc::clone(&self);
        vec![
            tokio::spawn(async move { queueing.queue_events(events).await }),
            tokio::spawn(async move { sending.send_queues().await }),
        ]
    }

    /// Follows the hub and queues each event for its endpoints; falls back to the log after a restart or when it fell
    /// behind the hub.
    async fn queue_events(self: Arc<Self>, mut events: tokio::sync::broadcast::Receiver<Arc<HubEvent>>) {
        let mut cursor = loop {
            match self.start_cursor().await {
                Ok(cursor) => break cursor,
                Err(err) => {
                    tracing::warn!(error = %err, "webhooks: cannot read where queueing stopped; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        let mut cursor_written = tokio::time::Instant::now();
        let mut behind = true;
        loop {
            if behind {
                match self.catch_up(cursor).await {
                    Ok(caught_up) => {
                        cursor = caught_up;
                        behind = false;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "webhooks: cannot read the event log; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            let first = match events.recv().await {
                Ok(event) => event,
                Err(RecvError::Lagged(_)) => {
                    behind = true;
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            // What else arrives meanwhile is taken with it: a busy server wakes this task a few hundred times a
            // second, not once per event, for a few milliseconds on each event's first attempt.
            tokio::time::sleep(COALESCE).await;
            let mut batch = vec![first];
            while batch.len() < READ_BATCH as usize {
                match events.try_recv() {
                    Ok(event) => batch.push(event),
                    Err(TryRecvError::Lagged(_)) => {
                        behind = true;
                        break;
                    }
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                }
            }
            batch.retain(|event| event.id > cursor);
            let Some(last) = batch.last().map(|event| event.id) else { continue };
            match self.queue(&batch, cursor_written.elapsed() >= CURSOR_EVERY).await {
                Ok(wrote_cursor) => {
                    cursor = last;
                    if wrote_cursor {
                        cursor_written = tokio::time::Instant::now();
                    }
                }
                Err(err) => {
                    // Read again from the log, from the last event known queued.
                    tracing::warn!(error = %err, "webhooks: cannot queue events; retrying from the log");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    behind = true;
                }
            }
        }
    }

    /// Where queueing starts: the stored cursor, or (the first time) the end of the log — events from before
    /// webhooks existed go nowhere.
    async fn start_cursor(&self) -> StoreResult<i64> {
        match self.store.webhook_cursor().await? {
            Some(cursor) => Ok(cursor),
            None => {
                let last = self.store.last_event_id().await?;
                self.store.queue_webhook_deliveries(&[], Some(last)).await?;
                Ok(last)
            }
        }
    }

    /// Queues what the log holds after `cursor`; returns the last event id queued.
    async fn catch_up(&self, mut cursor: i64) -> StoreResult<i64> {
        loop {
            let rows = self.store.events_after(cursor, READ_BATCH).await?;
            let Some(last) = rows.last().map(|row| row.id) else { return Ok(cursor) };
            let batch: Vec<Arc<HubEvent>> = rows.iter().map(|row| Arc::new(HubEvent::from(row))).collect();
            self.queue(&batch, true).await?;
            cursor = last;
        }
    }

    /// Queues a run of events (in id order) for their endpoints, with the cursor after them when anything is queued
    /// or `write_cursor` says it is time; returns whether the cursor was written.
    async fn queue(&self, batch: &[Arc<HubEvent>], write_cursor: bool) -> StoreResult<bool> {
        let Some(last) = batch.last().map(|event| event.id) else { return Ok(false) };
        let mut deliveries = Vec::new();
        for event in batch {
            let webhooks = self.store.webhooks_cached(event.workspace_id).await?;
            if may_go_anywhere(event, &webhooks) {
                deliveries.extend(deliveries_for(event, &webhooks));
            }
        }
        if deliveries.is_empty() && !write_cursor {
            return Ok(false);
        }
        self.store.queue_webhook_deliveries(&deliveries, Some(last)).await?;
        if !deliveries.is_empty() {
            self.wake.notify_one();
        }
        Ok(true)
    }

    /// Claims the heads of the queues as they fall due, and sends each queue in a task of its own.
    async fn send_queues(self: Arc<Self>) {
        loop {
            let at = now();
            match self.store.claim_webhook_heads(at, at + CLAIM, BATCH, None).await {
                Ok(heads) => {
                    let full = heads.len() == BATCH as usize;
                    for head in heads {
                        let worker = Arc::clone(&self);
                        tokio::spawn(async move { worker.send_queue(head).await });
                    }
                    if full {
                        continue;
                    }
                }
                Err(err) => tracing::warn!(error = %err, "webhooks: cannot claim deliveries; retrying"),
            }
            let sleep = match self.store.next_webhook_delivery_due().await {
                Ok(Some(next)) => (next - now()).to_std().unwrap_or(Duration::ZERO).min(MAX_SLEEP),
                Ok(None) | Err(_) => MAX_SLEEP,
            };
            tokio::select! {
                () = tokio::time::sleep(sleep.max(Duration::from_millis(10))) => {}
                () = self.wake.notified() => {}
            }
        }
    }

    /// Sends a queue's head and, while each is done with (sent or given up), the next one of the queue.
    async fn send_queue(self: Arc<Self>, mut head: WebhookDeliveryRow) {
        loop {
            let (workspace_id, endpoint) = (head.workspace_id, head.endpoint.clone());
            let done = self.attempt(head).await;
            if !done {
                // Waiting for a retry (or its claim was lost): the claim loop finds it when it is due.
                self.wake.notify_one();
                return;
            }
            let at = now();
            let queue = QueueKey { workspace_id, endpoint: &endpoint };
            match self.store.claim_webhook_heads(at, at + CLAIM, 1, Some(queue)).await {
                Ok(mut next) if !next.is_empty() => head = next.swap_remove(0),
                Ok(_) => return,
                Err(err) => {
                    tracing::warn!(error = %err, "webhooks: cannot claim the next delivery; the claim loop will");
                    self.wake.notify_one();
                    return;
                }
            }
        }
    }

    /// Makes one attempt of a claimed delivery and records it; returns whether the delivery is done with (sent or
    /// given up), so the endpoint's next one may go.
    async fn attempt(&self, delivery: WebhookDeliveryRow) -> bool {
        let attempt = match self.key_for(&delivery).await {
            Ok(Some(key)) => {
                let message = Message { url: &delivery.url, id: &delivery.message_id, body: &delivery.body, key: &key };
                self.sender.send(&message, now().timestamp()).await
            }
            Ok(None) => crate::channels::webhooks::Attempt {
                outcome: DeliveryOutcome::failed("the webhook no longer exists"),
                status: None,
                gone: false,
            },
            Err(err) => crate::channels::webhooks::Attempt {
                outcome: DeliveryOutcome::retry(format!("the signing secret could not be read: {err}"), None),
                status: None,
                gone: false,
            },
        };
        let at = now();
        let gone = attempt.gone;
        let finished = after_attempt(delivery, &attempt, at);
        let done = !matches!(finished.status, app::types::DeliveryStatus::Retrying);
        let (outcome, since_queued) = match finished.status {
            app::types::DeliveryStatus::Sent => ("sent", (at - finished.created_at).to_std().ok()),
            app::types::DeliveryStatus::Retrying => ("retried", None),
            _ => ("failed", None),
        };
        self.metrics.webhook_attempt(outcome, since_queued);
        match self.store.finish_webhook_delivery(&finished).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(delivery = %finished.id, "a webhook delivery's claim ran out while it was sent");
                return false;
            }
            Err(err) => {
                tracing::warn!(delivery = %finished.id, error = %err, "could not record a webhook attempt");
                return false;
            }
        }
        if gone {
            let reason = finished.last_error.as_deref().unwrap_or("the receiver answered 410 Gone");
            if let Err(err) = self.store.endpoint_gone(finished.queue(), finished.webhook_id, at, reason).await {
                tracing::warn!(error = %err, "could not disable a webhook whose receiver is gone");
            }
        }
        done
    }

    /// The key a delivery is signed with: its subscription's secret, or its workspace's callback secret. `None` if
    /// the subscription is gone.
    async fn key_for(&self, delivery: &WebhookDeliveryRow) -> Result<Option<Vec<u8>>, crate::error::AppError> {
        let secret = match delivery.webhook_id {
            Some(id) => match self.store.webhook(delivery.workspace_id, id).await? {
                Some(webhook) => webhook.secret,
                None => return Ok(None),
            },
            None => crate::webhooks::callback_secret_of(self.store.as_ref(), delivery.workspace_id).await?.secret,
        };
        Ok(secret_key(&secret))
    }
}
