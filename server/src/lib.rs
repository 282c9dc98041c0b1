//! Holdpoint's server: the REST API, the SSE stream, the web UI's server side, storage and the CLI.
//!
//! A guided tour: [`cli`] parses the command line and starts [`server::run`], which opens the [`store`], starts the
//! [`events`] hub and serves [`http::router`]. Requests are authenticated by [`auth`], fail through [`error`], and
//! reach the domain logic in [`questions`] and [`runs`]; agent runs execute in [`runtime`]. Questions reach people
//! outside Holdpoint's pages (email, Slack, web push) through the [`channels`].

pub use holdpoint_core::{
    actions, audit, credentials, error, escalation, events, files, grants, metrics, notifications, people, questions,
    rules, runs, runtime, sso, validation, visibility, webhooks, worker_api,
};
pub mod act;
pub mod answer_drafts;
pub mod auth;
pub mod backup;
pub use holdpoint_channels as channels;
pub use holdpoint_channels::causes;
pub mod cli;
pub mod client;
pub mod config;
pub mod config_file;
pub mod deadlines;
pub mod demo;
pub use holdpoint_channels::egress;
pub mod gateway;
pub mod headless;
pub mod http;
pub mod mcp;
pub mod outbox;
pub mod responder;
pub mod server;
pub mod site;
pub mod slack_door;
pub mod state;
pub use holdpoint_store as store;
pub mod verify_email;
pub mod web;
pub mod webhook_sender;
