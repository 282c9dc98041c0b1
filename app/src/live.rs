//! Live updates from the server's event stream (`/api/v1/events`), as signals shared by the whole page.
//!
//! One `EventSource` per page load, opened by [`provide_live`] once hydration is done ([`hydration_finished`]) (never
//! on the sign-in page, which has no session). Its code ([`subscribe`]) is part of the module fetched after
//! hydration (`crate::deferred`). The browser's `EventSource` reconnects by itself and sends `Last-Event-ID`, so
//! the server replays what a reconnecting page missed; this module only turns events into signal updates.

use leptos::prelude::*;

use crate::types::{Question, RunStatusEventData};

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
    /// Every `run_status` event.
    pub runs: ReadSignal<Vec<RunStatusEventData>>,
    /// How often the stream has opened: pages that must not miss a change between their server render and the
    /// stream's start (the run pages) reload their data when it changes.
    pub opened: ReadSignal<u32>,
    /// A clock that ticks every second in the browser, for countdowns.
    pub now: ReadSignal<chrono::DateTime<chrono::Utc>>,
}

/// Creates the page's live signals and, in the browser, opens the event stream. Called once, by the root component.
pub fn provide_live() {
    let (questions, set_questions) = signal(Vec::<Question>::new());
    let (runs, set_runs) = signal(Vec::<RunStatusEventData>::new());
    let (now, set_now) = signal(chrono::Utc::now());
    let (opened, set_opened) = signal(0u32);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        // Tracked: the effect runs again, once, when hydration is done.
        if !hydrated() {
            return;
        }
        let signed_in = window().location().pathname().map(|p| p != "/signin").unwrap_or(false);
        if signed_in {
            crate::deferred::listen(Feeds { questions: set_questions, runs: set_runs, opened: set_opened });
        }
        if let Ok(handle) =
            set_interval_with_handle(move || set_now.set(chrono::Utc::now()), std::time::Duration::from_secs(1))
        {
            on_cleanup(move || handle.clear());
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (set_questions, set_runs, set_now, set_opened);
    provide_context(Live { questions, runs, opened, now });
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
    runs: WriteSignal<Vec<RunStatusEventData>>,
    opened: WriteSignal<u32>,
}

/// Opens the page's event stream; it lives as long as the page.
#[cfg(feature = "hydrate")]
pub fn subscribe(feeds: Feeds) {
    browser::subscribe(feeds.questions, feeds.runs, feeds.opened);
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

    use crate::types::{EventType, Question, QuestionEventData, RunStatusEventData};

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

    pub fn subscribe(
        set_questions: WriteSignal<Vec<Question>>,
        set_runs: WriteSignal<Vec<RunStatusEventData>>,
        set_opened: WriteSignal<u32>,
    ) {
        // From where the page was rendered (later reconnections send Last-Event-ID themselves).
        let rendered_at = document()
            .query_selector(&format!("meta[name=\"{}\"]", super::RENDERED_AT_META))
            .ok()
            .flatten()
            .and_then(|meta| meta.get_attribute("content"))
            .and_then(|content| content.parse::<i64>().ok());
        let url = match rendered_at {
            Some(position) => format!("/api/v1/events?last_event_id={position}"),
            None => "/api/v1/events".to_owned(),
        };
        let Ok(mut source) = EventSource::new(&url) else {
            leptos::logging::error!("could not open the event stream");
            return;
        };
        let subscriptions: Vec<_> = EVENTS.iter().filter_map(|event| source.subscribe(event.as_str()).ok()).collect();
        // The page listens for as long as it is open.
        leptos::task::spawn_local(async move {
            // The source lives as long as the task: dropping it closes the connection.
            let source = source;
            // Events that arrive meanwhile wait in the subscriptions' buffers.
            for _ in 0..300 {
                if source.state() == State::Open {
                    // For tests and the curious: from now on, events reach this page.
                    if let Some(body) = document().body() {
                        let _ = body.set_attribute("data-live", "open");
                    }
                    set_opened.update(|n| *n += 1);
                    break;
                }
                sleep(std::time::Duration::from_millis(50)).await;
            }
            let mut messages = futures::stream::select_all(subscriptions);
            while let Some(message) = messages.next().await {
                let Ok((name, event)) = message else { continue };
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
                    Ok(data) => set_questions.update(|updates| updates.push(data.question)),
                    Err(err) => leptos::logging::warn!("unreadable event: {err}"),
                }
            }
        });
    }
}
