//! `/api/v1/agents`: agent definitions.

use app::types::{Agent, AgentSpec, Page, Role};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::doors::http::questions::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::error::{ApiJson, ApiResult, AppError};
use crate::runs::validate_agent;
use crate::state::AppState;
use crate::store::{AgentRow, StoreError};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_agents, create_agent)).routes(routes!(get_agent, update_agent))
}

fn require_admin(caller: &Caller) -> ApiResult<()> {
    if caller.role() == Role::Admin {
        Ok(())
    } else {
        Err(AppError::Forbidden("only an admin may define agents".into()))
    }
}

fn duplicate_name(err: StoreError) -> AppError {
    match err {
        StoreError::Duplicate(_) => AppError::Conflict {
            message: "an agent with this name already exists in the workspace".into(),
            details: None,
        },
        other => other.into(),
    }
}

fn agent_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| AppError::NotFound("agent"))
}

/// `POST /agents` (admin): 201 with the agent; 409 if the name is taken.
#[utoipa::path(post, path = "/agents", tag = "agents", request_body = AgentSpec,
    responses((status = 201, description = "Created", body = Agent), ErrorResponses))]
async fn create_agent(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(spec): ApiJson<AgentSpec>,
) -> ApiResult<(StatusCode, ApiJson<Agent>)> {
    require_admin(&caller)?;
    let spec = validate_agent(spec, &state.runtime)?;
    let now = crate::store::now();
    let row = AgentRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        name: spec.name.clone(),
        spec: sqlx::types::Json(spec),
        created_at: now,
        updated_at: now,
    };
    state.store.insert_agent(&row).await.map_err(duplicate_name)?;
    Ok((StatusCode::CREATED, ApiJson(row.to_agent())))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AgentListQuery {
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// `GET /agents`: by name.
#[utoipa::path(get, path = "/agents", tag = "agents", params(AgentListQuery),
    responses((status = 200, description = "A page of agents", body = Page<Agent>), ErrorResponses))]
async fn list_agents(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<AgentListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<Agent>>> {
    let Query(query) = query.map_err(|err| AppError::BadRequest(err.body_text()))?;
    let limit = page_limit(query.limit)?;
    let after = query.cursor.as_deref().filter(|c| !c.is_empty());
    let mut rows = state.store.list_agents(caller.workspace_id(), after, limit + 1).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.name.clone())
    } else {
        None
    };
    Ok(ApiJson(Page { items: rows.iter().map(AgentRow::to_agent).collect(), next_cursor }))
}

/// The page size of a list request: 1..=200, default 50.
pub fn page_limit(limit: Option<u32>) -> ApiResult<u32> {
    let limit = limit.unwrap_or(DEFAULT_PAGE_SIZE);
    if (1..=MAX_PAGE_SIZE).contains(&limit) {
        Ok(limit)
    } else {
        Err(AppError::BadRequest(format!("limit must be within 1..={MAX_PAGE_SIZE}")))
    }
}

/// `GET /agents/{id}`.
#[utoipa::path(get, path = "/agents/{id}", tag = "agents", params(("id" = Uuid, Path, description = "The agent's id")),
    responses((status = 200, description = "The agent", body = Agent), ErrorResponses))]
async fn get_agent(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<ApiJson<Agent>> {
    let row = state.store.agent(caller.workspace_id(), agent_id(&id)?).await?.ok_or(AppError::NotFound("agent"))?;
    Ok(ApiJson(row.to_agent()))
}

/// `PUT /agents/{id}` (admin): replaces the definition. Runs under way keep the definition they started with.
#[utoipa::path(put, path = "/agents/{id}", tag = "agents", params(("id" = Uuid, Path, description = "The agent's id")),
    request_body = AgentSpec, responses((status = 200, description = "The updated agent", body = Agent), ErrorResponses))]
async fn update_agent(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(spec): ApiJson<AgentSpec>,
) -> ApiResult<ApiJson<Agent>> {
    require_admin(&caller)?;
    let id = agent_id(&id)?;
    let spec = validate_agent(spec, &state.runtime)?;
    let row = state
        .store
        .update_agent(caller.workspace_id(), id, &spec, crate::store::now())
        .await
        .map_err(duplicate_name)?
        .ok_or(AppError::NotFound("agent"))?;
    Ok(ApiJson(row.to_agent()))
}
