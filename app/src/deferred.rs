//! What a page needs only once it runs: the event stream that keeps it live, the live modal it feeds, the other
//! parts that answer a question with the script (the question under the inbox's cursor in the split view, a run's
//! waiting questions, the inbox's keys and answers from its rows), and the settings' absence forms, invitations and
//! grants. They are one wasm module, cut out of the pages' first load and fetched as soon as a page is hydrated.
//!
//! Only the browser renders the parts: the modal and the split view open on events and clicks, and a run page
//! without the script links each waiting question to its page, whose plain form answers it. Until the module is in
//! (a few milliseconds after hydration on a fast link) a part renders nothing, and it appears as the module arrives.
//! The event stream starts from the position the page was rendered at, so nothing that happens meanwhile is missed.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use leptos::prelude::*;

use crate::types::Question;

/// Whether the deferred module has arrived, for the whole page.
#[derive(Clone, Copy)]
struct ModuleLoaded(RwSignal<bool>);

/// Starts fetching the module once the page is hydrated (not on the sign-in page, which neither listens nor
/// answers). Called once, by the root component.
pub fn provide() {
    let loaded = RwSignal::new(false);
    #[cfg(feature = "hydrate")]
    Effect::new(move |started: Option<bool>| {
        if started == Some(true) {
            return true;
        }
        if !crate::live::hydrated() || window().location().pathname().is_ok_and(|path| path == "/signin") {
            return false;
        }
        leptos::task::spawn_local(async move {
            __preload_deferred().await;
            loaded.set(true);
        });
        true
    });
    provide_context(ModuleLoaded(loaded));
}

/// The page's flag, read by [`show`]; taken when a component is created (contexts are found from there).
pub fn module_loaded() -> Signal<bool> {
    use_context::<ModuleLoaded>().map(|loaded| loaded.0.into()).unwrap_or_else(|| Signal::stored(false))
}

/// One of the parts, with what it shows and whom it tells.
pub enum Part {
    /// The live modal, over every page.
    LiveModal,
    /// The inbox's split view: the question under the cursor in full, with its answer form.
    InboxPane { inbox: crate::pages::Inbox, updates: ReadSignal<Vec<Question>> },
    /// A run page's answer form for one of the run's waiting questions.
    RunAnswer { question: Box<Question>, answered: Callback<Question> },
    /// The invitations of the signed-in person's account to other workspaces, with their answers, on `/settings`.
    Invitations,
    /// The workspace's grants, each with its revoke button, on `/settings/workspace`.
    Grants,
    /// The form of someone's absence on the settings pages.
    Absence {
        absentee: crate::pages::Absentee,
        members: Vec<crate::types::Member>,
        message: RwSignal<Option<Result<String, String>>>,
        reload: Callback<()>,
    },
}

/// `part`, once the module is in; nothing before. Tracks the flag, so a reactive closure that calls it renders again
/// when the module arrives.
pub fn show(loaded: Signal<bool>, part: Part) -> Option<AnyView> {
    if !loaded.get() {
        return None;
    }
    ready(deferred(Request::Show(part))).flatten()
}

/// Opens the page's event stream into `feeds`, once the module is in (fetching it if need be).
#[cfg(feature = "hydrate")]
pub fn listen(feeds: crate::live::Feeds) {
    leptos::task::spawn_local(async move {
        deferred(Request::Listen(feeds)).await;
    });
}

/// Sends answers given from the inbox's list, once the module is in (fetching it if need be).
pub fn answer_rows(inbox: crate::pages::Inbox, answers: Vec<(uuid::Uuid, serde_json::Value)>) {
    leptos::task::spawn_local(async move {
        deferred(Request::AnswerRows { inbox, answers }).await;
    });
}

/// Listens for the inbox's keys, under the current owner (so the listener goes with it). Call once the module is in.
pub fn install_inbox_keys(inbox: crate::pages::Inbox) {
    let _ = ready(deferred(Request::InboxKeys(inbox)));
}

/// What the module is asked to do.
enum Request {
    AnswerRows {
        inbox: crate::pages::Inbox,
        answers: Vec<(uuid::Uuid, serde_json::Value)>,
    },
    InboxKeys(crate::pages::Inbox),
    #[cfg(feature = "hydrate")]
    Listen(crate::live::Feeds),
    Show(Part),
}

/// The one entry point into the module. `#[lazy]`: the site build cuts it, and the code only it reaches, out of the
/// main module.
#[lazy]
fn deferred(request: Request) -> Option<AnyView> {
    match request {
        #[cfg(feature = "hydrate")]
        Request::Listen(feeds) => {
            crate::live::subscribe(feeds);
            None
        }
        Request::Show(Part::LiveModal) => Some(view! { <crate::modal::LiveModal/> }.into_any()),
        Request::AnswerRows { inbox, answers } => {
            crate::pages::send_row_answers(inbox, answers);
            None
        }
        Request::InboxKeys(inbox) => {
            crate::pages::install_inbox_keys(inbox);
            None
        }
        Request::Show(Part::InboxPane { inbox, updates }) => Some(crate::pages::inbox_pane(inbox, updates)),
        Request::Show(Part::Absence { absentee, members, message, reload }) => {
            Some(crate::pages::absence_form(absentee, members, message, reload))
        }
        Request::Show(Part::Invitations) => Some(crate::pages::invitations()),
        Request::Show(Part::Grants) => Some(crate::pages::grants()),
        Request::Show(Part::RunAnswer { question, answered }) => {
            let question = *question;
            Some(view! { <crate::answer::AnswerWidget question prefix="inline" on_answered=answered/> }.into_any())
        }
    }
}

/// The value of a lazy function whose module is loaded: its future is then ready at the first poll, so the part
/// renders in the same turn as the change that shows it, under the same reactive owner.
fn ready<T>(future: impl Future<Output = T>) -> Option<T> {
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => Some(value),
        Poll::Pending => None,
    }
}
