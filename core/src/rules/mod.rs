//! Approval rules (docs/rules.md): one document per workspace that decides each tool call an agent makes — `allow`,
//! `ask` or `deny` — wherever calls are decided (the executor, MCP's `request_approval`, the gateway,
//! `POST /decide`).
//!
//! [`engine`] checks, compiles and evaluates a document; [`Rules`] is what the doors call: it keeps each
//! workspace's document compiled in memory by version (a decision reads only the version, one indexed row, so a
//! save on another instance is seen at the next call), audits and counts dry-run matches, and [`approval_question`]
//! is how a call decided `ask` is asked. Grants are the caller's step, after [`Rules::decide`], and only for `ask`.

pub mod engine;
pub mod service;
pub mod text;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chrono::Utc;
use holdpoint_types::{
    ApprovalAction, NewQuestion, QuestionKind, RuleAsk, RuleDecision, RuleMode, RulesDocument, StoredRules,
};
use serde_json::json;
use uuid::Uuid;

use crate::actions;
use crate::error::AppError;
use crate::metrics::Metrics;
use crate::store::{AuditActor, NewAuditEntry, RulesRow, Store};
pub use engine::{CompiledRules, Evaluation};

/// Who decided a call, as the audit names it.
pub const RULES_DECIDER: &str = "approval rules";

/// A tool call to decide.
#[derive(Debug, Clone)]
pub struct ToolCall<'a> {
    /// `shell`, or `mcp:<upstream>/<tool>` for the gateway.
    pub tool: &'a str,
    pub arguments: &'a serde_json::Value,
    /// The agent's or the token's name (matched by a rule's `agents` globs).
    pub agent: Option<&'a str>,
    /// CEL sees it as `run`: `{id, project}` or null.
    pub run: Option<RunRef>,
}

/// The run a call belongs to, as the rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    pub id: Uuid,
    pub project: Option<String>,
}

/// What the rules decided about a call (serialised for the worker protocol, where a client-executed run asks the
/// server).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    /// Allow | Ask | Deny.
    pub decision: RuleDecision,
    /// The deciding rule's name; `None` when the document's default decided.
    pub rule: Option<String>,
    pub reason: Option<String>,
    /// How to ask (assignee, eligible, required_approvals, urgency, timeout_seconds, allow_edit), all optional;
    /// `Default` when unset.
    pub ask: RuleAsk,
    /// Every rule that matched, dry-run ones too.
    pub matched: Vec<String>,
}

/// Each workspace's rules, compiled, with the version they were compiled from.
#[derive(Debug, Default)]
pub struct RulesCache(RwLock<HashMap<Uuid, Arc<CompiledRules>>>);

impl RulesCache {
    fn get(&self, workspace_id: Uuid, version: i64) -> Option<Arc<CompiledRules>> {
        let compiled = self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        compiled.get(&workspace_id).filter(|rules| rules.version == version).cloned()
    }

    fn remember(&self, workspace_id: Uuid, rules: Arc<CompiledRules>) {
        let mut compiled = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Never replaced by an older version a slower reader compiled.
        if compiled.get(&workspace_id).is_none_or(|known| known.version <= rules.version) {
            compiled.insert(workspace_id, rules);
        }
    }
}

/// The rules as a server's doors use them (the wiring hands them out: `App::rules`).
pub struct Rules<'a> {
    pub store: &'a dyn Store,
    pub metrics: &'a Metrics,
    pub cache: &'a RulesCache,
}

impl Rules<'_> {
    /// The verdict on a tool call of `run` (its agent's name and its project are what the rules see), audited and
    /// counted when `record`, else only evaluated (to read a decision already recorded, such as its ask settings).
    pub async fn decide_for_run(
        &self,
        run: &crate::store::RunRow,
        tool: &str,
        arguments: &serde_json::Value,
        record: bool,
    ) -> Result<Verdict, AppError> {
        let call = ToolCall {
            tool,
            arguments,
            agent: Some(&run.agent.0.name),
            run: Some(RunRef { id: run.id, project: run.project.clone() }),
        };
        if record { self.decide(run.workspace_id, &call).await } else { self.test(run.workspace_id, &call).await }
    }

    /// The workspace's rules, compiled: from memory when the stored version is the one compiled, else read and
    /// compiled once. A stored document that no longer compiles is an error: nothing is decided without it.
    pub async fn compiled(&self, workspace_id: Uuid) -> Result<Arc<CompiledRules>, AppError> {
        let version = self.store.rules_version(workspace_id).await?;
        if let Some(rules) = self.cache.get(workspace_id, version) {
            return Ok(rules);
        }
        let rules = match self.store.rules_document(workspace_id).await? {
            None => CompiledRules::empty(),
            Some(row) => engine::compile(&row.document.0, row.version).map_err(|errors| {
                AppError::Internal(
                    format!("the stored rules (version {}) do not compile: {errors:?}", row.version).into(),
                )
            })?,
        };
        let rules = Arc::new(rules);
        self.cache.remember(workspace_id, Arc::clone(&rules));
        Ok(rules)
    }

    /// Evaluates the workspace's rules (compiled once per document version, cached), audits each dry-run match
    /// (`rule.dry_run`) and counts `rule_matches_total{rule,mode}`. Never fails open: an error is returned, and
    /// a `when` that fails counts for `deny` and `ask` and against `allow`.
    pub async fn decide(&self, workspace_id: Uuid, call: &ToolCall<'_>) -> Result<Verdict, AppError> {
        let rules = self.compiled(workspace_id).await?;
        let (verdict, evaluation) = evaluate(&rules, call);
        for &i in &evaluation.matched {
            let rule = &rules.rules[i];
            self.metrics.rule_matched(&rule.name, rule.mode.as_str());
            if rule.mode == RuleMode::DryRun {
                self.store.append_audit(&dry_run_entry(workspace_id, &rules, i, call, &verdict)).await?;
            }
        }
        for (i, error) in &evaluation.failures {
            tracing::warn!(rule = %rules.rules[*i].name, tool = call.tool, %error, "a rule's condition failed; it failed closed");
        }
        Ok(verdict)
    }

    /// What `POST /rules/test` answers: the decision the stored rules make about `call`, without auditing,
    /// counting or asking anything.
    pub async fn test(&self, workspace_id: Uuid, call: &ToolCall<'_>) -> Result<Verdict, AppError> {
        let rules = self.compiled(workspace_id).await?;
        Ok(evaluate(&rules, call).0)
    }
}

/// Evaluates `call` against `rules` now.
pub fn evaluate(rules: &CompiledRules, call: &ToolCall<'_>) -> (Verdict, Evaluation) {
    let evaluation = rules.evaluate(&engine::Call {
        tool: call.tool,
        arguments: call.arguments,
        agent: call.agent,
        run: call.run.as_ref().map(|run| (run.id, run.project.as_deref())),
        now: Utc::now(),
    });
    let deciding = evaluation.rule.map(|i| &rules.rules[i]);
    let verdict = Verdict {
        decision: evaluation.decision,
        rule: deciding.map(|rule| rule.name.clone()),
        reason: deciding.and_then(|rule| rule.rule.reason.clone()),
        ask: deciding.and_then(|rule| rule.rule.ask.clone()).unwrap_or_default(),
        matched: evaluation.matched.iter().map(|&i| rules.rules[i].name.clone()).collect(),
    };
    (verdict, evaluation)
}

/// The audit entry of a call dry-run rule `i` would have decided.
fn dry_run_entry(
    workspace_id: Uuid,
    rules: &CompiledRules,
    i: usize,
    call: &ToolCall<'_>,
    verdict: &Verdict,
) -> NewAuditEntry {
    let rule = &rules.rules[i];
    NewAuditEntry {
        workspace_id,
        actor: AuditActor::policy(RULES_DECIDER, Some(rules.version.to_string())),
        action: actions::RULE_DRY_RUN.into(),
        subject_type: "rule".into(),
        subject_id: Some(rule.name.clone()),
        before: None,
        after: Some(json!({
            "rule": rule.name,
            "would_decide": rule.decision,
            "decided": verdict.decision,
            "decided_by": verdict.rule,
            "tool": call.tool,
            "arguments_sha256": arguments_digest(call.arguments),
            "agent": call.agent,
            "run_id": call.run.as_ref().map(|run| run.id),
            "version": rules.version,
        })),
        diff: None,
        created_at: crate::store::now(),
    }
}

/// The hex SHA-256 of a call's arguments' JSON: what the audit log keeps of them, as they may hold secrets and the
/// log is kept for good. The same call gives the same digest, so entries of one call can be matched.
pub fn arguments_digest(arguments: &serde_json::Value) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(serde_json::to_vec(arguments).unwrap_or_default()))
}

/// The approval question a call decided `ask` is asked as: kind approval, action `{tool_name: call.tool,
/// arguments}`, routed by `verdict.ask`, the rule's reason in its body.
pub fn approval_question(call: &ToolCall<'_>, verdict: &Verdict, title: Option<String>) -> NewQuestion {
    let ask = &verdict.ask;
    let mut body = format!(
        "An agent wants to call `{}` with:\n\n```json\n{}\n```\n",
        call.tool,
        serde_json::to_string_pretty(call.arguments).unwrap_or_default()
    );
    match (&verdict.rule, &verdict.reason) {
        (Some(rule), Some(reason)) => body.push_str(&format!("\nRule `{rule}`: {reason}\n")),
        (Some(rule), None) => body.push_str(&format!("\nAsked by rule `{rule}`.\n")),
        (None, _) => {}
    }
    let several = ask.required_approvals.unwrap_or(1) > 1;
    NewQuestion {
        kind: Some(QuestionKind::Approval),
        title: title.unwrap_or_else(|| format!("Allow {}?", call.tool)),
        body,
        action: Some(ApprovalAction { tool_name: call.tool.to_owned(), arguments: call.arguments.clone() }),
        // Several people cannot each edit what they all allow; arguments that are no object cannot be edited.
        allow_edit: ask.allow_edit.unwrap_or(false) && !several && call.arguments.is_object(),
        context: Some(json!({ "source": "rules", "rule": verdict.rule })),
        project: call.run.as_ref().and_then(|run| run.project.clone()),
        run_id: call.run.as_ref().map(|run| run.id),
        urgency: ask.urgency,
        timeout_seconds: ask.timeout_seconds,
        assignee: ask.assignee.clone(),
        required_approvals: ask.required_approvals,
        eligible: ask.eligible.clone(),
        ..Default::default()
    }
}

/// The stored view of a workspace's rules (version 0, no rules and the default `ask` before the first save).
pub fn stored_view(row: Option<RulesRow>) -> StoredRules {
    match row {
        None => {
            let document = RulesDocument::default();
            StoredRules {
                version: 0,
                rules: document.rules,
                default: document.default,
                updated_at: None,
                updated_by: None,
            }
        }
        Some(row) => StoredRules {
            version: row.version,
            rules: row.document.0.rules,
            default: row.document.0.default,
            updated_at: Some(row.updated_at),
            updated_by: Some(row.updated_by),
        },
    }
}
