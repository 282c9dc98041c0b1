//! Sign-in: exchanges a token for an `HttpOnly` session cookie (a plain form, so it works without JavaScript).

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// The sign-in form. `?next=` is where to go afterwards; `?error=` explains a failed attempt.
#[component]
pub fn SignInPage() -> impl IntoView {
    let query = use_query_map();
    let next = move || query.with(|q| q.get("next").filter(|n| n.starts_with('/')).unwrap_or_else(|| "/inbox".into()));
    let error = move || query.with(|q| q.get("error"));
    view! {
        <main class="page narrow signin" data-testid="signin-page">
            <h1>"Sign in to Holdpoint"</h1>
            <p class="muted">
                "Paste an API token. " <code>"holdpoint token create"</code>
                " prints one; the server also accepts the bootstrap token it was started with."
            </p>
            {move || error().map(|e| view! { <p class="alert" role="alert" data-testid="signin-error">{e}</p> })}
            <form method="post" action="/auth/signin" class="stack">
                <input type="hidden" name="next" prop:value=next/>
                <label for="token">"Token"</label>
                <input id="token" name="token" type="password" autocomplete="off" required data-testid="signin-token"/>
                <button type="submit" class="primary" data-testid="signin-submit">"Sign in"</button>
            </form>
        </main>
    }
}
