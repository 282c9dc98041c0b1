//! Wire types of the MCP gateway's upstreams: the MCP servers a workspace's agents reach through `/mcp/gateway`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The body of `POST /api/v1/upstreams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewUpstream {
    /// How the gateway names it: 1..=32 of `a-z`, `0-9` and `-`, unique in the workspace. Its tools are listed as
    /// `<name>__<tool>` and decided by the rules as `mcp:<name>/<tool>`.
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 32, pattern = "^[a-z0-9-]{1,32}$"))]
    pub name: String,
    /// The server's streamable HTTP endpoint: an `http` or `https` URL, not into a private, loopback or link-local
    /// range unless the server allows it (`HOLDPOINT_UPSTREAM_ALLOW_PRIVATE`).
    pub url: String,
    /// HTTP headers sent with every request to it (an `Authorization` header, an API key). Their values are never
    /// shown again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// The body of `PATCH /api/v1/upstreams/{name}`: what is given changes, the rest stays. `headers` replaces them all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpstreamPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// An upstream as the API shows it: the names of its headers and variables, never their values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Upstream {
    pub id: Uuid,
    pub name: String,
    /// Its streamable HTTP endpoint; null for a process started from the server's configuration file.
    pub url: Option<String>,
    /// How the gateway reaches it.
    pub transport: UpstreamTransport,
    /// Whether it comes from the server's configuration file (`[[gateway.upstreams]]`): the operator's, which the
    /// API shows but does not change or remove (409).
    pub configured: bool,
    /// The process a `stdio` upstream is started as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<UpstreamProcess>,
    /// The names of the headers sent to it.
    pub headers: Vec<String>,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "super::time::required")]
    pub updated_at: DateTime<Utc>,
    pub health: UpstreamHealth,
}

/// How the gateway reaches an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum UpstreamTransport {
    /// MCP's streamable HTTP, at the upstream's URL (registered through the API).
    Http,
    /// MCP over the standard input and output of a local process (from the server's configuration file).
    Stdio,
}

/// The local process a `stdio` upstream is started as: its variables' names, never their values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct UpstreamProcess {
    pub command: String,
    pub args: Vec<String>,
    /// The names of the variables set for it.
    pub env: Vec<String>,
    pub cwd: Option<String>,
}

/// How the gateway last found an upstream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct UpstreamHealth {
    /// When it last answered the gateway (a connection, a list of tools, a call).
    #[serde(default, deserialize_with = "super::time::optional")]
    pub last_success_at: Option<DateTime<Utc>>,
    /// When it last failed to, and why.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub last_error_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// A workspace's upstreams, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct UpstreamList {
    pub items: Vec<Upstream>,
}
