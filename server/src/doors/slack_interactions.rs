//! `POST /integrations/slack/interactions`: the door Slack's interactivity knocks on when a person clicks
//! a button of a question's message or submits its modal.
//!
//! Only a request Slack signed is read ([`verify_request`]: the app's signing secret, a timestamp at most five
//! minutes away); anything else is refused with the one JSON error shape and changes nothing. A click answers as the
//! Holdpoint member mapped to the clicking Slack user, through the answer use case with every rule of answering; the
//! message itself is changed by the outbox once the question is resolved, wherever that happened. Slack shows
//! nothing of an answer to a click, so a refused click is explained to the person alone (`chat.postEphemeral`), a
//! refused modal in the modal itself (`response_action: errors`, each field the server refused under its own input),
//! and an "Answer…" click on a question that cannot be answered opens a modal that says why.

use app::types::{AnswerBody, Channel, Question, QuestionStatus};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::channels::question_url;
use crate::channels::slack::{Interaction, answer_modal, notice_modal, parse_interaction, verify_request};
use crate::credentials::{Caller, Credential};
use crate::error::AppError;
use crate::questions::{Answering, answer_through};
use crate::state::AppState;
use crate::store::{Store, StoreError, now};

pub fn router() -> Router<AppState> {
    Router::new().route("/integrations/slack/interactions", post(interactions))
}

async fn interactions(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some((slack, signing_secret)) = &state.slack else {
        return AppError::NotFound("Slack integration").into_response();
    };
    if let Err(refused) = verify_request(signing_secret.expose(), &headers, &body, now().timestamp()) {
        tracing::warn!(reason = %refused, "refused a Slack interaction");
        return AppError::Unauthorized(format!("not a request signed by Slack: {refused}")).into_response();
    }
    let interaction = match parse_interaction(&body) {
        Ok(interaction) => interaction,
        Err(invalid) => return AppError::BadRequest(invalid.to_string()).into_response(),
    };
    let answering = state.answering();
    match interaction {
        Interaction::Answer { user_id, question_id, value, message } => {
            let answer = app::types::AnswerBody { value, comment: None, edited_arguments: None };
            let answered = match slack_member(state.store.as_ref(), &user_id, question_id).await {
                Ok((member, question)) => answer_from_slack(&answering, &member, &question, answer, now()).await,
                Err(refused) => Err(refused),
            };
            match (answered, message) {
                (Err(refused), Some(message)) => {
                    log_refusal(&user_id, &refused);
                    if let Err(error) = slack.post_ephemeral(&message.channel, &user_id, &refused.explain()).await {
                        tracing::warn!(error = %error, "could not tell a Slack user why their click answered nothing");
                    }
                }
                // An approval among several changes no message: the person who gave it is told where it stands.
                (Ok(question), Some(message)) if question.status == QuestionStatus::Pending => {
                    let progress = question.approval_progress().unwrap_or_default();
                    let said =
                        format!("Your approval is recorded: {progress} approvals. The question waits for the others.");
                    if let Err(error) = slack.post_ephemeral(&message.channel, &user_id, &said).await {
                        tracing::warn!(error = %error, "could not tell a Slack user their approval was recorded");
                    }
                }
                _ => {}
            }
            StatusCode::OK.into_response()
        }
        Interaction::OpenModal { user_id, question_id, trigger_id } => {
            let view = match slack_member(state.store.as_ref(), &user_id, question_id).await {
                Ok((_, question)) if question.status == app::types::QuestionStatus::Pending => {
                    let public_url = crate::server::public_url(&state.config, state.config.addr);
                    answer_modal(&question, &question_url(&public_url, question.id))
                }
                Ok((_, question)) => notice_modal("Holdpoint", &SlackRefused::Resolved(Box::new(question)).explain()),
                Err(refused) => {
                    log_refusal(&user_id, &refused);
                    notice_modal("Holdpoint", &refused.explain())
                }
            };
            if let Err(error) = slack.open_view(&trigger_id, &view).await {
                tracing::warn!(error = %error, "could not open a Slack modal");
            }
            StatusCode::OK.into_response()
        }
        Interaction::Submit { user_id, question_id, answer } => {
            let mut asked = None;
            let answered = match slack_member(state.store.as_ref(), &user_id, question_id).await {
                Ok((member, question)) => {
                    // A resolved question's modal has no layout left to read its inputs by: say who was first.
                    let answered = match answer.answer_for(&question) {
                        _ if question.status != QuestionStatus::Pending => {
                            Err(SlackRefused::Resolved(Box::new(question.clone())))
                        }
                        Ok(body) => answer_from_slack(&answering, &member, &question, body, now()).await,
                        Err(invalid) => Err(SlackRefused::Refused(AppError::BadRequest(invalid.to_string()))),
                    };
                    asked = Some(question);
                    answered
                }
                Err(refused) => Err(refused),
            };
            match answered {
                // An empty 200 closes the modal.
                Ok(_) => StatusCode::OK.into_response(),
                Err(refused) => {
                    log_refusal(&user_id, &refused);
                    // Each field the server refused is named under its own input; the rest under the first.
                    let errors = answer.errors(asked.as_ref(), &refused.field_errors(), &refused.explain());
                    axum::Json(errors).into_response()
                }
            }
        }
        Interaction::Ignored { .. } => StatusCode::OK.into_response(),
    }
}

fn log_refusal(slack_user: &str, refused: &SlackRefused) {
    match refused {
        SlackRefused::Unavailable(error) => tracing::warn!(error = %error, "a Slack answer could not be recorded"),
        other => tracing::info!(slack_user, reason = %other.explain(), "a Slack interaction answered nothing"),
    }
}

/// Why a Slack interaction answers nothing.
#[derive(Debug)]
enum SlackRefused {
    /// The Slack user is mapped to no member of a workspace that has the question.
    Unmapped,
    /// The question was resolved already (by anyone, anywhere).
    Resolved(Box<Question>),
    /// Answering is refused by one of its rules (the member's role, the assignee, separation of duties) or the answer
    /// does not fit.
    Refused(AppError),
    /// The store could not be read.
    Unavailable(StoreError),
}

impl From<StoreError> for SlackRefused {
    fn from(error: StoreError) -> Self {
        SlackRefused::Unavailable(error)
    }
}

impl SlackRefused {
    /// The field errors of a value that does not fit (a 422's `details.fields`), as `(path, problem)`.
    fn field_errors(&self) -> Vec<(String, String)> {
        let SlackRefused::Refused(AppError::Invalid { details: Some(details), .. }) = self else { return Vec::new() };
        details["fields"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(path, problem)| (path.clone(), problem.as_str().map_or_else(|| problem.to_string(), str::to_owned)))
            .collect()
    }

    /// The refusal in words, for the person who clicked.
    fn explain(&self) -> String {
        match self {
            SlackRefused::Unmapped => "Your Slack account is not linked to a Holdpoint member who can see this \
                question: ask an admin to set your Slack user id on your membership."
                .to_owned(),
            SlackRefused::Resolved(question) => match (&question.answered_by, question.status) {
                (Some(by), QuestionStatus::Answered) => format!("This question was already answered by {by}."),
                (_, status) => format!("This question is no longer open: it was {status}."),
            },
            SlackRefused::Refused(error) => format!("Holdpoint refused this answer: {error}"),
            SlackRefused::Unavailable(_) => "Holdpoint could not record this answer just now; try again.".to_owned(),
        }
    }
}

/// The member a Slack user acts as on a question, and the question: found through the memberships mapped to the
/// Slack user, in the workspace that has the question. The member acts through the Slack channel (audited so).
async fn slack_member(
    store: &dyn Store,
    slack_user_id: &str,
    question_id: Uuid,
) -> Result<(Caller, Question), SlackRefused> {
    for (workspace_id, user_id) in store.slack_memberships(slack_user_id).await? {
        let Some(row) = store.question(workspace_id, question_id).await? else { continue };
        let workspace = store.workspace_name(workspace_id).await?;
        let Some(principal) = store.user_principal(user_id, Some(&workspace)).await? else { continue };
        let question = row.to_question(&workspace)?;
        return Ok((Caller { principal, credential: Credential::Channel(Channel::Slack) }, question));
    }
    Err(SlackRefused::Unmapped)
}

/// Answers `question` from Slack as `member` (see [`slack_member`]), with every rule an answer in Holdpoint has; the
/// audit entry names the channel.
async fn answer_from_slack(
    answering: &Answering<'_>,
    member: &Caller,
    question: &Question,
    answer: AnswerBody,
    now: DateTime<Utc>,
) -> Result<Question, SlackRefused> {
    if question.status != QuestionStatus::Pending {
        return Err(SlackRefused::Resolved(Box::new(question.clone())));
    }
    match answer_through(answering, member, question.id, answer, now, Some(Channel::Slack)).await {
        Ok(answered) => Ok(answered),
        Err(conflict @ AppError::Conflict { .. }) => {
            match answering.store.question(member.workspace_id(), question.id).await? {
                // Still pending: someone else holds its claim (the conflict names them).
                Some(row) if row.status == QuestionStatus::Pending => Err(SlackRefused::Refused(conflict)),
                Some(row) => Err(SlackRefused::Resolved(Box::new(row.to_question(&member.principal.workspace)?))),
                None => Err(SlackRefused::Unmapped),
            }
        }
        Err(refused) => Err(SlackRefused::Refused(refused)),
    }
}
