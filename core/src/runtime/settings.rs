//! The runtime's settings, as `holdpoint serve` reads them from its flags and environment (see `.env.example`) and
//! hands them to the runtime it starts.

use std::path::PathBuf;

use crate::credentials::Secret;

/// What `shell` tool calls do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShellMode {
    /// The tool is refused.
    Off,
    /// Commands run on the server (after approval, unless an agent's policy says otherwise).
    On,
    /// Commands are reported, not run: for demos.
    DryRun,
}

/// Settings of the agent runtime.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeConfig {
    /// The cap on a run's cumulative steps across all its segments; resume is refused once it is reached.
    #[arg(long, env = "HOLDPOINT_MAX_TOTAL_STEPS", default_value_t = 500)]
    pub max_total_steps: u32,

    /// How many runs this instance executes at once.
    #[arg(long, env = "HOLDPOINT_RUN_CONCURRENCY", default_value_t = 8)]
    pub run_concurrency: usize,

    /// How long a worker holds a run without renewing; another instance takes over a run whose worker died
    /// once this has passed.
    #[arg(long, env = "HOLDPOINT_RUN_LEASE_SECONDS", default_value_t = 30)]
    pub run_lease_seconds: u32,

    /// Where `script:<file>` models are read from; file names may not leave it. Default: `<data dir>/scripts`.
    #[arg(long, env = "HOLDPOINT_SCRIPTS_DIR")]
    pub scripts_dir: Option<PathBuf>,

    /// The `shell` tool: `off`, `on` or `dry-run`.
    #[arg(long, env = "HOLDPOINT_SHELL", value_enum, default_value = "off")]
    pub shell: ShellMode,

    /// Hosts the `http_request` tool may reach, comma-separated (`api.example.com`, `127.0.0.1:8080`).
    #[arg(long, env = "HOLDPOINT_HTTP_ALLOWED_HOSTS", value_delimiter = ',')]
    pub http_allowed_hosts: Vec<String>,

    /// Whether the host names of `HOLDPOINT_HTTP_ALLOWED_HOSTS` may resolve into private, loopback, link-local and
    /// other special-purpose address ranges; an address written in the list itself is allowed whatever its range.
    #[arg(long, env = "HOLDPOINT_HTTP_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub http_allow_private: bool,

    /// Base URL of the OpenAI-compatible API for `openai:` models.
    #[arg(long, env = "OPENAI_BASE_URL", default_value = "https://api.openai.com/v1")]
    pub openai_base_url: String,

    /// API key for `openai:` models, sent only to `OPENAI_BASE_URL`.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<Secret>,

    /// Further model endpoints agents may name in `model_settings.base_url`, comma-separated, each `URL` or
    /// `URL=VARIABLE` with the environment variable (in capitals) that holds that endpoint's API key
    /// (`http://127.0.0.1:11434/v1,https://api.groq.com/openai/v1=GROQ_API_KEY`). `OPENAI_BASE_URL` is always
    /// allowed; no other URL is, and no key goes anywhere but to its own endpoint.
    #[arg(long, env = "HOLDPOINT_MODEL_ENDPOINTS", value_delimiter = ',')]
    pub model_endpoints: Vec<ModelEndpoint>,

    /// Whether the host names of `OPENAI_BASE_URL` and `HOLDPOINT_MODEL_ENDPOINTS` may resolve into private,
    /// loopback, link-local and other special-purpose address ranges (`http://ollama.internal:11434/v1`); an
    /// address written in the URL itself (`http://127.0.0.1:11434/v1`) is allowed whatever its range.
    #[arg(long, env = "HOLDPOINT_MODEL_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub model_allow_private: bool,

    /// How long one model request may take, in seconds.
    #[arg(long, env = "HOLDPOINT_MODEL_TIMEOUT_SECONDS", default_value_t = 120)]
    pub model_timeout_seconds: u64,

    /// For how long a model call that meets an outage (a network error, a timeout, 408, 429 or 5xx) is retried, in
    /// seconds, with exponential backoff or as the provider's `Retry-After` says; after that the run is paused with
    /// the error, and resuming it retries the same call.
    #[arg(long, env = "HOLDPOINT_MODEL_RETRY_SECONDS", default_value_t = 600)]
    pub model_retry_seconds: u64,
}

/// A model endpoint the operator lets agents use, with the server's environment variable holding its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEndpoint {
    /// The base URL, without a trailing `/`.
    pub base_url: String,
    pub api_key_env: Option<String>,
}

impl std::str::FromStr for ModelEndpoint {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let (url, variable) = match text.rsplit_once('=') {
            Some((url, variable)) if is_variable_name(variable) => (url, Some(variable.to_owned())),
            _ => (text, None),
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("{url:?} is not an http or https URL"));
        }
        Ok(ModelEndpoint { base_url: normalize_base_url(url), api_key_env: variable })
    }
}

/// A base URL as endpoints are compared: without the trailing slashes that make no difference to the requests.
pub fn normalize_base_url(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

/// An environment variable's name as keys are conventionally named (capitals, digits, `_`): what tells
/// `URL=VARIABLE` from a URL whose query has a `=`.
fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

impl RuntimeConfig {
    /// The defaults, for tests and embedded use.
    pub fn defaults() -> Self {
        RuntimeConfig {
            max_total_steps: 500,
            run_concurrency: 8,
            run_lease_seconds: 30,
            scripts_dir: None,
            shell: ShellMode::Off,
            http_allowed_hosts: Vec::new(),
            http_allow_private: false,
            openai_base_url: "https://api.openai.com/v1".into(),
            openai_api_key: None,
            model_endpoints: Vec::new(),
            model_allow_private: false,
            model_timeout_seconds: 120,
            model_retry_seconds: 600,
        }
    }
}
