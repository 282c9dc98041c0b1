//! Signing in and out of the web UI: a username and password, an API token, a one-time sign-in link or single
//! sign-on through an OpenID provider opens a session, kept in an `HttpOnly` cookie.

use axum::{
    Router,
    extract::State,
    http::header,
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use axum_extra::extract::{
    CookieJar, PrivateCookieJar,
    cookie::{Cookie, SameSite},
};
use chrono::Duration;
use serde::Deserialize;

use app::navigation::{safe_next, sign_in_error};

use super::url_escape;
use crate::credentials::{Caller, Credential, hash_secret, random_secret};
use crate::doors::auth::{SESSION_COOKIE, csrf_matches, session_caller};
use crate::error::{ApiForm, AppError};
use crate::state::AppState;
use crate::store::SessionRow;

/// Signing in and out, open to anyone: each endpoint checks what it is sent.
pub(super) fn routes() -> Router<AppState> {
    // What the form endpoints refuse before their handlers run (a body that is not a form, another method) gets the
    // one JSON error shape; single sign-on's endpoints answer a browser with pages of their own.
    let forms = Router::new()
        .route("/auth/signin", post(sign_in))
        .route("/auth/signout", post(sign_out))
        .layer(axum::middleware::map_response(crate::doors::http::error_shape_for_bare_statuses));
    Router::new()
        .merge(forms)
        .route("/auth/oidc/start", get(start_single_sign_on))
        .route(crate::sso::CALLBACK_PATH, get(finish_single_sign_on))
}

/// The sign-in form: a person's username and password, an API token, or the code of a one-time sign-in link.
#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    /// Which of a person's workspaces to act in; their first one when absent.
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    code: Option<String>,
    next: Option<String>,
}

impl std::fmt::Debug for SignInForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInForm")
            .field("username", &self.username)
            .field("workspace", &self.workspace)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .field("code", &self.code.as_ref().map(|_| "[redacted]"))
            .field("next", &self.next)
            .finish()
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// `POST /auth/signin`: valid credentials open a session (an `HttpOnly` cookie) and go on to `next`; anything else
/// goes back to the form with one message that does not say which part was wrong.
async fn sign_in(
    State(state): State<AppState>,
    limits: crate::doors::http::limits::RequestLimits,
    headers: axum::http::HeaderMap,
    jar: CookieJar,
    ApiForm(form): ApiForm<SignInForm>,
) -> Result<Response, AppError> {
    // Another site could otherwise sign a visitor in as the attacker (login CSRF), and what the visitor then enters
    // would land in the attacker's workspace.
    crate::doors::http::security::refuse_cross_site(&headers, state.config.public_url.as_deref())?;
    let next = safe_next(form.next.as_deref()).to_owned();
    // Before the credential is looked at: a refused attempt must learn nothing. A token names no account, so only
    // the per-address limit applies to it; a username adds the per-account limit.
    // Usernames are matched case-insensitively, so the per-account limit is keyed the same way.
    let account = non_empty(&form.username).map(str::to_lowercase);
    if let Err(limited) = limits.check_sign_in(account.as_deref()) {
        // A person at the form gets it back with the reason; scripts get the 429 with Retry-After.
        let from_a_browser = headers
            .get(header::ACCEPT)
            .and_then(|accept| accept.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"));
        return match limited {
            AppError::RateLimited { retry_after_seconds, .. } if from_a_browser => {
                let error = sign_in_error::RATE_LIMITED;
                let next = url_escape(&next);
                Ok(Redirect::to(&format!("/signin?error={error}&retry_after={retry_after_seconds}&next={next}"))
                    .into_response())
            }
            other => Err(other),
        };
    }
    let (principal, refusal, method) = if let Some(code) = non_empty(&form.code) {
        let found = crate::people::sign_in_by_link(state.store.as_ref(), code).await?;
        (found, sign_in_error::LINK_SPENT, "link")
    } else if let (Some(username), Some(password)) = (non_empty(&form.username), form.password.as_deref()) {
        let found =
            crate::people::authenticate(state.store.as_ref(), username, password, non_empty(&form.workspace)).await?;
        (found, sign_in_error::WRONG_PASSWORD, "password")
    } else if let Some(token) = non_empty(&form.token) {
        (state.store.principal_by_token_hash(&hash_secret(token)).await?, sign_in_error::WRONG_TOKEN, "token")
    } else {
        (None, sign_in_error::MISSING, "none")
    };
    let Some(principal) = principal else {
        tracing::info!(username = ?non_empty(&form.username), "sign-in refused");
        return Ok(refused(refusal, &next));
    };
    let jar = open_session(&state, jar, &principal, method).await?;
    Ok((jar, Redirect::to(&next)).into_response())
}

/// Back to the sign-in form with a refusal's code: the page says what it means, so no URL can make the page say
/// anything else.
fn refused(code: &str, next: &str) -> Response {
    Redirect::to(&format!("/signin?error={code}&next={}", url_escape(next))).into_response()
}

/// Opens a session for `principal` (signed in by `method`): stores it, audits it, and adds its cookie to `jar`.
async fn open_session(
    state: &AppState,
    jar: CookieJar,
    principal: &crate::store::Principal,
    method: &str,
) -> Result<CookieJar, AppError> {
    let session_secret = random_secret(48);
    let now = crate::store::now();
    let lifetime = Duration::hours(state.config.session_hours);
    state
        .store
        .insert_session(&SessionRow {
            id_hash: hash_secret(&session_secret),
            workspace_id: principal.workspace_id,
            principal_id: principal.id,
            principal_kind: principal.kind,
            csrf_token: random_secret(32),
            created_at: now,
            expires_at: now + lifetime,
        })
        .await?;
    crate::audit::record_session(state.store.as_ref(), principal, crate::actions::SIGNIN, Some(method)).await?;
    tracing::info!(workspace = %principal.workspace, name = %principal.name, kind = ?principal.kind, method, "signed in");
    let cookie = Cookie::build((SESSION_COOKIE, session_secret))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.config.secure_cookies)
        .max_age(cookie::time::Duration::seconds(lifetime.num_seconds()))
        .build();
    Ok(jar.add(cookie))
}

#[derive(Deserialize)]
struct SingleSignOnStart {
    next: Option<String>,
}

/// `GET /auth/oidc/start`: sends the browser to the OpenID provider, with the sign-in's state, nonce and PKCE
/// verifier in an encrypted cookie only the callback reads.
async fn start_single_sign_on(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    axum::extract::Query(query): axum::extract::Query<SingleSignOnStart>,
) -> Result<Response, AppError> {
    let Some(sso) = state.sso.clone() else {
        return Err(AppError::NotFound("single sign-on"));
    };
    let next = safe_next(query.next.as_deref()).to_owned();
    let (authorize_url, pending) = match sso.start(next.clone()).await {
        Ok(started) => started,
        Err(problem) => {
            tracing::warn!(%problem, "single sign-on could not start");
            return Ok(refused(sign_in_error::SSO_UNAVAILABLE, &next));
        }
    };
    let value = serde_json::to_string(&pending).map_err(AppError::internal)?;
    let cookie = Cookie::build((crate::sso::PENDING_COOKIE, value))
        .path(crate::sso::PENDING_COOKIE_PATH)
        .http_only(true)
        // Lax: the provider's redirect back is a top-level navigation from another site, which Lax lets through.
        .same_site(SameSite::Lax)
        .secure(state.config.secure_cookies)
        .max_age(cookie::time::Duration::minutes(crate::sso::PENDING_MINUTES))
        .build();
    let jar = PrivateCookieJar::from_headers(&headers, sso.cookie_key.clone()).add(cookie);
    Ok((jar, [(header::CACHE_CONTROL, "no-store")], Redirect::to(authorize_url.as_str())).into_response())
}

/// `GET /auth/oidc/callback`: where the provider sends the browser back. The sign-in this browser started (its
/// cookie) must match what came back; the ID token must check out; the person is matched by verified email.
async fn finish_single_sign_on(
    State(state): State<AppState>,
    limits: crate::doors::http::limits::RequestLimits,
    headers: axum::http::HeaderMap,
    jar: CookieJar,
    axum::extract::Query(callback): axum::extract::Query<crate::sso::Callback>,
) -> Result<Response, AppError> {
    let Some(sso) = state.sso.clone() else {
        return Err(AppError::NotFound("single sign-on"));
    };
    let private = PrivateCookieJar::from_headers(&headers, sso.cookie_key.clone());
    let pending = private
        .get(crate::sso::PENDING_COOKIE)
        .and_then(|cookie| serde_json::from_str::<crate::sso::PendingSignIn>(cookie.value()).ok());
    // Spent whatever happens: a sign-in is finished once.
    let private = private.remove(Cookie::build(crate::sso::PENDING_COOKIE).path(crate::sso::PENDING_COOKIE_PATH));
    let next = pending.as_ref().map_or(app::navigation::DEFAULT_NEXT.to_owned(), |p| p.next.clone());
    if limits.check_sign_in(None).is_err() {
        return Ok((private, refused(sign_in_error::RATE_LIMITED, &next)).into_response());
    }
    let Some(pending) = pending else {
        tracing::info!("single sign-on refused: no sign-in in progress in this browser (or it took too long)");
        return Ok((private, refused(sign_in_error::SSO_FAILED, &next)).into_response());
    };
    let identity = match sso.finish(&pending, &callback).await {
        Ok(identity) => identity,
        Err(problem) => {
            tracing::info!(%problem, "single sign-on refused");
            return Ok((private, refused(sign_in_error::SSO_FAILED, &next)).into_response());
        }
    };
    let principal = match sso.principal_for(state.store.as_ref(), &identity).await? {
        Ok(principal) => principal,
        Err(refusal) => {
            tracing::info!(subject = %identity.subject, email = ?identity.email, refusal, "single sign-on refused");
            return Ok((private, refused(refusal, &next)).into_response());
        }
    };
    let jar = open_session(&state, jar, &principal, "oidc").await?;
    Ok((private, jar, [(header::CACHE_CONTROL, "no-store")], Redirect::to(&next)).into_response())
}

#[derive(Deserialize)]
struct SignOutForm {
    csrf: String,
}

/// `POST /auth/signout`: ends the session. Needs the session's CSRF token, so another site cannot sign you out.
async fn sign_out(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    jar: CookieJar,
    ApiForm(form): ApiForm<SignOutForm>,
) -> Result<Response, AppError> {
    crate::doors::http::security::refuse_cross_site(&headers, state.config.public_url.as_deref())?;
    let caller: Option<Caller> = session_caller(&state, &jar).await?;
    if let Some(Caller { credential: Credential::Session { csrf_token }, .. }) = &caller {
        if !csrf_matches(csrf_token, Some(&form.csrf)) {
            return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
        }
        if let Some(cookie) = jar.get(SESSION_COOKIE) {
            state.store.delete_session(&hash_secret(cookie.value())).await?;
        }
        if let Some(caller) = &caller {
            crate::audit::record_session(state.store.as_ref(), &caller.principal, crate::actions::SIGNOUT, None)
                .await?;
        }
    }
    let jar = jar.remove(Cookie::build(SESSION_COOKIE).path("/"));
    Ok((jar, [(header::CACHE_CONTROL, "no-store")], Redirect::to("/signin")).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sign_in_form_debug_output_shows_no_token() {
        let form = SignInForm {
            token: Some("hp_token-secret".into()),
            username: Some("alice".into()),
            password: Some("the password".into()),
            workspace: None,
            code: Some("the-link-code".into()),
            next: Some("/inbox".into()),
        };
        let debug = format!("{form:?}");
        for secret in ["hp_token-secret", "the password", "the-link-code"] {
            assert!(!debug.contains(secret), "{debug}");
        }
        assert!(debug.contains("/inbox"), "{debug}");
    }
}
