//! The resume entries of a request: each checked, then the questions they name answered or cancelled as the
//! caller may.

use super::*;

/// What a resume entry does, once checked.
pub(super) enum Settle {
    Answer(Uuid, AnswerBody),
    Cancel(Uuid, Option<String>),
    ResumePaused(Option<String>),
    CancelRun,
}

/// An optional text of a resume entry at `field`: absent or null is `None`; anything but a string of at most `max`
/// characters is a fault in `errors`.
fn optional_text(value: Option<&Value>, max: usize, field: String, errors: &mut FieldErrors) -> Option<String> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.chars().count() <= max => Some(text.clone()),
        Some(_) => {
            errors.add(field, format!("must be a string of at most {max} characters"));
            None
        }
    }
}

/// `metadata.holdpoint.comment` of a resume entry.
pub(super) fn comment_of(entry: &ResumeEntry, i: usize, errors: &mut FieldErrors) -> Option<String> {
    let comment = entry.metadata.as_ref().map(|m| &m[METADATA_KEY]["comment"]);
    optional_text(comment, COMMENT_MAX_CHARS, format!("resume[{i}].metadata.holdpoint.comment"), errors)
}

/// Answers or cancels what the resume entries name, as the caller may: every entry is checked first (the thread's,
/// the caller's right, the payload's shape), and nothing changes if one is refused.
///
/// The first answer wins everywhere in Holdpoint: an entry naming a question already resolved elsewhere (answered
/// in Slack or the inbox, expired, cancelled), or resolved while this request applies the others, is skipped and
/// its resolution stands. Returns those entries, each with how its question was resolved, for the stream to tell.
pub(super) async fn settle_interrupts(
    state: &AppState,
    caller: &Caller,
    run: &RunRow,
    entries: &[ResumeEntry],
) -> ApiResult<Vec<Value>> {
    let mut already_resolved = Vec::new();
    let mut errors = FieldErrors::default();
    let mut actions = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, entry) in entries.iter().enumerate() {
        let field = format!("resume[{i}].interruptId");
        let comment = comment_of(entry, i, &mut errors);
        let Ok(id) = Uuid::parse_str(entry.interrupt_id.trim()) else {
            errors.add(field, "is not an interrupt of this thread");
            continue;
        };
        if !seen.insert(id) {
            errors.add(field, "is answered twice");
            continue;
        }
        if id == run.id {
            if run.status != RunStatus::Paused {
                return Err(thread_busy(run));
            }
            match entry.status {
                ResumeStatus::Cancelled => actions.push(Settle::CancelRun),
                ResumeStatus::Resolved => {
                    let prompt = entry.payload.as_ref().map(|p| &p["prompt"]);
                    let field = format!("resume[{i}].payload.prompt");
                    let prompt = optional_text(prompt, PROMPT_MAX_CHARS, field, &mut errors);
                    actions.push(Settle::ResumePaused(prompt));
                }
            }
            continue;
        }
        let row = state.store.question(caller.workspace_id(), id).await?;
        // The run's own questions, or its sub-agents' (which hold it while it waits for them).
        let of_thread =
            |q: &crate::store::QuestionRow| q.run_id == Some(run.id) || q.parent_run_ids.0.contains(&run.id);
        let Some(row) = row.filter(|q| of_thread(q) && caller.visibility().sees(q.created_by)) else {
            errors.add(field, "is not an interrupt of this thread");
            continue;
        };
        if row.status != QuestionStatus::Pending {
            already_resolved.push(resolution_of(&entry.interrupt_id, &row.to_question(&caller.principal.workspace)?));
            continue;
        }
        let question = row.to_question(&caller.principal.workspace)?;
        match entry.status {
            ResumeStatus::Cancelled => {
                if row.created_by != Some(caller.principal.id) {
                    crate::questions::require_right_to_end(caller, &row, crate::store::now())?;
                }
                actions.push(Settle::Cancel(id, comment));
            }
            ResumeStatus::Resolved => {
                let Some(answer) = answer_of(&question, entry, comment, i, &mut errors) else { continue };
                crate::questions::require_right_to_give(
                    state.store.as_ref(),
                    caller,
                    &row,
                    &question,
                    &answer,
                    state.config.separation_of_duties,
                )
                .await?;
                let mut problems = FieldErrors::default();
                crate::questions::check_answer(&(&question).into(), &answer, &format!("resume[{i}]"), &mut problems);
                // Named as the entry sent them: the answer's value is the payload (an approval's is its
                // `approved`), its edited arguments `editedArgs`, its comment the Holdpoint metadata's.
                let value = if is_approval(&question) { "payload.approved" } else { "payload" };
                let problems = problems
                    .renamed(&format!("resume[{i}].value"), &format!("resume[{i}].{value}"))
                    .renamed(&format!("resume[{i}].edited_arguments"), &format!("resume[{i}].payload.editedArgs"))
                    .renamed(&format!("resume[{i}].comment"), &format!("resume[{i}].metadata.holdpoint.comment"));
                errors.merge(problems);
                actions.push(Settle::Answer(id, answer));
            }
        }
    }
    errors.into_result("the resume entries")?;
    let now = crate::store::now();
    for action in actions {
        match action {
            Settle::Answer(id, answer) => {
                let answered = crate::questions::answer_question(&state.answering(), caller, id, answer, now).await;
                if let Some(resolved) = resolved_meanwhile(state, caller, id, answered.map(|_| ())).await? {
                    already_resolved.push(resolved);
                }
            }
            Settle::Cancel(id, reason) => {
                let reason = reason.or_else(|| Some("cancelled through AG-UI".to_owned()));
                let cancelled =
                    crate::questions::cancel_question(state.store.as_ref(), &state.metrics, caller, id, reason, now)
                        .await;
                if let Some(resolved) = resolved_meanwhile(state, caller, id, cancelled.map(|_| ())).await? {
                    already_resolved.push(resolved);
                }
            }
            Settle::ResumePaused(prompt) => {
                let request = ResumeRequest { prompt, tool_decisions: Vec::new() };
                let sod = state.config.separation_of_duties;
                crate::runs::resume_run(state.store.as_ref(), caller, run.id, request, sod).await?;
            }
            Settle::CancelRun => {
                crate::runs::cancel_run(state.store.as_ref(), caller, run.id).await?;
            }
        }
    }
    Ok(already_resolved)
}

/// How applying an entry to question `id` went: `None` if it applied; the question's resolution if someone else
/// resolved it between the check and the write (the conflict the first answer's win makes); any other error as it is.
pub(super) async fn resolved_meanwhile(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    applied: Result<(), AppError>,
) -> ApiResult<Option<Value>> {
    match applied {
        Ok(()) => Ok(None),
        Err(err @ AppError::Conflict { .. }) => {
            let row = state.store.question(caller.workspace_id(), id).await?;
            match row.filter(|row| row.status != QuestionStatus::Pending) {
                Some(row) => Ok(Some(resolution_of(&id.to_string(), &row.to_question(&caller.principal.workspace)?))),
                None => Err(err),
            }
        }
        Err(err) => Err(err),
    }
}

/// A skipped resume entry, and how its question was resolved: its status, who answered, when, and the answer.
pub(super) fn resolution_of(interrupt_id: &str, question: &Question) -> Value {
    json!({
        "interruptId": interrupt_id,
        "status": question.status,
        "answeredBy": question.answered_by,
        "resolvedAt": question.resolved_at,
        "response": question.response,
    })
}

/// The answer a resolved entry gives its question; `None` (with the fault in `errors`) if the payload does not fit
/// the interrupt's kind.
pub(super) fn answer_of(
    question: &Question,
    entry: &ResumeEntry,
    comment: Option<String>,
    i: usize,
    errors: &mut FieldErrors,
) -> Option<AnswerBody> {
    let field = format!("resume[{i}].payload");
    let Some(payload) = entry.payload.clone().filter(|p| !p.is_null()) else {
        errors.add(field, "is required to resolve an interrupt");
        return None;
    };
    if is_approval(question) {
        let Some(approved) = payload["approved"].as_bool() else {
            errors.add(format!("{field}.approved"), "must be true or false");
            return None;
        };
        let edited = match &payload["editedArgs"] {
            Value::Null => None,
            Value::Object(_) if approved => Some(payload["editedArgs"].clone()),
            Value::Object(_) => None,
            _ => {
                errors.add(format!("{field}.editedArgs"), "must be an object of the call's arguments");
                return None;
            }
        };
        return Some(AnswerBody { value: Value::Bool(approved), comment, edited_arguments: edited });
    }
    let value = match (question.response_type, &payload) {
        // A confirmation's boolean, or an object with one boolean (what a schema of one property gives).
        (ResponseType::Boolean, Value::Object(entries)) if entries.len() == 1 => {
            entries.values().next().cloned().unwrap_or(Value::Null)
        }
        _ => payload,
    };
    Some(AnswerBody { value, comment, edited_arguments: None })
}

pub(super) fn is_approval(question: &Question) -> bool {
    question.kind == QuestionKind::Approval || question.response_type == ResponseType::Approval
}

// The stream ------------------------------------------------------------------------------------------------------
