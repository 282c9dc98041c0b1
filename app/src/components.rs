//! Small components every page uses.

use leptos::either::Either;
use leptos::prelude::*;

use crate::current_session;
use crate::markdown::Markdown;
use crate::types::{Question, QuestionStatus, Resolution, Role, answer_in_words};

/// The bar on top of every signed-in page: where you are, who you are, and sign-out. On a phone, once the script
/// runs, everything but the name folds into a menu behind one button (without the script the bar shows it all).
#[component]
pub fn TopBar() -> impl IntoView {
    let session = crate::codec::resource(|| (), |_| current_session());
    let open = RwSignal::new(false);
    view! {
        <header class="topbar" class:open=move || open.get()>
            <a class="brand" href="/inbox">"Holdpoint"</a>
            // Outside the menu, so that a phone shows it with the menu folded.
            <crate::notify::LiveStatus/>
            <button type="button" class="menu-toggle" aria-controls="topbar-menu" data-testid="menu-toggle"
                aria-expanded=move || if open.get() { "true" } else { "false" }
                on:click=move |_| open.update(|o| *o = !*o)>
                "Menu"
            </button>
            // A link followed from the menu closes it: the layout, and so the bar, stays mounted across pages.
            <div class="topbar-menu" id="topbar-menu" on:click=move |_| open.set(false)>
                <nav aria-label="Main">
                    <a href="/inbox" data-testid="nav-inbox">"Inbox" <crate::notify::UnreadBadge/></a>
                    <a href="/approvals" data-testid="nav-approvals">"Approvals"</a>
                    <a href="/runs" data-testid="nav-runs">"Runs"</a>
                    <a href="/settings" data-testid="nav-settings">"Settings"</a>
                    <Suspense fallback=|| ()>
                        {move || session.get().and_then(Result::ok).filter(|s| s.role == Role::Admin).map(|_| view! {
                            <a href="/audit" data-testid="nav-audit">"Audit"</a>
                        })}
                    </Suspense>
                    <crate::notify::NotificationBell/>
                </nav>
                <crate::notify::BrowserNotifications/>
                <Suspense fallback=|| ()>
                    {move || session.get().and_then(Result::ok).map(|s| view! {
                        <span class="who" data-testid="signed-in-as">{format!("{} · {}", s.name, s.workspace)}</span>
                        <form method="post" action="/auth/signout" class="inline">
                            <input type="hidden" name="csrf" value=s.csrf_token/>
                            <button type="submit" class="link" data-testid="signout">"Sign out"</button>
                        </form>
                    })}
                </Suspense>
            </div>
        </header>
    }
}

/// What a question says beyond its title: the body, the runs that asked it, the action to approve and the context.
/// The live modal and the inbox's split view show it alike; `testid` prefixes the parts' `data-testid`s.
#[component]
pub fn QuestionContext(question: Question, testid: &'static str) -> impl IntoView {
    let context = question
        .context
        .as_object()
        .is_some_and(|c| !c.is_empty())
        .then(|| serde_json::to_string_pretty(&question.context).unwrap_or_default());
    let lineage: Vec<uuid::Uuid> = question.parent_run_ids.iter().copied().chain(question.run_id).collect();
    let hands = question.clone();
    view! {
        <ManyHands question=hands testid=testid/>
        {(!question.body.is_empty()).then(|| view! { <Markdown source=question.body.clone() testid=format!("{testid}-body")/> })}
        {(!lineage.is_empty()).then(|| view! {
            <p class="lineage" data-testid=format!("{testid}-lineage")>"Asked by run "
                {lineage.iter().enumerate().map(|(i, id)| view! {
                    {(i > 0).then_some(" → ")}
                    <a href=format!("/runs/{id}")><code>{short_id(id)}</code></a>
                }).collect_view()}
            </p>
        })}
        {question.action.map(|a| view! {
            <p class="action-name">"Action: " <code data-testid=format!("{testid}-tool")>{a.tool_name}</code></p>
        })}
        {context.map(|c| view! {
            <details class="context"><summary>"Context"</summary><pre tabindex="0" data-testid=format!("{testid}-context")>{c}</pre></details>
        })}
    }
}

/// A small label, e.g. a question's kind or urgency.
#[component]
pub fn Badge(#[prop(into)] text: String, #[prop(into)] class: String) -> impl IntoView {
    view! { <span class=format!("badge {class}")>{text}</span> }
}

/// How long until `deadline`, for people: `4:05` under an hour, `2 h 10 min` beyond, `overdue` after.
pub fn time_left(deadline: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> String {
    let seconds = (deadline - now).num_seconds();
    match seconds {
        s if s <= 0 => "overdue".to_owned(),
        s if s < 3600 => format!("{}:{:02} left", s / 60, s % 60),
        s if s < 86_400 => format!("{} h {} min left", s / 3600, (s % 3600) / 60),
        s => format!("{} d {} h left", s / 86_400, (s % 86_400) / 3600),
    }
}

/// `2026-11-23 14:05` (with `seconds`, `2026-11-23 14:05:09`): how the pages write a time, always UTC. Written
/// out by hand: chrono's format strings would bring their parser and formatter into the wasm for a few fixed shapes.
pub fn date_time(t: chrono::DateTime<chrono::Utc>, seconds: bool) -> String {
    use chrono::{Datelike, Timelike};
    let minutes = format!("{:04}-{:02}-{:02} {:02}:{:02}", t.year(), t.month(), t.day(), t.hour(), t.minute());
    if seconds { format!("{minutes}:{:02}", t.second()) } else { minutes }
}

/// When something last happened, as [`date_time`] writes it, or `never`: a health table's cells.
pub fn date_time_or_never(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map_or_else(|| "never".to_owned(), |t| date_time(t, false))
}

/// `14:05:09`, UTC: the time of day alone (see [`date_time`]).
pub fn clock(t: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::Timelike;
    format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second())
}

/// How long ago `then` was, for people: `just now`, `3 min ago`, `2 h ago`, `4 d ago`.
pub fn time_ago(then: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> String {
    match (now - then).num_seconds() {
        s if s < 60 => "just now".to_owned(),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86_400),
    }
}

/// The current time: the live clock once hydrated (so relative times move), the request's time on the server.
fn now_signal() -> impl Fn() -> chrono::DateTime<chrono::Utc> + Copy {
    let now = use_context::<crate::live::Live>().map(|live| live.now);
    move || now.map_or_else(chrono::Utc::now, |n| n.get())
}

/// A past time as "3 min ago", the exact time on hover.
#[component]
pub fn Ago(at: chrono::DateTime<chrono::Utc>) -> impl IntoView {
    let now = now_signal();
    view! {
        <time class="ago" datetime=at.to_rfc3339() title=format!("{} UTC", date_time(at, true))>
            {move || time_ago(at, now())}
        </time>
    }
}

/// How near a deadline is, as the countdown's class: `overdue`, `soon` (under 5 minutes), `near` (under an
/// hour), or nothing.
pub fn deadline_class(deadline: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> &'static str {
    match (deadline - now).num_seconds() {
        s if s <= 0 => "countdown overdue",
        s if s < 300 => "countdown soon",
        s if s < 3600 => "countdown near",
        _ => "countdown",
    }
}

/// "claimed by NAME" while a question's claim lasts (`holder` until `until`), gone when it lapses: the live clock
/// takes it away without waiting for the row to change. `testid` names it for tests.
#[component]
pub fn ClaimedBy(
    holder: Option<String>,
    until: Option<chrono::DateTime<chrono::Utc>>,
    testid: &'static str,
) -> impl IntoView {
    let now = now_signal();
    move || match (&holder, until) {
        (Some(by), Some(until)) if until > now() => {
            Some(view! { <span class="claim" data-testid=testid>{format!("claimed by {by}")}</span> })
        }
        _ => None,
    }
}

/// A live countdown to a question's deadline (ticks every second once hydrated), coloured as it nears.
#[component]
pub fn Countdown(deadline: chrono::DateTime<chrono::Utc>) -> impl IntoView {
    let now = now_signal();
    view! {
        <time class=move || deadline_class(deadline, now()) datetime=deadline.to_rfc3339() data-testid="countdown"
            title=format!("deadline {} UTC", date_time(deadline, true))>
            {move || time_left(deadline, now())}
        </time>
    }
}

/// How long until `at`, for a step of a chain: `in 45 s`, `in 4 min`, `in 2 h 10 min`, `due now`.
pub fn time_until(at: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> String {
    match (at - now).num_seconds() {
        s if s <= 0 => "due now".to_owned(),
        s if s < 60 => format!("in {s} s"),
        s if s < 3600 => format!("in {} min", s / 60),
        s if s < 86_400 => format!("in {} h {} min", s / 3600, (s % 3600) / 60),
        s => format!("in {} d {} h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A pending question's escalation chain: the reminder and the escalation its policy planned, each done
/// (and when) or when it is due, the next one marked, then the question's own deadline.
#[component]
pub fn EscalationChain(question: Question, testid: &'static str) -> impl IntoView {
    use crate::types::EscalationStep;
    let plan = question.escalation.filter(|_| question.status == QuestionStatus::Pending)?;
    let now = now_signal();
    let next = plan.next_step().map(|(step, _)| step);
    let step = move |label: String,
                     due: chrono::DateTime<chrono::Utc>,
                     done: Option<chrono::DateTime<chrono::Utc>>,
                     is_next: bool| {
        let state = match (done, is_next) {
            (Some(_), _) => "done",
            (None, true) => "next",
            (None, false) => "later",
        };
        view! {
            <li class=format!("escalation-step {state}") data-state=state>
                <span class="step-label">{label}</span>" "
                {match done {
                    Some(at) => Either::Left(view! { <span class="muted">{format!("done {} UTC", clock(at))}</span> }),
                    None => Either::Right(view! {
                        <time datetime=due.to_rfc3339() title=format!("{} UTC", date_time(due, true))>
                            {move || time_until(due, now())}
                        </time>
                    }),
                }}
            </li>
        }
    };
    let reminder =
        plan.remind_at.map(|at| step("Reminder".into(), at, plan.reminded_at, next == Some(EscalationStep::Remind)));
    let escalation = plan.escalate_at.map(|at| {
        let to = plan.escalate_to.as_ref().map(ToString::to_string).unwrap_or_default();
        step(format!("Escalate to {to}"), at, plan.escalated_at, next == Some(EscalationStep::Escalate))
    });
    let deadline = question.timeout_at.map(|at| {
        view! {
            <li class="escalation-step later" data-state="deadline">
                <span class="step-label">"Deadline"</span>" "
                <time datetime=at.to_rfc3339()>{format!("{} UTC", date_time(at, false))}</time>
            </li>
        }
    });
    Some(view! {
        <ol class="escalation-chain" aria-label="Escalation" data-testid=format!("{testid}-escalation")>
            {reminder}{escalation}{deadline}
        </ol>
    })
}

/// How a resolved question was resolved, and by whom.
pub fn describe_resolution(question: &Question) -> String {
    let value = question.response.as_ref().map(|r| answer_in_words(question, &r.value)).unwrap_or_default();
    match (question.status, &question.answered_by) {
        (QuestionStatus::Answered, _) if question.resolution == Some(Resolution::Policy) => {
            format!("answered by a grant, without asking anyone: {value}")
        }
        (QuestionStatus::Answered, Some(by)) => format!("answered by {by}: {value}"),
        (QuestionStatus::Answered, None) => format!("answered: {value}"),
        (QuestionStatus::Defaulted, _) => format!("no answer in time; the default applied: {value}"),
        (QuestionStatus::Expired, _) => "expired: nobody answered in time".to_owned(),
        (QuestionStatus::Cancelled, by) => {
            format!("cancelled{}", by.as_ref().map(|b| format!(" by {b}")).unwrap_or_default())
        }
        (status, _) => status.to_string(),
    }
}

/// The text with its first letter in upper case, for the UI's own English words and the server's messages. ASCII
/// only: Unicode's case tables would be a few KiB of wasm for letters these texts never start with.
pub fn capitalise(text: &str) -> String {
    let mut capitalised = text.to_owned();
    if let Some(first) = capitalised.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    capitalised
}

/// An id short enough to show: its last eight hex digits, which end the full id, so a search for them finds it. Ids
/// are UUIDv7, whose leading digits are the creation time (the first eight change about once a minute): only the
/// random tail tells apart ids made together.
pub fn short_id(id: &uuid::Uuid) -> String {
    let hex = id.simple().to_string();
    hex[hex.len() - 8..].to_owned()
}

/// [`short_id`] of an id given as text (an audit entry's subject); text that is not a UUID shows its first eight
/// characters.
pub fn short_id_text(id: &str) -> String {
    match id.parse::<uuid::Uuid>() {
        Ok(uuid) => short_id(&uuid),
        Err(_) => id.chars().take(8).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, Utc};

    #[test]
    fn ids_made_together_have_different_short_ids_that_end_the_full_id() {
        let ids: Vec<uuid::Uuid> = (0..50).map(|_| uuid::Uuid::now_v7()).collect();
        let shown: std::collections::HashSet<String> = ids.iter().map(short_id).collect();
        assert_eq!(shown.len(), ids.len(), "fifty ids made within a millisecond or two show fifty ways");
        for id in &ids {
            assert!(id.to_string().ends_with(&short_id(id)));
            assert_eq!(short_id_text(&id.to_string()), short_id(id));
        }
        assert_eq!(short_id_text("bootstrap-token"), "bootstra");
    }

    #[test]
    fn a_resolution_names_who_or_what_answered() {
        let mut question = crate::types::sample_question("Run ruff check src?", QuestionStatus::Answered);
        question.response =
            Some(crate::types::AnswerBody { value: true.into(), comment: None, edited_arguments: None });
        question.answered_by = Some("alice".into());
        question.resolution = Some(Resolution::Human);
        assert_eq!(describe_resolution(&question), "answered by alice: yes");
        question.answered_by = Some("grant".into());
        question.resolution = Some(Resolution::Policy);
        assert_eq!(describe_resolution(&question), "answered by a grant, without asking anyone: yes");
    }

    #[test]
    fn time_left_reads_as_minutes_then_hours_then_overdue() {
        let now = Utc::now();
        assert_eq!(time_left(now + Duration::seconds(245), now), "4:05 left");
        assert_eq!(time_left(now + Duration::minutes(130), now), "2 h 10 min left");
        assert_eq!(time_left(now - Duration::seconds(1), now), "overdue");
    }

    #[test]
    fn time_until_a_step_reads_as_seconds_then_minutes_then_hours() {
        let now = Utc::now();
        assert_eq!(time_until(now + Duration::seconds(45), now), "in 45 s");
        assert_eq!(time_until(now + Duration::seconds(600), now), "in 10 min");
        assert_eq!(time_until(now + Duration::minutes(130), now), "in 2 h 10 min");
        assert_eq!(time_until(now + Duration::hours(50), now), "in 2 d 2 h");
        assert_eq!(time_until(now, now), "due now");
    }

    #[test]
    fn time_ago_reads_as_minutes_then_hours_then_days() {
        let now = Utc::now();
        assert_eq!(time_ago(now - Duration::seconds(20), now), "just now");
        assert_eq!(time_ago(now - Duration::seconds(200), now), "3 min ago");
        assert_eq!(time_ago(now - Duration::minutes(130), now), "2 h ago");
        assert_eq!(time_ago(now - Duration::hours(50), now), "2 d ago");
    }

    #[test]
    fn a_deadline_turns_near_within_the_hour_soon_within_five_minutes_then_overdue() {
        let now = Utc::now();
        assert_eq!(deadline_class(now + Duration::hours(2), now), "countdown");
        assert_eq!(deadline_class(now + Duration::minutes(30), now), "countdown near");
        assert_eq!(deadline_class(now + Duration::minutes(4), now), "countdown soon");
        assert_eq!(deadline_class(now - Duration::seconds(1), now), "countdown overdue");
    }

    #[test]
    fn times_are_written_as_chrono_would_write_them() {
        for text in ["2026-11-23T04:05:09Z", "1999-01-01T00:00:00Z", "2030-12-31T23:59:59.999Z"] {
            let t = chrono::DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc);
            assert_eq!(date_time(t, true), t.format("%Y-%m-%d %H:%M:%S").to_string());
            assert_eq!(date_time(t, false), t.format("%Y-%m-%d %H:%M").to_string());
            assert_eq!(clock(t), t.format("%H:%M:%S").to_string());
        }
    }

    #[test]
    fn capitalising_raises_the_first_ascii_letter_only() {
        assert_eq!(capitalise("question is already answered by alice"), "Question is already answered by alice");
        assert_eq!(capitalise("approve"), "Approve");
        assert_eq!(capitalise(""), "");
        assert_eq!(capitalise("étape"), "étape");
    }
}

/// A pending question's many hands: how many of the approvals it needs it has and from whom, and who holds
/// its claim, with the buttons to claim it or let the claim go. Live questions replace the question shown here, so
/// an approval or a claim made elsewhere shows at once; the buttons show what the server answered. The buttons are
/// those the person signed in may use, as the server decides: "Claim" for whoever may answer when nobody holds the
/// claim; "Release" for its holder, and for an admin, who may take anyone's claim away. They need the script, so
/// they come once the page knows who is signed in.
#[component]
pub fn ManyHands(question: Question, testid: &'static str) -> impl IntoView {
    let pending = question.status == QuestionStatus::Pending;
    let id = question.id;
    let shown = RwSignal::new(question);
    // The question as the event stream says it is now (a claim, an approval given elsewhere), when that is newer.
    let updates = crate::live::use_question_updates();
    let followed = StoredValue::new(0usize);
    Effect::new(move |_| {
        updates.with(|events| {
            let start = followed.get_value().min(events.len());
            if let Some(latest) = events[start..].iter().rev().find(|q| q.id == id)
                && shown.with_untracked(|q| latest.updated_at >= q.updated_at)
            {
                shown.set(latest.clone());
            }
            followed.set_value(events.len());
        });
    });
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let now = now_signal();
    // Who is signed in: the page reads it in the browser only, where the buttons work.
    let viewer = crate::live::use_live().viewer;
    let change_claim = move |verb: &'static str| {
        let id = shown.with_untracked(|q| q.id);
        error.set(None);
        busy.set(true);
        leptos::task::spawn_local(async move {
            let result =
                crate::api::post_json::<_, Question>(&format!("/questions/{id}/{verb}"), &serde_json::json!({})).await;
            busy.set(false);
            match result {
                Ok(question) => shown.set(question),
                Err(err) => error.set(Some(err.describe())),
            }
        });
    };
    let quorum = move || {
        shown.with(|q| {
            let progress = q.approval_progress()?;
            let by: Vec<String> = q.approvals.iter().map(|a| a.by.clone()).collect();
            let eligible = q.eligible.as_ref().map(|e| format!(" · from {e}")).unwrap_or_default();
            let text = if by.is_empty() {
                format!("Approvals: {progress}{eligible}")
            } else {
                format!("Approvals: {progress} ({}){eligible}", by.join(", "))
            };
            Some(view! { <p class="quorum" data-testid=format!("{testid}-quorum")>{text}</p> })
        })
    };
    let claim = move || {
        let holder = shown.with(|q| q.claim_holder(now()).map(str::to_owned).zip(q.claim_expires_at));
        let may_release = |by: &str| viewer.with(|v| v.as_ref().is_some_and(|v| v.name == by || v.role == Role::Admin));
        // Who may claim: whoever may decide it, as the server decides it.
        let may_claim =
            viewer.with(|v| v.as_ref().is_some_and(|v| shown.with(|q| q.refusal_to_decide(v.decider()).is_none())));
        view! {
            <p class="claim" data-testid=format!("{testid}-claim") data-viewer=move || viewer.with(|v| v.as_ref().map(|v| v.name.clone()))>
                {match holder.clone() {
                    Some((by, until)) => Either::Left(view! {
                        <span data-testid=format!("{testid}-claimed-by")>{format!("Claimed by {by}")}</span>
                        " · " <span class="muted">{time_left(until, now())}</span>
                    }),
                    None => Either::Right(view! { <span class="muted">"Nobody is on it"</span> }),
                }}
                " "
                {match holder {
                    Some((by, _)) => may_release(&by).then(|| Either::Left(view! {
                        <button type="button" class="link" data-testid=format!("{testid}-unclaim")
                            disabled=move || busy.get() on:click=move |_| change_claim("unclaim")>"Release"</button>
                    })),
                    None => may_claim.then(|| Either::Right(view! {
                        <button type="button" class="link" data-testid=format!("{testid}-claim-button")
                            disabled=move || busy.get() on:click=move |_| change_claim("claim")>"Claim"</button>
                    })),
                }}
            </p>
        }
    };
    // Gone once the question is resolved, here or elsewhere: there is nothing more to claim or approve.
    // Read through a memo, so that a claim or an approval redraws only the parts that show them.
    let open = Memo::new(move |_| pending && shown.with(|q| q.status == QuestionStatus::Pending));
    move || {
        open.get().then(|| {
            view! {
                <div class="many-hands">
                    {quorum}
                    {claim}
                    {move || error.get().map(|e| view! { <p class="field-error" role="alert" data-testid=format!("{testid}-claim-error")>{e}</p> })}
                </div>
            }
        })
    }
}

/// A button for what cannot be undone (removing someone, revoking a credential) that asks once more, in place: the
/// first press says what will happen, beside the button that does it and one that keeps things as they are, which
/// takes the focus, so that a second Enter changes nothing; Cancel gives the focus back to the action's button.
#[component]
pub fn ConfirmedAction(
    /// The action, on both buttons: "Remove", "Revoke".
    label: &'static str,
    /// What the second button does, as a question: "Remove alice from the workspace?".
    asking: String,
    testid: &'static str,
    on_confirm: Callback<()>,
) -> impl IntoView {
    let confirming = RwSignal::new(false);
    // Whether Cancel was pressed, so the action's button takes the focus back once it is drawn again.
    let cancelled = RwSignal::new(false);
    let (keep, action) = (NodeRef::<leptos::html::Button>::new(), NodeRef::<leptos::html::Button>::new());
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if confirming.get() {
            if let Some(button) = keep.get() {
                let _ = button.focus();
            }
        } else if cancelled.get_untracked()
            && let Some(button) = action.get()
        {
            cancelled.set(false);
            let _ = button.focus();
        }
    });
    move || {
        if confirming.get() {
            let (group_label, text) = (asking.clone(), asking.clone());
            Either::Left(view! {
                <span class="confirm-action" role="group" aria-label=group_label data-testid=format!("{testid}-asking")>
                    {text}
                    " "
                    <button type="button" class="link danger-text" data-testid=format!("{testid}-confirm")
                        on:click=move |_| { confirming.set(false); on_confirm.run(()) }>{label}</button>
                    " "
                    <button type="button" class="link" node_ref=keep data-testid=format!("{testid}-keep")
                        on:click=move |_| { cancelled.set(true); confirming.set(false) }>"Cancel"</button>
                </span>
            })
        } else {
            Either::Right(view! {
                <button type="button" class="link danger-text" node_ref=action data-testid=testid
                    on:click=move |_| confirming.set(true)>{label}</button>
            })
        }
    }
}

/// What a page says once its answer was accepted: an approval short of the question's quorum leaves it pending.
pub fn answered_notice(question: &Question) -> String {
    match (question.status, question.approval_progress()) {
        (QuestionStatus::Pending, Some(progress)) => {
            format!("Approval recorded for “{}”: {progress}", question.title)
        }
        _ => format!("Answered “{}”", question.title),
    }
}
