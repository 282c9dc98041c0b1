//! What an answer may be: checked against the shape of its question (its response type, options, form fields and
//! whether its arguments may be edited), and read from the fields of the UI's plain HTML answer form.

use holdpoint_types::{AnswerBody, FieldRules, FormField, Question, QuestionOption, ResponseType};
use serde_json::Value;

use super::fields::{FieldDef, at, check_value};
use super::response_schema::check_against_schema;
use crate::error::AppError;
use crate::validation::{COMMENT_MAX_CHARS, FieldErrors};

pub use super::fields::TEXT_ANSWER_MAX_CHARS;

/// The parts of a question an answer is checked against.
pub struct AnswerShape<'a> {
    pub response_type: ResponseType,
    pub options: &'a [QuestionOption],
    pub fields: &'a [FormField],
    /// A single-value question's bounds.
    pub rules: &'a FieldRules,
    /// The JSON Schema the question was asked with, which a form answer must also satisfy.
    pub response_schema: Option<&'a Value>,
    pub allow_edit: bool,
}

impl<'a> From<&'a Question> for AnswerShape<'a> {
    fn from(q: &'a Question) -> Self {
        AnswerShape {
            response_type: q.response_type,
            options: &q.options,
            fields: &q.fields,
            rules: &q.rules,
            response_schema: q.response_schema.as_ref(),
            allow_edit: q.allow_edit,
        }
    }
}

/// The id of the upload a `file` value references: `{"file_id": "<uuid>", ...}`.
pub fn file_id_of(value: &Value) -> Option<uuid::Uuid> {
    value.as_object()?.get("file_id")?.as_str()?.parse().ok()
}

/// Checks an answer (or a default response) against the question's shape; problems go to `errors` under `prefix`
/// (`value`, `value.<key>`, `value.<key>[row].<column>`, `comment`; with a prefix, `default_response.value`, ...).
pub fn check_answer(shape: &AnswerShape<'_>, answer: &AnswerBody, prefix: &str, errors: &mut FieldErrors) {
    let value_field = at(prefix, "value");
    if shape.response_type == ResponseType::Form {
        match answer.value.as_object() {
            None => errors.add(&value_field, "must be an object with one entry per form field"),
            Some(entries) => {
                for key in entries.keys() {
                    if !shape.fields.iter().any(|f| &f.key == key) {
                        errors.add(format!("{value_field}.{key}"), "is not a field of this form");
                    }
                }
                let before = errors.fields().len();
                for field in shape.fields {
                    let name = format!("{value_field}.{}", field.key);
                    match entries.get(&field.key) {
                        None | Some(Value::Null) if field.required => errors.add(name, "is required"),
                        None | Some(Value::Null) => {}
                        Some(value) => check_value(&FieldDef::of_field(field), value, &name, errors),
                    }
                }
                // The schema's own checks, for what the fields cannot say (`minLength`, say); a value the fields
                // already refused would only be refused twice.
                if let Some(schema) = shape.response_schema
                    && errors.fields().len() == before
                {
                    check_against_schema(schema, &answer.value, &value_field, errors);
                }
            }
        }
    } else if answer.value.is_null() {
        // Nothing picked or typed (no star of a rating, an empty input): said as a form's missing field is, not as
        // a value of the wrong type.
        errors.add(&value_field, "is required");
    } else {
        let def = FieldDef { response_type: shape.response_type, options: shape.options, rules: shape.rules };
        check_value(&def, &answer.value, &value_field, errors);
    }
    if let Some(comment) = &answer.comment
        && comment.chars().count() > COMMENT_MAX_CHARS
    {
        errors.add(at(prefix, "comment"), format!("must have at most {COMMENT_MAX_CHARS} characters"));
    }
    if let Some(edited) = &answer.edited_arguments {
        let field = at(prefix, "edited_arguments");
        if !shape.allow_edit {
            errors.add(field, "this approval does not allow edited arguments");
        } else if !edited.is_object() {
            errors.add(field, "must be a JSON object");
        } else if answer.value != Value::Bool(true) {
            errors.add(field, "only an approval can carry edited arguments");
        }
    }
}

/// A number typed into a plain form's input, or the text as typed when it is not one (so the usual checks name it).
fn typed_number(text: &str) -> Value {
    text.parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number))
        .unwrap_or_else(|| Value::String(text.to_owned()))
}

/// A `datetime-local` input's text (`YYYY-MM-DDTHH:MM[:SS]`) as RFC 3339 with `offset` (`+01:00`; UTC when the
/// form sent none: a page without its script cannot know the browser's); text that already has an offset, or is
/// no date and time at all, as typed (the usual checks name it).
fn datetime_of(text: &str, offset: Option<&str>) -> Value {
    let local = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S"));
    match local {
        Ok(local) => {
            let offset =
                offset.filter(|o| chrono::DateTime::parse_from_rfc3339(&format!("2000-01-01T00:00:00{o}")).is_ok());
            Value::String(format!("{}{}", local.format("%Y-%m-%dT%H:%M:%S"), offset.unwrap_or("Z")))
        }
        Err(_) => Value::String(text.to_owned()),
    }
}

/// A table's rows from a plain form's inputs `<name>[<row>].<column>`: each row an object of its non-empty cells,
/// typed by their columns; blank rows after the last one filled in are left out (the form offers a fixed number),
/// while a blank row before it stays, so problems keep the row numbers the person saw. `None` when all are blank.
fn table_of(name: &str, rules: &FieldRules, fields: &[(String, String)]) -> Option<Value> {
    let mut rows: Vec<serde_json::Map<String, Value>> = Vec::new();
    let prefix = format!("{name}[");
    for (input, text) in fields {
        let Some(rest) = input.strip_prefix(&prefix) else { continue };
        let Some((row, column)) = rest.split_once("].") else { continue };
        let (Ok(row), Some(column)) = (row.parse::<usize>(), rules.columns.iter().find(|c| c.key == column)) else {
            continue;
        };
        let text = text.trim();
        if row >= holdpoint_types::TABLE_ROWS_MAX as usize || text.is_empty() {
            continue;
        }
        if rows.len() <= row {
            rows.resize_with(row + 1, serde_json::Map::new);
        }
        let cell = match column.response_type {
            ResponseType::Number | ResponseType::Integer => typed_number(text),
            ResponseType::Boolean => match text {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                other => Value::String(other.to_owned()),
            },
            _ => Value::String(text.to_owned()),
        };
        rows[row].insert(column.key.clone(), cell);
    }
    (!rows.is_empty()).then(|| Value::Array(rows.into_iter().map(Value::Object).collect()))
}

/// Turns the fields of the UI's plain HTML answer form into an answer body: `value` (repeated for several
/// choices), `field.<key>` for form fields, `<name>.offset` beside a date and time, `<name>.unset` ticked beside an
/// optional slider left unanswered, `<name>[<row>].<column>` for a table's cells, `edited_arguments` (JSON text),
/// `comment`. A file input's value is the id of the file the form's
/// request uploaded. Empty inputs count as absent, so the usual checks report what is missing.
pub fn answer_from_form_fields(question: &Question, fields: &[(String, String)]) -> Result<AnswerBody, AppError> {
    // A form sends a textarea's line breaks as CRLF (HTML's form submission normalises them so); the answer keeps
    // the `\n` the live form and the API send, so it reads the same and each break counts once toward its limit.
    let fields: &[(String, String)] =
        &fields.iter().map(|(name, value)| (name.clone(), value.replace("\r\n", "\n"))).collect::<Vec<_>>();
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
        ResponseType::Text | ResponseType::Markdown => {
            Value::String(values("value").first().copied().unwrap_or_default().to_owned())
        }
        ResponseType::Email | ResponseType::Url | ResponseType::Date | ResponseType::Time => {
            first("value").map_or(Value::Null, |v| Value::String(v.into()))
        }
        ResponseType::Datetime => first("value").map_or(Value::Null, |v| datetime_of(v, first("value.offset"))),
        ResponseType::Number | ResponseType::Integer | ResponseType::Rating => {
            first("value").map_or(Value::Null, typed_number)
        }
        ResponseType::Table => table_of("value", &question.rules, fields).unwrap_or(Value::Null),
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
                    // An optional slider's "No answer" box, ticked, leaves the field out whatever the range sent.
                    ResponseType::Number | ResponseType::Integer if first(&format!("{name}.unset")) == Some("true") => {
                        None
                    }
                    ResponseType::Number | ResponseType::Integer | ResponseType::Rating => {
                        first(&name).map(typed_number)
                    }
                    ResponseType::Table => table_of(&name, &field.rules, fields),
                    ResponseType::Datetime => first(&name).map(|v| datetime_of(v, first(&format!("{name}.offset")))),
                    // Markdown keeps its spaces and lines as typed.
                    ResponseType::Markdown => {
                        values(&name).first().filter(|v| !v.trim().is_empty()).map(|v| Value::String((*v).to_owned()))
                    }
                    // The id of a file uploaded beforehand; the answer's check fills in the rest.
                    ResponseType::File => first(&name).map(|v| serde_json::json!({ "file_id": v })),
                    _ => first(&name).map(|v| Value::String(v.to_owned())),
                };
                if let Some(entry) = entry {
                    object.insert(field.key.clone(), entry);
                }
            }
            Value::Object(object)
        }
        // The id of a file uploaded beforehand (by the multipart form, or the page's own upload).
        ResponseType::File => first("value").map_or(Value::Null, |v| serde_json::json!({ "file_id": v })),
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
    use chrono::Utc;
    use holdpoint_types::{ApprovalAction, NewQuestion, QuestionKind};
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

    /// An unpicked rating says what is missing, not which numbers a rating takes.
    #[test]
    fn a_single_value_left_empty_is_required() {
        let shape = AnswerShape {
            response_type: ResponseType::Rating,
            options: &[],
            fields: &[],
            rules: &FieldRules::default(),
            response_schema: None,
            allow_edit: false,
        };
        let mut errors = FieldErrors::default();
        check_answer(
            &shape,
            &AnswerBody { value: Value::Null, comment: None, edited_arguments: None },
            "",
            &mut errors,
        );
        let Err(AppError::Invalid { details: Some(details), .. }) = errors.into_result("the answer") else {
            panic!("an empty answer is refused")
        };
        assert_eq!(details["fields"], json!({"value": "is required"}));
    }

    #[test]
    fn form_answers_need_required_fields_of_the_right_type() {
        let fields = vec![
            FormField {
                options: vec![option("dev"), option("prod")],
                required: true,
                ..FormField::new("env", "Env", ResponseType::Choice)
            },
            FormField::new("replicas", "Replicas", ResponseType::Number),
        ];
        let shape = AnswerShape {
            response_type: ResponseType::Form,
            options: &[],
            fields: &fields,
            rules: &FieldRules::default(),
            response_schema: None,
            allow_edit: false,
        };
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
        let shape = AnswerShape {
            response_type: ResponseType::MultiChoice,
            options: &options,
            fields: &[],
            rules: &FieldRules::default(),
            response_schema: None,
            allow_edit: false,
        };
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

    /// The plain form's textareas arrive with CRLF breaks; stored, they read as the live form's answer does.
    #[test]
    fn line_breaks_a_form_sends_as_crlf_are_kept_as_newlines() {
        let markdown = wire(NewQuestion { response_type: Some(ResponseType::Markdown), ..new("t") });
        let answer =
            answer_from_form_fields(&markdown, &pairs(&[("value", "line 1\r\nline 2"), ("comment", "a\r\nb")]))
                .unwrap();
        assert_eq!(answer.value, json!("line 1\nline 2"));
        assert_eq!(answer.comment.as_deref(), Some("a\nb"));

        let form = wire(NewQuestion {
            response_type: Some(ResponseType::Form),
            fields: vec![
                FormField::new("notes", "Notes", ResponseType::Markdown),
                FormField::new("why", "Why", ResponseType::Text),
            ],
            ..new("t")
        });
        let fields = pairs(&[("field.notes", "- one\r\n- two"), ("field.why", "x\r\ny")]);
        assert_eq!(
            answer_from_form_fields(&form, &fields).unwrap().value,
            json!({"notes": "- one\n- two", "why": "x\ny"})
        );
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
                FormField { required: true, ..FormField::new("n", "N", ResponseType::Number) },
                FormField::new("ok", "Ok", ResponseType::Boolean),
                FormField::new("note", "Note", ResponseType::Text),
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

    #[test]
    fn a_plain_form_sends_a_table_as_indexed_cells_and_a_datetime_with_its_offset() {
        let column = |key: &str, response_type| holdpoint_types::TableColumn::new(key, key, response_type);
        let mut items = FormField::new("items", "Items", ResponseType::Table);
        items.rules.columns = vec![column("item", ResponseType::Text), column("qty", ResponseType::Integer)];
        let form = wire(NewQuestion {
            response_type: Some(ResponseType::Form),
            fields: vec![items, FormField::new("when", "When", ResponseType::Datetime)],
            ..new("t")
        });
        let answer = answer_from_form_fields(
            &form,
            &pairs(&[
                ("field.items[0].item", "disk"),
                ("field.items[0].qty", "2"),
                ("field.items[1].item", ""),
                ("field.items[2].item", "cpu"),
                ("field.items[3].item", " "),
                ("field.items[3].qty", ""),
                ("field.when", "2026-03-01T09:30"),
                ("field.when.offset", "+01:00"),
            ]),
        )
        .unwrap();
        assert_eq!(
            answer.value,
            json!({"items": [{"item": "disk", "qty": 2}, {}, {"item": "cpu"}], "when": "2026-03-01T09:30:00+01:00"}),
            "a blank row before a filled one stays (its number is the person's), blank rows after it go"
        );
        let utc = answer_from_form_fields(&form, &pairs(&[("field.when", "2026-03-01T09:30")])).unwrap();
        assert_eq!(utc.value, json!({"when": "2026-03-01T09:30:00Z"}), "no offset sent: UTC");
    }

    /// A range input always sends a value: an optional slider's ticked "No answer" box leaves the field out.
    #[test]
    fn an_optional_slider_left_unanswered_is_left_out_whatever_the_range_sent() {
        let form = wire(NewQuestion {
            response_type: Some(ResponseType::Form),
            fields: vec![FormField::new("confidence", "Confidence", ResponseType::Integer)],
            ..new("t")
        });
        let unanswered =
            answer_from_form_fields(&form, &pairs(&[("field.confidence", "0"), ("field.confidence.unset", "true")]));
        assert_eq!(unanswered.unwrap().value, json!({}));
        let moved = answer_from_form_fields(&form, &pairs(&[("field.confidence", "15")])).unwrap();
        assert_eq!(moved.value, json!({"confidence": 15}));
    }
}
