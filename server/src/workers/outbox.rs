//! The outbox's worker: sends the deliveries questions were asked with, on every instance.
//!
//! It wakes when a question is asked (the event hub) and when the soonest delivery is due, claims what is due
//! (exactly once across instances: see [`crate::store::OutboxStore::claim_deliveries`]) and sends each delivery in
//! a task of its own, so a channel that hangs or fails holds up neither another channel nor the questions. An
//! attempt that may work later is retried with exponential backoff (or after what the service asked for) until a
//! day after the question was asked; then, or on a failure that trying again would not mend, the delivery is given
//! up as `failed` with its last error.
//!
//! A message a channel can change after sending it (a Slack message; a push notification, replaced by one with the
//! same tag) is brought up to date once its question is resolved, wherever that happened: the worker also wakes on each resolution and claims, the same way, the sent
//! messages of resolved questions (see [`crate::store::OutboxStore::claim_follow_ups`]). Finding them from the
//! questions' state rather than from the resolution's event means a follow-up missed by a crash or sent while the
//! question was being answered is found on the next wake.

use std::sync::Arc;
use std::time::Duration;

use app::types::{Channel, DeliveryStatus, QuestionStatus};
use tokio::sync::broadcast::error::RecvError;

use crate::channels::email::{EmailSender, render_question};
use crate::channels::slack::{MessageRef, SlackClient, question_message, resolved_message};
use crate::channels::web_push::{
    PushMessage, PushSubscription, SubscriptionKeys, WebPushSender, notification_payload, resolved_payload,
};
use crate::channels::{ChannelKeys, DeliveryOutcome, EMAIL_MAX_CHOICES, PUSH_MAX_CHOICES, action_links, question_url};
use crate::config::ChannelsConfig;
use crate::events::EventHub;
use crate::metrics::Metrics;
use crate::store::{DeliveryRow, MemberRow, Store, StoreResult, now};

/// How long a claimed delivery is a worker's: longer than any channel's own timeout, so a live worker never loses one
/// it is sending; a worker that died leaves it to be claimed again once this has passed.
const CLAIM: chrono::Duration = chrono::Duration::minutes(5);
/// Deliveries claimed at once.
const BATCH: u32 = 64;
/// The longest the worker sleeps with nothing due: what it waits at most for a delivery written by another instance.
const MAX_SLEEP: Duration = Duration::from_secs(5);
/// How soon after an event that may have made something due the outbox looks, at the most often.
const COALESCE: Duration = Duration::from_millis(100);
/// How long after its question was asked a delivery is still tried.
const GIVE_UP_AFTER: chrono::Duration = chrono::Duration::hours(24);
/// The longest wait between two attempts.
const LONGEST_WAIT: chrono::Duration = chrono::Duration::hours(2);

/// What sending needs: the store, the channels this server sends on, the keys links are signed with, and the
/// address people reach Holdpoint at.
pub struct Outbox {
    pub store: Arc<dyn Store>,
    pub metrics: Arc<Metrics>,
    pub email: Option<EmailSender>,
    pub slack: Option<SlackClient>,
    /// Web push, when push services can be told who sends (a VAPID subject).
    pub push: Option<WebPushSender>,
    pub keys: ChannelKeys,
    /// Where links in messages point: `HOLDPOINT_PUBLIC_URL`, or the address this server listens on.
    pub public_url: String,
    /// The wait before the first retry; each next one doubles it, up to [`LONGEST_WAIT`].
    pub first_wait: chrono::Duration,
    /// Wakes the worker to look for sent messages of resolved questions (a message sent just as its question was
    /// answered).
    follow_ups_wanted: tokio::sync::Notify,
}

impl Outbox {
    /// The outbox of a server configured with `config`.
    pub fn new(
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        config: &ChannelsConfig,
        keys: ChannelKeys,
        public_url: String,
    ) -> Result<Self, String> {
        let email = config.email_sender().map_err(|e| e.to_string())?;
        let slack = config.slack().map_err(|e| e.to_string())?.map(|(client, _)| client);
        let push = match config.vapid_subject(Some(&public_url)) {
            Some(subject) => Some(WebPushSender::new(keys.vapid.clone(), &subject, config.push_endpoints())?),
            None => None,
        };
        let first_wait = chrono::Duration::seconds(i64::from(config.delivery_first_retry_seconds));
        Ok(Outbox {
            store,
            metrics,
            email,
            slack,
            push,
            keys,
            public_url,
            first_wait,
            follow_ups_wanted: tokio::sync::Notify::new(),
        })
    }

    /// Whether this server sends on any channel: without one there is nothing for its worker to claim (no
    /// question asked here has a delivery), and claiming another instance's would only fail them.
    pub fn sends_anything(&self) -> bool {
        self.email.is_some() || self.slack.is_some() || self.push.is_some()
    }

    /// Whether this server sends messages it changes once their question is resolved.
    fn follows_up(&self) -> bool {
        self.slack.is_some() || self.push.is_some()
    }

    /// Starts the worker.
    pub fn spawn(self: Arc<Self>, hub: &EventHub) -> tokio::task::JoinHandle<()> {
        let (mut events, _) = hub.subscribe();
        let hub = hub.clone();
        tokio::spawn(async move {
            loop {
                let round = tokio::time::Instant::now();
                // A read first: most questions reach nobody outside Holdpoint, and waking for each of them must not
                // cost a write (on SQLite, one more turn of the one writer for every question asked).
                let next = self.store.next_delivery_due().await;
                if matches!(next, Ok(Some(due)) if due <= now())
                    && let Err(err) = self.send_due().await
                {
                    tracing::warn!(error = %err, "could not claim deliveries; retrying");
                }
                if self.follows_up()
                    && matches!(self.store.follow_ups_due(now()).await, Ok(true))
                    && let Err(err) = self.follow_up_due().await
                {
                    tracing::warn!(error = %err, "could not claim follow-ups; retrying");
                }
                let sleep = match self.store.next_delivery_due().await {
                    Ok(Some(next)) => (next - now()).to_std().unwrap_or(Duration::ZERO).min(MAX_SLEEP),
                    Ok(None) | Err(_) => MAX_SLEEP,
                };
                let wake = tokio::time::sleep_until(round + sleep.max(Duration::from_millis(10)));
                tokio::pin!(wake);
                loop {
                    tokio::select! {
                        // Deliveries this instance wrote: sent at once.
                        () = hub.until_deliveries_queued() => break,
                        // Another instance's change may have made something due (its deliveries, a message to
                        // bring up to date): looked for within COALESCE, so a busy server whose questions reach
                        // nobody outside costs its outbox a few reads a second, not some for every question.
                        event = events.recv() => match event {
                            Ok(event) if self.wakes_for(&event.event_type) => {
                                let soon = wake.deadline().min(round + COALESCE);
                                wake.as_mut().reset(soon);
                            }
                            Ok(_) | Err(RecvError::Lagged(_)) => {}
                            Err(RecvError::Closed) => { (&mut wake).await; break }
                        },
                        () = &mut wake => break,
                        () = self.follow_ups_wanted.notified() => break,
                    }
                }
            }
        })
    }

    /// Whether an event may have made something due: a question asked, its people reminded or it escalated (their
    /// deliveries), or resolved (the messages that asked it, when this server changes them).
    fn wakes_for(&self, event_type: &str) -> bool {
        use app::types::EventType;
        match event_type.parse::<EventType>() {
            Ok(EventType::QuestionAsked | EventType::QuestionReminded | EventType::QuestionEscalated) => true,
            Ok(EventType::QuestionAnswered | EventType::QuestionExpired | EventType::QuestionCancelled) => {
                self.follows_up()
            }
            _ => false,
        }
    }

    /// Claims every sent message due to be brought up to date and starts each follow-up; returns how many.
    pub async fn follow_up_due(self: &Arc<Self>) -> StoreResult<usize> {
        self.claim_and_start(Work::FollowUp).await
    }

    /// Claims every delivery due now and starts sending each; returns how many were claimed.
    pub async fn send_due(self: &Arc<Self>) -> StoreResult<usize> {
        self.claim_and_start(Work::Send).await
    }

    /// Claims, a batch at a time, everything due of one kind of work, and starts each in a task of its own.
    async fn claim_and_start(self: &Arc<Self>, work: Work) -> StoreResult<usize> {
        let mut claimed_in_all = 0;
        loop {
            let at = now();
            let claimed = match work {
                Work::Send => self.store.claim_deliveries(at, at + CLAIM, BATCH).await?,
                Work::FollowUp => self.store.claim_follow_ups(at, at + CLAIM, BATCH).await?,
            };
            claimed_in_all += claimed.len();
            let full = claimed.len() == BATCH as usize;
            for delivery in claimed {
                let outbox = Arc::clone(self);
                tokio::spawn(async move {
                    match work {
                        Work::Send => outbox.attempt(delivery).await,
                        Work::FollowUp => outbox.follow_up(delivery).await,
                    }
                });
            }
            if !full {
                return Ok(claimed_in_all);
            }
        }
    }

    /// Makes one attempt of a claimed delivery and records how it went.
    async fn attempt(&self, mut delivery: DeliveryRow) {
        let outcome = match self.send(&delivery).await {
            Ok(outcome) => outcome,
            Err(err) => DeliveryOutcome::retry(format!("the question could not be read: {err}"), None),
        };
        let at = now();
        let counted = match &outcome {
            DeliveryOutcome::Sent { .. } => {
                delivery.status = DeliveryStatus::Sent;
                delivery.sent_at = Some(at);
                delivery.last_error = None;
                "sent"
            }
            DeliveryOutcome::Retry { reason, after } if at - delivery.created_at < GIVE_UP_AFTER => {
                let asked_for = after.and_then(|wait| chrono::Duration::from_std(wait).ok());
                delivery.status = DeliveryStatus::Retrying;
                delivery.next_attempt_at =
                    at + asked_for.unwrap_or(backoff(self.first_wait, delivery.attempts)).min(LONGEST_WAIT);
                delivery.last_error = Some(reason.clone());
                "retried"
            }
            DeliveryOutcome::Retry { reason, .. } | DeliveryOutcome::Failed { reason, .. } => {
                delivery.status = DeliveryStatus::Failed;
                delivery.last_error = Some(reason.clone());
                "failed"
            }
        };
        delivery.updated_at = at;
        let since_asked =
            (delivery.status == DeliveryStatus::Sent).then(|| (at - delivery.created_at).to_std().unwrap_or_default());
        if let DeliveryOutcome::Sent { reference } = outcome {
            delivery.reference = reference;
        }
        self.metrics.delivery(delivery.channel, counted, since_asked);
        let sent = delivery.status == DeliveryStatus::Sent;
        match self.store.finish_delivery(&delivery).await {
            // It may have been answered while it was sent: the worker looks for messages of resolved questions.
            Ok(true) if sent && self.follows_up() => self.follow_ups_wanted.notify_one(),
            Ok(true) => {}
            Ok(false) => tracing::warn!(delivery = %delivery.id, "a delivery's claim ran out while it was sent"),
            Err(err) => tracing::warn!(delivery = %delivery.id, error = %err, "could not record a delivery's attempt"),
        }
    }

    /// Sends one delivery on its channel.
    async fn send(&self, delivery: &DeliveryRow) -> StoreResult<DeliveryOutcome> {
        let Some(row) = self.store.question(delivery.workspace_id, delivery.question_id).await? else {
            return Ok(DeliveryOutcome::failed("the question no longer exists"));
        };
        if row.status != QuestionStatus::Pending {
            return Ok(DeliveryOutcome::failed(format!("not sent: the question was {} first", row.status)));
        }
        let workspace = self.store.workspace_name(delivery.workspace_id).await?;
        let question = row.to_question(&workspace)?;
        Ok(match delivery.channel {
            Channel::Email => {
                let Some(sender) = &self.email else {
                    return Ok(DeliveryOutcome::failed("email is not configured on this server"));
                };
                let Ok(to) = crate::channels::email::parse_mailbox(&delivery.address) else {
                    return Ok(DeliveryOutcome::failed(format!("{:?} is not an email address", delivery.address)));
                };
                let links = action_links::links_for(
                    &self.keys.action_links,
                    &question,
                    delivery.user_id,
                    Channel::Email,
                    EMAIL_MAX_CHOICES,
                    &self.public_url,
                    now(),
                );
                let mut email = render_question(&question, &links, &question_url(&self.public_url, question.id));
                email.subject = crate::channels::email::subject_for(delivery.cause, &email.subject);
                sender.send(to, &email).await
            }
            Channel::Slack => {
                let Some(slack) = &self.slack else {
                    return Ok(DeliveryOutcome::failed("Slack is not configured on this server"));
                };
                let message = question_message(&question, &question_url(&self.public_url, question.id));
                slack.deliver(&delivery.address, &message).await
            }
            Channel::Push => {
                let links = action_links::links_for(
                    &self.keys.action_links,
                    &question,
                    delivery.user_id,
                    Channel::Push,
                    PUSH_MAX_CHOICES,
                    &self.public_url,
                    now(),
                );
                let payload = notification_payload(&question, &links, &question_url(&self.public_url, question.id));
                self.push_to_browsers(
                    delivery.workspace_id,
                    delivery.user_id,
                    &PushMessage::for_question(&question, &payload, now()),
                )
                .await?
            }
        })
    }

    /// Pushes `message` to every browser the delivery's person subscribed: sent if any browser's push service took
    /// it, retried if one may take it later, failed if none can. A subscription the push service says is gone is
    /// removed, so nothing is pushed to it again.
    async fn push_to_browsers(
        &self,
        workspace_id: uuid::Uuid,
        user_id: uuid::Uuid,
        message: &PushMessage,
    ) -> StoreResult<DeliveryOutcome> {
        let Some(sender) = &self.push else {
            return Ok(DeliveryOutcome::failed("web push is not configured on this server"));
        };
        let subscriptions = self.store.push_subscriptions(workspace_id, user_id).await?;
        let mut sent = false;
        let mut retry: Option<DeliveryOutcome> = None;
        let mut failures = Vec::new();
        for row in subscriptions {
            let subscription = PushSubscription {
                endpoint: row.endpoint.clone(),
                keys: SubscriptionKeys { p256dh: row.p256dh.clone(), auth: row.auth.clone() },
            };
            match sender.send(&subscription, message).await {
                DeliveryOutcome::Sent { .. } => sent = true,
                outcome @ DeliveryOutcome::Retry { .. } => retry = Some(outcome),
                DeliveryOutcome::Failed { reason, address_gone } => {
                    if address_gone {
                        self.store.forget_push_endpoint(workspace_id, user_id, &row.endpoint).await?;
                    }
                    failures.push(reason);
                }
            }
        }
        Ok(match (sent, retry) {
            (true, _) => DeliveryOutcome::Sent { reference: None },
            (false, Some(retry)) => retry,
            (false, None) if failures.is_empty() => DeliveryOutcome::failed("no browser is subscribed any more"),
            (false, None) => DeliveryOutcome::failed(failures.join("; ")),
        })
    }

    /// Brings one claimed message up to date with its resolved question, and records how it went: done (or given
    /// up), or to be tried again later.
    async fn follow_up(&self, mut delivery: DeliveryRow) {
        let (outcome, resolved_at) = match self.resolved_message(&delivery).await {
            Ok(done) => done,
            Err(err) => (DeliveryOutcome::retry(format!("the question could not be read: {err}"), None), None),
        };
        let at = now();
        let since_resolved = resolved_at.map_or(chrono::Duration::zero(), |resolved| at - resolved);
        match outcome {
            DeliveryOutcome::Sent { .. } => {
                delivery.followed_up_at = Some(at);
                self.metrics.delivery(delivery.channel, "updated", None);
            }
            DeliveryOutcome::Retry { reason, after } if since_resolved < GIVE_UP_AFTER => {
                let asked_for = after.and_then(|wait| chrono::Duration::from_std(wait).ok());
                let doubling = since_resolved.max(self.first_wait);
                delivery.next_attempt_at = at + asked_for.unwrap_or(doubling).min(LONGEST_WAIT);
                delivery.last_error = Some(format!("updating the message: {reason}"));
                self.metrics.delivery(delivery.channel, "update_retried", None);
            }
            DeliveryOutcome::Retry { reason, .. } | DeliveryOutcome::Failed { reason, .. } => {
                delivery.followed_up_at = Some(at);
                delivery.last_error = Some(format!("updating the message: {reason}"));
                self.metrics.delivery(delivery.channel, "update_failed", None);
            }
        }
        delivery.updated_at = at;
        match self.store.finish_delivery(&delivery).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(delivery = %delivery.id, "a follow-up's claim ran out while it was sent"),
            Err(err) => tracing::warn!(delivery = %delivery.id, error = %err, "could not record a follow-up"),
        }
    }

    /// Changes a sent message to say how its question was resolved; with when it was.
    async fn resolved_message(
        &self,
        delivery: &DeliveryRow,
    ) -> StoreResult<(DeliveryOutcome, Option<chrono::DateTime<chrono::Utc>>)> {
        let Some(row) = self.store.question(delivery.workspace_id, delivery.question_id).await? else {
            return Ok((DeliveryOutcome::failed("the question no longer exists"), None));
        };
        let workspace = self.store.workspace_name(delivery.workspace_id).await?;
        let question = row.to_question(&workspace)?;
        let outcome = match delivery.channel {
            Channel::Slack => {
                let (Some(slack), Some(at)) =
                    (&self.slack, delivery.reference.as_deref().and_then(MessageRef::from_reference))
                else {
                    return Ok((DeliveryOutcome::failed("no Slack message to update"), question.resolved_at));
                };
                let message = resolved_message(&question, &question_url(&self.public_url, question.id));
                match slack.update_message(&at, &message).await {
                    Ok(()) => DeliveryOutcome::Sent { reference: delivery.reference.clone() },
                    Err(error) => error.outcome(),
                }
            }
            Channel::Push => {
                let payload = resolved_payload(&question, &question_url(&self.public_url, question.id));
                // Kept a day: a deadline already passed would give the replacement no time to arrive.
                let message = PushMessage {
                    ttl: Duration::from_secs(24 * 3600),
                    ..PushMessage::for_question(&question, &payload, now())
                };
                self.push_to_browsers(delivery.workspace_id, delivery.user_id, &message).await?
            }
            Channel::Email => DeliveryOutcome::failed("an email is not changed once sent"),
        };
        Ok((outcome, question.resolved_at))
    }
}

/// A test message to one person on one channel ("send me a test" in Settings), sent at once rather than through the
/// deliveries: the person is waiting for it, and it answers nothing.
impl Outbox {
    /// Sends `member` a test message on `channel`: to their email address, their Slack user, or every browser they
    /// subscribed. `Err` says why it could not be tried (the channel is not configured here, or the member has no
    /// address on it); `Ok` says how the attempt went.
    pub async fn send_test(
        &self,
        member: &MemberRow,
        workspace_id: uuid::Uuid,
        channel: Channel,
    ) -> Result<DeliveryOutcome, String> {
        let settings = format!("{}/settings", self.public_url.trim_end_matches('/'));
        let title = "Holdpoint: a test message";
        let text = format!(
            "This is the test message you asked for: questions for you will reach you here.\n\nYour settings: {settings}"
        );
        match channel {
            Channel::Email => {
                let sender = self.email.as_ref().ok_or("email is not configured on this server")?;
                let address = member.email.as_deref().ok_or("you have no email address: set one first")?;
                let to = crate::channels::email::parse_mailbox(address).map_err(|e| e.to_string())?;
                let html = format!(
                    "<p>This is the test message you asked for: questions for you will reach you here.</p>\
                     <p><a href=\"{}\">Your settings</a></p>",
                    html_escape::encode_double_quoted_attribute(&settings)
                );
                let email = crate::channels::email::RenderedEmail { subject: title.to_owned(), text, html };
                Ok(sender.send(to, &email).await)
            }
            Channel::Slack => {
                let slack = self.slack.as_ref().ok_or("Slack is not configured on this server")?;
                let user = member.slack_user_id.as_deref().ok_or("you have no Slack member id: set one first")?;
                let message = crate::channels::slack::SlackMessage {
                    text: title.to_owned(),
                    blocks: vec![serde_json::json!({"type": "section", "text": {"type": "mrkdwn",
                        "text": crate::channels::slack::escape_mrkdwn(&text)}})],
                };
                Ok(slack.deliver(user, &message).await)
            }
            Channel::Push => {
                if self.push.is_none() {
                    return Err("web push is not configured on this server".into());
                }
                let browsers = self.store.push_subscriptions(workspace_id, member.user_id).await;
                if browsers.map_err(|e| e.to_string())?.is_empty() {
                    return Err("you have subscribed no browser: turn push on in Settings first".into());
                }
                let payload = serde_json::json!({"type": "test", "tag": "holdpoint-test", "title": title,
                    "body": "Push notifications reach this browser.", "actions": [], "url": settings,
                    "require_interaction": false});
                let message = PushMessage {
                    payload: payload.to_string().into_bytes(),
                    ttl: Duration::from_secs(3600),
                    urgency: crate::channels::web_push::PushUrgency::Normal,
                    topic: None,
                };
                self.push_to_browsers(workspace_id, member.user_id, &message).await.map_err(|e| e.to_string())
            }
        }
    }
}

/// What the worker does with what it claims.
#[derive(Debug, Clone, Copy)]
enum Work {
    /// Sends a delivery.
    Send,
    /// Brings a sent message up to date with its resolved question.
    FollowUp,
}

/// The wait before attempt `attempts + 1`: `first`, then twice as long each time, up to two hours.
fn backoff(first: chrono::Duration, attempts: i32) -> chrono::Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1)).unwrap_or(0).min(16);
    (first * 2_i32.pow(doublings)).min(LONGEST_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_ever_longer_up_to_two_hours() {
        let first = chrono::Duration::seconds(10);
        assert_eq!(backoff(first, 1), chrono::Duration::seconds(10));
        assert_eq!(backoff(first, 2), chrono::Duration::seconds(20));
        assert_eq!(backoff(first, 4), chrono::Duration::seconds(80));
        assert_eq!(backoff(first, 12), LONGEST_WAIT);
        assert_eq!(backoff(first, 1000), LONGEST_WAIT);
    }
}
