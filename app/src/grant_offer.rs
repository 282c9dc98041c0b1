//! The offer to make a grant ("always allow") while approving a tool call: which calls it covers (this
//! run, this agent, or — for admins — the workspace), for `shell` a command prefix the person may shorten, and how
//! long it lasts. Once the same call was approved by hand five times, the offer says so; the person still chooses.

use leptos::prelude::*;

use crate::types::{ArgumentMatcher, GrantRequest, GrantScope, Question};

/// How many approvals by hand of the same call make the offer point itself out.
pub const SUGGEST_AFTER: u32 = 5;

/// The lifetimes offered, in seconds, with their labels; the default is the second.
const LIFETIMES: [(i64, &str); 4] =
    [(3600, "1 hour"), (86_400, "24 hours"), (7 * 86_400, "7 days"), (30 * 86_400, "30 days")];

/// What the offer holds, read when the approval is sent.
#[derive(Clone, Copy)]
pub struct GrantOffer {
    chosen: RwSignal<bool>,
    scope: RwSignal<GrantScope>,
    prefix: RwSignal<String>,
    lifetime: RwSignal<i64>,
    shell: bool,
}

impl GrantOffer {
    /// The grant to send with an approval, if the person asked for one.
    pub fn request(&self) -> Option<GrantRequest> {
        if !self.chosen.get_untracked() {
            return None;
        }
        // The server records the approved call's other arguments (`cwd`, …) in the grant.
        let matcher = self.shell.then(|| ArgumentMatcher::command_prefix(self.prefix.get_untracked().trim()));
        Some(GrantRequest {
            scope: self.scope.get_untracked(),
            matcher,
            expires_in_seconds: Some(self.lifetime.get_untracked()),
        })
    }
}

/// Whether a question can make a grant: the approval of a tool call by one person.
pub fn offers_grant(question: &Question) -> bool {
    question.action.is_some() && question.required_approvals <= 1
}

/// The offer's controls for `question`; `prefix` namespaces the `data-testid`s.
#[component]
pub fn GrantOfferView(question: Question, prefix: String, offer: GrantOffer) -> impl IntoView {
    let id = question.id.simple().to_string();
    let times_approved = RwSignal::new(0u32);
    // Only an admin may make a grant for the whole workspace: the choice is offered once the page knows who it is.
    let admin = RwSignal::new(false);
    #[cfg(feature = "hydrate")]
    leptos::task::spawn_local(async move {
        if let Ok(session) = crate::api::session().await {
            admin.set(session.role == crate::types::Role::Admin);
        }
    });
    #[cfg(feature = "hydrate")]
    {
        let question_id = question.id;
        leptos::task::spawn_local(async move {
            let path = format!("/questions/{question_id}/approved-before");
            if let Ok(count) = crate::api::get_json::<crate::types::ApprovedBefore>(&path).await {
                times_approved.set(count.approved_by_hand);
            }
        });
    }
    let tid = move |name: &str| format!("{prefix}-grant-{name}");
    let has_run = question.run_id.is_some();
    let scope_id = format!("grant-scope-{id}");
    let prefix_id = format!("grant-prefix-{id}");
    let lifetime_id = format!("grant-lifetime-{id}");
    let chosen_id = format!("grant-chosen-{id}");
    view! {
        <fieldset class="grant-offer" data-testid=tid("offer")>
            <legend>"Always allow"</legend>
            {let suggestion_id = tid("suggestion");
            move || (times_approved.get() >= SUGGEST_AFTER).then(|| view! {
                <p class="grant-suggestion" data-testid=suggestion_id.clone()>
                    {format!(
                        "This same call was approved by hand {} times: you may let calls like it through.",
                        times_approved.get()
                    )}
                </p>
            })}
            <div class="option">
                <input type="checkbox" id=chosen_id.clone() data-testid=tid("chosen")
                    prop:checked=move || offer.chosen.get()
                    on:change=move |ev| offer.chosen.set(event_target_checked(&ev))/>
                <label for=chosen_id>"Let calls like this through without asking"</label>
            </div>
            <div class="grant-fields" class:hidden=move || !offer.chosen.get()>
                {offer.shell.then(|| view! {
                    <label for=prefix_id.clone()>"Commands starting with"</label>
                    <input type="text" id=prefix_id class="mono" data-testid=tid("prefix")
                        prop:value=move || offer.prefix.get()
                        on:input=move |ev| offer.prefix.set(event_target_value(&ev))/>
                    <p class="muted">"Any other argument (a working directory, a timeout) exactly as in this call."</p>
                })}
                {(!offer.shell).then(|| view! { <p class="muted">"With exactly these arguments."</p> })}
                <label for=scope_id.clone()>"For"</label>
                <select id=scope_id data-testid=tid("scope")
                    on:change=move |ev| {
                        if let Ok(scope) = event_target_value(&ev).parse::<GrantScope>() {
                            offer.scope.set(scope);
                        }
                    }>
                    {has_run.then(|| view! { <option value="run" selected=move || offer.scope.get() == GrantScope::Run>"this run"</option> })}
                    <option value="agent" selected=move || offer.scope.get() == GrantScope::Agent>"this agent"</option>
                    {move || admin.get().then(|| view! {
                        <option value="workspace" selected=move || offer.scope.get() == GrantScope::Workspace>"the whole workspace"</option>
                    })}
                </select>
                <label for=lifetime_id.clone()>"For how long"</label>
                <select id=lifetime_id data-testid=tid("lifetime")
                    on:change=move |ev| {
                        if let Ok(seconds) = event_target_value(&ev).parse::<i64>() {
                            offer.lifetime.set(seconds);
                        }
                    }>
                    {LIFETIMES.into_iter().map(|(seconds, label)| view! {
                        <option value=seconds.to_string() selected=move || offer.lifetime.get() == seconds>{label}</option>
                    }).collect_view()}
                </select>
            </div>
        </fieldset>
    }
}

/// A fresh offer for `question`: not chosen, scoped to its run (or its agent), for 24 hours; for `shell`, the
/// whole command as the prefix.
pub fn new_offer(question: &Question) -> GrantOffer {
    let action = question.action.as_ref();
    let shell = action.is_some_and(|a| a.tool_name == "shell");
    let command = action.and_then(|a| a.arguments.get("command")).and_then(|c| c.as_str()).unwrap_or_default();
    GrantOffer {
        chosen: RwSignal::new(false),
        scope: RwSignal::new(if question.run_id.is_some() { GrantScope::Run } else { GrantScope::Agent }),
        prefix: RwSignal::new(command.to_owned()),
        lifetime: RwSignal::new(LIFETIMES[1].0),
        shell,
    }
}
