//! The channels against real or independent counterparts: email to a real SMTP server process, Slack's Web API
//! calls to a local stand-in that checks them against Slack's documented shapes and Block Kit's limits, and web
//! pushes decrypted and verified by an independent implementation of RFC 8291 and RFC 8292.

mod email;
mod push_service;
mod python;
mod slack;
mod slack_standin;
mod smtp;
mod web_push;
