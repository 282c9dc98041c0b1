//! Holdpoint's server: the doors (REST, SSE, MCP, the gateway, the web UI's server side, the CLI), the workers and
//! the wiring, over the use cases of `holdpoint-core` and the store of `holdpoint-store`.
//!
//! A guided tour: [`cli`] parses the command line and starts [`server::run`], which opens the [`store`], starts the
//! [`events`] hub and the [`workers`], and serves [`doors::http::router`]. Requests are authenticated by
//! [`doors::auth`], fail through [`error`], and reach the domain logic in [`questions`] and [`runs`]; agent runs
//! execute in [`runtime`]. Questions reach people outside Holdpoint's pages (email, Slack, web push) through the
//! [`channels`].

pub use holdpoint_channels as channels;
pub use holdpoint_channels::{causes, egress};
pub use holdpoint_core::{
    actions, audit, credentials, error, escalation, events, files, grants, metrics, notifications, people, questions,
    rules, runs, runtime, sso, validation, visibility, webhooks, worker_api,
};
pub use holdpoint_store as store;

pub mod cli;
pub mod config;
pub mod config_file;
pub mod demo;
pub mod doors;
pub mod server;
pub mod state;
pub mod workers;
