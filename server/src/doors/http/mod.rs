//! The HTTP surface: `/api/v1` (REST and SSE), health probes, and the web UI. Each resource module exposes a
//! `router()`; [`router`] merges them.

mod ag_ui;
mod agents;
mod audit;
mod decide;
mod events;
pub mod files;
mod grants;
mod health;
pub mod limits;
mod notifications;
mod nul;
pub mod openapi;
mod people;
mod questions;
mod rules;
mod runs;
pub mod security;
mod upstreams;
mod webhooks;
mod worker;

use std::sync::Arc;

use axum::{
    Json, Router, extract::DefaultBodyLimit, http::StatusCode, middleware, response::IntoResponse, routing::get,
};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::doors::mcp::tasks_2025::TasksDoor;
use crate::error::{AppError, error_for_status};
use crate::state::AppState;

/// The largest request body the API reads; the largest legal question (32 KiB body, 16 KiB context, options) fits.
pub const API_BODY_LIMIT: usize = 256 * 1024;

/// The API's routes with their OpenAPI document, before state is attached.
pub fn api_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let api = OpenApiRouter::new()
        .merge(questions::router())
        .merge(agents::router())
        .merge(ag_ui::router())
        .merge(people::router())
        .merge(notifications::router())
        .merge(runs::router())
        .merge(worker::router())
        .merge(events::router())
        .merge(audit::router())
        .merge(webhooks::router())
        .merge(grants::router())
        .merge(rules::router())
        .merge(upstreams::router())
        .merge(files::router());
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .nest("/api/v1", api)
        .merge(health::router())
        .split_for_parts()
}

/// The whole application, ready to serve or to test with `oneshot`.
pub fn router(state: AppState) -> Router {
    let (routes, document) = api_routes();
    let document = Arc::new(openapi::served_document(&document, &state.config));
    let api_fallback = Router::new()
        .route("/api/v1/openapi.json", get(move || async move { Json(document.as_ref().clone()) }))
        .route("/api/v1/{*rest}", axum::routing::any(|| async { AppError::NotFound("route") }));
    // Each MCP server: authenticated first, then MCP 2025-11-25's tasks served or translated, then rmcp.
    let (mcp_service, mcp_sessions, mcp_tasks) = crate::doors::mcp::service(state.clone());
    let mcp_tasks = TasksDoor { state: state.clone(), tasks: mcp_tasks, owners: Arc::clone(&mcp_sessions) };
    let mcp = Router::new()
        .nest_service("/mcp", mcp_service)
        .layer(middleware::from_fn_with_state(mcp_tasks, crate::doors::mcp::tasks_2025::serve))
        .layer(middleware::from_fn_with_state((state.clone(), mcp_sessions), crate::doors::mcp::authenticate));
    // The gateway's sessions and tasks are its own books, authenticated as `/mcp`'s are.
    let (gateway_service, gateway_sessions, gateway_tasks) =
        crate::doors::gateway::door::service(state.clone()).expect("the gateway's HTTP client is built");
    let gateway_tasks = TasksDoor { state: state.clone(), tasks: gateway_tasks, owners: Arc::clone(&gateway_sessions) };
    let gateway = Router::new()
        .nest_service("/mcp/gateway", gateway_service)
        .layer(middleware::from_fn_with_state(gateway_tasks, crate::doors::mcp::tasks_2025::serve))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state.gateway_waits),
            crate::doors::gateway::waits::hold_stop_for_responses,
        ))
        .layer(middleware::from_fn(crate::doors::gateway::door::require_asking_role))
        .layer(middleware::from_fn_with_state((state.clone(), gateway_sessions), crate::doors::mcp::authenticate));
    let rate_limits = limits::RateLimits::new(&state.config.limits);
    Router::new()
        .merge(routes)
        .merge(api_fallback)
        .merge(mcp)
        .merge(gateway)
        .layer(DefaultBodyLimit::max(API_BODY_LIMIT))
        .layer(middleware::map_response(error_shape_for_bare_statuses))
        .merge(crate::doors::web::action_links::router())
        .merge(crate::doors::web::email_verification::router())
        .merge(crate::doors::slack_interactions::router())
        .merge(crate::doors::web::router(&state))
        .route_layer(middleware::from_fn_with_state(state.clone(), record_latency))
        // Inside the body's limit: it reads the bodies it checks.
        .layer(middleware::from_fn(nul::refuse_nul))
        // Limits before anything reads the body: a rate-limited client does not even get its body read.
        .layer(middleware::from_fn(limits::limit_body))
        .layer(middleware::from_fn_with_state(rate_limits, limits::guard))
        .layer(TraceLayer::new_for_http())
        // Outermost, so that every response, refusals of the layers above included, carries the headers.
        .layer(middleware::from_fn_with_state(state.config.secure_cookies, security::headers))
        .with_state(state)
}

/// Observes every request's latency under its route pattern.
async fn record_latency(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let response = next.run(request).await;
    state.metrics.http_request(&method, &route, response.status().as_u16(), started.elapsed());
    response
}

/// Gives responses that axum or a layer produced without a body (405, 413 from a limit) the one error shape.
pub(crate) async fn error_shape_for_bare_statuses(response: axum::response::Response) -> axum::response::Response {
    let status = response.status();
    let is_json = response.headers().get(axum::http::header::CONTENT_TYPE).is_some_and(|v| {
        v.as_bytes().starts_with(b"application/json") || v.as_bytes().starts_with(b"text/event-stream")
    });
    if (status.is_client_error() || status == StatusCode::INTERNAL_SERVER_ERROR) && !is_json {
        let mut shaped = error_for_status(status).into_response();
        *shaped.status_mut() = status;
        return shaped;
    }
    response
}
