//! The use cases of `/rules`: reading, checking, testing and saving a workspace's document. Deciding a call for an
//! agent that asks before it acts (`/decide`) is the door's HTTP (`http::decide`) flow over them, since it waits for people.

use holdpoint_types::{RuleDecision, RulesCheck, RulesDocument, StoredRules};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{Rules, ToolCall, Verdict, approval_question, engine, stored_view};
use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::questions::TimeoutBounds;
use crate::store::{AuditActor, NewAuditEntry, RulesRow, Store};
use crate::validation::FieldErrors;

/// How many times a save is tried again when another save of the same workspace came between its read and its
/// write.
const SAVE_ATTEMPTS: usize = 5;

/// Reads a document from JSON, naming the field of each fault of its shape: an unknown or misspelt key, a decision
/// or mode that is none of the allowed words, a value of the wrong type. A faulty field is read as a stand-in the
/// other checks pass over (a rule without a name, for every tool, that asks; an optional field left out), so that
/// [`check`] still checks the rest and one refusal names every fault.
pub fn parse_document(value: &Value) -> Result<(RulesDocument, FieldErrors), AppError> {
    let mut errors = FieldErrors::default();
    let Some(object) = value.as_object() else {
        return Err(AppError::invalid_field("body", "must be a JSON object {\"rules\": [...], \"default\": ...}"));
    };
    let mut read = serde_json::Map::new();
    for key in object.keys().filter(|key| !["rules", "default"].contains(&key.as_str())) {
        errors.add(key.clone(), "is not a field of a rules document (rules, default)");
    }
    match object.get("default") {
        // Null is left out, as YAML writes a key left empty (`default:`).
        None | Some(Value::Null) => {}
        Some(default) if serde_json::from_value::<RuleDecision>(default.clone()).is_err() => {
            errors.add("default", "must be allow, ask or deny");
        }
        Some(default) => {
            read.insert("default".into(), default.clone());
        }
    }
    match object.get("rules") {
        None | Some(Value::Null) => {}
        Some(Value::Array(rules)) => {
            let rules = rules.iter().enumerate().map(|(i, rule)| rule_shape(rule, i, &mut errors)).collect();
            read.insert("rules".into(), Value::Array(rules));
        }
        Some(_) => errors.add("rules", "must be a list of rules"),
    }
    match serde_json::from_value(Value::Object(read)) {
        Ok(document) => Ok((document, errors)),
        // The stand-ins are made to read; should one not, the shape's faults are all there is to say.
        Err(err) => Err(errors.into_result("the rules document").err().unwrap_or_else(|| AppError::Invalid {
            message: format!("the rules document is not valid: {err}"),
            details: None,
        })),
    }
}

/// The faults of rule `i`'s shape, each under its field; the rule as [`parse_document`] reads it, each faulty field
/// replaced by its stand-in.
fn rule_shape(rule: &Value, i: usize, errors: &mut FieldErrors) -> Value {
    const FIELDS: [&str; 8] = ["name", "tools", "agents", "when", "decision", "reason", "ask", "mode"];
    let at = |field: &str| format!("rules[{i}].{field}");
    let mut read = json!({ "name": "", "tools": ["*"], "decision": "ask" });
    let Some(fields) = rule.as_object() else {
        errors.add(format!("rules[{i}]"), "must be an object");
        return read;
    };
    for key in fields.keys().filter(|key| !FIELDS.contains(&key.as_str())) {
        errors.add(at(key), format!("is not a field of a rule ({})", FIELDS.join(", ")));
    }
    for required in ["name", "tools", "decision"] {
        if !fields.contains_key(required) {
            errors.add(at(required), "is required");
        }
    }
    // An optional field given as null is left out, as YAML writes a key left empty (`ask:`).
    let required = |key: &str| ["name", "tools", "decision"].contains(&key);
    let given = |(key, value): &(&String, &Value)| {
        FIELDS.contains(&key.as_str()) && (required(key.as_str()) || !value.is_null())
    };
    for (field, value) in fields.iter().filter(given) {
        let fault = match field.as_str() {
            "name" if !value.is_string() => Some("must be a string".to_owned()),
            "tools" | "agents" if serde_json::from_value::<Vec<String>>(value.clone()).is_err() => {
                Some("must be a list of glob strings".to_owned())
            }
            "when" | "reason" if !(value.is_string() || value.is_null()) => Some("must be a string".to_owned()),
            "decision" if serde_json::from_value::<RuleDecision>(value.clone()).is_err() => {
                Some("must be allow, ask or deny".to_owned())
            }
            "mode" if serde_json::from_value::<holdpoint_types::RuleMode>(value.clone()).is_err() => {
                Some("must be enforce or dry_run".to_owned())
            }
            "ask" => serde_json::from_value::<holdpoint_types::RuleAsk>(value.clone()).err().map(|e| e.to_string()),
            _ => None,
        };
        match fault {
            Some(message) => errors.add(at(field), message),
            None => {
                read[field.as_str()] = value.clone();
            }
        }
    }
    read
}

/// Checks a document whole: the engine's checks, and each rule's `ask` settings as the approval question they
/// would ask (its timeout within the server's bounds, its assignee a member who may approve, its quorum). Every
/// fault is named with its field, after the faults of its shape ([`parse_document`]); the compiled document on
/// success.
pub async fn check(
    store: &dyn Store,
    bounds: TimeoutBounds,
    workspace_id: Uuid,
    document: &RulesDocument,
    mut shape_faults: FieldErrors,
) -> Result<engine::CompiledRules, AppError> {
    let compiled = engine::compile(document, 0);
    let mut errors = FieldErrors::default();
    let sample = json!({});
    for (i, rule) in document.rules.iter().enumerate() {
        let Some(ask) = &rule.ask else { continue };
        let call = ToolCall { tool: "tool", arguments: &sample, agent: None, run: None };
        let verdict = Verdict {
            decision: RuleDecision::Ask,
            rule: Some(rule.name.clone()),
            reason: rule.reason.clone(),
            ask: ask.clone(),
            matched: Vec::new(),
        };
        let question = approval_question(&call, &verdict, None);
        let problem = match crate::questions::build_question(question, workspace_id, None, bounds, crate::store::now())
        {
            Ok(row) => crate::questions::check_assignee(store, &row).await.err(),
            Err(err) => Some(err),
        };
        if let Some(AppError::Invalid { message, details }) = problem {
            match details.as_ref().and_then(|d| d.get("fields")).and_then(Value::as_object) {
                Some(fields) => {
                    for (field, message) in fields {
                        errors.add(format!("rules[{i}].ask.{field}"), message.as_str().unwrap_or_default());
                    }
                }
                None => errors.add(format!("rules[{i}].ask"), message),
            }
        } else if let Some(other) = problem {
            return Err(other);
        }
    }
    // A stand-in's own faults (a rule without a name) lie inside a field the shape's faults name: left out.
    match compiled {
        Ok(compiled) => {
            shape_faults.merge_beside(errors);
            shape_faults.into_result("the rules document").map(|()| compiled)
        }
        Err(mut faults) => {
            faults.merge(errors);
            shape_faults.merge_beside(faults);
            Err(shape_faults
                .into_result("the rules document")
                .err()
                .unwrap_or_else(|| AppError::invalid_field("rules", "does not compile")))
        }
    }
}

/// `GET /rules`: the workspace's document as stored (version 0 and no rules before the first save).
pub async fn get(store: &dyn Store, caller: &Caller) -> Result<StoredRules, AppError> {
    Ok(stored_view(store.rules_document(caller.workspace_id()).await?))
}

/// `POST /rules/check`: whether a document would be saved, without saving it.
pub async fn check_only(
    store: &dyn Store,
    bounds: TimeoutBounds,
    caller: &Caller,
    body: &Value,
) -> Result<RulesCheck, AppError> {
    let (document, shape_faults) = parse_document(body)?;
    check(store, bounds, caller.workspace_id(), &document, shape_faults).await?;
    Ok(RulesCheck { valid: true, rules: document.rules.len() })
}

/// `PUT /rules` (admins): replaces the workspace's document, its version one more than the one replaced, audited
/// (`rules.updated`, with the documents before and after and the change). A document with any fault is refused
/// whole (422 naming each field) and nothing is stored.
pub async fn save(
    store: &dyn Store,
    bounds: TimeoutBounds,
    caller: &Caller,
    body: &Value,
) -> Result<StoredRules, AppError> {
    caller.require_admin("change the approval rules")?;
    let (document, shape_faults) = parse_document(body)?;
    let workspace_id = caller.workspace_id();
    check(store, bounds, workspace_id, &document, shape_faults).await?;
    for _ in 0..SAVE_ATTEMPTS {
        let previous = store.rules_document(workspace_id).await?;
        let previous_version = previous.as_ref().map_or(0, |row| row.version);
        let before = serde_json::to_value(previous.as_ref().map(|row| &row.document.0)).map_err(AppError::internal)?;
        let now = crate::store::now();
        let row = RulesRow {
            workspace_id,
            version: previous_version + 1,
            document: crate::store::Json(document.clone()),
            updated_at: now,
            updated_by: caller.principal.name.clone(),
        };
        let after = serde_json::to_value(&document).map_err(AppError::internal)?;
        let audit = NewAuditEntry {
            workspace_id,
            actor: AuditActor::from(caller),
            action: actions::RULES_UPDATED.into(),
            subject_type: "rules".into(),
            subject_id: Some(row.version.to_string()),
            diff: Some(Value::Array(crate::audit::json_diff(&before, &after))),
            before: Some(json!({ "version": previous_version, "document": before })),
            after: Some(json!({ "version": row.version, "document": after })),
            created_at: now,
        };
        if store.save_rules(&row, previous_version, &audit).await? {
            return Ok(stored_view(Some(row)));
        }
    }
    Err(AppError::Conflict { message: "the rules were being saved by someone else; try again".into(), details: None })
}

/// `POST /rules/test`: what the stored rules decide about a call, without asking, auditing or counting.
pub async fn test(
    rules: &Rules<'_>,
    caller: &Caller,
    request: &holdpoint_types::RuleTestRequest,
) -> Result<holdpoint_types::RuleTestResult, AppError> {
    check_call(&request.tool, &request.arguments)?;
    let call =
        ToolCall { tool: &request.tool, arguments: &request.arguments, agent: request.agent.as_deref(), run: None };
    let verdict = rules.test(caller.workspace_id(), &call).await?;
    Ok(holdpoint_types::RuleTestResult { decision: verdict.decision, rule: verdict.rule, matched: verdict.matched })
}

pub fn check_call(tool: &str, arguments: &Value) -> Result<(), AppError> {
    let mut errors = FieldErrors::default();
    if tool.trim().is_empty() || tool.chars().count() > 200 {
        errors.add("tool", "must have 1..=200 characters");
    }
    if !arguments.is_object() {
        errors.add("arguments", "must be a JSON object");
    }
    errors.into_result("the call")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// YAML writes a key left empty as null: an optional field so written is left out, a required one is a fault.
    #[test]
    fn an_optional_field_given_as_null_is_left_out() {
        let written = json!({ "default": null, "rules": [{
            "name": "deploys", "tools": ["deploy"], "decision": "ask",
            "agents": null, "when": null, "reason": null, "ask": null, "mode": null,
        }] });
        let (document, faults) = parse_document(&written).unwrap();
        assert!(faults.is_empty(), "{:?}", faults.fields());
        let plain = json!({ "rules": [{ "name": "deploys", "tools": ["deploy"], "decision": "ask" }] });
        assert_eq!(document, parse_document(&plain).unwrap().0);

        let required = json!({ "rules": [{ "name": null, "tools": null, "decision": null }] });
        let (_, faults) = parse_document(&required).unwrap();
        assert_eq!(faults.fields(), ["rules[0].decision", "rules[0].name", "rules[0].tools"]);
    }
}
