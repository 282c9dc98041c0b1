//! Questions: what a person must handle. Turning a request into a valid question, and checking an
//! answer against its question, live here; HTTP and SQL do not. So does what answering may take: several approvals
//! ([`quorum`]), a claim ([`claims`]), and who stands in for someone away ([`delegation`]).

pub mod claims;
pub mod delegation;
mod pending;
pub mod quorum;

use std::collections::HashSet;

use app::types::{
    AnswerBody, Assignee, Escalation, FormField, NewQuestion, Question, QuestionKind, QuestionOption, QuestionStatus,
    Resolution, ResponseType, Role,
};
use chrono::{DateTime, Duration, SubsecRound, Utc};
use serde_json::Value;
use sqlx::types::Json;
use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::events::EventHub;
use crate::metrics::Metrics;
use crate::store::{
    AskedWith, EscalationPolicyRow, IdempotencyKey, NewEvent, PrincipalKind, QuestionResolution, QuestionRow,
    QuestionTransition, ResolveOutcome, Store, StoreResult,
};
use crate::validation::{COMMENT_MAX_CHARS, FieldErrors, PROJECT_MAX_CHARS};

pub const TITLE_MAX_CHARS: usize = 300;
pub const BODY_MAX_BYTES: usize = 32 * 1024;
pub const CONTEXT_MAX_BYTES: usize = 16 * 1024;
pub const TEXT_ANSWER_MAX_CHARS: usize = 10_000;
/// The longest text a search (`q`) takes: any phrase fits, and matching it stays cheap. The UI's search fields
/// share it.
pub const SEARCH_MAX_CHARS: usize = app::SEARCH_MAX_CHARS;
const OPTIONS_MIN: usize = 2;
const OPTIONS_MAX: usize = 20;
const FIELDS_MAX: usize = 10;

/// The timeouts a question may have, as the operator configured them (`HOLDPOINT_MIN_TIMEOUT_SECONDS`,
/// `HOLDPOINT_MAX_TIMEOUT_SECONDS`).
#[derive(Debug, Clone, Copy)]
pub struct TimeoutBounds {
    pub min_seconds: i64,
    pub max_seconds: i64,
}

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

/// The response type a question gets when the caller names none.
fn default_response_type(kind: QuestionKind) -> ResponseType {
    match kind {
        QuestionKind::Approval => ResponseType::Approval,
        QuestionKind::ErrorRecovery => ResponseType::ErrorRecovery,
        QuestionKind::Blocking | QuestionKind::NonBlocking => ResponseType::Text,
    }
}

fn check_options(options: &[QuestionOption], prefix: &str, min: usize, errors: &mut FieldErrors) {
    if options.len() < min || options.len() > OPTIONS_MAX {
        errors.add(prefix, format!("needs {min}..={OPTIONS_MAX} options, got {}", options.len()));
    }
    let mut seen = HashSet::new();
    for (i, option) in options.iter().enumerate() {
        if option.value.trim().is_empty() {
            errors.add(format!("{prefix}[{i}].value"), "must not be empty");
        }
        if option.label.trim().is_empty() {
            errors.add(format!("{prefix}[{i}].label"), "must not be empty");
        }
        if !seen.insert(option.value.as_str()) {
            errors.add(format!("{prefix}[{i}].value"), format!("{:?} appears more than once", option.value));
        }
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
    let kind = input.kind.unwrap_or(QuestionKind::Blocking);
    let response_type = input.response_type.unwrap_or_else(|| default_response_type(kind));
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
                if app::types::is_recovery_action(&option.value) {
                    errors.add(
                        format!("options[{i}].value"),
                        format!("{:?} is built in; choose another value", option.value),
                    );
                }
            }
        }
        ResponseType::Form => check_form_fields(&input.fields, &mut errors),
        ResponseType::Number => errors.add("response_type", "number is only for form fields"),
        ResponseType::Text | ResponseType::Boolean | ResponseType::Approval => {}
    }
    if !matches!(response_type, ResponseType::Choice | ResponseType::MultiChoice | ResponseType::ErrorRecovery)
        && !input.options.is_empty()
    {
        errors.add(
            "options",
            format!("only choice, multi_choice and error_recovery questions have options, not {response_type}"),
        );
    }
    if response_type != ResponseType::Form && !input.fields.is_empty() {
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
        let shape =
            AnswerShape { response_type, options: &input.options, fields: &input.fields, allow_edit: input.allow_edit };
        check_answer(&shape, default, "default_response", &mut errors);
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
        fields: Json(input.fields),
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
    })
}

/// The assignee a request names (for a round-robin request, the role it picks from, until a member is picked);
/// `None`, with the fault in `errors`, when it names none or two.
fn assignee_of(requested: &app::types::AssigneeRequest, errors: &mut FieldErrors) -> Option<Assignee> {
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
    eligible: Option<&app::types::Eligible>,
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
        Some(app::types::Eligible::Role(role)) if !matches!(role, Role::Approver | Role::Admin) => {
            errors.add("eligible.role", format!("must be a role that may approve: approver or admin, not {role}"))
        }
        Some(app::types::Eligible::Role(_)) => {}
        Some(app::types::Eligible::Users(users)) => {
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

fn check_form_fields(fields: &[FormField], errors: &mut FieldErrors) {
    if fields.is_empty() || fields.len() > FIELDS_MAX {
        errors.add("fields", format!("a form needs 1..={FIELDS_MAX} fields, got {}", fields.len()));
    }
    let mut keys = HashSet::new();
    for (i, field) in fields.iter().enumerate() {
        if field.key.trim().is_empty() {
            errors.add(format!("fields[{i}].key"), "must not be empty");
        }
        if !keys.insert(field.key.as_str()) {
            errors.add(format!("fields[{i}].key"), format!("{:?} appears more than once", field.key));
        }
        if field.label.trim().is_empty() {
            errors.add(format!("fields[{i}].label"), "must not be empty");
        }
        match field.response_type {
            ResponseType::Choice | ResponseType::MultiChoice => {
                check_options(&field.options, &format!("fields[{i}].options"), OPTIONS_MIN, errors)
            }
            ResponseType::Text | ResponseType::Boolean | ResponseType::Number => {
                if !field.options.is_empty() {
                    errors.add(format!("fields[{i}].options"), "only choice fields have options");
                }
            }
            other => errors.add(format!("fields[{i}].response_type"), format!("{other} cannot be a form field")),
        }
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
    }
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
        ResponseType::Number => first("value").map_or(Value::Null, |v| Value::String(v.into())),
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

/// Asking a question, the one way every door asks (REST, MCP, the worker protocol, the executor): [`Asking::prepare`]
/// validates what was asked, the door adds what it knows (a run's lineage, a client's ids), and
/// [`Asking::record`] stores it with its `question_asked` event.
#[derive(Clone)]
pub struct Asking<'a> {
    pub store: &'a dyn Store,
    pub metrics: &'a Metrics,
    /// This instance's event hub, which keeps a question asked here in memory while it is pending (the cycle's
    /// reads then skip the database); `None` where no hub runs (a run the CLI executes against a server).
    pub hub: Option<&'a EventHub>,
    pub bounds: TimeoutBounds,
    /// The channels outside Holdpoint's pages the questions asked here are delivered on.
    pub sends_on: &'a crate::notifications::SendsOn,
    /// Which `callback_url`s a question may name.
    pub callbacks: crate::channels::webhooks::UrlPolicy,
}

/// Gives a new question the plan of its workspace's policy for its kind and urgency, if there is one.
async fn plan_escalation(store: &dyn Store, row: &mut QuestionRow) -> StoreResult<()> {
    if store.relays_to_server() {
        return Ok(());
    }
    let policy = store.escalation_policy(row.workspace_id, row.kind, row.urgency).await?;
    if let Some(policy) = policy {
        plan_by(row, &policy);
    }
    Ok(())
}

/// Sets the plan `policy` gives `row`: each step's time counted from its asking.
fn plan_by(row: &mut QuestionRow, policy: &EscalationPolicyRow) {
    // At the precision the databases keep, so the step's condition finds the time it was given.
    let after = |seconds: Option<i64>| seconds.map(|s| (row.created_at + Duration::seconds(s)).trunc_subsecs(6));
    let escalation = Escalation {
        remind_at: after(policy.remind_after_seconds),
        reminded_at: None,
        escalate_at: after(policy.escalate_after_seconds),
        escalate_to: policy.escalate_to.as_ref().map(|to| to.0.clone()),
        escalated_at: None,
    };
    row.next_escalation_at = escalation.next_step().map(|(_, at)| at);
    row.escalation = Some(Json(escalation));
}

/// A recorded question: the stored one (the first one, for a repeated idempotency key) and, when this call created
/// it, its JSON as its event carries it.
pub struct Asked {
    pub question: QuestionRow,
    pub json: Option<Box<serde_json::value::RawValue>>,
}

impl Asking<'_> {
    /// A new question from `input` in `workspace_id`, asked by `created_by`: its fields checked, its timeout
    /// within the bounds, its assignee someone who may answer it.
    pub async fn prepare(
        &self,
        input: NewQuestion,
        workspace_id: Uuid,
        created_by: Option<Uuid>,
    ) -> Result<QuestionRow, AppError> {
        let round_robin = input
            .assignee
            .as_ref()
            .filter(|requested| requested.strategy == Some(app::types::AssignStrategy::RoundRobin))
            .and_then(|requested| requested.role);
        let mut row = build_question(input, workspace_id, created_by, self.bounds, crate::store::now())?;
        if let Some(url) = &row.callback_url
            && let Err(problem) = self.callbacks.check(url).await
        {
            return Err(AppError::invalid_field("callback_url", problem));
        }
        check_assignee(self.store, &row).await?;
        if let Some(role) = round_robin {
            row.assignee = Some(Json(Assignee::User(take_turn(self.store, &row, role).await?)));
        }
        plan_escalation(self.store, &mut row).await?;
        Ok(row)
    }

    /// Stores a prepared question with its `question_asked` event (in one transaction) and counts it. With an
    /// idempotency key seen before, nothing is stored and the first question is returned.
    pub async fn record(
        &self,
        row: &QuestionRow,
        workspace: &str,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Asked> {
        let members = crate::notifications::members(self.store, row.workspace_id).await?;
        // Assigned to someone away: it goes to who stands in for them, and the audit says so, in the same write.
        let (delegated, audit) = match delegation::delegated(row, &members, row.created_at) {
            Some((delegated, entry)) => (Some(delegated), vec![entry]),
            None => (None, Vec::new()),
        };
        let row = delegated.as_ref().unwrap_or(row);
        // Serialised once: the event's data and a door's answer carry the same text.
        let question = crate::store::event_data(&row.to_question(workspace)?)?;
        let event = NewEvent {
            workspace_id: row.workspace_id,
            event_type: app::types::EventType::QuestionAsked,
            project: row.project.clone(),
            run_id: row.run_id,
            question_id: Some(row.id),
            data: crate::store::question_event_data_around(&question)?,
            created_at: row.created_at,
        };
        // Read only where pushes are sent: a server without them asks without this read.
        let push_subscribers =
            if self.sends_on.push { self.store.push_subscribers(row.workspace_id).await? } else { Vec::new() };
        let with = AskedWith {
            supersedes: self.superseded_by(row, workspace).await?,
            reach: crate::notifications::reach(row, &members, self.sends_on, &push_subscribers)?,
            audit,
            answered_by_grant: None,
        };
        // Remembered before the write, so its answer cannot come before it is.
        if let Some(hub) = self.hub {
            hub.remember_asked(row);
        }
        let created = self.store.create_question(row, &event, idempotency, &with).await;
        let forget = || {
            if let Some(hub) = self.hub {
                hub.forget_asked(row.id);
            }
        };
        match created {
            Ok(created) if created.created => {
                if let (Some(hub), false) = (self.hub, with.reach.deliveries.is_empty()) {
                    hub.deliveries_queued();
                }
                self.metrics.question_created(row.kind.as_str());
                Ok(Asked { question: created.value, json: Some(question) })
            }
            Ok(repeated) => {
                forget();
                Ok(Asked { question: repeated.value, json: None })
            }
            Err(err) => {
                forget();
                Err(err)
            }
        }
    }
}

impl Asking<'_> {
    /// Stores a prepared question as [`Asking::record`] does, unless it asks to approve a tool call a live grant
    /// covers: then it is stored approved by the grant, asked and answered in the write that counts and
    /// audits the grant's use, and reaches no one. A question that needs several approvals, or names who may give
    /// it, is always asked: one person's grant does not stand for them.
    pub async fn record_unless_granted(
        &self,
        row: &QuestionRow,
        workspace: &str,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Asked> {
        let grantable = row.kind == QuestionKind::Approval && row.required_approvals <= 1 && row.eligible.is_none();
        let Some(action) = row.action.as_ref().filter(|_| grantable) else {
            return self.record(row, workspace, idempotency).await;
        };
        // One indexed read when no grant of the tool is live; the run is read only when one is.
        let live = self.store.live_grants(row.workspace_id, &action.tool_name, row.created_at).await?;
        if live.is_empty() {
            return self.record(row, workspace, idempotency).await;
        }
        let run = match (row.run_id, &row.tool_call_id) {
            (Some(run_id), Some(_)) => self.store.run(row.workspace_id, run_id).await?,
            _ => None,
        };
        let call = crate::grants::Call {
            workspace_id: row.workspace_id,
            tool_name: &action.tool_name,
            arguments: &action.arguments,
            run_id: row.run_id,
            agent: crate::grants::agent_of_question(row, run.as_ref()),
        };
        for grant in live.iter().filter(|grant| crate::grants::covers(grant, &call)) {
            match self.record_granted(row, workspace, idempotency, grant, &call).await {
                // Revoked or expired since it was read: the next one may still cover the call.
                Err(crate::store::StoreError::GrantNotLive) => continue,
                recorded => return recorded,
            }
        }
        self.record(row, workspace, idempotency).await
    }

    /// Stores `row` approved by `grant`, which covers its `call`.
    async fn record_granted(
        &self,
        row: &QuestionRow,
        workspace: &str,
        idempotency: Option<&IdempotencyKey>,
        grant: &crate::store::GrantRow,
        call: &crate::grants::Call<'_>,
    ) -> StoreResult<Asked> {
        let (asked, with) = approved_by_grant(row, workspace, grant, call)?;
        let created = self.store.create_question(row, &asked, idempotency, &with).await?;
        let Some(approved) =
            with.answered_by_grant.filter(|_| created.created).map(|granted| granted.transition.resolved)
        else {
            return Ok(Asked { question: created.value, json: None });
        };
        self.metrics.question_created(approved.kind.as_str());
        self.metrics.question_resolved(approved.kind.as_str(), approved.status.as_str(), std::time::Duration::ZERO);
        let json = crate::store::event_data(&approved.to_question(workspace)?)?;
        Ok(Asked { question: approved, json: Some(json) })
    }
}

/// What asking `row` (of workspace `workspace`) writes when `grant`, which covers its `call`, approves it as it is
/// asked: its `question_asked` event, and with it the approval (its `question_answered` event and audit entry) and
/// the grant's use.
pub fn approved_by_grant(
    row: &QuestionRow,
    workspace: &str,
    grant: &crate::store::GrantRow,
    call: &crate::grants::Call<'_>,
) -> StoreResult<(NewEvent, AskedWith)> {
    let approval = QuestionResolution {
        status: QuestionStatus::Answered,
        response: Some(AnswerBody {
            value: Value::Bool(true),
            comment: Some(format!("Covered by a grant from {}, so nobody was asked.", grant.created_by)),
            edited_arguments: None,
        }),
        answered_by: Some(crate::grants::GRANT_DECIDER.to_owned()),
        resolution: Some(Resolution::Policy),
        at: row.created_at,
        actor: crate::store::AuditActor::policy(crate::grants::GRANT_DECIDER, Some(grant.id.to_string())),
    };
    let transition = transition(row, &approval, workspace)?;
    // The asked event carries the question as the write leaves it, answered: no page offers it to anyone.
    let asked = NewEvent {
        workspace_id: row.workspace_id,
        event_type: app::types::EventType::QuestionAsked,
        project: row.project.clone(),
        run_id: row.run_id,
        question_id: Some(row.id),
        data: crate::store::question_event_data(&transition.resolved.to_question(workspace)?)?,
        created_at: row.created_at,
    };
    let used = crate::grants::use_entry(grant, call, serde_json::json!({ "question_id": row.id }), row.created_at);
    let with = AskedWith {
        answered_by_grant: Some(crate::store::AnsweredByGrant { grant_id: grant.id, transition, used }),
        ..AskedWith::default()
    };
    Ok((asked, with))
}

impl Asking<'_> {
    /// Spec §3: a new blocking question on a run cancels that run's older pending blocking ones, as the run's
    /// lifecycle (the audit's actor). A run asks one question at a time (its executor holds the run's lease), so
    /// what is pending when it asks is what the new question supersedes; the store cancels those still pending
    /// when it stores the new one.
    async fn superseded_by(&self, row: &QuestionRow, workspace: &str) -> StoreResult<Vec<QuestionTransition>> {
        let (Some(run_id), QuestionKind::Blocking) = (row.run_id, row.kind) else { return Ok(Vec::new()) };
        let change = QuestionResolution {
            status: QuestionStatus::Cancelled,
            response: Some(AnswerBody {
                value: Value::Null,
                comment: Some("superseded by a newer blocking question of the same run".into()),
                edited_arguments: None,
            }),
            answered_by: None,
            resolution: Some(Resolution::Cancelled),
            at: row.created_at,
            actor: crate::store::AuditActor::policy(crate::audit::RUN_LIFECYCLE, Some(run_id.to_string())),
        };
        let mut superseded = Vec::new();
        for id in self.store.pending_question_ids(row.workspace_id, run_id).await? {
            let Some(old) = self.store.question(row.workspace_id, id).await? else { continue };
            if old.id != row.id && old.kind == QuestionKind::Blocking && old.status == QuestionStatus::Pending {
                superseded.push(transition(&old, &change, workspace)?);
            }
        }
        Ok(superseded)
    }
}

/// How long a resolved question was pending.
pub fn pending_for(row: &QuestionRow) -> std::time::Duration {
    let resolved = row.resolved_at.unwrap_or(row.updated_at);
    (resolved - row.created_at).to_std().unwrap_or_default()
}

/// The 409 for a question that is no longer pending: `details` say its status and, if answered, by whom.
pub fn not_pending(question: &QuestionRow) -> AppError {
    let message = match (&question.answered_by, question.status) {
        (Some(by), QuestionStatus::Answered) => format!("question is already answered by {by}"),
        (_, status) => format!("question is already {}", status.as_str()),
    };
    AppError::Conflict {
        message,
        details: Some(serde_json::json!({
            "status": question.status,
            "answered_by": question.answered_by,
            "resolution": question.resolution,
            "resolved_at": question.resolved_at,
        })),
    }
}

/// Refuses with 403 unless the caller's role may answer this kind of question: approvals need `approver` or
/// `admin`; other questions `responder` and up; `viewer` and `agent` never answer.
pub fn require_answer_right(caller: &Caller, kind: QuestionKind) -> Result<(), AppError> {
    let role = caller.role();
    let allowed = match kind {
        QuestionKind::Approval => matches!(role, Role::Approver | Role::Admin),
        _ => role.may_answer(),
    };
    if allowed {
        Ok(())
    } else {
        Err(AppError::Forbidden(format!(
            "{} may not answer {} questions",
            role.with_article(),
            kind.as_str().replace('_', " ")
        )))
    }
}

/// Refuses with 403 unless the caller may give this answer to this question: the role rules, then the question's
/// assignee, then separation of duties (when on, whoever requested an approval — see [`requester`] — may not
/// approve it themselves; withdrawing it by rejecting stays possible).
pub fn require_right_to_give(
    caller: &Caller,
    question: &Question,
    requester: Option<Uuid>,
    answer: &AnswerBody,
    separation_of_duties: bool,
) -> Result<(), AppError> {
    require_answer_right(caller, question.kind)?;
    require_assignee(caller, question)?;
    quorum::require_eligible(caller, question)?;
    if separation_of_duties
        && question.kind == QuestionKind::Approval
        && requester == Some(caller.principal.id)
        && answer.value == Value::Bool(true)
    {
        return Err(AppError::Forbidden(
            "separation of duties: whoever requested an approval may not approve it themselves".into(),
        ));
    }
    Ok(())
}

/// Who requested the approval `row`, for separation of duties: whoever created it, through whichever door — a token
/// or person asking directly (`POST /questions`, MCP, `holdpoint ask`), or whoever started a run a client executes
/// (its client decides every call it asks about, and names the tool call itself) — except the tool-call approvals
/// of a run the server's own workers execute: its agent, as defined, requests those, not whoever started the run.
/// Reads the run only for a tool-call approval of a run.
pub async fn requester(store: &dyn Store, row: &QuestionRow) -> StoreResult<Option<Uuid>> {
    let (Some(run_id), Some(_)) = (row.run_id, &row.tool_call_id) else { return Ok(row.created_by) };
    let run = store.run(row.workspace_id, run_id).await?;
    Ok(match run {
        Some(run) if run.executor == app::types::RunExecutor::Server => None,
        _ => row.created_by,
    })
}

/// Refuses with 403 a caller the question's assignee does not name.
pub fn require_assignee(caller: &Caller, question: &Question) -> Result<(), AppError> {
    match &question.assignee {
        Some(Assignee::User(username))
            if !(caller.principal.kind == PrincipalKind::User && caller.principal.name == *username) =>
        {
            Err(AppError::Forbidden(format!("this question is assigned to {username}")))
        }
        Some(Assignee::Role(role)) if caller.role().rank() < role.rank() => {
            Err(AppError::Forbidden(format!("this question is assigned to {}s and above", role)))
        }
        _ => Ok(()),
    }
}

/// The member of `role` (exactly) whose round-robin turn it is for `row`: 422 if the role may not answer such a
/// question or has no member.
async fn take_turn(store: &dyn Store, row: &QuestionRow, role: Role) -> Result<String, AppError> {
    let needed = if row.kind == QuestionKind::Approval { Role::Approver } else { Role::Responder };
    if role.rank() < needed.rank() {
        return Err(AppError::invalid_field(
            "assignee.role",
            format!("a {role} may not answer {} questions", row.kind.as_str().replace('_', " ")),
        ));
    }
    store
        .take_assignment_turn(row.workspace_id, role, row.created_at)
        .await?
        .ok_or_else(|| AppError::invalid_field("assignee.role", format!("no member of this workspace is a {role}")))
}

/// Checks a new question's assignee against the workspace: a named person must be a member who may answer
/// questions of its kind, a role must be a human one. Refuses with 422.
pub async fn check_assignee(store: &dyn Store, row: &QuestionRow) -> Result<(), AppError> {
    let Some(assignee) = &row.assignee else {
        return Ok(());
    };
    if store.relays_to_server() {
        return Ok(());
    }
    match assignee_problem(store, row.workspace_id, row.kind, &assignee.0).await? {
        Some((field, message)) => Err(AppError::invalid_field(&format!("assignee.{field}"), message)),
        None => Ok(()),
    }
}

/// What is wrong with `assignee` for a question of `kind` in `workspace_id`, as `(field, message)` with `field` the
/// assignee's own (`role` or `user`); `None` when it may answer such a question.
pub async fn assignee_problem(
    store: &dyn Store,
    workspace_id: Uuid,
    kind: QuestionKind,
    assignee: &Assignee,
) -> StoreResult<Option<(&'static str, String)>> {
    let needed = if kind == QuestionKind::Approval { Role::Approver } else { Role::Responder };
    match assignee {
        Assignee::Role(role) if *role == Role::Agent || *role == Role::Viewer => {
            Ok(Some(("role", format!("must be a role that may answer: responder, approver or admin, not {role}"))))
        }
        Assignee::Role(_) => Ok(None),
        Assignee::User(username) => {
            let member = match store.user_by_username(username).await? {
                Some(user) => store.member(workspace_id, user.id).await?,
                None => None,
            };
            Ok(match member.map(|m| m.role) {
                None => Some(("user", format!("{username:?} is not a member of this workspace"))),
                Some(role) if role.rank() < needed.rank() => {
                    Some(("user", format!("{username} is a {role}, who may not answer this question")))
                }
                Some(_) => None,
            })
        }
    }
}

/// What answering a question needs: where it is kept, the counters, this instance's cache of pending questions and
/// whether separation of duties is on.
pub struct Answering<'a> {
    pub store: &'a dyn Store,
    pub metrics: &'a Metrics,
    pub hub: &'a EventHub,
    pub separation_of_duties: bool,
}

/// Answers a pending question: checks the caller's right and the answer's shape, then makes the one transition.
/// Returns the answered question; 404 outside the caller's workspace, 409 if someone was first, 422 if the answer
/// does not fit (and then nothing is stored).
pub async fn answer_question(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    answer: AnswerBody,
    now: DateTime<Utc>,
) -> Result<Question, AppError> {
    answer_through(answering, caller, id, answer, now, None).await
}

/// [`answer_question`], for an answer given through a channel outside Holdpoint's pages (an action link in an
/// email or a push, a Slack button): the audit entry names the channel.
pub async fn answer_through(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    answer: AnswerBody,
    now: DateTime<Utc>,
    channel: Option<app::types::Channel>,
) -> Result<Question, AppError> {
    answer_granting(answering, caller, id, answer, None, now, channel).await
}

/// [`answer_through`], making `grant` with the approval of a tool call: the grant is checked before the
/// answer is written (a fault in it changes nothing) and stored once the answer is.
pub async fn answer_granting(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    answer: AnswerBody,
    grant: Option<&app::types::GrantRequest>,
    now: DateTime<Utc>,
    channel: Option<app::types::Channel>,
) -> Result<Question, AppError> {
    let (store, metrics) = (answering.store, answering.metrics);
    // A question remembered as pending may have just been answered: the resolving write finds out (409).
    let row = match answering.hub.asked_and_pending(caller.workspace_id(), id) {
        Some(row) => QuestionRow::clone(&row),
        None => store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?,
    };
    // Before any other refusal: what the caller may not see is missing, not forbidden.
    if !caller.visibility().sees(row.created_by) {
        return Err(AppError::NotFound("question"));
    }
    let question = row.to_question(&caller.principal.workspace)?;
    // Only a question the caller created can be the caller's request: for any other, nothing need be read.
    let requester = match row.created_by {
        Some(creator) if creator == caller.principal.id => requester(store, &row).await?,
        other => other,
    };
    require_right_to_give(caller, &question, requester, &answer, answering.separation_of_duties)?;
    if question.status != QuestionStatus::Pending {
        return Err(not_pending(&row));
    }
    claims::require_claim(caller, &row, now)?;
    let mut errors = FieldErrors::default();
    check_answer(&AnswerShape::from(&question), &answer, "answer", &mut errors);
    errors.into_result("the answer")?;
    let grant = match grant {
        Some(request) => Some(grant_with(store, caller, &question, &row, &answer, request, now).await?),
        None => None,
    };
    if row.required_approvals > 1 && answer.value == Value::Bool(true) {
        return quorum::approve(answering, caller, row, answer, channel).await;
    }
    let change = QuestionResolution {
        status: QuestionStatus::Answered,
        response: Some(answer),
        answered_by: Some(caller.principal.name.clone()),
        resolution: Some(Resolution::Human),
        at: now,
        actor: caller.into(),
    };
    let answered = resolve_as_caller(store, metrics, caller, &row, &change, channel).await?;
    if let Some(grant) = grant {
        crate::grants::record(store, caller, &grant).await?;
    }
    Ok(answered)
}

/// The grant an approval makes, checked against its question: only the approval of a tool call by one person
/// (a quorum's grant would let later calls through on one approval).
async fn grant_with(
    store: &dyn Store,
    caller: &Caller,
    question: &Question,
    row: &QuestionRow,
    answer: &AnswerBody,
    request: &app::types::GrantRequest,
    now: DateTime<Utc>,
) -> Result<crate::store::GrantRow, AppError> {
    if answer.value != Value::Bool(true) {
        return Err(AppError::invalid_field("grant", "only an approval makes a grant"));
    }
    if row.required_approvals > 1 {
        return Err(AppError::invalid_field("grant", "a question that needs several approvals cannot make a grant"));
    }
    let run = match (row.run_id, &row.tool_call_id) {
        (Some(run_id), Some(_)) => store.run(row.workspace_id, run_id).await?,
        _ => None,
    };
    let agent = crate::grants::agent_of_question(row, run.as_ref());
    let arguments = match (&answer.edited_arguments, &question.action) {
        (Some(edited), _) => edited.clone(),
        (None, Some(action)) => action.arguments.clone(),
        (None, None) => Value::Null,
    };
    crate::grants::grant_from_answer(caller, question, agent, &arguments, request, now)
}

/// Makes a caller's transition out of `pending` of the question the caller read as `row`: the question as it is
/// now, or 409 if someone was first.
async fn resolve_as_caller(
    store: &dyn Store,
    metrics: &Metrics,
    caller: &Caller,
    row: &QuestionRow,
    change: &QuestionResolution,
    channel: Option<app::types::Channel>,
) -> Result<Question, AppError> {
    let outcome = match channel {
        None => resolve(store, row, change, &caller.principal.workspace).await?,
        Some(channel) => {
            let mut through = transition(row, change, &caller.principal.workspace)?;
            if let Some(after) = through.audit.after.as_mut() {
                after["channel"] = serde_json::json!(channel);
            }
            store.resolve_question(through).await?
        }
    };
    match outcome {
        ResolveOutcome::Resolved(row) => {
            metrics.question_resolved(row.kind.as_str(), row.status.as_str(), pending_for(&row));
            Ok(row.to_question(&caller.principal.workspace)?)
        }
        ResolveOutcome::NotPending(row) => Err(not_pending(&row)),
        ResolveOutcome::NotFound => Err(AppError::NotFound("question")),
    }
}

/// Makes the transition of `row` (a question of workspace `workspace`, as just read) out of `pending` by `change`:
/// the row as it leaves, its event and its audit entry, decided here and written together by the store if the
/// question is still pending. A pending question changes only by leaving `pending`, so what `row` shows is what
/// the store would find.
pub async fn resolve(
    store: &dyn Store,
    row: &QuestionRow,
    change: &QuestionResolution,
    workspace: &str,
) -> StoreResult<ResolveOutcome> {
    if row.status != QuestionStatus::Pending {
        return Ok(ResolveOutcome::NotPending(row.clone()));
    }
    store.resolve_question(transition(row, change, workspace)?).await
}

/// The transition of `row` (pending, of workspace `workspace`) out of `pending` by `change`.
pub fn transition(row: &QuestionRow, change: &QuestionResolution, workspace: &str) -> StoreResult<QuestionTransition> {
    let resolved = row.resolved_with(change);
    let event = change.event(&resolved, workspace)?;
    let audit = crate::audit::question_resolved(&resolved, &change.actor);
    Ok(QuestionTransition { resolved, event, audit })
}

/// Refuses a search text longer than [`SEARCH_MAX_CHARS`].
pub fn check_search_text(text: &str) -> Result<(), AppError> {
    if text.chars().count() > SEARCH_MAX_CHARS {
        return Err(AppError::BadRequest(format!("q must have at most {SEARCH_MAX_CHARS} characters")));
    }
    Ok(())
}

/// Cancels a pending question; the reason, if any, is kept as the response's comment.
pub async fn cancel_question(
    store: &dyn Store,
    metrics: &Metrics,
    caller: &Caller,
    id: Uuid,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<Question, AppError> {
    if !caller.role().may_ask() {
        return Err(AppError::Forbidden(format!("{} may not cancel questions", caller.role().with_article())));
    }
    let row = store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?;
    if !caller.visibility().sees(row.created_by) {
        return Err(AppError::NotFound("question"));
    }
    // Whoever asked may withdraw the question; anyone else ends it for the asker, as an answer would, and needs the
    // right to answer it (a responder cannot turn down an approval by cancelling it).
    if row.created_by != Some(caller.principal.id) {
        require_answer_right(caller, row.kind)?;
    }
    if reason.as_ref().is_some_and(|r| r.chars().count() > COMMENT_MAX_CHARS) {
        return Err(AppError::invalid_field("reason", format!("must have at most {COMMENT_MAX_CHARS} characters")));
    }
    let change = QuestionResolution {
        status: QuestionStatus::Cancelled,
        response: reason.map(|r| AnswerBody { value: Value::Null, comment: Some(r), edited_arguments: None }),
        answered_by: Some(caller.principal.name.clone()),
        resolution: Some(Resolution::Cancelled),
        at: now,
        actor: caller.into(),
    };
    resolve_as_caller(store, metrics, caller, &row, &change, None).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::types::{ApprovalAction, Urgency};
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

    #[test]
    fn form_answers_need_required_fields_of_the_right_type() {
        let fields = vec![
            FormField {
                key: "env".into(),
                label: "Env".into(),
                response_type: ResponseType::Choice,
                options: vec![option("dev"), option("prod")],
                required: true,
            },
            FormField {
                key: "replicas".into(),
                label: "Replicas".into(),
                response_type: ResponseType::Number,
                options: vec![],
                required: false,
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
                },
                FormField {
                    key: "ok".into(),
                    label: "Ok".into(),
                    response_type: ResponseType::Boolean,
                    options: vec![],
                    required: false,
                },
                FormField {
                    key: "note".into(),
                    label: "Note".into(),
                    response_type: ResponseType::Text,
                    options: vec![],
                    required: false,
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
