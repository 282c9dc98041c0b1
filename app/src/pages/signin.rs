//! Sign-in: a person's username and password, or an API token, or the one-time link a first start prints; each
//! opens an `HttpOnly` session cookie, which acts in one workspace (for a password, `?workspace=` chooses which of
//! the person's; their first one otherwise). Plain forms, so it works without JavaScript.

use leptos::prelude::*;
use leptos_router::hooks::{use_location, use_query_map};

use crate::navigation::{SignInOptions, query_param, safe_next, sign_in_error_message};

/// The sign-in page. `?next=` is where to go afterwards; `?error=` is the code of a failed attempt; `?code=` is a
/// one-time link's code, which is only used when the person presses the button (a link preview that fetches the
/// page must not spend it).
#[component]
pub fn SignInPage() -> impl IntoView {
    let query = use_query_map();
    // A path with a query of its own: read from the raw query, so its escapes reach it as they were.
    let search = use_location().search;
    let next = move || search.with(|search| safe_next(query_param(search, "next").as_deref()).to_owned());
    // A code, turned into a sentence of ours: a link that puts its own text here must not speak for Holdpoint.
    let error =
        move || query.with(|q| q.get_str("error").map(|code| sign_in_error_message(code, q.get_str("retry_after"))));
    let code = move || query.with(|q| q.get("code").filter(|c| !c.is_empty()));
    // Which of the person's workspaces the password opens (a session acts in one); their first one when absent.
    let workspace = move || query.with(|q| q.get("workspace").filter(|w| !w.trim().is_empty()));
    // Known on the server; carried to the browser with the page, so hydration draws the same button.
    let single_sign_on =
        leptos::server::SharedValue::new(|| use_context::<SignInOptions>().unwrap_or_default().single_sign_on)
            .into_inner();
    // A link, not a form: the page's `form-action 'self'` would stop a form's redirect to the provider. External, so
    // the client-side router lets the browser follow it to the server.
    let sso_link = move || {
        single_sign_on.clone().map(|name| {
            let href = format!("/auth/oidc/start?next={}", crate::navigation::query_value(&next()));
            view! {
                <p class="signin-sso">
                    <a class="button primary" href=href rel="external" data-testid="signin-sso">{format!("Sign in with {name}")}</a>
                </p>
                <p class="signin-or muted">"or with a Holdpoint password"</p>
            }
        })
    };
    view! {
        <main class="page narrow signin" data-testid="signin-page">
            <h1>"Sign in to Holdpoint"</h1>
            {move || error().map(|e| view! { <p class="alert" role="alert" data-testid="signin-error">{e}</p> })}
            {move || match code() {
                Some(code) => view! {
                    <form method="post" action="/auth/signin" class="stack" data-testid="signin-link-form">
                        <p>"This one-time link signs you in as the first admin. Set a password afterwards under Settings."</p>
                        <input type="hidden" name="code" value=code/>
                        <input type="hidden" name="next" value=next/>
                        <button type="submit" class="primary" data-testid="signin-link-submit">"Sign in as admin"</button>
                    </form>
                }
                .into_any(),
                None => view! {
                    {sso_link.clone()}
                    <form method="post" action="/auth/signin" class="stack" data-testid="signin-password-form">
                        <input type="hidden" name="next" value=next/>
                        {workspace().map(|workspace| view! {
                            <p data-testid="signin-workspace">{format!("Into workspace {workspace}")}</p>
                            <input type="hidden" name="workspace" value=workspace/>
                        })}
                        <label for="username">"Username"</label>
                        <input id="username" name="username" type="text" autocomplete="username" autocapitalize="none"
                            spellcheck="false" required data-testid="signin-username"/>
                        <label for="password">"Password"</label>
                        <input id="password" name="password" type="password" autocomplete="current-password" required
                            data-testid="signin-password"/>
                        <button type="submit" class="primary" data-testid="signin-password-submit">"Sign in"</button>
                    </form>
                    <details class="signin-token">
                        <summary data-testid="signin-token-toggle">"Sign in with an API token"</summary>
                        <form method="post" action="/auth/signin" class="stack">
                            <p class="muted">
                                <code>"holdpoint token create"</code>
                                " prints one; the server also accepts the bootstrap token it was started with."
                            </p>
                            <input type="hidden" name="next" value=next/>
                            <label for="token">"Token"</label>
                            <input id="token" name="token" type="password" autocomplete="off" required
                                data-testid="signin-token"/>
                            <button type="submit" data-testid="signin-submit">"Sign in with token"</button>
                        </form>
                    </details>
                }
                .into_any(),
            }}
        </main>
    }
}
