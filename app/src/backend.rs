//! The seam between the UI's server functions and the server's store (server only).
//!
//! `app` cannot depend on the server crate (the server depends on `app`), so the server provides an implementation
//! of [`UiBackend`] as context and the server functions call it.

use std::sync::Arc;

use crate::types::{Page, Question, SessionInfo};

/// What the UI's server functions need from the server.
#[async_trait::async_trait]
pub trait UiBackend: Send + Sync + 'static {
    /// The pending questions of the session's workspace, newest first.
    async fn pending_questions(&self, session: &SessionInfo, limit: u32) -> Result<Page<Question>, String>;

    /// One question of the session's workspace (`None` if there is no such question there).
    async fn question(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<Question>, String>;
}

/// The context value the server provides to every page render and server function call.
#[derive(Clone)]
pub struct UiBackendHandle(pub Arc<dyn UiBackend>);
