//! Wire types of the audit log (issue 7): who decided what, when, with what before and after.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::UnknownVariant;

wire_enum! {
    /// What kind of actor an audit entry records.
    ActorKind {
        /// A person in the web UI (a browser session).
        Human = "human",
        /// An API token (a script, an agent, the CLI against a server).
        Token = "token",
        /// A rule of the system: an agent's approval policy, a run's lifecycle, the server's configuration.
        Policy = "policy",
        /// A deadline that passed.
        Timeout = "timeout",
    }
}

/// One entry of a workspace's audit log, as `GET /audit` and the export return it.
///
/// `hash` is SHA-256 over `prev_hash` and the entry's fields (docs/decisions.md, "Audit log", says exactly how), so
/// an auditor can check a JSONL export without the database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub id: Uuid,
    pub workspace_id: Uuid,
    /// The workspace's name.
    pub workspace: String,
    /// 1, 2, 3... within the workspace, without gaps.
    pub seq: i64,
    /// The `hash` of entry `seq - 1`; 64 zeros for the first entry.
    pub prev_hash: String,
    /// Lowercase hex SHA-256 of this entry (see above).
    pub hash: String,
    /// Who: a token's or a person's name, or the rule or deadline that decided.
    pub actor: String,
    /// The token's (or person's) id, when the actor has one.
    pub actor_id: Option<String>,
    pub actor_kind: ActorKind,
    /// What happened, e.g. `question.answered`, `tool_call.decided`, `token.created`, `signin`.
    pub action: String,
    /// What it happened to: `question`, `tool_call`, `run`, `token`, `session`, ...
    pub subject_type: String,
    pub subject_id: Option<String>,
    /// The subject's relevant state before the action.
    pub before: Option<Value>,
    /// The subject's relevant state after the action.
    pub after: Option<Value>,
    /// For edited arguments: an RFC 6902 JSON Patch from the original to the edited arguments.
    pub diff: Option<Value>,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
}

/// The filters of the audit page and of `GET /audit` (all optional; `None` is "any").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditFilter {
    pub action: Option<String>,
    pub actor: Option<String>,
    pub actor_kind: Option<ActorKind>,
    pub subject_id: Option<String>,
    /// Entries at or after this time.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub since: Option<DateTime<Utc>>,
    /// Entries before this time.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub until: Option<DateTime<Utc>>,
}
