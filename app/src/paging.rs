//! Lists of questions longer than a page (the inbox, the approval queue): the first [`QUESTION_PAGE`] load with the
//! page, and "Show more" loads the next in place. Without JavaScript it is a link to the page that starts there
//! (`?after=`, the `next_cursor` the server gave out), with a link back to the top.

use std::cmp::Ordering;
use std::future::Future;

use leptos::prelude::*;

use crate::server_fns::{InboxFilter, Listed, QUESTION_PAGE};
use crate::types::Page;

/// The pages of one list loaded so far, and where the next one starts.
pub struct Pages<T: Send + Sync + 'static> {
    /// Every question loaded, in the server's order.
    pub loaded: RwSignal<Vec<T>>,
    /// The server's cursor of the page after the last one loaded; `None` once the list is whole.
    next: RwSignal<Option<String>>,
    /// The list started past a position of the URL (`?after=`), not at its top.
    past_top: bool,
    loading: RwSignal<bool>,
    error: RwSignal<Option<String>>,
}

impl<T: Send + Sync + 'static> Clone for Pages<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Send + Sync + 'static> Copy for Pages<T> {}

impl<T: Listed + Clone + Send + Sync + 'static> Pages<T> {
    /// The list as its first page came: from its top, or past `after`.
    pub fn new(first: Page<T>, after: Option<&str>) -> Self {
        Pages {
            loaded: RwSignal::new(first.items),
            next: RwSignal::new(first.next_cursor),
            past_top: after.is_some(),
            loading: RwSignal::new(false),
            error: RwSignal::new(None),
        }
    }

    /// Whether the list starts past its top (a page "Show more" linked to).
    pub fn past_top(self) -> bool {
        self.past_top
    }

    /// Whether the server has more of the list than is loaded.
    pub fn cut(self) -> bool {
        self.next.with(Option::is_some)
    }

    /// Whether a question new to the list, arriving live, belongs to what is loaded: one that sorts before a list
    /// that does not start at the top, or after the last loaded one while more follow, is on a page not shown (the
    /// page that shows it lists it when it loads).
    /// (`loaded` is what [`Pages::loaded`] holds, read by the caller.)
    pub fn admits(self, loaded: &[T], filter: &InboxFilter, question: &impl Listed) -> bool {
        let before = self.past_top && loaded.first().is_some_and(|first| filter.order(question, first).is_lt());
        let after = self.cut() && loaded.last().is_some_and(|last| filter.order(question, last) == Ordering::Greater);
        !before && !after
    }

    /// Loads the next page with `fetch` (given the cursor) and adds its questions that are not loaded already
    /// (one may have arrived live meanwhile).
    fn load_next<F, Fut>(self, fetch: F)
    where
        F: FnOnce(String) -> Fut + 'static,
        Fut: Future<Output = Result<Page<T>, ServerFnError>> + 'static,
    {
        let Some(cursor) = self.next.get_untracked() else { return };
        if self.loading.get_untracked() {
            return;
        }
        self.loading.set(true);
        self.error.set(None);
        leptos::task::spawn_local(async move {
            match fetch(cursor).await {
                Ok(page) => {
                    self.loaded.update(|loaded| {
                        let fresh: Vec<T> =
                            page.items.into_iter().filter(|q| loaded.iter().all(|l| l.id() != q.id())).collect();
                        loaded.extend(fresh);
                    });
                    self.next.set(page.next_cursor);
                }
                Err(err) => self.error.set(Some(format!("The next questions could not be loaded: {err}"))),
            }
            self.loading.set(false);
        });
    }

    /// "Show more" under the list while the server has more: it loads the next page in place, or, without
    /// JavaScript, follows its link to the page that starts there (`{path}?{query}`, the list's filters, plus
    /// `after`). And, on a page that starts past the top, a link back to it.
    pub fn controls<F, Fut>(self, path: &'static str, query: String, fetch: F) -> impl IntoView
    where
        F: Fn(String) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = Result<Page<T>, ServerFnError>> + 'static,
    {
        let sep = if query.is_empty() { "" } else { "&" };
        let top = format!("{path}{}{query}", if query.is_empty() { "" } else { "?" });
        let past = move |cursor: &str| format!("{path}?{query}{sep}after={}", crate::navigation::query_value(cursor));
        view! {
            <div class="list-pages">
                {move || self.next.get().map(|cursor| view! {
                    <a class="button" href=past(&cursor) data-testid="list-more" rel="external"
                        aria-disabled=move || self.loading.get().to_string()
                        on:click=move |ev| {
                            ev.prevent_default();
                            self.load_next(fetch);
                        }>
                        {move || if self.loading.get() { "Loading…".to_owned() } else { format!("Show {QUESTION_PAGE} more") }}
                    </a>
                })}
                {self.past_top.then(|| view! {
                    <a href=top data-testid="list-top">"Back to the top of the list"</a>
                })}
                {move || self.error.get().map(|error| view! { <p class="alert" role="alert" data-testid="list-error">{error}</p> })}
            </div>
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Question, QuestionStatus, sample_question};

    /// Four questions, oldest first.
    fn asked_in_turn() -> [Question; 4] {
        let mut asked = ["a", "b", "c", "d"].map(|title| sample_question(title, QuestionStatus::Pending));
        asked.sort_by_key(|q| q.id);
        asked
    }

    fn pages(items: &[&Question], next: bool, after: Option<&str>) -> Pages<Question> {
        let page =
            Page { items: items.iter().map(|q| (*q).clone()).collect(), next_cursor: next.then(|| "c.x".into()) };
        Pages::new(page, after)
    }

    #[test]
    fn a_live_question_joins_only_the_part_of_the_list_that_is_loaded() {
        // Signals live in an owner's arena (the server's builds keep one per request).
        Owner::new().with(a_live_question_joins_only_what_is_loaded);
    }

    fn a_live_question_joins_only_what_is_loaded() {
        let [a, b, c, d] = asked_in_turn();
        let newest_first = InboxFilter::from_query(|_| None);

        // The top page, more to come: a newer question belongs on it, an older one on a page not loaded yet.
        let admits = |pages: Pages<Question>, question: &Question| {
            pages.loaded.with_untracked(|loaded| pages.admits(loaded, &newest_first, question))
        };
        let top = pages(&[&c, &b], true, None);
        assert!(admits(top, &d));
        assert!(!admits(top, &a));
        // The whole list: everything belongs.
        let whole = pages(&[&c, &b], false, None);
        assert!(admits(whole, &a) && admits(whole, &d));
        // A page past the top (`?after=`), the last: a newer question belongs on a page before it.
        let later = pages(&[&b], false, Some("c.x"));
        assert!(!admits(later, &d));
        assert!(admits(later, &a));
    }

    #[test]
    fn the_list_is_in_the_store_order_so_each_page_follows_the_one_before() {
        let [a, b, c, mut d] = asked_in_turn();
        d.timeout_at = Some(chrono::Utc::now());
        let by_deadline = InboxFilter::from_query(|name| (name == "sort").then(|| "deadline".to_owned()));
        let mut list = vec![c.clone(), a.clone(), d.clone(), b.clone()];
        by_deadline.sort(&mut list);
        // Soonest deadline first, then those without one, oldest first (as the store pages them).
        assert_eq!(list.iter().map(|q| q.title.as_str()).collect::<Vec<_>>(), ["d", "a", "b", "c"]);
    }
}
