//! `/audit`: the workspace's audit log for admins, newest first, filtered by the URL
//! (`?action=&actor=&actor_kind=&subject_id=&since=&until=&cursor=`), with export links for the same selection.
//!
//! The filter bar is a plain `GET` form and paging is a link, so the page works without JavaScript.

use leptos::either::Either;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde_json::Value;

use crate::audit_entries;
use crate::components::date_time;
use crate::types::{ActorKind, AuditEntry, AuditFilter};

/// The actions the server records, for the filter's choices.
const ACTIONS: &[&str] = &[
    "question.answered",
    "question.defaulted",
    "question.expired",
    "question.cancelled",
    "tool_call.decided",
    "run.cancelled",
    "signin",
    "signout",
    "token.created",
    "token.revoked",
    "user.created",
    "role.changed",
    "addresses.changed",
    "notifications.changed",
    "push_subscription.added",
    "push_subscription.removed",
    "question.reminded",
    "question.escalated",
    "escalation_policies.changed",
];

/// A time from the URL: RFC 3339, or what a `datetime-local` input sends (`2026-01-31T09:00`, read as UTC), or a
/// date (`2026-01-31`, midnight UTC).
pub fn parse_time(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let text = text.trim();
    if let Some(t) = crate::types::time::parse_rfc3339(text) {
        return Some(t);
    }
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<u32>().ok();
    let date = chrono::NaiveDate::from_ymd_opt(number(0..4)? as i32, number(5..7)?, number(8..10)?)?;
    if text.get(4..5) != Some("-") || text.get(7..8) != Some("-") {
        return None;
    }
    let time = match text.len() {
        10 => date.and_hms_opt(0, 0, 0)?,
        16 | 19 if matches!(text.get(10..11), Some("T" | " ")) && text.get(13..14) == Some(":") => {
            let seconds = if text.len() == 19 && text.get(16..17) == Some(":") { number(17..19)? } else { 0 };
            date.and_hms_opt(number(11..13)?, number(14..16)?, seconds)?
        }
        _ => return None,
    };
    Some(time.and_utc())
}

/// Reads the filters from query parameters; values that name nothing are ignored.
pub fn filter_from_query(get: impl Fn(&str) -> Option<String>) -> AuditFilter {
    let non_empty = |name: &str| get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    AuditFilter {
        action: non_empty("action"),
        actor: non_empty("actor"),
        actor_kind: non_empty("actor_kind").and_then(|k| k.parse().ok()),
        subject_id: non_empty("subject_id"),
        since: non_empty("since").and_then(|t| parse_time(&t)),
        until: non_empty("until").and_then(|t| parse_time(&t)),
    }
}

/// The query string of a filter (for export and paging links), `&`-joined and percent-encoded.
pub fn filter_query(filter: &AuditFilter) -> String {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(action) = &filter.action {
        pairs.push(("action", action.clone()));
    }
    if let Some(actor) = &filter.actor {
        pairs.push(("actor", actor.clone()));
    }
    if let Some(kind) = filter.actor_kind {
        pairs.push(("actor_kind", kind.to_string()));
    }
    if let Some(subject) = &filter.subject_id {
        pairs.push(("subject_id", subject.clone()));
    }
    if let Some(since) = filter.since {
        pairs.push(("since", format!("{}Z", date_time(since, true).replace(' ', "T"))));
    }
    if let Some(until) = filter.until {
        pairs.push(("until", format!("{}Z", date_time(until, true).replace(' ', "T"))));
    }
    pairs
        .into_iter()
        .map(|(name, value)| format!("{name}={}", crate::navigation::query_value(&value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `/audit`.
#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let filter = Memo::new(move |_| query.with(|q| filter_from_query(|name| q.get(name))));
    let cursor = Memo::new(move |_| query.with(|q| q.get("cursor").filter(|c| !c.is_empty())));
    let entries =
        crate::codec::resource(move || (filter.get(), cursor.get()), |(filter, cursor)| audit_entries(filter, cursor));
    let current = filter.get_untracked();
    let links = filter_query(&current);
    let export = move |format: &str| {
        if links.is_empty() {
            format!("/api/v1/audit/export?format={format}")
        } else {
            format!("/api/v1/audit/export?format={format}&{links}")
        }
    };
    view! {
        <main class="page wide" data-testid="audit-page">
            <h1>"Audit log"</h1>
            <p class="muted">
                "Every decision and security-relevant action, hash-chained: "
                <code>"holdpoint audit verify"</code>
                " checks that nothing was altered or removed."
            </p>
            <AuditFilterBar filter=current/>
            <p class="audit-exports">
                "Export this selection: "
                <a href=export("jsonl") data-testid="audit-export-jsonl" download>"JSON Lines"</a>
                " · "
                <a href=export("csv") data-testid="audit-export-csv" download>"CSV"</a>
            </p>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || entries.get().map(|result| match result {
                    Ok(page) => {
                        let next = page.next_cursor.map(|c| {
                            let rest = filter_query(&filter.get_untracked());
                            let sep = if rest.is_empty() { "" } else { "&" };
                            format!("/audit?{rest}{sep}cursor={}", crate::navigation::query_value(&c))
                        });
                        Either::Left(view! {
                            <AuditTable entries=page.items/>
                            {next.map(|href| view! {
                                <p><a href=href data-testid="audit-next">"Older entries →"</a></p>
                            })}
                        })
                    }
                    Err(err) => Either::Right(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                })}
            </Suspense>
        </main>
    }
}

/// The filters, as a `GET` form on `/audit`.
#[component]
fn AuditFilterBar(filter: AuditFilter) -> impl IntoView {
    let action = filter.action.clone().unwrap_or_default();
    let kind = filter.actor_kind.map(|k| k.to_string()).unwrap_or_default();
    let local = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| date_time(t, false).replace(' ', "T"));
    view! {
        <form method="get" action="/audit" class="filters" data-testid="audit-filters" role="search">
            <label class="filter">
                <span>"Action"</span>
                <select name="action" data-testid="audit-filter-action">
                    <option value="">"any"</option>
                    {ACTIONS.iter().map(|a| {
                        let is_selected = *a == action;
                        view! { <option value=*a selected=is_selected>{*a}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label class="filter">
                <span>"Actor kind"</span>
                <select name="actor_kind" data-testid="audit-filter-actor-kind">
                    <option value="">"any"</option>
                    {ActorKind::ALL.iter().map(|k| {
                        let value = k.to_string();
                        let is_selected = value == kind;
                        view! { <option value=value.clone() selected=is_selected>{k.to_string()}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label class="filter">
                <span>"Actor"</span>
                <input type="text" name="actor" size="12" value=filter.actor.unwrap_or_default() data-testid="audit-filter-actor"/>
            </label>
            <label class="filter">
                <span>"Subject id"</span>
                <input type="text" name="subject_id" size="14" value=filter.subject_id.unwrap_or_default() data-testid="audit-filter-subject"/>
            </label>
            <label class="filter">
                <span>"Since (UTC)"</span>
                <input type="datetime-local" name="since" value=local(filter.since).unwrap_or_default() data-testid="audit-filter-since"/>
            </label>
            <label class="filter">
                <span>"Until (UTC)"</span>
                <input type="datetime-local" name="until" value=local(filter.until).unwrap_or_default() data-testid="audit-filter-until"/>
            </label>
            <button type="submit" data-testid="audit-filter-apply">"Apply"</button>
        </form>
    }
}

#[component]
fn AuditTable(entries: Vec<AuditEntry>) -> impl IntoView {
    if entries.is_empty() {
        return Either::Left(view! {
            <div class="empty" data-testid="audit-empty">
                <p class="empty-title">"No entries match."</p>
                <p>"Every decision, sign-in and change is logged here; widen the filters or "
                    <a href="/audit">"show the whole log"</a>"."</p>
            </div>
        });
    }
    Either::Right(view! {
        <div class="table-scroll" tabindex="0" role="region" aria-label="Audit entries">
            <table class="audit-table" data-testid="audit-table">
                <thead>
                    <tr>
                        <th scope="col">"#"</th>
                        <th scope="col">"Time (UTC)"</th>
                        <th scope="col">"Actor"</th>
                        <th scope="col">"Action"</th>
                        <th scope="col">"Subject"</th>
                        <th scope="col">"Change"</th>
                    </tr>
                </thead>
                <tbody>
                    {entries.into_iter().map(|entry| view! { <AuditRow entry/> }).collect_view()}
                </tbody>
            </table>
        </div>
    })
}

/// Where a subject can be looked at in the UI.
fn subject_link(subject_type: &str, id: &str) -> Option<String> {
    match subject_type {
        "question" => Some(format!("/questions/{id}")),
        "run" => Some(format!("/runs/{id}")),
        _ => None,
    }
}

/// A JSON value, short: strings without quotes, the rest compact.
fn short(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "—".to_owned(),
        other => other.to_string(),
    }
}

/// `(key, before, after)` for every top-level key of either side, in key order.
pub fn changes(before: Option<&Value>, after: Option<&Value>) -> Vec<(String, Option<String>, Option<String>)> {
    let empty = serde_json::Map::new();
    let b = before.and_then(Value::as_object).unwrap_or(&empty);
    let a = after.and_then(Value::as_object).unwrap_or(&empty);
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().map(|k| (k.clone(), b.get(k).map(short), a.get(k).map(short))).collect()
}

/// One JSON Patch operation, for people: `replace /command: "ls -la"`.
pub fn describe_op(op: &Value) -> String {
    let name = op["op"].as_str().unwrap_or("?");
    let path = op["path"].as_str().unwrap_or("");
    let path = if path.is_empty() { "(whole)" } else { path };
    match op.get("value") {
        Some(value) => format!("{name} {path}: {value}"),
        None => format!("{name} {path}"),
    }
}

#[component]
fn AuditRow(entry: AuditEntry) -> impl IntoView {
    let rows = changes(entry.before.as_ref(), entry.after.as_ref());
    let diff: Vec<String> = entry
        .diff
        .as_ref()
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |ops| ops.iter().map(describe_op).collect());
    let subject = entry.subject_id.clone().map(|id| {
        let short_id = crate::components::short_id_text(&id);
        match subject_link(&entry.subject_type, &id) {
            Some(href) => Either::Left(view! { <a href=href title=id.clone()>{short_id}</a> }),
            None => Either::Right(view! { <code title=id.clone()>{short_id}</code> }),
        }
    });
    view! {
        <tr data-testid="audit-entry" data-seq=entry.seq.to_string() data-action=entry.action.clone()>
            <td class="muted">{entry.seq}</td>
            <td>
                <time datetime=entry.created_at.to_rfc3339()>{date_time(entry.created_at, true)}</time>
            </td>
            <td>
                <span data-testid="audit-actor">{entry.actor.clone()}</span>
                " "
                <span class=format!("badge actor-{}", entry.actor_kind) data-testid="audit-actor-kind">{entry.actor_kind.to_string()}</span>
            </td>
            <td><code data-testid="audit-action">{entry.action.clone()}</code></td>
            <td>{entry.subject_type.clone()} " " {subject}</td>
            <td>
                {(!rows.is_empty()).then(|| view! {
                    <dl class="audit-changes">
                        {rows.into_iter().map(|(key, before, after)| {
                            // Keys on one side only are context (a title, a status), not a change.
                            let changed = before.is_some() && after.is_some() && before != after;
                            view! {
                                <div class="audit-change" class:changed=changed>
                                    <dt>{key}</dt>
                                    <dd>
                                        {match (before, after) {
                                            (Some(b), Some(a)) if b != a => format!("{b} → {a}"),
                                            (_, Some(a)) => a,
                                            (Some(b), None) => b,
                                            (None, None) => String::new(),
                                        }}
                                    </dd>
                                </div>
                            }
                        }).collect_view()}
                    </dl>
                })}
                {(!diff.is_empty()).then(|| view! {
                    <div class="audit-diff" data-testid="audit-diff">
                        <span class="muted">"Edited arguments:"</span>
                        <ul>{diff.into_iter().map(|op| view! { <li><code>{op}</code></li> }).collect_view()}</ul>
                    </div>
                })}
            </td>
        </tr>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_round_trip_through_the_query_string() {
        let query = "action=question.answered&actor=alice%20b&actor_kind=human&since=2026-01-31T09:00";
        let pairs: Vec<(String, String)> = query
            .split('&')
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_owned(), v.replace("%20", " "))
            })
            .collect();
        let filter = filter_from_query(|name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()));
        assert_eq!(filter.action.as_deref(), Some("question.answered"));
        assert_eq!(filter.actor.as_deref(), Some("alice b"));
        assert_eq!(filter.actor_kind, Some(ActorKind::Human));
        assert_eq!(filter.since.unwrap().to_rfc3339(), "2026-01-31T09:00:00+00:00");
        assert_eq!(
            filter_query(&filter),
            "action=question.answered&actor=alice%20b&actor_kind=human&since=2026-01-31T09%3A00%3A00Z"
        );
    }

    #[test]
    fn times_are_read_as_rfc_3339_datetime_local_or_a_date() {
        let at = |text: &str| parse_time(text).map(|t| t.to_rfc3339());
        assert_eq!(at("2026-01-31T09:00:00+01:00").as_deref(), Some("2026-01-31T08:00:00+00:00"));
        assert_eq!(at("2026-01-31T09:05").as_deref(), Some("2026-01-31T09:05:00+00:00"));
        assert_eq!(at("2026-01-31 09:05:07").as_deref(), Some("2026-01-31T09:05:07+00:00"));
        assert_eq!(at("2026-01-31").as_deref(), Some("2026-01-31T00:00:00+00:00"));
        for bad in ["2026-02-30", "2026-01-31T25:00", "2026/01/31", "31-01-2026", "", "2026-01-31T09"] {
            assert_eq!(at(bad), None, "{bad}");
        }
    }

    #[test]
    fn unknown_kinds_and_unreadable_times_are_ignored() {
        let filter = filter_from_query(|name| match name {
            "actor_kind" => Some("robot".into()),
            "until" => Some("tomorrow".into()),
            _ => None,
        });
        assert_eq!(filter, AuditFilter::default());
    }

    #[test]
    fn changes_pair_each_key_with_its_before_and_after() {
        let before = json!({"status": "pending", "title": "Deploy?"});
        let after = json!({"status": "answered", "value": true});
        assert_eq!(
            changes(Some(&before), Some(&after)),
            vec![
                ("status".into(), Some("pending".into()), Some("answered".into())),
                ("title".into(), Some("Deploy?".into()), None),
                ("value".into(), None, Some("true".into())),
            ]
        );
        assert_eq!(
            describe_op(&json!({"op": "replace", "path": "/command", "value": "ls"})),
            "replace /command: \"ls\""
        );
        assert_eq!(describe_op(&json!({"op": "remove", "path": "/cwd"})), "remove /cwd");
    }
}
