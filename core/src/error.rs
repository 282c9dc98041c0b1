//! The one error type at the HTTP boundary, and the JSON extractor that turns bad bodies into it.
//!
//! Every failure leaves the server as `{"error": {"code", "message", "details"}}`. 5xx causes are logged
//! by the tracing layer and never sent: the client sees only `internal`.

use axum::{
    extract::{
        FromRequest, Request,
        rejection::{FormRejection, JsonRejection},
    },
    http::StatusCode,
    response::{IntoResponse, Response},
};
use holdpoint_types::{ErrorBody, ErrorDetail};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::store::StoreError;

/// Everything a request can fail with. Each variant's doc names its status code.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// 400: the request is malformed (bad JSON, bad query string).
    #[error("{0}")]
    BadRequest(String),
    /// 401: no credentials, or credentials that are not valid.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: valid credentials without the right to do this.
    #[error("{0}")]
    Forbidden(String),
    /// 404: nothing of that kind with that id in the caller's workspace.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 409: the object is not in a state that allows this.
    #[error("{message}")]
    Conflict { message: String, details: Option<Value> },
    /// 413: the body or one of its parts is larger than allowed.
    #[error("{0}")]
    TooLarge(String),
    /// 422: well-formed but invalid; `details` has field-level errors.
    #[error("{message}")]
    Invalid { message: String, details: Option<Value> },
    /// 429: a rate limit is exhausted; the response carries `Retry-After` (seconds) and `details` names the limit.
    #[error("too many requests ({limit}); retry in {retry_after_seconds} s")]
    RateLimited { limit: &'static str, retry_after_seconds: u64 },
    /// 500: anything else. The cause is logged, never sent.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl AppError {
    /// The status code and the stable machine code of this error.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            AppError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            AppError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            AppError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            AppError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            AppError::Conflict { .. } => (StatusCode::CONFLICT, "conflict"),
            AppError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            AppError::Invalid { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            AppError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            AppError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// A 422 with one field-level error: `details.fields[field] = message`.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        AppError::Invalid {
            message: format!("{field}: {message}"),
            details: Some(serde_json::json!({ "fields": { field: message } })),
        }
    }

    /// The body's `error` object, e.g. for one item of a batch.
    pub fn detail(&self) -> ErrorDetail {
        let (_, code) = self.status_and_code();
        ErrorDetail { code: code.to_owned(), message: self.to_string(), details: self.details() }
    }

    /// The `details` of the error body.
    fn details(&self) -> Option<Value> {
        match self {
            AppError::Conflict { details, .. } | AppError::Invalid { details, .. } => details.clone(),
            AppError::RateLimited { limit, retry_after_seconds } => {
                Some(serde_json::json!({ "limit": limit, "retry_after_seconds": retry_after_seconds }))
            }
            _ => None,
        }
    }

    pub fn internal(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        AppError::Internal(Box::new(err))
    }
}

impl From<StoreError> for AppError {
    fn from(err: StoreError) -> Self {
        AppError::internal(err)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, _) = self.status_and_code();
        if let AppError::Internal(cause) = &self {
            tracing::error!(error = %cause, "internal error");
        }
        let mut response = (status, axum::Json(ErrorBody { error: self.detail() })).into_response();
        if let AppError::RateLimited { retry_after_seconds, .. } = &self {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, (*retry_after_seconds).into());
        }
        if let AppError::Unauthorized(_) = &self {
            // RFC 6750: a 401 names the scheme it wants, which MCP clients and HTTP libraries look for.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"holdpoint\""),
            );
        }
        response
    }
}

/// Builds the error response for a bare status (e.g. from a tower layer) in the one error shape.
pub fn error_for_status(status: StatusCode) -> AppError {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => AppError::TooLarge("request body is too large".into()),
        StatusCode::NOT_FOUND => AppError::NotFound("route"),
        StatusCode::METHOD_NOT_ALLOWED => AppError::BadRequest("method not allowed on this path".into()),
        StatusCode::UNAUTHORIZED => AppError::Unauthorized("authentication required".into()),
        _ => AppError::BadRequest(status.canonical_reason().unwrap_or("bad request").to_owned()),
    }
}

/// `axum::Json`, but a body that cannot be read becomes an [`AppError`] in the spec's shape.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// `axum::Form`, but a form that cannot be read becomes an [`AppError`] in the one error shape.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiForm<T>(pub T);

impl<S, T> FromRequest<S> for ApiForm<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Form::<T>::from_request(req, state).await {
            Ok(axum::Form(value)) => Ok(ApiForm(value)),
            Err(FormRejection::FailedToDeserializeForm(err)) => Err(form_does_not_fit(&err.body_text())),
            Err(FormRejection::FailedToDeserializeFormBody(err)) => Err(form_does_not_fit(&err.body_text())),
            Err(FormRejection::BytesRejection(err)) if err.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(AppError::TooLarge("request body is too large".into()))
            }
            Err(other) => Err(AppError::BadRequest(other.body_text())),
        }
    }
}

fn form_does_not_fit(problem: &str) -> AppError {
    AppError::Invalid { message: format!("the form does not fit: {problem}"), details: None }
}

fn json_rejection(rejection: JsonRejection) -> AppError {
    match rejection {
        JsonRejection::JsonDataError(err) => match body_field_error(&err) {
            Some((field, problem)) => AppError::Invalid {
                message: format!("the body does not fit: {field}: {problem}"),
                details: Some(serde_json::json!({ "fields": { field: problem } })),
            },
            None => AppError::Invalid { message: format!("the body does not fit: {}", err.body_text()), details: None },
        },
        JsonRejection::BytesRejection(err) if err.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            AppError::TooLarge("request body is too large".into())
        }
        other => AppError::BadRequest(other.body_text()),
    }
}

/// Where in the body a value did not fit, and why, as `details.fields` names fields (`upstream.url`,
/// `fields[0].min`): read from the path axum's JSON extractor tracks while it deserializes.
fn body_field_error(err: &axum::extract::rejection::JsonDataError) -> Option<(String, String)> {
    let mut source = std::error::Error::source(err);
    while let Some(error) = source {
        if let Some(found) = error.downcast_ref::<serde_path_to_error::Error<serde_json::Error>>() {
            let mut field = String::new();
            for segment in found.path().iter() {
                match segment {
                    serde_path_to_error::Segment::Seq { index } => field.push_str(&format!("[{index}]")),
                    serde_path_to_error::Segment::Map { key } | serde_path_to_error::Segment::Enum { variant: key } => {
                        if !field.is_empty() {
                            field.push('.');
                        }
                        field.push_str(key);
                    }
                    serde_path_to_error::Segment::Unknown => {}
                }
            }
            // serde_json's message ends with where in the text it stopped, which the field's name says better.
            let text = found.inner().to_string();
            let problem = text.rsplit_once(" at line ").map_or(text.as_str(), |(problem, _)| problem);
            let named = |prefix: &str| problem.strip_prefix(prefix).and_then(|rest| rest.split('`').next());
            let (field, problem) = match (named("missing field `"), named("unknown field `")) {
                (Some(missing), _) => (join(&field, missing), "is required".to_owned()),
                (None, Some(unknown)) if !field.ends_with(unknown) => (join(&field, unknown), problem.to_owned()),
                _ if field.is_empty() => return None,
                _ => (field, problem.to_owned()),
            };
            return Some((field, problem));
        }
        source = error.source();
    }
    None
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

impl<T: serde::Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// What every handler returns.
pub type ApiResult<T> = Result<T, AppError>;

pub use crate::causes::error_chain;
