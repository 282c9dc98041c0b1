//! Answering from the question page's form, which works without JavaScript: urlencoded, or multipart with the
//! files its inputs chose.

use axum::{
    Form,
    extract::{FromRequest, Request, State},
    http::header,
    response::{IntoResponse, Redirect, Response},
};
use axum_extra::extract::CookieJar;

use super::url_escape;
use crate::credentials::{Caller, Credential};
use crate::doors::auth::{csrf_matches, session_caller};
use crate::error::AppError;
use crate::state::AppState;

/// `POST /ui/answer/{id}`: the answer form of the question page (works without JavaScript), urlencoded or, when it
/// has a file input, `multipart/form-data`: each file chosen is uploaded as `POST /api/v1/files` would, and its
/// input's value becomes the upload's id. On success it goes back to the question, which then shows who answered;
/// on a refusal it goes back with the reason, and the page shows what was sent again with each problem beside its
/// input (see [`crate::doors::web::answer_drafts`]).
pub(super) async fn answer_from_form(
    State(state): State<AppState>,
    jar: CookieJar,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: Request,
) -> Result<Response, AppError> {
    let Some(caller) = session_caller(&state, &jar).await? else {
        return Ok(Redirect::to(&format!("/signin?next={}", url_escape(&format!("/questions/{id}")))).into_response());
    };
    let Credential::Session { csrf_token } = &caller.credential else {
        return Err(AppError::Unauthorized("sign in first".into()));
    };
    let page = format!("/questions/{id}");
    let id = uuid::Uuid::parse_str(&id).map_err(|_| AppError::NotFound("question"))?;
    let mut draft = app::AnswerDraft::default();
    let read = read_answer_form(&state, &caller, csrf_token, request, &mut draft).await;
    // A file kept from an earlier send comes back as its id alone: it stays shown as uploaded however many times
    // the form comes back (another refusal, an added row), so nobody has to choose it again.
    if let Some(earlier) = state.answer_drafts.get(caller.principal.id, id) {
        for (name, file) in earlier.files {
            let sent_again = draft.values.iter().any(|(n, v)| n == &name && *v == file.file_id.to_string());
            if sent_again {
                draft.files.entry(name).or_insert(file);
            }
        }
    }
    let fields = match read {
        Ok(fields) => fields,
        Err(err @ (AppError::Invalid { .. } | AppError::TooLarge(_))) => {
            // An upload refused: what else was sent is kept, and the page says why.
            draft.errors = field_errors(&err);
            state.answer_drafts.keep(caller.principal.id, id, draft);
            return Ok(Redirect::to(&format!("{page}?error=invalid")).into_response());
        }
        Err(err) => return Err(err),
    };
    // "Add row": nothing is answered; the page comes back with what was typed and one row more in that table.
    if let Some(table) = fields.iter().find(|(name, _)| name == app::ADD_ROW).map(|(_, table)| table.clone()) {
        let rows = app::rows_input(&table);
        let shown = draft.value(&rows).and_then(|n| n.parse::<u32>().ok()).unwrap_or(0);
        draft.values.retain(|(name, _)| name != &rows && name != app::ADD_ROW);
        draft.values.push((rows, (shown + 1).to_string()));
        state.answer_drafts.keep(caller.principal.id, id, draft);
        return Ok(Redirect::to(&page).into_response());
    }
    let row = state.store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?;
    let question = row.to_question(&caller.principal.workspace)?;
    let outcome = match crate::questions::answer_from_form_fields(&question, &fields) {
        Ok(answer) => crate::questions::answer_question(&state.answering(), &caller, id, answer, crate::store::now())
            .await
            .map(|_| ()),
        Err(err) => Err(err),
    };
    match outcome {
        Ok(()) => {
            state.answer_drafts.forget(caller.principal.id, id);
            Ok(Redirect::to(&page).into_response())
        }
        // The error's code: the page shows a sentence of its own for it, never text taken from the URL.
        Err(err @ (AppError::Invalid { .. } | AppError::Conflict { .. } | AppError::Forbidden(_))) => {
            draft.errors = field_errors(&err);
            state.answer_drafts.keep(caller.principal.id, id, draft);
            Ok(Redirect::to(&format!("{page}?error={}", err.status_and_code().1)).into_response())
        }
        Err(err) => Err(err),
    }
}

/// The problems a refusal names, by path (`value.<key>`, ...), for the page to show beside the inputs.
fn field_errors(err: &AppError) -> std::collections::BTreeMap<String, String> {
    let details = err.detail().details;
    let fields = details.as_ref().and_then(|d| d.get("fields")).and_then(|f| f.as_object());
    let mut errors: std::collections::BTreeMap<String, String> = fields
        .into_iter()
        .flatten()
        .map(|(path, problem)| (path.clone(), problem.as_str().map_or_else(|| problem.to_string(), str::to_owned)))
        .collect();
    if let AppError::TooLarge(message) = err {
        errors.insert("file".into(), message.clone());
    }
    errors
}

/// The answer form's fields, after its CSRF token is checked; the files of a multipart form are uploaded as they
/// come (their inputs' values become the uploads' ids). What was sent goes into `draft` as it is read.
async fn read_answer_form(
    state: &AppState,
    caller: &Caller,
    csrf_token: &str,
    request: Request,
    draft: &mut app::AnswerDraft,
) -> Result<Vec<(String, String)>, AppError> {
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let multipart = content_type.as_deref().filter(|ct| ct.to_ascii_lowercase().starts_with("multipart/form-data"));
    let Some(content_type) = multipart else {
        let Form(fields) = Form::<Vec<(String, String)>>::from_request(request, state)
            .await
            .map_err(|err| AppError::BadRequest(format!("the form could not be read: {err}")))?;
        if !csrf_matches(csrf_token, sent_csrf(&fields)) {
            return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
        }
        draft.values = fields.iter().filter(|(name, _)| name != "csrf").cloned().collect();
        return Ok(fields);
    };
    use futures::StreamExt;
    let max = state.config.files.max_upload_bytes;
    let boundary = multer::parse_boundary(content_type)
        .map_err(|err| AppError::BadRequest(format!("the multipart body has no boundary: {err}")))?;
    // The files and the form's text together; each file's own bound is the upload's.
    let limits = multer::SizeLimit::new().whole_stream(max.saturating_mul(2).saturating_add(256 * 1024));
    let body = request.into_body().into_data_stream();
    let mut form = multer::Multipart::with_constraints(body, boundary, multer::Constraints::new().size_limit(limits));
    let unreadable = |err: multer::Error| match err {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            crate::files::too_large(max)
        }
        other => AppError::BadRequest(format!("the form could not be read: {other}")),
    };
    let mut fields = Vec::new();
    let mut csrf_checked = false;
    while let Some(part) = form.next_field().await.map_err(unreadable)? {
        let name = part.name().unwrap_or_default().to_owned();
        match part.file_name().map(str::to_owned) {
            // A file input left empty.
            Some(file_name) if file_name.is_empty() => {
                part.bytes().await.map_err(unreadable)?;
            }
            Some(file_name) => {
                // The form puts its token first; nothing is stored for a request that has not shown it.
                csrf_checked = csrf_checked || csrf_matches(csrf_token, sent_csrf(&fields));
                if !csrf_checked {
                    return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
                }
                let meta = crate::files::UploadMeta {
                    name: Some(file_name),
                    media_type: part.content_type().map(ToString::to_string),
                };
                let bytes = part.map(|chunk| chunk.map_err(unreadable));
                let uploaded = state.uploading().upload(caller, meta, bytes).await.map_err(|err| match err {
                    AppError::Invalid { message, .. } => AppError::invalid_field(&answer_path(&name), message),
                    AppError::TooLarge(message) => AppError::invalid_field(&answer_path(&name), message),
                    other => other,
                })?;
                let file_id = uploaded.file_id.to_string();
                draft.values.push((name.clone(), file_id.clone()));
                draft.files.insert(name.clone(), uploaded);
                fields.push((name, file_id));
            }
            None => {
                let text = part.text().await.map_err(unreadable)?;
                if name != "csrf" {
                    draft.values.push((name.clone(), text.clone()));
                }
                fields.push((name, text));
            }
        }
    }
    if !csrf_matches(csrf_token, sent_csrf(&fields)) {
        return Err(AppError::Forbidden("missing or wrong CSRF token".into()));
    }
    Ok(fields)
}

/// The CSRF token a form sent.
fn sent_csrf(fields: &[(String, String)]) -> Option<&str> {
    fields.iter().find(|(name, _)| name == "csrf").map(|(_, value)| value.as_str())
}

/// The path the answer's checks name an input's value by: `field.<key>` is `value.<key>`, `value` is `value`.
fn answer_path(input: &str) -> String {
    input.strip_prefix("field.").map_or_else(|| input.to_owned(), |key| format!("value.{key}"))
}
