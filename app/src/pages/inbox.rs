//! The inbox: every question of the workspace, filtered by the URL (`?status=&kind=&project=&urgency=&q=&sort=`),
//! kept current by the event stream, and worked through from the list: yes/no questions, approvals and short choices
//! are answered from their row (a click, or a key: see [`SHORTCUTS`]), and on a wide screen the question under the
//! cursor shows in full beside the list, with its answer form.
//!
//! Without JavaScript the list is for reading: the filter bar is a plain `GET` form, and each title links to the
//! question's page, whose form answers every type. The row actions and the split view need the script.

use std::collections::HashMap;

use leptos::either::{Either, EitherOf3};
use leptos::prelude::*;
use leptos_router::hooks::use_location;
use serde_json::Value;
use uuid::Uuid;

use crate::answer::AnswerWidget;
use crate::api::{get_json, post_json};
use crate::components::{
    Ago, Badge, Countdown, EscalationChain, QuestionContext, capitalise, describe_resolution, short_id,
};
use crate::live::use_question_updates;
use crate::navigation::query_param;
use crate::paging::Pages;
use crate::types::Page;
use crate::types::{
    AnswerBody, Decider, Question, QuestionKind, QuestionStatus, QuestionSummary, ResponseType, SessionInfo, Urgency,
    answer_in_words,
};
use crate::{InboxFilter, current_session, inbox_summaries};

/// `/inbox`: the questions the URL's filters select; new ones appear without a reload.
#[component]
pub fn InboxPage() -> impl IntoView {
    let search = use_location().search;
    let filter = Memo::new(move |_| search.with(|s| InboxFilter::from_query(|name| query_param(s, name))));
    // Where the list starts when it does not start at the top: a page "Show more" links to without JavaScript.
    let after = Memo::new(move |_| search.with(|s| query_param(s, "after").filter(|a| !a.is_empty())));
    let initial =
        crate::codec::resource(move || (filter.get(), after.get()), |(filter, after)| inbox_summaries(filter, after));
    // Who is signed in: the rows offer their one-click answers only where the server would take them.
    let session = crate::codec::resource(|| (), |_| current_session());
    let updates = use_question_updates();
    view! {
        <main class="page wide inbox-page" data-testid="inbox-page">
            <h1>"Inbox"</h1>
            <FilterBar filter/>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || initial.get().zip(session.get()).map(|(result, session)| match result {
                    Ok(page) => Either::Left(view! {
                        <QuestionList first=page after=after.get_untracked() filter=filter.get_untracked() updates viewer=session.ok()/>
                    }),
                    Err(err) => Either::Right(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                })}
            </Suspense>
        </main>
    }
}

/// One group of the filter bar: radio buttons drawn as a segmented control, one of them checked.
#[component]
fn Segments(
    name: &'static str,
    label: &'static str,
    /// `(value, label)` pairs; the first is the default.
    choices: Vec<(String, String)>,
    /// The value the URL's filters give this group.
    selected: Signal<String>,
) -> impl IntoView {
    view! {
        <fieldset class="segmented" data-testid=format!("filter-{name}")>
            <legend>{label}</legend>
            {choices.into_iter().map(|(value, text)| {
                let checked = selected.with_untracked(|selected| *selected == value);
                let testid = format!("filter-{name}-{}", if value.is_empty() { "default" } else { value.as_str() });
                let this = value.clone();
                view! {
                    <label class="chip">
                        <input type="radio" name=name value=value checked=checked
                            prop:checked=move || selected.with(|selected| *selected == this) data-testid=testid/>
                        <span>{text}</span>
                    </label>
                }
            }).collect_view()}
        </fieldset>
    }
}

fn choices<T: Copy + std::fmt::Display>(any: &str, all: &[T]) -> Vec<(String, String)> {
    std::iter::once((String::new(), any.to_owned()))
        .chain(all.iter().map(|v| (v.to_string(), v.to_string().replace('_', " "))))
        .collect()
}

/// `name=value&...` with the values percent-encoded, empty ones left out (they mean the default).
fn query_string(params: &[(String, String)]) -> String {
    let mut query = String::new();
    for (name, value) in params.iter().filter(|(_, v)| !v.trim().is_empty()) {
        if !query.is_empty() {
            query.push('&');
        }
        query.push_str(name);
        query.push('=');
        query.push_str(&crate::navigation::query_value(value.trim()));
    }
    query
}

/// The name and value of the input an event comes from.
#[cfg(feature = "hydrate")]
fn changed_input(ev: &leptos::ev::Event) -> Option<(String, String)> {
    use wasm_bindgen::JsCast;
    let input = ev.target()?.dyn_into::<web_sys::HtmlInputElement>().ok()?;
    Some((input.name(), input.value()))
}

/// Events are the browser's: on the server there are none.
#[cfg(not(feature = "hydrate"))]
fn changed_input(_: &leptos::ev::Event) -> Option<(String, String)> {
    None
}

/// The filter bar's fields and their values for `filter`, in the URL's order.
fn filter_params(filter: &InboxFilter) -> Vec<(String, String)> {
    let status = match filter.status {
        None => "all".to_owned(),
        Some(QuestionStatus::Pending) => String::new(),
        Some(s) => s.to_string(),
    };
    vec![
        ("q".to_owned(), filter.text.clone().unwrap_or_default()),
        ("status".to_owned(), status),
        ("kind".to_owned(), filter.kind.map(|k| k.to_string()).unwrap_or_default()),
        ("urgency".to_owned(), filter.urgency.map(|u| u.to_string()).unwrap_or_default()),
        ("project".to_owned(), filter.project.clone().unwrap_or_default()),
        ("sort".to_owned(), if filter.by_deadline { "deadline".to_owned() } else { String::new() }),
    ]
}

/// The filters, as a `GET` form on `/inbox` with a submit button. Once hydrated, a choice applies at once (a
/// text field when it is committed with Enter or by leaving it): the page navigates to the form's URL in place,
/// and the button is hidden. The bar shows the URL's filters however the URL changed (Back and Forward too).
#[component]
fn FilterBar(filter: Memo<InboxFilter>) -> impl IntoView {
    let mut statuses = vec![(String::new(), "pending".to_owned())];
    statuses.extend(QuestionStatus::ALL.iter().skip(1).map(|s| (s.to_string(), s.to_string())));
    statuses.push(("all".to_owned(), "any".to_owned()));
    let params = StoredValue::new(filter.with_untracked(filter_params));
    // A change of the URL the bar did not make (Back, Forward, a link) is what the bar goes on from.
    Effect::new(move |_| params.set_value(filter.with(filter_params)));
    let value_of = move |name: &'static str| {
        Signal::derive(move || {
            filter.with(|f| filter_params(f).into_iter().find(|(n, _)| n == name).map(|(_, v)| v).unwrap_or_default())
        })
    };
    let (text, project) = (value_of("q"), value_of("project"));
    let navigate = leptos_router::hooks::use_navigate();
    let apply = move || navigate(&format!("/inbox?{}", params.with_value(|p| query_string(p))), Default::default());
    let remember = move |ev: &leptos::ev::Event| {
        let Some((name, value)) = changed_input(ev) else {
            return;
        };
        params.update_value(|p| {
            if let Some((_, v)) = p.iter_mut().find(|(n, _)| *n == name) {
                *v = value;
            }
        });
    };
    view! {
        <form method="get" action="/inbox" class="filters" data-testid="inbox-filters" role="search"
            on:input=move |ev| remember(&ev)
            on:change={
                let apply = apply.clone();
                move |ev| {
                    remember(&ev);
                    apply();
                }
            }
            on:submit=move |ev| {
                ev.prevent_default();
                apply();
            }
        >
            <div class="filter-line">
                <label class="filter grow">
                    <span class="visually-hidden">"Search"</span>
                    <input type="search" name="q" maxlength=crate::SEARCH_MAX_CHARS value=text.get_untracked()
                        prop:value=text placeholder="Search title or body" data-testid="filter-q"/>
                </label>
                <label class="filter">
                    <span class="visually-hidden">"Project"</span>
                    <input type="text" name="project" size="10" value=project.get_untracked()
                        prop:value=project placeholder="Project" data-testid="filter-project"/>
                </label>
                <nav class="views" aria-label="Views">
                    <a href="/inbox?kind=approval" rel="external" data-testid="view-approvals">"Approvals"</a>
                    <a href="/inbox?urgency=critical" rel="external" data-testid="view-critical">"Critical"</a>
                    <a href="/inbox?sort=deadline" rel="external" data-testid="view-due-soon">"Due soon"</a>
                    <a href="/inbox" rel="external" class="reset">"Reset"</a>
                </nav>
                <button type="submit" class="apply" data-testid="filter-apply">"Apply"</button>
            </div>
            <div class="filter-line">
                <Segments name="status" label="Status" choices=statuses selected=value_of("status")/>
                <Segments name="kind" label="Kind" choices=choices("any", QuestionKind::ALL) selected=value_of("kind")/>
                <Segments name="urgency" label="Urgency" choices=choices("any", Urgency::ALL) selected=value_of("urgency")/>
                <Segments
                    name="sort"
                    label="Sort"
                    choices=vec![(String::new(), "newest".to_owned()), ("deadline".to_owned(), "deadline".to_owned())]
                    selected=value_of("sort")
                />
            </div>
        </form>
    }
}

/// Applies live updates to the server-rendered list: changed questions are replaced, new ones join, and the list
/// keeps only what the filter selects, in its order. The server chose the initial rows by the same filter; an
/// update is a whole question, so it is judged whole (its body too, for a text search) before it is summarised.
fn merge_live<'a>(
    initial: &[QuestionSummary],
    updates: impl IntoIterator<Item = &'a Question>,
    filter: &InboxFilter,
    admits: impl Fn(&Question) -> bool,
) -> Vec<QuestionSummary> {
    let mut merged: Vec<QuestionSummary> = initial.to_vec();
    for update in updates {
        let position = merged.iter().position(|q| q.id == update.id);
        match (filter.matches(update), position) {
            (true, Some(at)) => merged[at] = QuestionSummary::from(update),
            (true, None) if admits(update) => merged.push(QuestionSummary::from(update)),
            (true, None) => {}
            (false, Some(at)) => {
                merged.remove(at);
            }
            (false, None) => {}
        }
    }
    filter.sort(&mut merged);
    merged
}

/// What a row answered from the list is doing: waiting for the server, or refused with the server's reason.
#[derive(Debug, Clone, PartialEq)]
enum RowState {
    Sending,
    Failed(String),
}

/// The answer a row's one-click action gives: `true`/`false` for a yes/no question or an approval, an option's
/// value for a choice. `None` when the row has no such action (its question needs its page or the split view), or
/// when the question is not `viewer`'s to decide (see [`QuestionSummary::refusal_to_decide`]).
fn quick_answer(question: &QuestionSummary, action: RowAction, viewer: Option<Decider<'_>>) -> Option<Value> {
    if viewer.is_some_and(|viewer| question.refusal_to_decide(viewer).is_some()) {
        return None;
    }
    let yes_no = matches!(question.response_type, ResponseType::Boolean | ResponseType::Approval);
    match action {
        RowAction::Affirm if yes_no => Some(Value::Bool(true)),
        RowAction::Refuse if yes_no => Some(Value::Bool(false)),
        RowAction::Choice(index) => question.choices.get(index).map(|o| Value::String(o.value.clone())),
        _ => None,
    }
}

/// A row's one-click actions: Yes or Approve, No or Reject, and the nth choice.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RowAction {
    Affirm,
    Refuse,
    Choice(usize),
}

/// Everything the rows, the keyboard and the split view share on the inbox page.
#[derive(Clone, Copy)]
pub(crate) struct Inbox {
    shown: Memo<Vec<QuestionSummary>>,
    /// The row the keyboard is on (by id, so live insertions above it do not move it); the split view shows it.
    cursor: RwSignal<Option<Uuid>>,
    /// Rows marked with `x` or their checkbox, for one answer to all of them.
    marked: RwSignal<Vec<Uuid>>,
    states: RwSignal<HashMap<Uuid, RowState>>,
    /// Questions answered from this page, as the server returned them: they leave a pending list at once, without
    /// waiting for the event stream to say so.
    answered: RwSignal<Vec<Question>>,
    /// The last answer sent from the list, said in a notice.
    notice: RwSignal<Option<String>>,
    /// A batch that holds a critical question, waiting for a confirmation: whether it affirms.
    confirming: RwSignal<Option<bool>>,
    shortcuts_open: RwSignal<bool>,
    /// Who is signed in; `None` if the page could not tell, and then the server decides each answer alone.
    viewer: StoredValue<Option<SessionInfo>>,
}

/// Sends answers from the list (see [`Inbox::answer`]; part of the deferred module, see [`crate::deferred`]).
pub(crate) fn send_row_answers(inbox: Inbox, answers: Vec<(Uuid, Value)>) {
    inbox.send(answers);
}

impl Inbox {
    /// Sends `answers` (question id, value), one after the other; each row shows its outcome, and the cursor moves on from
    /// a row that leaves the list. Each is an answer of its own (`POST /questions/{id}/answer`, as the live modal
    /// sends), so one refused answer leaves the others standing.
    fn answer(self, answers: Vec<(Uuid, Value)>) {
        if !answers.is_empty() {
            crate::deferred::answer_rows(self, answers);
        }
    }

    fn send(self, answers: Vec<(Uuid, Value)>) {
        self.states.update(|states| {
            for (id, _) in &answers {
                states.insert(*id, RowState::Sending);
            }
        });
        // Where the cursor goes if its row is answered, chosen now: the event stream may take the row out of the
        // list before the answer's own response arrives.
        let leaving: Vec<Uuid> = answers.iter().map(|(id, _)| *id).collect();
        let cursor = self.cursor.get_untracked();
        let next = cursor.filter(|c| leaving.contains(c)).map(|c| self.next_after(c, &leaving));
        leptos::task::spawn_local(async move {
            let mut outcomes = Vec::with_capacity(answers.len());
            for (id, value) in answers {
                let body = AnswerBody { value, comment: None, edited_arguments: None };
                outcomes.push((id, post_json::<_, Question>(&format!("/questions/{id}/answer"), &body).await));
            }
            let mut done = Vec::new();
            self.states.update(|states| {
                for (id, outcome) in outcomes {
                    match outcome {
                        Ok(question) => {
                            states.remove(&id);
                            done.push(question);
                        }
                        Err(err) => {
                            states.insert(id, RowState::Failed(err.describe()));
                        }
                    }
                }
            });
            if done.is_empty() {
                return;
            }
            let ids: Vec<Uuid> = done.iter().map(|q| q.id).collect();
            if let Some(next) =
                next.filter(|_| self.cursor.get_untracked() == cursor && cursor.is_some_and(|c| ids.contains(&c)))
            {
                self.cursor.set(next);
            }
            self.marked.update(|marked| marked.retain(|id| !ids.contains(id)));
            self.notice.set(Some(answered_from_rows(&done)));
            self.answered.update(|answered| answered.extend(done));
        });
    }

    /// The row after `id` that is not leaving with `leaving`, else the one before: where the cursor goes when its
    /// row is answered.
    fn next_after(self, id: Uuid, leaving: &[Uuid]) -> Option<Uuid> {
        self.shown.with_untracked(|shown| {
            let at = shown.iter().position(|q| q.id == id)?;
            let staying = |q: &&QuestionSummary| !leaving.contains(&q.id);
            shown[at + 1..].iter().find(staying).or_else(|| shown[..at].iter().rev().find(staying)).map(|q| q.id)
        })
    }

    /// The answer `action` gives `question`, if its row offers it to the viewer (see [`quick_answer`]).
    fn quick_answer(self, question: &QuestionSummary, action: RowAction) -> Option<Value> {
        self.viewer.with_value(|viewer| quick_answer(question, action, viewer.as_ref().map(SessionInfo::decider)))
    }

    /// Why the viewer may not decide `question`, said on its row in place of its one-click answers.
    fn refusal(self, question: &QuestionSummary) -> Option<String> {
        self.viewer.with_value(|viewer| viewer.as_ref().and_then(|viewer| question.refusal_to_decide(viewer.decider())))
    }

    /// One action on one row, if the row has it.
    fn act(self, id: Uuid, action: RowAction) {
        let value = self
            .shown
            .with_untracked(|shown| shown.iter().find(|q| q.id == id).and_then(|q| self.quick_answer(q, action)));
        if let Some(value) = value {
            self.answer(vec![(id, value)]);
        }
    }

    /// Yes/approve (`affirm`) or no/reject for every marked row that takes it; a batch with a critical question
    /// waits for a confirmation first.
    fn act_on_marked(self, affirm: bool, confirmed: bool) {
        let action = if affirm { RowAction::Affirm } else { RowAction::Refuse };
        let (answers, critical) = self.marked.with_untracked(|marked| {
            self.shown.with_untracked(|shown| {
                let chosen: Vec<&QuestionSummary> = shown.iter().filter(|q| marked.contains(&q.id)).collect();
                let answers: Vec<(Uuid, Value)> =
                    chosen.iter().filter_map(|q| self.quick_answer(q, action).map(|v| (q.id, v))).collect();
                let critical =
                    chosen.iter().any(|q| q.urgency == Urgency::Critical && self.quick_answer(q, action).is_some());
                (answers, critical)
            })
        });
        if critical && answers.len() > 1 && !confirmed {
            self.confirming.set(Some(affirm));
            return;
        }
        self.confirming.set(None);
        self.answer(answers);
    }

    fn toggle_mark(self, id: Uuid) {
        self.marked.update(|marked| {
            if let Some(at) = marked.iter().position(|m| *m == id) {
                marked.remove(at);
            } else {
                marked.push(id);
            }
        });
    }
}

#[component]
fn QuestionList(
    /// The list's first page: from its top, or past `after`.
    first: Page<QuestionSummary>,
    after: Option<String>,
    filter: InboxFilter,
    updates: ReadSignal<Vec<Question>>,
    viewer: Option<SessionInfo>,
) -> impl IntoView {
    let answered = RwSignal::new(Vec::<Question>::new());
    let pages = Pages::new(first, after.as_deref());
    let listed = StoredValue::new(filter.clone());
    let more = pages.controls("/inbox", query_string(&filter_params(&filter)), move |after| {
        inbox_summaries(listed.get_value(), Some(after))
    });
    let shown = Memo::new(move |_| {
        pages.loaded.with(|loaded| {
            let admits = |q: &Question| pages.admits(loaded, &filter, q);
            updates.with(|u| answered.with(|a| merge_live(loaded, u.iter().chain(a.iter()), &filter, admits)))
        })
    });
    let inbox = Inbox {
        shown,
        cursor: RwSignal::new(None),
        marked: RwSignal::new(Vec::new()),
        states: RwSignal::new(HashMap::new()),
        answered,
        notice: RwSignal::new(None),
        confirming: RwSignal::new(None),
        shortcuts_open: RwSignal::new(false),
        viewer: StoredValue::new(viewer),
    };
    // The keys' handler is part of the deferred module; installed under this effect, it goes with the page.
    let module_loaded = crate::deferred::module_loaded();
    Effect::new(move |_| {
        if module_loaded.get() {
            crate::deferred::install_inbox_keys(inbox);
        }
    });
    let count = move || shown.with(Vec::len);
    let marked_count = move || inbox.marked.with(Vec::len);
    let any_marked = move || marked_count() > 0;
    view! {
        <p class="muted list-head">
            <span>
                <span data-testid="pending-count">{move || format!("{} question{}", count(), if count() == 1 { "" } else { "s" })}</span>
                {pages.past_top().then(|| view! { <span data-testid="list-past-top">" further down the list"</span> })}
                <Show when=move || pages.cut()>
                    <span data-testid="list-cut">" so far, and more: “Show more” under the list loads them."</span>
                </Show>
            </span>
            <button type="button" class="link hint" data-testid="shortcuts-open" on:click=move |_| inbox.shortcuts_open.set(true)>
                "Keyboard shortcuts (?)"
            </button>
        </p>
        <Show when=any_marked>
            <div class="batch-bar marked-bar" data-testid="marked-bar">
                <span data-testid="marked-count">{move || format!("{} selected", marked_count())}</span>
                <div class="button-row">
                    <button type="button" class="primary" data-testid="marked-affirm" on:click=move |_| inbox.act_on_marked(true, false)>
                        "Yes / Approve"
                    </button>
                    <button type="button" class="danger" data-testid="marked-refuse" on:click=move |_| inbox.act_on_marked(false, false)>
                        "No / Reject"
                    </button>
                    <button type="button" data-testid="marked-clear" on:click=move |_| inbox.marked.set(Vec::new())>"Clear"</button>
                </div>
                <span class="muted">"Only yes/no questions and approvals that are yours to decide are answered this way."</span>
            </div>
        </Show>
        {move || inbox.confirming.get().map(|affirm| view! {
            <div class="confirm" role="alertdialog" aria-labelledby="marked-confirm-text" data-testid="marked-confirm">
                <p id="marked-confirm-text"><strong>
                    {format!("The selection holds a critical question. Answer {} of them “{}”?",
                        marked_count(), if affirm { "yes / approve" } else { "no / reject" })}
                </strong></p>
                <div class="button-row">
                    <button type="button" class="primary" data-testid="marked-confirm-yes" on:click=move |_| inbox.act_on_marked(affirm, true)>
                        "Yes, answer all"
                    </button>
                    <button type="button" data-testid="marked-confirm-cancel" on:click=move |_| inbox.confirming.set(None)>"Cancel"</button>
                </div>
            </div>
        })}
        {move || inbox.notice.get().map(|text| view! { <p class="resolution" role="status" data-testid="row-notice">{text}</p> })}
        <div class="inbox-split" data-testid="inbox-split">
            <div class="inbox-column">
                <ul class="question-list inbox-list" data-testid="question-list">
                    <For each=move || shown.get() key=|q| q.id let:question>
                        <QuestionRow question inbox/>
                    </For>
                </ul>
                {more}
                <Show when=move || shown.with(Vec::is_empty)>
                    <div class="empty" data-testid="inbox-empty">
                        <p class="empty-title">"Nothing is waiting for you."</p>
                        <p>"New questions appear here as agents ask them. If you expected some, the filters may hide them: "
                            <a href="/inbox" rel="external">"show every pending question"</a>"."</p>
                    </div>
                </Show>
            </div>
            <DetailPane inbox updates/>
        </div>
        <Show when=move || inbox.shortcuts_open.get()>
            <Shortcuts open=inbox.shortcuts_open/>
        </Show>
    }
}

/// The keys of the inbox, listed for `?`.
const SHORTCUTS: [(&str, &str); 9] = [
    ("j / ↓", "next question"),
    ("k / ↑", "previous question"),
    ("x", "select or unselect the question"),
    ("a", "approve, or answer yes (every selected question, if any are selected)"),
    ("r", "reject, or answer no (every selected question, if any are selected)"),
    ("1 2 3", "pick that choice"),
    ("o / Enter", "open the question's page"),
    ("Esc", "clear the selection, close this list"),
    ("?", "show or hide this list"),
];

#[component]
fn Shortcuts(open: RwSignal<bool>) -> impl IntoView {
    let close = NodeRef::<leptos::html::Button>::new();
    // The dialog takes the focus, so Escape and Tab act on it.
    Effect::new(move |_| {
        if let Some(button) = close.get() {
            let _ = button.focus();
        }
    });
    view! {
        <div class="modal-backdrop" on:click=move |_| open.set(false)>
            <div class="modal shortcuts" role="dialog" aria-modal="true" aria-labelledby="shortcuts-title" data-testid="shortcuts"
                on:click=|ev| ev.stop_propagation()>
                <header class="modal-head"><h2 id="shortcuts-title">"Keyboard shortcuts"</h2></header>
                <div class="modal-body">
                    <dl class="shortcut-list">
                        {SHORTCUTS.iter().map(|(keys, what)| view! { <dt><kbd>{*keys}</kbd></dt><dd>{*what}</dd> }).collect_view()}
                    </dl>
                </div>
                <footer class="modal-foot">
                    <span></span>
                    <button type="button" node_ref=close data-testid="shortcuts-close" on:click=move |_| open.set(false)>"Close"</button>
                </footer>
            </div>
        </div>
    }
}

/// The split view's second column on wide screens: the question under the cursor in full, with its answer form
/// ([`inbox_pane`], once the deferred module is in).
#[component]
fn DetailPane(inbox: Inbox, updates: ReadSignal<Vec<Question>>) -> impl IntoView {
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
fn QuestionRow(question: QuestionSummary, inbox: Inbox) -> impl IntoView {
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

/// Listens for the inbox's keys while the page is shown (part of the deferred module, see [`crate::deferred`]).
pub(crate) fn install_inbox_keys(inbox: Inbox) {
    keyboard::install(inbox);
}

/// The inbox's keys (see [`SHORTCUTS`]). Keys typed into a field, or while the live modal is open, are left alone.
#[cfg(feature = "hydrate")]
mod keyboard {
    use leptos::prelude::*;
    use wasm_bindgen::JsCast;

    use super::{Inbox, RowAction};

    pub fn install(inbox: Inbox) {
        let handle = window_event_listener(leptos::ev::keydown, move |ev| {
            if ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
                return;
            }
            let target = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok());
            // A row's checkbox keeps the keys working (it has none of its own but Space); any other field takes them.
            let in_field = target.as_ref().is_some_and(|el| match el.tag_name().as_str() {
                "TEXTAREA" | "SELECT" => true,
                "INPUT" => el.get_attribute("type").as_deref() != Some("checkbox"),
                _ => false,
            });
            let modal_open = document().query_selector("[data-testid=live-modal]").ok().flatten().is_some();
            if in_field || modal_open {
                return;
            }
            let key = ev.key();
            if inbox.shortcuts_open.get_untracked() {
                if matches!(key.as_str(), "?" | "Escape") {
                    ev.prevent_default();
                    inbox.shortcuts_open.set(false);
                }
                return;
            }
            let ids: Vec<uuid::Uuid> = inbox.shown.with_untracked(|s| s.iter().map(|q| q.id).collect());
            let at = inbox.cursor.get_untracked().and_then(|id| ids.iter().position(|i| *i == id));
            let current = at.map(|i| ids[i]);
            let any_marked = inbox.marked.with_untracked(|m| !m.is_empty());
            let next = match key.as_str() {
                "j" | "ArrowDown" if !ids.is_empty() => Some(at.map_or(0, |i| (i + 1).min(ids.len() - 1))),
                "k" | "ArrowUp" if !ids.is_empty() => Some(at.map_or(0, |i| i.saturating_sub(1))),
                "?" => {
                    inbox.shortcuts_open.set(true);
                    None
                }
                "Escape" => {
                    inbox.marked.set(Vec::new());
                    inbox.confirming.set(None);
                    None
                }
                // Enter on a link or a button of the page does what it does; on the page itself, it opens.
                "Enter" if target.as_ref().is_some_and(|el| matches!(el.tag_name().as_str(), "A" | "BUTTON")) => {
                    return;
                }
                "o" | "Enter" => {
                    if let Some(id) = current {
                        ev.prevent_default();
                        let _ = window().location().set_href(&format!("/questions/{id}"));
                    }
                    return;
                }
                "x" => {
                    if let Some(id) = current {
                        inbox.toggle_mark(id);
                    }
                    None
                }
                "a" | "r" if any_marked => {
                    inbox.act_on_marked(key == "a", false);
                    None
                }
                "a" | "r" => {
                    if let Some(id) = current {
                        inbox.act(id, if key == "a" { RowAction::Affirm } else { RowAction::Refuse });
                    }
                    None
                }
                "1" | "2" | "3" => {
                    if let Some(id) = current {
                        let index = key.parse::<usize>().unwrap_or(1) - 1;
                        inbox.act(id, RowAction::Choice(index));
                    }
                    None
                }
                _ => return,
            };
            ev.prevent_default();
            if let Some(index) = next {
                inbox.cursor.set(Some(ids[index]));
                // The focus follows, so the browser scrolls the row into view and a screen reader reads it.
                let selector = format!("[data-question-id=\"{}\"] .question-title", ids[index]);
                if let Ok(Some(link)) = document().query_selector(&selector)
                    && let Ok(link) = link.dyn_into::<web_sys::HtmlElement>()
                {
                    let _ = link.focus();
                }
            }
        });
        on_cleanup(move || handle.remove());
    }
}

#[cfg(not(feature = "hydrate"))]
mod keyboard {
    pub fn install(_: super::Inbox) {}
}

/// What the list says once rows were answered from it (`done`, as the server returned them): an approval of several
/// is recorded, not answered, and says where its quorum stands.
fn answered_from_rows(done: &[Question]) -> String {
    let waiting = done.iter().filter(|q| q.status == QuestionStatus::Pending).count();
    match done {
        [one] if waiting == 1 => crate::components::answered_notice(one),
        [one] => format!(
            "Answered “{}”: {}",
            one.title,
            one.response.as_ref().map(|r| answer_in_words(one, &r.value)).unwrap_or_default()
        ),
        many if waiting == 0 => format!("Answered {} questions.", many.len()),
        many => format!("Answered {} questions; {waiting} of them wait for more approvals.", many.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::*;

    fn question(title: &str, status: QuestionStatus) -> Question {
        crate::types::sample_question(title, status)
    }

    #[test]
    fn a_row_answers_yes_no_and_approvals_with_a_boolean_and_a_short_choice_with_its_value() {
        let summary = |response_type, options: &[&str]| {
            let mut q = question("q", QuestionStatus::Pending);
            q.response_type = response_type;
            q.options = options
                .iter()
                .map(|v| QuestionOption { value: (*v).into(), label: v.to_uppercase(), description: None })
                .collect();
            QuestionSummary::from(&q)
        };
        for response_type in [ResponseType::Boolean, ResponseType::Approval] {
            let row = summary(response_type, &[]);
            assert_eq!(quick_answer(&row, RowAction::Affirm, None), Some(Value::Bool(true)));
            assert_eq!(quick_answer(&row, RowAction::Refuse, None), Some(Value::Bool(false)));
            assert_eq!(quick_answer(&row, RowAction::Choice(0), None), None);
        }
        let choice = summary(ResponseType::Choice, &["eu", "us"]);
        assert_eq!(quick_answer(&choice, RowAction::Choice(1), None), Some(Value::String("us".into())));
        assert_eq!(quick_answer(&choice, RowAction::Choice(2), None), None, "there is no third option");
        assert_eq!(quick_answer(&choice, RowAction::Affirm, None), None);
        let long = summary(ResponseType::Choice, &["a", "b", "c", "d"]);
        assert_eq!(quick_answer(&long, RowAction::Choice(0), None), None, "four options are answered on the page");
        assert_eq!(quick_answer(&summary(ResponseType::Text, &[]), RowAction::Affirm, None), None);
    }

    #[test]
    fn a_row_offers_its_answers_only_to_whom_the_question_allows() {
        let mut approval = question("Deploy?", QuestionStatus::Pending);
        approval.kind = QuestionKind::Approval;
        approval.response_type = ResponseType::Approval;
        approval.eligible = Some(Eligible::Users(vec!["nadia".into()]));
        let row = QuestionSummary::from(&approval);
        let as_person = |name, role| Some(Decider { role, name, account: true });
        assert_eq!(quick_answer(&row, RowAction::Affirm, as_person("nadia", Role::Approver)), Some(Value::Bool(true)));
        assert_eq!(quick_answer(&row, RowAction::Affirm, as_person("erin", Role::Approver)), None, "not named");
        assert_eq!(quick_answer(&row, RowAction::Refuse, as_person("erin", Role::Admin)), None, "not named either");
        let token = Some(Decider { role: Role::Approver, name: "nadia", account: false });
        assert_eq!(quick_answer(&row, RowAction::Affirm, token), None, "a token that merely has her name");

        let mut assigned = question("Which region?", QuestionStatus::Pending);
        assigned.response_type = ResponseType::Choice;
        assigned.options = vec![QuestionOption { value: "eu".into(), label: "EU".into(), description: None }];
        assigned.assignee = Some(Assignee::User("nadia".into()));
        let row = QuestionSummary::from(&assigned);
        assert_eq!(quick_answer(&row, RowAction::Choice(0), as_person("erin", Role::Responder)), None);
        assert_eq!(
            quick_answer(&row, RowAction::Choice(0), as_person("nadia", Role::Responder)),
            Some(Value::String("eu".into()))
        );
        assert_eq!(quick_answer(&row, RowAction::Choice(0), as_person("nadia", Role::Viewer)), None, "a viewer");
    }

    #[test]
    fn a_new_question_goes_on_top_and_a_resolved_one_leaves() {
        let old = question("old", QuestionStatus::Pending);
        let new = question("new", QuestionStatus::Pending);
        let mut answered = old.clone();
        answered.status = QuestionStatus::Answered;

        let pending = InboxFilter::from_query(|_| None);
        let initial = [QuestionSummary::from(&old)];
        let merged = merge_live(&initial, std::slice::from_ref(&new), &pending, |_| true);
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["new", "old"]);

        let merged = merge_live(&initial, &[new.clone(), answered.clone()], &pending, |_| true);
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["new"]);

        // With `?status=answered`, the answered one joins instead.
        let answered_only = InboxFilter::from_query(|name| (name == "status").then(|| "answered".to_owned()));
        let merged = merge_live(&[], &[new, answered], &answered_only, |_| true);
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["old"]);
    }

    #[test]
    fn an_approval_of_several_answered_from_a_row_says_where_its_quorum_stands() {
        let mut partial = crate::types::sample_question("Deploy?", QuestionStatus::Pending);
        partial.required_approvals = 2;
        partial.approvals =
            vec![crate::types::Approval { by: "alice".into(), at: chrono::Utc::now(), comment: None, person_id: None }];
        assert_eq!(answered_from_rows(std::slice::from_ref(&partial)), "Approval recorded for “Deploy?”: 1 of 2");
        let mut done = crate::types::sample_question("Ship?", QuestionStatus::Answered);
        done.response = Some(crate::types::AnswerBody { value: true.into(), comment: None, edited_arguments: None });
        assert_eq!(
            answered_from_rows(&[done.clone(), partial]),
            "Answered 2 questions; 1 of them wait for more approvals."
        );
        assert!(answered_from_rows(&[done]).starts_with("Answered “Ship?”: "));
    }

    #[test]
    fn a_live_question_found_by_its_body_joins_a_text_search_and_leaves_it_when_answered() {
        let search = InboxFilter::from_query(|name| (name == "q").then(|| "canary".to_owned()));
        let mut asked = question("Deploy?", QuestionStatus::Pending);
        asked.body = "The **canary** is green.".into();
        let unrelated = question("Rotate the keys?", QuestionStatus::Pending);
        let merged = merge_live(&[], &[asked.clone(), unrelated], &search, |_| true);
        assert_eq!(merged, [QuestionSummary::from(&asked)]);

        let mut answered = asked.clone();
        answered.status = QuestionStatus::Answered;
        let merged = merge_live(&[QuestionSummary::from(&asked)], &[answered], &search, |_| true);
        assert!(merged.is_empty(), "{merged:?}");
    }

    #[test]
    fn the_query_string_leaves_defaults_out_and_encodes_what_is_not_plain() {
        let params =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect::<Vec<_>>();
        assert_eq!(query_string(&params(&[("q", ""), ("kind", "approval"), ("sort", "")])), "kind=approval");
        assert_eq!(
            query_string(&params(&[("q", " Über & co "), ("status", "all")])),
            "q=%C3%9Cber%20%26%20co&status=all"
        );
    }

    #[test]
    fn filters_come_from_the_url_and_unknown_values_are_ignored() {
        let query = |pairs: &'static [(&'static str, &'static str)]| {
            InboxFilter::from_query(move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned()))
        };
        assert_eq!(query(&[]).status, Some(QuestionStatus::Pending));
        assert_eq!(query(&[("status", "all")]).status, None);
        let f = query(&[("kind", "approval"), ("urgency", "loud"), ("q", "  deploy "), ("sort", "deadline")]);
        assert_eq!(f.kind, Some(QuestionKind::Approval));
        assert_eq!(f.urgency, None);
        assert_eq!(f.text.as_deref(), Some("deploy"));
        assert!(f.by_deadline);

        let mut q = question("Deploy to prod", QuestionStatus::Pending);
        q.kind = QuestionKind::Approval;
        assert!(f.matches(&q));
        q.kind = QuestionKind::Blocking;
        assert!(!f.matches(&q));
    }
}
