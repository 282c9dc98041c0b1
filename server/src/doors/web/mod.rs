//! The web UI's server side: Leptos pages (server-rendered, then hydrated), the built site's files (see
//! [`crate::doors::web::site`]), sign-in and sign-out. Every page needs a signed-in session; without one the browser is sent to
//! `/signin`.

pub mod action_links;
pub mod answer_drafts;
pub mod email_verification;
pub mod site;

use std::sync::Arc;

use app::backend::{UiBackend, UiBackendHandle};
use app::types::{Page, Question, QuestionStatus, QuestionSummary, SessionInfo};
use axum::{
    Form, Router,
    extract::{FromRequest, Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use axum_extra::extract::{
    CookieJar, PrivateCookieJar,
    cookie::{Cookie, SameSite},
};
use chrono::Duration;
use leptos::prelude::provide_context;
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use serde::Deserialize;

use app::navigation::{safe_next, sign_in_error};

use crate::credentials::{Caller, Credential, hash_secret, random_secret};
use crate::doors::auth::{SESSION_COOKIE, csrf_matches, session_caller};
use crate::error::AppError;
use crate::rules;
use crate::state::AppState;
use crate::store::{
    AuditQuery, QuestionCursor, QuestionFilter, QuestionSort, QuestionSummaryRow, RunFilter, SessionRow, Store,
    ToolCallFilter,
};
use crate::visibility::Visibility;

/// Pages and server functions, behind the session check; the sign-in page, the auth endpoints and the site's
/// static files are open.
pub fn router(state: &AppState) -> Router<AppState> {
    let backend = UiBackendHandle(Arc::new(StoreUiBackend {
        store: Arc::clone(&state.store),
        sends_on: state.sends_on.clone(),
        app: state.clone(),
    }));
    let pages = Router::new()
        .leptos_routes_with_context(
            state,
            page_routes(),
            {
                let hub = state.hub.clone();
                let sign_in_options = app::navigation::SignInOptions {
                    single_sign_on: state.sso.as_ref().map(|sso| sso.display_name.clone()),
                };
                let site = state.site.clone();
                move || {
                    crate::doors::http::security::provide_csp_nonce();
                    site.provide_context();
                    provide_context(backend.clone());
                    provide_context(sign_in_options.clone());
                    // Read before the page loads its data: whatever happens after it reaches the page live.
                    provide_context(app::live::RenderedAt(hub.position()));
                }
            },
            {
                let options = state.leptos_options.clone();
                move || app::shell(options.clone())
            },
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), require_session));
    let router = Router::new()
        .merge(pages)
        .route("/auth/signin", post(sign_in))
        .route("/auth/signout", post(sign_out))
        .route("/auth/oidc/start", get(start_single_sign_on))
        .route(crate::sso::CALLBACK_PATH, get(finish_single_sign_on))
        .route("/ui/answer/{id}", post(answer_from_form))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/service-worker.js", get(|| async { script(SERVICE_WORKER) }))
        .route("/push.js", get(|| async { script(PUSH_SCRIPT) }));
    // `/pkg/...` and, for any other path, the app's "Not found" page.
    state.site.serve(router)
}

/// The service worker that shows pushed questions and answers from their actions. Served from the site's root, so
/// its scope is every page.
const SERVICE_WORKER: &str = include_str!("../../../assets/service-worker.js");
/// What registers the service worker and subscribes a browser to pushes from the Settings page.
const PUSH_SCRIPT: &str = include_str!("../../../assets/push.js");

/// A script of the server's own. Like every response outside `/pkg` it is marked `no-store`, so a browser checks
/// for a new service worker on each load and an upgraded server's worker replaces the old one.
fn script(source: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], source)
}

/// The app's routes, listed once per process. Leptos lists them by rendering the app with every resource held
/// back, and it holds them back process-wide (one global flag): listing them again while a page renders, for a
/// second router in the same process, left that page's data loading forever and its response unfinished.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: std::sync::LazyLock<Vec<AxumRouteListing>> =
        std::sync::LazyLock::new(|| generate_route_list(app::App));
    ROUTES.clone()
}

/// Lets a request through only with a live session (except the sign-in page itself), and hands the session to
/// pages and server functions as a request extension, with its [`Caller`] for the use cases they share with the
/// REST API.
async fn require_session(State(state): State<AppState>, jar: CookieJar, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    if path == "/signin" {
        return next.run(request).await;
    }
    match session_caller(&state, &jar).await {
        Ok(Some(caller)) => {
            if let Some(info) = caller.session_info() {
                request.extensions_mut().insert(info);
            }
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Ok(None) if path.starts_with(app::SERVER_FN_PREFIX) => {
            AppError::Unauthorized("sign in first".into()).into_response()
        }
        Ok(None) => {
            let next_path = request.uri().path_and_query().map_or(app::navigation::DEFAULT_NEXT, |p| p.as_str());
            Redirect::to(&format!("/signin?next={}", url_escape(next_path))).into_response()
        }
        Err(err) => err.into_response(),
    }
}

/// Everything but RFC 3986's unreserved characters and `/` (kept so `next=/inbox` stays readable).
const QUERY_VALUE: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');

/// Percent-encodes a query parameter's value.
fn url_escape(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, QUERY_VALUE).to_string()
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
    Form(form): Form<SignInForm>,
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
        let found = state.store.use_signin_link(&hash_secret(code), crate::store::now()).await?;
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
    Form(form): Form<SignOutForm>,
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

/// `POST /ui/answer/{id}`: the answer form of the question page (works without JavaScript), urlencoded or, when it
/// has a file input, `multipart/form-data`: each file chosen is uploaded as `POST /api/v1/files` would, and its
/// input's value becomes the upload's id. On success it goes back to the question, which then shows who answered;
/// on a refusal it goes back with the reason, and the page shows what was sent again with each problem beside its
/// input (see [`crate::doors::web::answer_drafts`]).
async fn answer_from_form(
    State(state): State<AppState>,
    jar: CookieJar,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: Request,
) -> Result<Response, AppError> {
    let Some(caller) = session_caller(&state, &jar).await? else {
        return Ok(Redirect::to(&format!("/signin?next={}", url_escape(&format!("/questions/{id}")))).into_response());
    };
    let Credential::Session { csrf_token } = &caller.credential else {
        return Err(AppError::Unauthorized("sign in first".into()));
    };
    let page = format!("/questions/{id}");
    let id = uuid::Uuid::parse_str(&id).map_err(|_| AppError::NotFound("question"))?;
    let mut draft = app::AnswerDraft::default();
    let read = read_answer_form(&state, &caller, csrf_token, request, &mut draft).await;
    let fields = match read {
        Ok(fields) => fields,
        Err(err @ (AppError::Invalid { .. } | AppError::TooLarge(_))) => {
            // An upload refused: what else was sent is kept, and the page says why.
            draft.errors = field_errors(&err);
            state.answer_drafts.keep(caller.principal.id, id, draft);
            return Ok(Redirect::to(&format!("{page}?error=invalid")).into_response());
        }
        Err(err) => return Err(err),
    };
    let row = state.store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?;
    let question = row.to_question(&caller.principal.workspace)?;
    let outcome = match crate::questions::answer_from_form_fields(&question, &fields) {
        Ok(answer) => crate::questions::answer_question(&state.answering(), &caller, id, answer, crate::store::now())
            .await
            .map(|_| ()),
        Err(err) => Err(err),
    };
    match outcome {
        Ok(()) => {
            state.answer_drafts.forget(caller.principal.id, id);
            Ok(Redirect::to(&page).into_response())
        }
        // The error's code: the page shows a sentence of its own for it, never text taken from the URL.
        Err(err @ (AppError::Invalid { .. } | AppError::Conflict { .. } | AppError::Forbidden(_))) => {
            draft.errors = field_errors(&err);
            state.answer_drafts.keep(caller.principal.id, id, draft);
            Ok(Redirect::to(&format!("{page}?error={}", err.status_and_code().1)).into_response())
        }
        Err(err) => Err(err),
    }
}

/// The problems a refusal names, by path (`value.<key>`, ...), for the page to show beside the inputs.
fn field_errors(err: &AppError) -> std::collections::BTreeMap<String, String> {
    let details = err.detail().details;
    let fields = details.as_ref().and_then(|d| d.get("fields")).and_then(|f| f.as_object());
    let mut errors: std::collections::BTreeMap<String, String> = fields
        .into_iter()
        .flatten()
        .map(|(path, problem)| (path.clone(), problem.as_str().map_or_else(|| problem.to_string(), str::to_owned)))
        .collect();
    if let AppError::TooLarge(message) = err {
        errors.insert("file".into(), message.clone());
    }
    errors
}

/// The answer form's fields, after its CSRF token is checked; the files of a multipart form are uploaded as they
/// come (their inputs' values become the uploads' ids). What was sent goes into `draft` as it is read.
async fn read_answer_form(
    state: &AppState,
    caller: &Caller,
    csrf_token: &str,
    request: Request,
    draft: &mut app::AnswerDraft,
) -> Result<Vec<(String, String)>, AppError> {
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let multipart = content_type.as_deref().filter(|ct| ct.to_ascii_lowercase().starts_with("multipart/form-data"));
    let Some(content_type) = multipart else {
        let Form(fields) = Form::<Vec<(String, String)>>::from_request(request, state)
            .await
            .map_err(|err| AppError::BadRequest(format!("the form could not be read: {err}")))?;
        if !csrf_matches(csrf_token, sent_csrf(&fields)) {
            return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
        }
        draft.values = fields.iter().filter(|(name, _)| name != "csrf").cloned().collect();
        return Ok(fields);
    };
    use futures::StreamExt;
    let max = state.config.files.max_upload_bytes;
    let boundary = multer::parse_boundary(content_type)
        .map_err(|err| AppError::BadRequest(format!("the multipart body has no boundary: {err}")))?;
    // The files and the form's text together; each file's own bound is the upload's.
    let limits = multer::SizeLimit::new().whole_stream(max.saturating_mul(2).saturating_add(256 * 1024));
    let body = request.into_body().into_data_stream();
    let mut form = multer::Multipart::with_constraints(body, boundary, multer::Constraints::new().size_limit(limits));
    let unreadable = |err: multer::Error| match err {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            crate::files::too_large(max)
        }
        other => AppError::BadRequest(format!("the form could not be read: {other}")),
    };
    let mut fields = Vec::new();
    let mut csrf_checked = false;
    while let Some(part) = form.next_field().await.map_err(unreadable)? {
        let name = part.name().unwrap_or_default().to_owned();
        match part.file_name().map(str::to_owned) {
            // A file input left empty.
            Some(file_name) if file_name.is_empty() => {
                part.bytes().await.map_err(unreadable)?;
            }
            Some(file_name) => {
                // The form puts its token first; nothing is stored for a request that has not shown it.
                csrf_checked = csrf_checked || csrf_matches(csrf_token, sent_csrf(&fields));
                if !csrf_checked {
                    return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
                }
                let meta = crate::files::UploadMeta {
                    name: Some(file_name),
                    media_type: part.content_type().map(ToString::to_string),
                };
                let bytes = part.map(|chunk| chunk.map_err(unreadable));
                let uploaded = state.uploading().upload(caller, meta, bytes).await.map_err(|err| match err {
                    AppError::Invalid { message, .. } => AppError::invalid_field(&answer_path(&name), message),
                    AppError::TooLarge(message) => AppError::invalid_field(&answer_path(&name), message),
                    other => other,
                })?;
                let file_id = uploaded.file_id.to_string();
                draft.values.push((name.clone(), file_id.clone()));
                draft.files.insert(name.clone(), uploaded);
                fields.push((name, file_id));
            }
            None => {
                let text = part.text().await.map_err(unreadable)?;
                if name != "csrf" {
                    draft.values.push((name.clone(), text.clone()));
                }
                fields.push((name, text));
            }
        }
    }
    if !csrf_matches(csrf_token, sent_csrf(&fields)) {
        return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
    }
    Ok(fields)
}

/// The CSRF token a form sent.
fn sent_csrf(fields: &[(String, String)]) -> Option<&str> {
    fields.iter().find(|(name, _)| name == "csrf").map(|(_, value)| value.as_str())
}

/// The path the answer's checks name an input's value by: `field.<key>` is `value.<key>`, `value` is `value`.
fn answer_path(input: &str) -> String {
    input.strip_prefix("field.").map_or_else(|| input.to_owned(), |key| format!("value.{key}"))
}

/// The UI's view of the store.
struct StoreUiBackend {
    store: Arc<dyn Store>,
    /// The channels this server sends on, for the channels' health.
    sends_on: crate::notifications::SendsOn,
    /// The server, for the use cases the UI shares with the REST API (the approval rules).
    app: AppState,
}

/// The caller of the server function being run, as `require_session` found it: what the REST API's use cases are
/// handed. It must be the session's own.
fn ui_caller(session: &SessionInfo) -> Result<Caller, String> {
    let caller = leptos::prelude::use_context::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>().cloned())
        .ok_or("not signed in")?;
    if caller.principal.id != session.principal_id {
        return Err("the request's caller is not the session's".into());
    }
    Ok(caller)
}

/// What the session may see: the same rule as the REST API's (an `agent` token's session sees only what it
/// created).
fn visibility(session: &SessionInfo) -> Visibility {
    Visibility::of(session.role, session.principal_id)
}

/// The store's filter for one of the UI's lists of questions, narrowed as the session's role requires.
fn question_filter(session: &SessionInfo, filter: &app::InboxFilter, limit: u32) -> Result<QuestionFilter, String> {
    if let Some(text) = &filter.text {
        crate::questions::check_search_text(text).map_err(|err| err.to_string())?;
    }
    Ok(QuestionFilter {
        status: filter.status,
        kind: filter.kind,
        project: filter.project.clone(),
        urgency: filter.urgency,
        text: filter.text.clone(),
        sort: if filter.by_deadline { QuestionSort::Deadline } else { QuestionSort::CreatedDesc },
        limit,
        created_by: visibility(session).created_by_filter(),
        ..Default::default()
    })
}

/// The filter of one page of a list: `limit` questions after `after` (a cursor the list gave out), and one more
/// to know whether a next page follows (see [`QuestionFilter::cut_to_page`]).
fn page_filter(
    session: &SessionInfo,
    filter: &app::InboxFilter,
    after: Option<String>,
    limit: u32,
) -> Result<QuestionFilter, String> {
    let mut page = question_filter(session, filter, limit + 1)?;
    page.after = match after.filter(|a| !a.is_empty()) {
        None => None,
        Some(after) => Some(
            QuestionCursor::parse(&after, page.sort)
                .ok_or("this list's position is not one it gave out: start it again from the top")?,
        ),
    };
    Ok(page)
}

#[async_trait::async_trait]
impl UiBackend for StoreUiBackend {
    async fn questions(
        &self,
        session: &SessionInfo,
        filter: &app::InboxFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<Page<Question>, String> {
        let filter = page_filter(session, filter, after, limit)?;
        let mut rows = self.store.list_questions(session.workspace_id, &filter).await.map_err(|e| e.to_string())?;
        let next_cursor = filter.cut_to_page(&mut rows, |row| (row.timeout_at, row.id));
        let items = rows
            .iter()
            .map(|r| r.to_question(&session.workspace))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        Ok(Page { items, next_cursor })
    }

    async fn question_summaries(
        &self,
        session: &SessionInfo,
        filter: &app::InboxFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<Page<QuestionSummary>, String> {
        let filter = page_filter(session, filter, after, limit)?;
        let mut rows =
            self.store.list_question_summaries(session.workspace_id, &filter).await.map_err(|e| e.to_string())?;
        let next_cursor = filter.cut_to_page(&mut rows, |row| (row.timeout_at, row.id));
        let items = rows
            .into_iter()
            .map(QuestionSummaryRow::into_summary)
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        Ok(Page { items, next_cursor })
    }

    async fn pending_count(&self, session: &SessionInfo, cap: u32) -> Result<u32, String> {
        let pending = app::InboxFilter { status: Some(QuestionStatus::Pending), ..Default::default() };
        let filter = question_filter(session, &pending, cap)?;
        self.store.count_questions(session.workspace_id, &filter).await.map_err(|e| e.to_string())
    }

    async fn members(&self, session: &SessionInfo) -> Result<Vec<app::types::Member>, String> {
        let rows = self.store.members(session.workspace_id, None, 1000).await.map_err(|e| e.to_string())?;
        rows.iter().map(crate::store::MemberRow::to_member).collect::<Result<_, _>>().map_err(|e| e.to_string())
    }

    async fn notifications(
        &self,
        session: &SessionInfo,
        unread_only: bool,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<app::types::NotificationPage, String> {
        if !session.account {
            return Err("a token has no notifications: sign in with your account".into());
        }
        let of = crate::notifications::NotificationsOf {
            workspace_id: session.workspace_id,
            workspace: &session.workspace,
            user_id: session.principal_id,
        };
        crate::notifications::notifications_of(self.store.as_ref(), of, unread_only, cursor.as_deref(), limit)
            .await
            .map_err(|e| e.to_string())
    }

    async fn unread_notifications(&self, session: &SessionInfo) -> Result<Option<u32>, String> {
        if !session.account {
            return Ok(None);
        }
        let unread = self.store.unread_notifications(session.workspace_id, session.principal_id).await;
        unread.map(Some).map_err(|e| e.to_string())
    }

    async fn channel_health(&self, session: &SessionInfo) -> Result<Vec<app::types::ChannelHealth>, String> {
        if session.role != app::types::Role::Admin {
            return Err("the channels' health is for admins".into());
        }
        crate::notifications::channel_health_of(self.store.as_ref(), session.workspace_id, &self.sends_on)
            .await
            .map_err(|e| e.to_string())
    }

    async fn escalation_policies(&self, session: &SessionInfo) -> Result<Vec<app::types::EscalationPolicy>, String> {
        let rows = self.store.escalation_policies(session.workspace_id).await.map_err(|e| e.to_string())?;
        Ok(rows.into_iter().map(crate::escalation::wire).collect())
    }

    async fn my_reach(&self, session: &SessionInfo) -> Result<Option<app::MyReach>, String> {
        if !session.account {
            return Ok(None);
        }
        let member = self.store.member(session.workspace_id, session.principal_id).await.map_err(|e| e.to_string())?;
        let Some(member) = member else { return Ok(None) };
        let preferences = member.preferences().map_err(|e| e.to_string())?;
        Ok(Some(app::MyReach {
            username: member.username,
            role: member.role,
            email: member.email,
            slack_user_id: member.slack_user_id,
            preferences,
            away_until: member.away_until,
            delegate: member.delegate,
            email_sends: self.sends_on.email,
        }))
    }

    async fn tokens(&self, session: &SessionInfo) -> Result<Vec<app::types::TokenInfo>, String> {
        let rows = self.store.tokens(session.workspace_id, None, 1000).await.map_err(|e| e.to_string())?;
        rows.iter().map(crate::store::TokenInfoRow::to_token_info).collect::<Result<_, _>>().map_err(|e| e.to_string())
    }

    async fn runs(
        &self,
        session: &SessionInfo,
        status: Option<app::types::RunStatus>,
        project: Option<String>,
        limit: u32,
    ) -> Result<Page<app::types::Run>, String> {
        let filter = RunFilter {
            status,
            project,
            limit,
            created_by: visibility(session).created_by_filter(),
            ..Default::default()
        };
        let rows = self.store.list_runs(session.workspace_id, &filter).await.map_err(|e| e.to_string())?;
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            items.push(
                crate::runs::to_wire(self.store.as_ref(), row, &session.workspace).await.map_err(|e| e.to_string())?,
            );
        }
        Ok(Page { items, next_cursor: None })
    }

    async fn run_detail(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<app::RunTimeline>, String> {
        let found = self.store.run(session.workspace_id, id).await.map_err(|e| e.to_string())?;
        let Some(row) = found.filter(|r| visibility(session).sees(r.created_by)) else {
            return Ok(None);
        };
        let run =
            crate::runs::to_wire(self.store.as_ref(), &row, &session.workspace).await.map_err(|e| e.to_string())?;
        let messages = self.store.messages(id, 0, 10_000).await.map_err(|e| e.to_string())?;
        let calls = self
            .store
            .tool_calls(id, &ToolCallFilter { limit: 10_000, ..Default::default() })
            .await
            .map_err(|e| e.to_string())?;
        let tool_calls = calls.iter().map(|c| c.to_tool_call()).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
        let mut questions = Vec::new();
        for question_id in &run.pending_question_ids {
            if let Some(q) = self.question(session, *question_id).await? {
                questions.push(q);
            }
        }
        Ok(Some(app::RunTimeline {
            run,
            messages: messages.iter().map(|m| m.to_message()).collect(),
            tool_calls,
            questions,
        }))
    }

    async fn answer_draft(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<app::AnswerDraft>, String> {
        Ok(self.app.answer_drafts.get(session.principal_id, id))
    }

    async fn question(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<Question>, String> {
        let row = self.store.question(session.workspace_id, id).await.map_err(|e| e.to_string())?;
        row.filter(|r| visibility(session).sees(r.created_by))
            .map(|r| r.to_question(&session.workspace))
            .transpose()
            .map_err(|e| e.to_string())
    }

    async fn audit(
        &self,
        session: &SessionInfo,
        filter: &app::types::AuditFilter,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<Page<app::types::AuditEntry>, String> {
        if session.role != app::types::Role::Admin {
            return Err("Only admins may read the audit log.".into());
        }
        let cursor_seq = cursor.and_then(|c| c.strip_prefix("s.").and_then(|seq| seq.parse::<i64>().ok()));
        let query = AuditQuery { filter: filter.clone(), ascending: false, cursor_seq, limit: limit + 1 };
        let mut rows = self.store.list_audit(session.workspace_id, &query).await.map_err(|e| e.to_string())?;
        let next_cursor = if rows.len() > limit as usize {
            rows.truncate(limit as usize);
            rows.last().map(|last| format!("s.{}", last.seq))
        } else {
            None
        };
        let items =
            rows.iter().map(|r| r.to_entry(&session.workspace)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
        Ok(Page { items, next_cursor })
    }

    async fn upstreams(&self, session: &SessionInfo) -> Result<Vec<app::types::Upstream>, String> {
        let caller = ui_caller(session)?;
        let listed = crate::doors::gateway::list(self.app.store.as_ref(), &self.app.configured_upstreams, &caller)
            .await
            .map_err(|e| e.to_string())?;
        Ok(listed.items)
    }

    async fn rules_text(&self, session: &SessionInfo) -> Result<app::RulesText, String> {
        let caller = ui_caller(session)?;
        let stored = rules::service::get(self.store.as_ref(), &caller).await.map_err(|e| e.to_string())?;
        rules::text::rules_text(stored).map_err(|e| e.to_string())
    }

    async fn check_rules_text(
        &self,
        session: &SessionInfo,
        yaml: &str,
    ) -> Result<Result<usize, app::RulesRefusal>, String> {
        let caller = ui_caller(session)?;
        let checked = match rules::text::parse_yaml(yaml) {
            Ok(body) => {
                rules::service::check_only(self.app.store.as_ref(), self.app.config.timeout_bounds(), &caller, &body)
                    .await
                    .map(|check| check.rules)
            }
            Err(err) => Err(err),
        };
        rules::text::refusal_or(checked)
    }

    async fn save_rules_text(
        &self,
        session: &SessionInfo,
        csrf: &str,
        yaml: &str,
    ) -> Result<Result<app::RulesText, app::RulesRefusal>, String> {
        let caller = ui_caller(session)?;
        if !csrf_matches(&session.csrf_token, Some(csrf)) {
            return Err("the page's CSRF token is not this session's: reload the page".into());
        }
        let saved = match rules::text::parse_yaml(yaml) {
            Ok(body) => rules::service::save(self.app.store.as_ref(), self.app.config.timeout_bounds(), &caller, &body)
                .await
                .and_then(rules::text::rules_text),
            Err(err) => Err(err),
        };
        rules::text::refusal_or(saved)
    }

    async fn test_rules_call(
        &self,
        session: &SessionInfo,
        tool: &str,
        arguments: &str,
        agent: Option<&str>,
    ) -> Result<Result<app::types::RuleTestResult, app::RulesRefusal>, String> {
        let caller = ui_caller(session)?;
        let tested = match rules::text::parse_arguments(arguments) {
            Ok(arguments) => {
                let request =
                    app::types::RuleTestRequest { tool: tool.to_owned(), arguments, agent: agent.map(str::to_owned) };
                rules::service::test(&self.app.rules(), &caller, &request).await
            }
            Err(err) => Err(err),
        };
        rules::text::refusal_or(tested)
    }
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

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(url_escape("/inbox?a=b c"), "/inbox%3Fa%3Db%20c");
    }
}
