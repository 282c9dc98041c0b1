//! The MCP gateway (docs/gateway.md): a workspace's upstream MCP servers, registered by its admins, reached by its
//! agents through one door, `/mcp/gateway`, where every tool call is decided by the approval rules first.
//!
//! - This module: registering, changing and removing upstreams (admins), each URL guarded as webhooks' are.
//! - [`connections`]: the gateway's MCP client, one connection per upstream, kept and opened again after a failure;
//!   an upstream's elicitations during a call become questions.
//! - [`door`]: the MCP server at `/mcp/gateway` that lists the upstreams' tools and decides and forwards their calls.
//! - [`waits`]: the questions the gateway's calls wait on, cancelled when the server stops.
//! - [`stdio`]: the upstreams the operator starts as local processes, from the configuration file only. The API
//!   lists them among the others, marked `configured`, and refuses to change or remove them (409: the request is
//!   valid, but the upstream is in a state the API cannot change, owned by the file) or to register another of the
//!   same name (409, as for any name taken).

pub mod connections;
pub mod door;
pub mod stdio;
pub mod waits;

use std::collections::BTreeMap;

use app::types::{NewUpstream, Upstream, UpstreamHealth, UpstreamList, UpstreamPatch, UpstreamTransport};
use serde_json::json;
use sqlx::types::Json;
use uuid::Uuid;

use crate::actions;
use crate::credentials::Caller;
use crate::egress::EgressPolicy;
use crate::error::AppError;
use crate::store::{AuditActor, NewAuditEntry, Store, StoreError, UpstreamRow, now};
use crate::validation::FieldErrors;
use stdio::Configured;

/// The setting that lets upstreams be at private addresses, named in refusals.
pub const ALLOW_PRIVATE_SETTING: &str = "HOLDPOINT_UPSTREAM_ALLOW_PRIVATE";
/// Upstreams a workspace may have.
const UPSTREAMS_MAX: usize = 50;
/// Headers an upstream may have sent to it.
const HEADERS_MAX: usize = 20;
/// The longest URL.
const URL_MAX: usize = 2000;
/// The longest name.
const NAME_MAX: usize = 32;
/// Headers the MCP transport sets itself, or HTTP owns: an upstream's headers may not name them.
const RESERVED_HEADERS: [&str; 10] = [
    "accept",
    "content-type",
    "content-length",
    "host",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "upgrade",
];
/// What only an admin may do with upstreams, as a refusal says it.
const MANAGE_UPSTREAMS: &str = "manage the MCP gateway's upstreams";

/// The outbound guard of upstreams.
pub fn egress(allow_private: bool) -> EgressPolicy {
    EgressPolicy::new(ALLOW_PRIVATE_SETTING, allow_private)
}

/// An upstream as the API shows it: its headers' names, never their values.
pub fn wire(row: &UpstreamRow) -> Upstream {
    Upstream {
        id: row.id,
        name: row.name.clone(),
        url: Some(row.url.clone()),
        transport: UpstreamTransport::Http,
        configured: false,
        process: None,
        headers: row.headers.0.keys().cloned().collect(),
        created_at: row.created_at,
        updated_at: row.updated_at,
        health: UpstreamHealth {
            last_success_at: row.last_success_at,
            last_error_at: row.last_error_at,
            last_error: row.last_error.clone(),
        },
    }
}

/// Whether `name` may name an upstream: 1..=32 of `a-z`, `0-9` and `-`. (`__`, which separates the upstream from
/// the tool in the gateway's tool names, cannot occur in it.)
pub fn valid_name(name: &str) -> bool {
    (1..=NAME_MAX).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Checks an upstream's URL as it is given: `http` or `https`, a host, no credentials in it, and every address the
/// host resolves to allowed by the guard. `Err` says what is wrong with it.
async fn check_url(url: &str, allow_private: bool) -> Result<(), String> {
    if url.len() > URL_MAX {
        return Err(format!("at most {URL_MAX} characters"));
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("only http and https URLs (streamable HTTP), not {}:", parsed.scheme()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("no user name or password in the URL: send credentials as a header".into());
    }
    egress(allow_private).check_resolved(&parsed).await
}

fn check_headers(headers: &BTreeMap<String, String>, errors: &mut FieldErrors) {
    if headers.len() > HEADERS_MAX {
        errors.add("headers", format!("at most {HEADERS_MAX} headers"));
    }
    // Header names are case-insensitive: two spellings of one name would send the header twice.
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (name, value) in headers {
        let field = format!("headers.{name}");
        match http::HeaderName::from_bytes(name.as_bytes()) {
            Err(_) => errors.add(field, "not an HTTP header name"),
            Ok(header) if RESERVED_HEADERS.contains(&header.as_str()) => {
                errors.add(field, "set by the MCP transport itself")
            }
            Ok(header) if seen.contains_key(header.as_str()) => {
                let first = seen[header.as_str()];
                errors.add(field, format!("the same header as {first:?} (header names are case-insensitive)"))
            }
            // `http` lets bytes above 127 through (HTTP's obsolete text), which servers read differently.
            Ok(_) if !value.bytes().all(|byte| (0x20..0x7f).contains(&byte)) => {
                errors.add(field, "not a valid header value (visible ASCII and spaces only)")
            }
            Ok(header) => {
                seen.insert(header.as_str().to_owned(), name);
            }
        }
    }
}

fn audit_entry(
    caller: &Caller,
    action: &str,
    id: Uuid,
    before: Option<&UpstreamRow>,
    after: Option<&UpstreamRow>,
) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id: caller.workspace_id(),
        actor: AuditActor::from(caller),
        action: action.into(),
        subject_type: "upstream".into(),
        subject_id: Some(id.to_string()),
        // Header values are secrets: the audit keeps their names, as the API shows them.
        before: before.map(|row| json!(wire(row))),
        after: after.map(|row| json!(wire(row))),
        diff: None,
        created_at: now(),
    }
}

/// A workspace's upstreams with their health, the configuration file's and the API's, by name (admins).
pub async fn list(store: &dyn Store, configured: &Configured, caller: &Caller) -> Result<UpstreamList, AppError> {
    caller.require_admin(MANAGE_UPSTREAMS)?;
    let rows = store.upstreams(caller.workspace_id()).await?;
    let mut items: Vec<Upstream> = configured.of(caller.workspace_id()).iter().map(|u| u.wire()).collect();
    items.extend(rows.iter().map(wire));
    items.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(UpstreamList { items })
}

/// One upstream (admins); 404 if the caller's workspace has none of that name.
pub async fn get(
    store: &dyn Store,
    configured: &Configured,
    caller: &Caller,
    name: &str,
) -> Result<Upstream, AppError> {
    caller.require_admin(MANAGE_UPSTREAMS)?;
    if let Some(upstream) = configured.find(caller.workspace_id(), name) {
        return Ok(upstream.wire());
    }
    Ok(wire(&find(store, caller, name).await?))
}

/// The refusal to change an upstream of the configuration file through the API: 409, since the request may be
/// valid, but the upstream is the operator's, and only the file (and a restart) changes it.
fn refuse_configured(configured: &Configured, caller: &Caller, name: &str, doing: &str) -> Result<(), AppError> {
    match configured.find(caller.workspace_id(), name) {
        Some(_) => Err(AppError::Conflict {
            message: format!(
                "the upstream {name:?} is started from the server's configuration file; the API cannot {doing} it \
                 (its operator changes the file's [[gateway.upstreams]] and restarts the server)"
            ),
            details: Some(json!({ "name": name, "configured": true })),
        }),
        None => Ok(()),
    }
}

async fn find(store: &dyn Store, caller: &Caller, name: &str) -> Result<UpstreamRow, AppError> {
    store.upstream(caller.workspace_id(), name).await?.ok_or(AppError::NotFound("upstream"))
}

/// Registers an upstream (admins). It need not be up: the gateway connects when a call or a list needs it.
pub async fn create(
    store: &dyn Store,
    configured: &Configured,
    caller: &Caller,
    allow_private: bool,
    input: NewUpstream,
) -> Result<Upstream, AppError> {
    caller.require_admin(MANAGE_UPSTREAMS)?;
    let mut errors = FieldErrors::default();
    if !valid_name(&input.name) {
        errors.add("name", format!("1..={NAME_MAX} characters of a-z, 0-9 and -"));
    }
    if let Err(problem) = check_url(&input.url, allow_private).await {
        errors.add("url", problem);
    }
    check_headers(&input.headers, &mut errors);
    if store.upstreams(caller.workspace_id()).await?.len() >= UPSTREAMS_MAX {
        errors.add("name", format!("a workspace has at most {UPSTREAMS_MAX} upstreams"));
    }
    errors.into_result("the upstream")?;
    if configured.find(caller.workspace_id(), &input.name).is_some() {
        return Err(AppError::Conflict {
            message: format!(
                "an upstream named {:?} is started from the server's configuration file; choose another name",
                input.name
            ),
            details: Some(json!({ "name": input.name, "configured": true })),
        });
    }
    let at = now();
    let row = UpstreamRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        name: input.name,
        url: input.url,
        headers: Json(input.headers),
        created_at: at,
        updated_at: at,
        last_success_at: None,
        last_error_at: None,
        last_error: None,
    };
    let audit = audit_entry(caller, actions::UPSTREAM_CREATED, row.id, None, Some(&row));
    match store.create_upstream(&row, &audit).await {
        Err(StoreError::Duplicate(_)) => {
            return Err(AppError::Conflict {
                message: format!("an upstream named {:?} exists already", row.name),
                details: Some(json!({ "name": row.name })),
            });
        }
        other => other?,
    }
    Ok(wire(&row))
}

/// Changes an upstream's URL or headers (admins); the gateway's connection to it is opened again.
pub async fn update(
    store: &dyn Store,
    configured: &Configured,
    caller: &Caller,
    allow_private: bool,
    name: &str,
    patch: UpstreamPatch,
) -> Result<Upstream, AppError> {
    caller.require_admin(MANAGE_UPSTREAMS)?;
    refuse_configured(configured, caller, name, "change")?;
    let before = find(store, caller, name).await?;
    let mut errors = FieldErrors::default();
    if let Some(url) = &patch.url
        && let Err(problem) = check_url(url, allow_private).await
    {
        errors.add("url", problem);
    }
    if let Some(headers) = &patch.headers {
        check_headers(headers, &mut errors);
    }
    errors.into_result("the upstream")?;
    let mut row = before.clone();
    if let Some(url) = patch.url {
        row.url = url;
    }
    if let Some(headers) = patch.headers {
        row.headers = Json(headers);
    }
    row.updated_at = now();
    row.last_success_at = None;
    row.last_error_at = None;
    row.last_error = None;
    let audit = audit_entry(caller, actions::UPSTREAM_CHANGED, row.id, Some(&before), Some(&row));
    if !store.update_upstream(&row, &audit).await? {
        return Err(AppError::NotFound("upstream"));
    }
    Ok(wire(&row))
}

/// Removes an upstream (admins): its tools leave the gateway's list.
pub async fn delete(store: &dyn Store, configured: &Configured, caller: &Caller, name: &str) -> Result<(), AppError> {
    caller.require_admin(MANAGE_UPSTREAMS)?;
    refuse_configured(configured, caller, name, "remove")?;
    let row = find(store, caller, name).await?;
    let audit = audit_entry(caller, actions::UPSTREAM_DELETED, row.id, Some(&row), None);
    if !store.delete_upstream(caller.workspace_id(), row.id, &audit).await? {
        return Err(AppError::NotFound("upstream"));
    }
    Ok(())
}
