//! Small components every page uses.

use leptos::prelude::*;

use crate::current_session;

/// The bar on top of every signed-in page: where you are, who you are, and sign-out.
#[component]
pub fn TopBar() -> impl IntoView {
    let session = Resource::new(|| (), |_| current_session());
    view! {
        <header class="topbar">
            <a class="brand" href="/inbox">"Holdpoint"</a>
            <nav aria-label="Main">
                <a href="/inbox">"Inbox"</a>
            </nav>
            <Suspense fallback=|| ()>
                {move || session.get().and_then(Result::ok).map(|s| view! {
                    <span class="who" data-testid="signed-in-as">{format!("{} · {}", s.name, s.workspace)}</span>
                    <form method="post" action="/auth/signout" class="inline">
                        <input type="hidden" name="csrf" value=s.csrf_token/>
                        <button type="submit" class="link" data-testid="signout">"Sign out"</button>
                    </form>
                })}
            </Suspense>
        </header>
    }
}

/// A small label, e.g. a question's kind or urgency.
#[component]
pub fn Badge(#[prop(into)] text: String, #[prop(into)] class: String) -> impl IntoView {
    view! { <span class=format!("badge {class}")>{text}</span> }
}
