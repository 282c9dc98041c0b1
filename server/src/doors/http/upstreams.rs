//! `/upstreams`: the MCP gateway's upstream servers of a workspace (docs/gateway.md). Admins only; header values are
//! never shown, only their names.

use app::types::{NewUpstream, Upstream, UpstreamList, UpstreamPatch};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::credentials::Caller;
use crate::doors::gateway;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_upstreams, create_upstream)).routes(routes!(
        get_upstream,
        update_upstream,
        delete_upstream
    ))
}

/// `GET /upstreams`: the workspace's upstreams by name, each with its health.
#[utoipa::path(get, path = "/upstreams", tag = "upstreams",
    responses((status = 200, description = "The upstreams", body = UpstreamList), ErrorResponses))]
async fn list_upstreams(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<UpstreamList>> {
    Ok(ApiJson(gateway::list(state.store.as_ref(), &state.configured_upstreams, &caller).await?))
}

/// `POST /upstreams`: registers an MCP server (streamable HTTP) whose tools the gateway at `/mcp/gateway` lists as
/// `<name>__<tool>`. It need not be up.
#[utoipa::path(post, path = "/upstreams", tag = "upstreams", request_body = NewUpstream,
    responses((status = 201, description = "Registered", body = Upstream), ErrorResponses))]
async fn create_upstream(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(input): ApiJson<NewUpstream>,
) -> ApiResult<(StatusCode, ApiJson<Upstream>)> {
    let created = gateway::create(
        state.store.as_ref(),
        &state.configured_upstreams,
        &caller,
        state.config.upstream_allow_private,
        input,
    )
    .await?;
    Ok((StatusCode::CREATED, ApiJson(created)))
}

/// `GET /upstreams/{name}`: one upstream, with its health.
#[utoipa::path(get, path = "/upstreams/{name}", tag = "upstreams",
    params(("name" = String, Path, description = "The upstream's name")),
    responses((status = 200, description = "The upstream", body = Upstream), ErrorResponses))]
async fn get_upstream(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<ApiJson<Upstream>> {
    Ok(ApiJson(gateway::get(state.store.as_ref(), &state.configured_upstreams, &caller, &name).await?))
}

/// `PATCH /upstreams/{name}`: changes its URL or replaces its headers; the gateway connects to it anew. An upstream
/// of the server's configuration file is not changed here (409).
#[utoipa::path(patch, path = "/upstreams/{name}", tag = "upstreams", request_body = UpstreamPatch,
    params(("name" = String, Path, description = "The upstream's name")),
    responses((status = 200, description = "The upstream as changed", body = Upstream), ErrorResponses))]
async fn update_upstream(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(patch): ApiJson<UpstreamPatch>,
) -> ApiResult<ApiJson<Upstream>> {
    let allow_private = state.config.upstream_allow_private;
    Ok(ApiJson(
        gateway::update(state.store.as_ref(), &state.configured_upstreams, &caller, allow_private, &name, patch)
            .await?,
    ))
}

/// `DELETE /upstreams/{name}`: removes it; its tools leave the gateway. An upstream of the server's configuration
/// file is not removed here (409).
#[utoipa::path(delete, path = "/upstreams/{name}", tag = "upstreams",
    params(("name" = String, Path, description = "The upstream's name")),
    responses((status = 204, description = "Removed"), ErrorResponses))]
async fn delete_upstream(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    gateway::delete(state.store.as_ref(), &state.configured_upstreams, &caller, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
