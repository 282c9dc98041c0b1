//! `/files`: uploads that answers' `file` fields reference, and their downloads (docs/api.md). Who may do which is
//! [`crate::files`]'; here the request becomes a stream of bytes, and a stored file a download.

use app::types::UploadedFile;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use serde::Deserialize;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::files::{self, UploadMeta};
use crate::state::AppState;

/// The path uploads are posted to; the body limit of other routes does not apply to it (see `limits::limit_body`):
/// its handler bounds what it reads by `HOLDPOINT_MAX_UPLOAD_BYTES`.
pub const UPLOAD_PATH: &str = "/api/v1/files";

/// What a multipart upload may carry besides its file's bytes: part headers, boundaries, a CSRF field.
const MULTIPART_OVERHEAD: u64 = 64 * 1024;

/// How much of a refused upload's body is still read, and thrown away, before the 413 is sent: a client that writes
/// its whole body before it reads the response (Node's `fetch`) sees only a broken pipe if the server stops reading
/// and closes first. Twice the limit; a body larger still is cut off at once.
fn drain_limit(max: u64) -> u64 {
    max.saturating_mul(2).saturating_add(MULTIPART_OVERHEAD)
}

/// The 413 of a body whose declared `length` is over the limit `max`, sent once the body is read (and dropped) if it
/// is within [`drain_limit`], at once otherwise.
async fn refused<E>(body: impl futures::Stream<Item = Result<bytes::Bytes, E>>, length: u64, max: u64) -> AppError {
    if length <= drain_limit(max) {
        drain(body, drain_limit(max)).await;
    }
    files::too_large(max)
}

/// Reads and drops what is left of `body`, up to `limit` bytes, so the refusal that follows reaches the client.
async fn drain<E>(body: impl futures::Stream<Item = Result<bytes::Bytes, E>>, limit: u64) {
    let mut body = std::pin::pin!(body);
    let mut read = 0u64;
    while let Some(Ok(chunk)) = body.next().await {
        read += chunk.len() as u64;
        if read > limit {
            return;
        }
    }
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(upload_file)).routes(routes!(download_file))
}

/// The query of an upload.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct UploadQuery {
    /// The file's name (1..=255 characters); a multipart part's own file name is used when this is absent.
    name: Option<String>,
}

/// `POST /files`: uploads a file for an answer — the raw body with its `Content-Type` and `?name=`, or
/// `multipart/form-data` with the file in the part named `file`. At most `HOLDPOINT_MAX_UPLOAD_BYTES` (413 beyond,
/// and nothing is stored). By tokens and people that may answer questions; the file is theirs to reference in an
/// answer's `file` field within 24 hours, after which an unreferenced upload is removed.
#[utoipa::path(post, path = "/files", tag = "files", params(UploadQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "The file's bytes, with its media type as Content-Type; or multipart/form-data with a `file` part"),
    responses((status = 201, description = "Stored", body = UploadedFile), ErrorResponses))]
async fn upload_file(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<UploadQuery>,
    request: Request,
) -> ApiResult<(StatusCode, ApiJson<UploadedFile>)> {
    // Before a byte of the body is read.
    files::require_upload_right(&caller)?;
    let max = state.config.files.max_upload_bytes;
    let headers = request.headers();
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let mut body = request.into_body().into_data_stream();
    let uploading = state.uploading();
    let multipart = content_type.as_deref().filter(|ct| ct.to_ascii_lowercase().starts_with("multipart/form-data"));
    let uploaded = match multipart {
        None => {
            if let Some(length) = declared.filter(|length| *length > max) {
                return Err(refused(body, length, max).await);
            }
            let meta = UploadMeta { name: query.name, media_type: content_type };
            let mut chunks = body.by_ref().map(|chunk| chunk.map_err(unreadable));
            match uploading.upload(&caller, meta, &mut chunks).await {
                Err(AppError::TooLarge(message)) => {
                    drain(chunks, drain_limit(max)).await;
                    return Err(AppError::TooLarge(message));
                }
                other => other?,
            }
        }
        Some(content_type) => {
            if let Some(length) = declared.filter(|length| *length > max + MULTIPART_OVERHEAD) {
                return Err(refused(body, length, max).await);
            }
            let boundary = multer::parse_boundary(content_type)
                .map_err(|err| AppError::BadRequest(format!("the multipart body has no boundary: {err}")))?;
            let limits = multer::SizeLimit::new().whole_stream(max + MULTIPART_OVERHEAD);
            let mut form =
                multer::Multipart::with_constraints(body, boundary, multer::Constraints::new().size_limit(limits));
            loop {
                let Some(part) = form.next_field().await.map_err(|err| multipart_error(err, max))? else {
                    return Err(AppError::invalid_field("file", "the form has no part named file"));
                };
                if part.name() != Some("file") {
                    continue;
                }
                let meta = UploadMeta {
                    name: query.name.or_else(|| part.file_name().map(str::to_owned)),
                    media_type: part.content_type().map(ToString::to_string),
                };
                let bytes = part.map(|chunk| chunk.map_err(|err| multipart_error(err, max)));
                match uploading.upload(&caller, meta, bytes).await {
                    Err(AppError::TooLarge(message)) => {
                        // Read on to the form's own bound (a little past the limit), so the 413 reaches most clients.
                        while let Ok(Some(_)) = form.next_field().await {}
                        return Err(AppError::TooLarge(message));
                    }
                    other => break other?,
                }
            }
        }
    };
    Ok((StatusCode::CREATED, ApiJson(uploaded)))
}

fn unreadable(err: axum::Error) -> AppError {
    AppError::BadRequest(format!("the upload could not be read: {err}"))
}

/// A multipart body that could not be read: 413 past its size, 400 otherwise.
fn multipart_error(err: multer::Error, max: u64) -> AppError {
    match err {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => files::too_large(max),
        other => AppError::BadRequest(format!("the multipart body could not be read: {other}")),
    }
}

/// `GET /files/{id}`: a file's bytes, as an attachment (`Content-Disposition: attachment`, `nosniff`), with its
/// media type unless a browser could run it (HTML, SVG, scripts: `application/octet-stream`). For whoever may see
/// the question whose answer references it (the agent that asked included); before an answer does, for its
/// uploader only.
#[utoipa::path(get, path = "/files/{id}", tag = "files",
    params(("id" = Uuid, Path, description = "The file's id (`file_id`)")),
    responses((status = 200, description = "The file's bytes", content_type = "application/octet-stream",
        body = Vec<u8>, headers(("Content-Disposition" = String, description = "attachment, with the file's name"),
        ("X-Content-Type-Options" = String, description = "nosniff"))), ErrorResponses))]
async fn download_file(State(state): State<AppState>, caller: Caller, Path(id): Path<Uuid>) -> ApiResult<Response> {
    let file = files::downloadable(state.store.as_ref(), &caller, id).await?;
    let bytes = state.files.read(file.workspace_id, file.id).await.map_err(|err| match err {
        object_store::Error::NotFound { .. } => AppError::NotFound("file"),
        other => AppError::internal(other),
    })?;
    let header_value = |text: &str| HeaderValue::from_str(text).map_err(AppError::internal);
    let mut response = Response::new(Body::from_stream(bytes));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header_value(files::served_media_type(&file.media_type))?);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(file.size));
    headers.insert(header::CONTENT_DISPOSITION, header_value(&files::content_disposition(&file.name))?);
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::ETAG, header_value(&format!("\"{}\"", file.sha256))?);
    Ok(response)
}
