//! The split view's second column: the question under the cursor in full, with its answer form.

use leptos::either::{Either, EitherOf3};
use leptos::prelude::*;
use uuid::Uuid;

use super::Inbox;
use crate::answer::AnswerWidget;
use crate::api::get_json;
use crate::components::{Badge, Countdown, EscalationChain, QuestionContext, capitalise, describe_resolution};
use crate::types::{Question, QuestionStatus};

/// The split view's second column on wide screens: the question under the cursor in full, with its answer form
/// ([`inbox_pane`], once the deferred module is in).
#[component]
pub(super) fn DetailPane(inbox: Inbox, updates: ReadSignal<Vec<Question>>) -> impl IntoView {
    let module_loaded = crate::deferred::module_loaded();
    view! {
        <aside class="detail-pane" aria-label="Selected question" data-testid="detail-pane">
            {move || match crate::deferred::show(module_loaded, crate::deferred::Part::InboxPane { inbox, updates }) {
                Some(pane) => Either::Left(pane),
                None => Either::Right(nothing_selected()),
            }}
        </aside>
    }
}

fn nothing_selected() -> impl IntoView {
    view! {
        <div class="empty">
            <p class="empty-title">"No question selected"</p>
            <p>"Click a row, or move with j and k, to read the question here and answer it."</p>
        </div>
    }
}

/// What the split view's column shows: the question under the cursor, fetched when the cursor moves and kept
/// current by the event stream (part of the deferred module, see [`crate::deferred`]).
pub(crate) fn inbox_pane(inbox: Inbox, updates: ReadSignal<Vec<Question>>) -> AnyView {
    let fetched = RwSignal::new(None::<Result<Question, String>>);
    Effect::new(move |_| {
        let Some(id) = inbox.cursor.get() else {
            fetched.set(None);
            return;
        };
        if fetched.with_untracked(|f| matches!(f, Some(Ok(q)) if q.id == id)) {
            return;
        }
        leptos::task::spawn_local(async move {
            let result = get_json::<Question>(&format!("/questions/{id}")).await.map_err(|err| err.describe());
            // A later move of the cursor wins over an answer that arrives late.
            if inbox.cursor.get_untracked() == Some(id) {
                fetched.set(Some(result));
            }
        });
    });
    // The newest state of the shown question: an event about it replaces what was fetched.
    let question = Memo::new(move |_| {
        let fetched = fetched.get()?;
        Some(fetched.map(|q| updates.with(|u| u.iter().rev().find(|u| u.id == q.id).cloned()).unwrap_or(q)))
    });
    // Rebuilt when another question is shown or the shown one changes status, not on every event, so what a person
    // types into the answer form stays.
    let shown = Memo::new(move |_| question.with(|q| q.as_ref().map(|q| q.as_ref().map(|q| (q.id, q.status)).ok())));
    // The row after the one shown, kept while the shown one is in the list: the event stream may take it out
    // before the answer's own response arrives, and the cursor still moves on from where it was.
    let next_in_line = StoredValue::new(None::<(Uuid, Uuid)>);
    Effect::new(move |_| {
        inbox.shown.with(|_| ());
        if let Some(id) = inbox.cursor.get()
            && let Some(next) = inbox.next_after(id, &[id])
        {
            next_in_line.set_value(Some((id, next)));
        }
    });
    let answered = Callback::new(move |question: Question| {
        inbox.notice.set(Some(crate::components::answered_notice(&question)));
        if inbox.cursor.get_untracked() == Some(question.id)
            && let Some((_, next)) = next_in_line.get_value().filter(|(id, _)| *id == question.id)
        {
            inbox.cursor.set(Some(next));
        }
        inbox.answered.update(|a| a.push(question));
    });
    (move || {
        // Read, not only tracked: a memo follows its sources once it has been computed, which a read does.
        shown.with(|_| ());
        question.with_untracked(|question| match question {
            None => EitherOf3::A(nothing_selected()),
            Some(Err(err)) => EitherOf3::B(view! { <p class="alert" role="alert">{err.clone()}</p> }),
            Some(Ok(q)) => {
                let refusal = inbox
                    .viewer
                    .with_value(|viewer| viewer.as_ref().and_then(|viewer| q.refusal_to_decide(viewer.decider())));
                EitherOf3::C(inbox_detail(q.clone(), refusal, answered))
            }
        })
    })
    .into_any()
}

/// A question in full for the split view: what the live modal shows, with a link to its page (part of the deferred
/// module, see [`crate::deferred`]). While it is pending, its answer form, or why it is not the viewer's to decide
/// (`refusal`).
fn inbox_detail(question: Question, refusal: Option<String>, answered: Callback<Question>) -> AnyView {
    let pending = question.status == QuestionStatus::Pending;
    let resolution = (!pending).then(|| capitalise(&describe_resolution(&question)));
    view! {
        <article class="detail" data-testid="detail" data-question-id=question.id.to_string()>
            <div class="question-meta">
                <Badge text=question.kind.as_str().replace('_', " ") class="kind"/>
                <Badge text=question.urgency.to_string() class=format!("urgency-{}", question.urgency)/>
                {question.project.clone().map(|p| view! { <Badge text=p class="project"/> })}
                {pending.then_some(question.timeout_at).flatten().map(|t| view! { <Countdown deadline=t/> })}
            </div>
            <h2 data-testid="detail-title">
                <a href=format!("/questions/{}", question.id) class="question-title">{question.title.clone()}</a>
            </h2>
            <EscalationChain question=question.clone() testid="detail"/>
            <QuestionContext question=question.clone() testid="detail"/>
            {resolution.map(|text| view! { <p class="resolution" data-testid="detail-resolution">{text}</p> })}
            {pending.then(|| match refusal {
                Some(refusal) => Either::Left(view! {
                    <p class="muted" data-testid="detail-refused">{format!("{}.", capitalise(&refusal))}</p>
                }),
                None => Either::Right(view! { <AnswerWidget question=question.clone() prefix="detail" on_answered=answered/> }),
            })}
        </article>
    }
    .into_any()
}
