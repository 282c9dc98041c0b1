//! `/settings/gateway`, Settings → Gateway: the MCP servers the workspace's agents reach through Holdpoint's gateway
//! (`/mcp/gateway`), each with how the gateway last found it — when it last answered, when it last failed and why —
//! so an admin sees a broken upstream before an agent reports it. Admins register an upstream (name, URL, headers
//! whose values are never shown again) and remove one; the processes the server's configuration file starts are
//! shown but changed only there. Anyone else is told that only admins manage upstreams. The list is
//! the REST API's `GET /upstreams` use case; adding and removing call `POST` and `DELETE /upstreams`.

use leptos::either::Either;
use leptos::prelude::*;

use super::settings::{Tab, settings_frame};
use crate::api::send_json;
use crate::components::date_time_or_never as when;
use crate::types::{NewUpstream, Upstream};
use crate::{GatewayPageData, gateway_page};

/// `/settings/gateway`: the workspace's upstream MCP servers and their health.
#[component]
pub fn GatewaySettingsPage() -> impl IntoView {
    // Above the section, which is rendered afresh when the list reloads after a change: the confirmation survives it.
    provide_context(Said(RwSignal::new(None)));
    let data = crate::codec::resource(|| (), |_| gateway_page());
    settings_frame(Tab::Gateway, data, |_session, data, reload| {
        view! { <GatewaySettings data reload=move || reload.run(())/> }.into_any()
    })
}

/// What the last change (adding or removing an upstream) came to.
#[derive(Clone, Copy)]
struct Said(RwSignal<Option<Result<String, String>>>);

#[component]
fn GatewaySettings(data: GatewayPageData, reload: impl Fn() + Clone + Send + Sync + 'static) -> impl IntoView {
    let Said(message) = expect_context::<Said>();
    view! {
        <section class="card stack" aria-labelledby="gateway-heading">
            <h2 id="gateway-heading">"MCP gateway"</h2>
            <p>
                "Agents connect to " <code data-testid="gateway-endpoint">"/mcp/gateway"</code>
                " with an agent token and see the tools of every upstream below as "
                <code>"<upstream>__<tool>"</code>
                ". Each call is decided by the approval rules as "
                <code>"mcp:<upstream>/<tool>"</code>
                ": forwarded, refused, or asked about first."
            </p>
            {match data.upstreams {
                None => Either::Left(view! {
                    <p class="muted" data-testid="gateway-admins-only">
                        "Only the workspace's admins see and manage its upstreams."
                    </p>
                }),
                Some(upstreams) => Either::Right(view! {
                    <UpstreamTable upstreams reload=reload.clone() message/>
                    <AddUpstreamForm reload message/>
                }),
            }}
        </section>
    }
}

/// The upstreams with their health: a last error newer than the last success marks the row as failing.
#[component]
fn UpstreamTable(
    upstreams: Vec<Upstream>,
    reload: impl Fn() + Clone + Send + Sync + 'static,
    message: RwSignal<Option<Result<String, String>>>,
) -> impl IntoView {
    if upstreams.is_empty() {
        return Either::Left(view! {
            <p class="muted" data-testid="upstream-empty">"No upstreams yet: the gateway lists no tools."</p>
        });
    }
    let rows = upstreams
        .into_iter()
        .map(|upstream| {
            let reload = reload.clone();
            let name = upstream.name.clone();
            // Removing takes its tools away from every agent at once: it is asked twice.
            let confirming = RwSignal::new(false);
            let remove = move |_| {
                let (reload, name) = (reload.clone(), name.clone());
                leptos::task::spawn_local(async move {
                    let outcome =
                        send_json::<(), serde_json::Value>("DELETE", &format!("/upstreams/{name}"), None).await;
                    message.set(Some(outcome.map(|_| format!("{name} is removed.")).map_err(|e| e.describe())));
                    reload();
                });
            };
            let health = upstream.health;
            let failing = match (health.last_error_at, health.last_success_at) {
                (Some(failed), Some(answered)) => failed > answered,
                (Some(_), None) => true,
                _ => false,
            };
            let state = match (failing, health.last_success_at) {
                (true, _) => "failing",
                (false, Some(_)) => "answering",
                (false, None) => "not reached yet",
            };
            let headers = if upstream.headers.is_empty() { "none".to_owned() } else { upstream.headers.join(", ") };
            // Where it is: a URL, or the command line of a process the operator's configuration file starts.
            let endpoint = match (&upstream.url, &upstream.process) {
                (Some(url), _) => url.clone(),
                (None, Some(process)) => {
                    std::iter::once(process.command.as_str()).chain(process.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
                }
                (None, None) => String::new(),
            };
            let configured = upstream.configured;
            view! {
                <tr data-testid="upstream-row" data-name=upstream.name.clone() class:failing=failing>
                    <td><code>{upstream.name.clone()}</code></td>
                    <td class="wrap-anywhere" data-testid="upstream-endpoint">
                        {if configured { Either::Left(view! { <code>{endpoint}</code> }) } else { Either::Right(endpoint) }}
                        {configured.then(|| view! { <div class="muted">"a process from the server's configuration file"</div> })}
                    </td>
                    <td>{headers}</td>
                    <td data-testid="upstream-state">
                        <span class=if failing { "badge decision-deny" } else { "badge" }>{state}</span>
                    </td>
                    <td data-testid="upstream-last-success">{when(health.last_success_at)}</td>
                    <td class="wrap-anywhere" data-testid="upstream-last-error">
                        {when(health.last_error_at)}
                        {health.last_error.map(|error| view! { <div class="muted">{error}</div> })}
                    </td>
                    <td>
                        // The operator's upstreams change only in the configuration file.
                        {(!configured).then(|| {
                            let name = upstream.name.clone();
                            view! {
                                <Show
                                    when=move || confirming.get()
                                    fallback={
                                        let name = name.clone();
                                        move || view! {
                                            <button type="button" class="link danger-text" data-testid="upstream-remove"
                                                on:click=move |_| confirming.set(true)
                                                aria-label=format!("Remove {name}")>"Remove"</button>
                                        }
                                    }
                                >
                                    <span class="confirm-inline" role="alert" data-testid="upstream-remove-confirm">
                                        {format!("Remove {name}? Its tools leave the gateway at once. ")}
                                        <button type="button" class="danger" data-testid="upstream-remove-yes"
                                            on:click=remove.clone()>"Yes, remove"</button>
                                        " "
                                        <button type="button" data-testid="upstream-remove-cancel"
                                            on:click=move |_| confirming.set(false)>"Cancel"</button>
                                    </span>
                                </Show>
                            }
                        })}
                    </td>
                </tr>
            }
        })
        .collect_view();
    Either::Right(view! {
        <div class="table-wrap">
            <table class="data" data-testid="upstream-table">
                <thead>
                    <tr>
                        <th>"Name"</th><th>"URL or process"</th><th>"Headers"</th><th>"State"</th><th>"Last answered (UTC)"</th>
                        <th>"Last failure (UTC)"</th><th></th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    })
}

/// Parses the headers box: one `Name: value` per line, blank lines skipped.
fn parse_headers(text: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut headers = std::collections::BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("Headers, line {}: write it as Name: value.", number + 1));
        };
        headers.insert(name.trim().to_owned(), value.trim().to_owned());
    }
    Ok(headers)
}

/// Registers an upstream: its name, its streamable HTTP URL and the headers sent with every request.
#[component]
fn AddUpstreamForm(
    reload: impl Fn() + Clone + Send + Sync + 'static,
    message: RwSignal<Option<Result<String, String>>>,
) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let url = RwSignal::new(String::new());
    let headers = RwSignal::new(String::new());
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let reload = reload.clone();
        let parsed = match parse_headers(&headers.get_untracked()) {
            Ok(parsed) => parsed,
            Err(fault) => return message.set(Some(Err(fault))),
        };
        let input = NewUpstream {
            name: name.get_untracked().trim().to_owned(),
            url: url.get_untracked().trim().to_owned(),
            headers: parsed,
        };
        leptos::task::spawn_local(async move {
            match send_json::<_, Upstream>("POST", "/upstreams", Some(&input)).await {
                Ok(added) => {
                    message.set(Some(Ok(format!(
                        "{} is added; its tools are listed as {}__<tool>.",
                        added.name, added.name
                    ))));
                    // What was typed goes only once it is stored: a refusal keeps it for correcting.
                    name.set(String::new());
                    url.set(String::new());
                    headers.set(String::new());
                    reload();
                }
                Err(err) => message.set(Some(Err(err.describe()))),
            }
        });
    };
    view! {
        <form class="stack narrow-form" on:submit=submit data-testid="add-upstream-form">
            <h3>"Add an upstream"</h3>
            <label for="upstream-name">"Name (a–z, 0–9 and -, up to 32)"</label>
            <input id="upstream-name" type="text" required autocapitalize="none" spellcheck="false" pattern="[a-z0-9\\-]{1,32}"
                bind:value=name data-testid="upstream-name"/>
            <label for="upstream-url">"Streamable HTTP URL"</label>
            <input id="upstream-url" type="url" required placeholder="https://mcp.example.com/mcp" bind:value=url
                data-testid="upstream-url"/>
            <label for="upstream-headers">"Headers (optional; one Name: value per line, never shown again)"</label>
            <textarea id="upstream-headers" class="mono" rows="2" spellcheck="false" autocomplete="off"
                prop:value=move || headers.get()
                on:input=move |ev| headers.set(event_target_value(&ev)) data-testid="upstream-headers"></textarea>
            <p class="button-row"><button type="submit" class="primary" data-testid="upstream-add">"Add"</button></p>
            {move || message.get().map(|said| match said {
                Ok(text) => Either::Left(view! { <p class="notice" role="status" data-testid="upstream-ok">{text}</p> }),
                Err(text) => Either::Right(view! { <p class="alert" role="alert" data-testid="upstream-error">{text}</p> }),
            })}
        </form>
    }
}
