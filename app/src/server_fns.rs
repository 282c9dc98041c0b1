//! Server functions: the UI's private calls into the server. Agents use the REST API instead.

use leptos::prelude::*;

use crate::types::{Page, Question, SessionInfo};

/// The signed-in session of this request, set by the server's session layer before any page or server function runs.
#[cfg(feature = "ssr")]
fn request_session() -> Result<SessionInfo, ServerFnError> {
    use_context::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<SessionInfo>().cloned())
        .ok_or_else(|| ServerFnError::new("not signed in"))
}

#[cfg(feature = "ssr")]
fn backend() -> Result<crate::backend::UiBackendHandle, ServerFnError> {
    use_context::<crate::backend::UiBackendHandle>().ok_or_else(|| ServerFnError::new("no backend in context"))
}

/// Who is signed in, for the top bar and for the CSRF token of forms.
#[server(prefix = "/ui/fn")]
pub async fn current_session() -> Result<SessionInfo, ServerFnError> {
    request_session()
}

/// One question, for its page.
#[server(prefix = "/ui/fn")]
pub async fn question_detail(id: uuid::Uuid) -> Result<Option<Question>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.question(&session, id).await.map_err(ServerFnError::new)
}

/// The pending questions shown in the inbox, newest first.
#[server(prefix = "/ui/fn")]
pub async fn inbox_questions() -> Result<Page<Question>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.pending_questions(&session, 200).await.map_err(ServerFnError::new)
}
