//! Wire types of the event stream: the events' names and a question event's data.

use serde::{Deserialize, Serialize};

use super::{Question, UnknownVariant};

wire_enum! {
    /// The `event:` names of the SSE stream.
    EventType {
        QuestionAsked = "question_asked",
        QuestionAnswered = "question_answered",
        QuestionExpired = "question_expired",
        QuestionCancelled = "question_cancelled",
        RunStatus = "run_status",
        /// The people a pending question reached were notified again (its escalation policy's reminder).
        QuestionReminded = "question_reminded",
        /// A pending question was handed to someone else by its escalation policy.
        QuestionEscalated = "question_escalated",
        /// Someone claimed a pending question, or let their claim go.
        QuestionClaimed = "question_claimed",
        /// Someone approved a question that needs more approvals than it has.
        QuestionApprovalAdded = "question_approval_added",
    }
}

/// The `data:` of every question event: the question as it is after the change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct QuestionEventData {
    pub question: Question,
}
