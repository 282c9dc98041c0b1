//! `/notifications`: a person's notification center; `/questions/{id}/deliveries`: where the outbox is
//! with a question; `/me/push-subscriptions` and `/push/public-key`: the browsers a person subscribed to web pushes;
//! `/escalation-policies`: when a workspace's unanswered questions are reminded and escalated.

use app::types::{
    ChannelHealthList, DeliveryPage, EscalationPolicies, NewPushSubscription, NotificationPage, PushPublicKey,
    PushSubscriptionInfo, PushSubscriptionList, TestMessageOutcome, TestMessageRequest,
};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::notifications;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_notifications))
        .routes(routes!(mark_read))
        .routes(routes!(mark_all_read))
        .routes(routes!(list_deliveries))
        .routes(routes!(push_public_key))
        .routes(routes!(list_push_subscriptions, subscribe_browser))
        .routes(routes!(unsubscribe_browser))
        .routes(routes!(channel_health))
        .routes(routes!(send_test_message))
        .routes(routes!(escalation_policies, replace_escalation_policies))
}

/// `GET /escalation-policies`: the workspace's escalation policies, by kind and urgency. Any member.
#[utoipa::path(get, path = "/escalation-policies", tag = "notifications",
    responses((status = 200, description = "The workspace's policies", body = EscalationPolicies), ErrorResponses))]
async fn escalation_policies(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<EscalationPolicies>> {
    Ok(ApiJson(crate::escalation::policies(state.store.as_ref(), &caller).await?))
}

/// `PUT /escalation-policies`: replaces the workspace's escalation policies (at most one per kind and urgency). They
/// apply to questions asked from then on. Admins only.
#[utoipa::path(put, path = "/escalation-policies", tag = "notifications", request_body = EscalationPolicies,
    responses((status = 200, description = "The policies as stored", body = EscalationPolicies), ErrorResponses))]
async fn replace_escalation_policies(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(policies): ApiJson<EscalationPolicies>,
) -> ApiResult<ApiJson<EscalationPolicies>> {
    let bounds = state.config.timeout_bounds();
    Ok(ApiJson(crate::escalation::replace_policies(state.store.as_ref(), &caller, bounds, policies).await?))
}

/// The query string of `GET /notifications`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct NotificationsQuery {
    /// Only those not read yet.
    #[serde(default)]
    unread: bool,
    /// A page's `next_cursor`, for the page after it.
    cursor: Option<String>,
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
}

/// `GET /notifications`: the caller's notifications, newest first, with the unread count. People only.
#[utoipa::path(get, path = "/notifications", tag = "notifications", params(NotificationsQuery),
    responses((status = 200, description = "A page of the caller's notifications", body = NotificationPage), ErrorResponses))]
async fn list_notifications(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<NotificationsQuery>,
) -> ApiResult<ApiJson<NotificationPage>> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=notifications::MAX_NOTIFICATION_PAGE).contains(&limit) {
        return Err(AppError::invalid_field("limit", format!("must be 1..={}", notifications::MAX_NOTIFICATION_PAGE)));
    }
    let page =
        notifications::my_notifications(state.store.as_ref(), &caller, query.unread, query.cursor.as_deref(), limit)
            .await?;
    Ok(ApiJson(page))
}

/// `POST /notifications/{id}/read`: marks one of the caller's notifications read (again: no change).
#[utoipa::path(post, path = "/notifications/{id}/read", tag = "notifications",
    params(("id" = Uuid, Path, description = "The notification's id")),
    responses((status = 204, description = "Read"), ErrorResponses))]
async fn mark_read(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound("notification"))?;
    notifications::mark_read(state.store.as_ref(), &caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// How many notifications a `read-all` marked.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
struct Marked {
    marked: u64,
}

/// `POST /notifications/read-all`: marks every unread notification of the caller read.
#[utoipa::path(post, path = "/notifications/read-all", tag = "notifications",
    responses((status = 200, description = "How many were unread", body = Marked), ErrorResponses))]
async fn mark_all_read(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<Marked>> {
    Ok(ApiJson(Marked { marked: notifications::mark_all_read(state.store.as_ref(), &caller).await? }))
}

/// `GET /questions/{id}/deliveries`: each notification of the question on each channel, and how far it got.
#[utoipa::path(get, path = "/questions/{id}/deliveries", tag = "notifications",
    params(("id" = Uuid, Path, description = "The question's id")),
    responses((status = 200, description = "The question's deliveries, oldest first", body = DeliveryPage), ErrorResponses))]
async fn list_deliveries(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<DeliveryPage>> {
    let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound("question"))?;
    Ok(ApiJson(notifications::deliveries_of(state.store.as_ref(), &caller, id).await?))
}

/// `GET /push/public-key`: the key a browser subscribes with (`applicationServerKey`), and whether this server pushes.
#[utoipa::path(get, path = "/push/public-key", tag = "notifications",
    responses((status = 200, description = "The server's VAPID public key", body = PushPublicKey), ErrorResponses))]
async fn push_public_key(State(state): State<AppState>, _caller: Caller) -> ApiJson<PushPublicKey> {
    ApiJson(notifications::push_public_key(&state.channel_keys, &state.sends_on))
}

/// `GET /me/push-subscriptions`: the browsers the caller subscribed. People only.
#[utoipa::path(get, path = "/me/push-subscriptions", tag = "notifications",
    responses((status = 200, description = "The caller's subscribed browsers", body = PushSubscriptionList), ErrorResponses))]
async fn list_push_subscriptions(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<ApiJson<PushSubscriptionList>> {
    Ok(ApiJson(notifications::my_push_subscriptions(state.store.as_ref(), &caller).await?))
}

/// `POST /me/push-subscriptions`: subscribes one of the caller's browsers, with what `PushSubscription.toJSON()`
/// gives; the same browser again takes its new keys. An endpoint at a private, loopback or other special-purpose
/// address is refused (422) unless the server allows it (`HOLDPOINT_PUSH_ALLOW_PRIVATE`).
#[utoipa::path(post, path = "/me/push-subscriptions", tag = "notifications", request_body = NewPushSubscription,
    responses((status = 201, description = "Subscribed", body = PushSubscriptionInfo), ErrorResponses))]
async fn subscribe_browser(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(new): ApiJson<NewPushSubscription>,
) -> ApiResult<(StatusCode, ApiJson<PushSubscriptionInfo>)> {
    let endpoints = state.config.channels.push_endpoints();
    let info = notifications::subscribe_browser(state.store.as_ref(), &caller, &state.sends_on, new, endpoints).await?;
    Ok((StatusCode::CREATED, ApiJson(info)))
}

/// `DELETE /me/push-subscriptions/{id}`: unsubscribes one of the caller's browsers.
#[utoipa::path(delete, path = "/me/push-subscriptions/{id}", tag = "notifications",
    params(("id" = Uuid, Path, description = "The subscription's id")),
    responses((status = 204, description = "Unsubscribed"), ErrorResponses))]
async fn unsubscribe_browser(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound("push subscription"))?;
    notifications::unsubscribe_browser(state.store.as_ref(), &caller, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /channels`: how each channel is doing in the workspace — configured, last sent, last failure and why, how
/// many deliveries wait. Admins only.
#[utoipa::path(get, path = "/channels", tag = "notifications",
    responses((status = 200, description = "Each channel's health", body = ChannelHealthList), ErrorResponses))]
async fn channel_health(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<ChannelHealthList>> {
    Ok(ApiJson(notifications::channel_health(state.store.as_ref(), &caller, &state.sends_on).await?))
}

/// `POST /me/notifications/test`: sends the caller a test message on a channel now, to their address there (every
/// subscribed browser, for push), and says how it went; 409 when it cannot be tried (the channel is not configured,
/// or the caller has no address on it). People only.
#[utoipa::path(post, path = "/me/notifications/test", tag = "notifications", request_body = TestMessageRequest,
    responses((status = 200, description = "How the attempt went", body = TestMessageOutcome), ErrorResponses))]
async fn send_test_message(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<TestMessageRequest>,
) -> ApiResult<ApiJson<TestMessageOutcome>> {
    let member = notifications::my_membership(state.store.as_ref(), &caller).await?;
    let outbox = crate::workers::outbox::Outbox::new(
        std::sync::Arc::clone(&state.store),
        std::sync::Arc::clone(&state.metrics),
        &state.config.channels,
        state.channel_keys.clone(),
        state.config.public_url.clone().unwrap_or_default(),
    )
    .map_err(|reason| AppError::Conflict { message: reason, details: None })?;
    let channel = request.channel;
    let outcome = outbox
        .send_test(&member, caller.workspace_id(), channel)
        .await
        .map_err(|reason| AppError::Conflict { message: reason, details: None })?;
    Ok(ApiJson(match outcome {
        crate::channels::DeliveryOutcome::Sent { .. } => TestMessageOutcome { channel, sent: true, error: None },
        crate::channels::DeliveryOutcome::Retry { reason, .. }
        | crate::channels::DeliveryOutcome::Failed { reason, .. } => {
            TestMessageOutcome { channel, sent: false, error: Some(reason) }
        }
    }))
}
