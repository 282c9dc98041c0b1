//! What an answer may be: checked against the shape of its question (its response type, options, form fields and
//! whether its arguments may be edited), and read from the fields of the UI's plain HTML answer form.

use std::collections::HashSet;

use app::types::{AnswerBody, FormField, Question, QuestionOption, ResponseType};
use serde_json::Value;

use crate::error::AppError;
use crate::validation::{COMMENT_MAX_CHARS, FieldErrors};

pub const TEXT_ANSWER_MAX_CHARS: usize = 10_000;

/// The parts of a question an answer is checked against.
pub struct AnswerShape<'a> {
    pub response_type: ResponseType,
    pub options: &'a [QuestionOption],
    pub fields: &'a [FormField],
    pub allow_edit: bool,
}

impl<'a> From<&'a Question> for AnswerShape<'a> {
    fn from(q: &'a Question) -> Self {
        AnswerShape { response_type: q.response_type, options: &q.options, fields: &q.fields, allow_edit: q.allow_edit }
    }
}

fn check_text(value: &Value, field: &str, errors: &mut FieldErrors) {
    match value.as_str() {
        Some(text) if !text.trim().is_empty() && text.chars().count() <= TEXT_ANSWER_MAX_CHARS => {}
        Some(_) => errors.add(field, format!("must have 1..={TEXT_ANSWER_MAX_CHARS} characters")),
        None => errors.add(field, "must be a string"),
    }
}

fn check_choice(value: &Value, options: &[QuestionOption], field: &str, errors: &mut FieldErrors) {
    match value.as_str() {
        Some(choice) if options.iter().any(|o| o.value == choice) => {}
        Some(choice) => errors.add(field, format!("{choice:?} is not one of the options")),
        None => errors.add(field, "must be one option value (a string)"),
    }
}

fn check_multi_choice(value: &Value, options: &[QuestionOption], field: &str, errors: &mut FieldErrors) {
    let Some(items) = value.as_array() else {
        return errors.add(field, "must be an array of option values");
    };
    let mut seen = HashSet::new();
    for item in items {
        match item.as_str() {
            Some(choice) if !options.iter().any(|o| o.value == choice) => {
                return errors.add(field, format!("{choice:?} is not one of the options"));
            }
            Some(choice) if !seen.insert(choice) => {
                return errors.add(field, format!("{choice:?} is chosen twice"));
            }
            Some(_) => {}
            None => return errors.add(field, "must contain only option values (strings)"),
        }
    }
}

fn check_value_of_type(
    response_type: ResponseType,
    options: &[QuestionOption],
    value: &Value,
    field: &str,
    errors: &mut FieldErrors,
) {
    match response_type {
        ResponseType::Text => check_text(value, field, errors),
        ResponseType::Boolean | ResponseType::Approval => {
            if !value.is_boolean() {
                errors.add(field, "must be true or false");
            }
        }
        ResponseType::Number => {
            if !value.is_number() {
                errors.add(field, "must be a number");
            }
        }
        ResponseType::Choice => check_choice(value, options, field, errors),
        ResponseType::MultiChoice => check_multi_choice(value, options, field, errors),
        ResponseType::ErrorRecovery => match value.as_str() {
            Some(action) if app::types::is_recovery_action(action) || options.iter().any(|o| o.value == action) => {}
            _ => errors.add(field, "must be retry, skip, abort or one of the options"),
        },
        ResponseType::Form => errors.add(field, "forms cannot nest"),
        // Its shape only: what it references is checked against the uploads by `answering` (see `files_of`).
        ResponseType::File => {
            if file_id_of(value).is_none() {
                errors.add(field, "must be an uploaded file: {\"file_id\": ...} as POST /files returned it");
            }
        }
    }
}

/// The id of the upload a `file` value references: `{"file_id": "<uuid>", ...}`.
pub fn file_id_of(value: &Value) -> Option<uuid::Uuid> {
    value.as_object()?.get("file_id")?.as_str()?.parse().ok()
}

/// Checks an answer (or a default response) against the question's shape; problems go to `errors` under `prefix`.
pub fn check_answer(shape: &AnswerShape<'_>, answer: &AnswerBody, prefix: &str, errors: &mut FieldErrors) {
    let value_field = format!("{prefix}.value");
    if shape.response_type == ResponseType::Form {
        match answer.value.as_object() {
            None => errors.add(&value_field, "must be an object with one entry per form field"),
            Some(entries) => {
                for key in entries.keys() {
                    if !shape.fields.iter().any(|f| &f.key == key) {
                        errors.add(format!("{value_field}.{key}"), "is not a field of this form");
                    }
                }
                for field in shape.fields {
                    let name = format!("{value_field}.{}", field.key);
                    match entries.get(&field.key) {
                        None | Some(Value::Null) if field.required => errors.add(name, "is required"),
                        None | Some(Value::Null) => {}
                        Some(value) => check_value_of_type(field.response_type, &field.options, value, &name, errors),
                    }
                }
            }
        }
    } else {
        check_value_of_type(shape.response_type, shape.options, &answer.value, &value_field, errors);
    }
    if let Some(comment) = &answer.comment
        && comment.chars().count() > COMMENT_MAX_CHARS
    {
        errors.add(format!("{prefix}.comment"), format!("must have at most {COMMENT_MAX_CHARS} characters"));
    }
    if let Some(edited) = &answer.edited_arguments {
        if !shape.allow_edit {
            errors.add(format!("{prefix}.edited_arguments"), "this approval does not allow edited arguments");
        } else if !edited.is_object() {
            errors.add(format!("{prefix}.edited_arguments"), "must be a JSON object");
        } else if answer.value != Value::Bool(true) {
            errors.add(format!("{prefix}.edited_arguments"), "only an approval can carry edited arguments");
        }
    }
}

/// Turns the fields of the UI's plain HTML answer form into an answer body: `value` (repeated for several
/// choices), `field.<key>` for form fields, `edited_arguments` (JSON text), `comment`. Empty inputs count as
/// absent, so the usual checks report what is missing.
pub fn answer_from_form_fields(question: &Question, fields: &[(String, String)]) -> Result<AnswerBody, AppError> {
    let values =
        |name: &str| -> Vec<&str> { fields.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect() };
    let first = |name: &str| values(name).first().map(|v| v.trim()).filter(|v| !v.is_empty());
    let boolean = |text: Option<&str>| match text {
        Some("true") => Value::Bool(true),
        Some("false") => Value::Bool(false),
        Some(other) => Value::String(other.to_owned()),
        None => Value::Null,
    };
    let value = match question.response_type {
        ResponseType::Text => Value::String(values("value").first().copied().unwrap_or_default().to_owned()),
        ResponseType::Boolean | ResponseType::Approval => boolean(first("value")),
        ResponseType::Choice | ResponseType::ErrorRecovery => {
            first("value").map_or(Value::Null, |v| Value::String(v.into()))
        }
        ResponseType::MultiChoice => values("value").into_iter().map(|v| Value::String(v.to_owned())).collect(),
        ResponseType::Form => {
            let mut object = serde_json::Map::new();
            for field in &question.fields {
                let name = format!("field.{}", field.key);
                let entry = match field.response_type {
                    ResponseType::MultiChoice => {
                        let chosen: Vec<Value> =
                            values(&name).into_iter().map(|v| Value::String(v.to_owned())).collect();
                        (!chosen.is_empty()).then_some(Value::Array(chosen))
                    }
                    ResponseType::Boolean => first(&name).map(|v| boolean(Some(v))),
                    // The id of a file uploaded beforehand; the answer's check fills in the rest.
                    ResponseType::File => first(&name).map(|v| serde_json::json!({ "file_id": v })),
                    ResponseType::Number => first(&name).map(|v| {
                        v.parse::<f64>()
                            .ok()
                            .and_then(serde_json::Number::from_f64)
                            .map_or_else(|| Value::String(v.to_owned()), Value::Number)
                    }),
                    _ => first(&name).map(|v| Value::String(v.to_owned())),
                };
                if let Some(entry) = entry {
                    object.insert(field.key.clone(), entry);
                }
            }
            Value::Object(object)
        }
        ResponseType::Number | ResponseType::File => first("value").map_or(Value::Null, |v| Value::String(v.into())),
    };
    let edited_arguments = match (first("edited_arguments"), &question.action) {
        (Some(text), Some(action)) if question.allow_edit && value == Value::Bool(true) => {
            let edited: Value = serde_json::from_str(text)
                .map_err(|err| AppError::invalid_field("edited_arguments", format!("is not valid JSON: {err}")))?;
            (edited != action.arguments).then_some(edited)
        }
        _ => None,
    };
    Ok(AnswerBody { value, comment: first("comment").map(str::to_owned), edited_arguments })
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::types::{ApprovalAction, NewQuestion, QuestionKind};
    use chrono::Utc;
    use serde_json::json;
    use uuid::Uuid;

    use crate::questions::{TimeoutBounds, build_question};
    use crate::store::QuestionRow;

    const BOUNDS: TimeoutBounds = TimeoutBounds { min_seconds: 300, max_seconds: 86_400 };

    fn build(input: NewQuestion) -> Result<QuestionRow, AppError> {
        build_question(input, Uuid::now_v7(), None, BOUNDS, Utc::now())
    }

    fn new(title: &str) -> NewQuestion {
        NewQuestion { title: title.into(), ..Default::default() }
    }

    fn option(value: &str) -> QuestionOption {
        QuestionOption { value: value.into(), label: value.to_uppercase(), description: None }
    }

    #[test]
    fn form_answers_need_required_fields_of_the_right_type() {
        let fields = vec![
            FormField {
                key: "env".into(),
                label: "Env".into(),
                response_type: ResponseType::Choice,
                options: vec![option("dev"), option("prod")],
                required: true,
                accept: vec![],
                max_bytes: None,
            },
            FormField {
                key: "replicas".into(),
                label: "Replicas".into(),
                response_type: ResponseType::Number,
                options: vec![],
                required: false,
                accept: vec![],
                max_bytes: None,
            },
        ];
        let shape = AnswerShape { response_type: ResponseType::Form, options: &[], fields: &fields, allow_edit: false };
        let check = |value: Value| {
            let mut errors = FieldErrors::default();
            check_answer(&shape, &AnswerBody { value, comment: None, edited_arguments: None }, "answer", &mut errors);
            match errors.into_result("the answer") {
                Ok(()) => Vec::new(),
                Err(AppError::Invalid { details: Some(details), .. }) => {
                    details["fields"].as_object().unwrap().keys().cloned().collect::<Vec<_>>()
                }
                Err(other) => panic!("{other:?}"),
            }
        };
        assert!(check(json!({"env": "prod", "replicas": 3})).is_empty());
        assert_eq!(check(json!({"replicas": "three"})), ["answer.value.env", "answer.value.replicas"]);
        assert_eq!(check(json!({"env": "prod", "extra": 1})), ["answer.value.extra"]);
    }

    #[test]
    fn multi_choice_answers_must_be_distinct_option_values() {
        let options = [option("a"), option("b")];
        let shape =
            AnswerShape { response_type: ResponseType::MultiChoice, options: &options, fields: &[], allow_edit: false };
        let errors_for = |value: Value| {
            let mut errors = FieldErrors::default();
            check_answer(&shape, &AnswerBody { value, comment: None, edited_arguments: None }, "a", &mut errors);
            errors.is_empty()
        };
        assert!(errors_for(json!(["a", "b"])));
        assert!(!errors_for(json!(["a", "a"])));
        assert!(!errors_for(json!(["c"])));
        assert!(!errors_for(json!("a")));
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn wire(input: NewQuestion) -> Question {
        build(input).unwrap().to_question("default").unwrap()
    }

    #[test]
    fn html_form_fields_become_the_answer_json_of_each_response_type() {
        let multi = wire(NewQuestion {
            response_type: Some(ResponseType::MultiChoice),
            options: vec![option("a"), option("b")],
            ..new("t")
        });
        let answer =
            answer_from_form_fields(&multi, &pairs(&[("value", "a"), ("value", "b"), ("comment", " ")])).unwrap();
        assert_eq!(answer.value, json!(["a", "b"]));
        assert_eq!(answer.comment, None, "a blank comment is no comment");

        let boolean = wire(NewQuestion { response_type: Some(ResponseType::Boolean), ..new("t") });
        assert_eq!(answer_from_form_fields(&boolean, &pairs(&[("value", "false")])).unwrap().value, json!(false));

        let form = wire(NewQuestion {
            response_type: Some(ResponseType::Form),
            fields: vec![
                FormField {
                    key: "n".into(),
                    label: "N".into(),
                    response_type: ResponseType::Number,
                    options: vec![],
                    required: true,
                    accept: vec![],
                    max_bytes: None,
                },
                FormField {
                    key: "ok".into(),
                    label: "Ok".into(),
                    response_type: ResponseType::Boolean,
                    options: vec![],
                    required: false,
                    accept: vec![],
                    max_bytes: None,
                },
                FormField {
                    key: "note".into(),
                    label: "Note".into(),
                    response_type: ResponseType::Text,
                    options: vec![],
                    required: false,
                    accept: vec![],
                    max_bytes: None,
                },
            ],
            ..new("t")
        });
        let answer =
            answer_from_form_fields(&form, &pairs(&[("field.n", "2.5"), ("field.ok", ""), ("field.note", "hi")]))
                .unwrap();
        assert_eq!(answer.value, json!({"n": 2.5, "note": "hi"}), "empty inputs are absent");
    }

    #[test]
    fn edited_arguments_count_only_when_they_differ_and_parse() {
        let approval = wire(NewQuestion {
            kind: Some(QuestionKind::Approval),
            allow_edit: true,
            action: Some(ApprovalAction { tool_name: "shell".into(), arguments: json!({"command": "ls"}) }),
            ..new("t")
        });
        let unchanged = answer_from_form_fields(
            &approval,
            &pairs(&[("value", "true"), ("edited_arguments", "{\"command\": \"ls\"}")]),
        )
        .unwrap();
        assert_eq!(unchanged.edited_arguments, None);
        let changed = answer_from_form_fields(
            &approval,
            &pairs(&[("value", "true"), ("edited_arguments", "{\"command\": \"pwd\"}")]),
        )
        .unwrap();
        assert_eq!(changed.edited_arguments, Some(json!({"command": "pwd"})));
        let rejected = answer_from_form_fields(
            &approval,
            &pairs(&[("value", "false"), ("edited_arguments", "{\"command\": \"pwd\"}")]),
        )
        .unwrap();
        assert_eq!(rejected.edited_arguments, None, "a rejection carries no edits");
        assert!(matches!(
            answer_from_form_fields(&approval, &pairs(&[("value", "true"), ("edited_arguments", "{not json")])),
            Err(AppError::Invalid { .. })
        ));
    }
}
