//! Who holds each MCP session, and for how long.
//!
//! rmcp's session manager knows sessions but not callers, and ends a session after a fixed time without
//! messages, however long a tool call in it waits for a person. So Holdpoint keeps the sessions' book here:
//!
//! - A session belongs to the principal that opened it: a request naming it with another credential is told the
//!   session does not exist (404, which makes a client open one of its own).
//! - Each principal holds at most `HOLDPOINT_MCP_SESSIONS_PER_CALLER` sessions at once (429 beyond).
//! - A session idles out after `HOLDPOINT_MCP_SESSION_IDLE_SECONDS` without a request, but never while one of its
//!   tool calls waits: a wait may last as long as the question can (24 h).
//! - A session whose credential no longer authenticates its opener (a revoked token, a removed member, another
//!   role) is closed, which ends the tool calls waiting in it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use crate::credentials::Caller;
use crate::doors::auth::Proof;
use crate::error::AppError;
use crate::state::AppState;

/// The header MCP's streamable HTTP transport names a session in.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// See the module's documentation.
pub struct SessionOwners {
    manager: Arc<LocalSessionManager>,
    sessions: Mutex<HashMap<String, SessionOwner>>,
    per_caller: usize,
    idle: Duration,
}

struct SessionOwner {
    caller: Caller,
    proof: Proof,
    last_request: Instant,
    /// Tool calls of the session waiting for a person right now.
    waiting: usize,
    /// Whether its client declared MCP's tasks extension when it opened it: its `tasks/*` requests are then the
    /// extension's, not MCP 2025-11-25's ([`super::tasks_2025`]).
    tasks_extension: bool,
}

/// A tool call waiting in a session: the session does not idle out until it is dropped.
pub struct Waiting {
    owners: Weak<SessionOwners>,
    session: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(owners) = self.owners.upgrade()
            && let Some(owner) = owners.lock().get_mut(&self.session)
        {
            owner.waiting = owner.waiting.saturating_sub(1);
            // The wait's end counts as activity: the idle time starts over from here.
            owner.last_request = Instant::now();
        }
    }
}

impl SessionOwners {
    pub fn start(state: &AppState, manager: Arc<LocalSessionManager>) -> Arc<Self> {
        let owners = Arc::new(SessionOwners {
            manager,
            sessions: Mutex::new(HashMap::new()),
            per_caller: state.config.mcp_sessions_per_caller,
            idle: Duration::from_secs(state.config.mcp_session_idle_seconds.max(1)),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(close_sessions_of_revoked_credentials(state.clone(), Arc::downgrade(&owners)));
            runtime.spawn(close_idle_sessions(state.clone(), Arc::downgrade(&owners)));
        }
        owners
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, SessionOwner>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `session` was opened by `caller`'s principal; counts the request as the session's activity.
    fn owned_by(&self, session: &str, caller: &Caller) -> bool {
        match self.lock().get_mut(session) {
            Some(owner) if owner.caller.principal.id == caller.principal.id => {
                owner.last_request = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// Forgets the sessions the manager no longer has, then says whether `caller` may open one more.
    async fn may_open(&self, caller: &Caller) -> bool {
        let theirs: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, owner)| owner.caller.principal.id == caller.principal.id)
            .map(|(id, _)| id.clone())
            .collect();
        let mut live = 0;
        for id in theirs {
            if self.manager.has_session(&SessionId::from(id.as_str())).await.unwrap_or(false) {
                live += 1;
            } else {
                self.lock().remove(&id);
            }
        }
        live < self.per_caller
    }

    fn opened(&self, session: String, caller: Caller, proof: Proof, tasks_extension: bool) {
        let owner = SessionOwner { caller, proof, last_request: Instant::now(), waiting: 0, tasks_extension };
        self.lock().insert(session, owner);
    }

    /// Whether the client of `session` declared MCP's tasks extension when it opened it.
    pub fn declares_tasks_extension(&self, session: &str) -> bool {
        self.lock().get(session).is_some_and(|owner| owner.tasks_extension)
    }

    fn forget(&self, session: &str) {
        self.lock().remove(session);
    }

    /// Marks a tool call of `session` as waiting for a person until the returned guard is dropped.
    pub fn waiting(self: &Arc<Self>, session: Option<&str>) -> Option<Waiting> {
        let session = session?;
        let mut sessions = self.lock();
        let owner = sessions.get_mut(session)?;
        owner.waiting += 1;
        Some(Waiting { owners: Arc::downgrade(self), session: session.to_owned() })
    }

    async fn close(&self, session: &str) {
        self.forget(session);
        let _ = self.manager.close_session(&SessionId::from(session)).await;
    }
}

/// Closes every session whose credential no longer authenticates its opener, each time the store hears of a
/// credential change; ends with the server.
async fn close_sessions_of_revoked_credentials(state: AppState, owners: Weak<SessionOwners>) {
    let mut changes = state.store.credential_changes();
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = state.shutdown.cancelled() => return,
        }
        let Some(owners) = owners.upgrade() else { return };
        let sessions: Vec<(String, Caller, Proof)> =
            owners.lock().iter().map(|(id, owner)| (id.clone(), owner.caller.clone(), owner.proof.clone())).collect();
        for (id, caller, proof) in sessions {
            if !proof.still_authenticates(&state, &caller).await.unwrap_or(false) {
                owners.close(&id).await;
            }
        }
    }
}

/// Closes the sessions idle for longer than the idle time with no call waiting, and the sessions the manager holds
/// that nobody owns (a session whose opening response never reached the book), a sweep later; ends with the server.
async fn close_idle_sessions(state: AppState, owners: Weak<SessionOwners>) {
    let every = match owners.upgrade() {
        Some(owners) => (owners.idle / 3).clamp(Duration::from_millis(200), Duration::from_secs(60)),
        None => return,
    };
    let mut unowned_before: Vec<SessionId> = Vec::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = state.shutdown.cancelled() => return,
        }
        let Some(owners) = owners.upgrade() else { return };
        let idle: Vec<String> = owners
            .lock()
            .iter()
            .filter(|(_, owner)| owner.waiting == 0 && owner.last_request.elapsed() >= owners.idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            owners.close(&id).await;
        }
        let held: Vec<SessionId> = owners.manager.sessions.read().await.keys().cloned().collect();
        let unowned: Vec<SessionId> = {
            let book = owners.lock();
            held.into_iter().filter(|id| !book.contains_key(id.as_ref())).collect()
        };
        for id in unowned.iter().filter(|id| unowned_before.contains(id)) {
            let _ = owners.manager.close_session(id).await;
        }
        unowned_before = unowned;
    }
}

/// Resolves the bearer token (or 401 in the API's error shape), holds each session to the principal that opened
/// it, and passes the caller on to the tools.
pub async fn authenticate(
    State((state, owners)): State<(AppState, Arc<SessionOwners>)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => caller,
        Err(err) => return err.into_response(),
    };
    let session = parts.headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    match &session {
        Some(id) if !owners.owned_by(id, &caller) => {
            return AppError::NotFound("MCP session").into_response();
        }
        Some(_) => {}
        None if parts.method == Method::POST && !owners.may_open(&caller).await => {
            return AppError::RateLimited { limit: "mcp_sessions_per_caller", retry_after_seconds: 60 }.into_response();
        }
        None => {}
    }
    let proof = Proof::of(&parts.headers);
    let deleting = parts.method == Method::DELETE;
    parts.extensions.insert(caller.clone());
    let mut response = next.run(Request::from_parts(parts, body)).await;
    match session {
        Some(id) if deleting => {
            owners.forget(&id);
            // rmcp answers a session's end with 202, which clients read as "termination failed": it is done.
            if response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::OK;
            }
        }
        Some(_) => {}
        None => {
            let opened = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok());
            let tasks_extension = response.extensions().get::<super::tasks_2025::DeclaresTasksExtension>().is_some();
            if let (Some(id), Some(proof)) = (opened, proof) {
                owners.opened(id.to_owned(), caller, proof, tasks_extension);
            }
        }
    }
    response
}
