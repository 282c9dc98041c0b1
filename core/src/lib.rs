//! Holdpoint's use cases: what happens when an agent asks, a person answers, a run steps, a member joins, a rule
//! decides. Each use case decides a whole transition — the row change, its event, its audit entry, its deliveries —
//! and hands it to the [`store`], which persists it atomically and knows no business rule. The doors (REST, SSE,
//! MCP, the gateway, the web UI, the CLI; the `holdpoint-server` crate) call these and nothing below them.
//!
//! This crate depends on the store, the channels and the wire types, never on a door: the compiler keeps data
//! flowing one way. Inside it, modules import each other without going round in a circle (the architecture test).

pub mod actions;
pub mod audit;
pub mod credentials;
pub mod error;
pub mod escalation;
pub mod events;
pub mod files;
pub mod grants;
pub mod metrics;
pub mod notifications;
pub mod people;
pub mod questions;
pub mod rules;
pub mod runs;
pub mod runtime;
pub mod sso;
pub mod validation;
pub mod visibility;
pub mod webhooks;
pub mod worker_api;

pub use holdpoint_channels as channels;
pub use holdpoint_channels::{causes, egress};
pub use holdpoint_store as store;
