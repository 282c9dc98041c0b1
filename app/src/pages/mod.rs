//! The pages of the UI, one module each.

mod approvals;
mod audit;
mod inbox;
mod not_found;
mod question;
mod runs;
mod settings;
mod signin;

pub use approvals::ApprovalsPage;
pub use audit::AuditPage;
pub use inbox::InboxPage;
pub use not_found::NotFound;
pub use question::QuestionPage;
pub use runs::{RunPage, RunsPage};
pub use settings::SettingsPage;
pub use signin::SignInPage;
