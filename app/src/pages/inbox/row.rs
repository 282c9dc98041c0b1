//! One row of the list: the question in two lines, its one-click answers, its age and deadline.

use leptos::prelude::*;

use super::Inbox;
use super::answering::{RowAction, RowState};
use crate::components::{Ago, Badge, Countdown, capitalise, short_id};
use crate::types::{QuestionStatus, QuestionSummary, ResponseType, Urgency};

/// What a row offers in place of answers: its one-click actions (Yes or Approve, No or Reject, the nth choice, each
/// with its label and style), or why the viewer may not decide it.
#[derive(Debug, Clone, PartialEq)]
struct RowOffer {
    actions: Vec<(RowAction, String, &'static str)>,
    refusal: Option<String>,
}

impl RowOffer {
    fn of(question: &QuestionSummary, inbox: Inbox) -> Self {
        if question.status != QuestionStatus::Pending {
            return RowOffer { actions: Vec::new(), refusal: None };
        }
        if let Some(refusal) = inbox.refusal(question) {
            return RowOffer { actions: Vec::new(), refusal: Some(refusal) };
        }
        let actions = match question.response_type {
            ResponseType::Boolean => {
                vec![(RowAction::Affirm, "Yes".into(), "primary"), (RowAction::Refuse, "No".into(), "")]
            }
            ResponseType::Approval => {
                vec![(RowAction::Affirm, "Approve".into(), "primary"), (RowAction::Refuse, "Reject".into(), "danger")]
            }
            _ => {
                question.choices.iter().enumerate().map(|(i, o)| (RowAction::Choice(i), o.label.clone(), "")).collect()
            }
        };
        RowOffer { actions, refusal: None }
    }
}

/// One row, as dense as a mail client's: a checkbox and the urgency mark; title and body preview on one line; kind,
/// response type, project, run and assignee on the next; the one-click answers; age and deadline on the right.
///
/// The row stays while its question changes (a claim, one approval of several, a hand-over): only the parts the
/// change touches are drawn again, so the button or link a person has focused keeps the focus.
#[component]
pub(super) fn QuestionRow(question: QuestionSummary, inbox: Inbox) -> impl IntoView {
    let id = question.id;
    let first = question.clone();
    let current = Memo::new(move |_| {
        inbox.shown.with(|shown| shown.iter().find(|q| q.id == id).cloned()).unwrap_or_else(|| first.clone())
    });
    let offer = Memo::new(move |_| current.with(|q| RowOffer::of(q, inbox)));
    let pending = move || current.with(|q| q.status == QuestionStatus::Pending);
    let urgency = move || current.with(|q| q.urgency);
    let is_cursor = move || inbox.cursor.get() == Some(id);
    let is_marked = move || inbox.marked.with(|m| m.contains(&id));
    let state = move || inbox.states.with(|s| s.get(&id).cloned());
    let sending = move || state() == Some(RowState::Sending);
    let title = question.title.clone();
    view! {
        <li
            class="question-row"
            class:urgency-critical=move || urgency() == Urgency::Critical
            class:urgency-high=move || urgency() == Urgency::High
            class:urgency-normal=move || urgency() == Urgency::Normal
            class:urgency-low=move || urgency() == Urgency::Low
            class:selected=is_cursor
            class:marked=is_marked
            aria-current=move || is_cursor().then_some("true")
            data-testid="question-item"
            data-question-id=id.to_string()
            data-kind=question.kind.as_str()
            data-response-type=question.response_type.as_str()
            data-urgency=move || urgency().as_str()
            data-status=move || current.with(|q| q.status.as_str())
            on:click=move |ev| {
                // A click on the row's own controls does what they do; anywhere else it puts the cursor there.
                if !clicked_control(&ev) {
                    inbox.cursor.set(Some(id));
                }
            }
        >
            <input type="checkbox" class="row-select" data-testid="row-select"
                aria-label=format!("Select “{title}”")
                prop:checked=is_marked
                on:change=move |_| inbox.toggle_mark(id)/>
            {move || {
                let urgency = urgency();
                view! { <span class=format!("urgency-mark urgency-{urgency}") data-testid="row-urgency">{urgency_label(urgency)}</span> }
            }}
            <div class="row-main">
                <div class="row-line">
                    <a class="question-title" href=format!("/questions/{id}") data-testid="question-link">
                        {question.title.clone()}
                    </a>
                    {(!question.preview.is_empty()).then(|| view! {
                        <span class="preview" data-testid="row-preview">{question.preview.clone()}</span>
                    })}
                </div>
                <div class="question-meta">
                    <span class="kind">{question.kind.as_str().replace('_', " ")}</span>
                    <span class="response-type" data-testid="row-response-type">
                        {question.response_type.as_str().replace('_', " ")}
                    </span>
                    {move || current.with(row_meta)}
                </div>
                {move || match state() {
                    Some(RowState::Failed(text)) => Some(view! { <p class="field-error" role="alert" data-testid="row-error">{text}</p> }),
                    _ => None,
                }}
            </div>
            <div class="row-actions" role="group" aria-label=format!("Answer “{}”", question.title)>
                {move || offer.with(|RowOffer { actions, refusal }| {
                    let buttons = actions.iter().cloned().map(|(action, label, class)| {
                        let testid = match action {
                            RowAction::Affirm => "row-affirm".to_owned(),
                            RowAction::Refuse => "row-refuse".to_owned(),
                            RowAction::Choice(i) => format!("row-choice-{}", i + 1),
                        };
                        view! {
                            <button type="button" class=class data-testid=testid title=label.clone()
                                disabled=sending on:click=move |_| inbox.act(id, action)>{label.clone()}</button>
                        }
                    }).collect_view();
                    (buttons, refusal.clone().map(row_refusal))
                })}
            </div>
            <div class="row-times">
                {move || pending().then(|| current.with(|q| q.timeout_at)).flatten().map(|t| view! { <Countdown deadline=t/> })}
                <Ago at=question.created_at/>
            </div>
        </li>
    }
}

/// The part of a row's meta line a change of its question can touch: status, project, run, assignee, approvals
/// and claim.
fn row_meta(question: &QuestionSummary) -> impl IntoView + use<> {
    let pending = question.status == QuestionStatus::Pending;
    view! {
        {(!pending).then(|| view! { <Badge text=question.status.to_string() class="status"/> })}
        {question.project.clone().map(|p| view! { <span class="project">{p}</span> })}
        {question.run_id.map(|run| view! {
            <a class="run" href=format!("/runs/{run}") data-testid="row-run">"run " {short_id(&run)}</a>
        })}
        {question.assignee.as_ref().map(|a| view! {
            <span class="assignee" data-testid="row-assignee">"→ " {a.to_string()}</span>
        })}
        {pending.then(|| question.approval_progress()).flatten().map(|p| view! {
            <span class="quorum" data-testid="row-quorum">{format!("{p} approvals")}</span>
        })}
        {pending.then(|| view! {
            <crate::components::ClaimedBy holder=question.claimed_by.clone() until=question.claim_expires_at
                testid="row-claimed-by"/>
        })}
    }
}

/// What a row says in place of its answers when they are not the viewer's to give: short, beside the meta line;
/// the reason on hover and for screen readers (the split view and the question's page say it in full).
fn row_refusal(reason: String) -> impl IntoView {
    let reason = format!("{}.", capitalise(&reason));
    view! {
        <span class="muted row-refused" data-testid="row-refused" title=reason.clone()>
            "Not yours to decide" <span class="visually-hidden">{format!(": {reason}")}</span>
        </span>
    }
}

/// Whether a click landed on a control of the row (a link, a button, the checkbox) rather than on the row itself.
#[cfg(feature = "hydrate")]
fn clicked_control(ev: &leptos::ev::MouseEvent) -> bool {
    use wasm_bindgen::JsCast;
    ev.target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .and_then(|el| el.closest("a, button, input, label").ok().flatten())
        .is_some()
}

/// Clicks are the browser's: on the server there are none.
#[cfg(not(feature = "hydrate"))]
fn clicked_control(_: &leptos::ev::MouseEvent) -> bool {
    false
}

/// The urgency as the row's mark shows it: words for the two that need attention, so critical and high differ in
/// text as well as in colour.
fn urgency_label(urgency: Urgency) -> &'static str {
    match urgency {
        Urgency::Critical => "CRITICAL",
        Urgency::High => "high",
        Urgency::Normal => "normal",
        Urgency::Low => "low",
    }
}
