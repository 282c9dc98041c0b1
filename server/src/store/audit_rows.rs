//! Audit log rows and the inputs of the audit store methods (issue 7). The chain itself is built in the store's
//! append (see `append_audit_in` in [`super::sql`]); how a hash is computed lives in [`crate::audit`].

use app::types::{ActorKind, AuditEntry, AuditFilter};
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::StoreError;

/// Who or what took an audited action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditActor {
    pub kind: ActorKind,
    /// The token's or person's id, when there is one.
    pub id: Option<String>,
    /// A token's or person's name, or what rule or deadline decided.
    pub name: String,
}

impl AuditActor {
    /// A rule of the system (an approval policy, a run's lifecycle, the configuration), named by `name`.
    pub fn policy(name: impl Into<String>, id: Option<String>) -> Self {
        AuditActor { kind: ActorKind::Policy, id, name: name.into() }
    }

    /// A deadline that passed.
    pub fn timeout() -> Self {
        AuditActor { kind: ActorKind::Timeout, id: None, name: "deadline".into() }
    }
}

/// An entry to append: the store gives it its id, `seq`, `prev_hash` and `hash`.
#[derive(Debug, Clone)]
pub struct NewAuditEntry {
    pub workspace_id: Uuid,
    pub actor: AuditActor,
    /// e.g. `question.answered` (see [`crate::audit::action`]).
    pub action: String,
    /// e.g. `question`, `tool_call`, `run`, `token`, `session`, `user`.
    pub subject_type: String,
    pub subject_id: Option<String>,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub diff: Option<Value>,
    pub created_at: DateTime<Utc>,
}

/// An entry as stored. `before`, `after` and `diff` are the exact JSON text the hash covers.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AuditRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub seq: i64,
    pub prev_hash: String,
    pub hash: String,
    pub actor: String,
    pub actor_id: Option<String>,
    pub actor_kind: String,
    pub action: String,
    pub subject_type: String,
    pub subject_id: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub diff: Option<String>,
    pub created_at: DateTime<Utc>,
}

fn json_text(text: &Option<String>) -> Result<Option<Value>, StoreError> {
    text.as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|err| StoreError::Corrupt(format!("an audit entry holds invalid JSON: {err}")))
}

impl AuditRow {
    /// Seals a new entry as entry `seq` of its chain, after the entry whose hash is `prev_hash`.
    pub fn seal(entry: &NewAuditEntry, seq: i64, prev_hash: String) -> AuditRow {
        let mut row = AuditRow { seq, prev_hash, ..Self::unsealed(entry) };
        row.hash = crate::audit::entry_hash(&row);
        row
    }

    /// A new entry without its place in the chain (`seq` 0, no hashes): a draft for the database to seal.
    pub fn unsealed(entry: &NewAuditEntry) -> AuditRow {
        let text = |value: &Option<Value>| value.as_ref().map(Value::to_string);
        AuditRow {
            id: Uuid::now_v7(),
            workspace_id: entry.workspace_id,
            seq: 0,
            prev_hash: String::new(),
            hash: String::new(),
            actor: entry.actor.name.clone(),
            actor_id: entry.actor.id.clone(),
            actor_kind: entry.actor.kind.as_str().to_owned(),
            action: entry.action.clone(),
            subject_type: entry.subject_type.clone(),
            subject_id: entry.subject_id.clone(),
            before: text(&entry.before),
            after: text(&entry.after),
            diff: text(&entry.diff),
            // At the precision both databases keep: PostgreSQL rounds nanoseconds, and the time read back must
            // hash the same as the time written.
            created_at: entry.created_at.trunc_subsecs(6),
        }
    }

    /// The wire form, for a workspace whose name the caller knows.
    pub fn to_entry(&self, workspace: &str) -> Result<AuditEntry, StoreError> {
        Ok(AuditEntry {
            id: self.id,
            workspace_id: self.workspace_id,
            workspace: workspace.to_owned(),
            seq: self.seq,
            prev_hash: self.prev_hash.clone(),
            hash: self.hash.clone(),
            actor: self.actor.clone(),
            actor_id: self.actor_id.clone(),
            actor_kind: self
                .actor_kind
                .parse()
                .map_err(|e: app::types::UnknownVariant| StoreError::Corrupt(e.to_string()))?,
            action: self.action.clone(),
            subject_type: self.subject_type.clone(),
            subject_id: self.subject_id.clone(),
            before: json_text(&self.before)?,
            after: json_text(&self.after)?,
            diff: json_text(&self.diff)?,
            created_at: self.created_at,
        })
    }
}

/// A page of a workspace's audit log: newest first after the cursor, or oldest first (chain order, for exports).
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    pub filter: AuditFilter,
    /// Oldest first: entries with `seq` above `cursor_seq`. Otherwise newest first: entries with `seq` below it.
    pub ascending: bool,
    pub cursor_seq: Option<i64>,
    /// Rows to fetch; callers ask for one more than they show to know whether there is a next page.
    pub limit: u32,
}

/// Where a workspace's chain ends, as its head row records it (`None` when the head row is missing).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AuditHead {
    pub workspace_id: Uuid,
    pub workspace: String,
    pub seq: Option<i64>,
    pub hash: Option<String>,
}
