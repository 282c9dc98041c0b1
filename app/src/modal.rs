//! The live modal: a question asked while a Holdpoint page is open shows up at once, over whatever page it is.
//!
//! Questions asked while one is showing wait in a queue (one modal, a "1 of 3" counter), never stacked. When the
//! shown question is resolved elsewhere (another tab, the CLI, a default on timeout) the modal closes itself and a
//! notice says by whom or how. Keyboard: focus starts on the answer's primary control (Yes for a yes/no question,
//! Approve for an approval, the first input otherwise) and stays in the modal (Tab wraps); Escape defers the
//! question (it stays in the inbox), except from a field holding what the person typed, which it would lose.
//!
//! The modal comes up by itself, maybe while someone is typing elsewhere: for a moment after a question appears
//! (`focus::SETTLE_MS`), Enter and Space do not press the primary button the focus starts on, so a keystroke meant
//! for another field cannot answer it.

use std::collections::HashMap;

use leptos::prelude::*;
use uuid::Uuid;

use crate::answer::AnswerWidget;
use crate::components::{Badge, Countdown, EscalationChain, QuestionContext, describe_resolution};
use crate::live::use_live;
use crate::types::{Question, QuestionStatus};

/// What the modal does with one more question event.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueChange {
    /// A new pending question: it joins the queue.
    Queued,
    /// The question on show was resolved elsewhere: the modal closes with this notice.
    ClosedShown(String),
    /// A waiting question was resolved elsewhere: it leaves the queue quietly.
    Dropped,
    /// Nothing to do.
    Ignored,
}

/// The queue's rule for one event: `queue` holds the ids in order, the first one is on show. Only a question that
/// arrived while the page listened (`arrived`: asked, or handed over) joins it: a claim, an approval or a reminder
/// of one that was there before does not.
pub fn apply_event(queue: &mut Vec<Uuid>, seen: &mut Vec<Uuid>, question: &Question, arrived: bool) -> QueueChange {
    let position = queue.iter().position(|id| *id == question.id);
    match (question.status, position) {
        (QuestionStatus::Pending, None) if arrived && !seen.contains(&question.id) => {
            seen.push(question.id);
            queue.push(question.id);
            QueueChange::Queued
        }
        (QuestionStatus::Pending, _) => QueueChange::Ignored,
        (_, Some(0)) => {
            queue.remove(0);
            QueueChange::ClosedShown(format!("“{}” — {}", question.title, describe_resolution(question)))
        }
        (_, Some(i)) => {
            queue.remove(i);
            QueueChange::Dropped
        }
        (_, None) => QueueChange::Ignored,
    }
}

/// The modal, mounted once per page with the deferred module (see [`crate::deferred`]), which also brings the event
/// stream it follows; it renders nothing until a question arrives.
#[component]
pub fn LiveModal() -> impl IntoView {
    let live = use_live();
    let queue = RwSignal::new(Vec::<Uuid>::new());
    let questions = RwSignal::new(HashMap::<Uuid, Question>::new());
    let notice = RwSignal::new(None::<String>);
    let processed = StoredValue::new(0usize);
    let seen = StoredValue::new(Vec::<Uuid>::new());

    let show_notice = move |text: String| {
        notice.set(Some(text.clone()));
        set_timeout(
            move || {
                if notice.get_untracked().as_deref() == Some(text.as_str()) {
                    notice.set(None);
                }
            },
            std::time::Duration::from_secs(8),
        );
    };

    Effect::new(move |_| {
        live.questions.with(|events| {
            let start = processed.get_value().min(events.len());
            for question in &events[start..] {
                let mut seen_ids = seen.get_value();
                // Only a question the person may decide comes up; the others wait in the inbox for whom they are.
                let arrived =
                    live.arrived.with_untracked(|arrived| arrived.contains(&question.id)) && live.may_decide(question);
                let change = queue
                    .try_update(|queue| apply_event(queue, &mut seen_ids, question, arrived))
                    .unwrap_or(QueueChange::Ignored);
                seen.set_value(seen_ids);
                questions.update(|map| {
                    map.insert(question.id, question.clone());
                });
                if let QueueChange::ClosedShown(text) = change {
                    show_notice(text);
                }
            }
            processed.set_value(events.len());
        });
    });

    let current =
        Memo::new(move |_| queue.with(|q| q.first().copied()).and_then(|id| questions.with(|m| m.get(&id).cloned())));
    let current_id = Memo::new(move |_| current.with(|q| q.as_ref().map(|q| q.id)));

    let dialog = NodeRef::<leptos::html::Div>::new();
    let defer = move || {
        queue.update(|q| {
            if !q.is_empty() {
                q.remove(0);
            }
        });
    };
    let answered = Callback::new(move |question: Question| {
        queue.update(|q| q.retain(|id| *id != question.id));
        show_notice(match question.status {
            QuestionStatus::Pending => crate::components::answered_notice(&question),
            _ => format!("Answer sent: “{}”", question.title),
        });
    });

    // When the question on show came up (the browser's clock, in ms), for the guard against keys meant for elsewhere.
    let shown_at = StoredValue::new(0.0_f64);
    // Focus the answer's primary control as each question comes up, so the keyboard is already in the modal; once
    // the last one goes, give the focus back to where it was before the modal opened, as a dialog does.
    let was_open = StoredValue::new(false);
    Effect::new(move |_| {
        let open = current_id.get().is_some();
        if open {
            if !was_open.get_value() {
                focus::remember();
            }
            shown_at.set_value(focus::now());
            request_animation_frame(move || focus::first(dialog));
        } else if was_open.get_value() {
            focus::give_back();
        }
        was_open.set_value(open);
    });

    // On the window, not the dialog: a key pressed before the focus has moved into a newly shown question (or after
    // a click left it outside) still reaches the modal.
    focus::handle_keys(current_id, dialog, shown_at, defer);

    let waiting = Signal::derive(move || queue.with(Vec::len));
    let defer = Callback::new(move |()| defer());

    view! {
        {move || notice.get().map(|text| view! {
            <div class="toast" role="status" data-testid="modal-notice">{text}</div>
        })}
        {move || {
            current_id.get()?;
            let question = current.get_untracked()?;
            Some(question_dialog(DialogParts { question, waiting, dialog, answered, defer }))
        }}
    }
}

/// What the dialog shows and whom it tells.
struct DialogParts {
    question: Question,
    /// How many questions the queue holds, the shown one included.
    waiting: Signal<usize>,
    dialog: NodeRef<leptos::html::Div>,
    answered: Callback<Question>,
    defer: Callback<()>,
}

/// The dialog for the question on show.
fn question_dialog(parts: DialogParts) -> AnyView {
    let DialogParts { question, waiting, dialog, answered, defer } = parts;
    let title_id = format!("modal-title-{}", question.id.simple());
    let labelled_by = title_id.clone();
    view! {
        <div class="modal-backdrop">
            <div class="modal" role="dialog" aria-modal="true" aria-labelledby=labelled_by
                node_ref=dialog
                data-testid="live-modal" data-question-id=question.id.to_string()
                data-response-type=question.response_type.as_str()>
                <header class="modal-head">
                    <div class="question-meta">
                        <Badge text=question.kind.as_str().replace('_', " ") class="kind"/>
                        <Badge text=question.urgency.to_string() class=format!("urgency-{}", question.urgency)/>
                        {question.project.clone().map(|p| view! { <Badge text=p class="project"/> })}
                        {question.timeout_at.map(|t| view! { <Countdown deadline=t/> })}
                        <span class="spacer"></span>
                        <span class="muted" data-testid="modal-queue-count">
                            {move || match waiting.get() { 0 | 1 => String::new(), n => format!("1 of {n}") }}
                        </span>
                    </div>
                    <h2 id=title_id data-testid="modal-title">{question.title.clone()}</h2>
                </header>
                <div class="modal-body">
                    <EscalationChain question=question.clone() testid="modal"/>
                    <QuestionContext question=question.clone() testid="modal"/>
                    <AnswerWidget question=question.clone() prefix="modal" on_answered=answered/>
                </div>
                <footer class="modal-foot">
                    <a href=format!("/questions/{}", question.id) data-testid="modal-open-page">"Open as a page"</a>
                    <button type="button" class="link" data-testid="modal-defer" on:click=move |_| defer.run(())>"Later (Esc)"</button>
                </footer>
            </div>
        </div>
    }
    .into_any()
}

/// Keeping keyboard focus inside the dialog (browser only; the server renders no open modal).
#[cfg(feature = "hydrate")]
mod focus {
    use leptos::prelude::*;
    use wasm_bindgen::JsCast;

    /// The elements inside the dialog that take keyboard focus, in document order.
    fn focusable(dialog: NodeRef<leptos::html::Div>) -> Vec<web_sys::HtmlElement> {
        elements(
            dialog,
            "a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), \
             textarea:not([disabled]), [tabindex]:not([tabindex='-1'])",
        )
    }

    fn elements(dialog: NodeRef<leptos::html::Div>, selector: &str) -> Vec<web_sys::HtmlElement> {
        let Some(root) = dialog.get_untracked() else { return Vec::new() };
        let Ok(list) = root.query_selector_all(selector) else {
            return Vec::new();
        };
        (0..list.length())
            .filter_map(|i| list.item(i))
            .filter_map(|node| node.dyn_into::<web_sys::HtmlElement>().ok())
            .collect()
    }

    /// How long after a question comes up Enter and Space leave its buttons alone (ms): about the time a person
    /// needs to notice the modal and stop typing.
    pub const SETTLE_MS: f64 = 700.0;

    /// The browser's clock, in milliseconds.
    pub fn now() -> f64 {
        js_sys::Date::now()
    }

    thread_local! {
        /// What had the focus when the modal opened.
        static BEFORE: std::cell::RefCell<Option<web_sys::Element>> = const { std::cell::RefCell::new(None) };
    }

    /// Notes what has the focus as the modal opens.
    pub fn remember() {
        let active = web_sys::window().and_then(|w| w.document()).and_then(|d| d.active_element());
        BEFORE.with(|before| *before.borrow_mut() = active);
    }

    /// Gives the focus back to what had it when the modal opened, once the dialog is gone, if that is still on the
    /// page and the focus is nowhere else: a person who clicked or typed elsewhere meanwhile keeps their place.
    pub fn give_back() {
        let Some(before) = BEFORE.with(|before| before.borrow_mut().take()) else { return };
        request_animation_frame(move || {
            let document = web_sys::window().and_then(|w| w.document());
            let active = document.as_ref().and_then(web_sys::Document::active_element);
            let nowhere = match (&active, document.as_ref().and_then(web_sys::Document::body)) {
                (None, _) => true,
                (Some(active), Some(body)) => active == &*body,
                (Some(_), None) => false,
            };
            if nowhere
                && before.is_connected()
                && let Ok(element) = before.dyn_into::<web_sys::HtmlElement>()
            {
                let _ = element.focus();
            }
        });
    }

    /// Focuses the answer's primary control (marked `data-primary`), else its first control (not a link of the
    /// body), else anything focusable.
    pub fn first(dialog: NodeRef<leptos::html::Div>) {
        let primary = elements(dialog, ".answer-widget [data-primary]:not([disabled])");
        let controls = || elements(dialog, ".answer-widget :is(input, select, textarea, button):not([disabled])");
        if let Some(first) = primary
            .into_iter()
            .next()
            .or_else(|| controls().into_iter().next())
            .or_else(|| focusable(dialog).into_iter().next())
        {
            let _ = first.focus();
        }
    }

    /// Whether a key would press the primary button (where [`first`] put the focus) too soon after the question
    /// came up (see [`SETTLE_MS`]). A button reached with Tab was chosen; it is not held back.
    fn too_soon(
        dialog: NodeRef<leptos::html::Div>,
        shown_at: StoredValue<f64>,
        ev: &leptos::ev::KeyboardEvent,
    ) -> bool {
        let pressing = matches!(ev.key().as_str(), "Enter" | " ");
        let on_primary = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .filter(|el| el.tag_name() == "BUTTON" && el.has_attribute("data-primary"))
            .zip(dialog.get_untracked())
            .is_some_and(|(button, root)| root.contains(Some(&button)));
        pressing && on_primary && now() - shown_at.get_value() < SETTLE_MS
    }

    /// Whether the key was pressed in a text field of the dialog that holds something the person typed.
    fn typed_in(dialog: NodeRef<leptos::html::Div>, ev: &leptos::ev::KeyboardEvent) -> bool {
        let Some(target) = ev.target() else { return false };
        let value = match (
            target.clone().dyn_into::<web_sys::HtmlTextAreaElement>(),
            target.dyn_into::<web_sys::HtmlInputElement>(),
        ) {
            (Ok(area), _) => Some((area.value(), area.unchecked_into::<web_sys::Element>())),
            (_, Ok(input)) if matches!(input.type_().as_str(), "text" | "search" | "email" | "url" | "number") => {
                Some((input.value(), input.unchecked_into::<web_sys::Element>()))
            }
            _ => None,
        };
        value
            .filter(|(text, _)| !text.is_empty())
            .zip(dialog.get_untracked())
            .is_some_and(|((_, field), root)| root.contains(Some(&field)))
    }

    /// While a question is shown: Escape defers it (but not from a field holding typed text), Tab keeps the focus inside the dialog, and Enter or Space on the
    /// primary button does nothing until the question has been on show for [`SETTLE_MS`] (Space presses a button
    /// when the key comes up, Enter when it goes down).
    pub fn handle_keys(
        shown: Memo<Option<uuid::Uuid>>,
        dialog: NodeRef<leptos::html::Div>,
        shown_at: StoredValue<f64>,
        defer: impl Fn() + 'static,
    ) {
        let down = window_event_listener(leptos::ev::keydown, move |ev| {
            if shown.get_untracked().is_none() {
                return;
            }
            if too_soon(dialog, shown_at, &ev) {
                ev.prevent_default();
                return;
            }
            match ev.key().as_str() {
                // Escape in a field of the modal that holds what the person typed keeps it: "Later" defers.
                "Escape" if typed_in(dialog, &ev) => {}
                "Escape" => {
                    ev.prevent_default();
                    defer();
                }
                "Tab" => trap(dialog, &ev),
                _ => {}
            }
        });
        let up = window_event_listener(leptos::ev::keyup, move |ev| {
            if shown.get_untracked().is_some() && too_soon(dialog, shown_at, &ev) {
                ev.prevent_default();
            }
        });
        on_cleanup(move || {
            down.remove();
            up.remove();
        });
    }

    /// Tab on the last element goes to the first, Shift+Tab on the first to the last.
    fn trap(dialog: NodeRef<leptos::html::Div>, ev: &leptos::ev::KeyboardEvent) {
        let elements = focusable(dialog);
        let (Some(first), Some(last)) = (elements.first(), elements.last()) else { return };
        let active = document().active_element();
        let inside =
            active.as_ref().is_some_and(|a| elements.iter().any(|e| AsRef::<web_sys::Element>::as_ref(e) == a));
        let at =
            |el: &web_sys::HtmlElement| active.as_ref().is_some_and(|a| a == AsRef::<web_sys::Element>::as_ref(el));
        if ev.shift_key() && (at(first) || !inside) {
            ev.prevent_default();
            let _ = last.focus();
        } else if !ev.shift_key() && (at(last) || !inside) {
            ev.prevent_default();
            let _ = first.focus();
        }
    }
}

#[cfg(not(feature = "hydrate"))]
mod focus {
    use leptos::prelude::*;

    pub fn now() -> f64 {
        0.0
    }
    pub fn first(_: NodeRef<leptos::html::Div>) {}
    pub fn remember() {}
    pub fn give_back() {}
    pub fn handle_keys(
        _: Memo<Option<uuid::Uuid>>,
        _: NodeRef<leptos::html::Div>,
        _: StoredValue<f64>,
        _: impl Fn() + 'static,
    ) {
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::*;

    fn question(status: QuestionStatus) -> Question {
        crate::types::sample_question("Deploy?", status)
    }

    #[test]
    fn questions_queue_and_the_shown_one_closes_with_who_answered_it() {
        let (mut queue, mut seen) = (Vec::new(), Vec::new());
        let first = question(QuestionStatus::Pending);
        let second = question(QuestionStatus::Pending);
        assert_eq!(apply_event(&mut queue, &mut seen, &first, true), QueueChange::Queued);
        assert_eq!(apply_event(&mut queue, &mut seen, &second, true), QueueChange::Queued);
        assert_eq!(queue, [first.id, second.id]);
        // A pending question that did not arrive while the page listened (claimed, approved once, reminded) stays out.
        let older = question(QuestionStatus::Pending);
        assert_eq!(apply_event(&mut queue, &mut seen, &older, false), QueueChange::Ignored);
        assert_eq!(queue, [first.id, second.id]);

        let mut answered = first.clone();
        answered.status = QuestionStatus::Answered;
        answered.answered_by = Some("alice".into());
        answered.response = Some(AnswerBody { value: "ok".into(), comment: None, edited_arguments: None });
        match apply_event(&mut queue, &mut seen, &answered, false) {
            QueueChange::ClosedShown(text) => assert!(text.contains("alice"), "{text}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(queue, [second.id]);
        // A replayed "asked" event of a question already seen does not bring it back.
        assert_eq!(apply_event(&mut queue, &mut seen, &first, true), QueueChange::Ignored);
    }
}
