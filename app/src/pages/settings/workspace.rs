//! `/settings/workspace`: the workspace's people and their roles, its channels' health, its escalation policies,
//! the grants that let tool calls through without asking (revoked by their maker or an admin), and its API tokens
//! (create — the secret is shown once — and revoke). Changing the workspace is for admins; the REST API enforces
//! that, the page only hides what would be refused.

use leptos::either::Either;
use leptos::prelude::*;

use crate::api::send_json;
use crate::components::date_time;
use crate::types::{
    Assignee, ChannelHealth, CreatedToken, EscalationPolicies, EscalationPolicy, Grant, GrantScope, Member,
    MemberUpdate, NewMember, NewToken, QuestionKind, Role, SessionInfo, TokenInfo, Urgency,
};

use super::absence::{Absentee, away_form};
use super::{Outcome, Outcomes, role_options};

const HUMAN_ROLES: [Role; 4] = [Role::Viewer, Role::Responder, Role::Approver, Role::Admin];

const TOKEN_ROLES: [Role; 5] = [Role::Agent, Role::Viewer, Role::Responder, Role::Approver, Role::Admin];

#[component]
pub(super) fn WorkspaceSettings(
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
            // Read and revoked only with the script: a part of the deferred module (see `crate::deferred`).
            {
                let loaded = crate::deferred::module_loaded();
                move || crate::deferred::show(loaded, crate::deferred::Part::Grants)
            }
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

/// Each channel's health in the workspace: whether this server sends on it, its last delivery out, its last
/// failure and why, and how many deliveries wait.
#[component]
fn ChannelTable(channels: Vec<ChannelHealth>) -> impl IntoView {
    let when = crate::components::date_time_or_never;
    view! {
        <table class="data" data-testid="channel-table">
            <thead>
                <tr><th>"Channel"</th><th>"Configured"</th><th>"Last sent (UTC)"</th><th>"Last failure (UTC)"</th><th>"Waiting"</th></tr>
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
            // A role chosen in the select (an arrow key on it chooses too) is asked about before it is given.
            let chosen_role = RwSignal::new(None::<Role>);
            let choose_role = move |ev: leptos::ev::Event| chosen_role.set(event_target_value(&ev).parse::<Role>().ok());
            let reload_kept = reload.clone();
            let keep_role = move |_: leptos::ev::MouseEvent| {
                chosen_role.set(None);
                reload_kept();
            };
            let change_role = move |_: leptos::ev::MouseEvent| {
                let Some(role) = chosen_role.get_untracked() else { return };
                chosen_role.set(None);
                let (reload, user_id, username) = (reload_role.clone(), member.user_id, username.clone());
                leptos::task::spawn_local(async move {
                    let outcome = send_json::<_, Member>("PATCH", &format!("/members/{user_id}"), Some(&MemberUpdate { role: Some(role), ..MemberUpdate::default() })).await;
                    message.set(Some(outcome.map(|m| format!("{username} now has the role {}.", m.role)).map_err(|e| e.describe())));
                    reload();
                });
            };
            let remove_name = member.username.clone();
            let remove = move |()| {
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
                                <select aria-label=format!("Role of {}", member.username) on:change=choose_role
                                    data-testid="member-role">
                                    {role_options(&HUMAN_ROLES, member.role)}
                                </select>
                                // Always there, and polite: the question is read out as an arrow key changes the select.
                                <span class="confirm-action" aria-live="polite">
                                    {
                                        let (username, keep_role, change_role) = (member.username.clone(), keep_role.clone(), change_role.clone());
                                        move || chosen_role.get().filter(|role| *role != member.role).map(|role| {
                                            let asking = format!("Give {username} the role {role}?");
                                            let label = asking.clone();
                                            view! {
                                                <span role="group" aria-label=label data-testid="member-role-asking">
                                                    {asking}
                                                    " "
                                                    <button type="button" class="link" data-testid="member-role-confirm"
                                                        on:click=change_role.clone()>"Change"</button>
                                                    " "
                                                    <button type="button" class="link" data-testid="member-role-keep"
                                                        on:click=keep_role.clone()>"Cancel"</button>
                                                </span>
                                            }
                                        })
                                    }
                                </span>
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
                            <crate::components::ConfirmedAction label="Remove" testid="member-remove"
                                asking=format!("Remove {} from the workspace?", member.username) on_confirm=Callback::new(remove)/>
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
            let revoke = move |()| {
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
                            Some(at) => Either::Left(view! { <span class="muted">{format!("revoked {} UTC", date_time(at, false))}</span> }),
                            None => Either::Right(view! {
                                <crate::components::ConfirmedAction label="Revoke" testid="token-revoke"
                                    asking=format!("Revoke {}? What uses it stops working.", token.name) on_confirm=Callback::new(revoke)/>
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
                <thead><tr><th>"Name"</th><th>"Role"</th><th>"Created by"</th><th>"Created (UTC)"</th><th>"Status"</th></tr></thead>
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

/// The workspace's live grants (`GET /grants`), read once the page runs, each with its revoke button. Part of the
/// deferred module.
pub(crate) fn grants() -> AnyView {
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
                        <thead><tr><th>"Tool"</th><th>"Calls"</th><th>"For"</th><th>"Made by"</th><th>"Uses"</th><th>"Until (UTC)"</th><th></th></tr></thead>
                        <tbody>
                            {items.into_iter().map(|grant| {
                                let id = grant.id;
                                let revoke = move |()| {
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
                                        <td><crate::components::ConfirmedAction label="Revoke" testid="grant-revoke"
                                            asking=format!("Revoke the grant for {}? Its calls are asked about again.", grant.tool_name)
                                            on_confirm=Callback::new(revoke)/></td>
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
    .into_any()
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
