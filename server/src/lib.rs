//! Holdpoint's server: the REST API, the SSE stream, the web UI's server side, storage and the CLI.
//!
//! A guided tour: [`cli`] parses the command line and starts [`server::run`], which opens the [`store`], starts the
//! [`events`] hub and serves [`http::router`]. Requests are authenticated by [`auth`], fail through [`error`], and
//! reach the domain logic in [`questions`] and [`runs`]; agent runs execute in [`runtime`]. Questions reach people
//! outside Holdpoint's pages (email, Slack, web push) through the [`channels`].

pub mod act;
pub mod actions;
pub mod answer_drafts;
pub mod audit;
pub mod auth;
pub mod backup;
pub use holdpoint_channels as channels;
pub use holdpoint_channels::causes;
pub mod cli;
pub mod client;
pub mod config;
pub mod config_file;
pub mod credentials;
pub mod deadlines;
pub mod demo;
pub use holdpoint_channels::egress;
pub mod error;
pub mod escalation;
pub mod events;
pub mod files;
pub mod gateway;
pub mod grants;
pub mod headless;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod notifications;
pub mod outbox;
pub mod people;
pub mod questions;
pub mod responder;
pub mod rules;
pub mod runs;
pub mod runtime;
pub mod server;
pub mod site;
pub mod slack_door;
pub mod sso;
pub mod state;
pub mod store;
pub mod validation;
pub mod verify_email;
pub mod visibility;
pub mod web;
pub mod webhook_sender;
pub mod webhooks;
pub mod worker_api;
