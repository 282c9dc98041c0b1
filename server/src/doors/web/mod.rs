//! The web UI's server side: Leptos pages (server-rendered, then hydrated) over the store and use cases
//! ([`ui_backend`]), the built site's files ([`site`]), signing in and out ([`sign_in`]) and the question page's
//! answer form ([`answer_form`]). Every page needs a signed-in session; without one the browser is sent to `/signin`.

pub mod action_links;
pub mod answer_drafts;
mod answer_form;
pub mod email_verification;
mod sign_in;
pub mod site;
mod ui_backend;

use axum::{
    Router,
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use axum_extra::extract::CookieJar;
use leptos::prelude::provide_context;
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};

use crate::doors::auth::session_caller;
use crate::error::AppError;
use crate::state::AppState;
use answer_form::answer_from_form;

/// Pages and server functions, behind the session check; the sign-in page, the auth endpoints and the site's
/// static files are open.
pub fn router(state: &AppState) -> Router<AppState> {
    let backend = ui_backend::handle(state);
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
        .merge(sign_in::routes())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(url_escape("/inbox?a=b c"), "/inbox%3Fa%3Db%20c");
    }
}
