//! `/approvals`: the pending approvals, grouped by tool, with batch actions: select many (or all that match the
//! filter), write one comment, approve or reject them in one `POST /api/v1/questions/answer-batch`, and see each
//! item's result (answered, already answered by someone, invalid, not allowed).

use leptos::either::Either;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use uuid::Uuid;

use crate::api::post_json;
use crate::components::{Badge, Countdown, capitalise};
use crate::live::use_question_updates;
use crate::types::{
    AnswerBatch, AnswerBatchItem, AnswerBatchResult, AnswerBatchResults, AnswerBatchStatus, Question, QuestionKind,
    QuestionStatus,
};
use crate::{InboxFilter, inbox_questions};

/// What happened to one item of a batch, for its row.
#[derive(Debug, Clone, PartialEq)]
struct ItemResult {
    /// The API's per-item status: `answered`, `conflict`, `invalid`, `not_found`, `forbidden`.
    status: String,
    text: String,
}

/// The results of the batches this page has sent, by question: a list, not a map, since a queue holds at most 200
/// approvals and a map type of its own would add its code to the page's wasm.
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

/// The approvals grouped by tool name, in the names' order, each group in the list's order. Kept sorted as it is
/// built, with no map or sort of its own: each would add its code to the page's wasm for at most 200 approvals.
fn by_tool(questions: Vec<Question>) -> Vec<(String, Vec<Question>)> {
    let mut groups = Vec::<(String, Vec<Question>)>::new();
    for q in questions {
        let tool = q.action.as_ref().map_or_else(|| "(no tool)".to_owned(), |a| a.tool_name.clone());
        match groups.binary_search_by(|(name, _)| name.as_str().cmp(&tool)) {
            Ok(at) => groups[at].1.push(q),
            Err(at) => groups.insert(at, (tool, vec![q])),
        }
    }
    groups
}

fn item_result(result: &AnswerBatchResult, approve: bool) -> ItemResult {
    let text = match (result.status, &result.error) {
        (AnswerBatchStatus::Answered, _) => (if approve { "Approved" } else { "Rejected" }).to_owned(),
        (_, Some(error)) => capitalise(&error.message),
        (status, None) => status.as_str().replace('_', " "),
    };
    ItemResult { status: result.status.as_str().to_owned(), text }
}

/// The page.
#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let query = use_query_map();
    let filter = Memo::new(move |_| {
        query.with(|q| {
            let mut filter = InboxFilter::from_query(|name| q.get(name));
            filter.kind = Some(QuestionKind::Approval);
            filter.status = Some(QuestionStatus::Pending);
            filter
        })
    });
    let initial = crate::codec::resource(move || filter.get(), inbox_questions);
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
                {move || initial.get().map(|result| match result {
                    Ok(page) => Either::Left(view! { <ApprovalQueue initial=page.items filter=filter.get_untracked() updates/> }),
                    Err(err) => Either::Right(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                })}
            </Suspense>
        </main>
    }
}

#[component]
fn ApprovalQueue(initial: Vec<Question>, filter: InboxFilter, updates: ReadSignal<Vec<Question>>) -> impl IntoView {
    let results = RwSignal::new(ItemResults::default());
    let selected = RwSignal::new(Vec::<Uuid>::new());
    let comment = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let summary = RwSignal::new(None::<String>);
    let error = RwSignal::new(None::<String>);

    // Pending approvals that match, plus those this page has just decided (to show their results).
    let shown = Memo::new(move |_| {
        let mut merged: Vec<Question> = initial.clone();
        updates.with(|updates| {
            for update in updates {
                match merged.iter_mut().find(|q| q.id == update.id) {
                    Some(existing) => *existing = update.clone(),
                    None => merged.push(update.clone()),
                }
            }
        });
        results.with(|r| merged.retain(|q| filter.matches(q) || r.get(q.id).is_some()));
        filter.sort(&mut merged);
        merged
    });
    let pending_ids = move || {
        shown.with(|s| s.iter().filter(|q| q.status == QuestionStatus::Pending).map(|q| q.id).collect::<Vec<_>>())
    };
    let groups = Memo::new(move |_| by_tool(shown.get()));
    let all_selected = move || {
        let pending = pending_ids();
        !pending.is_empty() && selected.with(|s| pending.iter().all(|id| s.contains(id)))
    };

    let decide = move |approve: bool| {
        let ids: Vec<Uuid> = selected.get_untracked();
        if ids.is_empty() {
            error.set(Some("Select at least one approval.".into()));
            return;
        }
        error.set(None);
        busy.set(true);
        let text = comment.get_untracked();
        let comment = Some(text.trim().to_owned()).filter(|c| !c.is_empty());
        let body = AnswerBatch {
            items: ids
                .iter()
                .map(|id| AnswerBatchItem {
                    id: id.to_string(),
                    value: serde_json::Value::Bool(approve),
                    comment: comment.clone(),
                    edited_arguments: None,
                })
                .collect(),
        };
        leptos::task::spawn_local(async move {
            let outcome = post_json::<_, AnswerBatchResults>("/questions/answer-batch", &body).await;
            busy.set(false);
            match outcome {
                Ok(batch) => {
                    let answered = batch.results.iter().filter(|r| r.status == AnswerBatchStatus::Answered).count();
                    let total = batch.results.len();
                    results.update(|decided| {
                        for result in &batch.results {
                            if let Ok(id) = Uuid::parse_str(&result.id) {
                                decided.set(id, item_result(result, approve));
                            }
                        }
                    });
                    selected.set(Vec::new());
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

    view! {
        <div class="batch-bar" data-testid="batch-bar">
            <label class="option">
                <input type="checkbox" data-testid="approval-select-all"
                    prop:checked=all_selected
                    on:change=move |ev| {
                        if event_target_checked(&ev) { selected.set(pending_ids()) } else { selected.set(Vec::new()) }
                    }/>
                <span>{move || format!("Select all {} matching", pending_ids().len())}</span>
            </label>
            <label for="batch-comment" class="visually-hidden">"Comment for all selected"</label>
            <textarea id="batch-comment" rows="1" placeholder="One comment for all (a rejection's reason goes to each agent)"
                data-testid="batch-comment" on:input=move |ev| comment.set(event_target_value(&ev))></textarea>
            <div class="button-row">
                <button type="button" class="primary" data-testid="batch-approve"
                    disabled=move || busy.get() || selected.with(Vec::is_empty) on:click=move |_| decide(true)>
                    {move || format!("Approve {}", selected.with(Vec::len))}
                </button>
                <button type="button" class="danger" data-testid="batch-reject"
                    disabled=move || busy.get() || selected.with(Vec::is_empty) on:click=move |_| decide(false)>
                    {move || format!("Reject {}", selected.with(Vec::len))}
                </button>
            </div>
        </div>
        {move || summary.get().map(|s| view! { <p class="resolution" role="status" data-testid="batch-summary">{s}</p> })}
        {move || error.get().map(|e| view! { <p class="alert" role="alert" data-testid="batch-error">{e}</p> })}
        <For
            each=move || groups.get()
            key=|(tool, items)| (tool.clone(), items.iter().map(|q| (q.id, q.updated_at)).collect::<Vec<_>>())
            children=move |(tool, items)| view! { <ToolGroup tool items selected results/> }
        />
        <Show when=move || shown.with(Vec::is_empty)>
            <p class="empty" data-testid="approvals-empty">"No approvals are waiting."</p>
        </Show>
    }
    .into_any()
}

#[component]
fn ToolGroup(
    tool: String,
    items: Vec<Question>,
    selected: RwSignal<Vec<Uuid>>,
    results: RwSignal<ItemResults>,
) -> impl IntoView {
    view! {
        <section class="tool-group" data-testid="approval-group" data-tool=tool.clone()>
            <h2>"Tool " <code>{tool.clone()}</code> <span class="muted">{format!(" · {}", items.len())}</span></h2>
            <ul class="question-list">
                {items.into_iter().map(|q| view! { <ApprovalRow question=q selected results/> }).collect_view()}
            </ul>
        </section>
    }
    .into_any()
}

#[component]
fn ApprovalRow(question: Question, selected: RwSignal<Vec<Uuid>>, results: RwSignal<ItemResults>) -> impl IntoView {
    let id = question.id;
    let pending = question.status == QuestionStatus::Pending;
    let arguments = question.action.as_ref().map(|a| serde_json::to_string_pretty(&a.arguments).unwrap_or_default());
    let result = move || results.with(|r| r.get(id).cloned());
    let checkbox_id = format!("select-{}", id.simple());
    view! {
        <li class="question-row approval-row" data-testid="approval-item" data-question-id=id.to_string()>
            <div class="approval-head">
                {pending.then(|| view! {
                    <input type="checkbox" id=checkbox_id.clone() data-testid="approval-select" aria-label="Select"
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
                {(!pending && result().is_none()).then(|| view! { <Badge text=question.status.to_string() class="status"/> })}
            </div>
            {arguments.map(|a| view! { <pre class="arguments">{a}</pre> })}
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
    fn approvals_group_by_tool_in_name_order_and_keep_the_list_order_within_a_group() {
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
        let expected = [("(no tool)", vec!["c"]), ("http_request", vec!["b"]), ("shell", vec!["a", "d"])];
        assert_eq!(
            groups,
            expected.map(|(tool, titles)| (tool.to_owned(), titles.into_iter().map(String::from).collect()))
        );
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
