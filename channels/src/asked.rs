//! What a question asks for, in words: each field's label, what kind of value it takes and within which bounds,
//! and a table's columns. Channels that cannot show the answer form itself (an email, a Slack message) show this, so
//! a person knows what they will be asked before they open it.

use holdpoint_types::{FieldRules, FormField, Question, QuestionOption, RECOVERY_ACTIONS, ResponseType, TableColumn};
use serde_json::Number;

/// One thing a question asks for: a form field, or the question's own value.
#[derive(Debug, Clone, PartialEq)]
pub struct AskedItem {
    /// The field's label; `None` for a single-value question's own value.
    pub label: Option<String>,
    /// What kind of value it takes, with its bounds: "a whole number from 1 to 9".
    pub kind: String,
    pub required: bool,
    /// The field's line of help.
    pub description: Option<String>,
    /// A table's columns, each as "Label: kind" (", required" when every row needs it).
    pub columns: Vec<String>,
}

/// The most options named in a summary; a longer list ends with how many more there are.
const OPTIONS_NAMED: usize = 10;

fn options_text(options: &[QuestionOption]) -> String {
    let mut named: Vec<&str> = options.iter().take(OPTIONS_NAMED).map(|o| o.label.as_str()).collect();
    let more = options.len().saturating_sub(OPTIONS_NAMED);
    let more_text = format!("{more} more");
    if more > 0 {
        named.push(&more_text);
    }
    named.join(", ")
}

fn bounds(rules: &FieldRules) -> String {
    let (min, max) = (rules.min.as_ref().map(Number::to_string), rules.max.as_ref().map(Number::to_string));
    let mut text = match (min, max) {
        (Some(min), Some(max)) => format!(" from {min} to {max}"),
        (Some(min), None) => format!(" of at least {min}"),
        (None, Some(max)) => format!(" of at most {max}"),
        (None, None) => String::new(),
    };
    if let Some(step) = &rules.step {
        text.push_str(&format!(", in steps of {step}"));
    }
    text
}

fn count_range(what: &str, min: Option<u32>, max: Option<u32>) -> Option<String> {
    match (min.filter(|n| *n > 0), max) {
        (Some(min), Some(max)) if min == max => Some(format!("exactly {min} {what}")),
        (Some(min), Some(max)) => Some(format!("{min} to {max} {what}")),
        (Some(min), None) => Some(format!("at least {min} {what}")),
        (None, Some(max)) => Some(format!("at most {max} {what}")),
        (None, None) => None,
    }
}

/// What a value of `response_type` (with its options and bounds) is, in words.
pub fn kind_text(response_type: ResponseType, options: &[QuestionOption], rules: &FieldRules) -> String {
    match response_type {
        ResponseType::Text => "text".to_owned(),
        ResponseType::Markdown => "Markdown text, up to 10,000 characters".to_owned(),
        ResponseType::Boolean => "yes or no".to_owned(),
        ResponseType::Approval => "approve or reject".to_owned(),
        ResponseType::Choice => format!("one of: {}", options_text(options)),
        ResponseType::MultiChoice => {
            let mut text = format!("any of: {}", options_text(options));
            if let Some(count) = count_range("choices", rules.min_items, rules.max_items) {
                text.push_str(&format!(" ({count})"));
            }
            text
        }
        ResponseType::ErrorRecovery => {
            let mut actions: Vec<String> = RECOVERY_ACTIONS.iter().map(|(_, label, _)| (*label).to_owned()).collect();
            actions.extend(options.iter().map(|o| o.label.clone()));
            format!("one of: {}", actions.join(", "))
        }
        ResponseType::Number => format!("a number{}", bounds(rules)),
        ResponseType::Integer => format!("a whole number{}", bounds(rules)),
        ResponseType::Rating => format!("a rating of 1 to {} stars", rules.rating_max()),
        ResponseType::Date => "a date (YYYY-MM-DD)".to_owned(),
        ResponseType::Datetime => "a date and time with its time zone".to_owned(),
        ResponseType::Time => "a time of day (HH:MM)".to_owned(),
        ResponseType::Email => "an email address".to_owned(),
        ResponseType::Url => "a web address (http or https)".to_owned(),
        ResponseType::File => {
            let mut text = "a file".to_owned();
            if !rules.accept.is_empty() {
                text.push_str(&format!(" ({})", rules.accept.join(", ")));
            }
            if let Some(max) = rules.max_bytes {
                text.push_str(&format!(", up to {}", holdpoint_types::size_text(max)));
            }
            text
        }
        ResponseType::Table => {
            let rows =
                count_range("rows", rules.min_rows, rules.max_rows).unwrap_or_else(|| "any number of rows".into());
            format!("a table of {rows}")
        }
        ResponseType::Form => "a form".to_owned(),
    }
}

fn column_text(column: &TableColumn) -> String {
    let required = if column.required { ", required" } else { "" };
    let kind = kind_text(column.response_type, &column.options, &FieldRules::default());
    format!("{}: {kind}{required}", column.label)
}

fn field_item(field: &FormField) -> AskedItem {
    AskedItem {
        label: Some(field.label.clone()),
        kind: kind_text(field.response_type, &field.options, &field.rules),
        required: field.required,
        description: field.description.clone(),
        columns: field.rules.columns.iter().map(column_text).collect(),
    }
}

/// What `question` asks for: its form's fields, or its own value. Empty for the questions whose message says it all
/// already: text, yes or no, and approvals.
pub fn asked(question: &Question) -> Vec<AskedItem> {
    match question.response_type {
        ResponseType::Text | ResponseType::Boolean | ResponseType::Approval => Vec::new(),
        ResponseType::Form => question.fields.iter().map(field_item).collect(),
        other => vec![AskedItem {
            label: None,
            kind: kind_text(other, &question.options, &question.rules),
            required: true,
            description: None,
            columns: question.rules.columns.iter().map(column_text).collect(),
        }],
    }
}

/// Whether `question` asks for something no channel outside Holdpoint can take: a file, or a table (a single-value
/// table question, or a required file or table field of a form).
pub fn needs_holdpoint(question: &Question) -> bool {
    match question.response_type {
        ResponseType::Table | ResponseType::File => true,
        ResponseType::Form => question.fields.iter().any(|f| f.required && only_in_holdpoint(f.response_type)),
        _ => false,
    }
}

/// Whether a field of this type is answered only in Holdpoint's own pages.
pub fn only_in_holdpoint(response_type: ResponseType) -> bool {
    matches!(response_type, ResponseType::File | ResponseType::Table)
}

/// The summary as plain text lines: "- Nodes (required): a whole number from 1 to 9" with the description and the
/// columns indented under it.
pub fn asked_lines(items: &[AskedItem]) -> Vec<String> {
    let mut lines = Vec::new();
    for item in items {
        let required = if item.required && item.label.is_some() { " (required)" } else { "" };
        match &item.label {
            Some(label) => lines.push(format!("- {label}{required}: {}", item.kind)),
            None => lines.push(format!("- {}", capitalised(&item.kind))),
        }
        if let Some(description) = item.description.as_deref().filter(|d| !d.trim().is_empty()) {
            lines.push(format!("    {}", description.trim()));
        }
        if !item.columns.is_empty() {
            lines.push("    with the columns:".to_owned());
            lines.extend(item.columns.iter().map(|column| format!("      {column}")));
        }
    }
    lines
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_questions::*;
    use serde_json::json;

    #[test]
    fn a_forms_fields_read_with_their_bounds_and_a_tables_columns() {
        let question = rich_form();
        let lines = asked_lines(&asked(&question));
        assert_eq!(
            lines,
            [
                "- Nodes (required): a whole number from 1 to 9, in steps of 2",
                "    Worker nodes",
                "- Start (required): a date (YYYY-MM-DD)",
                "- Budget: a number of at least 0.5",
                "- Stars: a rating of 1 to 10 stars",
                "- Regions: any of: Europe, US (at most 1 choices)",
                "- Disks: a table of 1 to 4 rows",
                "    with the columns:",
                "      Size (GiB): a whole number, required",
                "      Kind: one of: SSD, HDD",
                "- Plan: a file (application/pdf, image/*), up to 5 MiB",
            ]
        );
        assert!(!needs_holdpoint(&question), "the file and the table are optional");
    }

    #[test]
    fn a_required_file_or_a_table_question_is_answered_in_holdpoint() {
        let mut question = rich_form();
        question.fields.last_mut().unwrap().required = true;
        assert!(needs_holdpoint(&question));
        let table = Question {
            response_type: ResponseType::Table,
            fields: vec![],
            rules: serde_json::from_value(json!({"columns": [{"key": "a", "label": "A", "response_type": "text"}]}))
                .unwrap(),
            ..text()
        };
        assert!(needs_holdpoint(&table));
        assert_eq!(
            asked_lines(&asked(&table)),
            ["- A table of any number of rows", "    with the columns:", "      A: text"]
        );
    }

    #[test]
    fn plain_questions_need_no_summary_and_single_values_say_what_they_take() {
        assert!(asked(&approval()).is_empty());
        assert!(asked(&text()).is_empty());
        let when = Question { response_type: ResponseType::Datetime, ..text() };
        assert_eq!(asked_lines(&asked(&when)), ["- A date and time with its time zone"]);
        assert_eq!(
            asked_lines(&asked(&choice(12))),
            [format!("- One of: {}, 2 more", (0..10).map(|i| format!("Region <{i}>")).collect::<Vec<_>>().join(", "))]
        );
    }
}
