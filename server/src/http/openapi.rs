//! The OpenAPI document, served at `/api/v1/openapi.json`.
//!
//! Every route of the API is registered through `utoipa_axum::routes!`, which adds the route and its documentation
//! in one step, so the document cannot list a route the router lacks or miss one it has.

use app::types::ErrorBody;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi};

/// The document's frame; the paths come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Holdpoint API",
        description = "Human-in-the-loop control plane for AI agents: agents ask, people answer.",
    ),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody, app::types::ErrorDetail)),
    security(("bearer" = [])),
    tags(
        (name = "questions", description = "What a person must handle"),
        (name = "agents", description = "Agent definitions"),
        (name = "runs", description = "Agent runs: pause for a person, resume where they stopped"),
        (name = "people", description = "Members of the workspace, API tokens, and who the caller is"),
        (name = "events", description = "The event log as Server-Sent Events"),
        (name = "audit", description = "The hash-chained audit log of decisions and security-relevant actions (admins)"),
        (name = "health", description = "Probes"),
    ),
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("hp_...").build()),
        );
    }
}

/// The error statuses any API operation may answer with, all in the one error shape.
#[derive(IntoResponses)]
#[allow(dead_code)]
pub enum ErrorResponses {
    /// The request is malformed.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// No valid credentials.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Not allowed for this role, or a missing CSRF token.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// No such object in the caller's workspace.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// Not in a state that allows this (e.g. already answered).
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// Too large.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// Well-formed but invalid; `details.fields` says what.
    #[response(status = 422)]
    Invalid(ErrorBody),
    /// A rate limit is exhausted (creation endpoints: per token and per client address); `details.limit` names it.
    #[response(status = 429, headers(("Retry-After" = u64, description = "Seconds until a retry can succeed")))]
    RateLimited(ErrorBody),
    /// Something failed on the server.
    #[response(status = 500)]
    Internal(ErrorBody),
}
