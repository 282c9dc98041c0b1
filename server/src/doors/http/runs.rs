//! `/api/v1/runs`: starting runs, reading their messages and tool calls, resuming and cancelling them.

use app::types::{NewRun, Page, ResumeRequest, Run, RunMessage, RunStatus, ToolCall, ToolCallStatus};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::agents::page_limit;
use crate::doors::http::openapi::{ErrorResponses, IdempotencyHeader};
use crate::doors::http::questions::idempotency_key;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::runs::{self as domain, load_run};
use crate::state::AppState;
use crate::store::{RunFilter, ToolCallFilter};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_runs, create_run))
        .routes(routes!(get_run))
        .routes(routes!(list_messages))
        .routes(routes!(get_message))
        .routes(routes!(list_tool_calls))
        .routes(routes!(get_tool_call))
        .routes(routes!(resume_run))
        .routes(routes!(cancel_run))
}

fn id_of(raw: &str, what: &'static str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| AppError::NotFound(what))
}

fn bad_query(err: axum::extract::rejection::QueryRejection) -> AppError {
    AppError::BadRequest(err.body_text())
}

/// `POST /runs`: 201 with the queued run (200 with the first one for a repeated `Idempotency-Key`).
#[utoipa::path(post, path = "/runs", tag = "runs", request_body = NewRun,
    params(IdempotencyHeader),
    responses(
        (status = 201, description = "Created and queued", body = Run),
        (status = 200, description = "A retry with an Idempotency-Key seen before: the first run", body = Run),
        ErrorResponses,
    ))]
#[tracing::instrument(skip_all, fields(workspace = %caller.principal.workspace))]
async fn create_run(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(input): ApiJson<NewRun>,
) -> ApiResult<(StatusCode, ApiJson<Run>)> {
    let idempotency = idempotency_key(&headers, &caller, "runs", &input)?;
    let (run, created) =
        domain::create_run(state.store.as_ref(), &state.runtime, &caller, input, idempotency.as_ref()).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, ApiJson(run)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RunListQuery {
    status: Option<RunStatus>,
    agent_id: Option<Uuid>,
    parent_run_id: Option<Uuid>,
    project: Option<String>,
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})?$")]
    cursor: Option<String>,
}

/// `GET /runs`: newest first. An `agent` token lists only the runs it started.
#[utoipa::path(get, path = "/runs", tag = "runs", params(RunListQuery),
    responses((status = 200, description = "A page of runs", body = Page<Run>), ErrorResponses))]
async fn list_runs(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<RunListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<Run>>> {
    let Query(query) = query.map_err(bad_query)?;
    let limit = page_limit(query.limit)?;
    let before = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(cursor) => Some(Uuid::parse_str(cursor).map_err(|_| AppError::BadRequest("invalid cursor".into()))?),
        None => None,
    };
    let filter = RunFilter {
        status: query.status,
        agent_id: query.agent_id,
        parent_run_id: query.parent_run_id,
        project: query.project.filter(|p| !p.is_empty()),
        created_by: caller.visibility().created_by_filter(),
        before,
        limit: limit + 1,
    };
    let mut rows = state.store.list_runs(caller.workspace_id(), &filter).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.id.to_string())
    } else {
        None
    };
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        items.push(domain::to_wire(state.store.as_ref(), row, &caller.principal.workspace).await?);
    }
    Ok(ApiJson(Page { items, next_cursor }))
}

/// `GET /runs/{id}`: with its segments and pending questions.
#[utoipa::path(get, path = "/runs/{id}", tag = "runs", params(("id" = Uuid, Path, description = "The run's id")),
    responses((status = 200, description = "The run", body = Run), ErrorResponses))]
async fn get_run(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<ApiJson<Run>> {
    let row = load_run(state.store.as_ref(), &caller, id_of(&id, "run")?).await?;
    Ok(ApiJson(domain::to_wire(state.store.as_ref(), &row, &caller.principal.workspace).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MessageListQuery {
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = r"^(-?[0-9]{1,9})?$")]
    cursor: Option<String>,
}

/// `GET /runs/{id}/messages`: the conversation in order.
#[utoipa::path(get, path = "/runs/{id}/messages", tag = "runs",
    params(("id" = Uuid, Path, description = "The run's id"), MessageListQuery),
    responses((status = 200, description = "A page of messages", body = Page<RunMessage>), ErrorResponses))]
async fn list_messages(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    query: Result<Query<MessageListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<RunMessage>>> {
    let Query(query) = query.map_err(bad_query)?;
    let run = load_run(state.store.as_ref(), &caller, id_of(&id, "run")?).await?;
    let limit = page_limit(query.limit)?;
    let after = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(cursor) => cursor.parse::<i32>().map_err(|_| AppError::BadRequest("invalid cursor".into()))?,
        None => 0,
    };
    let mut rows = state.store.messages(run.id, after, limit + 1).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.seq.to_string())
    } else {
        None
    };
    Ok(ApiJson(Page { items: rows.iter().map(|m| m.to_message()).collect(), next_cursor }))
}

/// `GET /runs/{id}/messages/{mid}`.
#[utoipa::path(get, path = "/runs/{id}/messages/{mid}", tag = "runs",
    params(("id" = Uuid, Path, description = "The run's id"), ("mid" = Uuid, Path, description = "The message's id")),
    responses((status = 200, description = "The message", body = RunMessage), ErrorResponses))]
async fn get_message(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, mid)): Path<(String, String)>,
) -> ApiResult<ApiJson<RunMessage>> {
    let run = load_run(state.store.as_ref(), &caller, id_of(&id, "run")?).await?;
    let row = state.store.message(run.id, id_of(&mid, "message")?).await?.ok_or(AppError::NotFound("message"))?;
    Ok(ApiJson(row.to_message()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ToolCallListQuery {
    tool_name: Option<String>,
    status: Option<ToolCallStatus>,
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})?$")]
    cursor: Option<String>,
}

/// `GET /runs/{id}/tool-calls`: by step.
#[utoipa::path(get, path = "/runs/{id}/tool-calls", tag = "runs",
    params(("id" = Uuid, Path, description = "The run's id"), ToolCallListQuery),
    responses((status = 200, description = "A page of tool calls", body = Page<ToolCall>), ErrorResponses))]
async fn list_tool_calls(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    query: Result<Query<ToolCallListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<ToolCall>>> {
    let Query(query) = query.map_err(bad_query)?;
    let run = load_run(state.store.as_ref(), &caller, id_of(&id, "run")?).await?;
    let limit = page_limit(query.limit)?;
    let after = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(cursor) => Some(Uuid::parse_str(cursor).map_err(|_| AppError::BadRequest("invalid cursor".into()))?),
        None => None,
    };
    let filter = ToolCallFilter {
        message_id: None,
        tool_name: query.tool_name.filter(|t| !t.is_empty()),
        status: query.status,
        after,
        limit: limit + 1,
    };
    let mut rows = state.store.tool_calls(run.id, &filter).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.id.to_string())
    } else {
        None
    };
    let items = rows.iter().map(|c| c.to_tool_call()).collect::<Result<_, _>>()?;
    Ok(ApiJson(Page { items, next_cursor }))
}

/// `GET /runs/{id}/tool-calls/{cid}`: by the call's id or the model's `call_id`.
#[utoipa::path(get, path = "/runs/{id}/tool-calls/{cid}", tag = "runs",
    params(("id" = Uuid, Path, description = "The run's id"), ("cid" = String, Path, description = "The tool call's id or call_id")),
    responses((status = 200, description = "The tool call", body = ToolCall), ErrorResponses))]
async fn get_tool_call(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, cid)): Path<(String, String)>,
) -> ApiResult<ApiJson<ToolCall>> {
    let run = load_run(state.store.as_ref(), &caller, id_of(&id, "run")?).await?;
    let found = match Uuid::parse_str(&cid) {
        Ok(uuid) => state.store.tool_call(run.id, uuid).await?,
        Err(_) => None,
    };
    let found = match found {
        Some(call) => Some(call),
        None => {
            let all = state.store.tool_calls(run.id, &ToolCallFilter { limit: 100_000, ..Default::default() }).await?;
            all.into_iter().find(|c| c.call_id == cid)
        }
    };
    Ok(ApiJson(found.ok_or(AppError::NotFound("tool call"))?.to_tool_call()?))
}

/// `POST /runs/{id}/resume`: 202 with the run; 409 unless it is paused or waiting; 422 at the total step cap.
#[utoipa::path(post, path = "/runs/{id}/resume", tag = "runs", params(("id" = Uuid, Path, description = "The run's id")),
    request_body(content = Option<ResumeRequest>, description = "Optional; the body may be empty"),
    responses((status = 202, description = "Accepted: the run continues", body = Run), ErrorResponses))]
#[tracing::instrument(skip_all, fields(run = %id))]
async fn resume_run(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<(StatusCode, ApiJson<Run>)> {
    let id = id_of(&id, "run")?;
    let request: ResumeRequest = if body.iter().all(u8::is_ascii_whitespace) || body.trim_ascii() == b"null" {
        ResumeRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|err| AppError::Invalid { message: format!("the body does not fit: {err}"), details: None })?
    };
    let run = domain::resume_run(state.store.as_ref(), &caller, id, request, state.config.separation_of_duties).await?;
    Ok((StatusCode::ACCEPTED, ApiJson(run)))
}

/// `POST /runs/{id}/cancel`: 200 with the cancelled run; 409 if it had already finished.
#[utoipa::path(post, path = "/runs/{id}/cancel", tag = "runs", params(("id" = Uuid, Path, description = "The run's id")),
    responses((status = 200, description = "The cancelled run", body = Run), ErrorResponses))]
async fn cancel_run(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<ApiJson<Run>> {
    Ok(ApiJson(domain::cancel_run(state.store.as_ref(), &caller, id_of(&id, "run")?).await?))
}
