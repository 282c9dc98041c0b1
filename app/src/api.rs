//! The browser's calls to the REST API (`/api/v1`), for actions and for data a page reads after its render: the
//! session cookie goes along by itself, and a state-changing call sends the session's CSRF token in `X-CSRF-Token`.
//! On the server these calls are never made (event handlers run only in the browser); there they answer with an
//! error.

use serde::{Serialize, de::DeserializeOwned};

use crate::types::ErrorDetail;

/// Why an API call failed, for people: the API's message and, for 422, its field-level details.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: String,
    pub message: String,
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    fn network(message: impl std::fmt::Display) -> Self {
        ApiError { code: "network".into(), message: format!("Could not reach Holdpoint: {message}"), details: None }
    }

    /// The message, followed by the field errors of a 422, one per line.
    pub fn describe(&self) -> String {
        let mut text = self.message.clone();
        if let Some(details) = &self.details {
            let fields = details.get("fields").and_then(|f| f.as_object()).or_else(|| details.as_object());
            if let Some(fields) = fields {
                for (field, problem) in fields {
                    let problem = problem.as_str().map(str::to_owned).unwrap_or_else(|| problem.to_string());
                    let line = format!("{field}: {problem}");
                    if !text.contains(&line) {
                        text.push('\n');
                        text.push_str(&line);
                    }
                }
            }
        }
        text
    }

    /// The field-level problems of a 422, by the path the server names (`value.<key>`, `value.<key>[row].<column>`).
    pub fn field_errors(&self) -> std::collections::HashMap<String, String> {
        let fields = self.details.as_ref().and_then(|d| d.get("fields")).and_then(|f| f.as_object());
        fields
            .into_iter()
            .flatten()
            .map(|(path, problem)| (path.clone(), problem.as_str().map_or_else(|| problem.to_string(), str::to_owned)))
            .collect()
    }
}

impl From<ErrorDetail> for ApiError {
    fn from(detail: ErrorDetail) -> Self {
        ApiError { code: detail.code, message: detail.message, details: detail.details }
    }
}

#[cfg(feature = "hydrate")]
thread_local! {
    static SESSION: std::cell::RefCell<Option<crate::types::SessionInfo>> = const { std::cell::RefCell::new(None) };
}

/// The page's session (its CSRF token, who is signed in with which role), read once per page load.
#[cfg(feature = "hydrate")]
pub async fn session() -> Result<crate::types::SessionInfo, ApiError> {
    if let Some(session) = SESSION.with(|s| s.borrow().clone()) {
        return Ok(session);
    }
    let session = crate::current_session().await.map_err(|e| ApiError {
        code: "unauthorized".into(),
        message: format!("Sign in again ({e})."),
        details: None,
    })?;
    SESSION.with(|s| *s.borrow_mut() = Some(session.clone()));
    Ok(session)
}

#[cfg(feature = "hydrate")]
async fn csrf_token() -> Result<String, ApiError> {
    Ok(session().await?.csrf_token)
}

/// `POST /api/v1{path}` with a JSON body; the JSON answer, or the API's error.
pub async fn post_json<B: Serialize, R: DeserializeOwned>(path: &str, body: &B) -> Result<R, ApiError> {
    send_json("POST", path, Some(body)).await
}

/// `GET /api/v1{path}`: the JSON answer, or the API's error. For what the page needs after its render (the inbox's
/// split view reads a question this way): a wire type's reader is already in the browser's code, where a server
/// function would bring its own client code along.
pub async fn get_json<R: DeserializeOwned>(path: &str) -> Result<R, ApiError> {
    send_json::<(), R>("GET", path, None).await
}

/// A call to `/api/v1{path}` (`GET`, or a state-changing `POST`, `PUT`, `PATCH`, `DELETE`), with an optional JSON body. The
/// JSON answer (`204 No Content` reads as `null`, so `R = ()` fits it), or the API's error.
pub async fn send_json<B: Serialize, R: DeserializeOwned>(
    method: &str,
    path: &str,
    body: Option<&B>,
) -> Result<R, ApiError> {
    #[cfg(feature = "hydrate")]
    {
        use gloo_net::http::{Method, RequestBuilder};
        let builder = RequestBuilder::new(&format!("/api/v1{path}"));
        // Reading changes nothing, so it needs no CSRF token.
        let builder = match method {
            "GET" => builder.method(Method::GET),
            "PATCH" => builder.method(Method::PATCH).header("X-CSRF-Token", &csrf_token().await?),
            "DELETE" => builder.method(Method::DELETE).header("X-CSRF-Token", &csrf_token().await?),
            "PUT" => builder.method(Method::PUT).header("X-CSRF-Token", &csrf_token().await?),
            _ => builder.method(Method::POST).header("X-CSRF-Token", &csrf_token().await?),
        };
        let request = match body {
            Some(body) => builder.json(body).map_err(ApiError::network)?,
            None => builder.build().map_err(ApiError::network)?,
        };
        read_response(request).await
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (method, path, body);
        Err(ApiError::network("only the browser calls the API"))
    }
}

/// `POST /api/v1/files?name=`: uploads a file a person picked or dropped, its bytes as the body with its own media
/// type; the reference an answer's `file` field takes, or the API's error (413 past the server's limit).
#[cfg(feature = "hydrate")]
pub async fn upload_file(file: web_sys::File) -> Result<crate::types::UploadedFile, ApiError> {
    use gloo_net::http::{Method, RequestBuilder};
    let name = String::from(js_sys::encode_uri_component(&file.name()));
    let media_type = Some(file.type_()).filter(|t| !t.is_empty()).unwrap_or_else(|| "application/octet-stream".into());
    let request = RequestBuilder::new(&format!("/api/v1/files?name={name}"))
        .method(Method::POST)
        .header("X-CSRF-Token", &csrf_token().await?)
        .header("Content-Type", &media_type)
        .body(file)
        .map_err(ApiError::network)?;
    read_response(request).await
}

/// Sends `request`; its JSON answer, or the API's error.
#[cfg(feature = "hydrate")]
async fn read_response<R: DeserializeOwned>(request: gloo_net::http::Request) -> Result<R, ApiError> {
    let response = request.send().await.map_err(ApiError::network)?;
    if response.ok() {
        let text = response.text().await.map_err(ApiError::network)?;
        let text = if text.trim().is_empty() { "null" } else { text.as_str() };
        crate::codec::from_json(text).map_err(ApiError::network)
    } else {
        let body = response.text().await.ok();
        match body.as_deref().map(crate::codec::from_json::<crate::types::ErrorBody>) {
            Some(Ok(body)) => Err(body.error.into()),
            _ => Err(ApiError {
                code: "http".into(),
                message: format!("Holdpoint answered {}", response.status()),
                details: None,
            }),
        }
    }
}
