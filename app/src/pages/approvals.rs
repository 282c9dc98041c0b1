//! `/approvals`: the pending approvals, most urgent first, grouped by tool, each a one-line call that expands to its
//! arguments; with batch actions: select many (or all that match the filter), see what the selection holds (and
//! confirm when it holds a critical one), write one comment, approve or reject them in one
//! `POST /api/v1/questions/answer-batch`, and see each item's result (answered, already answered by someone,
//! invalid, not allowed).

use leptos::either::Either;
use leptos::prelude::*;
use leptos_router::hooks::use_location;
use uuid::Uuid;

use crate::api::post_json;
use crate::components::{Badge, Countdown, capitalise};
use crate::live::use_question_updates;
use crate::navigation::query_param;
use crate::paging::Pages;
use crate::types::Page;
use crate::types::{
    AnswerBatch, AnswerBatchItem, AnswerBatchResult, AnswerBatchResults, AnswerBatchStatus, Question, QuestionKind,
    QuestionStatus, SessionInfo, Urgency,
};
use crate::{InboxFilter, current_session, inbox_questions};

/// What happened to one item of a batch, for its row.
#[derive(Debug, Clone, PartialEq)]
struct ItemResult {
    /// The API's per-item status: `answered`, `conflict`, `invalid`, `not_found`, `forbidden`.
    status: String,
    text: String,
}

/// The results of the batches this page has sent, by question: a list, not a map, since a queue holds a few pages of
/// 200 approvals at most and a map type of its own would add its code to the page's wasm.
#[derive(Debug, Clone, Default)]
struct ItemResults(Vec<(Uuid, ItemResult)>);

impl ItemResults {
    fn get(&self, id: Uuid) -> Option<&ItemResult> {
        self.0.iter().find(|(of, _)| *of == id).map(|(_, result)| result)
    }

    /// Records a question's result, replacing an earlier one (a rejection retried, say).
    fn set(&mut self, id: Uuid, result: ItemResult) {
        match self.0.iter_mut().find(|(of, _)| *of == id) {
            Some((_, earlier)) => *earlier = result,
            None => self.0.push((id, result)),
        }
    }
}

/// The approvals grouped by tool name, each group in the list's order and the groups in the order of their first
/// item: with the list sorted by [`most_urgent_first`], the group holding the most urgent approval comes first.
fn by_tool(questions: Vec<Question>) -> Vec<(String, Vec<Question>)> {
    let mut groups = Vec::<(String, Vec<Question>)>::new();
    for q in questions {
        let tool = q.action.as_ref().map_or_else(|| "(no tool)".to_owned(), |a| a.tool_name.clone());
        match groups.iter_mut().find(|(name, _)| *name == tool) {
            Some((_, items)) => items.push(q),
            None => groups.push((tool, vec![q])),
        }
    }
    groups
}

fn urgency_rank(urgency: Urgency) -> u8 {
    match urgency {
        Urgency::Low => 0,
        Urgency::Normal => 1,
        Urgency::High => 2,
        Urgency::Critical => 3,
    }
}

/// The queue's order: the most urgent first, then the soonest deadline (none last), then the oldest.
fn most_urgent_first(questions: &mut [Question]) {
    questions.sort_by(|a, b| {
        urgency_rank(b.urgency)
            .cmp(&urgency_rank(a.urgency))
            .then_with(|| match (a.timeout_at, b.timeout_at) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// A call on one line: its arguments as `name=value` (strings without quotes), for the row's summary.
fn call_line(arguments: &serde_json::Value) -> String {
    let Some(arguments) = arguments.as_object() else {
        return arguments.to_string();
    };
    arguments
        .iter()
        .map(|(name, value)| match value {
            serde_json::Value::String(text) => format!("{name}={text}"),
            other => format!("{name}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a batch would act on, said before it is sent: "3 approvals, 1 critical: Deploy to prod".
fn selection_summary(selected: &[&Question]) -> String {
    let count = selected.len();
    let mut text = format!("{count} approval{}", if count == 1 { "" } else { "s" });
    let critical: Vec<&str> =
        selected.iter().filter(|q| q.urgency == Urgency::Critical).map(|q| q.title.as_str()).collect();
    if !critical.is_empty() {
        text.push_str(&format!(", {} critical: {}", critical.len(), critical.join("; ")));
    }
    text
}

fn item_result(result: &AnswerBatchResult, approve: bool) -> ItemResult {
    let text = match (result.status, &result.error) {
        (AnswerBatchStatus::Answered, _) => (if approve { "Approved" } else { "Rejected" }).to_owned(),
        (AnswerBatchStatus::ApprovalAdded, _) => match result.question.as_ref().and_then(|q| q.approval_progress()) {
            Some(progress) => format!("Approval recorded: {progress}"),
            None => "Approval recorded".to_owned(),
        },
        (_, Some(error)) => capitalise(&error.message),
        (status, None) => status.as_str().replace('_', " "),
    };
    ItemResult { status: result.status.as_str().to_owned(), text }
}

/// The page.
#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let search = use_location().search;
    let filter = Memo::new(move |_| {
        search.with(|s| {
            let mut filter = InboxFilter::from_query(|name| query_param(s, name));
            filter.kind = Some(QuestionKind::Approval);
            filter.status = Some(QuestionStatus::Pending);
            // Pages in the queue's own order after urgency: the approvals that run out first load first, and a
            // page shown later joins the queue below the ones before it.
            filter.by_deadline = true;
            filter
        })
    });
    // Where the queue starts when it does not start at the top: a page "Show more" links to without JavaScript.
    let after = Memo::new(move |_| search.with(|s| query_param(s, "after").filter(|a| !a.is_empty())));
    let initial =
        crate::codec::resource(move || (filter.get(), after.get()), |(filter, after)| inbox_questions(filter, after));
    // Who is signed in: only the approvals they may decide can be selected.
    let session = crate::codec::resource(|| (), |_| current_session());
    let updates = use_question_updates();
    view! {
        <main class="page" data-testid="approvals-page">
            <h1>"Approvals"</h1>
            <form method="get" action="/approvals" class="filters" role="search">
                <label class="filter grow">
                    <span>"Search"</span>
                    <input type="search" name="q" maxlength=crate::SEARCH_MAX_CHARS value=filter.get_untracked().text.unwrap_or_default() data-testid="filter-q"/>
                </label>
                <label class="filter">
                    <span>"Project"</span>
                    <input type="text" name="project" size="10" value=filter.get_untracked().project.unwrap_or_default() data-testid="filter-project"/>
                </label>
                <button type="submit" data-testid="filter-apply">"Apply"</button>
            </form>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || initial.get().zip(session.get()).map(|(result, session)| match result {
                    Ok(page) => Either::Left(view! {
                        <ApprovalQueue first=page after=after.get_untracked() filter=filter.get_untracked() updates viewer=session.ok()/>
                    }),
                    Err(err) => Either::Right(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                })}
            </Suspense>
        </main>
    }
}

/// Why `viewer` may not decide `question` while it is pending (see [`Question::refusal_to_decide`]); `None` if they
/// may, or if the page could not tell who is signed in (the server then decides each item alone).
fn refusal(viewer: StoredValue<Option<SessionInfo>>, question: &Question) -> Option<String> {
    if question.status != QuestionStatus::Pending {
        return None;
    }
    viewer.with_value(|viewer| viewer.as_ref().and_then(|viewer| question.refusal_to_decide(viewer.decider())))
}

#[component]
fn ApprovalQueue(
    /// The queue's first page: from its top, or past `after`.
    first: Page<Question>,
    after: Option<String>,
    filter: InboxFilter,
    updates: ReadSignal<Vec<Question>>,
    viewer: Option<SessionInfo>,
) -> impl IntoView {
    let viewer = StoredValue::new(viewer);
    let results = RwSignal::new(ItemResults::default());
    let selected = RwSignal::new(Vec::<Uuid>::new());
    let comment = RwSignal::new(String::new());
    // Whether the approved calls become grants: each exact call, for its agent, for 24 hours.
    let always_allow = RwSignal::new(false);
    let busy = RwSignal::new(false);
    let summary = RwSignal::new(None::<String>);
    let error = RwSignal::new(None::<String>);
    // The decision waiting for a confirmation because the selection holds a critical approval.
    let confirming = RwSignal::new(None::<bool>);

    let pages = Pages::new(first, after.as_deref());
    let query = [("q", &filter.text), ("project", &filter.project)]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}={}", crate::navigation::query_value(v))))
        .collect::<Vec<_>>()
        .join("&");
    let listed = StoredValue::new(filter.clone());
    let more = pages.controls("/approvals", query, move |after| inbox_questions(listed.get_value(), Some(after)));
    // Pending approvals that match, plus those this page has just decided (to show their results).
    let shown = Memo::new(move |_| {
        let mut merged: Vec<Question> = pages.loaded.get();
        updates.with(|updates| {
            for update in updates {
                match merged.iter_mut().find(|q| q.id == update.id) {
                    Some(existing) => *existing = update.clone(),
                    None if pages.loaded.with(|loaded| pages.admits(loaded, &filter, update)) => {
                        merged.push(update.clone())
                    }
                    None => {}
                }
            }
        });
        results.with(|r| merged.retain(|q| filter.matches(q) || r.get(q.id).is_some()));
        most_urgent_first(&mut merged);
        merged
    });
    // The pending approvals the viewer may decide: the ones a selection can hold.
    let pending_ids = move || {
        shown.with(|s| {
            s.iter()
                .filter(|q| q.status == QuestionStatus::Pending && refusal(viewer, q).is_none())
                .map(|q| q.id)
                .collect::<Vec<_>>()
        })
    };
    let groups = Memo::new(move |_| by_tool(shown.get()));
    let all_selected = move || {
        let pending = pending_ids();
        !pending.is_empty() && selected.with(|s| pending.iter().all(|id| s.contains(id)))
    };

    // The selected approvals still pending, in the queue's order.
    let chosen = Memo::new(move |_| {
        selected.with(|ids| {
            shown.with(|s| {
                s.iter()
                    .filter(|q| q.status == QuestionStatus::Pending && ids.contains(&q.id))
                    .cloned()
                    .collect::<Vec<_>>()
            })
        })
    });
    let chosen_summary = move || chosen.with(|c| selection_summary(&c.iter().collect::<Vec<_>>()));
    let any_critical = move || chosen.with(|c| c.iter().any(|q| q.urgency == Urgency::Critical));

    // A selected approval that someone answered elsewhere, or that was cancelled, is no longer chosen.
    Effect::new(move |_| {
        let pending = pending_ids();
        if selected.with_untracked(|ids| ids.iter().any(|id| !pending.contains(id))) {
            selected.update(|ids| ids.retain(|id| pending.contains(id)));
        }
    });

    let send = move |approve: bool| {
        confirming.set(None);
        let ids: Vec<Uuid> = chosen.with_untracked(|chosen| chosen.iter().map(|q| q.id).collect());
        if ids.is_empty() {
            error.set(Some("Select at least one approval.".into()));
            return;
        }
        error.set(None);
        busy.set(true);
        let text = comment.get_untracked();
        let shared_comment = Some(text.trim().to_owned()).filter(|c| !c.is_empty());
        let grant = (approve && always_allow.get_untracked()).then_some(crate::types::GrantRequest {
            scope: crate::types::GrantScope::Agent,
            matcher: None,
            expires_in_seconds: None,
        });
        let body = AnswerBatch {
            items: ids
                .iter()
                .map(|id| AnswerBatchItem {
                    id: id.to_string(),
                    value: serde_json::Value::Bool(approve),
                    comment: shared_comment.clone(),
                    edited_arguments: None,
                    grant: grant.clone(),
                })
                .collect(),
        };
        leptos::task::spawn_local(async move {
            let outcome = post_json::<_, AnswerBatchResults>("/questions/answer-batch", &body).await;
            busy.set(false);
            match outcome {
                Ok(batch) => {
                    let answered = batch
                        .results
                        .iter()
                        .filter(|r| matches!(r.status, AnswerBatchStatus::Answered | AnswerBatchStatus::ApprovalAdded))
                        .count();
                    let total = batch.results.len();
                    results.update(|decided| {
                        for result in &batch.results {
                            if let Ok(id) = Uuid::parse_str(&result.id) {
                                decided.set(id, item_result(result, approve));
                            }
                        }
                    });
                    selected.set(Vec::new());
                    comment.set(String::new());
                    always_allow.set(false);
                    let verb = if approve { "approved" } else { "rejected" };
                    summary.set(Some(if answered == total {
                        format!("{answered} {verb}.")
                    } else {
                        format!("{answered} of {total} {verb}; see each item for the others.")
                    }));
                }
                Err(err) => error.set(Some(err.describe())),
            }
        });
    };

    // A selection with a critical approval is confirmed first, with what it holds in view.
    let decide = move |approve: bool| {
        if any_critical() && confirming.get_untracked() != Some(approve) {
            confirming.set(Some(approve));
        } else {
            send(approve);
        }
    };

    view! {
        <div class="batch-bar" data-testid="batch-bar">
            <label class="option">
                <input type="checkbox" data-testid="approval-select-all"
                    prop:checked=all_selected
                    on:change=move |ev| {
                        if event_target_checked(&ev) { selected.set(pending_ids()) } else { selected.set(Vec::new()) }
                    }/>
                <span>{move || {
                    let shown = if pages.cut() { "shown (more below)" } else { "matching" };
                    format!("Select all {} {shown}", pending_ids().len())
                }}</span>
            </label>
            <label for="batch-comment" class="visually-hidden">"Comment for all selected"</label>
            <textarea id="batch-comment" rows="2" placeholder="One comment for all (a rejection's reason goes to each agent)"
                data-testid="batch-comment" prop:value=move || comment.get()
                on:input=move |ev| comment.set(event_target_value(&ev))></textarea>
            <label class="option">
                <input type="checkbox" data-testid="batch-always-allow"
                    prop:checked=move || always_allow.get()
                    on:change=move |ev| always_allow.set(event_target_checked(&ev))/>
                <span>"Always allow these exact calls for their agent (24 h)"</span>
            </label>
            <div class="button-row">
                <button type="button" class="primary" data-testid="batch-approve"
                    disabled=move || busy.get() || chosen.with(Vec::is_empty) on:click=move |_| decide(true)>
                    {move || format!("Approve {}", chosen.with(Vec::len))}
                </button>
                <button type="button" class="danger" data-testid="batch-reject"
                    disabled=move || busy.get() || chosen.with(Vec::is_empty) on:click=move |_| decide(false)>
                    {move || format!("Reject {}", chosen.with(Vec::len))}
                </button>
            </div>
            <p class="selection" class:critical=any_critical data-testid="batch-selection" aria-live="polite">
                {move || if chosen.with(Vec::is_empty) { "Nothing selected".to_owned() } else { chosen_summary() }}
            </p>
        </div>
        {move || confirming.get().map(|approve| {
            let verb = if approve { "approve" } else { "reject" };
            view! {
                <div class="confirm" role="alertdialog" aria-labelledby="batch-confirm-text" data-testid="batch-confirm">
                    <p id="batch-confirm-text">
                        <strong>{format!("The selection holds a critical approval. {} ", capitalise(verb))}</strong>
                        {chosen_summary()} "?"
                    </p>
                    <div class="button-row">
                        <button type="button" class=if approve { "primary" } else { "danger" } data-testid="batch-confirm-yes"
                            on:click=move |_| send(approve)>{format!("Yes, {verb} {}", chosen.with(Vec::len))}</button>
                        <button type="button" data-testid="batch-confirm-cancel" on:click=move |_| confirming.set(None)>"Cancel"</button>
                    </div>
                </div>
            }
        })}
        {move || summary.get().map(|s| view! { <p class="resolution" role="status" data-testid="batch-summary">{s}</p> })}
        {move || error.get().map(|e| view! { <p class="alert" role="alert" data-testid="batch-error">{e}</p> })}
        // A group stays as long as its tool has approvals shown, and a row as long as its question is unchanged: a
        // claim or an answer elsewhere redraws that one row, and the focus and the checkboxes of the others stay.
        <For
            each=move || groups.with(|groups| groups.iter().map(|(tool, _)| tool.clone()).collect::<Vec<_>>())
            key=String::clone
            children=move |tool| {
                let name = tool.clone();
                let items = Signal::derive(move || {
                    groups.with(|groups| groups.iter().find(|(t, _)| *t == name).map(|(_, items)| items.clone()).unwrap_or_default())
                });
                view! { <ToolGroup tool items selected results viewer/> }
            }
        />
        {more}
        <Show when=move || shown.with(Vec::is_empty)>
            <div class="empty" data-testid="approvals-empty">
                <p class="empty-title">"No approvals are waiting."</p>
                <p>"When an agent wants to run a tool that needs a person's go-ahead, the call waits here."</p>
            </div>
        </Show>
    }
    .into_any()
}

#[component]
fn ToolGroup(
    tool: String,
    items: Signal<Vec<Question>>,
    selected: RwSignal<Vec<Uuid>>,
    results: RwSignal<ItemResults>,
    viewer: StoredValue<Option<SessionInfo>>,
) -> impl IntoView {
    view! {
        <section class="tool-group" data-testid="approval-group" data-tool=tool.clone()>
            <h2>"Tool " <code>{tool.clone()}</code> <span class="muted">{move || format!(" · {}", items.with(Vec::len))}</span></h2>
            <ul class="question-list">
                <For
                    each=move || items.get()
                    key=|q| (q.id, q.updated_at)
                    children=move |question| view! { <ApprovalRow question selected results viewer/> }
                />
            </ul>
        </section>
    }
    .into_any()
}

#[component]
fn ApprovalRow(
    question: Question,
    selected: RwSignal<Vec<Uuid>>,
    results: RwSignal<ItemResults>,
    viewer: StoredValue<Option<SessionInfo>>,
) -> impl IntoView {
    let id = question.id;
    let pending = question.status == QuestionStatus::Pending;
    let refused = refusal(viewer, &question);
    let call = question.action.as_ref().map(|a| {
        (a.tool_name.clone(), call_line(&a.arguments), serde_json::to_string_pretty(&a.arguments).unwrap_or_default())
    });
    let result = move || results.with(|r| r.get(id).cloned());
    let checkbox_id = format!("select-{}", id.simple());
    view! {
        <li class=format!("question-row approval-row urgency-{}", question.urgency) data-testid="approval-item"
            data-question-id=id.to_string() data-urgency=question.urgency.as_str()>
            <div class="approval-head">
                {(pending && refused.is_none()).then(|| view! {
                    <input type="checkbox" id=checkbox_id.clone() data-testid="approval-select"
                        aria-label=format!("Select “{}”", question.title)
                        prop:checked=move || selected.with(|s| s.contains(&id))
                        on:change=move |ev| {
                            let checked = event_target_checked(&ev);
                            selected.update(|s| {
                                s.retain(|x| *x != id);
                                if checked { s.push(id); }
                            });
                        }/>
                })}
                <a class="question-title" href=format!("/questions/{id}")>{question.title.clone()}</a>
            </div>
            <div class="question-meta">
                <Badge text=question.urgency.to_string() class=format!("urgency-{}", question.urgency)/>
                {question.project.clone().map(|p| view! { <Badge text=p class="project"/> })}
                {question.allow_edit.then(|| view! { <Badge text="editable" class="editable"/> })}
                {question.run_id.map(|run| view! { <a href=format!("/runs/{run}")>"run " {crate::components::short_id(&run)}</a> })}
                {pending.then_some(question.timeout_at).flatten().map(|t| view! { <Countdown deadline=t/> })}
                {pending.then(|| question.approval_progress()).flatten().map(|p| view! {
                    <span class="quorum" data-testid="approval-quorum">{format!("{p} approvals")}</span>
                })}
                {pending.then(|| view! {
                    <crate::components::ClaimedBy holder=question.claimed_by.clone() until=question.claim_expires_at
                        testid="approval-claimed-by"/>
                })}
                {(!pending && result().is_none()).then(|| view! { <Badge text=question.status.to_string() class="status"/> })}
            </div>
            {call.map(|(tool, line, pretty)| view! {
                <details class="call">
                    <summary data-testid="approval-call"><code>{tool}</code> " " <code class="call-line">{line}</code></summary>
                    <pre tabindex="0" class="arguments" data-testid="approval-arguments">{pretty}</pre>
                </details>
            })}
            {refused.map(|text| view! { <p class="muted" data-testid="approval-refused">{format!("{}.", capitalise(&text))}</p> })}
            {move || result().map(|r| view! {
                <p class=format!("item-result result-{}", r.status) data-testid="approval-result" data-status=r.status.clone()>{r.text}</p>
            })}
        </li>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_group_by_tool_in_the_order_of_their_first_item_and_keep_the_list_order_within_a_group() {
        let ask = |title: &str, tool: Option<&str>| {
            let mut q = crate::types::sample_question(title, QuestionStatus::Pending);
            q.action =
                tool.map(|t| crate::types::ApprovalAction { tool_name: t.into(), arguments: Default::default() });
            q
        };
        let questions =
            vec![ask("a", Some("shell")), ask("b", Some("http_request")), ask("c", None), ask("d", Some("shell"))];
        let groups: Vec<(String, Vec<String>)> = by_tool(questions)
            .into_iter()
            .map(|(tool, items)| (tool, items.into_iter().map(|q| q.title).collect()))
            .collect();
        let expected = [("shell", vec!["a", "d"]), ("http_request", vec!["b"]), ("(no tool)", vec!["c"])];
        assert_eq!(
            groups,
            expected.map(|(tool, titles)| (tool.to_owned(), titles.into_iter().map(String::from).collect()))
        );
    }

    #[test]
    fn the_queue_puts_the_most_urgent_first_then_the_soonest_deadline() {
        let now = chrono::Utc::now();
        let ask = |title: &str, urgency: Urgency, minutes: Option<i64>| {
            let mut q = crate::types::sample_question(title, QuestionStatus::Pending);
            q.urgency = urgency;
            q.timeout_at = minutes.map(|m| now + chrono::Duration::minutes(m));
            q
        };
        let mut queue = vec![
            ask("high later", Urgency::High, Some(30)),
            ask("low", Urgency::Low, Some(1)),
            ask("high sooner", Urgency::High, Some(5)),
            ask("high never", Urgency::High, None),
            ask("critical", Urgency::Critical, Some(60)),
        ];
        most_urgent_first(&mut queue);
        let titles: Vec<&str> = queue.iter().map(|q| q.title.as_str()).collect();
        assert_eq!(titles, ["critical", "high sooner", "high later", "high never", "low"]);
    }

    #[test]
    fn a_selection_is_summarised_with_its_critical_approvals_named() {
        let mut prod = crate::types::sample_question("terraform apply on prod", QuestionStatus::Pending);
        prod.urgency = Urgency::Critical;
        let routine = crate::types::sample_question("clean the cache", QuestionStatus::Pending);
        assert_eq!(selection_summary(&[&routine]), "1 approval");
        assert_eq!(selection_summary(&[&routine, &prod, &routine]), "3 approvals, 1 critical: terraform apply on prod");
    }

    #[test]
    fn a_call_reads_on_one_line() {
        let arguments = serde_json::json!({"command": "terraform apply", "dry_run": false});
        assert_eq!(call_line(&arguments), "command=terraform apply dry_run=false");
    }

    #[test]
    fn a_later_result_for_a_question_replaces_the_earlier_one() {
        let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
        let result = |status: &str| ItemResult { status: status.into(), text: status.into() };
        let mut results = ItemResults::default();
        results.set(first, result("conflict"));
        results.set(second, result("answered"));
        results.set(first, result("answered"));
        assert_eq!(results.get(first), Some(&result("answered")));
        assert_eq!(results.get(second), Some(&result("answered")));
        assert_eq!(results.get(Uuid::now_v7()), None);
    }

    #[test]
    fn an_item_result_says_what_happened_and_who_was_first() {
        let answered =
            AnswerBatchResult { id: "x".into(), status: AnswerBatchStatus::Answered, error: None, question: None };
        assert_eq!(item_result(&answered, false).text, "Rejected");
        let conflict = AnswerBatchResult {
            id: "x".into(),
            status: AnswerBatchStatus::Conflict,
            question: None,
            error: Some(crate::types::ErrorDetail {
                code: "conflict".into(),
                message: "question is already answered by alice".into(),
                details: None,
            }),
        };
        assert_eq!(item_result(&conflict, true).text, "Question is already answered by alice");
    }
}
