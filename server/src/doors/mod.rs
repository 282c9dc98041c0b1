//! The doors: how agents, people and other systems reach Holdpoint. Each turns a request into a call of a use case
//! (`holdpoint-core`) and its result into a response, and decides nothing a use case decides.

pub mod auth;
pub mod gateway;
pub mod http;
pub mod mcp;
pub mod slack_interactions;
pub mod web;
