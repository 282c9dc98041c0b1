//! `GET /api/v1/events`: the event log as Server-Sent Events.
//!
//! A client that reconnects with `Last-Event-ID` first gets every event it missed, replayed from the log, then the
//! live ones, with no gap and no duplicate: it subscribes to the hub *before* replaying and skips live events it
//! already got from the replay.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::{
    extract::{Query, State},
    http::HeaderMap,
    response::sse::{Event, KeepAlive, Sse},
};
use futures::Stream;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::doors::auth::Proof;
use crate::error::{ApiResult, AppError};
use crate::events::HubEvent;
use crate::state::AppState;
use crate::store::{EventRow, Store, StoreResult};
use crate::visibility::Visibility;

/// Comfortably under the spec's 15 s, so proxies with a 15 s idle timeout never cut a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
const REPLAY_BATCH: i64 = 500;
/// How often a stream checks its credential without being told of a change: what a change the store cannot hear
/// of (a session's expiry, a script editing the database) waits at most.
const CREDENTIAL_RECHECK: Duration = Duration::from_secs(60);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EventQuery {
    project: Option<String>,
    run_id: Option<Uuid>,
    /// Like the `Last-Event-ID` header (which wins if both are given), for a first connection that must not miss
    /// what happened since a page was rendered: browsers send the header only when they reconnect.
    last_event_id: Option<i64>,
}

/// Which events a subscriber wants.
#[derive(Debug, Clone)]
struct Subscription {
    workspace_id: Uuid,
    project: Option<String>,
    run_id: Option<Uuid>,
}

impl Subscription {
    fn wants(&self, workspace_id: Uuid, project: Option<&str>, run_id: Option<Uuid>) -> bool {
        workspace_id == self.workspace_id
            && self.project.as_deref().is_none_or(|p| Some(p) == project)
            && self.run_id.is_none_or(|r| Some(r) == run_id)
    }
}

/// What a caller that does not see its whole workspace (an `agent` token) sees of the stream: the events of the
/// questions and runs [`Visibility`] lets it see, live and replayed alike. Whose a question or a run is never
/// changes, so it is looked up once per stream and remembered.
struct OwnEventsOnly {
    visibility: Visibility,
    known: HashMap<Uuid, bool>,
}

impl OwnEventsOnly {
    /// A bound on what one stream remembers; past it, it starts over (and looks up again).
    const REMEMBERED: usize = 10_000;

    fn for_caller(caller: &Caller) -> Option<Self> {
        let visibility = caller.visibility();
        visibility.created_by_filter().map(|_| OwnEventsOnly { visibility, known: HashMap::new() })
    }

    async fn allows(
        &mut self,
        store: &dyn Store,
        workspace_id: Uuid,
        question_id: Option<Uuid>,
        run_id: Option<Uuid>,
    ) -> StoreResult<bool> {
        let Some(subject) = question_id.or(run_id) else {
            return Ok(false);
        };
        if let Some(&own) = self.known.get(&subject) {
            return Ok(own);
        }
        let creator = match question_id {
            Some(id) => store.question(workspace_id, id).await?.and_then(|question| question.created_by),
            None => store.run(workspace_id, subject).await?.and_then(|run| run.created_by),
        };
        let own = self.visibility.sees(creator);
        if self.known.len() >= Self::REMEMBERED {
            self.known.clear();
        }
        self.known.insert(subject, own);
        Ok(own)
    }
}

/// Whether `filter` (an agent's, if any) lets the event through; a failed lookup ends the stream, and the client
/// reconnects with its Last-Event-ID.
async fn passes(
    filter: &mut Option<OwnEventsOnly>,
    store: &dyn Store,
    workspace_id: Uuid,
    question_id: Option<Uuid>,
    run_id: Option<Uuid>,
) -> Option<bool> {
    let Some(filter) = filter else { return Some(true) };
    match filter.allows(store, workspace_id, question_id, run_id).await {
        Ok(allowed) => Some(allowed),
        Err(err) => {
            tracing::warn!(error = %err, "could not tell whose an event is; the client will reconnect");
            None
        }
    }
}

/// Whether the stream's caller is still who it was; a failed check ends the stream too (the client reconnects and
/// authenticates again).
async fn caller_holds(state: &AppState, caller: &Caller, proof: Option<&Proof>) -> bool {
    match proof {
        Some(proof) => proof.still_authenticates(state, caller).await.unwrap_or(false),
        None => false,
    }
}

/// Completes when the store hears of a credential change; never, for a store that hears of none.
async fn credential_changed(changes: &mut tokio::sync::watch::Receiver<u64>) {
    if changes.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn sse_event(id: i64, event_type: &str, data: &str) -> Event {
    Event::default().id(id.to_string()).event(event_type).data(data)
}

fn replayed(row: &EventRow) -> Event {
    sse_event(row.id, &row.event_type, &row.data.0.to_string())
}

fn live(event: &HubEvent) -> Event {
    sse_event(event.id, &event.event_type, &event.data)
}

/// The event stream: `question_asked`, `question_answered`, `question_expired`, `question_cancelled`,
/// `question_reminded`, `question_escalated`, `run_status`.
#[utoipa::path(get, path = "/events", tag = "events", params(EventQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "Replay every event after this id first")),
    responses((status = 200, description = "Server-Sent Events; each `data:` is JSON", content_type = "text/event-stream", body = String),
        crate::doors::http::openapi::ErrorResponses))]
async fn stream_events(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    query: Result<Query<EventQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let Query(query) = query.map_err(|err| AppError::BadRequest(err.body_text()))?;
    let last_event_id = match headers.get("last-event-id") {
        None => match query.last_event_id {
            Some(id) if id < 0 => return Err(AppError::BadRequest("last_event_id must be an event id".into())),
            other => other,
        },
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|id| *id >= 0)
                .ok_or_else(|| AppError::BadRequest("Last-Event-ID must be an event id".into()))?,
        ),
    };
    let slot = state
        .hub
        .open_stream(caller.principal.id, state.config.streams_per_caller)
        .ok_or(AppError::RateLimited { limit: "streams_per_caller", retry_after_seconds: KEEP_ALIVE.as_secs() })?;
    let subscription =
        Subscription { workspace_id: caller.workspace_id(), project: query.project, run_id: query.run_id };
    let mut own_only = OwnEventsOnly::for_caller(&caller);
    let (mut receiver, position) = state.hub.subscribe();
    let store = Arc::clone(&state.store);
    let subscriber = state.metrics.sse_subscriber();
    let shutdown = state.shutdown.clone();
    // A stream outlives the request that authenticated it: it ends as soon as its credential no longer would.
    let proof = Proof::of(&headers);
    let mut credentials = state.store.credential_changes();
    let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + CREDENTIAL_RECHECK, CREDENTIAL_RECHECK);

    let stream = async_stream::stream! {
        // Counted as open for as long as the stream lives.
        let _subscriber = subscriber;
        let _slot = slot;
        // Without Last-Event-ID a client wants what happens from now on. It is told where "now" is (an `id:`
        // without data, which sets its last event id and dispatches nothing): dropped before any event reached it,
        // it resumes from there and loses nothing that happened meanwhile.
        let mut last_sent = last_event_id.unwrap_or(position);
        if last_event_id.is_none() {
            yield Ok(Event::default().id(position.to_string()));
        }
        if last_event_id.is_some() {
            loop {
                // Only the caller's workspace: a replay from 0 reads what the caller may see, not every tenant's log.
                let rows = match store.workspace_events_after(subscription.workspace_id, last_sent, REPLAY_BATCH).await {
                    Ok(rows) => rows,
                    Err(err) => {
                        tracing::warn!(error = %err, "event replay failed; the client will reconnect");
                        return;
                    }
                };
                let done = (rows.len() as i64) < REPLAY_BATCH;
                for row in rows {
                    last_sent = row.id;
                    if subscription.wants(row.workspace_id, row.project.as_deref(), row.run_id) {
                        match passes(&mut own_only, store.as_ref(), row.workspace_id, row.question_id, row.run_id).await {
                            Some(true) => yield Ok(replayed(&row)),
                            Some(false) => {}
                            None => return,
                        }
                    }
                }
                if done {
                    break;
                }
            }
        }
        loop {
            let received = tokio::select! {
                received = receiver.recv() => received,
                () = shutdown.cancelled() => {
                    // The server is stopping: tell the client to reconnect (to another instance, or to this one
                    // once it is back); its Last-Event-ID loses nothing.
                    yield Ok(Event::default().event("reconnect").data(format!("{{\"last_event_id\":{last_sent}}}")));
                    return;
                }
                () = credential_changed(&mut credentials) => {
                    if !caller_holds(&state, &caller, proof.as_ref()).await {
                        return;
                    }
                    continue;
                }
                _ = recheck.tick() => {
                    if !caller_holds(&state, &caller, proof.as_ref()).await {
                        return;
                    }
                    continue;
                }
            };
            match received {
                Ok(event) => {
                    if event.id <= last_sent {
                        continue;
                    }
                    last_sent = event.id;
                    if subscription.wants(event.workspace_id, event.project.as_deref(), event.run_id) {
                        let allowed =
                            passes(&mut own_only, store.as_ref(), event.workspace_id, event.question_id, event.run_id);
                        match allowed.await {
                            Some(true) => yield Ok(live(&event)),
                            Some(false) => {}
                            None => return,
                        }
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    // Too slow to keep up: end the stream; the client reconnects with its Last-Event-ID and the
                    // replay fills the gap from the log.
                    yield Ok(Event::default().event("reconnect").data(format!("{{\"last_event_id\":{last_sent}}}")));
                    return;
                }
                Err(RecvError::Closed) => return,
            }
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
