//! Webhooks: a workspace's subscriptions and its callback secret, which endpoints each event goes to, and
//! what becomes of a delivery after each attempt (sent, tried again later, given up; an endpoint that said it is gone
//! disabled). The worker that follows the event log and sends is the server's `workers::webhook_sender`.

use std::collections::HashSet;

use crate::store::Json;
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use uuid::Uuid;

use holdpoint_types::{
    CallbackSecret, CreatedWebhook, DeliveryStatus, EventType, NewWebhook, Webhook, WebhookDelivery,
    WebhookDeliveryPage, WebhookList, WebhookPatch,
};

use crate::actions;
use crate::channels::DeliveryOutcome;
use crate::channels::webhooks::{Attempt, UrlPolicy, new_secret};
use crate::credentials::Caller;
use crate::error::AppError;
use crate::store::{
    AuditActor, CallbackSecretRow, HubEvent, NewAuditEntry, Store, WebhookDeliveryRow, WebhookRow, now,
};
use crate::validation::FieldErrors;

/// How long a delivery is tried before it is given up.
pub const GIVE_UP_AFTER: Duration = Duration::days(3);
/// The longest wait between two attempts.
pub const LONGEST_WAIT: Duration = Duration::hours(1);
/// The longest description.
const DESCRIPTION_MAX: usize = 200;
/// Subscriptions a workspace may have.
const WEBHOOKS_MAX: usize = 50;
/// The most deliveries a page lists.
pub const MAX_DELIVERY_PAGE: u32 = 200;
/// The `type` of a test message.
pub const TEST_EVENT: &str = "webhook_test";
/// What only an admin may do with webhooks, as a refusal says it.
const MANAGE_WEBHOOKS: &str = "manage webhooks";

/// The wait after attempt `attempts` failed: about 1 s, 5 s, 30 s, then doubling, up to an hour.
pub fn backoff(attempts: i32) -> Duration {
    match attempts {
        ..=1 => Duration::seconds(1),
        2 => Duration::seconds(5),
        3 => Duration::seconds(30),
        n => (Duration::seconds(30) * 2_i32.pow(u32::try_from(n - 3).unwrap_or(0).min(12))).min(LONGEST_WAIT),
    }
}

/// A subscription as the API shows it.
pub fn wire(row: &WebhookRow) -> Webhook {
    Webhook {
        id: row.id,
        url: row.url.clone(),
        events: row.events.0.clone(),
        description: row.description.clone(),
        created_at: row.created_at,
        updated_at: row.updated_at,
        disabled_at: row.disabled_at,
        disabled_reason: row.disabled_reason.clone(),
    }
}

/// A delivery as the API shows it.
pub fn wire_delivery(row: &WebhookDeliveryRow) -> WebhookDelivery {
    let waiting = matches!(row.status, DeliveryStatus::Queued | DeliveryStatus::Retrying);
    WebhookDelivery {
        id: row.id,
        webhook_id: row.webhook_id,
        url: row.url.clone(),
        message_id: row.message_id.clone(),
        event_type: row.event_type.clone(),
        status: row.status,
        attempts: u32::try_from(row.attempts).unwrap_or(0),
        next_attempt_at: waiting.then_some(row.next_attempt_at),
        last_error: row.last_error.clone(),
        response_status: row.response_status.and_then(|status| u16::try_from(status).ok()),
        sent_at: row.sent_at,
        created_at: row.created_at,
        body: serde_json::from_str(&row.body).unwrap_or(serde_json::Value::Null),
    }
}

fn audit_entry(
    caller: &Caller,
    action: &str,
    subject_type: &str,
    subject_id: String,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
    at: DateTime<Utc>,
) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id: caller.workspace_id(),
        actor: AuditActor::from(caller),
        action: action.into(),
        subject_type: subject_type.into(),
        subject_id: Some(subject_id),
        before,
        after,
        diff: None,
        created_at: at,
    }
}

/// Checks the fields a subscription is made of.
async fn check_fields(
    policy: UrlPolicy,
    url: Option<&str>,
    events: Option<&[EventType]>,
    description: Option<&str>,
    errors: &mut FieldErrors,
) {
    if let Some(url) = url
        && let Err(problem) = policy.check(url).await
    {
        errors.add("url", problem);
    }
    if let Some(events) = events {
        if events.is_empty() {
            errors.add("events", "name at least one event type");
        }
        if events.iter().collect::<HashSet<_>>().len() != events.len() {
            errors.add("events", "an event type is named twice");
        }
    }
    if let Some(description) = description
        && description.chars().count() > DESCRIPTION_MAX
    {
        errors.add("description", format!("at most {DESCRIPTION_MAX} characters"));
    }
}

/// A workspace's subscriptions (admins).
pub async fn list(store: &dyn Store, caller: &Caller) -> Result<WebhookList, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    let rows = store.webhooks(caller.workspace_id()).await?;
    Ok(WebhookList { items: rows.iter().map(wire).collect() })
}

/// One subscription (admins); 404 if it is not the caller's workspace's.
pub async fn get(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<Webhook, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    Ok(wire(&find(store, caller, id).await?))
}

async fn find(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<WebhookRow, AppError> {
    store.webhook(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("webhook"))
}

/// Subscribes a URL to a workspace's events (admins); the secret is in the answer, and nowhere else ever after.
pub async fn create(
    store: &dyn Store,
    caller: &Caller,
    policy: UrlPolicy,
    input: NewWebhook,
) -> Result<CreatedWebhook, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    let mut errors = FieldErrors::default();
    check_fields(policy, Some(&input.url), Some(&input.events), Some(&input.description), &mut errors).await;
    if store.webhooks(caller.workspace_id()).await?.len() >= WEBHOOKS_MAX {
        errors.add("url", format!("a workspace has at most {WEBHOOKS_MAX} webhooks"));
    }
    errors.into_result("the webhook")?;
    let at = now();
    let row = WebhookRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        url: input.url,
        events: Json(input.events),
        description: input.description.trim().to_owned(),
        secret: new_secret(),
        created_at: at,
        updated_at: at,
        disabled_at: None,
        disabled_reason: None,
    };
    let webhook = wire(&row);
    let audit =
        audit_entry(caller, actions::WEBHOOK_CREATED, "webhook", row.id.to_string(), None, Some(json!(webhook)), at);
    store.create_webhook(&row, &audit).await?;
    Ok(CreatedWebhook { webhook, secret: row.secret })
}

/// Changes a subscription's URL, events, description, or whether it is sent to (admins).
pub async fn update(
    store: &dyn Store,
    caller: &Caller,
    policy: UrlPolicy,
    id: Uuid,
    patch: WebhookPatch,
) -> Result<Webhook, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    let before = find(store, caller, id).await?;
    let mut errors = FieldErrors::default();
    check_fields(policy, patch.url.as_deref(), patch.events.as_deref(), patch.description.as_deref(), &mut errors)
        .await;
    errors.into_result("the webhook")?;
    let at = now();
    let mut row = before.clone();
    if let Some(url) = patch.url {
        row.url = url;
    }
    if let Some(events) = patch.events {
        row.events = Json(events);
    }
    if let Some(description) = patch.description {
        row.description = description.trim().to_owned();
    }
    match patch.disabled {
        Some(true) if row.disabled_at.is_none() => {
            row.disabled_at = Some(at);
            row.disabled_reason = Some(format!("disabled by {}", caller.principal.name));
        }
        Some(false) => {
            row.disabled_at = None;
            row.disabled_reason = None;
        }
        _ => {}
    }
    row.updated_at = at;
    let audit = audit_entry(
        caller,
        actions::WEBHOOK_CHANGED,
        "webhook",
        id.to_string(),
        Some(json!(wire(&before))),
        Some(json!(wire(&row))),
        at,
    );
    if !store.update_webhook(&row, Some(&audit)).await? {
        return Err(AppError::NotFound("webhook"));
    }
    Ok(wire(&row))
}

/// Removes a subscription with everything queued for it (admins).
pub async fn delete(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<(), AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    let before = find(store, caller, id).await?;
    let at = now();
    let audit =
        audit_entry(caller, actions::WEBHOOK_DELETED, "webhook", id.to_string(), Some(json!(wire(&before))), None, at);
    if !store.delete_webhook(caller.workspace_id(), id, &audit).await? {
        return Err(AppError::NotFound("webhook"));
    }
    Ok(())
}

/// Queues a test message to a subscription (admins), behind what its queue holds already; returns the delivery.
pub async fn queue_test(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<WebhookDeliveryRow, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    let webhook = find(store, caller, id).await?;
    if webhook.disabled_at.is_some() {
        return Err(AppError::Conflict {
            message: "the webhook is disabled: enable it first".into(),
            details: Some(json!({ "disabled_reason": webhook.disabled_reason })),
        });
    }
    let at = now();
    let data =
        json!({ "webhook_id": id, "message": "A test message from Holdpoint: this endpoint receives its events." });
    // Placed after the events so far in the endpoint's queue.
    let event = HubEvent {
        id: store.last_event_id().await?,
        workspace_id: webhook.workspace_id,
        event_type: TEST_EVENT.into(),
        project: None,
        run_id: None,
        question_id: None,
        data: data.to_string(),
        created_at: at,
    };
    let mut delivery = delivery_to(&webhook.id.to_string(), Some(webhook.id), &webhook.url, &event);
    delivery.message_id = format!("test_{}", Uuid::now_v7().simple());
    store.queue_webhook_deliveries(std::slice::from_ref(&delivery), None).await?;
    Ok(delivery)
}

/// A subscription's deliveries, newest first (admins).
pub async fn deliveries(
    store: &dyn Store,
    caller: &Caller,
    id: Uuid,
    cursor: Option<&str>,
    limit: u32,
) -> Result<WebhookDeliveryPage, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    find(store, caller, id).await?;
    let before = cursor.map(crate::notifications::parse_cursor).transpose()?;
    let mut rows = store.webhook_deliveries(caller.workspace_id(), id, before, limit + 1).await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_cursor =
        more.then(|| rows.last().map(|last| format!("{}_{}", last.created_at.timestamp_micros(), last.id))).flatten();
    Ok(WebhookDeliveryPage { items: rows.iter().map(wire_delivery).collect(), next_cursor })
}

/// One delivery of a subscription (admins).
pub async fn delivery(
    store: &dyn Store,
    caller: &Caller,
    webhook_id: Uuid,
    id: Uuid,
) -> Result<WebhookDeliveryRow, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    store
        .webhook_delivery(caller.workspace_id(), id)
        .await?
        .filter(|row| row.webhook_id == Some(webhook_id))
        .ok_or(AppError::NotFound("delivery"))
}

/// Queues a delivery of a subscription again, now, for another three days (admins); 409 while it is being sent.
pub async fn redeliver(
    store: &dyn Store,
    caller: &Caller,
    webhook_id: Uuid,
    id: Uuid,
) -> Result<WebhookDelivery, AppError> {
    let before = delivery(store, caller, webhook_id, id).await?;
    let at = now();
    let audit = audit_entry(
        caller,
        actions::WEBHOOK_REDELIVERED,
        "webhook_delivery",
        id.to_string(),
        Some(json!({ "status": before.status, "attempts": before.attempts, "message_id": before.message_id })),
        Some(json!({ "status": DeliveryStatus::Queued })),
        at,
    );
    if !store.redeliver_webhook(caller.workspace_id(), webhook_id, id, at, at + GIVE_UP_AFTER, &audit).await? {
        return Err(AppError::Conflict {
            message: "the delivery is being sent right now: try again once this attempt is over".into(),
            details: Some(json!({ "status": before.status })),
        });
    }
    let row = delivery(store, caller, webhook_id, id).await?;
    Ok(wire_delivery(&row))
}

/// The workspace's callback secret (admins), made on first use.
pub async fn callback_secret(store: &dyn Store, caller: &Caller) -> Result<CallbackSecret, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    let row = callback_secret_of(store, caller.workspace_id()).await?;
    Ok(CallbackSecret { secret: row.secret, created_at: row.created_at })
}

/// A workspace's callback secret, made (once, whichever instance is first) when it has none.
pub async fn callback_secret_of(store: &dyn Store, workspace_id: Uuid) -> Result<CallbackSecretRow, AppError> {
    if let Some(row) = store.callback_secret(workspace_id).await? {
        return Ok(row);
    }
    let first = CallbackSecretRow { workspace_id, secret: new_secret(), created_at: now() };
    Ok(store.save_callback_secret(&first, None).await?)
}

/// Replaces the workspace's callback secret with a new one (admins): what is sent from now on is signed with it.
pub async fn rotate_callback_secret(store: &dyn Store, caller: &Caller) -> Result<CallbackSecret, AppError> {
    caller.require_admin(MANAGE_WEBHOOKS)?;
    let at = now();
    let row = CallbackSecretRow { workspace_id: caller.workspace_id(), secret: new_secret(), created_at: at };
    let audit = audit_entry(
        caller,
        actions::CALLBACK_SECRET_ROTATED,
        "workspace",
        caller.workspace_id().to_string(),
        None,
        None,
        at,
    );
    let saved = store.save_callback_secret(&row, Some(&audit)).await?;
    Ok(CallbackSecret { secret: saved.secret, created_at: saved.created_at })
}

/// The body of a message: `{"type", "timestamp", "data"}`, `data` as the event stream carries it.
pub fn body(event_type: &str, at: DateTime<Utc>, data: &str) -> String {
    let timestamp = at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    format!("{{\"type\":{},\"timestamp\":\"{timestamp}\",\"data\":{data}}}", json!(event_type))
}

/// The delivery of `event` to one endpoint, queued now.
fn delivery_to(endpoint: &str, webhook_id: Option<Uuid>, url: &str, event: &HubEvent) -> WebhookDeliveryRow {
    let at = now();
    WebhookDeliveryRow {
        id: Uuid::now_v7(),
        workspace_id: event.workspace_id,
        webhook_id,
        endpoint: endpoint.to_owned(),
        url: url.to_owned(),
        sequence: event.id,
        message_id: event.id.to_string(),
        event_type: event.event_type.clone(),
        body: body(&event.event_type, event.created_at, &event.data),
        status: DeliveryStatus::Queued,
        attempts: 0,
        next_attempt_at: at,
        claimed_until: None,
        last_error: None,
        response_status: None,
        sent_at: None,
        created_at: at,
        updated_at: at,
        give_up_at: at + GIVE_UP_AFTER,
    }
}

/// The question's `callback_url` in a question event's data, if it has one. Most questions have none: their data
/// is not parsed.
fn callback_url(event: &HubEvent) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Data {
        question: Callback,
    }
    #[derive(serde::Deserialize)]
    struct Callback {
        callback_url: Option<String>,
    }
    if event.question_id.is_none() || !event.data.contains("\"callback_url\":") {
        return None;
    }
    serde_json::from_str::<Data>(&event.data).ok()?.question.callback_url
}

/// Where `event` goes: each enabled subscription of its workspace that lists its type and existed when it happened,
/// and its question's callback URL.
pub fn deliveries_for(event: &HubEvent, webhooks: &[WebhookRow]) -> Vec<WebhookDeliveryRow> {
    let mut deliveries = Vec::new();
    if let Ok(event_type) = event.event_type.parse::<EventType>() {
        for webhook in webhooks {
            if webhook.disabled_at.is_none()
                && webhook.created_at <= event.created_at
                && webhook.events.0.contains(&event_type)
            {
                deliveries.push(delivery_to(&webhook.id.to_string(), Some(webhook.id), &webhook.url, event));
            }
        }
    }
    if let Some(url) = callback_url(event) {
        deliveries.push(delivery_to(&url, None, &url, event));
    }
    deliveries
}

/// Whether `event` may go anywhere: its workspace has a subscription, or it names a callback URL. Cheap, so the
/// events of workspaces without webhooks cost nothing more.
pub fn may_go_anywhere(event: &HubEvent, webhooks: &[WebhookRow]) -> bool {
    !webhooks.is_empty() || (event.question_id.is_some() && event.data.contains("\"callback_url\":"))
}

/// What an attempt leaves of a delivery: sent; tried again after the backoff (or the receiver's `Retry-After`, up
/// to an hour) unless that is past its give-up time; or given up.
pub fn after_attempt(mut delivery: WebhookDeliveryRow, attempt: &Attempt, at: DateTime<Utc>) -> WebhookDeliveryRow {
    delivery.updated_at = at;
    delivery.response_status = attempt.status.map(i32::from);
    match &attempt.outcome {
        DeliveryOutcome::Sent { .. } => {
            delivery.status = DeliveryStatus::Sent;
            delivery.sent_at = Some(at);
            delivery.last_error = None;
        }
        DeliveryOutcome::Retry { reason, after } => {
            let asked_for = after.and_then(|wait| Duration::from_std(wait).ok());
            let next = at + asked_for.unwrap_or_else(|| backoff(delivery.attempts)).min(LONGEST_WAIT);
            delivery.last_error = Some(reason.clone());
            if next > delivery.give_up_at {
                delivery.status = DeliveryStatus::Failed;
            } else {
                delivery.status = DeliveryStatus::Retrying;
                delivery.next_attempt_at = next;
            }
        }
        DeliveryOutcome::Failed { reason, .. } => {
            delivery.status = DeliveryStatus::Failed;
            delivery.last_error = Some(reason.clone());
        }
    }
    delivery
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_start_within_seconds_and_end_an_hour_apart() {
        let waits: Vec<i64> = (1..=10).map(|n| backoff(n).num_seconds()).collect();
        assert_eq!(waits, [1, 5, 30, 60, 120, 240, 480, 960, 1920, 3600]);
        assert_eq!(backoff(1000), LONGEST_WAIT);
    }

    #[test]
    fn the_body_carries_the_events_data_as_it_is() {
        let at = DateTime::parse_from_rfc3339("2026-11-27T10:00:00.5Z").unwrap().to_utc();
        let body = body("question_asked", at, r#"{"question":{"id":"x"}}"#);
        assert_eq!(
            body,
            r#"{"type":"question_asked","timestamp":"2026-11-27T10:00:00.500000Z","data":{"question":{"id":"x"}}}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["data"]["question"]["id"], "x");
    }
}
