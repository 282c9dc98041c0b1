//! `/webhooks`: a workspace's webhook subscriptions, their deliveries, and the secret questions' callbacks are signed
//! with. Admins only.

use std::time::Duration;

use app::types::{
    CallbackSecret, CreatedWebhook, DeliveryStatus, NewWebhook, Webhook, WebhookDelivery, WebhookDeliveryPage,
    WebhookList, WebhookPatch,
};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::state::AppState;
use crate::webhooks;

/// How long `POST /webhooks/{id}/test` waits for the test message's first attempt.
const TEST_WAIT: Duration = Duration::from_secs(5);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(callback_secret, rotate_callback_secret))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(test_webhook))
        .routes(routes!(list_deliveries))
        .routes(routes!(redeliver))
}

fn webhook_id(id: &str) -> Result<Uuid, AppError> {
    Uuid::parse_str(id).map_err(|_| AppError::NotFound("webhook"))
}

/// `GET /webhooks`: the workspace's subscriptions, oldest first.
#[utoipa::path(get, path = "/webhooks", tag = "webhooks",
    responses((status = 200, description = "The subscriptions", body = WebhookList), ErrorResponses))]
async fn list_webhooks(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<WebhookList>> {
    Ok(ApiJson(webhooks::list(state.store.as_ref(), &caller).await?))
}

/// `POST /webhooks`: subscribes a URL to the workspace's events of the listed types. The answer carries the signing
/// secret, shown this once.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks", request_body = NewWebhook,
    responses((status = 201, description = "Subscribed; `secret` verifies its deliveries", body = CreatedWebhook), ErrorResponses))]
async fn create_webhook(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(input): ApiJson<NewWebhook>,
) -> ApiResult<(StatusCode, ApiJson<CreatedWebhook>)> {
    let policy = state.config.channels.webhook_urls();
    let created = webhooks::create(state.store.as_ref(), &caller, policy, input).await?;
    Ok((StatusCode::CREATED, ApiJson(created)))
}

/// `GET /webhooks/{id}`: one subscription (without its secret).
#[utoipa::path(get, path = "/webhooks/{id}", tag = "webhooks",
    params(("id" = Uuid, Path, description = "The subscription's id")),
    responses((status = 200, description = "The subscription", body = Webhook), ErrorResponses))]
async fn get_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<Webhook>> {
    Ok(ApiJson(webhooks::get(state.store.as_ref(), &caller, webhook_id(&id)?).await?))
}

/// `PATCH /webhooks/{id}`: changes its URL, events or description, or disables (`"disabled": true`) or enables it
/// again; enabled, it sends its queue from where it stopped.
#[utoipa::path(patch, path = "/webhooks/{id}", tag = "webhooks", request_body = WebhookPatch,
    params(("id" = Uuid, Path, description = "The subscription's id")),
    responses((status = 200, description = "The subscription as changed", body = Webhook), ErrorResponses))]
async fn update_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(patch): ApiJson<WebhookPatch>,
) -> ApiResult<ApiJson<Webhook>> {
    let policy = state.config.channels.webhook_urls();
    let updated = webhooks::update(state.store.as_ref(), &caller, policy, webhook_id(&id)?, patch).await?;
    state.webhooks_queued.notify_one();
    Ok(ApiJson(updated))
}

/// `DELETE /webhooks/{id}`: removes the subscription and what was queued for it.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks",
    params(("id" = Uuid, Path, description = "The subscription's id")),
    responses((status = 204, description = "Removed"), ErrorResponses))]
async fn delete_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    webhooks::delete(state.store.as_ref(), &caller, webhook_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /webhooks/{id}/test`: sends a `webhook_test` message through the subscription's queue and answers with the
/// delivery once its first attempt is over (or after 5 s, still waiting).
#[utoipa::path(post, path = "/webhooks/{id}/test", tag = "webhooks",
    params(("id" = Uuid, Path, description = "The subscription's id")),
    responses((status = 200, description = "The test message's delivery", body = WebhookDelivery), ErrorResponses))]
async fn test_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<WebhookDelivery>> {
    let id = webhook_id(&id)?;
    let queued = webhooks::queue_test(state.store.as_ref(), &caller, id).await?;
    state.webhooks_queued.notify_one();
    let waited_until = tokio::time::Instant::now() + TEST_WAIT;
    loop {
        let row = webhooks::delivery(state.store.as_ref(), &caller, id, queued.id).await?;
        let attempted = row.attempts > 0 && row.claimed_until.is_none();
        if attempted || row.status != DeliveryStatus::Queued || tokio::time::Instant::now() >= waited_until {
            return Ok(ApiJson(webhooks::wire_delivery(&row)));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The query string of `GET /webhooks/{id}/deliveries`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct DeliveriesQuery {
    /// A page's `next_cursor`, for the page after it.
    cursor: Option<String>,
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
}

/// `GET /webhooks/{id}/deliveries`: what was sent to the subscription, and what waits, newest first.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks", params(("id" = Uuid, Path, description = "The subscription's id"), DeliveriesQuery),
    responses((status = 200, description = "A page of deliveries", body = WebhookDeliveryPage), ErrorResponses))]
async fn list_deliveries(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<DeliveriesQuery>,
) -> ApiResult<ApiJson<WebhookDeliveryPage>> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=webhooks::MAX_DELIVERY_PAGE).contains(&limit) {
        return Err(AppError::invalid_field("limit", format!("must be 1..={}", webhooks::MAX_DELIVERY_PAGE)));
    }
    let page =
        webhooks::deliveries(state.store.as_ref(), &caller, webhook_id(&id)?, query.cursor.as_deref(), limit).await?;
    Ok(ApiJson(page))
}

/// `POST /webhooks/{id}/deliveries/{delivery_id}/redeliver`: queues a delivery again, now, with the same
/// `webhook-id`, to be tried for another three days.
#[utoipa::path(post, path = "/webhooks/{id}/deliveries/{delivery_id}/redeliver", tag = "webhooks",
    params(("id" = Uuid, Path, description = "The subscription's id"), ("delivery_id" = Uuid, Path, description = "The delivery's id")),
    responses((status = 202, description = "Queued again", body = WebhookDelivery), ErrorResponses))]
async fn redeliver(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, delivery_id)): Path<(String, String)>,
) -> ApiResult<(StatusCode, ApiJson<WebhookDelivery>)> {
    let delivery_id = Uuid::parse_str(&delivery_id).map_err(|_| AppError::NotFound("delivery"))?;
    let queued = webhooks::redeliver(state.store.as_ref(), &caller, webhook_id(&id)?, delivery_id).await?;
    state.webhooks_queued.notify_one();
    Ok((StatusCode::ACCEPTED, ApiJson(queued)))
}

/// `GET /webhooks/callback-secret`: the secret the events sent to questions' `callback_url`s are signed with.
#[utoipa::path(get, path = "/webhooks/callback-secret", tag = "webhooks",
    responses((status = 200, description = "The workspace's callback secret", body = CallbackSecret), ErrorResponses))]
async fn callback_secret(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<CallbackSecret>> {
    Ok(ApiJson(webhooks::callback_secret(state.store.as_ref(), &caller).await?))
}

/// `POST /webhooks/callback-secret`: replaces the callback secret; what is sent from now on is signed with the new one.
#[utoipa::path(post, path = "/webhooks/callback-secret", tag = "webhooks",
    responses((status = 200, description = "The new callback secret", body = CallbackSecret), ErrorResponses))]
async fn rotate_callback_secret(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<CallbackSecret>> {
    Ok(ApiJson(webhooks::rotate_callback_secret(state.store.as_ref(), &caller).await?))
}
