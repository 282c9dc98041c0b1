//! `/api/v1/members`, `/api/v1/tokens` and `/api/v1/me`: who belongs to a workspace with which role, the API
//! tokens it has, and who the caller is. Changes are for admins; everyone in a workspace may see its members
//! (so an agent can assign a question to a person).

use app::types::{
    AddressUpdate, CreatedToken, Invitation, InvitationCreated, Me, Member, MemberUpdate, NewMember, NewToken,
    NotificationPreferences, Page, PasswordChange, TokenInfo,
};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::agents::page_limit;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::people;
use crate::state::AppState;
use crate::store::{MemberRow, PrincipalKind, TokenInfoRow};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_members, add_member))
        .routes(routes!(update_member, remove_member))
        .routes(routes!(list_tokens, create_token))
        .routes(routes!(revoke_token))
        .routes(routes!(get_me, update_me))
        .routes(routes!(get_my_notifications, set_my_notifications))
        .routes(routes!(change_password))
        .routes(routes!(my_invitations))
        .routes(routes!(accept_invitation))
        .routes(routes!(decline_invitation))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// The page parameters of `GET /tokens`, whose cursors are token ids.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct TokenListQuery {
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})?$")]
    cursor: Option<String>,
}

fn parse_query<T>(query: Result<Query<T>, axum::extract::rejection::QueryRejection>) -> ApiResult<T> {
    query.map(|Query(q)| q).map_err(|err| AppError::BadRequest(err.body_text()))
}

fn path_id(raw: &str, what: &'static str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| AppError::NotFound(what))
}

/// `GET /members`: the workspace's people, by username.
#[utoipa::path(get, path = "/members", tag = "people", params(ListQuery),
    responses((status = 200, description = "A page of members", body = Page<Member>), ErrorResponses))]
async fn list_members(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<Member>>> {
    let query = parse_query(query)?;
    let limit = page_limit(query.limit)?;
    let after = query.cursor.as_deref().filter(|c| !c.is_empty());
    let mut rows = state.store.members(caller.workspace_id(), after, limit + 1).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.username.clone())
    } else {
        None
    };
    let items = rows.iter().map(MemberRow::to_member).collect::<Result<_, _>>()?;
    Ok(ApiJson(Page { items, next_cursor }))
}

/// `POST /members` (admin): a new username becomes an account (with its password) and a member at once (201). An
/// account that exists already is invited (202): it joins only when its owner accepts, at
/// `POST /me/invitations/{id}/accept`. 409 if they are a member, or invited, already.
#[utoipa::path(post, path = "/members", tag = "people", request_body = NewMember,
    responses(
        (status = 201, description = "A new account, added", body = Member),
        (status = 202, description = "An existing account, invited: it joins when its owner accepts", body = InvitationCreated),
        ErrorResponses))]
async fn add_member(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(input): ApiJson<NewMember>,
) -> ApiResult<Response> {
    Ok(match people::add_member(state.store.as_ref(), &caller, input).await? {
        people::Joining::Added(member) => (StatusCode::CREATED, ApiJson(member)).into_response(),
        people::Joining::Invited(invitation) => {
            (StatusCode::ACCEPTED, ApiJson(InvitationCreated { invitation })).into_response()
        }
    })
}

/// `GET /me/invitations`: the invitations of the caller's account to other workspaces, oldest first. People only.
#[utoipa::path(get, path = "/me/invitations", tag = "people",
    responses((status = 200, description = "The pending invitations", body = Page<Invitation>), ErrorResponses))]
async fn my_invitations(State(state): State<AppState>, caller: Caller) -> ApiResult<ApiJson<Page<Invitation>>> {
    let items = people::my_invitations(state.store.as_ref(), &caller).await?;
    Ok(ApiJson(Page { items, next_cursor: None }))
}

/// `POST /me/invitations/{id}/accept`: the caller joins the invitation's workspace with its role. 404 if their
/// account has no such pending invitation.
#[utoipa::path(post, path = "/me/invitations/{id}/accept", tag = "people",
    params(("id" = Uuid, Path, description = "The invitation's id")),
    responses((status = 200, description = "Accepted: a member now", body = Invitation), ErrorResponses))]
async fn accept_invitation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<Invitation>> {
    let id = path_id(&id, "invitation")?;
    Ok(ApiJson(people::answer_invitation(state.store.as_ref(), &caller, id, true).await?))
}

/// `POST /me/invitations/{id}/decline`: the invitation goes, and nothing else changes. 404 if the caller's account
/// has no such pending invitation.
#[utoipa::path(post, path = "/me/invitations/{id}/decline", tag = "people",
    params(("id" = Uuid, Path, description = "The invitation's id")),
    responses((status = 200, description = "Declined", body = Invitation), ErrorResponses))]
async fn decline_invitation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<Invitation>> {
    let id = path_id(&id, "invitation")?;
    Ok(ApiJson(people::answer_invitation(state.store.as_ref(), &caller, id, false).await?))
}

/// `PATCH /members/{user_id}` (admin): another role (effective on the member's next request; their claims of
/// questions the new role may not decide are let go; 409 for the last admin) and/or other addresses.
#[utoipa::path(patch, path = "/members/{user_id}", tag = "people", params(("user_id" = Uuid, Path, description = "The person's id")),
    request_body = MemberUpdate, responses((status = 200, description = "The member", body = Member), ErrorResponses))]
async fn update_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(update): ApiJson<MemberUpdate>,
) -> ApiResult<ApiJson<Member>> {
    let user_id = path_id(&user_id, "member")?;
    Ok(ApiJson(
        people::update_member(
            state.store.as_ref(),
            state.slack_client(),
            &state.hub,
            &state.sends_on,
            &caller,
            user_id,
            update,
        )
        .await?,
    ))
}

/// `DELETE /members/{user_id}` (admin): removes the person from the workspace; their sessions there end at once,
/// and their claims of its questions are let go.
#[utoipa::path(delete, path = "/members/{user_id}", tag = "people", params(("user_id" = Uuid, Path, description = "The person's id")),
    responses((status = 204, description = "Removed"), ErrorResponses))]
async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<StatusCode> {
    let user_id = path_id(&user_id, "member")?;
    people::remove_member(state.store.as_ref(), &state.hub, &caller, user_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /tokens` (admin): the workspace's tokens, newest first, without secrets.
#[utoipa::path(get, path = "/tokens", tag = "people", params(TokenListQuery),
    responses((status = 200, description = "A page of tokens", body = Page<TokenInfo>), ErrorResponses))]
async fn list_tokens(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<TokenListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<TokenInfo>>> {
    caller.require_admin(people::MANAGE_PEOPLE)?;
    let query = parse_query(query)?;
    let limit = page_limit(query.limit)?;
    let before = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(cursor) => {
            Some(Uuid::parse_str(cursor).map_err(|_| AppError::BadRequest("the cursor is not valid".into()))?)
        }
        None => None,
    };
    let mut rows = state.store.tokens(caller.workspace_id(), before, limit + 1).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.id.to_string())
    } else {
        None
    };
    let items = rows.iter().map(TokenInfoRow::to_token_info).collect::<Result<_, _>>()?;
    Ok(ApiJson(Page { items, next_cursor }))
}

/// `POST /tokens` (admin): 201 with the token and its secret, shown this once.
#[utoipa::path(post, path = "/tokens", tag = "people", request_body = NewToken,
    responses((status = 201, description = "Created; the secret is shown only here", body = CreatedToken), ErrorResponses))]
async fn create_token(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(input): ApiJson<NewToken>,
) -> ApiResult<(StatusCode, ApiJson<CreatedToken>)> {
    Ok((StatusCode::CREATED, ApiJson(people::create_token(state.store.as_ref(), &caller, input).await?)))
}

/// `POST /tokens/{id}/revoke` (admin): the token and its sessions stop working at once; a service token's claims
/// are let go. 409 if revoked already.
#[utoipa::path(post, path = "/tokens/{id}/revoke", tag = "people", params(("id" = Uuid, Path, description = "The token's id")),
    responses((status = 200, description = "The revoked token", body = TokenInfo), ErrorResponses))]
async fn revoke_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<ApiJson<TokenInfo>> {
    let id = path_id(&id, "token")?;
    Ok(ApiJson(people::revoke_token(state.store.as_ref(), &state.hub, &caller, id).await?))
}

/// `GET /me`: who the caller is, in which workspace, with which role.
#[utoipa::path(get, path = "/me", tag = "people",
    responses((status = 200, description = "The caller", body = Me), ErrorResponses))]
async fn get_me(caller: Caller) -> ApiJson<Me> {
    let principal = &caller.principal;
    ApiJson(Me {
        id: principal.id,
        kind: match principal.kind {
            PrincipalKind::User => "user".into(),
            PrincipalKind::Token => "token".into(),
        },
        name: principal.name.clone(),
        workspace: principal.workspace.clone(),
        role: principal.role,
    })
}

/// `PATCH /me`: a person sets where they are reached (email, Slack user id); `null` removes one. A new email
/// address is stored unverified and sent a verification link; a Slack id set here is unproven (an admin proves it).
#[utoipa::path(patch, path = "/me", tag = "people", request_body = AddressUpdate,
    responses((status = 200, description = "The caller as a member", body = Member), ErrorResponses))]
async fn update_me(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(update): ApiJson<AddressUpdate>,
) -> ApiResult<ApiJson<Member>> {
    let mailer = people::VerificationMailer {
        sender: state.config.channels.email_sender().ok().flatten(),
        public_url: state.config.public_url.clone().unwrap_or_default(),
    };
    Ok(ApiJson(
        people::update_my_addresses(
            state.store.as_ref(),
            state.slack_client(),
            &mailer,
            &state.hub,
            &state.sends_on,
            &caller,
            update,
        )
        .await?,
    ))
}

/// `GET /me/notifications`: per channel, the lowest urgency that reaches the caller.
#[utoipa::path(get, path = "/me/notifications", tag = "people",
    responses((status = 200, description = "The caller's thresholds", body = NotificationPreferences), ErrorResponses))]
async fn get_my_notifications(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<ApiJson<NotificationPreferences>> {
    Ok(ApiJson(people::my_notifications(state.store.as_ref(), &caller).await?))
}

/// `PUT /me/notifications`: replaces the caller's thresholds; a channel left out takes its default.
#[utoipa::path(put, path = "/me/notifications", tag = "people", request_body = NotificationPreferences,
    responses((status = 200, description = "The caller's thresholds", body = NotificationPreferences), ErrorResponses))]
async fn set_my_notifications(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(preferences): ApiJson<NotificationPreferences>,
) -> ApiResult<ApiJson<NotificationPreferences>> {
    Ok(ApiJson(people::set_my_notifications(state.store.as_ref(), &caller, preferences).await?))
}

/// `POST /me/password`: a signed-in person sets their password (the current one is needed once one is set; a
/// first one needs a session opened in the last 10 minutes).
#[utoipa::path(post, path = "/me/password", tag = "people", request_body = PasswordChange,
    responses((status = 204, description = "Changed"), ErrorResponses))]
async fn change_password(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(change): ApiJson<PasswordChange>,
) -> ApiResult<StatusCode> {
    let session = match crate::doors::auth::Proof::of(&headers) {
        Some(crate::doors::auth::Proof::Session(hash)) => Some(hash),
        _ => None,
    };
    let signed_in_at = match &session {
        Some(hash) => state.store.session_opened_at(hash).await?,
        None => None,
    };
    let (current, new) = (change.current_password, change.new_password);
    people::change_password(state.store.as_ref(), &caller, session.as_deref(), signed_in_at, current, new).await?;
    Ok(StatusCode::NO_CONTENT)
}
