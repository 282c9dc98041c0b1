//! Probes for process supervisors and load balancers.

use axum::{Json, extract::State, http::StatusCode};
use serde_json::{Value, json};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(check_health)).routes(routes!(check_ready)).routes(routes!(export_metrics))
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "health", security(()),
    responses((status = 200, description = "Up", body = Object)))]
async fn check_health() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// The database answers.
#[utoipa::path(get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, description = "Ready", body = Object), (status = 503, description = "The database does not answer", body = Object)))]
async fn check_ready(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, Json(json!({ "status": "ok" }))),
        Err(err) => {
            tracing::warn!(error = %err, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "status": "unavailable" })))
        }
    }
}

/// Prometheus metrics: OpenMetrics when `Accept` asks for it, the classic text format otherwise.
#[utoipa::path(get, path = "/metrics", tag = "health", security(()),
    responses((status = 200, description = "The classic Prometheus text format, or OpenMetrics when `Accept` names \
        application/openmetrics-text", content(
            (String = "text/plain; version=0.0.4"),
            (String = "application/openmetrics-text; version=1.0.0"))),
        (status = 500, description = "The database does not answer", body = app::types::ErrorBody)))]
async fn export_metrics(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<impl axum::response::IntoResponse, crate::error::AppError> {
    let accept = headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = crate::metrics::Exposition::negotiate(accept);
    let text = state.metrics.render(state.store.as_ref(), format).await?;
    Ok(([(axum::http::header::CONTENT_TYPE, format.content_type())], text))
}
