//! Wire types of answers: an answer's body, one request of it and a batch of them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ErrorDetail, GrantRequest, Question, UnknownVariant};

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
