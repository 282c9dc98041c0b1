//! `/api/v1/questions`: asking and reading questions.

use app::types::{
    AnswerBatch, AnswerBatchResult, AnswerBatchResults, AnswerBatchStatus, AnswerBody, AnswerRequest, NewQuestion,
    Page, Question, QuestionKind, QuestionStatus, Urgency,
};
use axum::{
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode},
};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::{ErrorResponses, IdempotencyHeader};
use crate::error::{ApiJson, ApiResult, AppError};
use crate::questions as domain;
use crate::state::AppState;
use crate::store::{IdempotencyKey, QuestionCursor, QuestionFilter, QuestionSort, StoreError};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_questions, create_question))
        .routes(routes!(answer_batch))
        .routes(routes!(get_question))
        .routes(routes!(wait_for_question))
        .routes(routes!(answer_question))
        .routes(routes!(cancel_question))
        .routes(routes!(claim_question))
        .routes(routes!(unclaim_question))
        .routes(routes!(approved_before))
}

/// A question as a response body: as the API's type, or already serialised (the text its event carries), which
/// spares a HITL cycle writing the same question out again.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum QuestionBody {
    Typed(Box<Question>),
    Serialized(Box<RawValue>),
}

/// The longest a long-poll may hold a request.
pub const MAX_WAIT_SECONDS: u64 = 60;
/// How many answers one batch may carry.
pub const MAX_BATCH: usize = 200;

pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 200;
const IDEMPOTENCY_HEADER: &str = "idempotency-key";
const IDEMPOTENCY_KEY_MAX: usize = 255;

/// `POST /questions`: 201 with the new question (already approved when it asks about a tool call a live grant
/// covers), or 200 with the first one for a repeated `Idempotency-Key`.
#[utoipa::path(post, path = "/questions", tag = "questions", request_body = NewQuestion,
    params(IdempotencyHeader),
    responses(
        (status = 201, description = "Created: pending, or answered by a grant that covers its tool call", body = Question),
        (status = 200, description = "A retry with an Idempotency-Key seen before: the first question", body = Question),
        ErrorResponses,
    ))]
#[tracing::instrument(skip_all, fields(workspace = %caller.principal.workspace))]
async fn create_question(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(input): ApiJson<NewQuestion>,
) -> ApiResult<(StatusCode, ApiJson<QuestionBody>)> {
    caller.require_ask()?;
    let idempotency = idempotency_key(&headers, &caller, "questions", &input)?;
    let asking = state.asking();
    let row = asking.prepare(input, caller.workspace_id(), Some(caller.principal.id)).await?;
    crate::runs::check_run_of_new_question(state.store.as_ref(), &caller, &row).await?;
    let asked =
        asking.record_unless_granted(&row, &caller.principal.workspace, idempotency.as_ref()).await.map_err(|err| {
            match err {
                // The client learns which question its key asked, to fetch it rather than guess.
                StoreError::IdempotencyMismatch { resource_id } => AppError::Conflict {
                    message: err.to_string(),
                    details: Some(serde_json::json!({ "question_id": resource_id })),
                },
                other => other.into(),
            }
        })?;
    match asked.json {
        Some(question) => Ok((StatusCode::CREATED, ApiJson(QuestionBody::Serialized(question)))),
        // A retry: the first request's question, and this one's was never stored.
        None => Ok((
            StatusCode::OK,
            ApiJson(QuestionBody::Typed(Box::new(asked.question.to_question(&caller.principal.workspace)?))),
        )),
    }
}

pub(crate) fn idempotency_key(
    headers: &HeaderMap,
    caller: &Caller,
    scope: &'static str,
    body: &impl serde::Serialize,
) -> ApiResult<Option<IdempotencyKey>> {
    let Some(value) = headers.get(IDEMPOTENCY_HEADER) else {
        return Ok(None);
    };
    let key = value.to_str().ok().filter(|k| !k.is_empty() && k.len() <= IDEMPOTENCY_KEY_MAX).ok_or_else(|| {
        AppError::BadRequest(format!("Idempotency-Key must be 1..={IDEMPOTENCY_KEY_MAX} visible ASCII characters"))
    })?;
    let request_hash = Sha256::digest(serde_json::to_vec(body).map_err(AppError::internal)?).to_vec();
    // Keys are the caller's own: another token or person reusing one gets a result of its own, never the first
    // caller's (which may carry what only the first caller may read).
    let key = format!("{}:{key}", caller.principal.id);
    Ok(Some(IdempotencyKey { workspace_id: caller.workspace_id(), scope, key, request_hash }))
}

/// A question id from the path; anything that is not a UUID names no question (404, as for other workspaces').
fn question_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| AppError::NotFound("question"))
}

async fn load_question(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Question> {
    let row = state.store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?;
    if !caller.visibility().sees(row.created_by) {
        return Err(AppError::NotFound("question"));
    }
    Ok(row.to_question(&caller.principal.workspace)?)
}

/// `GET /questions/{id}`: 404 also for other workspaces' questions.
#[utoipa::path(get, path = "/questions/{id}", tag = "questions", params(("id" = Uuid, Path, description = "The question's id")),
    responses((status = 200, description = "The question", body = Question), ErrorResponses))]
async fn get_question(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<Question>> {
    Ok(ApiJson(load_question(&state, &caller, question_id(&id)?).await?))
}

/// The query string of `GET /questions`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    status: Option<QuestionStatus>,
    kind: Option<QuestionKind>,
    project: Option<String>,
    urgency: Option<Urgency>,
    run_id: Option<Uuid>,
    /// Matches title or body, case-insensitively; at most 200 characters.
    #[param(max_length = 200)]
    q: Option<String>,
    /// `created_desc` (newest first, the default) or `deadline` (soonest first, then those without one, oldest first).
    #[param(pattern = "^(created_desc|deadline)?$")]
    sort: Option<String>,
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page, listed with the same `sort` (`c.` cursors are `created_desc`'s,
    /// `d.` cursors `deadline`'s).
    #[param(
        pattern = r"^(c\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|d\.(none|-?[0-9]{1,18})\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})?$"
    )]
    cursor: Option<String>,
}

/// `GET /questions`: a page of the workspace's questions.
#[utoipa::path(get, path = "/questions", tag = "questions", params(ListQuery),
    responses((status = 200, description = "A page of questions", body = Page<Question>), ErrorResponses))]
async fn list_questions(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<Question>>> {
    let Query(query) = query.map_err(|err| AppError::BadRequest(err.body_text()))?;
    let sort = match query.sort.as_deref() {
        None | Some("" | "created_desc") => QuestionSort::CreatedDesc,
        Some("deadline") => QuestionSort::Deadline,
        Some(other) => {
            return Err(AppError::BadRequest(format!("sort must be created_desc or deadline, not {other:?}")));
        }
    };
    let limit = query.limit.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&limit) {
        return Err(AppError::BadRequest(format!("limit must be within 1..={MAX_PAGE_SIZE}")));
    }
    let after = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(cursor) => Some(QuestionCursor::parse(cursor, sort).ok_or_else(|| {
            AppError::BadRequest("cursor is not one this list gave out (was the sort changed?)".into())
        })?),
    };
    if let Some(text) = &query.q {
        domain::check_search_text(text)?;
    }
    let filter = QuestionFilter {
        status: query.status,
        kind: query.kind,
        project: query.project.filter(|p| !p.is_empty()),
        urgency: query.urgency,
        run_id: query.run_id,
        text: query.q.filter(|q| !q.trim().is_empty()),
        created_by: caller.visibility().created_by_filter(),
        sort,
        after,
        limit: limit + 1,
    };
    let mut rows = state.store.list_questions(caller.workspace_id(), &filter).await?;
    let next_cursor = filter.cut_to_page(&mut rows, |row| (row.timeout_at, row.id));
    let items = rows.iter().map(|row| row.to_question(&caller.principal.workspace)).collect::<Result<_, _>>()?;
    Ok(ApiJson(Page { items, next_cursor }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct WaitQuery {
    /// How long to wait, 1..=60 seconds (default 30).
    #[param(minimum = 1, maximum = 60)]
    timeout_seconds: Option<u64>,
}

/// `GET /questions/{id}/wait?timeout_seconds=1..=60`: returns as soon as the question is no longer pending (woken
/// by its event, not by polling), or as it is when the wait ends.
#[utoipa::path(get, path = "/questions/{id}/wait", tag = "questions", params(("id" = Uuid, Path, description = "The question's id"), WaitQuery),
    responses((status = 200, description = "The question once resolved, or as it is when the wait ends", body = Question),
        ErrorResponses))]
async fn wait_for_question(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<QuestionBody>> {
    let Query(query) = query.map_err(|err| AppError::BadRequest(err.body_text()))?;
    let seconds = query.timeout_seconds.unwrap_or(30);
    if !(1..=MAX_WAIT_SECONDS).contains(&seconds) {
        return Err(AppError::BadRequest(format!("timeout_seconds must be within 1..={MAX_WAIT_SECONDS}")));
    }
    let id = question_id(&id)?;
    // Watch before reading, so a resolution between the read and the wait still wakes us.
    let mut watch = state.hub.watch_question(id);
    let question = match state.hub.asked_and_pending(caller.workspace_id(), id) {
        Some(row) if caller.visibility().sees(row.created_by) => row.to_question(&caller.principal.workspace)?,
        _ => load_question(&state, &caller, id).await?,
    };
    if question.status != QuestionStatus::Pending {
        return Ok(ApiJson(QuestionBody::Typed(Box::new(question))));
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let event = tokio::select! {
        event = tokio::time::timeout_at(deadline, watch.next_event()) => event.ok().flatten(),
        // Stopping: answer with the question as it is now rather than hold the shutdown up.
        () = state.shutdown.cancelled() => None,
    };
    // The event carries the question as its transaction left it, which is what a read would return (a question
    // leaves `pending` once): no need to ask the database again, nor to serialise the question again.
    #[derive(Deserialize)]
    struct QuestionOfEvent<'a> {
        #[serde(borrow)]
        question: &'a RawValue,
    }
    if let Some(event) = event
        && let Ok(data) = serde_json::from_str::<QuestionOfEvent>(&event.data)
    {
        return Ok(ApiJson(QuestionBody::Serialized(data.question.to_owned())));
    }
    Ok(ApiJson(QuestionBody::Typed(Box::new(load_question(&state, &caller, id).await?))))
}

/// `POST /questions/{id}/answer`: 200 with the answered question; 409 if it is no longer pending; 422 if the
/// value does not fit.
#[utoipa::path(post, path = "/questions/{id}/answer", tag = "questions", params(("id" = Uuid, Path, description = "The question's id")), request_body = AnswerRequest,
    responses((status = 200, description = "The answered question", body = Question), ErrorResponses))]
#[tracing::instrument(skip_all, fields(question = %id))]
async fn answer_question(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(request): ApiJson<AnswerRequest>,
) -> ApiResult<ApiJson<Question>> {
    let id = question_id(&id)?;
    let (answering, now) = (state.answering(), crate::store::now());
    let grant = request.grant.as_ref();
    Ok(ApiJson(domain::answer_granting(&answering, &caller, id, request.answer, grant, now, None).await?))
}

/// A body that may be left out (empty, or `null`): its defaults then; 400 naming `what` it should be if it is not.
fn optional_body<T: serde::de::DeserializeOwned + Default>(body: &[u8], what: &str) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) || body.trim_ascii() == b"null" {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|err| AppError::BadRequest(format!("the body is not {what}: {err}")))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
struct CancelBody {
    reason: Option<String>,
}

/// `POST /questions/{id}/cancel` `{"reason"?}`; the body may be empty.
#[utoipa::path(post, path = "/questions/{id}/cancel", tag = "questions", params(("id" = Uuid, Path, description = "The question's id")),
    request_body(content = Option<CancelBody>, description = "Optional; the body may be empty"),
    responses((status = 200, description = "The cancelled question", body = Question), ErrorResponses))]
async fn cancel_question(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<ApiJson<Question>> {
    let id = question_id(&id)?;
    let body: CancelBody = optional_body(&body, "a cancel request")?;
    Ok(ApiJson(
        domain::cancel_question(state.store.as_ref(), &state.metrics, &caller, id, body.reason, crate::store::now())
            .await?,
    ))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    /// How long the claim lasts, in seconds; the server's longest (`HOLDPOINT_CLAIM_TTL_SECONDS`, default 1800)
    /// when absent, and at most that.
    ttl_seconds: Option<i64>,
}

/// `POST /questions/{id}/claim` `{"ttl_seconds"?}`: the caller works on the question; while the claim lasts only
/// they or an admin may answer. 409 naming the holder if someone else holds it.
#[utoipa::path(post, path = "/questions/{id}/claim", tag = "questions", params(("id" = Uuid, Path, description = "The question's id")),
    request_body(content = Option<ClaimBody>, description = "Optional; the body may be empty"),
    responses((status = 200, description = "The question with its claim", body = Question), ErrorResponses))]
async fn claim_question(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<ApiJson<Question>> {
    let id = question_id(&id)?;
    let body: ClaimBody = optional_body(&body, "a claim request")?;
    let max = state.config.claim_ttl_seconds;
    Ok(ApiJson(crate::questions::claims::claim(&state.answering(), &caller, id, body.ttl_seconds, max).await?))
}

/// `POST /questions/{id}/unclaim`: the caller's claim ends (an admin may end anyone's).
#[utoipa::path(post, path = "/questions/{id}/unclaim", tag = "questions", params(("id" = Uuid, Path, description = "The question's id")),
    responses((status = 200, description = "The question without a claim", body = Question), ErrorResponses))]
async fn unclaim_question(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<Question>> {
    let id = question_id(&id)?;
    Ok(ApiJson(crate::questions::claims::unclaim(&state.answering(), &caller, id).await?))
}

/// `GET /questions/{id}/approved-before`: how often a person approved exactly this call (tool and arguments) in the
/// last 30 days, for the offer to make it a grant.
#[utoipa::path(get, path = "/questions/{id}/approved-before", tag = "questions", params(("id" = Uuid, Path, description = "The question's id")),
    responses((status = 200, description = "The count", body = app::types::ApprovedBefore), ErrorResponses))]
async fn approved_before(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<app::types::ApprovedBefore>> {
    let id = question_id(&id)?;
    Ok(ApiJson(crate::grants::approved_before(state.store.as_ref(), &caller, id).await?))
}

/// `POST /questions/answer-batch`: each item is answered on its own; one failing does not stop the others.
#[utoipa::path(post, path = "/questions/answer-batch", tag = "questions", request_body = AnswerBatch,
    responses((status = 200, description = "One result per item, in order", body = AnswerBatchResults), ErrorResponses))]
async fn answer_batch(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(batch): ApiJson<AnswerBatch>,
) -> ApiResult<ApiJson<AnswerBatchResults>> {
    if batch.items.is_empty() || batch.items.len() > MAX_BATCH {
        return Err(AppError::invalid_field("items", format!("needs 1..={MAX_BATCH} items")));
    }
    let mut results = Vec::with_capacity(batch.items.len());
    for item in batch.items {
        let answer = AnswerBody { value: item.value, comment: item.comment, edited_arguments: item.edited_arguments };
        let outcome = match question_id(&item.id) {
            Ok(id) => {
                let (answering, now) = (state.answering(), crate::store::now());
                domain::answer_granting(&answering, &caller, id, answer, item.grant.as_ref(), now, None).await
            }
            Err(err) => Err(err),
        };
        results.push(match outcome {
            Ok(question) => AnswerBatchResult {
                id: item.id,
                // An approval short of the question's quorum leaves it pending.
                status: if question.status == QuestionStatus::Pending {
                    AnswerBatchStatus::ApprovalAdded
                } else {
                    AnswerBatchStatus::Answered
                },
                error: None,
                question: Some(question),
            },
            Err(err) => {
                let status = match &err {
                    AppError::Conflict { .. } => AnswerBatchStatus::Conflict,
                    AppError::Invalid { .. } | AppError::TooLarge(_) => AnswerBatchStatus::Invalid,
                    AppError::NotFound(_) => AnswerBatchStatus::NotFound,
                    AppError::Forbidden(_) => AnswerBatchStatus::Forbidden,
                    // The items before this one are stored: the response must say so, not fail whole.
                    AppError::Internal(cause) => {
                        tracing::error!(error = %cause, question = %item.id, "internal error answering a batch item");
                        AnswerBatchStatus::Error
                    }
                    _ => AnswerBatchStatus::Invalid,
                };
                AnswerBatchResult { id: item.id, status, error: Some(err.detail()), question: None }
            }
        });
    }
    Ok(ApiJson(AnswerBatchResults { results }))
}
