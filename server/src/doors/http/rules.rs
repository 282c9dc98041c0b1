//! `/rules` and `/decide`: the workspace's approval rules (read by any member, saved by admins, checked and tried
//! by anyone), and the decision an agent asks for before it acts.

use app::types::{
    DecideRequest, DecideResponse, RuleTestRequest, RuleTestResult, RulesCheck, RulesDocument, StoredRules,
};
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::credentials::Caller;
use crate::doors::http::openapi::{ErrorResponses, IdempotencyHeader};
use crate::doors::http::questions::{MAX_WAIT_SECONDS, idempotency_key};
use crate::error::{ApiJson, ApiResult};
use crate::rules::service;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_rules, put_rules))
        .routes(routes!(check_rules))
        .routes(routes!(test_rules))
        .routes(routes!(decide_call))
}

/// `GET /rules`: the workspace's rules document (any member).
#[utoipa::path(get, path = "/rules", tag = "rules",
    responses((status = 200, description = "The stored document (version 0 before the first save)", body = StoredRules), ErrorResponses))]
async fn get_rules(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<StoredRules>> {
    Ok(ApiJson(service::get(state.store.as_ref(), &caller).await?))
}

/// `PUT /rules` (admins): replaces the document; its version goes up by one and the change is audited
/// (`rules.updated`). A document with any fault is a 422 whose `details.fields` names each (`rules[2].when` with the
/// position of a CEL error), and nothing is stored.
#[utoipa::path(put, path = "/rules", tag = "rules", request_body = RulesDocument,
    responses((status = 200, description = "The saved document", body = StoredRules), ErrorResponses))]
#[tracing::instrument(skip_all, fields(workspace = %caller.principal.workspace))]
async fn put_rules(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<ApiJson<StoredRules>> {
    Ok(ApiJson(service::save(state.store.as_ref(), state.config.timeout_bounds(), &caller, &body).await?))
}

/// `POST /rules/check`: checks a document as `PUT /rules` would, without storing it (what `holdpoint rules apply
/// --check` calls): 200 when it would be saved, else the same 422.
#[utoipa::path(post, path = "/rules/check", tag = "rules", request_body = RulesDocument,
    responses((status = 200, description = "The document is valid", body = RulesCheck), ErrorResponses))]
async fn check_rules(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<ApiJson<RulesCheck>> {
    Ok(ApiJson(service::check_only(state.store.as_ref(), state.config.timeout_bounds(), &caller, &body).await?))
}

/// `POST /rules/test`: what the stored rules decide about a call — the decision, the deciding rule (null when the
/// default decided) and every rule that matched, dry-run ones too. Nothing is asked, audited or counted.
#[utoipa::path(post, path = "/rules/test", tag = "rules", request_body = RuleTestRequest,
    responses((status = 200, description = "The decision", body = RuleTestResult), ErrorResponses))]
async fn test_rules(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<RuleTestRequest>,
) -> ApiResult<ApiJson<RuleTestResult>> {
    Ok(ApiJson(service::test(&state.rules(), &caller, &request).await?))
}

/// `POST /decide` (agent tokens and above): the rules' decision about a call the caller is about to make. `ask`
/// lets a live grant through (`allow`), else asks the approval question; with `"wait": true` it waits (up to 60 s)
/// for a person and answers `allow` or `deny` — or `ask` with the still pending question, to wait on with
/// `GET /questions/{id}/wait`. With an `Idempotency-Key`, the question is asked once per key (the `wait` flag
/// aside): a retried or restarted caller gets the first question back, and its decision once made. Audited
/// (`rules.decided`).
#[utoipa::path(post, path = "/decide", tag = "rules", request_body = DecideRequest,
    params(IdempotencyHeader),
    responses((status = 200, description = "The decision", body = DecideResponse), ErrorResponses))]
#[tracing::instrument(skip_all, fields(workspace = %caller.principal.workspace))]
async fn decide_call(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(request): ApiJson<DecideRequest>,
) -> ApiResult<ApiJson<DecideResponse>> {
    // Whether the caller waits changes nothing that is asked: a call that first looked and then waits is the same.
    let asked = DecideRequest { wait: false, ..request.clone() };
    let idempotency = idempotency_key(&headers, &caller, "decide", &asked)?;
    let max_wait = std::time::Duration::from_secs(MAX_WAIT_SECONDS);
    Ok(ApiJson(super::decide::decide(&state, &caller, &request, idempotency.as_ref(), max_wait).await?))
}
