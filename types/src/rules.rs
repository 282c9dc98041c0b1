//! Wire types of approval rules: one document per workspace that decides, for each tool call an agent makes,
//! whether it runs (`allow`), waits for a person (`ask`) or is refused (`deny`), and the calls' decisions.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{AnswerBody, AssigneeRequest, Eligible, Question, UnknownVariant, Urgency};

wire_enum! {
    /// What a rule (or the document's default) decides about a call. Ordered by strictness: `deny` > `ask` >
    /// `allow`, and the strictest decision of the rules that match wins. A call no rule decides is asked about.
    #[derive(Default)]
    RuleDecision {
        /// The call runs without asking.
        Allow = "allow",
        /// A person is asked to approve the call first.
        #[default]
        Ask = "ask",
        /// The call is refused, with the rule's reason.
        Deny = "deny",
    }
}

impl RuleDecision {
    /// How strict the decision is: the strictest of several wins.
    pub fn strictness(self) -> u8 {
        match self {
            RuleDecision::Allow => 0,
            RuleDecision::Ask => 1,
            RuleDecision::Deny => 2,
        }
    }
}

wire_enum! {
    /// Whether a rule decides calls or only records that it would have.
    #[derive(Default)]
    RuleMode {
        /// The rule decides the calls it matches.
        #[default]
        Enforce = "enforce",
        /// The rule never decides: each call it would have matched is audited (`rule.dry_run`) and counted.
        DryRun = "dry_run",
    }
}

/// How the approval question of a call a rule decided `ask` is asked; every field is optional and falls back to
/// the defaults of an approval question.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RuleAsk {
    /// Who is asked: a person, a role, or a role's member by round robin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<AssigneeRequest>,
    /// Who may give the approvals: `{"role": R}` or `{"users": [...]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible: Option<Eligible>,
    /// How many distinct people must approve (1..=10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 10))]
    pub required_approvals: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urgency: Option<Urgency>,
    /// The question's timeout, within the server's bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// Whether the approver may edit the call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_edit: Option<bool>,
}

/// One approval rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique in the document: `[a-z0-9_-]{1,64}`.
    #[cfg_attr(feature = "server", schema(pattern = "^[a-z0-9_-]{1,64}$"))]
    pub name: String,
    /// Globs over tool names (`*` any characters), at least one; a gateway tool is named `mcp:<upstream>/<tool>`.
    pub tools: Vec<String>,
    /// Globs over the calling agent's (or token's) name; absent, any caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<String>>,
    /// A CEL expression over `args`, `tool`, `agent`, `run` (`{id, project}` or null) and `now`; absent, always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    pub decision: RuleDecision,
    /// Shown to the agent on deny, to people on ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How the approval question is asked when the rule decides `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<RuleAsk>,
    #[serde(default)]
    pub mode: RuleMode,
}

/// The body of `PUT /rules`: the workspace's rules, in order, and what decides a call none of them matches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RulesDocument {
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Decides the calls no enforcing rule matches; `ask` unless set.
    #[serde(default)]
    pub default: RuleDecision,
}

/// The workspace's rules document as stored: `GET /rules` and the answer of `PUT /rules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct StoredRules {
    /// Bumped by every `PUT`; 0 before the first.
    pub version: i64,
    pub rules: Vec<Rule>,
    pub default: RuleDecision,
    /// When and by whom (username or token name) it was last saved; null before the first `PUT`.
    #[serde(default, deserialize_with = "super::time::optional", serialize_with = "super::time::write_optional")]
    pub updated_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub updated_by: Option<String>,
}

/// What `POST /rules/check` answers for a document it would store as sent; it stores nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RulesCheck {
    /// Always true: an invalid document is a 422 naming its faults.
    pub valid: bool,
    /// How many rules it has.
    pub rules: usize,
}

/// The body of `POST /rules/test`: a call to decide against the stored rules, without asking anyone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RuleTestRequest {
    pub tool: String,
    /// The call's arguments (a JSON object); `{}` when left out.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// What `POST /rules/test` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RuleTestResult {
    pub decision: RuleDecision,
    /// The deciding rule's name; null when the document's default decided.
    pub rule: Option<String>,
    /// Every rule that matched, dry-run ones too, in document order.
    pub matched: Vec<String>,
}

/// The body of `POST /decide`: a call an agent is about to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    pub tool: String,
    /// The call's arguments (a JSON object); `{}` when left out.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// The calling agent's name, matched by the rules' `agents`; the token's name when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The run the call belongs to (the rules see it as `run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    /// With `ask`, wait (up to the server's long-poll bound) until a person decides, then answer `allow` or `deny`.
    #[serde(default)]
    pub wait: bool,
    /// How the caller would have the approval question asked, should the rules say `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<DecideQuestion>,
}

/// The caller's wishes for the approval question `POST /decide` asks: each field the deciding rule's `ask` leaves
/// unset. The rule's own settings always win, so an agent never asks more leniently than its rules say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DecideQuestion {
    /// Instead of "Allow <tool>?".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 300))]
    pub title: Option<String>,
    /// Shown above the description of the call and the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Merged over the server's own `{"source": "rules", "rule"}`, except `rule`, which always names the asking rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// The question's project when the call names no run (a run's project wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urgency: Option<Urgency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// What applies when nobody decides in time; honoured only when the document's default, not a rule, asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_response: Option<AnswerBody>,
    /// Whether the approver may edit the call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_edit: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<AssigneeRequest>,
    /// Where the question's own events are sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 10))]
    pub required_approvals: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible: Option<Eligible>,
}

/// What `POST /decide` decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct DecideResponse {
    /// `ask` only while the approval question is pending (never after a `wait` that saw it decided).
    pub decision: RuleDecision,
    /// The deciding rule's name; null when the document's default decided.
    pub rule: Option<String>,
    /// The rule's reason; for a call a person rejected, their comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The approval question asked (`ask`, and after a wait the decided question).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
    /// The grant that let an `ask` through without asking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<Uuid>,
    /// With `allow`, what to call the tool with: the approver's edit when they made one, else the arguments asked
    /// about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The workspace's approval rules as Settings → Rules edits them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulesText {
    /// The document (`rules` and `default`) in YAML.
    pub yaml: String,
    /// Bumped by every save; 0 before the first.
    pub version: i64,
    /// When and by whom it was last saved; `None` before the first save.
    #[serde(default, deserialize_with = "crate::time::optional")]
    pub updated_at: Option<DateTime<Utc>>,
    pub updated_by: Option<String>,
}

/// Why the server refused a rules document or a call to test: its message and each fault by field
/// (`rules[2].when`, `yaml`, `arguments`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulesRefusal {
    pub message: String,
    pub faults: Vec<RuleFault>,
}

/// One fault of a refused rules document: the field's path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleFault {
    pub field: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_document_without_a_default_asks() {
        let document: RulesDocument = serde_json::from_value(json!({ "rules": [] })).unwrap();
        assert_eq!(document.default, RuleDecision::Ask);
    }

    #[test]
    fn a_rule_enforces_unless_told_to_dry_run() {
        let rule: Rule = serde_json::from_value(json!({ "name": "r", "tools": ["*"], "decision": "deny" })).unwrap();
        assert_eq!(rule.mode, RuleMode::Enforce);
        let rule: Rule =
            serde_json::from_value(json!({ "name": "r", "tools": ["*"], "decision": "deny", "mode": "dry_run" }))
                .unwrap();
        assert_eq!(rule.mode, RuleMode::DryRun);
    }

    #[test]
    fn deny_is_stricter_than_ask_which_is_stricter_than_allow() {
        assert!(RuleDecision::Deny.strictness() > RuleDecision::Ask.strictness());
        assert!(RuleDecision::Ask.strictness() > RuleDecision::Allow.strictness());
    }

    #[test]
    fn a_rule_with_an_unknown_field_is_refused() {
        let result: Result<Rule, _> =
            serde_json::from_value(json!({ "name": "r", "tools": ["*"], "decision": "deny", "tool": "x" }));
        assert!(result.is_err());
    }
}
