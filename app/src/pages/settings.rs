//! The settings, in pages with tabs on top (Settings → Rules is [`super::rules`], Settings → Gateway
//! [`super::gateway`]). `/settings`, yours: your account (set or change your password), how
//! questions reach you (your email and Slack addresses and, per channel, the lowest urgency that reaches you; a test
//! message), your absence and who stands in, push on this browser. `/settings/workspace`: the workspace's people
//! and their roles, its channels' health, its escalation policies, the grants that let tool calls through without
//! asking (revoked by their maker or an admin), and its API tokens (create — the secret is shown once — and revoke).
//! Changing the workspace is for admins; the REST API enforces that, the page only hides what would be refused.

use leptos::either::Either;
use leptos::prelude::*;

use crate::api::send_json;
use crate::codec::Json;
use crate::components::date_time;
use crate::types::{
    AddressUpdate, Assignee, Channel, ChannelHealth, ChannelPreference, CreatedToken, EscalationPolicies,
    EscalationPolicy, Grant, GrantScope, Invitation, Member, MemberUpdate, MinUrgency, NewMember, NewToken,
    NotificationPreferences, PasswordChange, QuestionKind, Role, SessionInfo, TestMessageOutcome, TestMessageRequest,
    TokenInfo, Urgency,
};
use crate::{MyReach, current_session, workspace_settings, your_settings};

const HUMAN_ROLES: [Role; 4] = [Role::Viewer, Role::Responder, Role::Approver, Role::Admin];
const TOKEN_ROLES: [Role; 5] = [Role::Agent, Role::Viewer, Role::Responder, Role::Approver, Role::Admin];

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

#[component]
fn YourSettings(
    session: SessionInfo,
    settings: crate::YourSettingsData,
    reload: impl Fn() + Clone + Send + Sync + 'static,
) -> impl IntoView {
    view! {
        <section class="card stack" aria-labelledby="account-heading">
            <h2 id="account-heading">"Your account"</h2>
            <p data-testid="settings-who">
                {format!("Signed in as {} — {} of workspace {}.", session.name, session.role, session.workspace)}
            </p>
            {session.account.then(|| view! { <PasswordForm/> })}
        </section>
        {session.account.then(|| {
            // Read and answered only with the script: a part of the deferred module (see `crate::deferred`).
            let loaded = crate::deferred::module_loaded();
            move || crate::deferred::show(loaded, crate::deferred::Part::Invitations)
        })}
        {settings.reach.clone().map(|reach| {
            let yours = settings.members.iter().find(|member| member.username == reach.username).cloned();
            view! {
            <section class="card stack" aria-labelledby="reach-heading">
                <h2 id="reach-heading">"How questions reach you"</h2>
                <ReachForm reach yours/>
                <TestMessages/>
            </section>
            }
        })}
        {settings.reach.clone().map(|reach| {
            let members = settings.members.clone();
            let reload = reload.clone();
            let absentee = Absentee::yours(&reach);
            let message = expect_context::<Outcomes>().away;
            let reload = Callback::new(move |()| reload());
            view! {
                <section class="card stack" aria-labelledby="away-heading">
                    <h2 id="away-heading">"While you are away"</h2>
                    <p>
                        "Until you are back, the questions assigned to you go to the person you choose: those pending "
                        "when you save, and those asked meanwhile. The audit log records each one."
                    </p>
                    {away_form(absentee, members, message, reload)}
                </section>
            }
        })}
        {session.account.then(|| view! {
            <section class="card stack" aria-labelledby="push-heading">
                <h2 id="push-heading">"Push notifications"</h2>
                <p>
                    "Questions for you reach this browser even when no Holdpoint page is open, with their answers "
                    "(Approve and Reject, Yes and No) on the notification."
                </p>
                // Handled by /push.js: subscribing needs the browser's service worker and push manager.
                <p>
                    <button type="button" data-push-subscribe="" data-csrf=session.csrf_token.clone()
                        data-testid="push-subscribe">"Turn on for this browser"</button>
                </p>
                <p class="muted" role="status" data-push-status="" data-testid="push-status"></p>
            </section>
        })}
    }
}

#[component]
fn WorkspaceSettings(
    session: SessionInfo,
    settings: crate::WorkspaceSettingsData,
    reload: impl Fn() + Clone + Send + Sync + 'static,
) -> impl IntoView {
    let admin = session.role == Role::Admin;
    view! {
        <p class="muted" data-testid="workspace-who">
            {format!("Workspace {}{}", session.workspace, if admin { "" } else { " — changing it is for its admins." })}
        </p>
        <section class="card stack" aria-labelledby="members-heading">
            <h2 id="members-heading">"People"</h2>
            <MemberTable members=settings.members.clone() admin reload=reload.clone()/>
            {admin.then(|| view! { <AddMemberForm reload=reload.clone()/> })}
        </section>
        {admin.then(|| view! {
            <section class="card stack" aria-labelledby="channels-heading">
                <h2 id="channels-heading">"Channels"</h2>
                <ChannelTable channels=settings.channels.clone()/>
            </section>
        })}
        {admin.then(|| view! {
            <section class="card stack" aria-labelledby="escalation-heading">
                <h2 id="escalation-heading">"Escalation"</h2>
                <p>
                    "When nobody answers a pending question, remind the people it reached, then hand it to someone "
                    "else, who is notified. Times count from when the question was asked; its own deadline still applies."
                </p>
                <EscalationForm policies=settings.escalation.clone() members=settings.members.clone()/>
            </section>
        })}
        <section class="card stack" aria-labelledby="grants-heading">
            <h2 id="grants-heading">"Always allowed"</h2>
            <p>
                "Tool calls these grants let through without asking anyone. Each was made while approving a call, and "
                "each use is in the audit log."
            </p>
            <GrantTable/>
        </section>
        {admin.then(|| view! {
            <section class="card stack" aria-labelledby="tokens-heading">
                <h2 id="tokens-heading">"API tokens"</h2>
                <TokenTable tokens=settings.tokens.clone() reload=reload.clone()/>
                <CreateTokenForm reload=reload.clone()/>
            </section>
        })}
    }
}

/// The channels a person sets a threshold for, with what the page calls them.
const CHANNELS: [(&str, &str); 4] = [
    ("web", "Holdpoint (notification list)"),
    ("push", "Push on your browsers"),
    ("email", "Email"),
    ("slack", "Slack"),
];

fn threshold_of(preferences: &NotificationPreferences, channel: &str) -> MinUrgency {
    match channel {
        "web" => preferences.web.min_urgency,
        "push" => preferences.push.min_urgency,
        "email" => preferences.email.min_urgency,
        _ => preferences.slack.min_urgency,
    }
}

/// Of the member `PATCH /me` answers, what the reach form shows: the addresses and whether each counts yet. Only
/// these fields, so that the settings page's wasm reads no whole member (with its dates) on its first load.
#[derive(Clone, Default, serde::Deserialize)]
struct AddressStatus {
    email: Option<String>,
    #[serde(default)]
    email_verified: bool,
    slack_user_id: Option<String>,
    #[serde(default)]
    slack_user_id_proven: bool,
}

/// The person's addresses and, per channel, the lowest urgency that reaches them (`PATCH /me`, then `PUT
/// /me/notifications`), with whether each address counts yet: an email address counts once its owner opened the
/// link mailed to it while signed in, a Slack id they typed once an admin confirms it or a verified address finds
/// it. `yours` is the person's membership as listed, which says both.
#[component]
fn ReachForm(reach: MyReach, yours: Option<Member>) -> impl IntoView {
    let email = RwSignal::new(reach.email.clone().unwrap_or_default());
    let slack = RwSignal::new(reach.slack_user_id.clone().unwrap_or_default());
    // What the server holds, kept apart from the fields being typed in: the statuses speak of the saved addresses.
    let saved = RwSignal::new(match yours {
        Some(member) => AddressStatus {
            email: member.email,
            email_verified: member.email_verified,
            slack_user_id: member.slack_user_id,
            slack_user_id_proven: member.slack_user_id_proven,
        },
        None => AddressStatus {
            email: reach.email.clone(),
            slack_user_id: reach.slack_user_id.clone(),
            ..Default::default()
        },
    });
    let thresholds = CHANNELS.map(|(channel, _)| RwSignal::new(threshold_of(&reach.preferences, channel).to_string()));
    let message = expect_context::<Outcomes>().reach;
    let email_sends = reach.email_sends;
    let sent_to = move |address: &str| match email_sends {
        true => format!("We sent a link to {address}: open it while signed in to confirm it."),
        false => format!("This server sends no email, so no link went to {address} to confirm it."),
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let address = |text: String| Some(text.trim().to_owned()).filter(|t| !t.is_empty());
        let typed_email = address(email.get_untracked());
        // Naming an unverified address mails it a new link: only a changed address is sent, so that saving the
        // thresholds does not mail one each time ("Send the link again" is for that).
        let email_changed = typed_email != saved.get_untracked().email;
        let addresses = AddressUpdate {
            email: email_changed.then(|| typed_email.clone()),
            slack_user_id: Some(address(slack.get_untracked())),
            ..AddressUpdate::default()
        };
        let chosen = |i: usize| ChannelPreference {
            min_urgency: thresholds[i].get_untracked().parse().unwrap_or(MinUrgency::Off),
        };
        let preferences =
            NotificationPreferences { web: chosen(0), push: chosen(1), email: chosen(2), slack: chosen(3) };
        leptos::task::spawn_local(async move {
            let outcome = match send_json::<_, AddressStatus>("PATCH", "/me", Some(&addresses)).await {
                Ok(member) => {
                    let to_confirm = (email_changed && !member.email_verified).then(|| member.email.clone()).flatten();
                    saved.set(member);
                    send_json::<_, serde_json::Value>("PUT", "/me/notifications", Some(&preferences)).await.map(|_| {
                        to_confirm.map_or_else(|| "Saved.".to_owned(), |to| format!("Saved. {}", sent_to(&to)))
                    })
                }
                Err(err) => Err(err),
            };
            message.set(Some(outcome.map_err(|e| e.describe())));
        });
    };
    // Naming the saved address again mails it a new link while it is unverified.
    let send_again = move |_| {
        let Some(address) = saved.get_untracked().email else { return };
        let update = AddressUpdate { email: Some(Some(address.clone())), ..AddressUpdate::default() };
        leptos::task::spawn_local(async move {
            let outcome = send_json::<_, AddressStatus>("PATCH", "/me", Some(&update)).await;
            message.set(Some(outcome.map(|_| sent_to(&address)).map_err(|e| e.describe())));
        });
    };
    let email_status = move || {
        let member = saved.get();
        member.email.map(|address| match member.email_verified {
            true => Either::Left(view! {
                <p class="muted field-status" id="reach-email-status" data-testid="reach-email-status">
                    {format!("{address} is confirmed: single sign-on signs you in by it.")}
                </p>
            }),
            false => Either::Right(view! {
                <p class="muted field-status" id="reach-email-status" data-testid="reach-email-status">
                    {match email_sends {
                        true => format!("{address} is not confirmed yet: open the link we sent to it while signed in. "),
                        false => format!(
                            "{address} is not confirmed: this server sends no email, so single sign-on does not sign you in by it."
                        ),
                    }}
                    {email_sends.then(|| view! {
                        <button type="button" class="link" on:click=send_again data-testid="reach-email-resend">
                            "Send the link again"
                        </button>
                    })}
                </p>
            }),
        })
    };
    let slack_unproven = move || saved.with(|m| m.slack_user_id.is_some() && !m.slack_user_id_proven);
    let slack_status = move || {
        slack_unproven().then(|| view! {
            <p class="muted field-status" id="reach-slack-status" data-testid="reach-slack-status">
                "Not confirmed yet: an admin must confirm it, or verify your email. Until then Slack neither brings you "
                "questions nor answers as you."
            </p>
        })
    };
    view! {
        <form class="stack narrow-form" on:submit=submit data-testid="reach-form">
            <label for="reach-email">"Email"</label>
            <input id="reach-email" type="email" autocomplete="email" maxlength="254" bind:value=email
                placeholder="you@example.com" data-testid="reach-email"
                aria-describedby=move || saved.with(|m| m.email.is_some().then_some("reach-email-status"))/>
            {email_status}
            <label for="reach-slack">"Slack member id"</label>
            <input id="reach-slack" type="text" pattern="[UW][A-Z0-9]{2,30}" bind:value=slack placeholder="U0123ABCD"
                data-testid="reach-slack"
                aria-describedby=move || slack_unproven().then_some("reach-slack-status")/>
            {slack_status}
            <fieldset class="stack">
                <legend>"The lowest urgency that reaches you"</legend>
                {CHANNELS.iter().enumerate().map(|(i, (channel, label))| {
                    let id = format!("reach-threshold-{channel}");
                    let selected = thresholds[i];
                    view! {
                        <label for=id.clone()>{*label}</label>
                        <select id=id data-testid=format!("reach-threshold-{channel}")
                            on:change=move |ev| selected.set(event_target_value(&ev))>
                            {MinUrgency::ALL.iter().map(|urgency| {
                                let value = urgency.to_string();
                                let is_selected = value == selected.get_untracked();
                                let text = if *urgency == MinUrgency::Off { "off".to_owned() } else { format!("{value} and above") };
                                view! { <option value=value selected=is_selected>{text}</option> }
                            }).collect_view()}
                        </select>
                    }
                }).collect_view()}
            </fieldset>
            <button type="submit" class="primary" data-testid="reach-submit">"Save"</button>
            <Outcome message/>
        </form>
    }
}

/// The invitations of the person's account to other workspaces (`GET /me/invitations`), read once the page runs,
/// each with Accept and Decline. A session acts in one workspace, chosen at sign-in: after accepting, the person
/// is pointed to the sign-in page with the new workspace chosen. Nothing shows while there is nothing to answer.
/// Part of the deferred module.
pub(crate) fn invitations() -> AnyView {
    let invitations = RwSignal::new(None::<Result<Vec<Invitation>, String>>);
    let message = RwSignal::new(None::<Result<String, String>>);
    // The workspace joined last, for the way to it.
    let joined = RwSignal::new(None::<String>);
    let load = move || {
        leptos::task::spawn_local(async move {
            let page = crate::api::get_json::<crate::types::Page<Invitation>>("/me/invitations").await;
            invitations.set(Some(page.map(|page| page.items).map_err(|e| e.describe())));
        });
    };
    Effect::new(move |_| load());
    let answer = move |invitation: Invitation, accept: bool| {
        let verb = if accept { "accept" } else { "decline" };
        leptos::task::spawn_local(async move {
            let path = format!("/me/invitations/{}/{verb}", invitation.id);
            match send_json::<(), Invitation>("POST", &path, None).await {
                Ok(answered) if accept => {
                    message.set(Some(Ok(format!(
                        "You joined {} as {}. Each sign-in opens one workspace: sign in again choosing {} to work in it.",
                        answered.workspace, answered.role, answered.workspace
                    ))));
                    joined.set(Some(answered.workspace));
                }
                Ok(answered) => {
                    message.set(Some(Ok(format!("You declined the invitation to {}.", answered.workspace))));
                    joined.set(None);
                }
                Err(err) => message.set(Some(Err(err.describe()))),
            }
            load();
        });
    };
    let rows = move || match invitations.get() {
        Some(Err(err)) => Some(Either::Left(view! { <p class="alert" role="alert">{err}</p> })),
        Some(Ok(items)) if !items.is_empty() => Some(Either::Right(view! {
            <ul class="invitations" data-testid="invitation-list">
                {items.into_iter().map(|invitation| {
                    let (to_accept, to_decline) = (invitation.clone(), invitation.clone());
                    view! {
                        <li class="invitation" data-testid="invitation">
                            <p>
                                <strong data-testid="invitation-workspace">{invitation.workspace.clone()}</strong>
                                {format!(" — as {}, invited by {} on ", invitation.role, invitation.invited_by)}
                                <time datetime=invitation.created_at.to_rfc3339()>{date_time(invitation.created_at, false)}</time>
                            </p>
                            <p class="invitation-actions">
                                <button type="button" class="primary" on:click=move |_| answer(to_accept.clone(), true)
                                    aria-label=format!("Accept the invitation to {}", invitation.workspace)
                                    data-testid="invitation-accept">"Accept"</button>
                                <button type="button" on:click=move |_| answer(to_decline.clone(), false)
                                    aria-label=format!("Decline the invitation to {}", invitation.workspace)
                                    data-testid="invitation-decline">"Decline"</button>
                            </p>
                        </li>
                    }
                }).collect_view()}
            </ul>
        })),
        _ => None,
    };
    let shown = move || {
        message.with(Option::is_some)
            || invitations.with(|listed| matches!(listed, Some(Ok(items)) if !items.is_empty()))
    };
    view! {
        <Show when=shown>
            <section class="card stack" aria-labelledby="invitations-heading" data-testid="invitations">
                <h2 id="invitations-heading">"Invitations"</h2>
                <p>"Other workspaces that invited your account. You join one only if you accept."</p>
                {rows}
                <Outcome message/>
                {move || joined.get().map(|workspace| {
                    let href = format!("/signin?workspace={}", crate::navigation::query_value(&workspace));
                    view! {
                        <p><a href=href rel="external" data-testid="invitation-signin">{format!("Sign in to {workspace}")}</a></p>
                    }
                })}
            </section>
        </Show>
    }
    .into_any()
}

/// Whose absence an [`absence_form`] sets: the signed-in person's own, or a member's, set by an admin.
#[derive(Clone)]
pub(crate) struct Absentee {
    /// Where the absence is saved: `/me`, or `/members/{id}`.
    path: String,
    username: String,
    role: Role,
    away_until: Option<chrono::DateTime<chrono::Utc>>,
    delegate: Option<String>,
    /// The form speaks to the person it concerns ("your questions") rather than of them.
    yours: bool,
}

impl Absentee {
    fn yours(reach: &MyReach) -> Self {
        Absentee {
            path: "/me".into(),
            username: reach.username.clone(),
            role: reach.role,
            away_until: reach.away_until,
            delegate: reach.delegate.clone(),
            yours: true,
        }
    }

    fn member(member: &Member) -> Self {
        Absentee {
            path: format!("/members/{}", member.user_id),
            username: member.username.clone(),
            role: member.role,
            away_until: member.away_until,
            delegate: member.delegate.clone(),
            yours: false,
        }
    }

    /// "your" or "ana's".
    fn whose(&self) -> String {
        if self.yours { "your".into() } else { format!("{}'s", self.username) }
    }
}

/// The form of an absence, once the deferred module is in (it only works with the script, and both settings pages
/// show it: see [`crate::deferred`]).
fn away_form(
    absentee: Absentee,
    members: Vec<Member>,
    message: RwSignal<Option<Result<String, String>>>,
    reload: Callback<()>,
) -> impl IntoView {
    let loaded = crate::deferred::module_loaded();
    move || {
        let part =
            crate::deferred::Part::Absence { absentee: absentee.clone(), members: members.clone(), message, reload };
        crate::deferred::show(loaded, part)
    }
}

/// An absence (`PATCH` of `/me` or `/members/{id}` with `away_until` and `delegate`): until when, and who takes the
/// absentee's questions meanwhile, chosen among the members who may answer them; a button ends it. Part of the
/// deferred module.
pub(crate) fn absence_form(
    absentee: Absentee,
    members: Vec<Member>,
    message: RwSignal<Option<Result<String, String>>>,
    reload: Callback<()>,
) -> AnyView {
    let needed = if absentee.role.rank() >= Role::Approver.rank() { Role::Approver } else { Role::Responder };
    let candidates: Vec<Member> = members
        .into_iter()
        .filter(|member| member.username != absentee.username && member.role.rank() >= needed.rank())
        .collect();
    let away = absentee.away_until.filter(|until| *until > chrono::Utc::now()).zip(absentee.delegate.clone());
    let until = RwSignal::new(String::new());
    let delegate = RwSignal::new(
        absentee.delegate.clone().or_else(|| candidates.first().map(|m| m.username.clone())).unwrap_or_default(),
    );
    let whose = absentee.whose();
    let save = {
        let (path, whose, yours) = (absentee.path.clone(), whose.clone(), absentee.yours);
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let Some(back) = local_time_to_utc(&until.get_untracked()) else {
                message.set(Some(Err("Choose when the absence ends.".into())));
                return;
            };
            let update = AddressUpdate {
                away_until: Some(Some(back)),
                delegate: Some(Some(delegate.get_untracked())),
                ..AddressUpdate::default()
            };
            let (path, whose) = (path.clone(), whose.clone());
            leptos::task::spawn_local(async move {
                let saved = send_json::<_, Member>("PATCH", &path, Some(&update)).await;
                let until = if yours { "you are" } else { "they are" };
                message.set(Some(
                    saved
                        .map(|m| {
                            format!(
                                "Saved: {} takes {whose} questions until {until} back.",
                                m.delegate.unwrap_or_default()
                            )
                        })
                        .map_err(|e| e.describe()),
                ));
                reload.run(());
            });
        }
    };
    let back = {
        let (path, username, yours) = (absentee.path.clone(), absentee.username.clone(), absentee.yours);
        move |_| {
            let (path, username) = (path.clone(), username.clone());
            leptos::task::spawn_local(async move {
                let update = AddressUpdate { away_until: Some(None), ..AddressUpdate::default() };
                let saved = send_json::<_, Member>("PATCH", &path, Some(&update)).await;
                let said = if yours {
                    "Welcome back: questions come to you again.".to_owned()
                } else {
                    format!("{username} is back: questions go to them again.")
                };
                message.set(Some(saved.map(|_| said).map_err(|e| e.describe())));
                reload.run(());
            });
        }
    };
    let none_eligible = candidates.is_empty();
    // Ids stay unique with a form for each member on the workspace's page.
    let id = |field: &str| {
        if absentee.yours { format!("away-{field}") } else { format!("away-{field}-{}", absentee.username) }
    };
    let (until_id, delegate_id) = (id("until"), id("delegate"));
    let status = match (&away, absentee.yours) {
        (Some((until, delegate)), true) => {
            Some(format!("You are away until {} UTC; {delegate} takes your questions.", date_time(*until, false)))
        }
        (Some((until, delegate)), false) => Some(format!(
            "{} is away until {} UTC; {delegate} takes their questions.",
            absentee.username,
            date_time(*until, false)
        )),
        (None, _) => None,
    };
    let end_label = if absentee.yours { "I'm back" } else { "End the absence" };
    let nobody = format!("Nobody else here may answer {whose} questions yet: a {needed} or above can.");
    view! {
        {status.map(|status| view! {
            <p class="notice" data-testid="away-status">
                {status}
                " "
                <button type="button" on:click=back.clone() data-testid="away-end">{end_label}</button>
            </p>
        })}
        <form class="stack narrow-form" on:submit=save data-testid="away-form">
            <label for=until_id.clone()>"Back on (your time)"</label>
            <input id=until_id type="datetime-local" required bind:value=until data-testid="away-until"/>
            <label for=delegate_id.clone()>{format!("Who takes {whose} questions")}</label>
            <select id=delegate_id required data-testid="away-delegate"
                on:change=move |ev| delegate.set(event_target_value(&ev))>
                {candidates.iter().map(|member| {
                    let selected = member.username == delegate.get_untracked();
                    let label = format!("{} ({}, {})", member.display_name, member.username, member.role);
                    view! { <option value=member.username.clone() selected=selected>{label}</option> }
                }).collect_view()}
            </select>
            {none_eligible.then(|| view! { <p class="muted">{nobody}</p> })}
            <button type="submit" class="primary" disabled=none_eligible data-testid="away-submit">"Save absence"</button>
            {absentee.yours.then(|| view! { <Outcome message/> })}
        </form>
    }
    .into_any()
}

/// A `datetime-local` input's value (the browser's time zone) as a UTC time. The browser's own `Date` knows the
/// zone's rules; on the server (never submitting) the value is read as UTC.
fn local_time_to_utc(value: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    if value.trim().is_empty() {
        return None;
    }
    #[cfg(feature = "hydrate")]
    {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(value));
        if date.get_time().is_nan() {
            return None;
        }
        chrono::DateTime::from_timestamp_millis(date.get_time() as i64)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        chrono::NaiveDateTime::parse_from_str(value, "%Y-%m-%dT%H:%M").ok().map(|t| t.and_utc())
    }
}

/// Each channel's health in the workspace: whether this server sends on it, its last delivery out, its last
/// failure and why, and how many deliveries wait.
#[component]
fn ChannelTable(channels: Vec<ChannelHealth>) -> impl IntoView {
    let when = crate::components::date_time_or_never;
    view! {
        <table class="data" data-testid="channel-table">
            <thead>
                <tr><th>"Channel"</th><th>"Configured"</th><th>"Last sent"</th><th>"Last failure"</th><th>"Waiting"</th></tr>
            </thead>
            <tbody>
                {channels.into_iter().map(|health| view! {
                    <tr data-testid=format!("channel-{}", health.channel)>
                        <td>{health.channel.to_string()}</td>
                        <td>{if health.configured { "yes" } else { "no" }}</td>
                        <td>{when(health.last_sent_at)}</td>
                        <td>
                            {when(health.last_failure_at)}
                            {health.last_error.map(|error| view! { <div class="muted">{error}</div> })}
                        </td>
                        <td>{health.waiting}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// One policy as the form edits it: minutes as typed, the assignee as `role:admin` or `user:alice`.
#[derive(Clone)]
struct PolicyDraft {
    key: usize,
    kind: RwSignal<String>,
    urgency: RwSignal<String>,
    remind_minutes: RwSignal<String>,
    escalate_minutes: RwSignal<String>,
    escalate_to: RwSignal<String>,
}

impl PolicyDraft {
    fn new(key: usize, policy: Option<&EscalationPolicy>) -> Self {
        let minutes = |seconds: Option<i64>| seconds.map(minutes_text);
        PolicyDraft {
            key,
            kind: RwSignal::new(policy.map_or("approval".into(), |p| p.kind.to_string())),
            urgency: RwSignal::new(policy.map_or("high".into(), |p| p.urgency.to_string())),
            remind_minutes: RwSignal::new(policy.and_then(|p| minutes(p.remind_after_seconds)).unwrap_or_default()),
            escalate_minutes: RwSignal::new(policy.and_then(|p| minutes(p.escalate_after_seconds)).unwrap_or_default()),
            escalate_to: RwSignal::new(match policy.and_then(|p| p.escalate_to.as_ref()) {
                Some(Assignee::Role(role)) => format!("role:{role}"),
                Some(Assignee::User(user)) => format!("user:{user}"),
                None => String::new(),
            }),
        }
    }

    /// The policy the row says, or what is wrong with what was typed.
    fn policy(&self) -> Result<EscalationPolicy, String> {
        let seconds = |text: String, what: &str| -> Result<Option<i64>, String> {
            let text = text.trim().to_owned();
            if text.is_empty() {
                return Ok(None);
            }
            match seconds_of_minutes(&text) {
                Some(seconds) => Ok(Some(seconds)),
                None => Err(format!("{what}: {text:?} is not a number of minutes")),
            }
        };
        let escalate_to = match self.escalate_to.get_untracked().split_once(':') {
            Some(("role", role)) => Some(Assignee::Role(role.parse().map_err(|_| format!("no role {role:?}"))?)),
            Some(("user", user)) => Some(Assignee::User(user.to_owned())),
            _ => None,
        };
        Ok(EscalationPolicy {
            kind: self.kind.get_untracked().parse().map_err(|_| "choose a kind".to_owned())?,
            urgency: self.urgency.get_untracked().parse().map_err(|_| "choose an urgency".to_owned())?,
            remind_after_seconds: seconds(self.remind_minutes.get_untracked(), "Remind after")?,
            escalate_after_seconds: seconds(self.escalate_minutes.get_untracked(), "Escalate after")?,
            escalate_to,
        })
    }
}

/// Seconds as minutes, with two decimals when they are not whole ("2", "0.20"). In integers: the float formatting
/// and parsing of `core` would bring their tables into the page's wasm for this one field.
fn minutes_text(seconds: i64) -> String {
    if seconds % 60 == 0 {
        return (seconds / 60).to_string();
    }
    let hundredths = (seconds.unsigned_abs() * 100 + 30) / 60;
    let sign = if seconds < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", hundredths / 100, hundredths % 100)
}

/// A positive number of minutes as typed ("5", "0.2", "1.25", ".5"), in whole seconds (rounded); `None` for
/// anything else.
fn seconds_of_minutes(text: &str) -> Option<i64> {
    const FRACTION_DIGITS: usize = 6;
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) || whole.len() > 12 {
        return None;
    }
    let whole: i64 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    // Millionths of a minute: further digits cannot change the rounded second.
    let kept = &fraction[..fraction.len().min(FRACTION_DIGITS)];
    let fraction: i64 = format!("{kept:0<FRACTION_DIGITS$}").parse().ok()?;
    let millionths = whole * 1_000_000 + fraction;
    (millionths > 0).then(|| (millionths * 60 + 500_000) / 1_000_000)
}

/// The workspace's escalation policies, one row per kind and urgency, saved together (`PUT /escalation-policies`).
#[component]
fn EscalationForm(policies: Vec<EscalationPolicy>, members: Vec<Member>) -> impl IntoView {
    let next_key = StoredValue::new(policies.len());
    let rows =
        RwSignal::new(policies.iter().enumerate().map(|(i, p)| PolicyDraft::new(i, Some(p))).collect::<Vec<_>>());
    let message = expect_context::<Outcomes>().escalation;
    let mut targets: Vec<(String, String)> = [Role::Responder, Role::Approver, Role::Admin]
        .iter()
        .map(|role| (format!("role:{role}"), format!("any {role}")))
        .collect();
    targets.extend(
        members.iter().filter(|m| m.role != Role::Viewer).map(|m| (format!("user:{}", m.username), m.username.clone())),
    );
    let add = move |_| {
        let key = next_key.get_value();
        next_key.set_value(key + 1);
        rows.update(|rows| rows.push(PolicyDraft::new(key, None)));
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let items: Result<Vec<_>, _> = rows.get_untracked().iter().map(PolicyDraft::policy).collect();
        let items = match items {
            Ok(items) => items,
            Err(err) => return message.set(Some(Err(err))),
        };
        leptos::task::spawn_local(async move {
            let body = EscalationPolicies { items };
            let saved = send_json::<_, EscalationPolicies>("PUT", "/escalation-policies", Some(&body)).await;
            message.set(Some(
                saved
                    .map(|_| "Saved: questions asked from now on follow these policies.".to_owned())
                    .map_err(|e| e.describe()),
            ));
        });
    };
    let select = move |value: RwSignal<String>, options: Vec<(String, String)>, label: String, testid: String| {
        view! {
            <select aria-label=label data-testid=testid on:change=move |ev| value.set(event_target_value(&ev))>
                {options.into_iter().map(|(option, text)| {
                    let selected = option == value.get_untracked();
                    view! { <option value=option selected=selected>{text}</option> }
                }).collect_view()}
            </select>
        }
    };
    let kinds: Vec<(String, String)> =
        QuestionKind::ALL.iter().map(|k| (k.to_string(), k.as_str().replace('_', " "))).collect();
    let urgencies: Vec<(String, String)> = Urgency::ALL.iter().map(|u| (u.to_string(), u.to_string())).collect();
    let mut escalate_options = vec![(String::new(), "nobody".to_owned())];
    escalate_options.extend(targets);
    view! {
        <form class="stack" on:submit=submit data-testid="escalation-form">
            <table class="data escalation-table" data-testid="escalation-table">
                <thead>
                    <tr><th>"Kind"</th><th>"Urgency"</th><th>"Remind after (min)"</th><th>"Escalate after (min)"</th>
                        <th>"Escalate to"</th><th><span class="visually-hidden">"Remove"</span></th></tr>
                </thead>
                <tbody>
                    <For each=move || rows.get() key=|row| row.key let:row>
                        {
                            let n = row.key;
                            view! {
                                <tr data-testid="escalation-row">
                                    <td>{select(row.kind, kinds.clone(), format!("Kind, policy {}", n + 1), "escalation-kind".into())}</td>
                                    <td>{select(row.urgency, urgencies.clone(), format!("Urgency, policy {}", n + 1), "escalation-urgency".into())}</td>
                                    <td><input type="number" min="0" step="any" inputmode="decimal" bind:value=row.remind_minutes
                                        aria-label=format!("Remind after, minutes, policy {}", n + 1) data-testid="escalation-remind"/></td>
                                    <td><input type="number" min="0" step="any" inputmode="decimal" bind:value=row.escalate_minutes
                                        aria-label=format!("Escalate after, minutes, policy {}", n + 1) data-testid="escalation-escalate"/></td>
                                    <td>{select(row.escalate_to, escalate_options.clone(), format!("Escalate to, policy {}", n + 1), "escalation-to".into())}</td>
                                    <td><button type="button" class="link" data-testid="escalation-remove"
                                        on:click=move |_| rows.update(|rows| rows.retain(|r| r.key != n))>"Remove"</button></td>
                                </tr>
                            }
                        }
                    </For>
                </tbody>
            </table>
            <p class="button-row">
                <button type="button" on:click=add data-testid="escalation-add">"Add a policy"</button>
                <button type="submit" class="primary" data-testid="escalation-save">"Save policies"</button>
            </p>
            <Outcome message/>
        </form>
    }
}

/// "Send me a test" per channel: a message to the person's own address there, now, and what became of it.
#[component]
fn TestMessages() -> impl IntoView {
    let message = expect_context::<Outcomes>().test_message;
    let send = move |channel: Channel| {
        message.set(None);
        leptos::task::spawn_local(async move {
            let request = TestMessageRequest { channel };
            let outcome = send_json::<_, TestMessageOutcome>("POST", "/me/notifications/test", Some(&request)).await;
            message.set(Some(match outcome {
                Ok(TestMessageOutcome { sent: true, .. }) => Ok(format!("A test message is on its way by {channel}.")),
                Ok(TestMessageOutcome { error, .. }) => {
                    Err(format!("The {channel} test message failed: {}", error.unwrap_or_default()))
                }
                Err(err) => Err(err.describe()),
            }));
        });
    };
    view! {
        <div class="stack" data-testid="test-messages">
            <p>"Send yourself a test message to check an address:"</p>
            <p class="button-row">
                {Channel::ALL.iter().map(|&channel| view! {
                    <button type="button" data-testid=format!("test-message-{channel}") on:click=move |_| send(channel)>
                        {format!("Send me a test by {channel}")}
                    </button>
                }).collect_view()}
            </p>
            <Outcome message/>
        </div>
    }
}

fn role_options(roles: &'static [Role], selected: Role) -> impl IntoView {
    roles
        .iter()
        .map(|role| view! { <option value=role.as_str() selected=*role == selected>{role.as_str()}</option> })
        .collect_view()
}

#[component]
fn PasswordForm() -> impl IntoView {
    let current = RwSignal::new(String::new());
    let new_password = RwSignal::new(String::new());
    let message = expect_context::<Outcomes>().password;
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let change = PasswordChange {
            current_password: Some(current.get_untracked()).filter(|c| !c.is_empty()),
            new_password: new_password.get_untracked(),
        };
        leptos::task::spawn_local(async move {
            let outcome = send_json::<_, ()>("POST", "/me/password", Some(&change)).await;
            message.set(Some(outcome.map(|()| "Your password is set.".to_owned()).map_err(|e| e.describe())));
            if message.get_untracked().is_some_and(|m| m.is_ok()) {
                current.set(String::new());
                new_password.set(String::new());
            }
        });
    };
    view! {
        <form class="stack narrow-form" on:submit=submit data-testid="password-form">
            <h3>"Password"</h3>
            <label for="current-password">"Current password (leave empty if you have none yet)"</label>
            <input id="current-password" type="password" autocomplete="current-password" bind:value=current/>
            <label for="new-password">"New password (10 characters or more)"</label>
            <input id="new-password" type="password" autocomplete="new-password" minlength="10" required
                bind:value=new_password data-testid="new-password"/>
            <button type="submit" class="primary" data-testid="password-submit">"Set password"</button>
            <Outcome message/>
        </form>
    }
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

#[component]
fn MemberTable(members: Vec<Member>, admin: bool, reload: impl Fn() + Clone + Send + Sync + 'static) -> impl IntoView {
    let message = expect_context::<Outcomes>().members;
    let everyone = members.clone();
    let rows = members
        .into_iter()
        .map(|member| {
            // An admin sets a member's absence in a row that opens under theirs.
            let absence_open = RwSignal::new(false);
            let absence = admin.then(|| {
                let (absentee, everyone, reload) = (Absentee::member(&member), everyone.clone(), reload.clone());
                let reload = Callback::new(move |()| reload());
                move || {
                    absence_open.get().then(|| {
                        let (absentee, members) = (absentee.clone(), everyone.clone());
                        view! {
                            <tr class="member-absence" data-testid="member-absence">
                                <td colspan="5">
                                    {away_form(absentee, members, message, reload)}
                                </td>
                            </tr>
                        }
                    })
                }
            });
            let reload_role = reload.clone();
            let reload_remove = reload.clone();
            let username = member.username.clone();
            let change_role = move |ev: leptos::ev::Event| {
                let Ok(role) = event_target_value(&ev).parse::<Role>() else { return };
                let (reload, user_id, username) = (reload_role.clone(), member.user_id, username.clone());
                leptos::task::spawn_local(async move {
                    let outcome = send_json::<_, Member>("PATCH", &format!("/members/{user_id}"), Some(&MemberUpdate { role: Some(role), ..MemberUpdate::default() })).await;
                    message.set(Some(outcome.map(|m| format!("{username} now has the role {}.", m.role)).map_err(|e| e.describe())));
                    reload();
                });
            };
            let remove_name = member.username.clone();
            let remove = move |_| {
                let (reload, user_id, username) = (reload_remove.clone(), member.user_id, remove_name.clone());
                leptos::task::spawn_local(async move {
                    let outcome = send_json::<(), ()>("DELETE", &format!("/members/{user_id}"), None).await;
                    message.set(Some(outcome.map(|()| format!("{username} was removed.")).map_err(|e| e.describe())));
                    reload();
                });
            };
            view! {
                <tr data-testid="member-row">
                    <td>{member.username.clone()}</td>
                    <td>
                        {member.display_name.clone()}
                        {member.away_until.filter(|until| *until > chrono::Utc::now()).zip(member.delegate.clone()).map(|(until, delegate)| view! {
                            <span class="muted small" data-testid="member-away">
                                {format!(" — away until {} UTC, {delegate} stands in", date_time(until, false))}
                            </span>
                        })}
                    </td>
                    <td>
                        {if admin {
                            Either::Left(view! {
                                <select aria-label=format!("Role of {}", member.username) on:change=change_role
                                    data-testid="member-role">
                                    {role_options(&HUMAN_ROLES, member.role)}
                                </select>
                            })
                        } else {
                            Either::Right(member.role.as_str())
                        }}
                    </td>
                    <td>{if member.has_password { "set" } else { "not set" }}</td>
                    <td class="member-actions">
                        {admin.then(|| view! {
                            <button type="button" class="link" aria-expanded=move || absence_open.get().to_string()
                                on:click=move |_| absence_open.update(|open| *open = !*open)
                                data-testid="member-absence-toggle">"Absence"</button>
                            <button type="button" class="link danger-text" on:click=remove data-testid="member-remove">"Remove"</button>
                        })}
                    </td>
                </tr>
                {absence}
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class="data" data-testid="member-table">
                <thead><tr><th>"Username"</th><th>"Name"</th><th>"Role"</th><th>"Password"</th><th><span class="visually-hidden">"Actions"</span></th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <Outcome message/>
    }
}

/// What `POST /members` answers: the invitation of an existing account, or the new member.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum AddedOrInvited {
    Invited { invitation: crate::types::Invitation },
    Added(Member),
}

#[component]
fn AddMemberForm(reload: impl Fn() + Clone + Send + Sync + 'static) -> impl IntoView {
    let username = RwSignal::new(String::new());
    let display_name = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let role = RwSignal::new(Role::Responder);
    let message = expect_context::<Outcomes>().add_member;
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let input = NewMember {
            // The server takes lower-case ASCII names only: ASCII's case mapping is all a valid name needs, and Unicode's
            // would bring its tables into the wasm.
            username: username.get_untracked().trim().to_ascii_lowercase(),
            display_name: Some(display_name.get_untracked()).filter(|n| !n.trim().is_empty()),
            password: Some(password.get_untracked()).filter(|p| !p.is_empty()),
            role: role.get_untracked(),
        };
        let reload = reload.clone();
        leptos::task::spawn_local(async move {
            // A new account joins at once (201, the member); an existing one is invited (202, the invitation).
            match send_json::<_, AddedOrInvited>("POST", "/members", Some(&input)).await {
                Ok(joined) => {
                    message.set(Some(Ok(match joined {
                        AddedOrInvited::Invited { invitation } => format!(
                            "{} has an account already: they are invited as {}, and join when they accept.",
                            invitation.username, invitation.role
                        ),
                        AddedOrInvited::Added(member) => {
                            format!("{} joined with the role {}.", member.username, member.role)
                        }
                    })));
                    username.set(String::new());
                    display_name.set(String::new());
                    password.set(String::new());
                    reload();
                }
                Err(err) => message.set(Some(Err(err.describe()))),
            }
        });
    };
    view! {
        <form class="stack narrow-form" on:submit=submit data-testid="add-member-form">
            <h3>"Add a person"</h3>
            <label for="member-username">"Username"</label>
            <input id="member-username" type="text" autocapitalize="none" spellcheck="false" required bind:value=username
                data-testid="member-username"/>
            <label for="member-display-name">"Name (optional)"</label>
            <input id="member-display-name" type="text" bind:value=display_name/>
            <label for="member-password">"Password (for a new account; they can change it)"</label>
            <input id="member-password" type="password" autocomplete="new-password" bind:value=password
                data-testid="member-password"/>
            <label for="member-role">"Role"</label>
            <select id="member-role" on:change=move |ev| if let Ok(r) = event_target_value(&ev).parse() { role.set(r) }
                data-testid="member-new-role">
                {role_options(&HUMAN_ROLES, Role::Responder)}
            </select>
            <button type="submit" class="primary" data-testid="member-add">"Add"</button>
            <Outcome message/>
        </form>
    }
}

#[component]
fn TokenTable(tokens: Vec<TokenInfo>, reload: impl Fn() + Clone + Send + Sync + 'static) -> impl IntoView {
    let message = expect_context::<Outcomes>().tokens;
    let rows = tokens
        .into_iter()
        .map(|token| {
            let reload = reload.clone();
            let name = token.name.clone();
            let revoke = move |_| {
                let (reload, id, name) = (reload.clone(), token.id, name.clone());
                leptos::task::spawn_local(async move {
                    let outcome = send_json::<(), TokenInfo>("POST", &format!("/tokens/{id}/revoke"), None).await;
                    message.set(Some(outcome.map(|_| format!("{name} is revoked.")).map_err(|e| e.describe())));
                    reload();
                });
            };
            let revoked = token.revoked_at.is_some();
            view! {
                <tr data-testid="token-row" class:revoked=revoked>
                    <td>{token.name.clone()}</td>
                    <td>{token.role.as_str()}</td>
                    <td>{token.created_by.clone().unwrap_or_default()}</td>
                    <td><time datetime=token.created_at.to_rfc3339()>{date_time(token.created_at, false)}</time></td>
                    <td>
                        {match token.revoked_at {
                            Some(at) => Either::Left(view! { <span class="muted">{format!("revoked {}", date_time(at, false))}</span> }),
                            None => Either::Right(view! {
                                <button type="button" class="link danger-text" on:click=revoke data-testid="token-revoke">"Revoke"</button>
                            }),
                        }}
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class="data" data-testid="token-table">
                <thead><tr><th>"Name"</th><th>"Role"</th><th>"Created by"</th><th>"Created"</th><th>"Status"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <Outcome message/>
    }
}

#[component]
fn CreateTokenForm(reload: impl Fn() + Clone + Send + Sync + 'static) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let role = RwSignal::new(Role::Agent);
    let created = expect_context::<Outcomes>().created_token;
    let message = expect_context::<Outcomes>().create_token;
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let input = NewToken { name: name.get_untracked(), role: role.get_untracked() };
        let reload = reload.clone();
        leptos::task::spawn_local(async move {
            match send_json::<_, CreatedToken>("POST", "/tokens", Some(&input)).await {
                Ok(token) => {
                    message.set(None);
                    name.set(String::new());
                    created.set(Some(token));
                    reload();
                }
                Err(err) => message.set(Some(Err(err.describe()))),
            }
        });
    };
    view! {
        <form class="stack narrow-form" on:submit=submit data-testid="create-token-form">
            <h3>"Create a token"</h3>
            <label for="token-name">"Name (what or who uses it)"</label>
            <input id="token-name" type="text" required bind:value=name data-testid="token-name"/>
            <label for="token-role">"Role"</label>
            <select id="token-role" on:change=move |ev| if let Ok(r) = event_target_value(&ev).parse() { role.set(r) }
                data-testid="token-role">
                {role_options(&TOKEN_ROLES, Role::Agent)}
            </select>
            <button type="submit" class="primary" data-testid="token-create">"Create"</button>
            <Outcome message/>
            {move || created.get().map(|token| view! {
                <div class="secret-once" role="status" data-testid="token-secret-box">
                    <p>{format!("Token {} ({}) — copy it now; it is not shown again:", token.token.name, token.token.role)}</p>
                    <code data-testid="token-secret">{token.secret}</code>
                </div>
            })}
        </form>
    }
}

/// The workspace's live grants (`GET /grants`), read once the page runs, each with its revoke button.
#[component]
fn GrantTable() -> impl IntoView {
    let grants = RwSignal::new(None::<Result<Vec<Grant>, String>>);
    let message = RwSignal::new(None::<Result<String, String>>);
    let load = move || {
        leptos::task::spawn_local(async move {
            let page = crate::api::get_json::<crate::types::Page<Grant>>("/grants?limit=200").await;
            grants.set(Some(page.map(|page| page.items).map_err(|e| e.describe())));
        });
    };
    Effect::new(move |_| load());
    let rows = move || {
        grants.get().map(|listed| match listed {
            Err(err) => Either::Left(view! { <p class="alert" role="alert">{err}</p> }),
            Ok(items) if items.is_empty() => Either::Left(view! {
                <p class="muted" data-testid="grant-empty">"No grants: every call its policy prompts for is asked about."</p>
            }),
            Ok(items) => Either::Right(view! {
                <div class="table-wrap">
                    <table class="data" data-testid="grant-table">
                        <thead><tr><th>"Tool"</th><th>"Calls"</th><th>"For"</th><th>"Made by"</th><th>"Uses"</th><th>"Until"</th><th></th></tr></thead>
                        <tbody>
                            {items.into_iter().map(|grant| {
                                let id = grant.id;
                                let revoke = move |_| {
                                    leptos::task::spawn_local(async move {
                                        let outcome = send_json::<(), Grant>("POST", &format!("/grants/{id}/revoke"), None).await;
                                        message.set(Some(outcome.map(|g| format!("The grant for {} is revoked.", g.tool_name)).map_err(|e| e.describe())));
                                        load();
                                    });
                                };
                                let scope = match (grant.scope, &grant.run_id, &grant.agent) {
                                    (GrantScope::Run, Some(run), _) => format!("run {}", crate::components::short_id(run)),
                                    (GrantScope::Agent, _, Some(agent)) => format!("agent {agent}"),
                                    _ => "the workspace".to_owned(),
                                };
                                view! {
                                    <tr data-testid="grant-row" data-grant-id=id.to_string()>
                                        <td><code>{grant.tool_name.clone()}</code></td>
                                        <td>{crate::types::describe_matcher(&grant.matcher)}</td>
                                        <td>{scope}</td>
                                        <td>{grant.created_by.clone()}</td>
                                        <td data-testid="grant-uses">{grant.uses}</td>
                                        <td><time datetime=grant.expires_at.to_rfc3339()>{date_time(grant.expires_at, false)}</time></td>
                                        <td><button type="button" class="link danger-text" on:click=revoke data-testid="grant-revoke">"Revoke"</button></td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            }),
        })
    };
    view! {
        {rows}
        <Outcome message/>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_typed_become_whole_seconds() {
        for (text, seconds) in [("5", 300), ("0.2", 12), ("1.25", 75), (".5", 30), ("5.", 300), ("0.0083", 0)] {
            assert_eq!(seconds_of_minutes(text), Some(seconds), "{text}");
        }
        // 0.00999 minutes is 0.5994 s; the seventh decimal cannot move the rounding.
        assert_eq!(seconds_of_minutes("0.0099999999"), Some(1));
        for text in ["", ".", "0", "0.000", "-1", "1e3", "1,5", "1.2.3", " 1", "abc", "9999999999999"] {
            assert_eq!(seconds_of_minutes(text), None, "{text:?}");
        }
    }

    #[test]
    fn seconds_show_as_minutes_with_two_decimals_when_not_whole() {
        for (seconds, text) in [(300, "5"), (12, "0.20"), (75, "1.25"), (1, "0.02"), (3599, "59.98"), (0, "0")] {
            assert_eq!(minutes_text(seconds), text, "{seconds}");
            if seconds > 0 {
                assert_eq!(seconds_of_minutes(text), Some(seconds), "{text} reads back");
            }
        }
    }
}
