//! The inbox: every question of the workspace, filtered by the URL (`?status=&kind=&project=&urgency=&q=&sort=`),
//! kept current by the event stream, and navigable with the keyboard (j/k to move, Enter to open).
//!
//! The filter bar is a plain `GET` form, so filtering works without JavaScript too.

use leptos::either::Either;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::components::{Ago, Badge, Countdown, short_id};
use crate::live::use_question_updates;
use crate::types::{Question, QuestionKind, QuestionStatus, QuestionSummary, Urgency};
use crate::{InboxFilter, inbox_summaries};

/// `/inbox`: the questions the URL's filters select; new ones appear without a reload.
#[component]
pub fn InboxPage() -> impl IntoView {
    let query = use_query_map();
    let filter = Memo::new(move |_| query.with(|q| InboxFilter::from_query(|name| q.get(name))));
    let initial = crate::codec::resource(move || filter.get(), inbox_summaries);
    let updates = use_question_updates();
    view! {
        <main class="page wide" data-testid="inbox-page">
            <h1>"Inbox"</h1>
            <FilterBar filter=filter.get_untracked()/>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || initial.get().map(|result| match result {
                    Ok(page) => Either::Left(view! { <QuestionList initial=page.items filter=filter.get_untracked() updates/> }),
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
    selected: String,
) -> impl IntoView {
    view! {
        <fieldset class="segmented" data-testid=format!("filter-{name}")>
            <legend>{label}</legend>
            {choices.into_iter().map(|(value, text)| {
                let checked = value == selected;
                let testid = format!("filter-{name}-{}", if value.is_empty() { "default" } else { value.as_str() });
                view! {
                    <label class="chip">
                        <input type="radio" name=name value=value checked=checked data-testid=testid/>
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
        for byte in value.trim().bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => query.push(byte as char),
                _ => query.push_str(&format!("%{byte:02X}")),
            }
        }
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

/// The filters, as a `GET` form on `/inbox` with a submit button. Once hydrated, a choice applies at once (a
/// text field when it is committed with Enter or by leaving it): the page navigates to the form's URL in place,
/// and the button is hidden.
#[component]
fn FilterBar(filter: InboxFilter) -> impl IntoView {
    let mut statuses = vec![(String::new(), "pending".to_owned())];
    statuses.extend(QuestionStatus::ALL.iter().skip(1).map(|s| (s.to_string(), s.to_string())));
    statuses.push(("all".to_owned(), "any".to_owned()));
    let status = match filter.status {
        None => "all".to_owned(),
        Some(QuestionStatus::Pending) => String::new(),
        Some(s) => s.to_string(),
    };
    let params = StoredValue::new(vec![
        ("q".to_owned(), filter.text.clone().unwrap_or_default()),
        ("status".to_owned(), status.clone()),
        ("kind".to_owned(), filter.kind.map(|k| k.to_string()).unwrap_or_default()),
        ("urgency".to_owned(), filter.urgency.map(|u| u.to_string()).unwrap_or_default()),
        ("project".to_owned(), filter.project.clone().unwrap_or_default()),
        ("sort".to_owned(), if filter.by_deadline { "deadline".to_owned() } else { String::new() }),
    ]);
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
                    <input type="search" name="q" maxlength=crate::SEARCH_MAX_CHARS value=filter.text.clone().unwrap_or_default() placeholder="Search title or body" data-testid="filter-q"/>
                </label>
                <label class="filter">
                    <span class="visually-hidden">"Project"</span>
                    <input type="text" name="project" size="10" value=filter.project.clone().unwrap_or_default() placeholder="Project" data-testid="filter-project"/>
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
                <Segments name="status" label="Status" choices=statuses selected=status/>
                <Segments name="kind" label="Kind" choices=choices("any", QuestionKind::ALL) selected=filter.kind.map(|k| k.to_string()).unwrap_or_default()/>
                <Segments name="urgency" label="Urgency" choices=choices("any", Urgency::ALL) selected=filter.urgency.map(|u| u.to_string()).unwrap_or_default()/>
                <Segments
                    name="sort"
                    label="Sort"
                    choices=vec![(String::new(), "newest".to_owned()), ("deadline".to_owned(), "deadline".to_owned())]
                    selected=if filter.by_deadline { "deadline".to_owned() } else { String::new() }
                />
            </div>
        </form>
    }
}

/// Applies live updates to the server-rendered list: changed questions are replaced, new ones join, and the list
/// keeps only what the filter selects, in its order. The server chose the initial rows by the same filter; an
/// update is a whole question, so it is judged whole (its body too, for a text search) before it is summarised.
fn merge_live(initial: &[QuestionSummary], updates: &[Question], filter: &InboxFilter) -> Vec<QuestionSummary> {
    let mut merged: Vec<QuestionSummary> = initial.to_vec();
    for update in updates {
        let position = merged.iter().position(|q| q.id == update.id);
        match (filter.matches(update), position) {
            (true, Some(at)) => merged[at] = QuestionSummary::from(update),
            (true, None) => merged.push(QuestionSummary::from(update)),
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
    initial: Vec<QuestionSummary>,
    filter: InboxFilter,
    updates: ReadSignal<Vec<Question>>,
) -> impl IntoView {
    let shown = Memo::new(move |_| updates.with(|u| merge_live(&initial, u, &filter)));
    // The row the keyboard is on (by id, so live insertions above it do not move the selection).
    let selected = RwSignal::new(None::<uuid::Uuid>);
    keyboard::install(shown, selected);
    view! {
        <p class="muted" data-testid="pending-count">
            {move || format!("{} question{}", shown.with(Vec::len), if shown.with(Vec::len) == 1 { "" } else { "s" })}
            <span class="hint">" · j/k to move, Enter to open"</span>
        </p>
        <ul class="question-list inbox-list" data-testid="question-list">
            <For each=move || shown.get() key=|q| (q.id, q.updated_at) let:question>
                <QuestionRow question selected/>
            </For>
        </ul>
        <Show when=move || shown.with(Vec::is_empty)>
            <p class="empty" data-testid="inbox-empty">"Nothing here. Nothing is waiting for you, or the filters hide it."</p>
        </Show>
    }
}

/// One row, as dense as a mail client's: urgency mark, title and body preview on one line; kind, response type,
/// project, run and assignee on the next; age and deadline on the right.
#[component]
fn QuestionRow(question: QuestionSummary, selected: RwSignal<Option<uuid::Uuid>>) -> impl IntoView {
    let id = question.id;
    let is_selected = move || selected.get() == Some(id);
    let pending = question.status == QuestionStatus::Pending;
    let urgency = question.urgency;
    view! {
        <li
            class=format!("question-row urgency-{urgency}")
            class:selected=is_selected
            aria-current=move || is_selected().then_some("true")
            data-testid="question-item"
            data-question-id=id.to_string()
            data-kind=question.kind.as_str()
            data-response-type=question.response_type.as_str()
            data-urgency=urgency.as_str()
            data-status=question.status.as_str()
        >
            <span class=format!("urgency-mark urgency-{urgency}") data-testid="row-urgency">{urgency_label(urgency)}</span>
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
                    {(!pending).then(|| view! { <Badge text=question.status.to_string() class="status"/> })}
                    {question.project.clone().map(|p| view! { <span class="project">{p}</span> })}
                    {question.run_id.map(|run| view! {
                        <a class="run" href=format!("/runs/{run}") data-testid="row-run">"run " {short_id(&run)}</a>
                    })}
                    {question.assignee.as_ref().map(|a| view! {
                        <span class="assignee" data-testid="row-assignee">"→ " {a.to_string()}</span>
                    })}
                </div>
            </div>
            <div class="row-times">
                {pending.then_some(question.timeout_at).flatten().map(|t| view! { <Countdown deadline=t/> })}
                <Ago at=question.created_at/>
            </div>
        </li>
    }
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

/// j/k (and the arrow keys) move the selection, Enter opens the selected question. Keys typed into a field, or
/// while the live modal is open, are left alone.
#[cfg(feature = "hydrate")]
mod keyboard {
    use leptos::prelude::*;
    use wasm_bindgen::JsCast;

    use crate::types::QuestionSummary;

    pub fn install(shown: Memo<Vec<QuestionSummary>>, selected: RwSignal<Option<uuid::Uuid>>) {
        let handle = window_event_listener(leptos::ev::keydown, move |ev| {
            if ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
                return;
            }
            let in_field = ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
            let modal_open = document().query_selector("[data-testid=live-modal]").ok().flatten().is_some();
            if in_field || modal_open {
                return;
            }
            let ids: Vec<uuid::Uuid> = shown.with_untracked(|s| s.iter().map(|q| q.id).collect());
            if ids.is_empty() {
                return;
            }
            let at = selected.get_untracked().and_then(|id| ids.iter().position(|i| *i == id));
            let next = match ev.key().as_str() {
                "j" | "ArrowDown" => Some(at.map_or(0, |i| (i + 1).min(ids.len() - 1))),
                "k" | "ArrowUp" => Some(at.map_or(0, |i| i.saturating_sub(1))),
                "Enter" => {
                    if let Some(id) = at.map(|i| ids[i]) {
                        ev.prevent_default();
                        let _ = window().location().set_href(&format!("/questions/{id}"));
                    }
                    None
                }
                _ => None,
            };
            if let Some(index) = next {
                ev.prevent_default();
                selected.set(Some(ids[index]));
                let selector = format!("[data-question-id=\"{}\"] a", ids[index]);
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
    use leptos::prelude::*;

    use crate::types::QuestionSummary;

    pub fn install(_: Memo<Vec<QuestionSummary>>, _: RwSignal<Option<uuid::Uuid>>) {}
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
        let merged = merge_live(&initial, std::slice::from_ref(&new), &pending);
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["new", "old"]);

        let merged = merge_live(&initial, &[new.clone(), answered.clone()], &pending);
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["new"]);

        // With `?status=answered`, the answered one joins instead.
        let answered_only = InboxFilter::from_query(|name| (name == "status").then(|| "answered".to_owned()));
        let merged = merge_live(&[], &[new, answered], &answered_only);
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["old"]);
    }

    #[test]
    fn a_live_question_found_by_its_body_joins_a_text_search_and_leaves_it_when_answered() {
        let search = InboxFilter::from_query(|name| (name == "q").then(|| "canary".to_owned()));
        let mut asked = question("Deploy?", QuestionStatus::Pending);
        asked.body = "The **canary** is green.".into();
        let unrelated = question("Rotate the keys?", QuestionStatus::Pending);
        let merged = merge_live(&[], &[asked.clone(), unrelated], &search);
        assert_eq!(merged, [QuestionSummary::from(&asked)]);

        let mut answered = asked.clone();
        answered.status = QuestionStatus::Answered;
        let merged = merge_live(&[QuestionSummary::from(&asked)], &[answered], &search);
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
