//! Configuration of `holdpoint serve`: every setting is a flag and an environment variable (see `.env.example`).
//! The server's wiring ([`crate::server`], [`crate::state`]) reads the values here and hands each use case those it
//! needs; a use case with settings of its own (the runtime, single sign-on) defines them, and [`ServeConfig`] gathers
//! them, so no use case reads the configuration itself.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::channels::email::{EmailSender, Mailbox, SmtpUrl};
use crate::channels::slack::SlackClient;
use crate::channels::web_push::VapidKey;
use crate::credentials::Secret;
use crate::notifications::{SendsOn, SlackTarget};
use crate::questions::TimeoutBounds;
use crate::questions::claims::{DEFAULT_CLAIM_TTL_SECONDS, MIN_CLAIM_TTL_SECONDS};
use crate::runtime::settings::RuntimeConfig;
use crate::sso::SsoConfig;
use crate::store::redacted_url;

/// Where the database is: shared by `serve` and the commands that open the database directly.
#[derive(Clone, clap::Args)]
pub struct DatabaseLocation {
    /// Directory for the embedded SQLite database (`holdpoint.db`).
    #[arg(long, env = "HOLDPOINT_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Database URL, `sqlite:...` or `postgres://...`; overrides the data directory's SQLite file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

/// The URL's password, if it has one, is redacted: a database URL often carries one.
impl std::fmt::Debug for DatabaseLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseLocation")
            .field("data_dir", &self.data_dir)
            .field("database_url", &self.database_url.as_deref().map(redacted_url))
            .finish()
    }
}

impl DatabaseLocation {
    /// The database to open: `DATABASE_URL` if set, else `holdpoint.db` in the data directory.
    pub fn url(&self) -> String {
        match self.explicit_url() {
            Some(url) => url.to_owned(),
            None => format!("sqlite://{}", self.data_dir.join("holdpoint.db").display()),
        }
    }

    /// `DATABASE_URL` when it is set to something: an empty variable means "not set", as shells often leave it.
    pub fn explicit_url(&self) -> Option<&str> {
        self.database_url.as_deref().map(str::trim).filter(|url| !url.is_empty())
    }

    /// The embedded SQLite database's file, or `None` for PostgreSQL (or an in-memory database).
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        let url = self.url();
        let options = <sqlx::sqlite::SqliteConnectOptions as std::str::FromStr>::from_str(&url).ok()?;
        let file = options.get_filename();
        (url.starts_with("sqlite:") && file != std::path::Path::new(":memory:")).then(|| file.to_owned())
    }

    /// The URL to open, after creating the data directory when the embedded SQLite file lives there. A directory it
    /// creates is its owner's alone (0700): the database holds the webhooks' and channels' secrets, and its files
    /// would otherwise be as readable as the umask leaves them. One that exists is left as it is (the Debian
    /// package's is `holdpoint`'s, 0750).
    pub fn prepare(&self) -> Result<String, std::io::Error> {
        if self.explicit_url().is_none() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(&self.data_dir).map_err(|err| {
                std::io::Error::new(
                    err.kind(),
                    format!("cannot create the data directory {}: {err}", self.data_dir.display()),
                )
            })?;
        }
        Ok(self.url())
    }
}

/// Settings of the server process.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeConfig {
    /// Address to listen on.
    #[arg(long, env = "HOLDPOINT_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,

    #[command(flatten)]
    pub database: DatabaseLocation,

    /// A token created at start as the `default` workspace's admin token (idempotent across restarts).
    #[arg(long, env = "HOLDPOINT_BOOTSTRAP_TOKEN", hide_env_values = true)]
    pub bootstrap_token: Option<Secret>,

    /// The shortest timeout a question may have, in seconds (lower it for tests).
    #[arg(long, env = "HOLDPOINT_MIN_TIMEOUT_SECONDS", default_value_t = 300)]
    pub min_timeout_seconds: i64,

    /// The longest timeout a question may have, in seconds.
    #[arg(long, env = "HOLDPOINT_MAX_TIMEOUT_SECONDS", default_value_t = 86_400)]
    pub max_timeout_seconds: i64,

    /// The longest a claim of a question lasts, in seconds, and how long one lasts unless the claimer asks for
    /// less.
    #[arg(long, env = "HOLDPOINT_CLAIM_TTL_SECONDS", default_value_t = DEFAULT_CLAIM_TTL_SECONDS,
        value_parser = clap::value_parser!(i64).range(MIN_CLAIM_TTL_SECONDS..))]
    pub claim_ttl_seconds: i64,

    /// A directory of the built site (`pkg/holdpoint.js`, `.wasm`, `.css`), served instead of the one built into
    /// the binary (`cargo xtask dist`); a binary without one finds it next to the executable or under
    /// `./target/site` when unset.
    #[arg(long, env = "HOLDPOINT_SITE_ROOT")]
    pub site_root: Option<PathBuf>,

    /// Mark cookies `Secure`; set this when Holdpoint is served over TLS (directly or behind a proxy).
    #[arg(long, env = "HOLDPOINT_SECURE_COOKIES", default_value_t = false)]
    pub secure_cookies: bool,

    /// Run the background workers (deadlines). Off only for tests that simulate a server that is down.
    #[arg(long, env = "HOLDPOINT_RUN_WORKERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub run_workers: bool,

    /// How many events an event-stream client may fall behind before it is told to reconnect (it then replays what
    /// it missed from the log), so one slow client never holds up the others.
    #[arg(long, env = "HOLDPOINT_SSE_BUFFER", default_value_t = 4096)]
    pub sse_buffer: usize,

    /// How many event streams one token or person may hold open on this instance at once (429 beyond): a browser
    /// tab holds one.
    #[arg(long, env = "HOLDPOINT_STREAMS_PER_CALLER", default_value_t = 32)]
    pub streams_per_caller: usize,

    /// How many MCP sessions one token or person may hold open on this instance at once (429 beyond); a session
    /// ends when its client closes it or after it has idled.
    #[arg(long, env = "HOLDPOINT_MCP_SESSIONS_PER_CALLER", default_value_t = 16)]
    pub mcp_sessions_per_caller: usize,

    /// How long an MCP session may go without a request before it ends, in seconds; never while one of its tool
    /// calls waits for a person.
    #[arg(long, env = "HOLDPOINT_MCP_SESSION_IDLE_SECONDS", default_value_t = 3600)]
    pub mcp_session_idle_seconds: u64,

    /// How often an MCP tool call waiting for a person sends a progress notification (to clients that asked for
    /// progress), in seconds: clients whose request timeout resets on progress keep waiting.
    #[arg(long, env = "HOLDPOINT_MCP_PROGRESS_SECONDS", default_value_t = 5)]
    pub mcp_progress_seconds: u64,

    /// Whether the MCP gateway's upstream servers may be at private, loopback, link-local and other special-purpose
    /// addresses (an MCP server inside your network, or on this machine); off, such URLs are refused when an
    /// upstream is registered (422) and never connected to.
    #[arg(long, env = "HOLDPOINT_UPSTREAM_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub upstream_allow_private: bool,

    /// How long an instance counts as running after it last said so in the database, in seconds (at least 3); it
    /// says so every third of it. The MCP gateway's calls waiting for a person are held by their instance: when one
    /// dies without stopping, another cancels the questions its calls waited on within about this long.
    #[arg(long, env = "HOLDPOINT_GATEWAY_HOLD_SECONDS", default_value_t = 30)]
    pub gateway_hold_seconds: u32,

    /// The MCP gateway's upstreams started as local processes: the configuration file's `[[gateway.upstreams]]`
    /// only (a list of tables has no flag or variable; and whoever may set one may run programs on the server).
    #[arg(skip)]
    pub gateway_upstreams: Vec<crate::doors::gateway::stdio::StdioUpstream>,

    /// How long a browser session lasts, in hours.
    #[arg(long, env = "HOLDPOINT_SESSION_HOURS", default_value_t = 24 * 7)]
    pub session_hours: i64,

    /// How long an API token seen valid is trusted without reading the database again, in seconds (0: read it on
    /// every request). Revocations through Holdpoint apply at once whatever this says; it bounds how long a change
    /// made to the database behind Holdpoint's back takes to apply.
    #[arg(long, env = "HOLDPOINT_TOKEN_CACHE_SECONDS", default_value_t = 5)]
    pub token_cache_seconds: u64,

    /// The most connections this instance opens to PostgreSQL, plus one for event notifications (default: four per
    /// CPU core, at least eight). Keep the sum over every instance below the server's `max_connections`. Ignored
    /// on SQLite.
    #[arg(long, env = "HOLDPOINT_DATABASE_CONNECTIONS", default_value_t = crate::store::default_postgres_connections(),
        value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub database_connections: u32,

    /// Separation of duties: whoever asked for an approval (the token or person that created the question) may not
    /// approve it themselves. Turn off for a one-person setup where the same credential asks and approves.
    #[arg(long, env = "HOLDPOINT_SEPARATION_OF_DUTIES", default_value_t = true, action = clap::ArgAction::Set)]
    pub separation_of_duties: bool,

    /// The address people reach Holdpoint at (e.g. `https://holdpoint.example.com`), for the links it prints;
    /// defaults to the listening address.
    #[arg(long, env = "HOLDPOINT_PUBLIC_URL")]
    pub public_url: Option<String>,

    #[command(flatten)]
    pub runtime: RuntimeConfig,

    #[command(flatten)]
    pub limits: LimitsConfig,

    #[command(flatten)]
    pub connections: ConnectionConfig,

    #[command(flatten)]
    pub channels: ChannelsConfig,

    #[command(flatten)]
    pub sso: SsoConfig,

    #[command(flatten)]
    pub files: crate::files::FilesConfig,
}

/// The channels questions reach people on besides Holdpoint's own pages. Each is off until its settings
/// are given.
#[derive(Debug, Clone, clap::Args)]
pub struct ChannelsConfig {
    /// The SMTP server email is sent through: `smtp://user:pass@host:587` (STARTTLS required), `smtps://...:465`
    /// (TLS from the start); `?tls=opportunistic` or `?tls=none` (in the clear: a relay on this host only).
    #[arg(long, env = "HOLDPOINT_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<SmtpUrl>,

    /// The sender of Holdpoint's email: `holdpoint@example.com` or `Holdpoint <holdpoint@example.com>`.
    #[arg(long, env = "HOLDPOINT_EMAIL_FROM")]
    pub email_from: Option<Mailbox>,

    /// The Slack app's bot token (`xoxb-...`), for posting and updating messages and opening modals.
    #[arg(long, env = "HOLDPOINT_SLACK_BOT_TOKEN", hide_env_values = true)]
    pub slack_bot_token: Option<Secret>,

    /// The Slack app's signing secret, which Slack signs its interaction requests with.
    #[arg(long, env = "HOLDPOINT_SLACK_SIGNING_SECRET", hide_env_values = true)]
    pub slack_signing_secret: Option<Secret>,

    /// The base URL of Slack's Web API (another only for a stand-in of it).
    #[arg(long, env = "HOLDPOINT_SLACK_API_URL", default_value = crate::channels::slack::DEFAULT_API_URL)]
    pub slack_api_url: String,

    /// Whether the host of `HOLDPOINT_SLACK_API_URL` may resolve into private, loopback, link-local and other
    /// special-purpose address ranges (a stand-in inside your network); an address written in the URL itself is
    /// allowed whatever its range.
    #[arg(long, env = "HOLDPOINT_SLACK_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub slack_allow_private: bool,

    /// A Slack channel id to post questions in; without it, each person gets a direct message from the app.
    #[arg(long, env = "HOLDPOINT_SLACK_CHANNEL")]
    pub slack_channel: Option<String>,

    /// The VAPID private key web pushes are signed with (a P-256 private key, 32 bytes in base64url); browsers
    /// subscribe with its public half, so it must stay the same across restarts and instances.
    #[arg(long, env = "HOLDPOINT_VAPID_PRIVATE_KEY", hide_env_values = true)]
    pub vapid_private_key: Option<VapidKey>,

    /// The contact push services may write to about this server's pushes (`mailto:` or `https:`); defaults to the
    /// sender of email, else to the public URL when it is `https`.
    #[arg(long, env = "HOLDPOINT_VAPID_SUBJECT")]
    pub vapid_subject: Option<String>,

    /// Whether a browser may subscribe with a push service reached over plain `http`: only for a push service on
    /// the machine itself (tests); browsers' own push services are all `https`.
    #[arg(long, env = "HOLDPOINT_PUSH_ALLOW_HTTP", default_value_t = false, hide = true)]
    pub push_allow_http: bool,

    /// Whether browsers' push endpoints may be at private, loopback, link-local and other special-purpose addresses
    /// (a push service inside your network); off, such endpoints are refused when subscribed and never sent to.
    #[arg(long, env = "HOLDPOINT_PUSH_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub push_allow_private: bool,

    /// Seconds before a failed delivery is tried again the first time; each next wait doubles, up to two hours.
    #[arg(long, env = "HOLDPOINT_DELIVERY_FIRST_RETRY_SECONDS", default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub delivery_first_retry_seconds: u32,

    /// Whether webhooks and questions' callback URLs may point into private, loopback and link-local address ranges
    /// (a receiver inside your own network); off, such URLs are refused.
    #[arg(long, env = "HOLDPOINT_WEBHOOK_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub webhook_allow_private: bool,
}

/// A channel's settings that cannot be used together.
#[derive(Debug, thiserror::Error)]
pub enum ChannelsConfigError {
    #[error(transparent)]
    Email(#[from] crate::channels::email::EmailConfigError),
    #[error("HOLDPOINT_SMTP_URL is set but HOLDPOINT_EMAIL_FROM is not: email needs a sender")]
    NoSender,
    #[error("HOLDPOINT_SLACK_BOT_TOKEN and HOLDPOINT_SLACK_SIGNING_SECRET go together: Slack needs both")]
    SlackHalfConfigured,
    #[error("Slack: {0}")]
    Slack(#[from] crate::channels::slack::SlackError),
}

impl ChannelsConfig {
    /// Every channel off, for tests and embedded use.
    pub fn defaults() -> Self {
        ChannelsConfig {
            smtp_url: None,
            email_from: None,
            slack_bot_token: None,
            slack_signing_secret: None,
            slack_api_url: crate::channels::slack::DEFAULT_API_URL.to_owned(),
            slack_allow_private: false,
            slack_channel: None,
            vapid_private_key: None,
            vapid_subject: None,
            push_allow_http: false,
            push_allow_private: false,
            delivery_first_retry_seconds: 10,
            webhook_allow_private: false,
        }
    }

    /// The email sender, when email is configured.
    pub fn email_sender(&self) -> Result<Option<EmailSender>, ChannelsConfigError> {
        let Some(url) = &self.smtp_url else { return Ok(None) };
        let from = self.email_from.clone().ok_or(ChannelsConfigError::NoSender)?;
        Ok(Some(EmailSender::new(url, from)?))
    }

    /// The Slack Web API client and the signing secret, when Slack is configured.
    pub fn slack(&self) -> Result<Option<(SlackClient, Secret)>, ChannelsConfigError> {
        match (&self.slack_bot_token, &self.slack_signing_secret) {
            (None, None) => Ok(None),
            (Some(token), Some(secret)) => {
                let client = SlackClient::new(&self.slack_api_url, token.expose(), self.slack_allow_private)?;
                Ok(Some((client, secret.clone())))
            }
            _ => Err(ChannelsConfigError::SlackHalfConfigured),
        }
    }

    /// Which push endpoints browsers may subscribe and pushes are sent to.
    pub fn push_endpoints(&self) -> crate::channels::web_push::PushEndpoints {
        crate::channels::web_push::PushEndpoints {
            allow_http: self.push_allow_http,
            allow_private: self.push_allow_private,
        }
    }

    /// Which URLs webhooks and callbacks may be sent to.
    pub fn webhook_urls(&self) -> crate::channels::webhooks::UrlPolicy {
        crate::channels::webhooks::UrlPolicy { allow_private: self.webhook_allow_private }
    }

    /// The contact named in VAPID's `sub`: the configured one, else the email sender, else the public URL when it is
    /// `https`.
    pub fn vapid_subject(&self, public_url: Option<&str>) -> Option<String> {
        self.vapid_subject
            .clone()
            .or_else(|| self.email_from.as_ref().map(|from| format!("mailto:{}", from.email)))
            .or_else(|| public_url.filter(|url| url.starts_with("https://")).map(str::to_owned))
    }
}

/// How long a connection may take to send a request and stay idle, and how many may be open at once.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionConfig {
    /// Seconds a client has to send a request's headers, from their first byte; a slower one is disconnected.
    #[arg(long, env = "HOLDPOINT_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_seconds: u64,

    /// Seconds a connection may stay open with no request in flight (before its first request, or between two)
    /// before it is closed. A request in flight (an event stream, a long-poll) is never cut.
    #[arg(long, env = "HOLDPOINT_IDLE_TIMEOUT_SECONDS", default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_seconds: u64,

    /// The most connections open at once; further ones wait in the listen queue until one closes. Event streams
    /// hold one each, so leave room for every browser tab and subscriber, and keep it below the process's limit
    /// of open files (`ulimit -n`).
    #[arg(long, env = "HOLDPOINT_MAX_CONNECTIONS", default_value_t = 10_000,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
}

impl ConnectionConfig {
    /// The defaults, for tests and embedded use.
    pub fn defaults() -> Self {
        ConnectionConfig { header_read_timeout_seconds: 10, idle_timeout_seconds: 60, max_connections: 10_000 }
    }
}

/// Rate limits and the client address they are keyed on. The counters live in this process's memory: each instance
/// behind a load balancer limits on its own (see docs/decisions.md, "Limits and headers").
#[derive(Debug, Clone, clap::Args)]
pub struct LimitsConfig {
    /// Creation requests (`POST` questions, runs, agents, answer-batch) one token may send at once before it is
    /// slowed to the sustained rate.
    #[arg(long, env = "HOLDPOINT_CREATE_RATE_BURST", default_value_t = 120)]
    pub create_rate_burst: u32,

    /// Creation requests per second one token may send, sustained.
    #[arg(long, env = "HOLDPOINT_CREATE_RATE_PER_SECOND", default_value_t = 20)]
    pub create_rate_per_second: u32,

    /// Creation requests one client address may send at once; larger than a token's, as several agents often share
    /// one address (a host, a NAT).
    #[arg(long, env = "HOLDPOINT_CREATE_IP_RATE_BURST", default_value_t = 600)]
    pub create_ip_rate_burst: u32,

    /// Creation requests per second one client address may send, sustained.
    #[arg(long, env = "HOLDPOINT_CREATE_IP_RATE_PER_SECOND", default_value_t = 100)]
    pub create_ip_rate_per_second: u32,

    /// Sign-in attempts (right or wrong) one client address, and one account name, may make per window.
    #[arg(long, env = "HOLDPOINT_SIGNIN_RATE_ATTEMPTS", default_value_t = 10)]
    pub signin_rate_attempts: u32,

    /// The sign-in window, in seconds: the attempts are given back evenly over it.
    #[arg(long, env = "HOLDPOINT_SIGNIN_RATE_WINDOW_SECONDS", default_value_t = 60)]
    pub signin_rate_window_seconds: u64,

    /// Failed bearer-token authentications one client address may make at once, given back over the window; beyond
    /// them its requests with a token are refused (429) until the window gives one back. Successful ones do not
    /// count.
    #[arg(long, env = "HOLDPOINT_AUTH_FAILURE_ATTEMPTS", default_value_t = 20)]
    pub auth_failure_attempts: u32,

    /// The window of failed authentications, in seconds.
    #[arg(long, env = "HOLDPOINT_AUTH_FAILURE_WINDOW_SECONDS", default_value_t = 60)]
    pub auth_failure_window_seconds: u64,

    /// Take the client address from `X-Forwarded-For` (the rightmost address that is not a trusted proxy) when the
    /// request comes from a trusted proxy. Only set this behind a proxy that appends to that header; otherwise
    /// clients could pick their own address and escape the per-address limits.
    #[arg(long, env = "HOLDPOINT_TRUST_PROXY_HEADERS", default_value_t = false)]
    pub trust_proxy_headers: bool,

    /// The proxies' addresses, comma-separated; when empty, only the direct peer is trusted as a proxy.
    #[arg(long, env = "HOLDPOINT_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

impl LimitsConfig {
    /// The defaults, for tests and embedded use.
    pub fn defaults() -> Self {
        LimitsConfig {
            create_rate_burst: 120,
            create_rate_per_second: 20,
            create_ip_rate_burst: 600,
            create_ip_rate_per_second: 100,
            signin_rate_attempts: 10,
            signin_rate_window_seconds: 60,
            auth_failure_attempts: 20,
            auth_failure_window_seconds: 60,
            trust_proxy_headers: false,
            trusted_proxies: Vec::new(),
        }
    }
}

impl ServeConfig {
    /// The timeouts the questions asked through any door may have.
    pub fn timeout_bounds(&self) -> TimeoutBounds {
        TimeoutBounds { min_seconds: self.min_timeout_seconds, max_seconds: self.max_timeout_seconds }
    }

    /// The channels outside Holdpoint's pages this server sends on: those configured.
    pub fn sends_on(&self) -> SendsOn {
        let push = self.channels.vapid_subject(self.public_url.as_deref()).is_some();
        let channels = &self.channels;
        let slack = (channels.slack_bot_token.is_some() && channels.slack_signing_secret.is_some()).then(|| {
            match &channels.slack_channel {
                Some(channel) => SlackTarget::Channel(channel.clone()),
                None => SlackTarget::DirectMessages,
            }
        });
        SendsOn { email: channels.smtp_url.is_some() && channels.email_from.is_some(), slack, push }
    }

    /// Where `script:` files are read from.
    pub fn scripts_dir(&self) -> PathBuf {
        self.runtime.scripts_dir.clone().unwrap_or_else(|| self.database.data_dir.join("scripts"))
    }

    /// Where the built site lives: the configured root, else `site/` beside the executable's directory
    /// (`target/site` for `target/debug/holdpoint`), else `site/` beside the executable, else `./target/site`.
    pub fn site_root(&self) -> PathBuf {
        if let Some(root) = &self.site_root {
            return root.clone();
        }
        let beside_exe = std::env::current_exe().ok().and_then(|exe| exe.parent().map(PathBuf::from));
        let candidates = beside_exe
            .iter()
            .flat_map(|dir| [dir.join("../site"), dir.join("site")])
            .chain([PathBuf::from("target/site")]);
        for candidate in candidates {
            if candidate.join("pkg").is_dir() {
                return candidate;
            }
        }
        PathBuf::from("target/site")
    }

    /// Settings for tests: SQLite in memory is not shared across connections, so tests pass a file or PG URL.
    pub fn for_tests(database_url: String) -> Self {
        ServeConfig {
            addr: "127.0.0.1:0".parse().expect("valid address"),
            database: DatabaseLocation { data_dir: PathBuf::from("./data"), database_url: Some(database_url) },
            bootstrap_token: None,
            min_timeout_seconds: 1,
            max_timeout_seconds: 86_400,
            claim_ttl_seconds: DEFAULT_CLAIM_TTL_SECONDS,
            site_root: None,
            secure_cookies: false,
            run_workers: true,
            sse_buffer: 4096,
            streams_per_caller: 32,
            mcp_sessions_per_caller: 16,
            mcp_session_idle_seconds: 3600,
            mcp_progress_seconds: 5,
            upstream_allow_private: false,
            gateway_hold_seconds: 30,
            gateway_upstreams: Vec::new(),
            session_hours: 1,
            token_cache_seconds: 5,
            database_connections: crate::store::default_postgres_connections(),
            separation_of_duties: true,
            public_url: None,
            runtime: RuntimeConfig::defaults(),
            // Tests create hundreds of questions in a loop, far faster than any client should; the limits' own
            // tests set the values they check.
            limits: LimitsConfig {
                create_rate_burst: 1_000_000,
                create_rate_per_second: 1_000_000,
                create_ip_rate_burst: 1_000_000,
                create_ip_rate_per_second: 1_000_000,
                ..LimitsConfig::defaults()
            },
            connections: ConnectionConfig::defaults(),
            channels: ChannelsConfig::defaults(),
            sso: SsoConfig::defaults(),
            // A directory of the test's own: `./data` is shared by every test of the run.
            files: crate::files::FilesConfig {
                files_url: Some(format!(
                    "file://{}",
                    std::env::temp_dir().join("holdpoint-test-files").join(uuid::Uuid::now_v7().to_string()).display()
                )),
                ..crate::files::FilesConfig::defaults()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        config: ServeConfig,
    }

    #[test]
    fn database_connections_default_to_a_few_per_core_and_refuse_zero() {
        use clap::Parser;
        let defaults = Serve::try_parse_from(["serve"]).unwrap().config;
        let cores = std::thread::available_parallelism().unwrap().get() as u32;
        assert_eq!(defaults.database_connections, (4 * cores).max(8));
        let set = Serve::try_parse_from(["serve", "--database-connections", "3"]).unwrap().config;
        assert_eq!(set.database_connections, 3);
        for refused in ["0", "-1", "1001", "many"] {
            let error = Serve::try_parse_from(["serve", &format!("--database-connections={refused}")]).err();
            assert!(error.is_some_and(|e| e.to_string().contains("--database-connections")), "{refused} was taken");
        }
    }

    // A tokio test: the email sender's connection pool starts a task of its own.
    #[tokio::test]
    async fn channels_are_read_from_the_environments_names_and_are_off_by_default() {
        use clap::Parser;
        let defaults = Serve::try_parse_from(["serve"]).unwrap().config.channels;
        assert!(defaults.email_sender().unwrap().is_none());
        assert!(defaults.slack().unwrap().is_none());
        assert_eq!(defaults.slack_api_url, "https://slack.com/api");
        let set = Serve::try_parse_from([
            "serve",
            "--smtp-url",
            "smtp://127.0.0.1:2525?tls=none",
            "--email-from",
            "Holdpoint <hp@example.com>",
            "--slack-bot-token",
            "xoxb-1",
            "--slack-signing-secret",
            "s",
            "--slack-api-url",
            "http://127.0.0.1:9/api",
        ])
        .unwrap()
        .config
        .channels;
        assert_eq!(set.email_sender().unwrap().unwrap().from().email.to_string(), "hp@example.com");
        assert!(set.slack().unwrap().is_some());
        assert_eq!(set.vapid_subject(None).as_deref(), Some("mailto:hp@example.com"));
        let no_sender = Serve::try_parse_from(["serve", "--smtp-url", "smtp://relay"]).unwrap().config.channels;
        assert!(matches!(no_sender.email_sender(), Err(ChannelsConfigError::NoSender)));
        let half = Serve::try_parse_from(["serve", "--slack-bot-token", "xoxb-1"]).unwrap().config.channels;
        assert!(matches!(half.slack(), Err(ChannelsConfigError::SlackHalfConfigured)));
        assert!(Serve::try_parse_from(["serve", "--smtp-url", "http://relay"]).is_err());
        assert!(Serve::try_parse_from(["serve", "--vapid-private-key", "short"]).is_err());
        assert_eq!(defaults.vapid_subject(Some("https://hp.example.com")).as_deref(), Some("https://hp.example.com"));
        assert_eq!(defaults.vapid_subject(Some("http://127.0.0.1:3000")), None);
    }

    #[test]
    fn an_empty_database_url_falls_back_to_the_data_directory() {
        let mut config = ServeConfig::for_tests(String::new());
        config.database.data_dir = PathBuf::from("/var/lib/holdpoint");
        assert_eq!(config.database.url(), "sqlite:///var/lib/holdpoint/holdpoint.db");
        config.database.database_url = Some("postgres://db/holdpoint".into());
        assert_eq!(config.database.url(), "postgres://db/holdpoint");
    }

    #[test]
    fn passwords_in_database_urls_are_redacted() {
        assert_eq!(redacted_url("postgres://app:s3cret@db:5432/hp"), "postgres://app:[redacted]@db:5432/hp");
        assert_eq!(
            redacted_url("postgres://db/hp?user=app&password=s3cret"),
            "postgres://db/hp?user=app&password=[redacted]"
        );
        assert_eq!(redacted_url("postgres://app@db/hp"), "postgres://app@db/hp");
        assert_eq!(
            redacted_url("sqlite:///var/lib/holdpoint/holdpoint.db"),
            "sqlite:///var/lib/holdpoint/holdpoint.db"
        );
    }

    #[test]
    fn the_configuration_debug_output_shows_no_secret() {
        let mut config = ServeConfig::for_tests("postgres://app:db-password-1@db/hp".into());
        config.bootstrap_token = Some("hp_bootstrap-secret-2".parse().unwrap());
        config.runtime.openai_api_key = Some("sk-api-key-3".parse().unwrap());
        config.channels.smtp_url = Some("smtp://mailer:smtp-password-4@smtp.example.com".parse().unwrap());
        config.channels.slack_bot_token = Some("xoxb-bot-token-5".parse().unwrap());
        config.channels.slack_signing_secret = Some("signing-secret-6".parse().unwrap());
        let vapid = VapidKey::generate();
        config.channels.vapid_private_key = Some(vapid.clone());
        let debug = format!("{config:?}");
        for secret in [
            "db-password-1",
            "hp_bootstrap-secret-2",
            "sk-api-key-3",
            "smtp-password-4",
            "xoxb-bot-token-5",
            "signing-secret-6",
        ]
        .into_iter()
        .chain([vapid.encoded().as_str()])
        {
            assert!(!debug.contains(secret), "{secret} shows in {debug}");
        }
        assert!(debug.contains("postgres://app:[redacted]@db/hp"), "{debug}");
    }
}
