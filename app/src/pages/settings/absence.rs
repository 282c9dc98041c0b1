//! Being away: who is away until when and who stands in, and the form that sets or ends it — on your settings, on a
//! member's row for admins, and in the inbox.

use leptos::prelude::*;

use crate::MyReach;
use crate::api::send_json;
use crate::components::date_time;
use crate::types::{AddressUpdate, Member, Role};

use super::Outcome;

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
    pub(super) fn yours(reach: &MyReach) -> Self {
        Absentee {
            path: "/me".into(),
            username: reach.username.clone(),
            role: reach.role,
            away_until: reach.away_until,
            delegate: reach.delegate.clone(),
            yours: true,
        }
    }

    pub(super) fn member(member: &Member) -> Self {
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
pub(super) fn away_form(
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
