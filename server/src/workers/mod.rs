//! The workers the server runs beside its doors: each wakes on the event hub or a timer, claims its work from the
//! store, and hands it to a use case or a channel.

pub mod deadlines;
pub mod outbox;
pub mod webhook_sender;
