//! `/act/{token}`: the door of action links. Opening a link shows what it will do and changes nothing (mail
//! scanners and link previews open links); confirming answers as the link's person, through the answer use case.
//! Every refusal is a page that says why, with the status that fits it.

use app::types::{AnswerBody, Question, QuestionStatus};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use html_escape::{encode_double_quoted_attribute as attribute, encode_text as text};
use serde_json::Value;
use uuid::Uuid;

use crate::channels::action_links::ActionLinkError;
use crate::channels::{AnswerStyle, ChannelKeys, quick_answers};
use crate::credentials::{Caller, Credential};
use crate::error::AppError;
use crate::questions::{Answering, answer_through};
use crate::state::AppState;
use crate::store::{Store, now};

pub fn router() -> Router<AppState> {
    Router::new().route("/act/{token}", get(confirm).post(answer))
}

/// Why an action link cannot answer.
#[derive(Debug)]
enum LinkRefused {
    /// Not a link this Holdpoint issued, or one past its expiry.
    Invalid(ActionLinkError),
    /// Its question is gone, or its person is no longer a member of the question's workspace.
    Gone,
    /// Its question was resolved already (by this link or anyone).
    Resolved(Box<Question>),
    /// Answering the question (its id) is refused by one of its rules (the person's role, the assignee, separation of
    /// duties, a claim someone else holds) or the answer does not fit.
    Refused(AppError, Uuid),
}

/// What a link offers: its question (pending), the person it answers as, and the answer it gives.
struct LinkOffer {
    question: Question,
    recipient: Caller,
    value: Value,
}

/// Reads an action link without changing anything (`GET /act/{token}`: mail scanners open links).
async fn open_link(
    store: &dyn Store,
    keys: &ChannelKeys,
    token: &str,
    now: DateTime<Utc>,
) -> Result<LinkOffer, LinkRefused> {
    let claims = keys.action_links.verify(token, now).map_err(LinkRefused::Invalid)?;
    let gone = |_| LinkRefused::Gone;
    let mut found = None;
    for workspace_id in store.workspaces_of(claims.recipient_id).await.map_err(gone)? {
        if let Some(row) = store.question(workspace_id, claims.question_id).await.map_err(gone)? {
            found = Some(row);
            break;
        }
    }
    let row = found.ok_or(LinkRefused::Gone)?;
    let workspace = store.workspace_name(row.workspace_id).await.map_err(gone)?;
    let principal = store.user_principal(claims.recipient_id, Some(&workspace)).await.map_err(gone)?;
    let principal = principal.ok_or(LinkRefused::Gone)?;
    let question = row.to_question(&workspace).map_err(gone)?;
    if question.status != QuestionStatus::Pending {
        return Err(LinkRefused::Resolved(Box::new(question)));
    }
    let recipient = Caller { principal, credential: Credential::Channel(claims.channel) };
    Ok(LinkOffer { question, recipient, value: claims.value })
}

/// Answers with an action link (`POST /act/{token}`), as its person, with every rule an answer in Holdpoint has; the
/// audit entry names the channel. A link answers only a pending question, and a question leaves `pending` once, so
/// each link answers at most once.
async fn follow_link(
    answering: &Answering<'_>,
    keys: &ChannelKeys,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Question, LinkRefused> {
    let offer = open_link(answering.store, keys, token, now).await?;
    let Credential::Channel(channel) = offer.recipient.credential else { return Err(LinkRefused::Gone) };
    let answer = AnswerBody { value: offer.value, comment: None, edited_arguments: None };
    match answer_through(answering, &offer.recipient, offer.question.id, answer, now, Some(channel)).await {
        Ok(question) => Ok(question),
        Err(conflict @ AppError::Conflict { .. }) => {
            let row = answering.store.question(offer.recipient.workspace_id(), offer.question.id).await;
            match row {
                // Still pending: someone else holds its claim (the conflict names them).
                Ok(Some(row)) if row.status == QuestionStatus::Pending => Err(LinkRefused::Refused(conflict, row.id)),
                Ok(Some(row)) => Err(LinkRefused::Resolved(Box::new(
                    row.to_question(&offer.recipient.principal.workspace).map_err(|_| LinkRefused::Gone)?,
                ))),
                _ => Err(LinkRefused::Gone),
            }
        }
        Err(refused) => Err(LinkRefused::Refused(refused, offer.question.id)),
    }
}

/// `GET /act/{token}`: the question and the answer the link gives, with a button to confirm.
async fn confirm(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    match open_link(state.store.as_ref(), &state.channel_keys, &token, now()).await {
        Ok(offer) => confirmation(&offer, &token),
        Err(refused) => refusal(refused),
    }
}

/// `POST /act/{token}`: answers as the link's person.
async fn answer(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    match follow_link(&state.answering(), &state.channel_keys, &token, now()).await {
        Ok(question) => {
            // An approval among several leaves the question waiting for the others.
            let recorded = match (question.status, question.approval_progress()) {
                (QuestionStatus::Pending, Some(progress)) => format!(
                    "Your approval is recorded: {progress} approvals. The agent that asked goes on once the others \
                     have approved."
                ),
                _ => format!(
                    "Your answer is recorded as {}. The agent that asked goes on with it.",
                    text(question.answered_by.as_deref().unwrap_or_default())
                ),
            };
            let body = format!(
                "<h1>Answered</h1><p><strong>{}</strong></p><p>{recorded}</p><p><a href=\"/questions/{}\">Open in \
                 Holdpoint</a></p>",
                text(&question.title),
                question.id
            );
            page(StatusCode::OK, "Answered", &body)
        }
        Err(refused) => refusal(refused),
    }
}

fn confirmation(offer: &LinkOffer, token: &str) -> Response {
    let question = &offer.question;
    let choice = quick_answers(question, usize::MAX).into_iter().find(|answer| answer.value == offer.value);
    let (label, class) = match &choice {
        Some(answer) => (
            answer.label.clone(),
            match answer.style {
                AnswerStyle::Primary => "primary",
                AnswerStyle::Danger => "danger",
                AnswerStyle::Plain => "",
            },
        ),
        None => (offer.value.to_string(), "primary"),
    };
    let arguments = question
        .action
        .as_ref()
        .map(|action| {
            format!(
                "<p>Tool <code>{}</code> with the arguments:</p><pre class=\"arguments whole\">{}</pre>",
                text(&action.tool_name),
                text(&crate::channels::pretty_arguments(&action.arguments))
            )
        })
        .unwrap_or_default();
    let body = format!(
        "<h1>{title}</h1><p class=\"muted\">{kind} · {urgency}</p>{arguments}\
         <form method=\"post\" action=\"/act/{token}\"><p>Answer <strong>{label}</strong> as \
         <strong>{name}</strong>?</p><button type=\"submit\" class=\"{class}\">{label}</button></form>\
         <p class=\"muted\">Nothing is answered until you confirm. \
         <a href=\"/questions/{id}\">Open in Holdpoint</a> to answer otherwise or add a comment.</p>",
        title = text(&question.title),
        kind = text(&question.kind.as_str().replace('_', " ")),
        urgency = text(question.urgency.as_str()),
        token = attribute(token),
        label = text(&label),
        name = text(&offer.recipient.principal.name),
        class = class,
        id = question.id,
    );
    page(StatusCode::OK, "Confirm your answer", &body)
}

fn refusal(refused: LinkRefused) -> Response {
    match refused {
        LinkRefused::Invalid(ActionLinkError::Expired { .. }) => page(
            StatusCode::GONE,
            "Link expired",
            "<h1>This link has expired</h1><p>Open the question in Holdpoint to answer it.</p>",
        ),
        LinkRefused::Invalid(_) => page(
            StatusCode::BAD_REQUEST,
            "Invalid link",
            "<h1>This link is not valid</h1><p>It was not issued by this Holdpoint, or it was cut off or changed on \
             the way. Nothing was answered.</p>",
        ),
        LinkRefused::Gone => page(
            StatusCode::NOT_FOUND,
            "Not available",
            "<h1>This question is not available</h1><p>It no longer exists, or the link's person is no longer a \
             member of its workspace. Nothing was answered.</p>",
        ),
        LinkRefused::Resolved(question) => {
            let how = match (&question.answered_by, question.status) {
                (Some(by), app::types::QuestionStatus::Answered) => format!("already answered by {}", text(by)),
                (_, status) => format!("already {}", text(status.as_str())),
            };
            let body = format!(
                "<h1>Nothing to do</h1><p><strong>{}</strong> was {how}.</p><p><a href=\"/questions/{}\">Open in \
                 Holdpoint</a></p>",
                text(&question.title),
                question.id
            );
            page(StatusCode::CONFLICT, "Already answered", &body)
        }
        LinkRefused::Refused(error, question_id) => {
            let (status, _) = error.status_and_code();
            // A sentence of its own: the error's message, capitalised, with one full stop.
            let mut why = error.to_string().trim_end_matches('.').to_owned();
            if let Some(first) = why.get(..1).map(str::to_uppercase) {
                why.replace_range(..1, &first);
            }
            let body = format!(
                "<h1>Not answered</h1><p>{}.</p><p>Nothing was answered. <a href=\"/questions/{question_id}\">Open in \
                 Holdpoint</a></p>",
                text(&why)
            );
            page(status, "Not answered", &body)
        }
    }
}

pub(crate) fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"><meta name=\"color-scheme\" content=\"light dark\">\
         <meta name=\"referrer\" content=\"no-referrer\"><title>{} · Holdpoint</title>\
         <link rel=\"stylesheet\" href=\"/pkg/holdpoint.css\"></head><body><main class=\"page narrow\">{body}\
         </main></body></html>",
        text(title)
    );
    (status, Html(html)).into_response()
}
