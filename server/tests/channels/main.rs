//! The channels against real or independent counterparts: email to a real SMTP server process, Slack's Web API
//! calls to a local stand-in that checks them against Slack's documented shapes and Block Kit's limits.

mod email;
mod python;
mod slack;
