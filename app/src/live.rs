//! Live updates from the server's event stream (`/api/v1/events`), as signals shared by the whole page.
//!
//! One `EventSource` per page load, opened by [`provide_live`] once hydration is done ([`hydration_finished`]) (never
//! on the sign-in page, which has no session). Its code ([`subscribe`]) is part of the module fetched after
//! hydration (`crate::deferred`). The browser's `EventSource` reconnects by itself and sends `Last-Event-ID`, so
//! the server replays what a reconnecting page missed; this module only turns events into signal updates.

use leptos::prelude::*;

use crate::types::{Question, RunStatusEventData, SessionInfo};

/// The event log position a page was rendered at (provided by the server for each page request): the page's first
/// event stream starts there, so what happens between the render and the connection reaches the page too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderedAt(pub i64);

/// The `<meta>` the position travels in, from the server's render to the browser.
pub const RENDERED_AT_META: &str = "holdpoint-event-position";

/// What the page has heard since it loaded, oldest first (always empty on the server).
#[derive(Clone, Copy)]
pub struct Live {
    /// Every question event's question, as it is after the change.
    pub questions: ReadSignal<Vec<Question>>,
    /// The ids of the questions that arrived while the page listened: asked, or handed to someone new by an
    /// escalation or a delegation (`question_asked`, `question_escalated`), each added before its question reaches
    /// [`Live::questions`]. What the live modal and browser notifications show, as opposed to a claim, an approval
    /// or a reminder of a question that was there before.
    pub arrived: ReadSignal<Vec<uuid::Uuid>>,
    /// Every `run_status` event.
    pub runs: ReadSignal<Vec<RunStatusEventData>>,
    /// How often the stream has opened: pages that must not miss a change between their server render and the
    /// stream's start (the run pages) reload their data when it changes.
    pub opened: ReadSignal<u32>,
    /// Whether the stream was refused or lost and the page is trying it again: the page is not live meanwhile.
    pub reconnecting: ReadSignal<bool>,
    /// A clock that ticks every second in the browser, for countdowns.
    pub now: ReadSignal<chrono::DateTime<chrono::Utc>>,
    /// Who is signed in, once the browser has read it.
    pub viewer: ReadSignal<Option<SessionInfo>>,
}

impl Live {
    /// Whether the signed-in person may decide `question` (see [`Question::refusal_to_decide`]): the live modal and
    /// browser notifications bring up only the questions that are theirs. Until the page knows who is signed in,
    /// every question is.
    pub fn may_decide(&self, question: &Question) -> bool {
        self.viewer.with_untracked(|viewer| {
            viewer.as_ref().is_none_or(|viewer| question.refusal_to_decide(viewer.decider()).is_none())
        })
    }
}

/// Creates the page's live signals and, in the browser, opens the event stream. Called once, by the root component.
pub fn provide_live() {
    let (questions, set_questions) = signal(Vec::<Question>::new());
    let (arrived, set_arrived) = signal(Vec::<uuid::Uuid>::new());
    let (runs, set_runs) = signal(Vec::<RunStatusEventData>::new());
    let (now, set_now) = signal(chrono::Utc::now());
    let (opened, set_opened) = signal(0u32);
    let (reconnecting, set_reconnecting) = signal(false);
    let (viewer, set_viewer) = signal(None::<SessionInfo>);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        // Tracked: the effect runs again, once, when hydration is done.
        if !hydrated() {
            return;
        }
        let signed_in = window().location().pathname().map(|p| p != "/signin").unwrap_or(false);
        if signed_in {
            let feeds = Feeds {
                questions: set_questions,
                arrived: set_arrived,
                runs: set_runs,
                opened: set_opened,
                reconnecting: set_reconnecting,
            };
            // Who is signed in is known before the first event is heard, so the first question to arrive comes up
            // only for whom it is.
            leptos::task::spawn_local(async move {
                if let Ok(session) = crate::api::session().await {
                    set_viewer.set(Some(session));
                }
                crate::deferred::listen(feeds);
            });
        }
        if let Ok(handle) =
            set_interval_with_handle(move || set_now.set(chrono::Utc::now()), std::time::Duration::from_secs(1))
        {
            on_cleanup(move || handle.clear());
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (set_questions, set_arrived, set_runs, set_now, set_opened, set_reconnecting, set_viewer);
    provide_context(Live { questions, arrived, runs, opened, reconnecting, now, viewer });
}

#[cfg(feature = "hydrate")]
thread_local! {
    /// Whether the page's hydration is done. A change to the page before then (an event from the stream, a data
    /// reload it causes, a clock tick) would meet server HTML the page's module has not walked yet: hydration
    /// is asynchronous since the pages are lazy routes, and a part rendered from newer data than the server's
    /// does not match it.
    static HYDRATED: ArcRwSignal<bool> = ArcRwSignal::new(false);
}

/// Called by the browser entry point once the page is hydrated: starts the live parts and marks `<body>` with
/// `data-hydrated` (tests and curious people can tell the page is live).
#[cfg(feature = "hydrate")]
pub fn hydration_finished() {
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
    HYDRATED.with(|hydrated| hydrated.set(true));
}

/// Whether the page's hydration is done (tracked: an effect that reads it runs again when it is).
#[cfg(feature = "hydrate")]
pub fn hydrated() -> bool {
    HYDRATED.with(|hydrated| hydrated.get())
}

/// Where the event stream writes what it hears.
#[cfg(feature = "hydrate")]
pub struct Feeds {
    questions: WriteSignal<Vec<Question>>,
    arrived: WriteSignal<Vec<uuid::Uuid>>,
    runs: WriteSignal<Vec<RunStatusEventData>>,
    opened: WriteSignal<u32>,
    reconnecting: WriteSignal<bool>,
}

/// Opens the page's event stream; it lives as long as the page.
#[cfg(feature = "hydrate")]
pub fn subscribe(feeds: Feeds) {
    browser::subscribe(feeds);
}

/// The page's live signals.
pub fn use_live() -> Live {
    expect_context::<Live>()
}

/// Every question event the page has received since it loaded, oldest first (empty on the server).
pub fn use_question_updates() -> ReadSignal<Vec<Question>> {
    use_live().questions
}

#[cfg(feature = "hydrate")]
mod browser {
    use futures::StreamExt;
    use gloo_net::eventsource::{State, futures::EventSource};
    use leptos::prelude::*;

    use crate::types::{EventType, QuestionEventData, RunStatusEventData};

    const EVENTS: [EventType; 9] = [
        EventType::QuestionAsked,
        EventType::QuestionAnswered,
        EventType::QuestionExpired,
        EventType::QuestionCancelled,
        EventType::QuestionReminded,
        EventType::QuestionEscalated,
        EventType::QuestionClaimed,
        EventType::QuestionApprovalAdded,
        EventType::RunStatus,
    ];

    async fn sleep(duration: std::time::Duration) {
        let (done, wait) = futures::channel::oneshot::channel();
        set_timeout(
            move || {
                let _ = done.send(());
            },
            duration,
        );
        let _ = wait.await;
    }

    /// The first wait before opening a refused or lost stream again, and the longest.
    const RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
    const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

    fn mark_live(state: &str) {
        // For tests and the curious: whether events reach this page now.
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-live", state);
        }
    }

    pub fn subscribe(feeds: super::Feeds) {
        let super::Feeds {
            questions: set_questions,
            arrived: set_arrived,
            runs: set_runs,
            opened: set_opened,
            reconnecting,
        } = feeds;
        // From where the page was rendered; after that, from the last event heard.
        let mut position = document()
            .query_selector(&format!("meta[name=\"{}\"]", super::RENDERED_AT_META))
            .ok()
            .flatten()
            .and_then(|meta| meta.get_attribute("content"))
            .filter(|content| content.parse::<i64>().is_ok());
        // The page listens for as long as it is open. The browser opens a dropped stream again by itself, but not one
        // the server refused (an HTTP error: a restart behind a proxy, a rate limit, an ended session): that one is
        // opened again here, after a pause that grows, from the last event heard.
        leptos::task::spawn_local(async move {
            let mut pause = RETRY_FIRST;
            loop {
                let url = match &position {
                    Some(position) => format!("/api/v1/events?last_event_id={position}"),
                    None => "/api/v1/events".to_owned(),
                };
                match EventSource::new(&url) {
                    Ok(mut source) => {
                        let subscriptions: Vec<_> =
                            EVENTS.iter().filter_map(|event| source.subscribe(event.as_str()).ok()).collect();
                        // Events that arrive meanwhile wait in the subscriptions' buffers.
                        for _ in 0..300 {
                            match source.state() {
                                State::Open => {
                                    mark_live("open");
                                    reconnecting.set(false);
                                    set_opened.update(|n| *n += 1);
                                    pause = RETRY_FIRST;
                                    break;
                                }
                                State::Closed => break,
                                State::Connecting => sleep(std::time::Duration::from_millis(50)).await,
                            }
                        }
                        let mut messages = futures::stream::select_all(subscriptions);
                        while let Some(message) = messages.next().await {
                            let (name, event) = match message {
                                Ok(message) => message,
                                // Closed for good; otherwise the browser is already opening it again.
                                Err(_) if source.state() == State::Closed => break,
                                Err(_) => continue,
                            };
                            let id = event.last_event_id();
                            if !id.is_empty() {
                                position = Some(id);
                            }
                            let Some(text) = event.data().as_string() else {
                                continue;
                            };
                            if name == EventType::RunStatus.as_str() {
                                match crate::codec::from_json::<RunStatusEventData>(&text) {
                                    Ok(data) => set_runs.update(|runs| runs.push(data)),
                                    Err(err) => leptos::logging::warn!("unreadable run event: {err}"),
                                }
                                continue;
                            }
                            match crate::codec::from_json::<QuestionEventData>(&text) {
                                Ok(data) => {
                                    let arrived = [EventType::QuestionAsked, EventType::QuestionEscalated];
                                    if arrived.iter().any(|t| name == t.as_str()) {
                                        set_arrived.update(|arrived| arrived.push(data.question.id));
                                    }
                                    set_questions.update(|updates| updates.push(data.question))
                                }
                                Err(err) => leptos::logging::warn!("unreadable event: {err}"),
                            }
                        }
                    }
                    Err(err) => leptos::logging::error!("could not open the event stream: {err:?}"),
                }
                mark_live("closed");
                reconnecting.set(true);
                sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        });
    }
}
