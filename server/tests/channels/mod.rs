//! The channels against real or independent counterparts: email to a real SMTP server process, Slack's Web API
//! calls to a local stand-in that checks them against Slack's documented shapes and Block Kit's limits, and web
//! pushes decrypted and verified by an independent implementation of RFC 8291 and RFC 8292; and an S3-compatible
//! server (moto's) for the file storage.

pub mod email;
pub mod mailing;
pub mod mcp_upstream;
pub mod push_service;
pub mod python;
pub mod receiver;
pub mod s3;
pub mod slack;
pub mod slack_standin;
pub mod smtp;
pub mod web_push;
