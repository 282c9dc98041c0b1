//! The inbox's keys, and the list of them `?` shows.

use leptos::prelude::*;

use super::Inbox;

/// The keys of the inbox, listed for `?`.
pub(super) const SHORTCUTS: [(&str, &str); 9] = [
    ("j / ↓", "next question"),
    ("k / ↑", "previous question"),
    ("x", "select or unselect the question"),
    ("a", "approve, or answer yes (every selected question, if any are selected)"),
    ("r", "reject, or answer no (every selected question, if any are selected)"),
    ("1 2 3", "pick that choice"),
    ("o / Enter", "open the question's page"),
    ("Esc", "clear the selection, close this list"),
    ("?", "show or hide this list"),
];

#[component]
pub(super) fn Shortcuts(open: RwSignal<bool>) -> impl IntoView {
    let close = NodeRef::<leptos::html::Button>::new();
    // The dialog takes the focus, so Escape and Tab act on it.
    Effect::new(move |_| {
        if let Some(button) = close.get() {
            let _ = button.focus();
        }
    });
    view! {
        <div class="modal-backdrop" on:click=move |_| open.set(false)>
            <div class="modal shortcuts" role="dialog" aria-modal="true" aria-labelledby="shortcuts-title" data-testid="shortcuts"
                on:click=|ev| ev.stop_propagation()>
                <header class="modal-head"><h2 id="shortcuts-title">"Keyboard shortcuts"</h2></header>
                <div class="modal-body">
                    <dl class="shortcut-list">
                        {SHORTCUTS.iter().map(|(keys, what)| view! { <dt><kbd>{*keys}</kbd></dt><dd>{*what}</dd> }).collect_view()}
                    </dl>
                </div>
                <footer class="modal-foot">
                    <span></span>
                    <button type="button" node_ref=close data-testid="shortcuts-close" on:click=move |_| open.set(false)>"Close"</button>
                </footer>
            </div>
        </div>
    }
}

/// Listens for the inbox's keys while the page is shown (part of the deferred module, see [`crate::deferred`]). Keys
/// typed into a field, or while the live modal is open, are left alone.
#[cfg(feature = "hydrate")]
pub(crate) fn install_inbox_keys(inbox: Inbox) {
    use wasm_bindgen::JsCast;

    use super::answering::RowAction;

    let handle = window_event_listener(leptos::ev::keydown, move |ev| {
        if ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
            return;
        }
        let target = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok());
        // A row's checkbox keeps the keys working (it has none of its own but Space); any other field takes them.
        let in_field = target.as_ref().is_some_and(|el| match el.tag_name().as_str() {
            "TEXTAREA" | "SELECT" => true,
            "INPUT" => el.get_attribute("type").as_deref() != Some("checkbox"),
            _ => false,
        });
        let modal_open = document().query_selector("[data-testid=live-modal]").ok().flatten().is_some();
        if in_field || modal_open {
            return;
        }
        let key = ev.key();
        if inbox.shortcuts_open.get_untracked() {
            if matches!(key.as_str(), "?" | "Escape") {
                ev.prevent_default();
                inbox.shortcuts_open.set(false);
            }
            return;
        }
        let ids: Vec<uuid::Uuid> = inbox.shown.with_untracked(|s| s.iter().map(|q| q.id).collect());
        let at = inbox.cursor.get_untracked().and_then(|id| ids.iter().position(|i| *i == id));
        let current = at.map(|i| ids[i]);
        let any_marked = inbox.marked.with_untracked(|m| !m.is_empty());
        let next = match key.as_str() {
            "j" | "ArrowDown" if !ids.is_empty() => Some(at.map_or(0, |i| (i + 1).min(ids.len() - 1))),
            "k" | "ArrowUp" if !ids.is_empty() => Some(at.map_or(0, |i| i.saturating_sub(1))),
            "?" => {
                inbox.shortcuts_open.set(true);
                None
            }
            "Escape" => {
                inbox.marked.set(Vec::new());
                inbox.confirming.set(None);
                None
            }
            // Enter on a link or a button of the page does what it does; on the page itself, it opens.
            "Enter" if target.as_ref().is_some_and(|el| matches!(el.tag_name().as_str(), "A" | "BUTTON")) => {
                return;
            }
            "o" | "Enter" => {
                if let Some(id) = current {
                    ev.prevent_default();
                    let _ = window().location().set_href(&format!("/questions/{id}"));
                }
                return;
            }
            "x" => {
                if let Some(id) = current {
                    inbox.toggle_mark(id);
                }
                None
            }
            "a" | "r" if any_marked => {
                inbox.act_on_marked(key == "a", false);
                None
            }
            "a" | "r" => {
                if let Some(id) = current {
                    inbox.act(id, if key == "a" { RowAction::Affirm } else { RowAction::Refuse });
                }
                None
            }
            "1" | "2" | "3" => {
                if let Some(id) = current {
                    let index = key.parse::<usize>().unwrap_or(1) - 1;
                    inbox.act(id, RowAction::Choice(index));
                }
                None
            }
            _ => return,
        };
        ev.prevent_default();
        if let Some(index) = next {
            inbox.cursor.set(Some(ids[index]));
            // The focus follows, so the browser scrolls the row into view and a screen reader reads it.
            let selector = format!("[data-question-id=\"{}\"] .question-title", ids[index]);
            if let Ok(Some(link)) = document().query_selector(&selector)
                && let Ok(link) = link.dyn_into::<web_sys::HtmlElement>()
            {
                let _ = link.focus();
            }
        }
    });
    on_cleanup(move || handle.remove());
}

/// Keys are the browser's: on the server there are none.
#[cfg(not(feature = "hydrate"))]
pub(crate) fn install_inbox_keys(_: Inbox) {}
