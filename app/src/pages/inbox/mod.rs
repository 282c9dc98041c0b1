//! The inbox: every question of the workspace, filtered by the URL (`?status=&kind=&project=&urgency=&q=&sort=`),
//! kept current by the event stream, and worked through from the list: yes/no questions, approvals and short choices
//! are answered from their row (a click, or a key: see [`keyboard::SHORTCUTS`]), and on a wide screen the question under the
//! cursor shows in full beside the list, with its answer form.
//!
//! Without JavaScript the list is for reading: the filter bar is a plain `GET` form, and each title links to the
//! question's page, whose form answers every type. The row actions and the split view need the script.

mod answering;
mod detail;
mod filter_bar;
mod keyboard;
mod row;

use std::collections::HashMap;

use leptos::either::Either;
use leptos::prelude::*;
use leptos_router::hooks::use_location;

pub(crate) use answering::{Inbox, send_row_answers};
use detail::DetailPane;
pub(crate) use detail::inbox_pane;
use filter_bar::{FilterBar, filter_params, query_string};
use keyboard::Shortcuts;
pub(crate) use keyboard::install_inbox_keys;
use row::QuestionRow;

use crate::live::use_question_updates;
use crate::navigation::query_param;
use crate::paging::Pages;
use crate::types::{Page, Question, QuestionSummary, SessionInfo};
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::*;

    fn question(title: &str, status: QuestionStatus) -> Question {
        crate::types::sample_question(title, status)
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
