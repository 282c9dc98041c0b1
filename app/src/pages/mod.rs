//! The pages of the UI, one module each.

mod approvals;
mod audit;
mod gateway;
mod inbox;
mod not_found;
mod notifications;
#[cfg(feature = "ssr")]
mod plain_answer_form;
mod question;
mod rules;
mod runs;
mod settings;
mod signin;

pub use approvals::ApprovalsPage;
pub use audit::AuditPage;
pub use gateway::GatewaySettingsPage;
pub use inbox::InboxPage;
pub(crate) use inbox::{Inbox, inbox_pane, install_inbox_keys, send_row_answers};
pub use not_found::NotFound;
pub use notifications::NotificationsPage;
#[cfg(feature = "ssr")]
pub(crate) use plain_answer_form::plain_answer_form;
pub use question::QuestionPage;
pub use rules::RulesSettingsPage;
pub use runs::{RunPage, RunsPage};
pub(crate) use settings::{Absentee, absence_form, grants, invitations};
pub use settings::{SettingsPage, WorkspaceSettingsPage};
pub use signin::SignInPage;

use leptos::prelude::*;
use leptos_router::{LazyRoute, lazy_route};

/// A page whose code the browser loads when it is first shown: the site build cuts each `#[lazy_route]` view out of
/// the main wasm module into a module of its own, and the server names the modules a page needs in its `<head>`.
/// The main module then holds only the shell (router, top bar, live modal), which every page needs.
macro_rules! lazy_page {
    ($($route:ident => $page:ident,)*) => {$(
        #[doc = concat!("The route of [`", stringify!($page), "`], loaded with its own wasm module.")]
        pub struct $route;

        #[lazy_route]
        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(_this: Self) -> AnyView {
                view! { <$page/> }.into_any()
            }
        }
    )*};
}

lazy_page! {
    InboxRoute => InboxPage,
    QuestionRoute => QuestionPage,
    ApprovalsRoute => ApprovalsPage,
    RunsRoute => RunsPage,
    RunRoute => RunPage,
    SettingsRoute => SettingsPage,
    WorkspaceSettingsRoute => WorkspaceSettingsPage,
    RulesSettingsRoute => RulesSettingsPage,
    GatewaySettingsRoute => GatewaySettingsPage,
    AuditRoute => AuditPage,
    NotificationsRoute => NotificationsPage,
    SignInRoute => SignInPage,
}
