//! `/settings/rules`, Settings → Rules: the workspace's approval rules as one YAML document in an editor, with its
//! version and who saved it when. "Check" validates the text on the server as saving would and lists each fault
//! next to its field path (`rules[2].when: syntax error at 1:14: …`); "Save" (admins; anyone else sees the
//! document read-only) stores it and shows the new version. The text stays as typed whatever the server answers,
//! so nothing is lost to a refusal. "Test a call" shows what the saved rules decide about a call, the rule that
//! decided it and every rule that matched. The server functions call the REST API's use cases (`/rules`,
//! `/rules/check`, `/rules/test`).

use leptos::either::{Either, EitherOf3};
use leptos::prelude::*;

use super::settings::{Tab, settings_frame};
use crate::components::date_time;
use crate::types::{RuleDecision, RuleTestResult, SessionInfo};
use crate::{RulesPageData, RulesRefusal, RulesText, check_rules, rules_page, save_rules, test_rules};

/// `/settings/rules`: the approval rules' editor and the "test a call" box.
#[component]
pub fn RulesSettingsPage() -> impl IntoView {
    let data = crate::codec::resource(|| (), |_| rules_page());
    settings_frame(Tab::Rules, data, |session, data, _reload| view! { <RulesEditor session data/> }.into_any())
}

/// What the last "Check" or "Save" came to.
#[derive(Clone)]
enum Outcome {
    /// The document would be saved; it has this many rules.
    Valid(usize),
    /// Saved as this version.
    Saved(i64),
    /// Refused, with its faults; nothing was stored.
    Refused(RulesRefusal),
    /// The server could not be asked, or failed.
    Failed(String),
}

/// Who saved the stored document, when, and its version.
fn describe_version(text: &RulesText) -> String {
    match (&text.updated_by, text.updated_at) {
        (Some(by), Some(at)) => format!("Version {}, saved by {by} at {} UTC.", text.version, date_time(at, false)),
        _ => format!("Version {}: no rules saved yet, so every call is asked about.", text.version),
    }
}

#[component]
fn RulesEditor(session: SessionInfo, data: RulesPageData) -> impl IntoView {
    let admin = data.admin;
    let initial = data.rules.yaml.clone();
    let yaml = RwSignal::new(data.rules.yaml.clone());
    let stored = RwSignal::new(data.rules);
    let outcome = RwSignal::new(None::<Outcome>);
    let busy = RwSignal::new(false);
    let csrf = StoredValue::new(session.csrf_token);
    let check = move |_| {
        busy.set(true);
        // Cleared at once, so what shows next is this answer's.
        outcome.set(None);
        leptos::task::spawn_local(async move {
            let result = check_rules(yaml.get_untracked()).await;
            outcome.set(Some(match result {
                Ok(Ok(rules)) => Outcome::Valid(rules),
                Ok(Err(refusal)) => Outcome::Refused(refusal),
                Err(err) => Outcome::Failed(err.to_string()),
            }));
            busy.set(false);
        });
    };
    let save = move |_| {
        busy.set(true);
        // Cleared at once, so what shows next is this answer's.
        outcome.set(None);
        leptos::task::spawn_local(async move {
            let result = save_rules(yaml.get_untracked(), csrf.get_value()).await;
            outcome.set(Some(match result {
                Ok(Ok(saved)) => {
                    let version = saved.version;
                    // What is stored, as it is stored: the same rules, without the comments YAML does not keep.
                    yaml.set(saved.yaml.clone());
                    stored.set(saved);
                    Outcome::Saved(version)
                }
                Ok(Err(refusal)) => Outcome::Refused(refusal),
                Err(err) => Outcome::Failed(err.to_string()),
            }));
            busy.set(false);
        });
    };
    let outcome_view = move || {
        outcome.get().map(|shown| match shown {
            Outcome::Valid(rules) => EitherOf3::A(notice(format!(
                "Valid: {rules} rule{} would be saved. Nothing was saved.",
                if rules == 1 { "" } else { "s" }
            ))),
            Outcome::Saved(version) => {
                EitherOf3::A(notice(format!("Saved as version {version}: calls are decided by it from now on.")))
            }
            Outcome::Refused(refusal) => EitherOf3::B(faults(refusal, "nothing was saved")),
            Outcome::Failed(message) => EitherOf3::C(view! {
                <p class="alert" role="alert" data-testid="rules-error">{message}</p>
            }),
        })
    };
    view! {
        <section class="card stack" aria-labelledby="rules-heading">
            <h2 id="rules-heading">"Approval rules"</h2>
            <p>
                "Each tool call an agent makes is allowed, asked about or denied by these rules: of the enforcing "
                "rules whose tools and agents match and whose condition holds, the strictest decision wins (deny, "
                "then ask, then allow); when none matches, the default decides. Dry-run rules only record what they "
                "would have decided, in the audit log."
            </p>
            <p class="muted" data-testid="rules-version">{move || describe_version(&stored.get())}</p>
            {(!admin).then(|| view! {
                <p class="muted" data-testid="rules-read-only">"Read-only: only the workspace's admins change the rules."</p>
            })}
            <label for="rules-yaml">"The rules (YAML)"</label>
            <textarea id="rules-yaml" class="mono rules-yaml" rows="18" spellcheck="false" autocomplete="off"
                readonly=!admin aria-describedby="rules-yaml-help" data-testid="rules-yaml"
                prop:value=move || yaml.get()
                on:input=move |ev| yaml.set(event_target_value(&ev))>{initial}</textarea>
            <p id="rules-yaml-help" class="muted rules-help">
                "A rule: " <code>"name"</code> ", " <code>"tools"</code> " (globs, " <code>"*"</code> " for any "
                "characters), " <code>"agents"</code> "?, " <code>"when"</code> "? (CEL over " <code>"args"</code> ", "
                <code>"tool"</code> ", " <code>"agent"</code> ", " <code>"run"</code> ", " <code>"now"</code> "), "
                <code>"decision"</code> " (allow, ask, deny), " <code>"reason"</code> "?, " <code>"ask"</code> "?, "
                <code>"mode"</code> "? (enforce or dry_run)."
            </p>
            {admin.then(|| view! {
                <p class="button-row">
                    <button type="button" on:click=check disabled=move || busy.get() data-testid="rules-check">"Check"</button>
                    <button type="button" class="primary" on:click=save disabled=move || busy.get() data-testid="rules-save">
                        "Save"
                    </button>
                </p>
            })}
            {outcome_view}
        </section>
        <section class="card stack" aria-labelledby="rules-test-heading">
            <h2 id="rules-test-heading">"Test a call"</h2>
            <p>
                "What the saved rules decide about a call, without asking anyone or recording anything. Save first to "
                "test what the editor holds."
            </p>
            <TestCall/>
        </section>
    }
}

/// A confirmation.
fn notice(text: String) -> impl IntoView {
    view! { <p class="notice" role="status" data-testid="rules-ok">{text}</p> }
}

/// A refusal: its message when it names no field, else each fault next to its field path, after what the refusal
/// left undone (`consequence`).
fn faults(refusal: RulesRefusal, consequence: &'static str) -> impl IntoView {
    if refusal.faults.is_empty() {
        return Either::Left(view! { <p class="alert" role="alert" data-testid="rules-error">{refusal.message}</p> });
    }
    let count = refusal.faults.len();
    Either::Right(view! {
        <div class="alert rules-faults" role="alert" data-testid="rules-error">
            <p>{format!("Not valid, {consequence}: {count} fault{}.", if count == 1 { "" } else { "s" })}</p>
            <ul>
                {refusal.faults.into_iter().map(|fault| {
                    let field = fault.field.clone();
                    view! {
                    <li data-testid="rules-fault" data-field=field>
                        <code data-testid="rules-fault-field">{fault.field}</code>
                        ": "
                        <span data-testid="rules-fault-message">{fault.message}</span>
                    </li>
                    }
                }).collect_view()}
            </ul>
        </div>
    })
}

/// The "test a call" box: tool, arguments (a JSON object), agent → the decision, the deciding rule, the matches.
#[component]
fn TestCall() -> impl IntoView {
    let tool = RwSignal::new(String::new());
    let arguments = RwSignal::new("{}".to_owned());
    let agent = RwSignal::new(String::new());
    let result = RwSignal::new(None::<Result<RuleTestResult, RulesRefusal>>);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        leptos::task::spawn_local(async move {
            let agent = Some(agent.get_untracked()).filter(|a| !a.trim().is_empty());
            let tested = test_rules(tool.get_untracked(), arguments.get_untracked(), agent).await;
            result.set(Some(match tested {
                Ok(outcome) => outcome,
                Err(err) => Err(RulesRefusal { message: err.to_string(), faults: Vec::new() }),
            }));
        });
    };
    let shown = move || {
        result.get().map(|tested| match tested {
            Ok(tested) => {
                let decided_by = match &tested.rule {
                    Some(rule) => format!("by rule {rule}"),
                    None => "by the default (no enforcing rule matched)".to_owned(),
                };
                let matched =
                    if tested.matched.is_empty() { "none".to_owned() } else { tested.matched.join(", ") };
                let class = match tested.decision {
                    RuleDecision::Allow => "badge decision-allow",
                    RuleDecision::Ask => "badge decision-ask",
                    RuleDecision::Deny => "badge decision-deny",
                };
                Either::Left(view! {
                    <div class="rules-test-result" role="status" data-testid="rules-test-result">
                        <p>
                            <span class=class data-testid="rules-test-decision">{tested.decision.to_string()}</span>
                            " "
                            <span data-testid="rules-test-rule" data-rule=tested.rule.clone().unwrap_or_default()>{decided_by}</span>
                        </p>
                        <p>"Rules that matched (dry-run ones too): " <span data-testid="rules-test-matched">{matched}</span></p>
                    </div>
                })
            }
            Err(refusal) => Either::Right(faults(refusal, "the call was not tested")),
        })
    };
    view! {
        <form class="stack rules-test" on:submit=submit data-testid="rules-test-form">
            <label for="rules-test-tool">"Tool"</label>
            <input id="rules-test-tool" type="text" required placeholder="shell, payments_transfer, mcp:github/create_issue"
                bind:value=tool data-testid="rules-test-tool"/>
            <label for="rules-test-arguments">"Arguments (a JSON object)"</label>
            <textarea id="rules-test-arguments" class="mono" rows="4" spellcheck="false" data-testid="rules-test-arguments"
                prop:value=move || arguments.get()
                on:input=move |ev| arguments.set(event_target_value(&ev))>"{}"</textarea>
            <label for="rules-test-agent">"Agent (optional)"</label>
            <input id="rules-test-agent" type="text" bind:value=agent data-testid="rules-test-agent"/>
            <p class="button-row"><button type="submit" data-testid="rules-test-submit">"Test"</button></p>
            {shown}
        </form>
    }
}
