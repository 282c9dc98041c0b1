//! Answering and cancelling a pending question: who may give which answer (role, assignee, separation of duties),
//! the answer checked against its question, and the one transition out of `pending` — the row as it leaves, its
//! event and its audit entry — that the store writes only while the question is still pending.

use chrono::{DateTime, Utc};
use holdpoint_types::{AnswerBody, FieldRules, Question, QuestionKind, QuestionStatus, Resolution, ResponseType};
use serde_json::Value;
use uuid::Uuid;

use super::{AnswerShape, check_answer, claims, file_id_of, quorum};
use crate::credentials::Caller;
use crate::error::AppError;
use crate::events::EventHub;
use crate::metrics::Metrics;
use crate::store::{
    FileClaim, QuestionResolution, QuestionRow, QuestionTransition, ResolveOutcome, Store, StoreError, StoreResult,
};
use crate::validation::{COMMENT_MAX_CHARS, FieldErrors};

/// How long a resolved question was pending.
pub fn pending_for(row: &QuestionRow) -> std::time::Duration {
    let resolved = row.resolved_at.unwrap_or(row.updated_at);
    (resolved - row.created_at).to_std().unwrap_or_default()
}

/// The 409 for a question that is no longer pending: `details` say its status and, if answered, by whom.
pub fn not_pending(question: &QuestionRow) -> AppError {
    let message = match (&question.answered_by, question.status) {
        (Some(by), QuestionStatus::Answered) => format!("question is already answered by {by}"),
        (_, status) => format!("question is already {}", status.as_str()),
    };
    AppError::Conflict {
        message,
        details: Some(serde_json::json!({
            "status": question.status,
            "answered_by": question.answered_by,
            "resolution": question.resolution,
            "resolved_at": question.resolved_at,
        })),
    }
}

/// Refuses with 403 unless the caller may give this answer to question `row` (`question` on the wire): the role
/// rules, then the question's assignee, then who is eligible, then separation of duties (when on, whoever requested
/// an approval — see [`requester`] — may not approve it themselves, through any credential of theirs; withdrawing it
/// by rejecting stays possible).
pub async fn require_right_to_give(
    store: &dyn Store,
    caller: &Caller,
    row: &QuestionRow,
    question: &Question,
    answer: &AnswerBody,
    separation_of_duties: bool,
) -> Result<(), AppError> {
    require_right_to_decide(caller, question)?;
    if separation_of_duties
        && question.kind == QuestionKind::Approval
        && answer.value == Value::Bool(true)
        && may_have_requested(caller, row)
        && requester(store, row).await? == Some(caller.principal.counts_as())
    {
        return Err(AppError::Forbidden(
            "separation of duties: whoever requested an approval may not approve it themselves".into(),
        ));
    }
    Ok(())
}

/// Whether the caller may be whoever requested `row`, known without reading anything: its creator, or a person
/// (another credential of theirs may have created it). A service token that did not create it is not.
fn may_have_requested(caller: &Caller, row: &QuestionRow) -> bool {
    row.created_by.is_some() && (row.created_by == Some(caller.principal.id) || caller.principal.person.is_some())
}

/// Who requested the approval `row`, for separation of duties, as whom their approvals count (a token a person made
/// requests as that person): whoever created it, through whichever door — a token or person asking directly
/// (`POST /questions`, MCP, `holdpoint ask`), or whoever started a run a client executes (its client decides every
/// call it asks about, and names the tool call itself) — except the tool-call approvals of a run the server's own
/// workers execute: its agent, as defined, requests those, not whoever started the run. Reads the run only for a
/// tool-call approval of a run, and the creator's token.
pub async fn requester(store: &dyn Store, row: &QuestionRow) -> StoreResult<Option<Uuid>> {
    let creator = match (row.run_id, &row.tool_call_id) {
        (Some(run_id), Some(_)) => match store.run(row.workspace_id, run_id).await? {
            Some(run) if run.executor == holdpoint_types::RunExecutor::Server => None,
            _ => row.created_by,
        },
        _ => row.created_by,
    };
    let Some(creator) = creator else { return Ok(None) };
    Ok(Some(store.token_maker(row.workspace_id, creator).await?.unwrap_or(creator)))
}

/// Refuses, as an answer would be refused, a caller who may not end `row` for whoever asked it, by cancelling it or
/// by leaving it undecided when resuming its run: the role's right to answer its kind, its assignee, who is eligible,
/// and a claim someone else holds. Otherwise a reason given in place of an answer would answer for whoever may not
/// (a responder turning down an approval, anyone a question assigned to another). Separation of duties does not
/// apply: ending an approval never approves it.
pub fn require_right_to_end(caller: &Caller, row: &QuestionRow, now: DateTime<Utc>) -> Result<(), AppError> {
    require_right_to_decide(caller, &row.to_question(&caller.principal.workspace)?)?;
    if row.status == QuestionStatus::Pending {
        claims::require_claim(caller, row, now)?;
    }
    Ok(())
}

/// Refuses with 403 a caller who may not decide `question` whoever holds it: its kind needs another role, its
/// assignee is someone else, or it is reserved for other eligible approvers
/// ([`holdpoint_types::refusal_to_decide`]). Answering, claiming and ending a question all start here.
pub fn require_right_to_decide(caller: &Caller, question: &Question) -> Result<(), AppError> {
    match question.refusal_to_decide(caller.decider()) {
        Some(refusal) => Err(AppError::Forbidden(refusal)),
        None => Ok(()),
    }
}

/// What answering a question needs: where it is kept, the counters, this instance's cache of pending questions and
/// whether separation of duties is on.
pub struct Answering<'a> {
    pub store: &'a dyn Store,
    pub metrics: &'a Metrics,
    pub hub: &'a EventHub,
    pub separation_of_duties: bool,
}

/// Answers a pending question: checks the caller's right and the answer's shape, then makes the one transition.
/// Returns the answered question; 404 outside the caller's workspace, 409 if someone was first, 422 if the answer
/// does not fit (and then nothing is stored).
pub async fn answer_question(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    answer: AnswerBody,
    now: DateTime<Utc>,
) -> Result<Question, AppError> {
    answer_through(answering, caller, id, answer, now, None).await
}

/// [`answer_question`], for an answer given through a channel outside Holdpoint's pages (an action link in an
/// email or a push, a Slack button): the audit entry names the channel.
pub async fn answer_through(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    answer: AnswerBody,
    now: DateTime<Utc>,
    channel: Option<holdpoint_types::Channel>,
) -> Result<Question, AppError> {
    answer_granting(answering, caller, id, answer, None, now, channel).await
}

/// [`answer_through`], making `grant` with the approval of a tool call: the grant is checked before the
/// answer is written (a fault in it changes nothing) and stored once the answer is.
pub async fn answer_granting(
    answering: &Answering<'_>,
    caller: &Caller,
    id: Uuid,
    answer: AnswerBody,
    grant: Option<&holdpoint_types::GrantRequest>,
    now: DateTime<Utc>,
    channel: Option<holdpoint_types::Channel>,
) -> Result<Question, AppError> {
    let (store, metrics) = (answering.store, answering.metrics);
    // A question remembered as pending may have just been answered: the resolving write finds out (409).
    let row = match answering.hub.asked_and_pending(caller.workspace_id(), id) {
        Some(row) => QuestionRow::clone(&row),
        None => store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?,
    };
    // Before any other refusal: what the caller may not see is missing, not forbidden.
    if !caller.visibility().sees(row.created_by) {
        return Err(AppError::NotFound("question"));
    }
    let question = row.to_question(&caller.principal.workspace)?;
    require_right_to_give(store, caller, &row, &question, &answer, answering.separation_of_duties).await?;
    if question.status != QuestionStatus::Pending {
        return Err(not_pending(&row));
    }
    claims::require_claim(caller, &row, now)?;
    let mut errors = FieldErrors::default();
    check_answer(&AnswerShape::from(&question), &answer, "", &mut errors);
    errors.into_result("the answer")?;
    let mut answer = answer;
    let files = files_of(store, caller, &question, &mut answer).await?;
    let grant = match grant {
        Some(request) => Some(grant_with(store, caller, &question, &row, &answer, request, now).await?),
        None => None,
    };
    if row.required_approvals > 1 && answer.value == Value::Bool(true) {
        return quorum::approve(answering, caller, row, answer, channel).await;
    }
    let change = QuestionResolution {
        status: QuestionStatus::Answered,
        response: Some(answer),
        answered_by: Some(caller.principal.name.clone()),
        resolution: Some(Resolution::Human),
        at: now,
        actor: caller.into(),
    };
    let answered = resolve_as_caller(store, metrics, caller, &row, &change, channel, files).await?;
    if let Some(grant) = grant {
        crate::grants::record(store, caller, &grant).await?;
    }
    Ok(answered)
}

/// The grant an approval makes, checked against its question: only the approval of a tool call by one person
/// (a quorum's grant would let later calls through on one approval).
async fn grant_with(
    store: &dyn Store,
    caller: &Caller,
    question: &Question,
    row: &QuestionRow,
    answer: &AnswerBody,
    request: &holdpoint_types::GrantRequest,
    now: DateTime<Utc>,
) -> Result<crate::store::GrantRow, AppError> {
    if answer.value != Value::Bool(true) {
        return Err(AppError::invalid_field("grant", "only an approval makes a grant"));
    }
    if row.required_approvals > 1 {
        return Err(AppError::invalid_field("grant", "a question that needs several approvals cannot make a grant"));
    }
    let run = match (row.run_id, &row.tool_call_id) {
        (Some(run_id), Some(_)) => store.run(row.workspace_id, run_id).await?,
        _ => None,
    };
    let agent = crate::grants::agent_of_question(row, run.as_ref());
    let arguments = match (&answer.edited_arguments, &question.action) {
        (Some(edited), _) => edited.clone(),
        (None, Some(action)) => action.arguments.clone(),
        (None, None) => Value::Null,
    };
    crate::grants::grant_from_answer(caller, question, agent, &arguments, request, now)
}

/// The uploads an answer references — a `file` question's value, or a form's `file` fields — checked and taken: each
/// must be a file of the workspace that the caller uploaded and no question has taken, of a media type its field
/// accepts and within its `max_bytes`, and answer one field only. Each value becomes the stored file's metadata
/// (whatever the answer said of it); the claims returned are written with the answer, which takes the files for its
/// question. A reference that does not fit is a 422 naming `value` or `value.<key>`.
async fn files_of(
    store: &dyn Store,
    caller: &Caller,
    question: &Question,
    answer: &mut AnswerBody,
) -> Result<Vec<FileClaim>, AppError> {
    let mut references: Vec<(String, &FieldRules, &mut Value)> = Vec::new();
    match (question.response_type, &mut answer.value) {
        (ResponseType::File, value) => references.push(("value".to_owned(), &question.rules, value)),
        (ResponseType::Form, Value::Object(values)) => {
            for (key, value) in values.iter_mut() {
                if let Some(field) =
                    question.fields.iter().find(|field| field.key == *key && field.response_type == ResponseType::File)
                {
                    references.push((format!("value.{key}"), &field.rules, value));
                }
            }
        }
        _ => {}
    }
    let mut claims: Vec<FileClaim> = Vec::new();
    let mut errors = FieldErrors::default();
    for (name, rules, value) in references {
        let Some(file_id) = file_id_of(value) else { continue };
        let file = store.file(caller.workspace_id(), file_id).await?;
        let problem = match &file {
            None => Some("no such file was uploaded in this workspace".to_owned()),
            Some(file) if file.uploaded_by != caller.principal.id => {
                Some("only the one who uploaded a file may answer with it".to_owned())
            }
            Some(file) if file.question_id.is_some() => Some("the file already answers another question".to_owned()),
            Some(_) if claims.iter().any(|claim| claim.file_id == file_id) => {
                Some("the file already answers another field".to_owned())
            }
            Some(file) if !holdpoint_types::media_type_accepted(&rules.accept, &file.media_type) => Some(format!(
                "a file of type {} is not accepted (accepted: {})",
                file.media_type,
                rules.accept.join(", ")
            )),
            Some(file) if rules.max_bytes.is_some_and(|max| u64::try_from(file.size).unwrap_or(u64::MAX) > max) => {
                Some(format!(
                    "the file has {} bytes, more than the {} allowed",
                    file.size,
                    rules.max_bytes.unwrap_or(0)
                ))
            }
            Some(_) => None,
        };
        match (problem, file) {
            (Some(problem), _) => errors.add(name, problem),
            (None, Some(file)) => {
                *value = serde_json::to_value(crate::files::uploaded(&file)).map_err(AppError::internal)?;
                claims.push(FileClaim { file_id, uploaded_by: caller.principal.id });
            }
            (None, None) => {}
        }
    }
    errors.into_result("the answer")?;
    Ok(claims)
}

/// Makes a caller's transition out of `pending` of the question the caller read as `row`, taking `files` for it:
/// the question as it is now, 409 if someone was first, or 422 naming the field of a file that was taken or removed
/// since it was checked (and then nothing is written).
async fn resolve_as_caller(
    store: &dyn Store,
    metrics: &Metrics,
    caller: &Caller,
    row: &QuestionRow,
    change: &QuestionResolution,
    channel: Option<holdpoint_types::Channel>,
    files: Vec<FileClaim>,
) -> Result<Question, AppError> {
    if row.status != QuestionStatus::Pending {
        return Err(not_pending(row));
    }
    let mut through = transition(row, change, &caller.principal.workspace)?;
    if let Some(channel) = channel
        && let Some(after) = through.audit.after.as_mut()
    {
        after["channel"] = serde_json::json!(channel);
    }
    through.files = files;
    let outcome = match store.resolve_question(through).await {
        Err(StoreError::FileUnavailable(file_id)) => {
            let value = change.response.as_ref().map(|answer| &answer.value);
            return Err(AppError::invalid_field(
                &path_of_file(value, file_id),
                "the file was taken by another question or removed meanwhile",
            ));
        }
        other => other?,
    };
    match outcome {
        ResolveOutcome::Resolved(row) => {
            metrics.question_resolved(row.kind.as_str(), row.status.as_str(), pending_for(&row));
            Ok(row.to_question(&caller.principal.workspace)?)
        }
        ResolveOutcome::NotPending(row) => Err(not_pending(&row)),
        ResolveOutcome::NotFound => Err(AppError::NotFound("question")),
    }
}

/// Where an answer's `value` references `file_id`: `value` for a file question's own value, `value.<key>` for a
/// form's field.
fn path_of_file(value: Option<&Value>, file_id: Uuid) -> String {
    let key = value
        .filter(|value| file_id_of(value) != Some(file_id))
        .and_then(Value::as_object)
        .and_then(|values| values.iter().find(|(_, value)| file_id_of(value) == Some(file_id)))
        .map(|(key, _)| key.as_str());
    key.map_or_else(|| "value".to_owned(), |key| format!("value.{key}"))
}

/// Makes the transition of `row` (a question of workspace `workspace`, as just read) out of `pending` by `change`:
/// the row as it leaves, its event and its audit entry, decided here and written together by the store if the
/// question is still pending. A pending question changes only by leaving `pending`, so what `row` shows is what
/// the store would find.
pub async fn resolve(
    store: &dyn Store,
    row: &QuestionRow,
    change: &QuestionResolution,
    workspace: &str,
) -> StoreResult<ResolveOutcome> {
    if row.status != QuestionStatus::Pending {
        return Ok(ResolveOutcome::NotPending(row.clone()));
    }
    store.resolve_question(transition(row, change, workspace)?).await
}

/// The transition of `row` (pending, of workspace `workspace`) out of `pending` by `change`.
pub fn transition(row: &QuestionRow, change: &QuestionResolution, workspace: &str) -> StoreResult<QuestionTransition> {
    let resolved = row.resolved_with(change);
    let event = change.event(&resolved, workspace)?;
    let audit = crate::audit::question_resolved(&resolved, &change.actor);
    Ok(QuestionTransition { resolved, event, audit, files: Vec::new() })
}

/// Cancels a pending question; the reason, if any, is kept as the response's comment.
pub async fn cancel_question(
    store: &dyn Store,
    metrics: &Metrics,
    caller: &Caller,
    id: Uuid,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<Question, AppError> {
    if !caller.role().may_ask() {
        return Err(AppError::Forbidden(format!("{} may not cancel questions", caller.role().with_article())));
    }
    let row = store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?;
    if !caller.visibility().sees(row.created_by) {
        return Err(AppError::NotFound("question"));
    }
    // Whoever asked may withdraw the question; anyone else ends it for the asker, as an answer would.
    if row.created_by != Some(caller.principal.id) {
        require_right_to_end(caller, &row, now)?;
    }
    if reason.as_ref().is_some_and(|r| r.chars().count() > COMMENT_MAX_CHARS) {
        return Err(AppError::invalid_field("reason", format!("must have at most {COMMENT_MAX_CHARS} characters")));
    }
    let change = QuestionResolution::cancelled(reason, Some(caller.principal.name.clone()), now, caller.into());
    resolve_as_caller(store, metrics, caller, &row, &change, None, Vec::new()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_could_not_be_taken_is_named_where_the_answer_references_it() {
        let (file, other) = (Uuid::now_v7(), Uuid::now_v7());
        let own = serde_json::json!({ "file_id": file.to_string() });
        assert_eq!(path_of_file(Some(&own), file), "value", "a file question's value is the file");
        let form = serde_json::json!({ "note": "hi", "scan": own, "other": { "file_id": other.to_string() } });
        assert_eq!(path_of_file(Some(&form), file), "value.scan");
        assert_eq!(path_of_file(Some(&form), other), "value.other");
        assert_eq!(path_of_file(None, file), "value");
    }
}
