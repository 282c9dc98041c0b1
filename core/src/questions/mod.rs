//! Questions: what a person must handle. Turning a request into a valid question (`new_question`), asking it
//! (`asking`), checking an answer against its question (`answer_shape`) and the one transition out of `pending`
//! (`answering`) live here, with the rich fields' checks (`fields`) and the JSON Schema a question may be asked with
//! (`response_schema`), and the arguments of the `ask_user` tool MCP clients and Holdpoint's own agents call
//! (`ask_user`); HTTP and SQL do not. So does what answering may take: several approvals ([`quorum`]), a
//! claim ([`claims`]), and who stands in for someone away ([`delegation`]).

mod answer_shape;
mod answering;
pub mod ask_user;
mod asking;
pub mod claims;
pub mod delegation;
pub mod fields;
mod new_question;
mod pending;
pub mod quorum;
pub mod response_schema;

use crate::error::AppError;

pub use answer_shape::{AnswerShape, TEXT_ANSWER_MAX_CHARS, answer_from_form_fields, check_answer, file_id_of};
pub use answering::{
    Answering, answer_granting, answer_question, answer_through, cancel_question, not_pending, pending_for, requester,
    require_right_to_decide, require_right_to_end, require_right_to_give, resolve, transition,
};
pub use asking::{Asked, Asking, approved_by_grant, assignee_problem, check_assignee, tool_call_key};
pub use new_question::{
    APPROVALS_MAX, BODY_MAX_BYTES, CONTEXT_MAX_BYTES, ELIGIBLE_USERS_MAX, TITLE_MAX_CHARS, TimeoutBounds,
    build_question,
};

/// The longest text a search (`q`) takes: any phrase fits, and matching it stays cheap. The UI's search fields
/// share it.
pub const SEARCH_MAX_CHARS: usize = holdpoint_types::SEARCH_MAX_CHARS;

/// Refuses a search text longer than [`SEARCH_MAX_CHARS`].
pub fn check_search_text(text: &str) -> Result<(), AppError> {
    if text.chars().count() > SEARCH_MAX_CHARS {
        return Err(AppError::BadRequest(format!("q must have at most {SEARCH_MAX_CHARS} characters")));
    }
    Ok(())
}
