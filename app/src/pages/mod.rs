//! The pages of the UI, one module each.

mod inbox;
mod not_found;
mod question;
mod signin;

pub use inbox::InboxPage;
pub use not_found::NotFound;
pub use question::QuestionPage;
pub use signin::SignInPage;
