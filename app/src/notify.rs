//! Notifications: the unread badge in the top bar (pending questions, kept current by the event stream) and, once
//! the person allows them, browser notifications for high and critical questions; clicking one opens the question.

use leptos::prelude::*;

use crate::live::use_live;
use crate::types::{QuestionStatus, Urgency};
use crate::{PENDING_COUNT_CAP, pending_count};

/// The number of pending questions, as a badge on the inbox link; reloaded whenever a question event arrives.
#[component]
pub fn UnreadBadge() -> impl IntoView {
    let live = use_live();
    let events = Memo::new(move |_| live.questions.with(Vec::len));
    let count = crate::codec::resource(move || events.get(), |_| pending_count());
    view! {
        <Transition fallback=|| ()>
            {move || count.get().and_then(Result::ok).filter(|n| *n > 0).map(|n| view! {
                <span class="count-badge" data-testid="unread-count" aria-label=format!("{n} pending")>
                    {if n >= PENDING_COUNT_CAP { format!("{PENDING_COUNT_CAP}+") } else { n.to_string() }}
                </span>
            })}
        </Transition>
    }
}

/// A button that asks for permission to show browser notifications (shown only while the browser has not been
/// asked), and the watcher that shows one for each new high or critical question.
#[component]
pub fn BrowserNotifications() -> impl IntoView {
    let live = use_live();
    let permission = RwSignal::new(String::from("unsupported"));
    let seen = StoredValue::new(0usize);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| permission.set(browser::permission()));
    Effect::new(move |_| {
        live.questions.with(|events| {
            let start = seen.get_value().min(events.len());
            for question in &events[start..] {
                let urgent = matches!(question.urgency, Urgency::High | Urgency::Critical);
                let arrived = live.arrived.with_untracked(|arrived| arrived.contains(&question.id));
                let shown =
                    urgent && arrived && question.status == QuestionStatus::Pending && live.may_decide(question);
                if shown && permission.get_untracked() == "granted" {
                    #[cfg(feature = "hydrate")]
                    browser::show(question);
                }
            }
            seen.set_value(events.len());
        });
    });
    let ask = move |_| {
        #[cfg(feature = "hydrate")]
        browser::request(permission);
    };
    view! {
        <Show when=move || permission.get() == "default">
            <button type="button" class="link" data-testid="notifications-enable" on:click=ask>
                "Enable notifications"
            </button>
        </Show>
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use leptos::prelude::*;
    use wasm_bindgen::{JsCast, closure::Closure};
    use web_sys::{Notification, NotificationOptions, NotificationPermission};

    use crate::types::Question;

    fn supported() -> bool {
        let window = window();
        let value: &wasm_bindgen::JsValue = window.as_ref();
        web_sys::js_sys::Reflect::has(value, &"Notification".into()).unwrap_or(false)
    }

    pub fn permission() -> String {
        if !supported() {
            return "unsupported".into();
        }
        match Notification::permission() {
            NotificationPermission::Granted => "granted",
            NotificationPermission::Denied => "denied",
            _ => "default",
        }
        .into()
    }

    pub fn request(permission: RwSignal<String>) {
        let done = Closure::once_into_js(move || permission.set(self::permission()));
        let _ = Notification::request_permission_with_permission_callback(done.unchecked_ref());
    }

    pub fn show(question: &Question) {
        let options = NotificationOptions::new();
        options.set_body(&format!("{} · {}", question.kind.as_str().replace('_', " "), question.urgency));
        options.set_tag(&question.id.to_string());
        let Ok(notification) = Notification::new_with_options(&question.title, &options) else { return };
        let href = format!("/questions/{}", question.id);
        let on_click = Closure::<dyn FnMut()>::new(move || {
            let _ = window().focus();
            let _ = window().location().set_href(&href);
        });
        notification.set_onclick(Some(on_click.as_ref().unchecked_ref()));
        // The notification outlives this call; so must its handler.
        on_click.forget();
    }
}

/// The bell in the top bar: a link to the person's notifications with how many are unread, reloaded whenever a
/// question event arrives (a new question reaches them; reading one elsewhere is counted at the next event). A
/// token's session has no notifications, and no bell.
#[component]
pub fn NotificationBell() -> impl IntoView {
    let live = use_live();
    let events = Memo::new(move |_| live.questions.with(Vec::len));
    let count = crate::codec::resource(move || events.get(), |_| crate::unread_notification_count());
    view! {
        <Transition fallback=|| ()>
            {move || count.get().and_then(Result::ok).flatten().map(|unread| {
                let label = match unread {
                    0 => "Notifications, none unread".to_owned(),
                    1 => "Notifications, 1 unread".to_owned(),
                    n => format!("Notifications, {n} unread"),
                };
                let shown = if unread > crate::UNREAD_NOTIFICATIONS_CAP {
                    format!("{}+", crate::UNREAD_NOTIFICATIONS_CAP)
                } else {
                    unread.to_string()
                };
                view! {
                    <a href="/notifications" class="bell" data-testid="nav-notifications" aria-label=label.clone()
                        title=label>
                        <svg viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" focusable="false">
                            <path fill="currentColor" d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5.5-6.84V3.5a1.5 1.5 0 0 0-3 0v.66A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2Z"/>
                        </svg>
                        {(unread > 0).then(|| view! {
                            <span class="count-badge" data-testid="notifications-unread">{shown}</span>
                        })}
                    </a>
                }
            })}
        </Transition>
    }
}

/// Says, while it lasts, that the page is not live: its event stream was refused or lost, and the page is opening it
/// again (it then catches up on what it missed).
#[component]
pub fn LiveStatus() -> impl IntoView {
    let live = use_live();
    view! {
        <Show when=move || live.reconnecting.get()>
            <span class="live-status" role="status" data-testid="live-reconnecting">"Not live: reconnecting…"</span>
        </Show>
    }
}
