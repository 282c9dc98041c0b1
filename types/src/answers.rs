//! Wire types of answers: an answer's body, one request of it and a batch of them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ErrorDetail, FieldRules, GrantRequest, Question, QuestionOption, ResponseType, UnknownVariant, UploadedFile,
};

/// An answer body: `POST /questions/{id}/answer`, and the shape of `default_response`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AnswerBody {
    /// The answer; its shape depends on the question's `response_type`.
    pub value: Value,
    /// Free text for the agent, e.g. the reason for a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Replacement arguments for an approval with `allow_edit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_arguments: Option<Value>,
}

/// The body of `POST /questions/{id}/answer`: an answer, and for the approval of a tool call, optionally a grant
/// that lets later calls like it through without asking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AnswerRequest {
    #[serde(flatten)]
    pub answer: AnswerBody,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantRequest>,
}

/// The answers every error-recovery question understands besides its own options: `(value, label,
/// what it does)`.
pub const RECOVERY_ACTIONS: [(&str, &str, &str); 3] = [
    ("retry", "Retry", "Try the failed step again"),
    ("skip", "Skip", "Leave it out and go on"),
    ("abort", "Abort", "Stop the run"),
];

/// Whether `value` is one of the [`RECOVERY_ACTIONS`].
pub fn is_recovery_action(value: &str) -> bool {
    RECOVERY_ACTIONS.iter().any(|(action, _, _)| *action == value)
}

/// The body of `POST /questions/answer-batch`: 1..=200 answers, each applied on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AnswerBatch {
    #[cfg_attr(feature = "server", schema(min_items = 1, max_items = 200))]
    pub items: Vec<AnswerBatchItem>,
}

/// One answer of a batch: the question's id and an [`AnswerBody`]'s fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AnswerBatchItem {
    /// The question's id; one that is not a UUID is reported as `not_found` on its item.
    pub id: String,
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_arguments: Option<Value>,
    /// A grant made with this approval, as on a single answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantRequest>,
}

wire_enum! {
    /// What became of one item of a batch.
    AnswerBatchStatus {
        Answered = "answered",
        /// The approval was recorded; the question needs more before it is answered.
        ApprovalAdded = "approval_added",
        /// The question had left `pending` (`error` says who answered it).
        Conflict = "conflict",
        Invalid = "invalid",
        NotFound = "not_found",
        /// The caller may not answer that one.
        Forbidden = "forbidden",
        /// The server failed on it; the other items are still answered or refused each on its own.
        Error = "error",
    }
}

/// The answer of `POST /questions/answer-batch`: one result per item, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AnswerBatchResults {
    pub results: Vec<AnswerBatchResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AnswerBatchResult {
    pub id: String,
    pub status: AnswerBatchStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    /// The answered question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
}

/// An answer's value as people read it wherever Holdpoint shows it (the web UI, Slack): yes or no, a choice by its
/// label and several by theirs, a rating as the stars given of those there are, a file by its name, a table row by
/// row and a form field by field, each under its label (`Go-live date: 2026-03-01; Parts: (Item: disk, Qty: 2)`).
/// What fits no type of the question reads as JSON.
pub fn answer_in_words(question: &Question, value: &Value) -> String {
    match (question.response_type, value.as_object()) {
        (ResponseType::Form, Some(entries)) => {
            let fields = question.fields.iter().filter_map(|field| {
                let value = entries.get(&field.key).filter(|value| !value.is_null())?;
                let words = value_in_words(field.response_type, &field.options, &field.rules, value);
                Some(format!("{}: {words}", field.label))
            });
            fields.collect::<Vec<_>>().join("; ")
        }
        _ => value_in_words(question.response_type, &question.options, &question.rules, value),
    }
}

impl Question {
    /// The files its answer (or default) references: a `file` question's value, or a form's `file` fields in the
    /// form's order. The server stores each reference as the uploaded file's metadata.
    pub fn answered_files(&self) -> Vec<UploadedFile> {
        let Some(value) = self.response.as_ref().map(|response| &response.value) else { return Vec::new() };
        let file = |value: &Value| serde_json::from_value::<UploadedFile>(value.clone()).ok();
        match self.response_type {
            ResponseType::File => file(value).into_iter().collect(),
            ResponseType::Form => self
                .fields
                .iter()
                .filter(|field| field.response_type == ResponseType::File)
                .filter_map(|field| value.get(&field.key).and_then(file))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// One value of `response_type` in words (see [`answer_in_words`]).
fn value_in_words(
    response_type: ResponseType,
    options: &[QuestionOption],
    rules: &FieldRules,
    value: &Value,
) -> String {
    let words = |value: &Value| value_in_words(response_type, options, rules, value);
    match (response_type, value) {
        (_, Value::Bool(yes)) => (if *yes { "yes" } else { "no" }).to_owned(),
        (_, Value::String(text)) => match options.iter().find(|option| &option.value == text) {
            Some(option) => option.label.clone(),
            None => RECOVERY_ACTIONS
                .iter()
                .find(|(action, _, _)| response_type == ResponseType::ErrorRecovery && action == text)
                .map_or_else(|| text.clone(), |(_, label, _)| (*label).to_owned()),
        },
        (ResponseType::Rating, Value::Number(stars)) => format!("{stars} of {}", rules.rating_max()),
        (ResponseType::MultiChoice, Value::Array(chosen)) => chosen.iter().map(words).collect::<Vec<_>>().join(", "),
        (ResponseType::Table, Value::Array(rows)) => {
            let row_in_words = |row: &Value| {
                let cells = rules.columns.iter().filter_map(|column| {
                    let value = row.get(&column.key).filter(|value| !value.is_null())?;
                    let words = value_in_words(column.response_type, &column.options, &FieldRules::default(), value);
                    Some(format!("{}: {words}", column.label))
                });
                format!("({})", cells.collect::<Vec<_>>().join(", "))
            };
            rows.iter().map(row_in_words).collect::<Vec<_>>().join(" ")
        }
        (ResponseType::File, Value::Object(file)) => {
            file.get("name").and_then(Value::as_str).map_or_else(|| value.to_string(), str::to_owned)
        }
        (_, other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{FormField, QuestionStatus, sample_question};

    #[test]
    fn the_files_an_answer_references_are_its_file_value_or_its_forms_file_fields_in_order() {
        let file = |name: &str| json!({ "file_id": uuid::Uuid::nil(), "name": name, "size": 3, "media_type": "text/plain", "sha256": "ab" });
        let mut form = sample_question("Send the reports", QuestionStatus::Answered);
        form.response_type = ResponseType::Form;
        form.fields = vec![
            FormField::new("summary", "Summary", ResponseType::File),
            FormField::new("note", "Note", ResponseType::Text),
            FormField::new("log", "Log", ResponseType::File),
            FormField::new("extra", "Extra", ResponseType::File),
        ];
        form.response = Some(AnswerBody {
            value: json!({ "log": file("b.log"), "note": "see both", "summary": file("a.pdf") }),
            comment: None,
            edited_arguments: None,
        });
        let names: Vec<String> = form.answered_files().into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["a.pdf", "b.log"], "in the form's order; an unanswered field has none");

        let mut single = sample_question("The contract?", QuestionStatus::Answered);
        single.response_type = ResponseType::File;
        single.response = Some(AnswerBody { value: file("contract.pdf"), comment: None, edited_arguments: None });
        assert_eq!(single.answered_files()[0].name, "contract.pdf");
        single.response = None;
        assert!(single.answered_files().is_empty());
        let mut text = sample_question("Why?", QuestionStatus::Answered);
        text.response = Some(AnswerBody { value: file("not-a-file-question"), comment: None, edited_arguments: None });
        assert!(text.answered_files().is_empty(), "only file questions and fields reference files");
    }

    #[test]
    fn a_form_answer_reads_field_by_field_under_the_labels_in_the_forms_order() {
        let mut question = sample_question("Plan the go-live", QuestionStatus::Answered);
        question.response_type = ResponseType::Form;
        let mut rating = FormField::new("rating", "How ready is it?", ResponseType::Rating);
        rating.rules.max = Some(4.into());
        let mut size = FormField::new("size", "Size", ResponseType::MultiChoice);
        size.options =
            serde_json::from_value(json!([{ "value": "s", "label": "Small" }, { "value": "m", "label": "Medium" }]))
                .unwrap();
        let mut parts = FormField::new("parts", "Parts to order", ResponseType::Table);
        parts.rules.columns = serde_json::from_value(json!([
            { "key": "item", "label": "Item", "response_type": "text", "required": true },
            { "key": "ok", "label": "In stock", "response_type": "boolean" },
        ]))
        .unwrap();
        question.fields = vec![
            FormField::new("when", "Go-live date", ResponseType::Date),
            rating,
            size,
            parts,
            FormField::new("report", "Test report", ResponseType::File),
            FormField::new("notes", "Notes", ResponseType::Text),
        ];
        let value = json!({
            "report": { "file_id": "01a2284e-3168-720f-ac09-b55bb10627a5", "name": "report.txt", "size": 12,
                "media_type": "text/plain", "sha256": "00" },
            "parts": [{ "item": "disk", "ok": true }, { "item": "cable", "ok": null }],
            "size": ["s", "m"],
            "rating": 3,
            "when": "2026-03-01",
            "notes": null,
        });
        assert_eq!(
            answer_in_words(&question, &value),
            "Go-live date: 2026-03-01; How ready is it?: 3 of 4; Size: Small, Medium; \
             Parts to order: (Item: disk, In stock: yes) (Item: cable); Test report: report.txt"
        );
    }

    #[test]
    fn a_single_value_reads_as_its_choice_its_recovery_action_or_itself() {
        let mut question = sample_question("Which region?", QuestionStatus::Answered);
        assert_eq!(answer_in_words(&question, &json!("eu-west-1")), "eu-west-1");
        assert_eq!(answer_in_words(&question, &json!(true)), "yes");
        question.response_type = ResponseType::Choice;
        question.options =
            vec![QuestionOption { value: "eu".into(), label: "Europe (Ireland)".into(), description: None }];
        assert_eq!(answer_in_words(&question, &json!("eu")), "Europe (Ireland)");
        question.response_type = ResponseType::ErrorRecovery;
        assert_eq!(answer_in_words(&question, &json!("retry")), "Retry");
        question.response_type = ResponseType::Rating;
        assert_eq!(answer_in_words(&question, &json!(4)), "4 of 5");
        question.response_type = ResponseType::Number;
        assert_eq!(answer_in_words(&question, &json!({ "unexpected": 1 })), "{\"unexpected\":1}");
    }
}
