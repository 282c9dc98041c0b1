//! A new question from what was asked: every field checked (title, body and context sizes, options, form fields,
//! the action of an approval, the quorum, the timeout within the configured bounds, the default response as an
//! answer would be) and the row it is stored as, with the defaults of its kind.

use std::collections::HashSet;

use crate::store::Json;
use chrono::{DateTime, Duration, Utc};
use holdpoint_types::{Assignee, FormField, NewQuestion, QuestionKind, QuestionStatus, ResponseType, Role};
use serde_json::Value;
use uuid::Uuid;

use super::answer_shape::{AnswerShape, check_answer};
use super::fields::{
    DESCRIPTION_MAX_CHARS, FieldDef, PLACEHOLDER_MAX_CHARS, at, check_field_options, check_key_and_label,
    check_options, check_rules, check_value, refuse_unknown,
};
use super::response_schema::{SCHEMA_PATH, fields_from_schema, validator};
use crate::error::AppError;
use crate::store::QuestionRow;
use crate::validation::{FieldErrors, PROJECT_MAX_CHARS};

pub const TITLE_MAX_CHARS: usize = 300;

pub const BODY_MAX_BYTES: usize = 32 * 1024;

pub const CONTEXT_MAX_BYTES: usize = 16 * 1024;

const OPTIONS_MIN: usize = 2;

const FIELDS_MAX: usize = holdpoint_types::FORM_FIELDS_MAX;

/// The timeouts a question may have, as the operator configured them (`HOLDPOINT_MIN_TIMEOUT_SECONDS`,
/// `HOLDPOINT_MAX_TIMEOUT_SECONDS`).
#[derive(Debug, Clone, Copy)]
pub struct TimeoutBounds {
    pub min_seconds: i64,
    pub max_seconds: i64,
}

/// The response type a question gets when the caller names none: `form` with a `response_schema`, else by kind.
fn default_response_type(kind: QuestionKind, schema: bool) -> ResponseType {
    match kind {
        _ if schema => ResponseType::Form,
        QuestionKind::Approval => ResponseType::Approval,
        QuestionKind::ErrorRecovery => ResponseType::ErrorRecovery,
        QuestionKind::Blocking | QuestionKind::NonBlocking => ResponseType::Text,
    }
}

/// Checks the structure of a new question and fills in its defaults. Size limits answer 413, the rest 422.
pub fn build_question(
    input: NewQuestion,
    workspace_id: Uuid,
    created_by: Option<Uuid>,
    bounds: TimeoutBounds,
    now: DateTime<Utc>,
) -> Result<QuestionRow, AppError> {
    if input.body.len() > BODY_MAX_BYTES {
        return Err(AppError::TooLarge(format!("body is larger than {BODY_MAX_BYTES} bytes")));
    }
    let context = input.context.unwrap_or_else(|| Value::Object(Default::default()));
    if context.to_string().len() > CONTEXT_MAX_BYTES {
        return Err(AppError::TooLarge(format!("context is larger than {CONTEXT_MAX_BYTES} bytes")));
    }

    let mut errors = FieldErrors::default();
    refuse_unknown(&input.unknown, "", "a question", &mut errors);
    let kind = input.kind.unwrap_or(QuestionKind::Blocking);
    let response_type =
        input.response_type.unwrap_or_else(|| default_response_type(kind, input.response_schema.is_some()));
    // A schema becomes the form's fields; the question keeps it as given, to validate answers against it too.
    let mut fields = input.fields;
    // Fields made from a schema with faults are partial: their faults would only echo the schema's.
    let mut schema_faulty = false;
    if let Some(schema) = &input.response_schema {
        if response_type != ResponseType::Form {
            errors.add("response_type", format!("a question with a response_schema is a form, not {response_type}"));
        }
        if !fields.is_empty() {
            errors.add("fields", "give fields or a response_schema, not both");
        }
        let mut schema_errors = FieldErrors::default();
        fields = fields_from_schema(schema, SCHEMA_PATH, &mut schema_errors);
        if schema_errors.is_empty() {
            validator(schema, SCHEMA_PATH, &mut schema_errors);
        }
        schema_faulty = !schema_errors.is_empty();
        errors.merge(schema_errors);
    }
    let title = input.title.trim().to_owned();
    let title_chars = title.chars().count();
    if title_chars == 0 || title_chars > TITLE_MAX_CHARS {
        errors.add("title", format!("must have 1..={TITLE_MAX_CHARS} characters, has {title_chars}"));
    }
    if !context.is_object() {
        errors.add("context", "must be a JSON object");
    }
    if let Some(project) = &input.project
        && (project.trim().is_empty() || project.chars().count() > PROJECT_MAX_CHARS)
    {
        errors.add("project", format!("must have 1..={PROJECT_MAX_CHARS} characters"));
    }
    match response_type {
        ResponseType::Choice | ResponseType::MultiChoice => {
            check_options(&input.options, "options", OPTIONS_MIN, &mut errors)
        }
        ResponseType::ErrorRecovery => {
            check_options(&input.options, "options", 0, &mut errors);
            for (i, option) in input.options.iter().enumerate() {
                if holdpoint_types::is_recovery_action(&option.value) {
                    errors.add(
                        format!("options[{i}].value"),
                        format!("{:?} is built in; choose another value", option.value),
                    );
                }
            }
        }
        ResponseType::Form if schema_faulty => {}
        ResponseType::Form if input.response_schema.is_some() => {
            let properties = format!("{SCHEMA_PATH}.properties");
            check_form_fields(&fields, &properties, |_, field| format!("{properties}.{}", field.key), &mut errors)
        }
        ResponseType::Form => check_form_fields(&fields, "fields", |i, _| format!("fields[{i}]"), &mut errors),
        _ => {}
    }
    // A single-value question's bounds, named as a form field's but at the top (`max`, `columns[0].key`).
    if response_type == ResponseType::Form {
        if !input.rules.is_empty() {
            errors.add("response_type", "a form's bounds belong to its fields");
        }
    } else {
        check_rules(&FieldDef { response_type, options: &input.options, rules: &input.rules }, "", &mut errors);
    }
    if !matches!(response_type, ResponseType::Choice | ResponseType::MultiChoice | ResponseType::ErrorRecovery)
        && !input.options.is_empty()
    {
        errors.add(
            "options",
            format!("only choice, multi_choice and error_recovery questions have options, not {response_type}"),
        );
    }
    if response_type != ResponseType::Form && input.response_schema.is_none() && !fields.is_empty() {
        errors.add("fields", "only form questions have fields");
    }
    match (kind, response_type) {
        (QuestionKind::Approval, ResponseType::Approval) => {}
        (QuestionKind::Approval, other) => {
            errors.add("response_type", format!("an approval question is answered with approval, not {other}"))
        }
        (_, ResponseType::Approval) => errors.add("kind", "approval answers belong to approval questions"),
        _ => {}
    }
    if response_type == ResponseType::Approval {
        match &input.action {
            None => errors.add("action", "an approval question needs the action it is about: {tool_name, arguments}"),
            Some(action) if action.tool_name.trim().is_empty() => errors.add("action.tool_name", "must not be empty"),
            Some(_) => {}
        }
    } else if input.action.is_some() {
        errors.add("action", "only approval questions carry an action");
    }
    if input.allow_edit && response_type != ResponseType::Approval {
        errors.add("allow_edit", "only approval questions can have editable arguments");
    }
    let assignee = input.assignee.as_ref().and_then(|requested| assignee_of(requested, &mut errors));
    let required_approvals = input.required_approvals.unwrap_or(1);
    check_quorum(response_type, required_approvals, input.eligible.as_ref(), input.allow_edit, &mut errors);
    check_one_assignee(input.assignee.as_ref(), required_approvals, input.eligible.as_ref(), &mut errors);

    let timeout_seconds = match input.timeout_seconds {
        Some(seconds) if seconds < bounds.min_seconds || seconds > bounds.max_seconds => {
            errors.add(
                "timeout_seconds",
                format!("must be within {}..={} seconds", bounds.min_seconds, bounds.max_seconds),
            );
            None
        }
        Some(seconds) => Some(seconds),
        None => kind.default_timeout_seconds(),
    };
    if let Some(default) = &input.default_response {
        let shape = AnswerShape {
            response_type,
            options: &input.options,
            fields: &fields,
            rules: &input.rules,
            response_schema: input.response_schema.as_ref(),
            allow_edit: input.allow_edit,
        };
        // A schema that could not become fields has nothing to check a default against.
        if errors.is_empty() || input.response_schema.is_none() {
            check_answer(&shape, default, "default_response", &mut errors);
        }
        // A file is an answer's, taken by its question when someone answers: a default has none to reference.
        if response_type == ResponseType::File && !default.value.is_null() {
            errors.add("default_response.value", "a default cannot reference a file");
        }
        for field in fields.iter().filter(|field| field.response_type == ResponseType::File) {
            if default.value.get(&field.key).is_some_and(|value| !value.is_null()) {
                errors.add(format!("default_response.value.{}", field.key), "a default cannot reference a file");
            }
        }
    }
    errors.into_result("the question")?;

    Ok(QuestionRow {
        id: Uuid::now_v7(),
        workspace_id,
        project: input.project.map(|p| p.trim().to_owned()),
        run_id: input.run_id,
        tool_call_id: None,
        parent_run_ids: Json(Vec::new()),
        kind,
        response_type,
        title,
        body: input.body,
        options: Json(input.options),
        fields: Json(fields),
        action: input.action.map(Json),
        allow_edit: input.allow_edit,
        context: Json(context),
        urgency: input.urgency.unwrap_or_else(|| kind.default_urgency()),
        timeout_at: timeout_seconds.map(|s| now + Duration::seconds(s)),
        default_response: input.default_response.map(Json),
        status: QuestionStatus::Pending,
        response: None,
        answered_by: None,
        resolution: None,
        created_by,
        created_at: now,
        updated_at: now,
        resolved_at: None,
        assignee: assignee.map(Json),
        escalation: None,
        next_escalation_at: None,
        callback_url: input.callback_url,
        required_approvals: i32::from(required_approvals),
        eligible: input.eligible.map(Json),
        approvals: Json(Vec::new()),
        claimed_by: None,
        claim_expires_at: None,
        revision: 0,
        claimed_by_id: None,
        field_rules: (!input.rules.is_empty()).then(|| Json(Box::new(input.rules))),
        response_schema: input.response_schema.map(Json),
    })
}

/// The assignee a request names (for a round-robin request, the role it picks from, until a member is picked);
/// `None`, with the fault in `errors`, when it names none or two.
fn assignee_of(requested: &holdpoint_types::AssigneeRequest, errors: &mut FieldErrors) -> Option<Assignee> {
    match (&requested.user, requested.role, requested.strategy) {
        (Some(user), None, None) => Some(Assignee::User(user.clone())),
        (None, Some(role), _) => Some(Assignee::Role(role)),
        (Some(_), None, Some(_)) => {
            errors.add("assignee.strategy", "picks a member of a role: name the role, not a user");
            None
        }
        (Some(_), Some(_), _) => {
            errors.add("assignee", "names a user or a role, not both");
            None
        }
        (None, None, _) => {
            errors.add("assignee", "needs a user or a role");
            None
        }
    }
}

/// The most approvals a question may need, and the most people `eligible` may name.
pub const APPROVALS_MAX: u8 = 10;

pub const ELIGIBLE_USERS_MAX: usize = 50;

/// Checks a quorum: only approvals need more than one person, at most [`APPROVALS_MAX`]; `eligible` names a role
/// that may approve or enough distinct people to reach it; several approvers cannot each edit the arguments.
fn check_quorum(
    response_type: ResponseType,
    required: u8,
    eligible: Option<&holdpoint_types::Eligible>,
    allow_edit: bool,
    errors: &mut FieldErrors,
) {
    if !(1..=APPROVALS_MAX).contains(&required) {
        errors.add("required_approvals", format!("must be within 1..={APPROVALS_MAX}"));
    } else if required > 1 && response_type != ResponseType::Approval {
        errors.add("required_approvals", "only approval questions can need several approvals");
    } else if required > 1 && allow_edit {
        errors.add("allow_edit", "a question that needs several approvals cannot take edited arguments");
    }
    match eligible {
        None => {}
        Some(_) if response_type != ResponseType::Approval => {
            errors.add("eligible", "only approval questions have eligible approvers")
        }
        Some(holdpoint_types::Eligible::Role(role)) if !matches!(role, Role::Approver | Role::Admin) => {
            errors.add("eligible.role", format!("must be a role that may approve: approver or admin, not {role}"))
        }
        Some(holdpoint_types::Eligible::Role(_)) => {}
        Some(holdpoint_types::Eligible::Users(users)) => {
            let distinct: HashSet<&str> = users.iter().map(|u| u.trim()).collect();
            if users.is_empty() || users.len() > ELIGIBLE_USERS_MAX {
                errors.add("eligible.users", format!("must name 1..={ELIGIBLE_USERS_MAX} people"));
            } else if distinct.contains("") {
                errors.add("eligible.users", "must not contain an empty name");
            } else if distinct.len() != users.len() {
                errors.add("eligible.users", "must not name anyone twice");
            } else if distinct.len() < usize::from(required) {
                errors.add(
                    "eligible.users",
                    format!("names {} people, fewer than the {required} approvals needed", distinct.len()),
                );
            }
        }
    }
}

/// Checks that a question assigned to one person (by name, or by a role's turn) can be decided by them: only its
/// assignee may answer it, so it cannot collect several approvals, and its assignee must be among the eligible.
fn check_one_assignee(
    requested: Option<&holdpoint_types::AssigneeRequest>,
    required: u8,
    eligible: Option<&holdpoint_types::Eligible>,
    errors: &mut FieldErrors,
) {
    let Some(requested) = requested.filter(|r| r.user.is_some() || r.strategy.is_some()) else { return };
    if required > 1 {
        errors.add(
            "assignee",
            format!(
                "only the one person assigned may answer, who cannot give the {required} approvals needed: assign \
                 a role, or name the approvers in eligible"
            ),
        );
    }
    if let (Some(user), Some(holdpoint_types::Eligible::Users(users))) = (&requested.user, eligible)
        && !users.contains(user)
    {
        errors.add("assignee.user", format!("{user} is not among the eligible approvers"));
    }
}

/// Checks a form's fields: 1..=30 of them with distinct keys and labels, each of a field type with the options and
/// bounds of its type, a description and a placeholder of sensible length, and a default that fits. `list` names
/// the list in errors (`fields`, or the schema's properties) and `path_of` a field: `fields[2]`, or the schema
/// property it was made from.
fn check_form_fields(
    fields: &[FormField],
    list: &str,
    path_of: impl Fn(usize, &FormField) -> String,
    errors: &mut FieldErrors,
) {
    if fields.is_empty() || fields.len() > FIELDS_MAX {
        errors.add(list, format!("a form needs 1..={FIELDS_MAX} fields, got {}", fields.len()));
    }
    let mut keys = HashSet::new();
    for (i, field) in fields.iter().enumerate() {
        let path = path_of(i, field);
        refuse_unknown(&field.unknown, &path, "a form field", errors);
        check_key_and_label(&field.key, &field.label, &path, errors);
        if !keys.insert(field.key.as_str()) {
            errors.add(at(&path, "key"), format!("{:?} appears more than once", field.key));
        }
        if !field.response_type.is_field_type() {
            errors.add(at(&path, "response_type"), format!("{} cannot be a form field", field.response_type));
            continue;
        }
        if field.description.as_ref().is_some_and(|d| d.chars().count() > DESCRIPTION_MAX_CHARS) {
            errors.add(at(&path, "description"), format!("must have at most {DESCRIPTION_MAX_CHARS} characters"));
        }
        if field.placeholder.as_ref().is_some_and(|p| p.chars().count() > PLACEHOLDER_MAX_CHARS) {
            errors.add(at(&path, "placeholder"), format!("must have at most {PLACEHOLDER_MAX_CHARS} characters"));
        }
        let before = errors.fields().len();
        check_field_options(field.response_type, &field.options, &path, errors);
        check_rules(&FieldDef::of_field(field), &path, errors);
        // A default is checked against a definition that holds together; else its faults would only echo those.
        if let Some(default) = field.default.as_ref().filter(|d| !d.is_null())
            && errors.fields().len() == before
        {
            check_value(&FieldDef::of_field(field), default, &at(&path, "default"), errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_types::{AnswerBody, ApprovalAction, QuestionOption, Urgency};
    use serde_json::json;

    const BOUNDS: TimeoutBounds = TimeoutBounds { min_seconds: 300, max_seconds: 86_400 };

    fn build(input: NewQuestion) -> Result<QuestionRow, AppError> {
        build_question(input, Uuid::now_v7(), None, BOUNDS, Utc::now())
    }

    fn new(title: &str) -> NewQuestion {
        NewQuestion { title: title.into(), ..Default::default() }
    }

    fn invalid_fields(result: Result<QuestionRow, AppError>) -> Vec<String> {
        match result {
            Err(AppError::Invalid { details: Some(details), .. }) => {
                details["fields"].as_object().unwrap().keys().cloned().collect()
            }
            other => panic!("expected 422, got {other:?}"),
        }
    }

    /// A misspelt or misplaced attribute is named, never dropped: a bound the value is not held to is no bound.
    #[test]
    fn attributes_a_definition_does_not_have_are_refused_by_name() {
        let single: NewQuestion =
            serde_json::from_value(json!({"title": "t", "response_type": "integer", "minimum": 1, "max": 9})).unwrap();
        assert_eq!(invalid_fields(build(single)), ["minimum"]);
        let form: NewQuestion = serde_json::from_value(json!({"title": "t", "response_type": "form", "fields": [
            {"key": "n", "label": "N", "response_type": "integer", "min_row": 1},
            {"key": "t", "label": "T", "response_type": "table", "columns": [
                {"key": "c", "label": "C", "response_type": "integer", "min": 1}
            ]}
        ]}))
        .unwrap();
        assert_eq!(invalid_fields(build(form)), ["fields[0].min_row", "fields[1].columns[0].min"]);
        // What a definition has is never counted as unknown, and none is stored or sent.
        let known: NewQuestion =
            serde_json::from_value(json!({"title": "t", "response_type": "integer", "min": 1})).unwrap();
        assert!(known.unknown.is_empty());
        assert!(serde_json::to_value(&known).unwrap().get("unknown").is_none());
    }

    #[test]
    fn keys_and_labels_have_a_length_a_page_can_show() {
        let long = "x".repeat(201);
        let mut field = FormField::new("k".repeat(101), long.clone(), ResponseType::Choice);
        field.options = vec![option("a"), QuestionOption { value: "b".into(), label: long, description: None }];
        let form = NewQuestion { response_type: Some(ResponseType::Form), fields: vec![field], ..new("t") };
        assert_eq!(invalid_fields(build(form)), ["fields[0].key", "fields[0].label", "fields[0].options[1].label"]);
    }

    fn option(value: &str) -> QuestionOption {
        QuestionOption { value: value.into(), label: value.to_uppercase(), description: None }
    }

    #[test]
    fn a_blocking_text_question_gets_the_defaults_of_its_kind() {
        let row = build(new("  Which region?  ")).unwrap();
        assert_eq!(row.title, "Which region?");
        assert_eq!(row.kind, QuestionKind::Blocking);
        assert_eq!(row.response_type, ResponseType::Text);
        assert_eq!(row.urgency, Urgency::High);
        assert_eq!(row.status, QuestionStatus::Pending);
        let minutes = (row.timeout_at.unwrap() - row.created_at).num_minutes();
        assert_eq!(minutes, 30);
    }

    #[test]
    fn a_non_blocking_question_has_no_deadline_and_low_urgency() {
        let row = build(NewQuestion { kind: Some(QuestionKind::NonBlocking), ..new("Verbose logs?") }).unwrap();
        assert_eq!(row.timeout_at, None);
        assert_eq!(row.urgency, Urgency::Low);
    }

    #[test]
    fn an_empty_or_overlong_title_is_refused() {
        assert_eq!(invalid_fields(build(new("   "))), ["title"]);
        assert_eq!(invalid_fields(build(new(&"x".repeat(301)))), ["title"]);
        assert!(build(new(&"é".repeat(300))).is_ok());
    }

    #[test]
    fn an_oversized_body_or_context_is_too_large() {
        let body = NewQuestion { body: "x".repeat(BODY_MAX_BYTES + 1), ..new("t") };
        assert!(matches!(build(body), Err(AppError::TooLarge(_))));
        let context = NewQuestion { context: Some(json!({ "k": "x".repeat(CONTEXT_MAX_BYTES) })), ..new("t") };
        assert!(matches!(build(context), Err(AppError::TooLarge(_))));
    }

    #[test]
    fn a_choice_question_needs_two_distinct_options() {
        let one = NewQuestion { response_type: Some(ResponseType::Choice), options: vec![option("a")], ..new("t") };
        assert_eq!(invalid_fields(build(one)), ["options"]);
        let twice = NewQuestion {
            response_type: Some(ResponseType::Choice),
            options: vec![option("a"), option("a")],
            ..new("t")
        };
        assert_eq!(invalid_fields(build(twice)), ["options[1].value"]);
    }

    #[test]
    fn an_approval_needs_an_action_and_the_approval_answer_type() {
        let bare = NewQuestion { kind: Some(QuestionKind::Approval), ..new("Apply?") };
        assert_eq!(invalid_fields(build(bare)), ["action"]);
        let good = NewQuestion {
            kind: Some(QuestionKind::Approval),
            action: Some(ApprovalAction { tool_name: "shell".into(), arguments: json!({"command": "ls"}) }),
            ..new("Apply?")
        };
        let row = build(good).unwrap();
        assert_eq!(row.response_type, ResponseType::Approval);
        assert_eq!((row.timeout_at.unwrap() - row.created_at).num_minutes(), 15);
    }

    #[test]
    fn a_timeout_outside_the_bounds_is_refused() {
        assert_eq!(invalid_fields(build(NewQuestion { timeout_seconds: Some(10), ..new("t") })), ["timeout_seconds"]);
        assert!(build(NewQuestion { timeout_seconds: Some(300), ..new("t") }).is_ok());
    }

    #[test]
    fn a_default_response_is_checked_like_an_answer() {
        let q = NewQuestion {
            response_type: Some(ResponseType::Choice),
            options: vec![option("a"), option("b")],
            default_response: Some(AnswerBody { value: json!("c"), comment: None, edited_arguments: None }),
            ..new("t")
        };
        assert_eq!(invalid_fields(build(q)), ["default_response.value"]);
    }
}
