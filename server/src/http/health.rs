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

/// Prometheus metrics in the text exposition format.
#[utoipa::path(get, path = "/metrics", tag = "health", security(()),
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain; version=0.0.4", body = String),
        (status = 500, description = "The database does not answer", body = app::types::ErrorBody)))]
async fn export_metrics(
    State(state): State<AppState>,
) -> Result<impl axum::response::IntoResponse, crate::error::AppError> {
    let text = state.metrics.render(state.store.as_ref()).await?;
    Ok(([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text))
}
