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
        (name = "notifications", description = "A person's notification center, and the deliveries of each question"),
        (name = "events", description = "The event log as Server-Sent Events"),
        (name = "grants", description = "\"Always allow\" rules made with approvals, which let matching tool calls through without asking"),
        (name = "rules", description = "Approval rules: which tool calls run, wait for a person or are refused; and the decision an agent asks for"),
        (name = "webhooks", description = "Events sent to other systems, signed (Standard Webhooks), in order, at least once (admins)"),
        (name = "upstreams", description = "The MCP servers the gateway at /mcp/gateway reaches, each tool call decided by the approval rules (admins)"),
        (name = "files", description = "Files uploaded for answers' file fields, and their downloads"),
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

/// The document `/api/v1/openapi.json` serves: the routes' document, finished with what the routes' annotations
/// cannot say (links between operations, the spelling of UUIDs) and what this server's configuration decides (the
/// timeouts a question may have, the model endpoints an agent may name).
pub fn served_document(document: &utoipa::openapi::OpenApi, config: &crate::config::ServeConfig) -> serde_json::Value {
    let mut document = serde_json::to_value(document).unwrap_or_default();
    link_created_to_their_operations(&mut document);
    spell_out_uuids(&mut document);
    bound_timeouts(&mut document, config.timeout_bounds());
    describe_model_endpoints(&mut document, &config.runtime);
    document
}

/// The timeouts this server accepts for a new question (`HOLDPOINT_MIN_TIMEOUT_SECONDS` and
/// `HOLDPOINT_MAX_TIMEOUT_SECONDS`).
/// The schema is an `allOf` (its `FieldRules` are flattened into it): the property is in one of its parts.
fn bound_timeouts(document: &mut serde_json::Value, bounds: crate::questions::TimeoutBounds) {
    let Some(schema) = document.pointer_mut("/components/schemas/NewQuestion") else { return };
    let parts = match schema.get_mut("allOf").and_then(serde_json::Value::as_array_mut) {
        Some(parts) => parts.iter_mut().collect(),
        None => vec![schema],
    };
    for part in parts {
        if let Some(timeout) = part.pointer_mut("/properties/timeout_seconds") {
            timeout["minimum"] = bounds.min_seconds.into();
            timeout["maximum"] = bounds.max_seconds.into();
        }
    }
}

/// The links of one creating operation: its path, where the created object's id is, and `(link name, operation id,
/// parameter)` of each operation it links to.
type CreatedLinks = (&'static str, &'static str, &'static [(&'static str, &'static str, &'static str)]);

/// What a client can do next with what a creating operation returned, as OpenAPI links from its `201` answer: the
/// operation (by id), its path parameter, and where the parameter's value is in the created object. Clients and
/// stateful fuzzers follow them from a new question to its answer, from a new run to its messages.
const CREATED_LINKS: &[CreatedLinks] = &[
    (
        "/api/v1/questions",
        "$response.body#/id",
        &[
            ("GetQuestion", "get_question", "id"),
            ("WaitForQuestion", "wait_for_question", "id"),
            ("AnswerQuestion", "answer_question", "id"),
            ("CancelQuestion", "cancel_question", "id"),
        ],
    ),
    (
        "/api/v1/runs",
        "$response.body#/id",
        &[
            ("GetRun", "get_run", "id"),
            ("ListMessages", "list_messages", "id"),
            ("ListToolCalls", "list_tool_calls", "id"),
            ("ResumeRun", "resume_run", "id"),
            ("CancelRun", "cancel_run", "id"),
        ],
    ),
    ("/api/v1/agents", "$response.body#/id", &[("GetAgent", "get_agent", "id"), ("UpdateAgent", "update_agent", "id")]),
    (
        "/api/v1/members",
        "$response.body#/user_id",
        &[("UpdateMember", "update_member", "user_id"), ("RemoveMember", "remove_member", "user_id")],
    ),
    ("/api/v1/tokens", "$response.body#/token/id", &[("RevokeToken", "revoke_token", "id")]),
];

/// Adds [`CREATED_LINKS`] to the `201` answers of the document's `POST` operations.
fn link_created_to_their_operations(document: &mut serde_json::Value) {
    for (path, value, links) in CREATED_LINKS {
        let Some(created) = document.pointer_mut(&format!("/paths/{}/post/responses/201", path.replace('/', "~1")))
        else {
            continue;
        };
        for (name, operation_id, parameter) in *links {
            created["links"][*name] =
                serde_json::json!({ "operationId": operation_id, "parameters": { *parameter: value } });
        }
    }
}

/// A UUID's spelling, for validators that take `format: uuid` as a hint only.
const UUID_PATTERN: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// Gives every `format: uuid` string of the document the pattern of a UUID: JSON Schema makes formats an
/// annotation, so a client or fuzzer may take `""` for a valid `uuid`, which the server refuses.
fn spell_out_uuids(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            if object.get("format").and_then(serde_json::Value::as_str) == Some("uuid")
                && !object.contains_key("pattern")
            {
                object.insert("pattern".into(), UUID_PATTERN.into());
            }
            object.values_mut().for_each(spell_out_uuids);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(spell_out_uuids),
        _ => {}
    }
}

/// Narrows `ModelSettings` in the document to what this server allows: its default endpoint (`OPENAI_BASE_URL`,
/// also when `base_url` is absent) with `OPENAI_API_KEY`, or one of the operator's `HOLDPOINT_MODEL_ENDPOINTS` with
/// the variable configured for it. An agent naming anything else is refused, so the document served says so.
fn describe_model_endpoints(document: &mut serde_json::Value, config: &crate::runtime::settings::RuntimeConfig) {
    use serde_json::json;
    let default_url = crate::runtime::settings::normalize_base_url(&config.openai_base_url);
    let mut choices = vec![json!({
        "type": "object",
        "description": "The server's default endpoint",
        "properties": {
            "base_url": { "type": "string", "enum": [default_url] },
            "api_key_env": { "type": "string", "enum": [crate::runtime::model::DEFAULT_KEY_VARIABLE] },
        },
    })];
    for endpoint in &config.model_endpoints {
        let mut properties = json!({ "base_url": { "type": "string", "enum": [endpoint.base_url] } });
        if let Some(variable) = &endpoint.api_key_env {
            properties["api_key_env"] = json!({ "type": "string", "enum": [variable] });
        }
        choices.push(json!({
            "type": "object",
            "description": "An endpoint the operator allows",
            "required": ["base_url"],
            "properties": properties,
            "additionalProperties": false,
        }));
    }
    if let Some(settings) = document.pointer_mut("/components/schemas/ModelSettings") {
        *settings = json!({
            "description": "An endpoint this server allows, and the variable holding its key",
            "anyOf": choices,
        });
    }
}

/// The `Idempotency-Key` header of the creating operations, as the OpenAPI document describes it.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
pub struct IdempotencyHeader {
    /// A retry with the same key returns the first result; a key is its caller's own. 1..=255 visible ASCII
    /// characters, spaces only between others.
    #[serde(rename = "Idempotency-Key")]
    #[param(pattern = r"^[!-~]([ -~]{0,253}[!-~])?$")]
    idempotency_key: Option<String>,
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
