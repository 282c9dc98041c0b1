//! The state every handler shares.

use std::ops::Deref;
use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;

use crate::config::ServeConfig;
use crate::events::EventHub;
use crate::store::Store;

/// Cheap to clone: one `Arc` around [`App`].
#[derive(Clone)]
pub struct AppState(pub Arc<App>);

/// What the server is made of.
pub struct App {
    /// The settings it was started with.
    pub config: ServeConfig,
    /// Where everything is kept.
    pub store: Arc<dyn Store>,
    /// Follows the event log and fans events out to SSE subscribers.
    pub hub: EventHub,
    /// The keys action links and web pushes are signed with, the same on every instance (see
    /// [`crate::notifications::channel_keys`]).
    pub channel_keys: crate::channels::ChannelKeys,
    /// Slack's Web API and the secret Slack signs its interactions with, when Slack is configured.
    pub slack: Option<(crate::channels::slack::SlackClient, crate::credentials::Secret)>,
    /// The channels outside Holdpoint's pages this server sends on (from its configuration).
    pub sends_on: crate::notifications::SendsOn,
    /// Single sign-on through an OpenID provider, when one is configured.
    pub sso: Option<Arc<crate::sso::Sso>>,
    /// Raised when deliveries were queued to webhooks by hand (a test message, a redelivery): the worker sends them.
    pub webhooks_queued: Arc<tokio::sync::Notify>,
    /// What `/metrics` exports.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Executes agent runs; also what the API uses to validate agents and start runs.
    pub runtime: Arc<crate::runtime::Runtime>,
    /// Cancelled when the server starts shutting down: long-lived responses (SSE, long-polls, MCP streams) end, so
    /// the graceful shutdown does not wait for clients that never hang up.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Where the built site is and what its files are called.
    pub leptos_options: LeptosOptions,
    /// Where the built site's files are served from: built into the binary, or a directory.
    pub site: crate::doors::web::site::Site,
    /// Each workspace's approval rules, compiled once per saved version.
    pub rules_cache: crate::rules::RulesCache,
    /// The MCP gateway's upstreams started as local processes, from the configuration file.
    pub configured_upstreams: Arc<crate::doors::gateway::stdio::Configured>,
    /// Where uploaded files' bytes are kept.
    pub files: crate::files::FileStorage,
    /// The inputs of answers the question page's plain form sent and the server refused, shown again.
    pub answer_drafts: crate::doors::web::answer_drafts::AnswerDrafts,
    /// The questions the MCP gateway's calls wait on, cancelled when the server stops.
    pub gateway_waits: Arc<crate::doors::gateway::waits::Waits>,
}

impl App {
    /// How this server's doors ask questions: its store, its counters, its hub and the configured timeouts.
    /// The Slack client, where this server sends on Slack.
    pub fn slack_client(&self) -> Option<&crate::channels::slack::SlackClient> {
        self.slack.as_ref().map(|(client, _)| client)
    }

    pub fn asking(&self) -> crate::questions::Asking<'_> {
        crate::questions::Asking {
            store: self.store.as_ref(),
            metrics: &self.metrics,
            hub: Some(&self.hub),
            bounds: self.config.timeout_bounds(),
            sends_on: &self.sends_on,
            callbacks: self.config.channels.webhook_urls(),
            max_upload_bytes: self.config.files.max_upload_bytes,
        }
    }
}

impl App {
    /// How this server's doors answer questions.
    pub fn answering(&self) -> crate::questions::Answering<'_> {
        crate::questions::Answering {
            store: self.store.as_ref(),
            metrics: &self.metrics,
            hub: &self.hub,
            separation_of_duties: self.config.separation_of_duties,
        }
    }

    /// How this server takes uploads.
    pub fn uploading(&self) -> crate::files::Uploading<'_> {
        crate::files::Uploading {
            store: self.store.as_ref(),
            storage: &self.files,
            max_bytes: self.config.files.max_upload_bytes,
        }
    }
}

impl App {
    /// The workspaces' approval rules.
    pub fn rules(&self) -> crate::rules::Rules<'_> {
        crate::rules::Rules { store: self.store.as_ref(), metrics: &self.metrics, cache: &self.rules_cache }
    }
}

impl Deref for AppState {
    type Target = App;
    fn deref(&self) -> &App {
        &self.0
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}
