//! The channels against real or independent counterparts: email to a real SMTP server process.

mod email;
mod python;
