//! The settings, in pages with tabs on top (Settings → Rules is [`super::rules`], Settings → Gateway
//! [`super::gateway`]). `/settings`, yours: your account (set or change your password), how
//! questions reach you (your email and Slack addresses and, per channel, the lowest urgency that reaches you; a test
//! message), your absence and who stands in, push on this browser. `/settings/workspace`: the workspace's people
//! and their roles, its channels' health, its escalation policies, the grants that let tool calls through without
//! asking (revoked by their maker or an admin), and its API tokens (create — the secret is shown once — and revoke).
//! Changing the workspace is for admins; the REST API enforces that, the page only hides what would be refused.

mod absence;
mod workspace;
mod yours;

use leptos::either::Either;
use leptos::prelude::*;

use crate::codec::Json;
use crate::types::{CreatedToken, Role, SessionInfo};
use crate::{current_session, workspace_settings, your_settings};

pub(crate) use absence::{Absentee, absence_form};
use workspace::WorkspaceSettings;
pub(crate) use workspace::grants;
use yours::YourSettings;
pub(crate) use yours::invitations;

/// What the page's forms said last, and a token's secret once created: kept above the lists, which are rendered
/// afresh after every change, so a confirmation or a secret survives the reload that follows it.
#[derive(Clone, Copy)]
struct Outcomes {
    password: RwSignal<Option<Result<String, String>>>,
    reach: RwSignal<Option<Result<String, String>>>,
    test_message: RwSignal<Option<Result<String, String>>>,
    escalation: RwSignal<Option<Result<String, String>>>,
    away: RwSignal<Option<Result<String, String>>>,
    members: RwSignal<Option<Result<String, String>>>,
    add_member: RwSignal<Option<Result<String, String>>>,
    tokens: RwSignal<Option<Result<String, String>>>,
    create_token: RwSignal<Option<Result<String, String>>>,
    created_token: RwSignal<Option<CreatedToken>>,
}

/// The parts of the settings, each a page (and a wasm module) of its own, with tabs on top of all.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tab {
    /// `/settings`: what concerns the person signed in.
    You,
    /// `/settings/workspace`: the workspace's people, channels, escalation, grants and tokens.
    Workspace,
    /// `/settings/rules`: the workspace's approval rules.
    Rules,
    /// `/settings/gateway`: the MCP servers the workspace's agents reach through the gateway.
    Gateway,
}

/// `/settings`: your account, how questions reach you, your absence and push on this browser.
#[component]
pub fn SettingsPage() -> impl IntoView {
    let data = crate::codec::resource(|| (), |_| your_settings());
    settings_frame(Tab::You, data, |session, settings, reload| {
        view! { <YourSettings session settings reload=move || reload.run(())/> }.into_any()
    })
}

/// `/settings/workspace`: the workspace's people, channels, escalation policies, grants and API tokens.
#[component]
pub fn WorkspaceSettingsPage() -> impl IntoView {
    let data = crate::codec::resource(|| (), |_| workspace_settings());
    settings_frame(Tab::Workspace, data, |session, settings, reload| {
        view! { <WorkspaceSettings session settings reload=move || reload.run(())/> }.into_any()
    })
}

/// What both halves have: the heading, the tabs, the forms' outcomes, and `content` (the half's sections, from the
/// session, the half's `data` and a way to read it again) once the data is in. Generic, so that each half's page
/// reads only its own data's types.
pub(super) fn settings_frame<D>(
    tab: Tab,
    data: Resource<Result<D, ServerFnError>, Json>,
    content: fn(SessionInfo, D, Callback<()>) -> AnyView,
) -> impl IntoView
where
    D: Clone + serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let session = crate::codec::resource(|| (), |_| current_session());
    let outcomes = Outcomes {
        password: RwSignal::new(None),
        reach: RwSignal::new(None),
        test_message: RwSignal::new(None),
        escalation: RwSignal::new(None),
        away: RwSignal::new(None),
        members: RwSignal::new(None),
        add_member: RwSignal::new(None),
        tokens: RwSignal::new(None),
        create_token: RwSignal::new(None),
        created_token: RwSignal::new(None),
    };
    provide_context(outcomes);
    let reload = Callback::new(move |()| data.refetch());
    let current = |shown: Tab| (shown == tab).then_some("page");
    view! {
        <main class="page" data-testid="settings-page">
            <h1>"Settings"</h1>
            <nav class="tabs" aria-label="Settings">
                <a href="/settings" aria-current=current(Tab::You) data-testid="settings-tab-you">"You"</a>
                <a href="/settings/workspace" aria-current=current(Tab::Workspace) data-testid="settings-tab-workspace">
                    "Workspace"
                </a>
                <a href="/settings/rules" aria-current=current(Tab::Rules) data-testid="settings-tab-rules">"Rules"</a>
                <a href="/settings/gateway" aria-current=current(Tab::Gateway) data-testid="settings-tab-gateway">
                    "Gateway"
                </a>
            </nav>
            // A transition, not a suspense: after a change the lists reload in place instead of flashing "Loading…".
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || match (session.get(), data.get()) {
                    (Some(Ok(session)), Some(Ok(settings))) => Either::Left(content(session, settings, reload)),
                    (Some(Err(err)), _) | (_, Some(Err(err))) => {
                        Either::Right(Some(view! { <p class="alert" role="alert">{err.to_string()}</p> }))
                    }
                    _ => Either::Right(None),
                }}
            </Transition>
        </main>
    }
}

fn role_options(roles: &'static [Role], selected: Role) -> impl IntoView {
    roles
        .iter()
        .map(|role| view! { <option value=role.as_str() selected=*role == selected>{role.as_str()}</option> })
        .collect_view()
}

/// The result of the last action of a form: a confirmation or the API's error.
#[component]
fn Outcome(message: RwSignal<Option<Result<String, String>>>) -> impl IntoView {
    move || {
        message.get().map(|m| match m {
            Ok(text) => Either::Left(view! { <p class="notice" role="status" data-testid="settings-ok">{text}</p> }),
            Err(text) => Either::Right(view! { <p class="alert" role="alert" data-testid="settings-error">{text}</p> }),
        })
    }
}
