//! The server's integration tests, one binary: each module is a part of the product driven through its doors (the
//! API, the CLI, MCP, the channels) against real SQLite and PostgreSQL databases. One binary links the server
//! once, where a binary per file linked it once each.

#[macro_use]
mod common;
mod ag_ui;
mod architecture;
mod audit;
mod authz;
mod channels;
mod cli;
mod delegation;
mod durability;
mod edges;
mod egress;
mod escalation;
mod files;
mod foundation;
mod gateway;
mod grants;
mod hands;
mod isolation;
mod lifecycle;
mod limits;
mod mcp;
mod notifications;
mod openapi;
mod outbox;
mod people;
mod questions;
mod rules;
mod runs;
mod sso;
mod webhooks;
