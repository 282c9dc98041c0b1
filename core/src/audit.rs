//! The audit log: what is recorded for each action, and how a chain is verified.
//!
//! Every workspace has one chain. Entry `seq` N carries the hash of entry N-1 (`prev_hash`) and its own `hash`, a
//! SHA-256 over `prev_hash` and the entry's fields ([`entry_hash`], with the chain's format, in the store). Editing an entry changes its hash; removing one
//! leaves a gap in `seq` and a `prev_hash` that points at nothing; moving one breaks both. The store appends entries
//! in the transaction of the change they record; [`verify`] walks every chain and names the first bad entry.

use holdpoint_types::{ActorKind, QuestionStatus, ToolCallStatus};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::actions;
use crate::credentials::{Caller, Credential};
use crate::store::{
    AuditActor, NewAuditEntry, Principal, QuestionRow, RunRow, Store, StoreResult, TokenRow, ToolCallRow,
};
pub use crate::store::{GENESIS_HASH, HASH_FORMAT, entry_hash, hashed_time, preimage};

impl From<&Caller> for AuditActor {
    /// A browser session is a person (`human`); a bearer token is `token`. The id is the account's or the token's.
    fn from(caller: &Caller) -> Self {
        let kind = match caller.credential {
            Credential::Session { .. } | Credential::Channel(_) => ActorKind::Human,
            Credential::Token => ActorKind::Token,
        };
        AuditActor { kind, id: Some(caller.principal.id.to_string()), name: caller.principal.name.clone() }
    }
}

/// An RFC 6902 JSON Patch that turns `from` into `to`: `add`, `remove` and `replace` operations, descending into
/// objects key by key (sorted) and replacing anything else that differs whole (arrays included, so every path stays
/// valid whatever the order of application). Empty when they are equal.
pub fn json_diff(from: &Value, to: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    diff_into(from, to, "", &mut ops);
    ops
}

fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn diff_into(from: &Value, to: &Value, path: &str, ops: &mut Vec<Value>) {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = format!("{path}/{}", pointer_token(key));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff_into(x, y, &child, ops),
                    (Some(_), None) => ops.push(json!({ "op": "remove", "path": child })),
                    (None, Some(y)) => ops.push(json!({ "op": "add", "path": child, "value": y })),
                    (None, None) => {}
                }
            }
        }
        (a, b) if a == b => {}
        (_, b) => ops.push(json!({ "op": "replace", "path": path, "value": b })),
    }
}

/// The name of the rules that cancel questions when their run ends, is cancelled or asks a newer blocking one.
pub const RUN_LIFECYCLE: &str = "run lifecycle";
/// The name of an agent's approval policy as an actor.
pub const APPROVAL_POLICY: &str = "approval policy";

/// The entry recording a new token (never its secret).
pub fn token_created(token: &TokenRow, actor: &AuditActor) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id: token.workspace_id,
        actor: actor.clone(),
        action: actions::TOKEN_CREATED.into(),
        subject_type: "token".into(),
        subject_id: Some(token.id.to_string()),
        before: None,
        after: Some(json!({ "name": token.name, "role": token.role })),
        diff: None,
        created_at: token.created_at,
    }
}

/// The entry recording a tool call decided by its agent's approval policy (`auto` approves, `never` rejects),
/// or refused because its approval question could not be asked.
pub fn tool_call_decided(workspace_id: Uuid, agent: &str, agent_id: Option<Uuid>, call: &ToolCallRow) -> NewAuditEntry {
    let mut after = json!({
        "status": call.status,
        "run_id": call.run_id,
        "call_id": call.call_id,
        "tool_name": call.tool_name,
        "arguments": call.input.0,
        "agent": agent,
    });
    if let Some(comment) = &call.decision_comment {
        after["comment"] = json!(comment);
    }
    NewAuditEntry {
        workspace_id,
        actor: AuditActor::policy(APPROVAL_POLICY, agent_id.map(|id| id.to_string())),
        action: actions::TOOL_CALL_DECIDED.into(),
        subject_type: "tool_call".into(),
        subject_id: Some(call.id.to_string()),
        before: None,
        after: Some(after),
        diff: None,
        created_at: call.updated_at,
    }
}

/// The entry recording a run cancelled by a caller (its questions' cancellations follow as entries of their own).
pub fn run_cancelled(run: &RunRow, previous_status: &str, actor: &AuditActor) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id: run.workspace_id,
        actor: actor.clone(),
        action: actions::RUN_CANCELLED.into(),
        subject_type: "run".into(),
        subject_id: Some(run.id.to_string()),
        before: Some(json!({ "status": previous_status })),
        after: Some(json!({ "status": run.status, "agent": run.agent.0.name })),
        diff: None,
        created_at: run.updated_at,
    }
}

/// How the audit log words what a run's change carries along: its questions cancelled with it (recorded as
/// resolutions of their own) and its descendants cancelled with it.
pub struct RunCascades;

impl crate::store::CascadeRecords for RunCascades {
    fn question_cancelled(&self, question: &QuestionRow, actor: &AuditActor) -> NewAuditEntry {
        question_resolved(question, actor)
    }
    fn run_cancelled(&self, run: &RunRow, previous_status: &str, actor: &AuditActor) -> NewAuditEntry {
        run_cancelled(run, previous_status, actor)
    }
    fn run_lifecycle(&self, run: &RunRow) -> AuditActor {
        AuditActor::policy(RUN_LIFECYCLE, Some(run.id.to_string()))
    }
}

/// The entries of the calls of a model turn its agent's approval policy decided on arrival (`auto` approves,
/// `never` rejects).
pub fn policy_decisions(run: &RunRow, calls: &[ToolCallRow]) -> Vec<NewAuditEntry> {
    calls
        .iter()
        .filter(|call| call.decided_by.as_deref() == Some(crate::store::POLICY_DECIDER))
        .map(|call| tool_call_decided(run.workspace_id, &run.agent.0.name, run.agent_id, call))
        .collect()
}

/// The entry of a write of `call` that decides it by policy: it leaves `pending_approval` (`previous`) without an
/// approval question, because the question could not be asked. A person's decision is recorded when its question
/// is answered.
pub fn policy_refusal(run: &RunRow, previous: ToolCallStatus, call: &ToolCallRow) -> Option<NewAuditEntry> {
    let decided_by_policy =
        call.question_id.is_none() && call.decided_by.as_deref() == Some(crate::store::POLICY_DECIDER);
    (decided_by_policy && previous == ToolCallStatus::PendingApproval && call.status != previous)
        .then(|| tool_call_decided(run.workspace_id, &run.agent.0.name, run.agent_id, call))
}

/// Records a web UI session opened (`signin`, with how: `password`, `token`, `link`, `oidc`) or closed
/// (`signout`) by a person, in a transaction of its own: the session row is not part of the chain.
pub async fn record_session(
    store: &dyn Store,
    principal: &Principal,
    action: &str,
    method: Option<&str>,
) -> StoreResult<()> {
    let mut after = json!({ "role": principal.role });
    if let Some(method) = method {
        after["method"] = json!(method);
    }
    let entry = NewAuditEntry {
        workspace_id: principal.workspace_id,
        actor: AuditActor { kind: ActorKind::Human, id: Some(principal.id.to_string()), name: principal.name.clone() },
        action: action.to_owned(),
        subject_type: "session".into(),
        subject_id: None,
        before: None,
        after: Some(after),
        diff: None,
        created_at: crate::store::now(),
    };
    store.append_audit(&entry).await.map(|_| ())
}

/// The action that records a question's move to `status`.
fn question_action(status: QuestionStatus) -> &'static str {
    match status {
        QuestionStatus::Answered => actions::QUESTION_ANSWERED,
        QuestionStatus::Defaulted => actions::QUESTION_DEFAULTED,
        QuestionStatus::Expired => actions::QUESTION_EXPIRED,
        QuestionStatus::Cancelled | QuestionStatus::Pending => actions::QUESTION_CANCELLED,
    }
}

/// The entry recording a question's one transition out of `pending` (`row` is the question after it). For an
/// approval answered with edited arguments, `before` keeps the original arguments, `after` the edited ones, and
/// `diff` is the JSON Patch between them.
pub fn question_resolved(row: &QuestionRow, actor: &AuditActor) -> NewAuditEntry {
    let mut before = Map::new();
    before.insert("status".into(), json!("pending"));
    before.insert("title".into(), json!(row.title));
    before.insert("kind".into(), json!(row.kind));
    if let Some(run_id) = row.run_id {
        before.insert("run_id".into(), json!(run_id));
    }
    if let Some(action) = &row.action {
        before.insert("action".into(), json!({ "tool_name": action.0.tool_name, "arguments": action.0.arguments }));
    }
    let response = row.response.as_ref().map(|r| &r.0);
    let mut after = Map::new();
    after.insert("status".into(), json!(row.status));
    after.insert("resolution".into(), json!(row.resolution));
    if let Some(response) = response {
        after.insert("value".into(), response.value.clone());
        if let Some(comment) = &response.comment {
            after.insert("comment".into(), json!(comment));
        }
    }
    if row.required_approvals > 1 {
        after.insert("required_approvals".into(), json!(row.required_approvals));
        after.insert("approvals".into(), json!(row.approvals.0));
    }
    let edited = response.and_then(|r| r.edited_arguments.as_ref());
    let mut diff = None;
    if let (Some(edited), Some(action)) = (edited, &row.action) {
        after.insert("edited_arguments".into(), edited.clone());
        diff = Some(Value::Array(json_diff(&action.0.arguments, edited)));
    }
    NewAuditEntry {
        workspace_id: row.workspace_id,
        actor: actor.clone(),
        action: question_action(row.status).to_owned(),
        subject_type: "question".into(),
        subject_id: Some(row.id.to_string()),
        before: Some(Value::Object(before)),
        after: Some(Value::Object(after)),
        diff,
        created_at: row.resolved_at.unwrap_or(row.updated_at),
    }
}

/// What is wrong with a chain, at which entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    pub workspace: String,
    pub workspace_id: Uuid,
    /// The first entry that is wrong (for a gap: the first missing `seq`).
    pub seq: i64,
    /// The id of the entry found at or after that position, if any.
    pub id: Option<Uuid>,
    /// `altered`, `missing`, `reordered` or `truncated`.
    pub kind: &'static str,
    pub message: String,
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "workspace {:?} ({}), seq {}", self.workspace, self.workspace_id, self.seq)?;
        if let Some(id) = self.id {
            write!(f, ", id {id}")?;
        }
        write!(f, ": {}: {}", self.kind, self.message)
    }
}

/// What a successful verification covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub entries: u64,
    pub workspaces: u64,
}

impl std::fmt::Display for Verified {
    /// "12 entries in 2 workspaces", "1 entry in 1 workspace".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = if self.entries == 1 { "entry" } else { "entries" };
        let workspaces = if self.workspaces == 1 { "workspace" } else { "workspaces" };
        write!(f, "{} {entries} in {} {workspaces}", self.entries, self.workspaces)
    }
}

/// How many entries [`verify`] reads at a time.
const VERIFY_PAGE: u32 = 1000;

/// Walks every workspace's chain from its first entry: recomputes each hash, checks that `seq` goes 1, 2, 3...
/// without gaps, that each `prev_hash` is the previous entry's hash, and that the chain ends where its head row
/// says. Returns the first break found.
pub async fn verify(store: &dyn Store) -> StoreResult<Result<Verified, ChainBreak>> {
    let mut verified = Verified { entries: 0, workspaces: 0 };
    for head in store.audit_heads().await? {
        let broken = |seq: i64, id: Option<Uuid>, kind: &'static str, message: String| ChainBreak {
            workspace: head.workspace.clone(),
            workspace_id: head.workspace_id,
            seq,
            id,
            kind,
            message,
        };
        let (mut last_seq, mut last_hash) = (0_i64, GENESIS_HASH.to_owned());
        loop {
            let page = store.audit_chain(head.workspace_id, last_seq, VERIFY_PAGE).await?;
            let done = page.len() < VERIFY_PAGE as usize;
            for row in page {
                let expected = last_seq + 1;
                if row.seq != expected {
                    let message = if row.prev_hash == last_hash {
                        format!(
                            "entry {} claims seq {} but follows entry {last_seq}: entries were renumbered",
                            row.id, row.seq
                        )
                    } else {
                        format!(
                            "entries {expected}..={} are missing (removed): the chain jumps from seq {last_seq} to {}",
                            row.seq - 1,
                            row.seq
                        )
                    };
                    let kind = if row.prev_hash == last_hash { "reordered" } else { "missing" };
                    return Ok(Err(broken(expected, Some(row.id), kind, message)));
                }
                if entry_hash(&row) != row.hash {
                    let message = "its content does not match its hash: the entry was changed after it was written";
                    return Ok(Err(broken(row.seq, Some(row.id), "altered", message.into())));
                }
                if row.prev_hash != last_hash {
                    let message = format!(
                        "its prev_hash does not match the hash of the entry before it (seq {last_seq}): entries were \
                         moved, replaced or removed"
                    );
                    return Ok(Err(broken(row.seq, Some(row.id), "reordered", message)));
                }
                last_seq = row.seq;
                last_hash = row.hash;
                verified.entries += 1;
            }
            if done {
                break;
            }
        }
        match (head.seq, head.hash.as_deref()) {
            (Some(seq), Some(hash)) if seq == last_seq && hash == last_hash => {}
            (Some(seq), _) if seq > last_seq => {
                let message = format!(
                    "the chain's head records {seq} entries but the log ends at seq {last_seq}: the newest entries \
                     were removed"
                );
                return Ok(Err(broken(last_seq + 1, None, "missing", message)));
            }
            (Some(seq), _) => {
                let message = format!("the chain's head (seq {seq}) does not match its last entry (seq {last_seq})");
                return Ok(Err(broken(last_seq, None, "altered", message)));
            }
            (None, _) => {
                let message = "the chain's head row is missing".to_owned();
                return Ok(Err(broken(last_seq, None, "missing", message)));
            }
        }
        verified.workspaces += 1;
    }
    Ok(Ok(verified))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verification_counts_in_words_that_agree_with_the_numbers() {
        let said = |entries, workspaces| Verified { entries, workspaces }.to_string();
        assert_eq!(said(1, 1), "1 entry in 1 workspace");
        assert_eq!(said(5, 1), "5 entries in 1 workspace");
        assert_eq!(said(0, 0), "0 entries in 0 workspaces");
        assert_eq!(said(12, 2), "12 entries in 2 workspaces");
    }

    #[test]
    fn the_diff_of_edited_arguments_is_a_json_patch() {
        let from = json!({"command": "rm -rf /tmp/x", "cwd": "/", "env": {"A": "1"}, "a/b": 1});
        let to = json!({"command": "rm -rf /tmp/x/cache", "env": {"A": "1", "B": "2"}, "a/b": 1, "timeout_seconds": 5});
        assert_eq!(
            json_diff(&from, &to),
            vec![
                json!({"op": "replace", "path": "/command", "value": "rm -rf /tmp/x/cache"}),
                json!({"op": "remove", "path": "/cwd"}),
                json!({"op": "add", "path": "/env/B", "value": "2"}),
                json!({"op": "add", "path": "/timeout_seconds", "value": 5}),
            ]
        );
        assert!(json_diff(&from, &from).is_empty());
        assert_eq!(json_diff(&json!([1, 2]), &json!([2])), vec![json!({"op": "replace", "path": "", "value": [2]})]);
        assert_eq!(
            json_diff(&json!({"a~b/c": 1}), &json!({"a~b/c": 2})),
            vec![json!({"op": "replace", "path": "/a~0b~1c", "value": 2})]
        );
    }
}
