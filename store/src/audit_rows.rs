//! Audit log rows, the inputs of the audit store methods, and the chain's format: how an entry is sealed with the
//! hash of the one before it. The store appends and seals entries (see `append_audit_in` in [`super::sql`]);
//! what each action records, and verifying the chains, are the use cases'.

use std::fmt::Write as _;

use chrono::{DateTime, SubsecRound, Utc};
use holdpoint_types::{ActorKind, AuditEntry, AuditFilter};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::StoreError;

/// The `prev_hash` of a chain's first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The first field of every hashed preimage: a new format gets a new tag, so old entries stay verifiable.
pub const HASH_FORMAT: &str = "holdpoint-audit-v1";

/// The timestamp as it is hashed: RFC 3339 in UTC with exactly six fractional digits and `Z`.
pub fn hashed_time(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Appends one field to a preimage: `<byte length>:<bytes>,` (a netstring), or `~,` for NULL. Length prefixes
/// make the encoding unambiguous whatever the fields contain, with nothing to escape.
fn push_field(preimage: &mut String, field: Option<&str>) {
    match field {
        Some(text) => {
            let _ = write!(preimage, "{}:{text},", text.len());
        }
        None => preimage.push_str("~,"),
    }
}

/// The exact bytes an entry's hash covers (docs/decisions.md, "Audit log"): the format tag, then `workspace_id`,
/// `seq`, `id`, `created_at`, `actor_kind`, `actor`, `actor_id`, `action`, `subject_type`, `subject_id`, `before`,
/// `after`, `diff` and `prev_hash`, each as a netstring.
pub fn preimage(row: &AuditRow) -> String {
    let mut preimage = String::new();
    let fields = [
        Some(HASH_FORMAT.to_owned()),
        Some(row.workspace_id.to_string()),
        Some(row.seq.to_string()),
        Some(row.id.to_string()),
        Some(hashed_time(&row.created_at)),
        Some(row.actor_kind.clone()),
        Some(row.actor.clone()),
        row.actor_id.clone(),
        Some(row.action.clone()),
        Some(row.subject_type.clone()),
        row.subject_id.clone(),
        row.before.clone(),
        row.after.clone(),
        row.diff.clone(),
        Some(row.prev_hash.clone()),
    ];
    for field in &fields {
        push_field(&mut preimage, field.as_deref());
    }
    preimage
}

/// Lowercase hex SHA-256 of the entry's [`preimage`].
pub fn entry_hash(row: &AuditRow) -> String {
    hex::encode(Sha256::digest(preimage(row).as_bytes()))
}

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
    /// e.g. `question.answered`, one of the names of the use cases' vocabulary of actions.
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
        row.hash = entry_hash(&row);
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
                .map_err(|e: holdpoint_types::UnknownVariant| StoreError::Corrupt(e.to_string()))?,
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn row() -> AuditRow {
        AuditRow {
            id: Uuid::parse_str("01900000-0000-7000-8000-000000000001").unwrap(),
            workspace_id: Uuid::parse_str("01900000-0000-7000-8000-0000000000aa").unwrap(),
            seq: 1,
            prev_hash: GENESIS_HASH.into(),
            hash: String::new(),
            actor: "alice".into(),
            actor_id: None,
            actor_kind: "human".into(),
            action: "question.answered".into(),
            subject_type: "question".into(),
            subject_id: Some("q1".into()),
            before: Some(r#"{"status":"pending"}"#.into()),
            after: Some(r#"{"status":"answered"}"#.into()),
            diff: None,
            created_at: chrono::Utc.with_ymd_and_hms(2026, 11, 22, 15, 4, 5).unwrap(),
        }
    }

    #[test]
    fn the_preimage_is_a_sequence_of_netstrings_with_a_tilde_for_null() {
        assert_eq!(
            preimage(&row()),
            "18:holdpoint-audit-v1,36:01900000-0000-7000-8000-0000000000aa,1:1,\
             36:01900000-0000-7000-8000-000000000001,27:2026-11-22T15:04:05.000000Z,5:human,5:alice,~,\
             17:question.answered,8:question,2:q1,20:{\"status\":\"pending\"},21:{\"status\":\"answered\"},~,\
             64:0000000000000000000000000000000000000000000000000000000000000000,"
        );
    }

    #[test]
    fn lengths_count_bytes_so_no_field_can_pose_as_two() {
        let mut a = row();
        a.actor = "é".into();
        assert!(preimage(&a).contains(",2:é,"));
        let mut b = row();
        b.actor = "a,5:human".into();
        assert_ne!(entry_hash(&b), entry_hash(&row()));
    }

    #[test]
    fn every_field_changes_the_hash() {
        let base = entry_hash(&row());
        let changes: Vec<fn(&mut AuditRow)> = vec![
            |r| r.seq = 2,
            |r| r.actor = "bob".into(),
            |r| r.actor_id = Some("x".into()),
            |r| r.actor_kind = "token".into(),
            |r| r.action = "question.expired".into(),
            |r| r.subject_type = "run".into(),
            |r| r.subject_id = None,
            |r| r.before = None,
            |r| r.after = Some("{}".into()),
            |r| r.diff = Some("[]".into()),
            |r| r.prev_hash = "1".repeat(64),
            |r| r.created_at += chrono::Duration::microseconds(1),
            |r| r.id = Uuid::nil(),
            |r| r.workspace_id = Uuid::nil(),
        ];
        for change in changes {
            let mut changed = row();
            change(&mut changed);
            assert_ne!(entry_hash(&changed), base);
        }
        assert_eq!(entry_hash(&row()).len(), 64);
    }
}
