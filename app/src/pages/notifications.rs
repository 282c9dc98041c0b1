//! `/notifications`: the signed-in person's notification center: each question that was for them, newest
//! first, unread ones marked, with whether it still waits for an answer or was resolved (by anyone, anywhere). The
//! list follows question events; opening a question marks its notification read.

use leptos::either::Either;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::api::post_json;
use crate::components::{Ago, Badge, describe_resolution};
use crate::live::use_live;
use crate::notification_list;
use crate::types::{ActionStatus, Notification};

/// `/notifications?unread=true`: newest first.
#[component]
pub fn NotificationsPage() -> impl IntoView {
    let query = use_query_map();
    let unread_only = Memo::new(move |_| query.with(|q| q.get("unread").is_some_and(|v| v == "true")));
    let live = use_live();
    let events = Memo::new(move |_| live.questions.with(Vec::len));
    // Bumped after marking read here, so the list and its count are read again.
    let marked = RwSignal::new(0u32);
    let page = crate::codec::resource(
        move || (unread_only.get(), events.get(), marked.get(), live.opened.get()),
        |(unread, ..)| notification_list(unread, None),
    );
    let failure = RwSignal::new(None::<String>);
    let mark_all = move |_| {
        leptos::task::spawn_local(async move {
            match post_json::<_, serde_json::Value>("/notifications/read-all", &serde_json::json!({})).await {
                Ok(_) => marked.update(|n| *n += 1),
                Err(err) => failure.set(Some(err.describe())),
            }
        });
    };
    view! {
        <main class="page" data-testid="notifications-page">
            <h1>"Notifications"</h1>
            <div class="toolbar">
                <nav class="segmented" aria-label="Which notifications">
                    <a href="/notifications" aria-current=move || (!unread_only.get()).then_some("page")
                        data-testid="notifications-all">"All"</a>
                    <a href="/notifications?unread=true" aria-current=move || unread_only.get().then_some("page")
                        data-testid="notifications-unread-only">"Unread"</a>
                </nav>
                <Transition fallback=|| ()>
                    {move || page.get().and_then(Result::ok).map(|p| {
                        let unread = p.unread;
                        view! {
                            <span class="muted" data-testid="notifications-unread-count">
                                {format!("{unread} unread")}
                            </span>
                            <button type="button" data-testid="notifications-read-all" disabled=unread == 0
                                on:click=mark_all>"Mark all read"</button>
                        }
                    })}
                </Transition>
            </div>
            {move || failure.get().map(|message| view! { <p class="alert" role="alert">{message}</p> })}
            // A Transition: the list stays as it is while it reloads after an event, instead of flickering.
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || page.get().map(|result| match result {
                    Ok(page) => Either::Left(view! {
                        <ul class="question-list notification-list" data-testid="notification-list">
                            {page.items.is_empty().then(|| view! {
                                <li class="empty" data-testid="notifications-empty">
                                    <p class="empty-title">{if unread_only.get_untracked() {
                                        "Nothing unread."
                                    } else {
                                        "No notifications yet."
                                    }}</p>
                                    <p>"Questions for you — assigned to you, or for your role — appear here as they are asked."</p>
                                </li>
                            })}
                            {page.items.into_iter().map(|notification| view! {
                                <NotificationRow notification marked/>
                            }).collect_view()}
                        </ul>
                    }),
                    Err(err) => Either::Right(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                })}
            </Transition>
        </main>
    }
}

/// One notification: the question's title (opening it marks the notification read), its urgency and kind, when it
/// was asked, and what it still asks of the person.
#[component]
fn NotificationRow(notification: Notification, marked: RwSignal<u32>) -> impl IntoView {
    let Notification { id, question, read_at, action_status, created_at } = notification;
    let unread = read_at.is_none();
    let href = format!("/questions/{}", question.id);
    let open = move |_| {
        if unread {
            leptos::task::spawn_local(async move {
                if post_json::<_, serde_json::Value>(&format!("/notifications/{id}/read"), &serde_json::json!({}))
                    .await
                    .is_ok()
                {
                    marked.update(|n| *n += 1);
                }
            });
        }
    };
    let status = match action_status {
        ActionStatus::Pending => Either::Left(view! { <Badge text="waiting for you" class="status-pending"/> }),
        ActionStatus::Done => Either::Right(view! {
            <span class="resolution" data-testid="notification-resolution">{describe_resolution(&question)}</span>
        }),
    };
    view! {
        <li class="question-row notification" class:unread=unread data-testid="notification"
            data-question=question.id.to_string() data-unread=unread.to_string()>
            <div class="question-meta">
                {unread.then(|| view! {
                    <span class="unread-dot" aria-hidden="true"></span>
                    <span class="visually-hidden">"Unread"</span>
                })}
                <Badge text=question.urgency.to_string() class=format!("urgency-{}", question.urgency)/>
                <Badge text=question.kind.as_str().replace('_', " ") class="kind"/>
                <Ago at=created_at/>
            </div>
            <a class="question-title" href=href on:click=open data-testid="notification-title">{question.title.clone()}</a>
            <div class="question-meta">{status}</div>
        </li>
    }
}
