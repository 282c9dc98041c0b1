//! The modal that answers a question: an input of Block Kit's own for each value, and the submitted state read
//! back into an answer.

use super::*;

/// How the modal asks for a question's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ModalKind {
    /// A menu of the quick answers (approval, yes or no, a choice), with a comment.
    Quick,
    /// One input of the question's own type (text, a number, a date, several choices, ...).
    Single,
    /// One input per form field; a file or table field (optional ones only) is left to Holdpoint.
    Form,
}

/// How `question` is answered in the modal, or `None` when it is answered in Holdpoint only: a file or a table (the
/// question itself, or a required field of its form), or a question no longer pending.
pub(super) fn modal_kind(question: &Question) -> Option<ModalKind> {
    if question.status != QuestionStatus::Pending {
        return None;
    }
    if !slack_quick_answers(question).is_empty() {
        return Some(ModalKind::Quick);
    }
    match question.response_type {
        ResponseType::Form => {
            let answerable = question.fields.iter().any(|f| !only_in_holdpoint(f.response_type));
            (answerable && !needs_holdpoint(question)).then_some(ModalKind::Form)
        }
        ResponseType::Approval | ResponseType::Boolean | ResponseType::Table | ResponseType::File => None,
        _ => Some(ModalKind::Single),
    }
}

/// Whether a question can be answered in the modal.
pub(super) fn has_modal(question: &Question) -> bool {
    modal_kind(question).is_some()
}

/// The `block_id` of a form field's input in the modal: its index, as a field's key may be long.
pub(super) fn field_block(index: usize) -> String {
    format!("field:{index}")
}

/// The single answer's input, and the comment's.
pub(super) const ANSWER_BLOCK: &str = "answer";
pub(super) const COMMENT_BLOCK: &str = "comment";

/// What an input is built from: a form field's, or a single-value question's, type, options and bounds.
pub(super) struct InputDef<'a> {
    response_type: ResponseType,
    options: &'a [QuestionOption],
    rules: &'a FieldRules,
    placeholder: Option<&'a str>,
    default: Option<&'a Value>,
    /// A text question's answer box is a paragraph; a form's text field one line.
    multiline: bool,
}

pub(super) fn option_object(label: &str, value: String) -> Value {
    json!({"text": plain_text(label, limits::OPTION_TEXT), "value": value})
}

/// The menu's options of a definition, each valued by what [`value_of`] reads back: the option's index for choices
/// and error recovery, the number of stars for a rating, `true`/`false` for yes or no.
pub(super) fn options_of(def: &InputDef<'_>) -> Vec<Value> {
    match def.response_type {
        ResponseType::Choice | ResponseType::MultiChoice => {
            def.options.iter().enumerate().map(|(i, o)| option_object(&o.label, i.to_string())).collect()
        }
        ResponseType::ErrorRecovery => recovery_choices(def.options)
            .iter()
            .enumerate()
            .map(|(i, (_, label))| option_object(label, i.to_string()))
            .collect(),
        ResponseType::Rating => (1..=def.rules.rating_max())
            .map(|n| option_object(&format!("{} {n}", "★".repeat(n as usize)), n.to_string()))
            .collect(),
        ResponseType::Boolean => vec![option_object("Yes", "true".into()), option_object("No", "false".into())],
        _ => Vec::new(),
    }
}

/// The choices of an error recovery question: retry, skip and abort, then its own options, as `(value, label)`.
pub(super) fn recovery_choices(options: &[QuestionOption]) -> Vec<(String, String)> {
    let mut choices: Vec<(String, String)> =
        RECOVERY_ACTIONS.iter().map(|(value, label, _)| ((*value).to_owned(), (*label).to_owned())).collect();
    choices.extend(options.iter().map(|o| (o.value.clone(), o.label.clone())));
    choices
}

/// The options of `options` whose values read back as `default`.
pub(super) fn default_options(def: &InputDef<'_>, options: &[Value]) -> Vec<Value> {
    let Some(default) = def.default else { return Vec::new() };
    let wanted: Vec<String> = match (def.response_type, default) {
        (ResponseType::Choice, Value::String(chosen)) => {
            def.options.iter().position(|o| &o.value == chosen).map(|i| i.to_string()).into_iter().collect()
        }
        (ResponseType::MultiChoice, Value::Array(chosen)) => chosen
            .iter()
            .filter_map(|c| def.options.iter().position(|o| Some(o.value.as_str()) == c.as_str()))
            .map(|i| i.to_string())
            .collect(),
        (ResponseType::Rating, Value::Number(n)) => vec![n.to_string()],
        (ResponseType::Boolean, Value::Bool(b)) => vec![b.to_string()],
        _ => Vec::new(),
    };
    options.iter().filter(|o| o["value"].as_str().is_some_and(|v| wanted.iter().any(|w| w == v))).cloned().collect()
}

/// The Block Kit element that takes a value of `def`'s type, with its bounds and default; `None` for a file or a
/// table, which only Holdpoint's pages take.
pub(super) fn input_element(def: &InputDef<'_>) -> Option<Value> {
    let default_text = def.default.and_then(Value::as_str);
    let mut element = match def.response_type {
        ResponseType::Text | ResponseType::Markdown => {
            let multiline = def.multiline || def.response_type == ResponseType::Markdown;
            let mut element = json!({"type": "plain_text_input", "multiline": multiline,
                                     "max_length": limits::INPUT_MAX_LENGTH});
            if let Some(text) = default_text {
                element["initial_value"] = json!(truncate_chars(text, limits::INPUT_MAX_LENGTH));
            }
            element
        }
        ResponseType::Email | ResponseType::Url => {
            let kind = if def.response_type == ResponseType::Email { "email_text_input" } else { "url_text_input" };
            let mut element = json!({"type": kind});
            if let Some(text) = default_text {
                element["initial_value"] = json!(text);
            }
            element
        }
        ResponseType::Number | ResponseType::Integer => {
            let mut element =
                json!({"type": "number_input", "is_decimal_allowed": def.response_type == ResponseType::Number});
            if let Some(min) = &def.rules.min {
                element["min_value"] = json!(min.to_string());
            }
            if let Some(max) = &def.rules.max {
                element["max_value"] = json!(max.to_string());
            }
            if let Some(Value::Number(n)) = def.default {
                element["initial_value"] = json!(n.to_string());
            }
            element
        }
        ResponseType::Date => {
            let mut element = json!({"type": "datepicker"});
            if let Some(date) = default_text {
                element["initial_date"] = json!(date);
            }
            element
        }
        ResponseType::Time => {
            let mut element = json!({"type": "timepicker"});
            if let Some(time) = default_text {
                element["initial_time"] = json!(time);
            }
            element
        }
        ResponseType::Datetime => {
            let mut element = json!({"type": "datetimepicker"});
            if let Some(at) = default_text.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) {
                element["initial_date_time"] = json!(at.timestamp());
            }
            element
        }
        ResponseType::Choice | ResponseType::Rating | ResponseType::ErrorRecovery => {
            let options = options_of(def);
            let mut element = json!({"type": "static_select", "options": options});
            if let Some(chosen) = default_options(def, &options).into_iter().next() {
                element["initial_option"] = chosen;
            }
            element
        }
        ResponseType::MultiChoice => {
            let options = options_of(def);
            let mut element = json!({"type": "multi_static_select", "options": options});
            if let Some(max) = def.rules.max_items.filter(|max| *max >= 1) {
                element["max_selected_items"] = json!(max);
            }
            let chosen = default_options(def, &options);
            if !chosen.is_empty() {
                element["initial_options"] = Value::Array(chosen);
            }
            element
        }
        ResponseType::Boolean => {
            let options = options_of(def);
            let mut element = json!({"type": "radio_buttons", "options": options});
            if let Some(chosen) = default_options(def, &options).into_iter().next() {
                element["initial_option"] = chosen;
            }
            element
        }
        ResponseType::Table | ResponseType::File | ResponseType::Approval | ResponseType::Form => return None,
    };
    element["action_id"] = json!("value");
    let takes_placeholder = !matches!(def.response_type, ResponseType::Boolean | ResponseType::Datetime);
    if let Some(placeholder) = def.placeholder.filter(|p| takes_placeholder && !p.trim().is_empty()) {
        element["placeholder"] = plain_text(placeholder, limits::PLACEHOLDER);
    }
    Some(element)
}

/// The grey line under an input: the field's description, and a number's step, which no element enforces.
pub(super) fn hint_of(description: Option<&str>, def: &InputDef<'_>) -> Option<String> {
    let mut parts: Vec<String> =
        description.filter(|d| !d.trim().is_empty()).map(|d| d.trim().to_owned()).into_iter().collect();
    if let (ResponseType::Number | ResponseType::Integer, Some(step)) = (def.response_type, &def.rules.step) {
        parts.push(format!("In steps of {step}."));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

pub(super) fn input_block(block_id: &str, label: &str, element: Value, optional: bool, hint: Option<String>) -> Value {
    let mut block = json!({"type": "input", "block_id": block_id, "label": plain_text(label, limits::INPUT_LABEL),
                           "element": element, "optional": optional});
    if let Some(hint) = hint {
        block["hint"] = plain_text(&hint, limits::INPUT_LABEL);
    }
    block
}

pub(super) fn field_def(field: &FormField) -> InputDef<'_> {
    InputDef {
        response_type: field.response_type,
        options: &field.options,
        rules: &field.rules,
        placeholder: field.placeholder.as_deref(),
        default: field.default.as_ref(),
        multiline: false,
    }
}

pub(super) fn question_def(question: &Question) -> InputDef<'_> {
    InputDef {
        response_type: question.response_type,
        options: &question.options,
        rules: &question.rules,
        placeholder: None,
        default: None,
        multiline: true,
    }
}

/// A modal that only says why a question cannot be answered here (a click on "Answer…" always opens something).
pub fn notice_modal(title: &str, text: &str) -> Value {
    json!({
        "type": "modal",
        "title": plain_text(title, limits::MODAL_TITLE),
        "close": plain_text("Close", limits::MODAL_TITLE),
        "blocks": [section(&escape_mrkdwn(text))],
    })
}

/// The modal a person answers in, whose `private_metadata` names the question: the question's title, then a menu
/// of the quick answers (approval, yes or no, a choice), or an input of the question's own type (a text box, a
/// number input with its bounds, a date, time or date-and-time picker, an email or URL input, a menu of stars,
/// several choices), or one input per form field, each labelled, with its description as a hint, its default filled
/// in and optional unless required; and an optional comment. A form's optional file and table fields are listed with
/// a link to answer in Holdpoint (`open_url`) instead; a question Slack cannot take at all gets a modal that says
/// so, with that link.
pub fn answer_modal(question: &Question, open_url: &str) -> Value {
    let Some(kind) = modal_kind(question) else {
        let why = if question.status == QuestionStatus::Pending {
            "This question asks for a file or a table, which Slack cannot take"
        } else {
            "This question is no longer open"
        };
        let mut modal = notice_modal("Holdpoint", why);
        modal["blocks"] = json!([section(&format!("{why}: <{open_url}|Answer in Holdpoint>"))]);
        return modal;
    };
    let mut blocks = vec![section(&format!("*{}*", escape_mrkdwn(&question.title)))];
    match kind {
        ModalKind::Quick => {
            let options: Vec<Value> = slack_quick_answers(question)
                .iter()
                .enumerate()
                .map(|(i, answer)| option_object(&answer.label, i.to_string()))
                .collect();
            let element = json!({"type": "static_select", "action_id": "value", "options": options});
            blocks.push(input_block(ANSWER_BLOCK, "Your answer", element, false, None));
        }
        ModalKind::Single => {
            let def = question_def(question);
            if let Some(element) = input_element(&def) {
                blocks.push(input_block(ANSWER_BLOCK, "Your answer", element, false, hint_of(None, &def)));
            }
        }
        ModalKind::Form => {
            let mut elsewhere = Vec::new();
            for (i, field) in question.fields.iter().enumerate() {
                let def = field_def(field);
                match input_element(&def) {
                    Some(element) => blocks.push(input_block(
                        &field_block(i),
                        &field.label,
                        element,
                        !field.required,
                        hint_of(field.description.as_deref(), &def),
                    )),
                    None => elsewhere.push(format!(
                        "*{}* ({})",
                        escape_mrkdwn(&field.label),
                        escape_mrkdwn(&kind_text(field.response_type, &field.options, &field.rules))
                    )),
                }
            }
            if !elsewhere.is_empty() {
                blocks.push(section(&format!(
                    "{} can only be given in Holdpoint: Send answers without it; to give it, \
                     <{open_url}|answer in Holdpoint> instead.",
                    elsewhere.join(", ")
                )));
            }
        }
    }
    blocks.push(input_block(
        COMMENT_BLOCK,
        "Comment",
        json!({"type": "plain_text_input", "action_id": "value", "multiline": true,
               "max_length": limits::INPUT_MAX_LENGTH}),
        true,
        None,
    ));
    json!({
        "type": "modal",
        "callback_id": MODAL_CALLBACK,
        "private_metadata": json!({"q": question.id}).to_string(),
        "title": plain_text("Answer", limits::MODAL_TITLE),
        "submit": plain_text("Send", limits::MODAL_TITLE),
        "close": plain_text("Cancel", limits::MODAL_TITLE),
        "blocks": blocks,
    })
}

/// What one input of the modal held, as Slack reports it in the view's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModalInput {
    /// A text, email, URL or number input's `value` (a number input's too: Slack sends its text).
    Text(String),
    /// A date picker's `selected_date`, `YYYY-MM-DD`.
    Date(String),
    /// A time picker's `selected_time`, `HH:mm`.
    Time(String),
    /// A date-and-time picker's `selected_date_time`: Unix seconds.
    DateTime(i64),
    /// A menu's or radio group's `selected_option`'s value.
    Chosen(String),
    /// A multi-select menu's `selected_options`' values.
    ChosenMany(Vec<String>),
    /// Left empty.
    Empty,
}

/// What the modal held: its inputs by `block_id`, and the comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModalAnswer {
    pub inputs: std::collections::BTreeMap<String, ModalInput>,
    pub comment: Option<String>,
}

/// `secs` as RFC 3339 in UTC: a date-and-time picker's answer as a `datetime` takes it.
pub(super) fn rfc3339(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// The option of `index` (a menu option's value) among `count`.
pub(super) fn index_of(chosen: &str, count: usize) -> Result<usize, InteractionError> {
    chosen.parse::<usize>().ok().filter(|i| *i < count).ok_or(InteractionError::Invalid("a menu option of another app"))
}

/// A number input's text as a JSON number; text that is none is sent as it is, and the server names it.
pub(super) fn number_of(text: &str) -> Value {
    let text = text.trim();
    text.parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number))
        .unwrap_or_else(|| Value::String(text.to_owned()))
}

/// The value an input held, as a value of `def`'s type; `None` when it was left empty.
pub(super) fn value_of(def: &InputDef<'_>, input: &ModalInput) -> Result<Option<Value>, InteractionError> {
    let value = match (def.response_type, input) {
        (_, ModalInput::Empty) => return Ok(None),
        (ResponseType::Number | ResponseType::Integer, ModalInput::Text(text)) => number_of(text),
        (_, ModalInput::Text(text)) => Value::String(text.clone()),
        (_, ModalInput::Date(date)) => Value::String(date.clone()),
        (_, ModalInput::Time(time)) => Value::String(time.clone()),
        (_, ModalInput::DateTime(secs)) => {
            Value::String(rfc3339(*secs).ok_or(InteractionError::Invalid("a date and time out of range"))?)
        }
        (ResponseType::Choice, ModalInput::Chosen(chosen)) => {
            Value::String(def.options[index_of(chosen, def.options.len())?].value.clone())
        }
        (ResponseType::ErrorRecovery, ModalInput::Chosen(chosen)) => {
            let choices = recovery_choices(def.options);
            Value::String(choices[index_of(chosen, choices.len())?].0.clone())
        }
        (ResponseType::Rating, ModalInput::Chosen(stars)) => number_of(stars),
        (ResponseType::Boolean, ModalInput::Chosen(yes)) => Value::Bool(yes == "true"),
        (ResponseType::MultiChoice, ModalInput::ChosenMany(chosen)) => {
            let values: Result<Vec<Value>, _> = chosen
                .iter()
                .map(|c| index_of(c, def.options.len()).map(|i| Value::String(def.options[i].value.clone())))
                .collect();
            Value::Array(values?)
        }
        _ => return Err(InteractionError::Invalid("an input of another kind than Holdpoint made")),
    };
    Ok(Some(value))
}

impl ModalAnswer {
    /// The answer body for `question` (the one the modal was opened for), read back through the same layout the
    /// modal was built with: the menu's index among the quick answers, the question's own input, or each form
    /// field's input (those left empty are left out, and the server says which were required).
    pub fn answer_for(&self, question: &Question) -> Result<AnswerBody, InteractionError> {
        let kind = modal_kind(question).ok_or(InteractionError::Invalid("a question Slack cannot answer"))?;
        let input = |block: &str| self.inputs.get(block).unwrap_or(&ModalInput::Empty);
        let value = match kind {
            ModalKind::Quick => {
                let ModalInput::Chosen(chosen) = input(ANSWER_BLOCK) else {
                    return Err(InteractionError::Invalid("a modal submitted without an answer"));
                };
                let answers = slack_quick_answers(question);
                let index = index_of(chosen, answers.len())
                    .map_err(|_| InteractionError::Invalid("the chosen answer is not offered"))?;
                answers[index].value.clone()
            }
            ModalKind::Single => value_of(&question_def(question), input(ANSWER_BLOCK))?.unwrap_or(Value::Null),
            ModalKind::Form => {
                let mut object = serde_json::Map::new();
                for (i, field) in question.fields.iter().enumerate() {
                    if let Some(value) = value_of(&field_def(field), input(&field_block(i)))? {
                        object.insert(field.key.clone(), value);
                    }
                }
                Value::Object(object)
            }
        };
        Ok(AnswerBody { value, comment: self.comment.clone(), edited_arguments: None })
    }

    /// The input block a refusal that names no input is shown under: the answer's, else the first field's, else
    /// the comment's.
    fn first_block(&self) -> String {
        let first_field = self
            .inputs
            .keys()
            .filter_map(|block| block.strip_prefix("field:").and_then(|i| i.parse::<usize>().ok()))
            .min()
            .map(field_block);
        match (self.inputs.contains_key(ANSWER_BLOCK), first_field) {
            (true, _) => ANSWER_BLOCK.to_owned(),
            (false, Some(field)) => field,
            (false, None) => COMMENT_BLOCK.to_owned(),
        }
    }

    /// The reply that keeps the modal open and shows why it answered nothing (`response_action: errors`, keyed by
    /// block): each of the server's field errors (`value`, `value.<key>`, `value.<key>[row].<column>`, `comment`)
    /// under the input it is about, and the rest, or `message` when there is no field error, under the first input.
    pub fn errors(&self, question: Option<&Question>, fields: &[(String, String)], message: &str) -> Value {
        let first = self.first_block();
        let block_of = |path: &str| -> String {
            if path == "comment" {
                return COMMENT_BLOCK.to_owned();
            }
            if path == "value" && self.inputs.contains_key(ANSWER_BLOCK) {
                return ANSWER_BLOCK.to_owned();
            }
            let key = path.strip_prefix("value.").map(|rest| rest.split(['.', '[']).next().unwrap_or(rest));
            let index = key.and_then(|key| question?.fields.iter().position(|f| f.key == key));
            match index.map(field_block) {
                Some(block) if self.inputs.contains_key(&block) => block,
                _ => first.clone(),
            }
        };
        let mut errors: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
        for (path, problem) in fields {
            let block = block_of(path);
            // Under an input of its own, the problem speaks for itself; elsewhere it says what it is about.
            let own = block != first || path == "value" || path == "comment" || {
                let key = path.strip_prefix("value.").map(|rest| rest.split(['.', '[']).next().unwrap_or(rest));
                key.and_then(|key| question?.fields.iter().position(|f| f.key == key)).map(field_block)
                    == Some(first.clone())
            };
            let text = if own { problem.clone() } else { format!("{path}: {problem}") };
            errors.entry(block).and_modify(|e| e.push_str(&format!("; {text}"))).or_insert(text);
        }
        if errors.is_empty() {
            errors.insert(first, message.to_owned());
        }
        for text in errors.values_mut() {
            *text = truncate_chars(text, limits::ERROR_TEXT);
        }
        json!({"response_action": "errors", "errors": errors})
    }
}
