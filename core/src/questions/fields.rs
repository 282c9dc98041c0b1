//! Rich fields (docs/api.md): a field's definition checked when its question is asked — each attribute only on the
//! types it belongs to, bounds that make sense, a table's columns, a default that fits — and a value checked against
//! its field when it is answered. A form field, a single-value question and a table's column are one kind of thing
//! here, each checked under its own path (`fields[2].max`, `max`, `fields[0].columns[1].key`; `value.budget`,
//! `value`, `value.items[3].qty`).

use std::collections::HashSet;

use holdpoint_types::{
    FieldRules, FieldWidget, FormField, QuestionOption, RATING_MAX_RANGE, ResponseType, TABLE_COLUMN_TYPES,
    TABLE_COLUMNS_MAX, TABLE_ROWS_MAX, TableColumn,
};
use serde_json::{Number, Value};

use crate::validation::FieldErrors;

/// The longest text, and the longest Markdown, a value may be.
pub const TEXT_ANSWER_MAX_CHARS: usize = holdpoint_types::MARKDOWN_MAX_CHARS;
/// The longest `description` of a field.
pub const DESCRIPTION_MAX_CHARS: usize = 2_000;
/// The longest `placeholder` of a field.
pub const PLACEHOLDER_MAX_CHARS: usize = 200;
/// The longest email address (RFC 5321's path limit).
const EMAIL_MAX_CHARS: usize = 254;
/// The longest URL a `url` value may be.
const URL_MAX_CHARS: usize = 2_048;
/// The longest key of a field or a column (the answer's object keys, and the paths errors name).
pub const KEY_MAX_CHARS: usize = 100;
/// The longest label of a field, a column or an option: what a person reads beside an input.
pub const LABEL_MAX_CHARS: usize = 200;
const OPTIONS_MIN: usize = 2;
const OPTIONS_MAX: usize = 20;

/// What a value is checked against: a form field's, a single-value question's or a table column's type, options
/// and bounds.
#[derive(Clone, Copy)]
pub struct FieldDef<'a> {
    pub response_type: ResponseType,
    pub options: &'a [QuestionOption],
    pub rules: &'a FieldRules,
}

static NO_RULES: std::sync::LazyLock<FieldRules> = std::sync::LazyLock::new(FieldRules::default);

impl<'a> FieldDef<'a> {
    /// A form field.
    pub fn of_field(field: &'a FormField) -> Self {
        FieldDef { response_type: field.response_type, options: &field.options, rules: &field.rules }
    }

    /// A table's column, which has no bounds of its own.
    pub fn column(column: &'a TableColumn) -> Self {
        FieldDef { response_type: column.response_type, options: &column.options, rules: &NO_RULES }
    }
}

/// `path.name`, or `name` at the top (a single-value question's own attributes).
pub fn at(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

/// Refuses by name what a definition named that is none of its attributes (`unknown`, as the wire types keep it):
/// `fields[2].minimum`, `columns[0].min`.
pub fn refuse_unknown(unknown: &serde_json::Map<String, Value>, path: &str, what: &str, errors: &mut FieldErrors) {
    for name in unknown.keys() {
        errors.add(at(path, name), format!("is not an attribute of {what}"));
    }
}

/// Checks a key and a label: not blank, and not longer than [`KEY_MAX_CHARS`] and [`LABEL_MAX_CHARS`].
pub fn check_key_and_label(key: &str, label: &str, path: &str, errors: &mut FieldErrors) {
    if key.trim().is_empty() {
        errors.add(at(path, "key"), "must not be empty");
    } else if key.chars().count() > KEY_MAX_CHARS {
        errors.add(at(path, "key"), format!("must have at most {KEY_MAX_CHARS} characters"));
    }
    if label.trim().is_empty() {
        errors.add(at(path, "label"), "must not be empty");
    } else if label.chars().count() > LABEL_MAX_CHARS {
        errors.add(at(path, "label"), format!("must have at most {LABEL_MAX_CHARS} characters"));
    }
}

/// Checks a list of options: `min..=20` of them, each with a value and a label, no value twice.
pub fn check_options(options: &[QuestionOption], path: &str, min: usize, errors: &mut FieldErrors) {
    if options.len() < min || options.len() > OPTIONS_MAX {
        errors.add(path, format!("needs {min}..={OPTIONS_MAX} options, got {}", options.len()));
    }
    let mut seen = HashSet::new();
    for (i, option) in options.iter().enumerate() {
        if option.value.trim().is_empty() {
            errors.add(format!("{path}[{i}].value"), "must not be empty");
        } else if option.value.chars().count() > LABEL_MAX_CHARS {
            errors.add(format!("{path}[{i}].value"), format!("must have at most {LABEL_MAX_CHARS} characters"));
        }
        if option.label.trim().is_empty() {
            errors.add(format!("{path}[{i}].label"), "must not be empty");
        } else if option.label.chars().count() > LABEL_MAX_CHARS {
            errors.add(format!("{path}[{i}].label"), format!("must have at most {LABEL_MAX_CHARS} characters"));
        }
        if !seen.insert(option.value.as_str()) {
            errors.add(format!("{path}[{i}].value"), format!("{:?} appears more than once", option.value));
        }
    }
}

/// Checks the options of a field of any type: choices need 2..=20, other types none.
pub fn check_field_options(
    response_type: ResponseType,
    options: &[QuestionOption],
    path: &str,
    errors: &mut FieldErrors,
) {
    match response_type {
        ResponseType::Choice | ResponseType::MultiChoice => {
            check_options(options, &at(path, "options"), OPTIONS_MIN, errors)
        }
        _ if !options.is_empty() => errors.add(at(path, "options"), "only choice and multi_choice fields have options"),
        _ => {}
    }
}

/// A number's value when it is whole (`3` or `3.0`).
fn whole(number: &Number) -> Option<f64> {
    let value = number.as_f64()?;
    (value.is_finite() && value.fract() == 0.0).then_some(value)
}

/// Checks the bounds a definition gives (its options are checked by [`check_field_options`]). `path` is where its
/// attributes are named: `fields[2]`, or empty for a single-value question.
pub fn check_rules(def: &FieldDef<'_>, path: &str, errors: &mut FieldErrors) {
    let (kind, rules) = (def.response_type, def.rules);
    let numeric = matches!(kind, ResponseType::Integer | ResponseType::Number);
    let mut refuse = |name: &str, set: bool, types: &str| {
        if set {
            errors.add(at(path, name), format!("only {types} have {name}, not {kind}"));
        }
    };
    refuse("min", rules.min.is_some() && !numeric, "integer and number fields");
    refuse("step", rules.step.is_some() && !numeric, "integer and number fields");
    refuse("widget", rules.widget.is_some() && !numeric, "integer and number fields");
    refuse("max", rules.max.is_some() && !numeric && kind != ResponseType::Rating, "integer, number and rating fields");
    let multi = kind == ResponseType::MultiChoice;
    refuse("min_items", rules.min_items.is_some() && !multi, "multi_choice fields");
    refuse("max_items", rules.max_items.is_some() && !multi, "multi_choice fields");
    let table = kind == ResponseType::Table;
    refuse("columns", !rules.columns.is_empty() && !table, "table fields");
    refuse("min_rows", rules.min_rows.is_some() && !table, "table fields");
    refuse("max_rows", rules.max_rows.is_some() && !table, "table fields");
    let file = kind == ResponseType::File;
    refuse("accept", !rules.accept.is_empty() && !file, "file fields");
    refuse("max_bytes", rules.max_bytes.is_some() && !file, "file fields");

    if numeric {
        for (name, bound) in [("min", &rules.min), ("max", &rules.max), ("step", &rules.step)] {
            if let Some(bound) = bound
                && kind == ResponseType::Integer
                && whole(bound).is_none()
            {
                errors.add(at(path, name), "must be a whole number for an integer field");
            }
        }
        if let Some(step) = rules.step.as_ref().and_then(Number::as_f64)
            && step <= 0.0
        {
            errors.add(at(path, "step"), "must be greater than 0");
        }
        if let (Some(min), Some(max)) =
            (rules.min.as_ref().and_then(Number::as_f64), rules.max.as_ref().and_then(Number::as_f64))
            && min > max
        {
            errors.add(at(path, "max"), format!("must not be less than min ({min})"));
        }
        if rules.widget == Some(FieldWidget::Slider) && (rules.min.is_none() || rules.max.is_none()) {
            errors.add(at(path, "widget"), "a slider needs both min and max");
        }
    }
    if kind == ResponseType::Rating
        && let Some(max) = &rules.max
        && !whole(max).is_some_and(|max| RATING_MAX_RANGE.contains(&(max as u32)) && max >= 0.0)
    {
        errors.add(
            at(path, "max"),
            format!("a rating has {}..={} stars", RATING_MAX_RANGE.start(), RATING_MAX_RANGE.end()),
        );
    }
    if multi {
        let choices = def.options.len();
        if let (Some(min), Some(max)) = (rules.min_items, rules.max_items)
            && min > max
        {
            errors.add(at(path, "max_items"), format!("must not be less than min_items ({min})"));
        }
        for (name, bound) in [("min_items", rules.min_items), ("max_items", rules.max_items)] {
            if bound.is_some_and(|n| n as usize > choices) {
                errors.add(at(path, name), format!("is more than the {choices} options"));
            }
        }
        if rules.max_items == Some(0) {
            errors.add(at(path, "max_items"), "must be at least 1");
        }
    }
    if table {
        check_columns(&rules.columns, &at(path, "columns"), errors);
        if rules.max_rows.is_some_and(|max| max == 0 || max > TABLE_ROWS_MAX) {
            errors.add(at(path, "max_rows"), format!("must be within 1..={TABLE_ROWS_MAX}"));
        }
        let max_rows = rules.max_rows.unwrap_or(TABLE_ROWS_MAX);
        if rules.min_rows.is_some_and(|min| min > max_rows) {
            errors.add(at(path, "min_rows"), format!("must not be more than max_rows ({max_rows})"));
        }
    }
    if file {
        check_file_rules(rules, path, errors);
    }
}

/// A file's `accept` (media types or `type/*` patterns) and `max_bytes` (at least 1; its upper bound is the
/// server's, checked by [`super::Asking::prepare`]).
fn check_file_rules(rules: &FieldRules, path: &str, errors: &mut FieldErrors) {
    if rules.accept.len() > ACCEPT_MAX {
        errors.add(at(path, "accept"), format!("may name at most {ACCEPT_MAX} media types"));
    }
    for (j, pattern) in rules.accept.iter().enumerate() {
        if !is_media_type_pattern(pattern) {
            let problem = format!("{pattern:?} is not a media type (type/subtype or type/*)");
            errors.add(format!("{}[{j}]", at(path, "accept")), problem);
        }
    }
    if rules.max_bytes == Some(0) {
        errors.add(at(path, "max_bytes"), "must be at least 1");
    }
}

/// The most media types a file's `accept` names.
const ACCEPT_MAX: usize = 50;

/// `type/subtype`, `type/*` or `*/*`, each part a token of RFC 9110, without parameters.
fn is_media_type_pattern(pattern: &str) -> bool {
    let token = |part: &str| {
        !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
    };
    match pattern.split_once('/') {
        Some(("*", "*")) => true,
        Some(("*", _)) => false,
        Some((kind, "*")) => token(kind),
        Some((kind, subtype)) => token(kind) && token(subtype) && !kind.contains('*') && !subtype.contains('*'),
        None => false,
    }
}

fn check_columns(columns: &[TableColumn], path: &str, errors: &mut FieldErrors) {
    if columns.is_empty() || columns.len() > TABLE_COLUMNS_MAX {
        errors.add(path, format!("a table needs 1..={TABLE_COLUMNS_MAX} columns, got {}", columns.len()));
    }
    let mut keys = HashSet::new();
    for (i, column) in columns.iter().enumerate() {
        let column_path = format!("{path}[{i}]");
        refuse_unknown(&column.unknown, &column_path, "a table's column", errors);
        check_key_and_label(&column.key, &column.label, &column_path, errors);
        if !column.key.trim().is_empty() && !keys.insert(column.key.as_str()) {
            errors.add(at(&column_path, "key"), format!("{:?} appears more than once", column.key));
        }
        if !TABLE_COLUMN_TYPES.contains(&column.response_type) {
            errors.add(
                at(&column_path, "response_type"),
                format!("a column is text, number, integer, boolean, date or choice, not {}", column.response_type),
            );
        }
        check_field_options(column.response_type, &column.options, &column_path, errors);
    }
}

/// Checks a value against its field; what does not fit goes to `errors` under `path`.
pub fn check_value(def: &FieldDef<'_>, value: &Value, path: &str, errors: &mut FieldErrors) {
    match def.response_type {
        ResponseType::Text | ResponseType::Markdown => check_text(value, path, errors),
        ResponseType::Boolean | ResponseType::Approval => {
            if !value.is_boolean() {
                errors.add(path, "must be true or false");
            }
        }
        ResponseType::Number => match value {
            Value::Number(number) => check_bounds(number, def.rules, path, errors),
            _ => errors.add(path, "must be a number"),
        },
        ResponseType::Integer => match value.as_number().filter(|number| whole(number).is_some()) {
            Some(number) => check_bounds(number, def.rules, path, errors),
            None => errors.add(path, "must be a whole number"),
        },
        ResponseType::Rating => {
            let max = def.rules.rating_max();
            match value.as_number().and_then(whole) {
                Some(stars) if stars >= 1.0 && stars <= f64::from(max) => {}
                _ => errors.add(path, format!("must be a whole number of stars, 1..={max}")),
            }
        }
        ResponseType::Date => check_string(value, path, errors, "a date, YYYY-MM-DD", |text| {
            has_format(SchemaFormat::Date, text) && chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok()
        }),
        ResponseType::Datetime => {
            check_string(value, path, errors, "a date and time, RFC 3339 with an offset", |text| {
                has_format(SchemaFormat::DateTime, text) && chrono::DateTime::parse_from_rfc3339(text).is_ok()
            })
        }
        ResponseType::Time => check_string(value, path, errors, "a time, HH:MM", |text| {
            // chrono's `%H` also takes one digit after a space (" 9:30"): the shape is checked first.
            let two_digits = |part: &str| part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit());
            text.split_once(':').is_some_and(|(hours, minutes)| two_digits(hours) && two_digits(minutes))
                && chrono::NaiveTime::parse_from_str(text, "%H:%M").is_ok()
        }),
        ResponseType::Email => check_string(value, path, errors, "an email address", |text| {
            is_email(text) && has_format(SchemaFormat::Email, text)
        }),
        ResponseType::Url => check_string(value, path, errors, "an absolute http or https URL", is_web_url),
        ResponseType::Choice => check_choice(value, def.options, path, errors),
        ResponseType::MultiChoice => check_multi_choice(value, def, path, errors),
        ResponseType::ErrorRecovery => match value.as_str() {
            Some(action)
                if holdpoint_types::is_recovery_action(action) || def.options.iter().any(|o| o.value == action) => {}
            _ => errors.add(path, "must be retry, skip, abort or one of the options"),
        },
        ResponseType::Table => check_table(value, def.rules, path, errors),
        ResponseType::Form => errors.add(path, "forms cannot nest"),
        // Its shape only: what it references is checked against the uploads by `answering` (see `files_of`).
        ResponseType::File => {
            if super::answer_shape::file_id_of(value).is_none() {
                errors.add(path, "must be an uploaded file: {\"file_id\": ...} as POST /files returned it");
            }
        }
    }
}

fn check_text(value: &Value, path: &str, errors: &mut FieldErrors) {
    match value.as_str() {
        Some(text) if !text.trim().is_empty() && text.chars().count() <= TEXT_ANSWER_MAX_CHARS => {}
        Some(_) => errors.add(path, format!("must have 1..={TEXT_ANSWER_MAX_CHARS} characters")),
        None => errors.add(path, "must be a string"),
    }
}

fn check_string(value: &Value, path: &str, errors: &mut FieldErrors, what: &str, fits: impl Fn(&str) -> bool) {
    match value.as_str() {
        Some(text) if fits(text) => {}
        _ => errors.add(path, format!("must be {what}")),
    }
}

/// The formats a field shares with a JSON Schema's string (`date`, `date-time`, `email`).
#[derive(Clone, Copy)]
enum SchemaFormat {
    Date,
    DateTime,
    Email,
}

/// Whether `text` is of `format` as the `jsonschema` crate reads it, which checks the answers of questions asked
/// with a response schema: a field and the schema property it came from then take the same values (chrono alone
/// takes a sign before the year, a space for the `T`, and `%d` of one digit).
fn has_format(format: SchemaFormat, text: &str) -> bool {
    fn validator(format: &str) -> jsonschema::Validator {
        jsonschema::options()
            .should_validate_formats(true)
            .build(&serde_json::json!({"type": "string", "format": format}))
            .expect("a schema of one known format builds")
    }
    static DATE: std::sync::LazyLock<jsonschema::Validator> = std::sync::LazyLock::new(|| validator("date"));
    static DATE_TIME: std::sync::LazyLock<jsonschema::Validator> = std::sync::LazyLock::new(|| validator("date-time"));
    static EMAIL: std::sync::LazyLock<jsonschema::Validator> = std::sync::LazyLock::new(|| validator("email"));
    let validator = match format {
        SchemaFormat::Date => &DATE,
        SchemaFormat::DateTime => &DATE_TIME,
        SchemaFormat::Email => &EMAIL,
    };
    validator.is_valid(&Value::String(text.to_owned()))
}

/// A plain address: one `@`, something before it, a dotted domain after it, no spaces.
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else { return false };
    text.chars().count() <= EMAIL_MAX_CHARS
        && !local.is_empty()
        && !domain.contains('@')
        && domain.split('.').count() >= 2
        && domain.split('.').all(|label| !label.is_empty())
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// An absolute `http` or `https` URL with a host: what a person can open (never `javascript:` or `data:`).
fn is_web_url(text: &str) -> bool {
    text.len() <= URL_MAX_CHARS
        && url::Url::parse(text).is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
}

/// How two JSON numbers compare: exactly when both are integers (a float has no room for every integer past 2^53),
/// as floats otherwise.
fn compare(a: &Number, b: &Number) -> Option<std::cmp::Ordering> {
    let exact = |n: &Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (exact(a), exact(b)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn check_bounds(number: &Number, rules: &FieldRules, path: &str, errors: &mut FieldErrors) {
    use std::cmp::Ordering::{Greater, Less};
    if let Some(bound) = &rules.min
        && compare(number, bound) == Some(Less)
    {
        errors.add(path, format!("must be at least {bound}"));
    }
    if let Some(bound) = &rules.max
        && compare(number, bound) == Some(Greater)
    {
        errors.add(path, format!("must be at most {bound}"));
    }
    if let Some(step_number) = &rules.step
        && let Some(step) = step_number.as_f64().filter(|step| *step > 0.0)
    {
        let min = rules.min.as_ref().and_then(Number::as_f64);
        let steps = (number.as_f64().unwrap_or(f64::NAN) - min.unwrap_or(0.0)) / step;
        if (steps - steps.round()).abs() > 1e-9 * steps.abs().max(1.0) {
            let from = rules.min.as_ref().map_or_else(|| "0".to_owned(), Number::to_string);
            errors.add(path, format!("must be {from} plus a whole number of steps of {step_number}"));
        }
    }
}

fn check_choice(value: &Value, options: &[QuestionOption], path: &str, errors: &mut FieldErrors) {
    match value.as_str() {
        Some(choice) if options.iter().any(|o| o.value == choice) => {}
        Some(choice) => errors.add(path, format!("{choice:?} is not one of the options")),
        None => errors.add(path, "must be one option value (a string)"),
    }
}

fn check_multi_choice(value: &Value, def: &FieldDef<'_>, path: &str, errors: &mut FieldErrors) {
    let Some(items) = value.as_array() else {
        return errors.add(path, "must be an array of option values");
    };
    let mut seen = HashSet::new();
    for item in items {
        match item.as_str() {
            Some(choice) if !def.options.iter().any(|o| o.value == choice) => {
                return errors.add(path, format!("{choice:?} is not one of the options"));
            }
            Some(choice) if !seen.insert(choice) => {
                return errors.add(path, format!("{choice:?} is chosen twice"));
            }
            Some(_) => {}
            None => return errors.add(path, "must contain only option values (strings)"),
        }
    }
    let (min, max) = (def.rules.min_items.unwrap_or(0) as usize, def.rules.max_items.map(|n| n as usize));
    if items.len() < min {
        errors.add(path, format!("must choose at least {min}"));
    } else if max.is_some_and(|max| items.len() > max) {
        errors.add(path, format!("must choose at most {}", max.unwrap_or_default()));
    }
}

fn check_table(value: &Value, rules: &FieldRules, path: &str, errors: &mut FieldErrors) {
    let Some(rows) = value.as_array() else {
        return errors.add(path, "must be an array of rows (objects keyed by column)");
    };
    let min = rules.min_rows.unwrap_or(0) as usize;
    let max = rules.max_rows.unwrap_or(TABLE_ROWS_MAX).min(TABLE_ROWS_MAX) as usize;
    if rows.len() < min || rows.len() > max {
        errors.add(path, format!("must have {min}..={max} rows, has {}", rows.len()));
    }
    for (i, row) in rows.iter().enumerate().take(TABLE_ROWS_MAX as usize) {
        let row_path = format!("{path}[{i}]");
        let Some(cells) = row.as_object() else {
            errors.add(row_path, "must be an object keyed by column");
            continue;
        };
        for key in cells.keys() {
            if !rules.columns.iter().any(|c| &c.key == key) {
                errors.add(at(&row_path, key), "is not a column of this table");
            }
        }
        for column in &rules.columns {
            let cell_path = at(&row_path, &column.key);
            match cells.get(&column.key) {
                None | Some(Value::Null) if column.required => errors.add(cell_path, "is required"),
                None | Some(Value::Null) => {}
                Some(cell) => check_value(&FieldDef::column(column), cell, &cell_path, errors),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(value: Value) -> FieldRules {
        serde_json::from_value(value).unwrap()
    }

    fn value_errors(response_type: ResponseType, rules: &FieldRules, value: Value) -> Vec<String> {
        let options = [QuestionOption { value: "a".into(), label: "A".into(), description: None }];
        let mut errors = FieldErrors::default();
        check_value(&FieldDef { response_type, options: &options, rules }, &value, "value", &mut errors);
        errors.fields()
    }

    fn rule_errors(response_type: ResponseType, rules: &FieldRules) -> Vec<String> {
        let mut errors = FieldErrors::default();
        check_rules(&FieldDef { response_type, options: &[], rules }, "fields[2]", &mut errors);
        errors.fields()
    }

    #[test]
    fn dates_times_and_datetimes_take_only_their_own_formats() {
        let none = FieldRules::default();
        assert!(value_errors(ResponseType::Date, &none, json!("2026-02-28")).is_empty());
        for bad in [json!("2026-02-30"), json!("2026-2-3"), json!("28/02/2026"), json!(20260228), json!("+2026-01-1")] {
            assert_eq!(value_errors(ResponseType::Date, &none, bad), ["value"]);
        }
        assert_eq!(
            value_errors(ResponseType::Datetime, &none, json!("2026-03-02 22:00:00+01:00")),
            ["value"],
            "a space for the T"
        );
        assert!(value_errors(ResponseType::Datetime, &none, json!("2026-03-01T09:30:00+01:00")).is_empty());
        assert!(value_errors(ResponseType::Datetime, &none, json!("2026-03-01T09:30:00Z")).is_empty());
        assert_eq!(value_errors(ResponseType::Datetime, &none, json!("2026-03-01T09:30:00")), ["value"], "no offset");
        assert!(value_errors(ResponseType::Time, &none, json!("23:59")).is_empty());
        for bad in ["24:00", "9:30", "09:30:00", " 9:30", "+9:30"] {
            assert_eq!(value_errors(ResponseType::Time, &none, json!(bad)), ["value"], "{bad}");
        }
    }

    #[test]
    fn numbers_keep_to_their_bounds_and_steps() {
        let bounds = rules(json!({"min": 1, "max": 10, "step": 0.5}));
        assert!(value_errors(ResponseType::Number, &bounds, json!(2.5)).is_empty());
        assert_eq!(value_errors(ResponseType::Number, &bounds, json!(2.25)), ["value"]);
        assert_eq!(value_errors(ResponseType::Number, &bounds, json!(0.5)), ["value"]);
        assert_eq!(value_errors(ResponseType::Number, &bounds, json!("3")), ["value"]);
        let tenths = rules(json!({"step": 0.1}));
        assert!(value_errors(ResponseType::Number, &tenths, json!(0.3)).is_empty(), "no float noise");
        let whole = rules(json!({"min": 0, "max": 100, "step": 5}));
        assert!(value_errors(ResponseType::Integer, &whole, json!(35)).is_empty());
        assert!(value_errors(ResponseType::Integer, &whole, json!(35.0)).is_empty());
        assert_eq!(value_errors(ResponseType::Integer, &whole, json!(36)), ["value"]);
        assert_eq!(value_errors(ResponseType::Integer, &whole, json!(3.5)), ["value"]);
        assert_eq!(value_errors(ResponseType::Integer, &whole, json!(105)), ["value"]);
    }

    #[test]
    fn integers_past_two_to_the_53_keep_to_their_bounds_exactly() {
        // As floats, 2^53 + 1 and 2^53 are the same number.
        let at_most = rules(json!({"max": 9_007_199_254_740_992_u64}));
        assert!(value_errors(ResponseType::Integer, &at_most, json!(9_007_199_254_740_992_u64)).is_empty());
        assert_eq!(value_errors(ResponseType::Integer, &at_most, json!(9_007_199_254_740_993_u64)), ["value"]);
        let at_least = rules(json!({"min": -9_007_199_254_740_992_i64}));
        assert_eq!(value_errors(ResponseType::Integer, &at_least, json!(-9_007_199_254_740_993_i64)), ["value"]);
        assert!(value_errors(ResponseType::Integer, &at_least, json!(u64::MAX)).is_empty());
        // A float against an integer bound compares as floats.
        assert_eq!(value_errors(ResponseType::Number, &rules(json!({"max": 10})), json!(10.5)), ["value"]);
        assert!(value_errors(ResponseType::Number, &rules(json!({"min": 10})), json!(10.0)).is_empty());
    }

    #[test]
    fn a_rating_is_a_whole_number_of_stars_up_to_its_max() {
        let three = rules(json!({"max": 3}));
        assert!(value_errors(ResponseType::Rating, &three, json!(3)).is_empty());
        assert_eq!(value_errors(ResponseType::Rating, &three, json!(4)), ["value"]);
        assert_eq!(value_errors(ResponseType::Rating, &three, json!(0)), ["value"]);
        assert!(value_errors(ResponseType::Rating, &FieldRules::default(), json!(5)).is_empty());
        assert_eq!(rule_errors(ResponseType::Rating, &rules(json!({"max": 11}))), ["fields[2].max"]);
        assert_eq!(rule_errors(ResponseType::Rating, &rules(json!({"max": 2}))), ["fields[2].max"]);
        assert_eq!(rule_errors(ResponseType::Rating, &rules(json!({"min": 1}))), ["fields[2].min"]);
    }

    #[test]
    fn emails_and_urls_must_be_what_a_person_can_use() {
        let none = FieldRules::default();
        assert!(value_errors(ResponseType::Email, &none, json!("ops@example.com")).is_empty());
        for bad in
            ["ops", "ops@", "@example.com", "ops@example", "o ps@example.com", "a@b@example.com", "<a@b.co>", "a@-.com"]
        {
            assert_eq!(value_errors(ResponseType::Email, &none, json!(bad)), ["value"], "{bad}");
        }
        assert!(value_errors(ResponseType::Url, &none, json!("https://example.com/runbook#step-2")).is_empty());
        for bad in ["javascript:alert(1)", "example.com", "ftp://example.com/x", "data:text/html,hi"] {
            assert_eq!(value_errors(ResponseType::Url, &none, json!(bad)), ["value"], "{bad}");
        }
    }

    #[test]
    fn markdown_is_text_of_at_most_ten_thousand_characters() {
        let none = FieldRules::default();
        assert!(value_errors(ResponseType::Markdown, &none, json!("# Plan\n\n- one")).is_empty());
        assert_eq!(value_errors(ResponseType::Markdown, &none, json!("x".repeat(10_001))), ["value"]);
    }

    #[test]
    fn a_slider_needs_both_bounds_and_bounds_belong_to_numbers() {
        assert_eq!(
            rule_errors(ResponseType::Number, &rules(json!({"min": 0, "widget": "slider"}))),
            ["fields[2].widget"]
        );
        assert!(rule_errors(ResponseType::Number, &rules(json!({"min": 0, "max": 1, "widget": "slider"}))).is_empty());
        assert_eq!(rule_errors(ResponseType::Number, &rules(json!({"min": 5, "max": 1}))), ["fields[2].max"]);
        assert_eq!(rule_errors(ResponseType::Integer, &rules(json!({"step": 0.5}))), ["fields[2].step"]);
        assert_eq!(rule_errors(ResponseType::Number, &rules(json!({"step": 0}))), ["fields[2].step"]);
        assert_eq!(rule_errors(ResponseType::Text, &rules(json!({"min": 0}))), ["fields[2].min"]);
        assert_eq!(rule_errors(ResponseType::Date, &rules(json!({"min_rows": 1}))), ["fields[2].min_rows"]);
    }

    #[test]
    fn multi_choice_counts_its_choices() {
        let options: Vec<QuestionOption> = ["a", "b", "c"]
            .into_iter()
            .map(|v| QuestionOption { value: v.into(), label: v.into(), description: None })
            .collect();
        let bounds = rules(json!({"min_items": 1, "max_items": 2}));
        let def = FieldDef { response_type: ResponseType::MultiChoice, options: &options, rules: &bounds };
        let errors_for = |value: Value| {
            let mut errors = FieldErrors::default();
            check_value(&def, &value, "value.tags", &mut errors);
            errors.fields()
        };
        assert!(errors_for(json!(["a", "c"])).is_empty());
        assert_eq!(errors_for(json!([])), ["value.tags"]);
        assert_eq!(errors_for(json!(["a", "b", "c"])), ["value.tags"]);
        let mut errors = FieldErrors::default();
        let too_many = rules(json!({"max_items": 4}));
        check_rules(&FieldDef { rules: &too_many, ..def }, "fields[0]", &mut errors);
        assert_eq!(errors.fields(), ["fields[0].max_items"]);
    }

    #[test]
    fn a_table_checks_each_row_and_names_the_cell() {
        let table = rules(json!({
            "columns": [
                {"key": "item", "label": "Item", "response_type": "text", "required": true},
                {"key": "qty", "label": "Qty", "response_type": "integer"},
                {"key": "when", "label": "When", "response_type": "date"},
                {"key": "size", "label": "Size", "response_type": "choice",
                 "options": [{"value": "s", "label": "S"}, {"value": "l", "label": "L"}]}
            ],
            "min_rows": 1, "max_rows": 3
        }));
        assert!(rule_errors(ResponseType::Table, &table).is_empty());
        let check = |value: Value| value_errors(ResponseType::Table, &table, value);
        assert!(
            check(json!([{"item": "disk", "qty": 2, "when": "2026-03-01", "size": "l"}, {"item": "cpu"}])).is_empty()
        );
        assert_eq!(check(json!([])), ["value"], "fewer than min_rows");
        assert_eq!(
            check(json!([{"item": "disk"}, {"qty": 1.5, "size": "m", "extra": 1}])),
            ["value[1].extra", "value[1].item", "value[1].qty", "value[1].size"]
        );
        assert_eq!(check(json!([{"item": "a"}, {"item": "b"}, {"item": "c"}, {"item": "d"}])), ["value"]);
        assert_eq!(check(json!({"item": "a"})), ["value"]);
    }

    #[test]
    fn a_tables_definition_is_checked_column_by_column() {
        let bad = rules(json!({
            "columns": [
                {"key": "a", "label": "A", "response_type": "rating"},
                {"key": "a", "label": "", "response_type": "choice", "options": [{"value": "x", "label": "X"}]}
            ],
            "max_rows": 201
        }));
        assert_eq!(
            rule_errors(ResponseType::Table, &bad),
            [
                "fields[2].columns[0].response_type",
                "fields[2].columns[1].key",
                "fields[2].columns[1].label",
                "fields[2].columns[1].options",
                "fields[2].max_rows"
            ]
        );
        assert_eq!(rule_errors(ResponseType::Table, &FieldRules::default()), ["fields[2].columns"]);
    }
}
