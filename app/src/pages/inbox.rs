//! The inbox: every pending question of the workspace, kept current by the event stream.

use leptos::prelude::*;

use crate::components::{Badge, TopBar};
use crate::inbox_questions;
use crate::live::use_question_updates;
use crate::types::{Question, QuestionStatus};

/// `/inbox`: pending questions, newest first; new ones appear without a reload.
#[component]
pub fn InboxPage() -> impl IntoView {
    let initial = Resource::new(|| (), |_| inbox_questions());
    let updates = use_question_updates();
    view! {
        <TopBar/>
        <main class="page" data-testid="inbox-page">
            <h1>"Inbox"</h1>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || initial.get().map(|result| match result {
                    Ok(page) => view! { <QuestionList initial=page.items updates/> }.into_any(),
                    Err(err) => view! { <p class="alert" role="alert">{err.to_string()}</p> }.into_any(),
                })}
            </Suspense>
        </main>
    }
}

/// Applies live updates to the server-rendered list: a new question goes on top, a resolved one leaves.
fn merge_pending(initial: &[Question], updates: &[Question]) -> Vec<Question> {
    let mut merged: Vec<Question> = initial.to_vec();
    for update in updates {
        match merged.iter_mut().find(|q| q.id == update.id) {
            Some(existing) => *existing = update.clone(),
            None => merged.insert(0, update.clone()),
        }
    }
    merged.retain(|q| q.status == QuestionStatus::Pending);
    merged
}

#[component]
fn QuestionList(initial: Vec<Question>, updates: ReadSignal<Vec<Question>>) -> impl IntoView {
    let pending = Memo::new(move |_| updates.with(|u| merge_pending(&initial, u)));
    view! {
        <p class="muted" data-testid="pending-count">{move || format!("{} pending", pending.with(Vec::len))}</p>
        <ul class="question-list" data-testid="question-list">
            <For each=move || pending.get() key=|q| (q.id, q.updated_at) let:question>
                <QuestionRow question/>
            </For>
        </ul>
        <Show when=move || pending.with(Vec::is_empty)>
            <p class="empty" data-testid="inbox-empty">"Nothing is waiting for you."</p>
        </Show>
    }
}

#[component]
fn QuestionRow(question: Question) -> impl IntoView {
    let project = question.project.clone();
    view! {
        <li class="question-row" data-testid="question-item" data-question-id=question.id.to_string()>
            <a class="question-title" href=format!("/questions/{}", question.id) data-testid="question-link">
                {question.title.clone()}
            </a>
            <div class="question-meta">
                <Badge text=question.kind.as_str().replace('_', " ") class="kind"/>
                <Badge text=question.urgency.to_string() class=format!("urgency-{}", question.urgency)/>
                {project.map(|p| view! { <Badge text=p class="project"/> })}
                <time datetime=question.created_at.to_rfc3339()>
                    {question.created_at.format("%Y-%m-%d %H:%M UTC").to_string()}
                </time>
            </div>
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::*;
    use chrono::Utc;
    use uuid::Uuid;

    fn question(title: &str, status: QuestionStatus) -> Question {
        Question {
            id: Uuid::now_v7(),
            workspace: "default".into(),
            project: None,
            run_id: None,
            tool_call_id: None,
            parent_run_ids: vec![],
            kind: QuestionKind::Blocking,
            response_type: ResponseType::Text,
            title: title.into(),
            body: String::new(),
            options: vec![],
            fields: vec![],
            action: None,
            allow_edit: false,
            context: serde_json::json!({}),
            urgency: Urgency::High,
            timeout_at: None,
            default_response: None,
            status,
            response: None,
            answered_by: None,
            resolution: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
            resolved_at: None,
        }
    }

    #[test]
    fn a_new_question_goes_on_top_and_a_resolved_one_leaves() {
        let old = question("old", QuestionStatus::Pending);
        let new = question("new", QuestionStatus::Pending);
        let mut answered = old.clone();
        answered.status = QuestionStatus::Answered;

        let merged = merge_pending(std::slice::from_ref(&old), std::slice::from_ref(&new));
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["new", "old"]);

        let merged = merge_pending(&[old], &[new, answered]);
        assert_eq!(merged.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["new"]);
    }
}
