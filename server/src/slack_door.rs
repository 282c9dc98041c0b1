//! `POST /integrations/slack/interactions`: the door Slack's interactivity knocks on when a person clicks
//! a button of a question's message or submits its modal.
//!
//! Only a request Slack signed is read ([`verify_request`]: the app's signing secret, a timestamp at most five
//! minutes away); anything else is refused with the one JSON error shape and changes nothing. A click answers as the
//! Holdpoint member mapped to the clicking Slack user, through the answer use case with every rule of §3; the
//! message itself is changed by the outbox once the question is resolved, wherever that happened. Slack shows
//! nothing of an answer to a click, so a refused click is explained to the person alone (`chat.postEphemeral`), a
//! refused modal in the modal itself (`response_action: errors`), and an "Answer…" click on a question that cannot
//! be answered opens a modal that says why.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

use crate::channels::slack::{Interaction, answer_modal, notice_modal, parse_interaction, verify_request};
use crate::error::AppError;
use crate::notifications::{SlackRefused, answer_from_slack, slack_member};
use crate::state::AppState;
use crate::store::now;

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
            if let (Err(refused), Some(message)) = (answered, message) {
                log_refusal(&user_id, &refused);
                if let Err(error) = slack.post_ephemeral(&message.channel, &user_id, &refused.explain()).await {
                    tracing::warn!(error = %error, "could not tell a Slack user why their click answered nothing");
                }
            }
            StatusCode::OK.into_response()
        }
        Interaction::OpenModal { user_id, question_id, trigger_id } => {
            let view = match slack_member(state.store.as_ref(), &user_id, question_id).await {
                Ok((_, question)) if question.status == app::types::QuestionStatus::Pending => answer_modal(&question),
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
            let answered = match slack_member(state.store.as_ref(), &user_id, question_id).await {
                Ok((member, question)) => match answer.answer_for(&question) {
                    Ok(body) => answer_from_slack(&answering, &member, &question, body, now()).await,
                    Err(invalid) => Err(SlackRefused::Refused(AppError::BadRequest(invalid.to_string()))),
                },
                Err(refused) => Err(refused),
            };
            match answered {
                // An empty 200 closes the modal.
                Ok(_) => StatusCode::OK.into_response(),
                Err(refused) => {
                    log_refusal(&user_id, &refused);
                    let errors = json!({"response_action": "errors", "errors": {"answer": refused.explain()}});
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
