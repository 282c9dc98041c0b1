//! The filter bar: the URL's filters as a `GET` form, applied in place once the page is hydrated.

use leptos::prelude::*;

use crate::InboxFilter;
use crate::types::{QuestionKind, QuestionStatus, Urgency};

/// One group of the filter bar: radio buttons drawn as a segmented control, one of them checked.
#[component]
fn Segments(
    name: &'static str,
    label: &'static str,
    /// `(value, label)` pairs; the first is the default.
    choices: Vec<(String, String)>,
    /// The value the URL's filters give this group.
    selected: Signal<String>,
) -> impl IntoView {
    view! {
        <fieldset class="segmented" data-testid=format!("filter-{name}")>
            <legend>{label}</legend>
            {choices.into_iter().map(|(value, text)| {
                let checked = selected.with_untracked(|selected| *selected == value);
                let testid = format!("filter-{name}-{}", if value.is_empty() { "default" } else { value.as_str() });
                let this = value.clone();
                view! {
                    <label class="chip">
                        <input type="radio" name=name value=value checked=checked
                            prop:checked=move || selected.with(|selected| *selected == this) data-testid=testid/>
                        <span>{text}</span>
                    </label>
                }
            }).collect_view()}
        </fieldset>
    }
}

fn choices<T: Copy + std::fmt::Display>(any: &str, all: &[T]) -> Vec<(String, String)> {
    std::iter::once((String::new(), any.to_owned()))
        .chain(all.iter().map(|v| (v.to_string(), v.to_string().replace('_', " "))))
        .collect()
}

/// `name=value&...` with the values percent-encoded, empty ones left out (they mean the default).
pub(super) fn query_string(params: &[(String, String)]) -> String {
    let mut query = String::new();
    for (name, value) in params.iter().filter(|(_, v)| !v.trim().is_empty()) {
        if !query.is_empty() {
            query.push('&');
        }
        query.push_str(name);
        query.push('=');
        query.push_str(&crate::navigation::query_value(value.trim()));
    }
    query
}

/// The name and value of the input an event comes from.
#[cfg(feature = "hydrate")]
fn changed_input(ev: &leptos::ev::Event) -> Option<(String, String)> {
    use wasm_bindgen::JsCast;
    let input = ev.target()?.dyn_into::<web_sys::HtmlInputElement>().ok()?;
    Some((input.name(), input.value()))
}

/// Events are the browser's: on the server there are none.
#[cfg(not(feature = "hydrate"))]
fn changed_input(_: &leptos::ev::Event) -> Option<(String, String)> {
    None
}

/// The filter bar's fields and their values for `filter`, in the URL's order.
pub(super) fn filter_params(filter: &InboxFilter) -> Vec<(String, String)> {
    let status = match filter.status {
        None => "all".to_owned(),
        Some(QuestionStatus::Pending) => String::new(),
        Some(s) => s.to_string(),
    };
    vec![
        ("q".to_owned(), filter.text.clone().unwrap_or_default()),
        ("status".to_owned(), status),
        ("kind".to_owned(), filter.kind.map(|k| k.to_string()).unwrap_or_default()),
        ("urgency".to_owned(), filter.urgency.map(|u| u.to_string()).unwrap_or_default()),
        ("project".to_owned(), filter.project.clone().unwrap_or_default()),
        ("sort".to_owned(), if filter.by_deadline { "deadline".to_owned() } else { String::new() }),
    ]
}

/// The filters, as a `GET` form on `/inbox` with a submit button. Once hydrated, a choice applies at once (a
/// text field when it is committed with Enter or by leaving it): the page navigates to the form's URL in place,
/// and the button is hidden. The bar shows the URL's filters however the URL changed (Back and Forward too).
#[component]
pub(super) fn FilterBar(filter: Memo<InboxFilter>) -> impl IntoView {
    let mut statuses = vec![(String::new(), "pending".to_owned())];
    statuses.extend(QuestionStatus::ALL.iter().skip(1).map(|s| (s.to_string(), s.to_string())));
    statuses.push(("all".to_owned(), "any".to_owned()));
    let params = StoredValue::new(filter.with_untracked(filter_params));
    // A change of the URL the bar did not make (Back, Forward, a link) is what the bar goes on from.
    Effect::new(move |_| params.set_value(filter.with(filter_params)));
    let value_of = move |name: &'static str| {
        Signal::derive(move || {
            filter.with(|f| filter_params(f).into_iter().find(|(n, _)| n == name).map(|(_, v)| v).unwrap_or_default())
        })
    };
    let (text, project) = (value_of("q"), value_of("project"));
    let navigate = leptos_router::hooks::use_navigate();
    let apply = move || navigate(&format!("/inbox?{}", params.with_value(|p| query_string(p))), Default::default());
    let remember = move |ev: &leptos::ev::Event| {
        let Some((name, value)) = changed_input(ev) else {
            return;
        };
        params.update_value(|p| {
            if let Some((_, v)) = p.iter_mut().find(|(n, _)| *n == name) {
                *v = value;
            }
        });
    };
    view! {
        <form method="get" action="/inbox" class="filters" data-testid="inbox-filters" role="search"
            on:input=move |ev| remember(&ev)
            on:change={
                let apply = apply.clone();
                move |ev| {
                    remember(&ev);
                    apply();
                }
            }
            on:submit=move |ev| {
                ev.prevent_default();
                apply();
            }
        >
            <div class="filter-line">
                <label class="filter grow">
                    <span class="visually-hidden">"Search"</span>
                    <input type="search" name="q" maxlength=crate::SEARCH_MAX_CHARS value=text.get_untracked()
                        prop:value=text placeholder="Search title or body" data-testid="filter-q"/>
                </label>
                <label class="filter">
                    <span class="visually-hidden">"Project"</span>
                    <input type="text" name="project" size="10" value=project.get_untracked()
                        prop:value=project placeholder="Project" data-testid="filter-project"/>
                </label>
                <nav class="views" aria-label="Views">
                    <a href="/inbox?kind=approval" rel="external" data-testid="view-approvals">"Approvals"</a>
                    <a href="/inbox?urgency=critical" rel="external" data-testid="view-critical">"Critical"</a>
                    <a href="/inbox?sort=deadline" rel="external" data-testid="view-due-soon">"Due soon"</a>
                    <a href="/inbox" rel="external" class="reset">"Reset"</a>
                </nav>
                <button type="submit" class="apply" data-testid="filter-apply">"Apply"</button>
            </div>
            <div class="filter-line">
                <Segments name="status" label="Status" choices=statuses selected=value_of("status")/>
                <Segments name="kind" label="Kind" choices=choices("any", QuestionKind::ALL) selected=value_of("kind")/>
                <Segments name="urgency" label="Urgency" choices=choices("any", Urgency::ALL) selected=value_of("urgency")/>
                <Segments
                    name="sort"
                    label="Sort"
                    choices=vec![(String::new(), "newest".to_owned()), ("deadline".to_owned(), "deadline".to_owned())]
                    selected=value_of("sort")
                />
            </div>
        </form>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_string_leaves_defaults_out_and_encodes_what_is_not_plain() {
        let params =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect::<Vec<_>>();
        assert_eq!(query_string(&params(&[("q", ""), ("kind", "approval"), ("sort", "")])), "kind=approval");
        assert_eq!(
            query_string(&params(&[("q", " Über & co "), ("status", "all")])),
            "q=%C3%9Cber%20%26%20co&status=all"
        );
    }
}
