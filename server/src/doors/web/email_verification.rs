//! `/verify-email/{code}`: the door of email verification links. A link proves its opener reads the mailbox; the
//! session it is confirmed in proves the account. Only both together make the address the account's own — the
//! address single sign-on signs the account in by — so an address someone else typed onto the account (a
//! workspace admin, anyone who reads that mailbox) never signs in as it.
//!
//! Opening a link (`GET`) shows what it would confirm and changes nothing (mail scanners open links); confirming is
//! a `POST` from that page, with the session's CSRF token.

use axum::Router;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum_extra::extract::CookieJar;
use html_escape::{encode_double_quoted_attribute as attribute, encode_text as text};
use serde::Deserialize;

use crate::credentials::Credential;
use crate::doors::auth::{csrf_matches, session_caller};
use crate::doors::web::action_links::page;
use crate::error::AppError;
use crate::people::{self, EMAIL_VERIFICATION_PATH};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route(&format!("{EMAIL_VERIFICATION_PATH}/{{code}}"), get(open).post(confirm))
}

/// The confirmation form's fields.
#[derive(Deserialize)]
struct ConfirmForm {
    /// The session's CSRF token, as the page embedded it.
    csrf: Option<String>,
}

/// `GET /verify-email/{code}`: the address and the account, with a button to confirm when the browser is signed in
/// as that account; otherwise a way to sign in first.
async fn open(State(state): State<AppState>, jar: CookieJar, Path(code): Path<String>) -> Response {
    let pending = match people::open_email_verification(state.store.as_ref(), &code).await {
        Ok(Some(pending)) => pending,
        Ok(None) => return invalid(),
        Err(err) => return refusal(err),
    };
    let caller = match session_caller(&state, &jar).await {
        Ok(caller) => caller,
        Err(err) => return refusal(err),
    };
    let here = format!("{EMAIL_VERIFICATION_PATH}/{code}");
    match caller {
        Some(caller) if caller.principal.id == pending.user_id => {
            let Credential::Session { csrf_token } = &caller.credential else { return invalid() };
            let body = format!(
                "<h1>Confirm your email address</h1><form method=\"post\" action=\"{action}\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><p>Confirm <strong>{email}</strong> as the \
                 address of your account <strong>{name}</strong>? Single sign-on then signs you in by it.</p>\
                 <button type=\"submit\" class=\"primary\">Confirm</button></form>\
                 <p class=\"muted\">Nothing changes until you confirm.</p>",
                action = attribute(&here),
                csrf = attribute(csrf_token),
                email = text(&pending.email),
                name = text(&caller.principal.name),
            );
            page(StatusCode::OK, "Confirm your email address", &body)
        }
        Some(_) => page(
            StatusCode::FORBIDDEN,
            "Another account",
            "<h1>This link is for another account</h1><p>Sign out, sign in as the account the address was set on, \
             and open the link again. Nothing was confirmed.</p>",
        ),
        None => {
            let body = format!(
                "<h1>Sign in first</h1><p>An address is confirmed by its account: <a href=\"/signin?next={next}\">sign \
                 in</a> as the account it was set on, and confirm. Nothing was confirmed.</p>",
                next = attribute(&here),
            );
            page(StatusCode::UNAUTHORIZED, "Sign in first", &body)
        }
    }
}

/// `POST /verify-email/{code}`: confirms the address as the signed-in account's, with the session's CSRF token.
async fn confirm(
    State(state): State<AppState>,
    jar: CookieJar,
    Path(code): Path<String>,
    Form(form): Form<ConfirmForm>,
) -> Response {
    let caller = match session_caller(&state, &jar).await {
        Ok(Some(caller)) => caller,
        Ok(None) => {
            return page(
                StatusCode::UNAUTHORIZED,
                "Sign in first",
                "<h1>Sign in first</h1><p>Open the link again once signed in. Nothing was confirmed.</p>",
            );
        }
        Err(err) => return refusal(err),
    };
    let Credential::Session { csrf_token } = &caller.credential else { return invalid() };
    if !csrf_matches(csrf_token, form.csrf.as_deref()) {
        return refusal(AppError::Forbidden("missing or wrong CSRF token".into()));
    }
    match people::confirm_email_verification(state.store.as_ref(), &caller, &code).await {
        Ok(email) => {
            if let Err(err) =
                people::link_slack_by_verified_email(state.store.as_ref(), state.slack_client(), &caller, &email).await
            {
                tracing::warn!(error = %err, "the verified address could not be looked up on Slack");
            }
            let body = format!(
                "<h1>Address confirmed</h1><p><strong>{}</strong> is the address of your account.</p>\
                 <p><a href=\"/settings\">Your settings</a></p>",
                text(&email)
            );
            page(StatusCode::OK, "Address confirmed", &body)
        }
        Err(AppError::NotFound(_)) => invalid(),
        Err(err) => refusal(err),
    }
}

fn invalid() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Invalid link",
        "<h1>This link is not valid</h1><p>It was used already, it expired, or it is for another account. Set the \
         address again in your settings for a new link. Nothing was confirmed.</p>",
    )
}

fn refusal(error: AppError) -> Response {
    let (status, _) = error.status_and_code();
    let body = format!("<h1>Not confirmed</h1><p>{}</p>", text(&error.to_string()));
    page(status, "Not confirmed", &body)
}
