//! Live updates from the server's event stream (`/api/v1/events`), as signals.
//!
//! The browser's `EventSource` reconnects by itself and sends `Last-Event-ID`, so the server replays what a
//! reconnecting page missed; this module only turns events into signal updates.

use leptos::prelude::*;

use crate::types::Question;

/// Every question event the page has received since it loaded, oldest first (empty on the server).
pub fn use_question_updates() -> ReadSignal<Vec<Question>> {
    let (updates, set_updates) = signal(Vec::<Question>::new());
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| browser::subscribe(set_updates));
    #[cfg(not(feature = "hydrate"))]
    let _ = set_updates;
    updates
}

#[cfg(feature = "hydrate")]
mod browser {
    use futures::StreamExt;
    use gloo_net::eventsource::futures::EventSource;
    use leptos::prelude::*;

    use crate::types::{EventType, Question, QuestionEventData};

    const QUESTION_EVENTS: [EventType; 4] = [
        EventType::QuestionAsked,
        EventType::QuestionAnswered,
        EventType::QuestionExpired,
        EventType::QuestionCancelled,
    ];

    pub fn subscribe(set_updates: WriteSignal<Vec<Question>>) {
        let Ok(mut source) = EventSource::new("/api/v1/events") else {
            leptos::logging::error!("could not open the event stream");
            return;
        };
        let subscriptions: Vec<_> =
            QUESTION_EVENTS.iter().filter_map(|event| source.subscribe(event.as_str()).ok()).collect();
        let (task, abort) = futures::future::abortable(async move {
            // The source lives as long as the task: dropping it closes the connection.
            let _source = source;
            let mut messages = futures::stream::select_all(subscriptions);
            while let Some(message) = messages.next().await {
                let Ok((_, event)) = message else { continue };
                let Some(text) = event.data().as_string() else {
                    continue;
                };
                match serde_json::from_str::<QuestionEventData>(&text) {
                    Ok(data) => set_updates.update(|updates| updates.push(data.question)),
                    Err(err) => leptos::logging::warn!("unreadable event: {err}"),
                }
            }
        });
        leptos::task::spawn_local(async move {
            let _ = task.await;
        });
        on_cleanup(move || abort.abort());
    }
}
