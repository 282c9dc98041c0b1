//! One interaction schema (docs/api.md): a question may be asked with a JSON Schema object whose properties are MCP
//! elicitation's primitives instead of `fields`. It is turned into fields here — the one conversion, which the MCP
//! gateway's upstream elicitations go through too — and kept as given, and answers are validated against it with
//! the `jsonschema` crate besides the fields' own checks. A keyword outside that subset is refused by name
//! (`response_schema.properties.n.exclusiveMinimum`), so nothing a person is asked for is silently dropped. A string's
//! `pattern` is checked only against the schema (the fields carry no pattern), and one that is not a regular
//! expression is refused by name too.

use holdpoint_types::{FieldRules, FormField, QuestionOption, ResponseType};
use serde_json::{Map, Number, Value};

use crate::validation::FieldErrors;

/// Where a question's schema is named in errors.
pub const SCHEMA_PATH: &str = "response_schema";

/// Keywords the schema object itself may have. `additionalProperties` only as `false`, which a form keeps anyway
/// (it has its properties and no others), and which schemas written by libraries (zod, pydantic) often carry.
const ROOT_KEYWORDS: [&str; 7] =
    ["$schema", "type", "title", "description", "properties", "required", "additionalProperties"];
/// Keywords every property may have.
const COMMON_KEYWORDS: [&str; 4] = ["type", "title", "description", "default"];

/// The fields a schema describes, one per property in the order of their names (the server keeps no JSON object's
/// own order, so a form that must read in another order is asked with `fields`); every fault goes to `errors` under
/// `path` (`response_schema.properties.<key>.<keyword>`). The fields themselves are checked as any form's are.
pub fn fields_from_schema(schema: &Value, path: &str, errors: &mut FieldErrors) -> Vec<FormField> {
    let Some(root) = schema.as_object() else {
        errors.add(path, "must be a JSON Schema object");
        return Vec::new();
    };
    for keyword in root.keys().filter(|k| !ROOT_KEYWORDS.contains(&k.as_str())) {
        errors.add(format!("{path}.{keyword}"), "is not supported: a response schema is a flat object of primitives");
    }
    if root.get("additionalProperties").is_some_and(|more| *more != Value::Bool(false)) {
        errors
            .add(format!("{path}.additionalProperties"), "may only be false: a form has its properties and no others");
    }
    if root.get("type").is_some_and(|t| t != "object") {
        errors.add(format!("{path}.type"), "must be \"object\"");
    }
    let Some(properties) = root.get("properties").and_then(Value::as_object) else {
        errors.add(format!("{path}.properties"), "must be an object of 1..=30 properties");
        return Vec::new();
    };
    let required = required_names(root, properties, path, errors);
    let mut fields = Vec::with_capacity(properties.len());
    for (key, property) in properties {
        let property_path = format!("{path}.properties.{key}");
        let before = errors.fields().len();
        if let Some(mut field) = field_of(key, property, &property_path, errors) {
            field.required = required.contains(&key.as_str());
            if errors.fields().len() == before {
                check_default_text(property, &property_path, errors);
            }
            fields.push(field);
        }
    }
    fields
}

/// A string property's `default` against its `minLength`, `maxLength` and `pattern`, which only the schema holds
/// (the fields' own checks see its other keywords): a form must never open filled with what it then refuses.
fn check_default_text(property: &Value, path: &str, errors: &mut FieldErrors) {
    let Some(default @ Value::String(_)) = property.get("default") else { return };
    let mut text_rules = Map::new();
    for keyword in ["minLength", "maxLength", "pattern"] {
        if let Some(value) = property.get(keyword) {
            text_rules.insert(keyword.to_owned(), value.clone());
        }
    }
    if text_rules.is_empty() {
        return;
    }
    let Ok(validator) = jsonschema::validator_for(&Value::Object(text_rules)) else { return };
    for error in validator.iter_errors(default) {
        errors.add(format!("{path}.default"), error.to_string());
    }
}

/// The names `required` lists, each one a property.
fn required_names<'a>(
    root: &'a Map<String, Value>,
    properties: &Map<String, Value>,
    path: &str,
    errors: &mut FieldErrors,
) -> Vec<&'a str> {
    let Some(required) = root.get("required") else { return Vec::new() };
    let names: Option<Vec<&str>> = required.as_array().and_then(|names| names.iter().map(Value::as_str).collect());
    match names {
        None => {
            errors.add(format!("{path}.required"), "must be an array of property names");
            Vec::new()
        }
        Some(names) => {
            for (i, name) in names.iter().enumerate() {
                if !properties.contains_key(*name) {
                    errors.add(format!("{path}.required[{i}]"), format!("{name:?} is not a property"));
                }
            }
            names
        }
    }
}

/// Refuses the keywords of `object` that are not in `allowed`, by name.
fn refuse_others(object: &Map<String, Value>, allowed: &[&str], path: &str, errors: &mut FieldErrors) {
    for keyword in object.keys().filter(|k| !allowed.contains(&k.as_str())) {
        errors.add(format!("{path}.{keyword}"), "is not supported in a response schema");
    }
}

fn field_of(key: &str, property: &Value, path: &str, errors: &mut FieldErrors) -> Option<FormField> {
    let Some(object) = property.as_object() else {
        errors.add(path, "must be a schema object");
        return None;
    };
    let text = |name: &str| object.get(name).and_then(Value::as_str).map(str::to_owned);
    let title = text("title");
    // A property with a description and no title reads best labelled with its description (MCP's own examples).
    let label = title.clone().or_else(|| text("description")).unwrap_or_else(|| key.to_owned());
    let mut field = FormField::new(key, label.chars().take(200).collect::<String>(), ResponseType::Text);
    field.description = title.and(text("description"));
    field.default = object.get("default").cloned();
    let number = |name: &str, errors: &mut FieldErrors| -> Option<Number> {
        let value = object.get(name)?;
        match value.as_number() {
            Some(number) => Some(number.clone()),
            None => {
                errors.add(format!("{path}.{name}"), "must be a number");
                None
            }
        }
    };
    let count = |name: &str, errors: &mut FieldErrors| -> Option<u32> {
        let value = object.get(name)?;
        match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                errors.add(format!("{path}.{name}"), "must be a whole number, 0 or more");
                None
            }
        }
    };
    match object.get("type").and_then(Value::as_str) {
        Some("string") => {
            let choices = ["enum", "oneOf", "enumNames"].iter().any(|k| object.contains_key(*k));
            if choices {
                refuse_others(
                    object,
                    &[&COMMON_KEYWORDS[..], &["enum", "oneOf", "enumNames"][..]].concat(),
                    path,
                    errors,
                );
                field.response_type = ResponseType::Choice;
                field.options = choices_of(object, path, errors);
            } else {
                refuse_others(
                    object,
                    &[&COMMON_KEYWORDS[..], &["minLength", "maxLength", "format", "pattern"][..]].concat(),
                    path,
                    errors,
                );
                if let (Some(least), Some(most)) = (count("minLength", errors), count("maxLength", errors))
                    && most < least
                {
                    // No answer could fit: refused like a field's `max` below its `min`.
                    errors.add(format!("{path}.maxLength"), format!("must not be less than minLength ({least})"));
                }
                if let Some(pattern) = object.get("pattern") {
                    check_pattern(pattern, &format!("{path}.pattern"), errors);
                }
                field.response_type = match object.get("format") {
                    None => ResponseType::Text,
                    Some(format) => match format.as_str() {
                        Some("email") => ResponseType::Email,
                        Some("uri") => ResponseType::Url,
                        Some("date") => ResponseType::Date,
                        Some("date-time") => ResponseType::Datetime,
                        _ => {
                            errors.add(format!("{path}.format"), "must be email, uri, date or date-time");
                            ResponseType::Text
                        }
                    },
                };
            }
        }
        Some(kind @ ("number" | "integer")) => {
            refuse_others(object, &[&COMMON_KEYWORDS[..], &["minimum", "maximum"][..]].concat(), path, errors);
            field.response_type = if kind == "integer" { ResponseType::Integer } else { ResponseType::Number };
            field.rules =
                FieldRules { min: number("minimum", errors), max: number("maximum", errors), ..Default::default() };
        }
        Some("boolean") => {
            refuse_others(object, &COMMON_KEYWORDS, path, errors);
            field.response_type = ResponseType::Boolean;
        }
        Some("array") => {
            refuse_others(
                object,
                &[&COMMON_KEYWORDS[..], &["items", "minItems", "maxItems"][..]].concat(),
                path,
                errors,
            );
            field.response_type = ResponseType::MultiChoice;
            field.rules.min_items = count("minItems", errors);
            field.rules.max_items = count("maxItems", errors);
            let items_path = format!("{path}.items");
            match object.get("items").and_then(Value::as_object) {
                None => errors.add(&items_path, "must be a schema of the choices: enum, or anyOf of titled consts"),
                Some(items) => {
                    refuse_others(items, &["type", "enum", "oneOf", "anyOf", "enumNames"], &items_path, errors);
                    if items.get("type").is_some_and(|t| t != "string") {
                        errors.add(format!("{items_path}.type"), "must be \"string\"");
                    }
                    field.options = choices_of(items, &items_path, errors);
                }
            }
        }
        _ => {
            errors.add(format!("{path}.type"), "must be string, number, integer, boolean or array");
            return None;
        }
    }
    Some(field)
}

/// Checks a string property's `pattern` (MCP 2025-11-25 allows it) as the validator will read it: the `jsonschema`
/// crate compiles it with its own regular-expression engine (ECMA 262 syntax), so a pattern it cannot compile is
/// refused here by name rather than as a fault of the whole schema.
fn check_pattern(pattern: &Value, path: &str, errors: &mut FieldErrors) {
    let Some(text) = pattern.as_str() else {
        return errors.add(path, "must be a regular expression (a string)");
    };
    if let Err(err) = jsonschema::options().build(&serde_json::json!({"type": "string", "pattern": text})) {
        errors.add(path, format!("is not a valid regular expression: {err}"));
    }
}

/// A property's choices: `enum` (with legacy `enumNames` as labels), or `oneOf`/`anyOf` of `{const, title}`.
fn choices_of(object: &Map<String, Value>, path: &str, errors: &mut FieldErrors) -> Vec<QuestionOption> {
    if let Some(values) = object.get("enum") {
        let Some(values) = values.as_array() else {
            errors.add(format!("{path}.enum"), "must be an array of strings");
            return Vec::new();
        };
        let names = object.get("enumNames").and_then(Value::as_array);
        let mut options = Vec::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let Some(value) = value.as_str() else {
                errors.add(format!("{path}.enum[{i}]"), "must be a string");
                continue;
            };
            let label = names.and_then(|n| n.get(i)).and_then(Value::as_str).unwrap_or(value);
            options.push(QuestionOption { value: value.to_owned(), label: label.to_owned(), description: None });
        }
        return options;
    }
    let (keyword, consts) = match (object.get("oneOf"), object.get("anyOf")) {
        (Some(consts), _) => ("oneOf", consts),
        (None, Some(consts)) => ("anyOf", consts),
        (None, None) => {
            errors.add(path, "needs its choices: enum, or oneOf of titled consts");
            return Vec::new();
        }
    };
    let Some(consts) = consts.as_array() else {
        errors.add(format!("{path}.{keyword}"), "must be an array of {\"const\", \"title\"}");
        return Vec::new();
    };
    let mut options = Vec::with_capacity(consts.len());
    for (i, choice) in consts.iter().enumerate() {
        let choice_path = format!("{path}.{keyword}[{i}]");
        let Some(choice) = choice.as_object() else {
            errors.add(choice_path, "must be {\"const\", \"title\"}");
            continue;
        };
        refuse_others(choice, &["const", "title", "description"], &choice_path, errors);
        let Some(value) = choice.get("const").and_then(Value::as_str) else {
            errors.add(format!("{choice_path}.const"), "must be a string");
            continue;
        };
        let label = choice.get("title").and_then(Value::as_str).unwrap_or(value);
        let description = choice.get("description").and_then(Value::as_str).map(str::to_owned);
        options.push(QuestionOption { value: value.to_owned(), label: label.to_owned(), description });
    }
    options
}

/// The validator of a schema; `None`, with the fault under `path`, when the `jsonschema` crate cannot build one.
pub fn validator(schema: &Value, path: &str, errors: &mut FieldErrors) -> Option<jsonschema::Validator> {
    match jsonschema::options().should_validate_formats(true).build(schema) {
        Ok(validator) => Some(validator),
        Err(err) => {
            errors.add(path, format!("is not a valid JSON Schema: {err}"));
            None
        }
    }
}

/// Validates a form answer against the schema it was asked with; faults are named `path.<key>` (and `[i]` within
/// an array). Entries that are `null` count as absent, as they do for the fields' own checks.
pub fn check_against_schema(schema: &Value, value: &Value, path: &str, errors: &mut FieldErrors) {
    let Some(validator) = validator(schema, SCHEMA_PATH, errors) else { return };
    let present = match value {
        Value::Object(entries) => {
            Value::Object(entries.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect())
        }
        other => other.clone(),
    };
    for error in validator.iter_errors(&present) {
        let mut name = path.to_owned();
        for segment in error.instance_path().to_string().split('/').skip(1) {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
                name.push_str(&format!("[{segment}]"));
            } else {
                name.push('.');
                name.push_str(&segment);
            }
        }
        errors.add(name, error.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn convert(schema: Value) -> (Vec<FormField>, Vec<String>) {
        let mut errors = FieldErrors::default();
        let fields = fields_from_schema(&schema, SCHEMA_PATH, &mut errors);
        (fields, errors.fields())
    }

    #[test]
    fn the_specifications_structured_request_becomes_three_fields() {
        // MCP specification 2025-11-25, client/elicitation, "Structured Data Request".
        let (fields, errors) = convert(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Your full name"},
                "email": {"type": "string", "format": "email", "description": "Your email address"},
                "age": {"type": "number", "minimum": 18, "description": "Your age"}
            },
            "required": ["name", "email"]
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let summary: Vec<_> =
            fields.iter().map(|f| (f.key.as_str(), f.response_type, f.required, f.label.as_str())).collect();
        // In the order of their keys: a JSON object's own order does not survive its parsing.
        assert_eq!(
            summary,
            [
                ("age", ResponseType::Number, false, "Your age"),
                ("email", ResponseType::Email, true, "Your email address"),
                ("name", ResponseType::Text, true, "Your full name"),
            ]
        );
        assert_eq!(fields[0].rules.min, Some(18.into()));
    }

    #[test]
    fn titled_and_untitled_enums_become_choices() {
        // The four enum schemas of the same page.
        let (fields, errors) = convert(json!({
            "type": "object",
            "properties": {
                "plain": {"type": "string", "title": "Color Selection", "description": "Choose your favorite color",
                          "enum": ["Red", "Green", "Blue"], "default": "Red"},
                "titled": {"type": "string", "title": "Color Selection",
                           "oneOf": [{"const": "#FF0000", "title": "Red"}, {"const": "#00FF00", "title": "Green"},
                                     {"const": "#0000FF", "title": "Blue"}], "default": "#FF0000"},
                "many": {"type": "array", "title": "Color Selection", "minItems": 1, "maxItems": 2,
                         "items": {"type": "string", "enum": ["Red", "Green", "Blue"]}, "default": ["Red", "Green"]},
                "many_titled": {"type": "array", "title": "Color Selection", "minItems": 1, "maxItems": 2,
                                "items": {"anyOf": [{"const": "#FF0000", "title": "Red"},
                                                    {"const": "#00FF00", "title": "Green"},
                                                    {"const": "#0000FF", "title": "Blue"}]},
                                "default": ["#FF0000", "#00FF00"]}
            }
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let [many, many_titled, plain, titled] = &fields[..] else { panic!("{fields:?}") };
        assert_eq!(plain.response_type, ResponseType::Choice);
        assert_eq!(plain.description.as_deref(), Some("Choose your favorite color"));
        assert_eq!(plain.default, Some(json!("Red")));
        assert_eq!(
            titled.options[0],
            QuestionOption { value: "#FF0000".into(), label: "Red".into(), description: None }
        );
        assert_eq!(many.response_type, ResponseType::MultiChoice);
        assert_eq!((many.rules.min_items, many.rules.max_items), (Some(1), Some(2)));
        assert_eq!(many_titled.options[2].label, "Blue");
    }

    #[test]
    fn no_additional_properties_is_what_a_form_is_anyway() {
        let schema = |more: Value| json!({"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": more});
        let (fields, errors) = convert(schema(json!(false)));
        assert!(errors.is_empty() && fields.len() == 1, "{errors:?}");
        let (_, errors) = convert(schema(json!(true)));
        assert_eq!(errors, ["response_schema.additionalProperties"]);
        let (_, errors) = convert(schema(json!({"type": "string"})));
        assert_eq!(errors, ["response_schema.additionalProperties"]);
    }

    /// The web and Slack forms open filled with the default; one the schema refuses would be refused when sent.
    #[test]
    fn a_text_default_is_held_to_its_length_and_pattern() {
        let (_, errors) = convert(json!({
            "type": "object",
            "properties": {
                "short": {"type": "string", "minLength": 5, "default": "ab"},
                "long": {"type": "string", "maxLength": 3, "default": "abcd"},
                "ticket": {"type": "string", "pattern": "^OPS-[0-9]+$", "default": "ops-1"},
                "fine": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$", "default": "ok"}
            }
        }));
        assert_eq!(
            errors,
            [
                "response_schema.properties.long.default",
                "response_schema.properties.short.default",
                "response_schema.properties.ticket.default",
            ]
        );
    }

    /// No answer could fit a string shorter than its own least length.
    #[test]
    fn lengths_the_wrong_way_round_are_refused() {
        let lengths = |min: u32, max: u32| {
            convert(json!({
                "type": "object",
                "properties": {"code": {"type": "string", "minLength": min, "maxLength": max}}
            }))
            .1
        };
        assert_eq!(lengths(5, 2), ["response_schema.properties.code.maxLength"]);
        assert!(lengths(2, 2).is_empty());
        assert!(lengths(2, 5).is_empty());
    }

    #[test]
    fn an_unsupported_keyword_is_named() {
        let (_, errors) = convert(json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "format": "ipv4"},
                "nested": {"type": "object", "properties": {}},
                "n": {"type": "integer", "exclusiveMinimum": 0}
            },
            "additionalProperties": true
        }));
        assert_eq!(
            errors,
            [
                "response_schema.additionalProperties",
                "response_schema.properties.code.format",
                "response_schema.properties.n.exclusiveMinimum",
                "response_schema.properties.nested.type"
            ]
        );
    }

    #[test]
    fn a_pattern_is_taken_and_checked_and_one_that_is_no_regular_expression_is_named() {
        let schema =
            json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}}});
        let (fields, errors) = convert(schema.clone());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(fields[0].response_type, ResponseType::Text);
        let check = |value: Value| {
            let mut errors = FieldErrors::default();
            check_against_schema(&schema, &value, "value", &mut errors);
            errors.fields()
        };
        assert!(check(json!({"code": "OPS-42"})).is_empty());
        assert_eq!(check(json!({"code": "ops-42"})), ["value.code"]);
        for bad in [json!("[unclosed"), json!("(?<name"), json!(7)] {
            let (_, errors) =
                convert(json!({"type": "object", "properties": {"code": {"type": "string", "pattern": bad}}}));
            assert_eq!(errors, ["response_schema.properties.code.pattern"], "{bad}");
        }
    }

    #[test]
    fn answers_are_validated_against_the_schema_by_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 3},
                "when": {"type": "string", "format": "date"},
                "colors": {"type": "array", "maxItems": 1, "items": {"type": "string", "enum": ["Red", "Blue"]}}
            },
            "required": ["name"]
        });
        let check = |value: Value| {
            let mut errors = FieldErrors::default();
            check_against_schema(&schema, &value, "value", &mut errors);
            errors.fields()
        };
        assert!(check(json!({"name": "Ada", "when": "2026-01-31", "colors": ["Red"], "skipped": null})).is_empty());
        assert_eq!(check(json!({"name": "Al"})), ["value.name"]);
        assert_eq!(check(json!({"name": "Ada", "when": "31.01.2026"})), ["value.when"]);
        assert_eq!(check(json!({"name": "Ada", "colors": ["Red", "Blue"]})), ["value.colors"]);
        assert_eq!(check(json!({"name": "Ada", "colors": ["Green"]})), ["value.colors[0]"]);
        assert_eq!(check(json!({})), ["value"], "a missing required property is the object's fault");
    }
}
