//! The rules document as people write it in Settings → Rules: YAML (with serde_norway, as the CLI reads it), read
//! into the JSON the REST API takes and handed to the same use cases ([`super::service`]); refusals carry each
//! fault by its field, for the page to show next to it.

use holdpoint_types::{RuleFault, RulesRefusal, RulesText};
use holdpoint_types::{RulesDocument, StoredRules};
use serde_json::Value;

use crate::error::AppError;

/// The stored document as the page shows it: `rules` and `default` in YAML, with its version and who saved it when.
pub fn rules_text(stored: StoredRules) -> Result<RulesText, AppError> {
    let document = RulesDocument { rules: stored.rules, default: stored.default };
    let yaml = serde_norway::to_string(&document).map_err(AppError::internal)?;
    Ok(RulesText { yaml, version: stored.version, updated_at: stored.updated_at, updated_by: stored.updated_by })
}

/// A document typed in YAML (JSON is YAML too), as the JSON body `PUT /rules` takes; text that is no YAML is a
/// fault of the field `yaml`, with its line and column.
pub fn parse_yaml(text: &str) -> Result<Value, AppError> {
    if text.trim().is_empty() {
        return Err(AppError::invalid_field("yaml", "is empty: write at least `rules: []` and `default: ask`"));
    }
    serde_norway::from_str::<Value>(text).map_err(|err| AppError::invalid_field("yaml", format!("is not YAML: {err}")))
}

/// A call's arguments as typed in the page's test box: a JSON object (`{}` when left empty).
pub fn parse_arguments(text: &str) -> Result<Value, AppError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(text).map_err(|err| AppError::invalid_field("arguments", format!("is not JSON: {err}")))
}

/// What a use case answered, for the page: a refusal the person can act on (invalid, forbidden, conflicting) is
/// shown with its faults; anything else is an error of the server function.
pub fn refusal_or<T>(result: Result<T, AppError>) -> Result<Result<T, RulesRefusal>, String> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(AppError::Invalid { message, details }) => {
            let faults = details
                .as_ref()
                .and_then(|details| details.get("fields"))
                .and_then(Value::as_object)
                .map(|fields| {
                    fields
                        .iter()
                        .map(|(field, message)| RuleFault {
                            field: field.clone(),
                            message: message.as_str().map_or_else(|| message.to_string(), str::to_owned),
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok(Err(RulesRefusal { message, faults }))
        }
        Err(
            err
            @ (AppError::Forbidden(_) | AppError::Conflict { .. } | AppError::TooLarge(_) | AppError::BadRequest(_)),
        ) => Ok(Err(RulesRefusal { message: err.to_string(), faults: Vec::new() })),
        Err(err) => Err(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_reads_as_the_json_body_and_the_stored_document_writes_back_to_it() {
        let yaml =
            "rules:\n- name: big\n  tools:\n  - pay\n  when: args.amount > 1000\n  decision: ask\ndefault: deny\n";
        let body = parse_yaml(yaml).unwrap();
        assert_eq!(
            body,
            serde_json::json!({ "default": "deny", "rules": [
                { "name": "big", "tools": ["pay"], "when": "args.amount > 1000", "decision": "ask" }] })
        );
        let document: RulesDocument = serde_json::from_value(body).unwrap();
        let stored = StoredRules {
            version: 3,
            rules: document.rules.clone(),
            default: document.default,
            updated_at: None,
            updated_by: Some("ada".into()),
        };
        let text = rules_text(stored).unwrap();
        assert_eq!(text.version, 3);
        let again: RulesDocument = serde_json::from_value(parse_yaml(&text.yaml).unwrap()).unwrap();
        assert_eq!(again, document);
    }

    #[test]
    fn text_that_is_no_yaml_is_a_fault_of_the_field_yaml_with_its_position() {
        let refusal = refusal_or::<()>(parse_yaml("rules: [\n  - name: x\n").map(|_| ())).unwrap().unwrap_err();
        assert_eq!(refusal.faults.len(), 1);
        assert_eq!(refusal.faults[0].field, "yaml");
        assert!(refusal.faults[0].message.contains("line"), "{}", refusal.faults[0].message);
        let refusal = refusal_or::<()>(parse_yaml("  ").map(|_| ())).unwrap().unwrap_err();
        assert_eq!(refusal.faults[0].field, "yaml");
    }

    #[test]
    fn arguments_must_be_json_and_empty_means_none() {
        assert_eq!(parse_arguments(" ").unwrap(), serde_json::json!({}));
        assert_eq!(parse_arguments(r#"{"amount": 5}"#).unwrap(), serde_json::json!({ "amount": 5 }));
        let refusal = refusal_or::<Value>(parse_arguments("{amount")).unwrap().unwrap_err();
        assert_eq!(refusal.faults[0].field, "arguments");
    }

    #[test]
    fn a_forbidden_save_is_a_refusal_and_an_internal_error_is_not() {
        let refusal = refusal_or::<()>(Err(AppError::Forbidden("only admins".into()))).unwrap().unwrap_err();
        assert_eq!(refusal.message, "only admins");
        assert!(refusal.faults.is_empty());
        assert!(refusal_or::<()>(Err(AppError::Internal("disk".into()))).is_err());
    }
}
