//! `/settings`, yours: your account (set or change your password), how questions reach you (your email and Slack
//! addresses and, per channel, the lowest urgency that reaches you; a test message), the invitations waiting for
//! you, your absence and who stands in, push on this browser.

use leptos::either::Either;
use leptos::prelude::*;

use crate::MyReach;
use crate::api::send_json;
use crate::components::date_time;
use crate::types::{
    AddressUpdate, Channel, ChannelPreference, Invitation, Member, MinUrgency, NotificationPreferences, PasswordChange,
    SessionInfo, TestMessageOutcome, TestMessageRequest,
};

use super::absence::{Absentee, away_form};
use super::{Outcome, Outcomes};

#[component]
pub(super) fn YourSettings(
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
                                <time datetime=invitation.created_at.to_rfc3339()>{format!("{} UTC", date_time(invitation.created_at, false))}</time>
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
