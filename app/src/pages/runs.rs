//! `/runs` and `/runs/{id}`: the runs of the workspace, and one run's timeline (messages and tool calls with their
//! durations and decisions), its segments and status, with its pending questions answerable inline. Both pages
//! follow `run_status` events: the list updates statuses in place, the run page reloads its data when its run moves.

use leptos::either::{Either, EitherOf3};
use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use serde_json::Value;
use uuid::Uuid;

use crate::components::{Badge, Countdown, clock, date_time};
use crate::live::use_live;
use crate::markdown::Markdown;
use crate::types::{QuestionStatus, Run, RunMessage, RunStatus, Segment, ToolCall};
use crate::{RunTimeline, run_detail, runs_list};

/// `/runs?status=&project=`: newest first.
#[component]
pub fn RunsPage() -> impl IntoView {
    let query = use_query_map();
    let filter = Memo::new(move |_| {
        query.with(|q| {
            (
                q.get("status").and_then(|s| s.parse::<RunStatus>().ok()),
                q.get("project").map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()),
            )
        })
    });
    let live = use_live();
    // Also reloaded once the event stream is open, so nothing that moved since the server render is missed.
    let runs = crate::codec::resource(
        move || (filter.get(), live.opened.get()),
        |((status, project), _)| runs_list(status, project),
    );
    let (status, project) = filter.get_untracked();
    let filtered = status.is_some() || project.is_some();
    let selected = status.map(|s| s.to_string()).unwrap_or_default();
    view! {
        <main class="page" data-testid="runs-page">
            <h1>"Runs"</h1>
            <form method="get" action="/runs" class="filters" role="search">
                <label class="filter">
                    <span>"Status"</span>
                    <select name="status" data-testid="runs-filter-status">
                        <option value="">"any"</option>
                        {RunStatus::ALL.iter().map(|s| {
                            let value = s.to_string();
                            let is_selected = value == selected;
                            view! { <option value=value.clone() selected=is_selected>{value.replace('_', " ")}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <label class="filter">
                    <span>"Project"</span>
                    <input type="text" name="project" size="10" value=project.unwrap_or_default() data-testid="runs-filter-project"/>
                </label>
                <button type="submit" data-testid="runs-filter-apply">"Apply"</button>
            </form>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || runs.get().map(|result| match result {
                    Ok(page) => {
                        let items = page.items;
                        Either::Left(view! {
                            <ul class="question-list" data-testid="run-list">
                                {items.is_empty().then(|| view! { <RunsEmpty filtered/> })}
                                {items.into_iter().map(|run| view! { <RunRow run live_runs=live.runs/> }).collect_view()}
                            </ul>
                        })
                    }
                    Err(err) => Either::Right(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                })}
            </Suspense>
        </main>
    }
}

/// What the runs page says when it has no run to list: how runs come about, or that the filters hide them.
#[component]
fn RunsEmpty(filtered: bool) -> impl IntoView {
    view! {
        <li class="empty" data-testid="runs-empty">
            {if filtered {
                Either::Left(view! {
                    <p class="empty-title">"No run matches these filters."</p>
                    <p><a href="/runs">"Show every run"</a></p>
                })
            } else {
                Either::Right(view! {
                    <p class="empty-title">"No runs yet."</p>
                    <p>"A run is an agent at work: start one with " <code>"holdpoint run"</code> " or "
                        <code>"POST /api/v1/runs"</code> ", and its messages, tool calls and questions show here."</p>
                })
            }}
        </li>
    }
}

#[component]
fn StatusBadge(#[prop(into)] status: Signal<RunStatus>) -> impl IntoView {
    view! {
        <span class=move || format!("badge run-status status-{}", status.get()) data-testid="run-status">
            {move || status.get().to_string().replace('_', " ")}
        </span>
    }
}

#[component]
fn RunRow(run: Run, live_runs: ReadSignal<Vec<crate::types::RunStatusEventData>>) -> impl IntoView {
    let id = run.id;
    let initial = (run.status, run.step_count);
    let latest = Memo::new(move |_| {
        live_runs
            .with(|events| events.iter().rev().find(|e| e.run_id == id).map_or(initial, |e| (e.status, e.step_count)))
    });
    let input: String = run.input.chars().take(160).collect();
    view! {
        <li class="question-row" data-testid="run-item" data-run-id=id.to_string()>
            <a class="question-title" href=format!("/runs/{id}")>{run.agent_name.clone()}</a>
            <span class="muted run-input">" — " {input}</span>
            <div class="question-meta">
                <StatusBadge status=Signal::derive(move || latest.get().0)/>
                <span>{move || format!("{} steps", latest.get().1)}</span>
                {run.project.clone().map(|p| view! { <Badge text=p class="project"/> })}
                {run.parent_run_id.map(|p| view! { <a href=format!("/runs/{p}")>"child of " {crate::components::short_id(&p)}</a> })}
                {(!run.pending_question_ids.is_empty()).then(|| view! {
                    <Badge text=format!("{} waiting", run.pending_question_ids.len()) class="urgency-high"/>
                })}
                <time datetime=run.created_at.to_rfc3339()>{format!("{} UTC", date_time(run.created_at, false))}</time>
            </div>
        </li>
    }
}

/// `/runs/{id}`.
#[component]
pub fn RunPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|id| Uuid::parse_str(&id).ok()));
    let live = use_live();
    // Bumped by every event about this run, and by each of its questions arriving or being resolved: the page
    // reloads its data. A claim or an approval of a pending question changes only its panel, which follows the
    // stream itself, so an answer being typed inline is kept.
    let version = Memo::new(move |_| {
        let Some(id) = id() else { return 0 };
        let runs = live.runs.with(|events| events.iter().filter(|e| e.run_id == id).count());
        let questions = live.questions.with(|events| {
            events
                .iter()
                .filter(|q| q.run_id == Some(id))
                .filter(|q| q.status != QuestionStatus::Pending || live.arrived.with(|arrived| arrived.contains(&q.id)))
                .count()
        });
        runs + questions + live.opened.get() as usize
    });
    let detail = crate::codec::resource(
        move || (id(), version.get()),
        |(id, _)| async move {
            match id {
                Some(id) => run_detail(id).await,
                None => Ok(None),
            }
        },
    );
    view! {
        <main class="page" data-testid="run-page">
            <p><a href="/runs">"← Runs"</a></p>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || detail.get().map(|result| match result {
                    Ok(Some(detail)) => EitherOf3::A(view! { <RunView detail/> }),
                    Ok(None) => EitherOf3::B(view! { <h1>"No such run"</h1> }),
                    Err(err) => EitherOf3::C(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                })}
            </Transition>
        </main>
    }
}

#[component]
fn RunView(detail: RunTimeline) -> impl IntoView {
    let RunTimeline { run, messages, tool_calls, questions } = detail;
    let status = run.status;
    let lineage = run.parent_run_ids.clone();
    let answered = Callback::new(|_| ());
    let module_loaded = crate::deferred::module_loaded();
    view! {
        <h1 data-testid="run-title">{run.agent_name.clone()} <span class="muted">" · run " {crate::components::short_id(&run.id)}</span></h1>
        <div class="question-meta">
            <StatusBadge status=status/>
            <span data-testid="run-steps">{format!("{} steps (segment budget {}, cap {})", run.step_count, run.max_steps, run.max_total_steps)}</span>
            <Badge text=run.model.clone() class="model"/>
            {run.project.clone().map(|p| view! { <Badge text=p class="project"/> })}
        </div>
        {(!lineage.is_empty()).then(|| view! {
            <p class="lineage">"Lineage: "
                {lineage.into_iter().map(|id| view! { <a href=format!("/runs/{id}")><code>{crate::components::short_id(&id)}</code></a> " → " }).collect_view()}
                "this run"
            </p>
        })}
        <details class="context"><summary>"Task"</summary><Markdown source=run.input.clone()/></details>
        {run.error_message.clone().map(|e| view! { <p class="alert" role="alert" data-testid="run-error">{e}</p> })}
        {run.result.clone().map(|r| view! { <section class="run-result" data-testid="run-result"><h2>"Result"</h2><Markdown source=r/></section> })}
        {(!questions.is_empty()).then(|| view! {
            <section class="pending-questions" data-testid="run-questions">
                <h2>"Waiting for you"</h2>
                {questions.into_iter().map(|q| view! {
                    <article class="inline-question" data-testid="run-question" data-question-id=q.id.to_string()>
                        <h3><a href=format!("/questions/{}", q.id)>{q.title.clone()}</a></h3>
                        <div class="question-meta">
                            <Badge text=q.kind.as_str().replace('_', " ") class="kind"/>
                            {q.timeout_at.map(|t| view! { <Countdown deadline=t/> })}
                        </div>
                        <crate::components::ManyHands question=q.clone() testid="inline"/>
                        {(!q.body.is_empty()).then(|| view! { <Markdown source=q.body.clone()/> })}
                        {
                            let question = q.clone();
                            move || crate::deferred::show(
                                module_loaded,
                                crate::deferred::Part::RunAnswer { question: Box::new(question.clone()), answered },
                            )
                        }
                    </article>
                }).collect_view()}
            </section>
        })}
        <Segments segments=run.segments.clone()/>
        <h2>"Timeline"</h2>
        <ol class="timeline" data-testid="run-timeline">
            {messages.into_iter().map(|m| {
                let calls: Vec<ToolCall> = tool_calls.iter().filter(|c| c.message_id == m.id).cloned().collect();
                view! { <TimelineEntry message=m calls/> }
            }).collect_view()}
        </ol>
    }
}

#[component]
fn Segments(segments: Vec<Segment>) -> impl IntoView {
    (!segments.is_empty()).then(|| {
        view! {
            <h2>"Segments"</h2>
            <table class="segments" data-testid="run-segments">
                <thead><tr><th>"#"</th><th>"steps"</th><th>"started"</th><th>"ended"</th><th>"how"</th></tr></thead>
                <tbody>
                    {segments.into_iter().map(|s| view! {
                        <tr data-testid="run-segment">
                            <td>{s.index}{s.resumed_from.map(|_| " (resumed)")}</td>
                            <td>{format!("{} / {}", s.steps, s.max_steps)}</td>
                            <td>{clock(s.started_at)}</td>
                            <td>{s.ended_at.map(clock).unwrap_or_else(|| "—".into())}</td>
                            <td>{s.end_status.map(|st| st.to_string().replace('_', " ")).unwrap_or_else(|| "open".into())}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        }
    })
}

/// The readable text of a message's content: its `content` string, or the JSON.
fn message_text(content: &Value) -> String {
    match content.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[component]
fn TimelineEntry(message: RunMessage, calls: Vec<ToolCall>) -> impl IntoView {
    let text = message_text(&message.content);
    let role = message.role.clone();
    view! {
        <li class=format!("timeline-entry role-{role}") data-testid="timeline-message" data-role=role.clone()>
            <div class="timeline-head">
                <strong>{role.clone()}</strong>
                <span class="muted">{format!(" · step {} · {}", message.step, clock(message.created_at))}</span>
            </div>
            {(!text.is_empty()).then(|| if role == "tool" || role == "system" {
                Either::Left(view! { <pre tabindex="0" class="message-text">{text.clone()}</pre> })
            } else {
                Either::Right(view! { <Markdown source=text.clone()/> })
            })}
            {calls.into_iter().map(|call| view! { <ToolCallCard call/> }).collect_view()}
        </li>
    }
}

#[component]
fn ToolCallCard(call: ToolCall) -> impl IntoView {
    let status = call.status.to_string();
    view! {
        <div class=format!("tool-call status-{status}") data-testid="timeline-tool-call" data-status=status.clone()>
            <div class="timeline-head">
                "Tool " <code>{call.tool_name.clone()}</code>
                <span class=format!("badge tool-status status-{status}")>{status.replace('_', " ")}</span>
                {call.duration_ms.map(|ms| view! { <span class="muted" data-testid="tool-duration">{format!("{ms} ms")}</span> })}
                {call.decided_by.clone().map(|by| view! { <span class="muted">{format!("decided by {by}")}</span> })}
            </div>
            <pre tabindex="0" class="arguments">{pretty(&call.input)}</pre>
            {call.edited_input.as_ref().map(|edited| view! {
                <p class="muted">"Edited before it ran:"</p>
                <pre tabindex="0" class="arguments" data-testid="tool-edited-input">{pretty(edited)}</pre>
            })}
            {call.decision_comment.clone().map(|c| view! { <p class="muted">"Comment: " {c}</p> })}
            {call.output.as_ref().map(|output| view! {
                <details><summary>"Output"</summary><pre tabindex="0" class="arguments">{pretty(output)}</pre></details>
            })}
        </div>
    }
}
