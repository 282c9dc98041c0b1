//! `/grants`: the workspace's "always allow" rules, made with approvals; read by any member, revoked by
//! their maker or an admin.

use app::types::{Grant, Page};
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::grants;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_grants)).routes(routes!(revoke_grant))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct GrantListQuery {
    /// `true`: revoked and expired grants too; by default only those letting calls through now.
    all: Option<bool>,
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})?$")]
    cursor: Option<String>,
}

/// `GET /grants`: the workspace's grants, newest first.
#[utoipa::path(get, path = "/grants", tag = "grants", params(GrantListQuery),
    responses((status = 200, description = "A page of grants", body = Page<Grant>), ErrorResponses))]
async fn list_grants(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<GrantListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<Grant>>> {
    let Query(query) = query.map_err(|err| AppError::BadRequest(err.body_text()))?;
    let limit = crate::doors::http::agents::page_limit(query.limit)?;
    let before = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(cursor) => {
            Some(Uuid::parse_str(cursor).map_err(|_| AppError::BadRequest("the cursor is not valid".into()))?)
        }
        None => None,
    };
    let all = query.all.unwrap_or(false);
    Ok(ApiJson(grants::list(state.store.as_ref(), &caller, all, before, limit).await?))
}

/// `POST /grants/{id}/revoke`: ends a grant at once (its maker or an admin); 409 if it was revoked already.
#[utoipa::path(post, path = "/grants/{id}/revoke", tag = "grants", params(("id" = Uuid, Path, description = "The grant's id")),
    responses((status = 200, description = "The revoked grant", body = Grant), ErrorResponses))]
async fn revoke_grant(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<Grant>> {
    let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound("grant"))?;
    Ok(ApiJson(grants::revoke(state.store.as_ref(), &caller, id).await?))
}
