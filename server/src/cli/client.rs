//! How the headless commands (`ask`, `run`, `resume`) and the responder commands (`questions`, `show`, `answer`,
//! `approve`, `reject`) reach Holdpoint: a server over HTTP (`--server`/`--token`,
//! or `HOLDPOINT_SERVER`/`HOLDPOINT_TOKEN`), or, with neither, an embedded engine on `.holdpoint/holdpoint.db`
//! started inside the CLI process and spoken to over loopback — one code path for both, and with the embedded
//! engine the agent loop (and its `shell` tool) runs on the machine that runs the CLI.

use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::Value;

use crate::config::{DatabaseLocation, ServeConfig};
use crate::credentials::{Secret, hash_secret, new_token_secret};
use crate::server::DEFAULT_WORKSPACE;
use crate::store::TokenRow;

/// The directory of the embedded engine and of `pause.json`, relative to the working directory.
pub const LOCAL_DIR: &str = ".holdpoint";

/// Whom requests to the embedded engine are made as. Two principals, so that separation of duties still means
/// something on one machine: what a script asks for with `holdpoint ask` is approved by the person at the terminal,
/// never by the script's own credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalIdentity {
    /// Scripts and agents (`ask`, `run`, `resume`): the admin token `cli`, kept in `.holdpoint/cli-token`.
    Cli,
    /// The person answering from this terminal (`questions`, `show`, `answer`, `approve`, `reject`): an approver
    /// token named after their login, kept in `.holdpoint/person-token`.
    Person,
}

impl LocalIdentity {
    fn token_file(self) -> &'static str {
        match self {
            LocalIdentity::Cli => "cli-token",
            LocalIdentity::Person => "person-token",
        }
    }
}

/// What a command failed with; each is one line on stderr, and with `--output json` also a JSON document on stdout.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Exit code 2: the command line is wrong.
    #[error("{0}")]
    Usage(String),
    /// Exit code 1.
    #[error("{0}")]
    Failed(String),
    /// Exit code 1: the API refused the request with its error body, whose stable `code` a script can
    /// branch on.
    #[error("{}", api_error_line(*.status, .code, .message, .details))]
    Api { status: u16, code: String, message: String, details: Value },
    /// Exit code 1, with the command's own outcome JSON already printed on stdout.
    #[error("{0}")]
    Reported(String),
}

impl CliError {
    /// The exit code: 2 for usage, 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            _ => 1,
        }
    }

    /// The error in the API's shape (`{"error": {"code", "message", "details"?}}`), for `--output json`; `None`
    /// when the command printed its own outcome already. Errors that never reached the API have the codes
    /// `usage` and `failed`.
    pub fn to_json(&self) -> Option<Value> {
        let (code, message, details) = match self {
            CliError::Usage(message) => ("usage", message.clone(), Value::Null),
            CliError::Failed(message) => ("failed", message.clone(), Value::Null),
            CliError::Api { code, message, details, .. } => (code.as_str(), message.clone(), details.clone()),
            CliError::Reported(_) => return None,
        };
        let mut error = serde_json::json!({ "code": code, "message": message });
        if !details.is_null() {
            error["details"] = details;
        }
        Some(serde_json::json!({ "error": error }))
    }
}

/// `code: message (details)`: what a person reads of an API error.
fn api_error_line(status: u16, code: &str, message: &str, details: &Value) -> String {
    if status == 401 {
        return format!("{code}: the server refused the token: {message}");
    }
    // The message names the first fault itself; each fault is said once.
    let mut notes: Vec<String> = match details["fields"].as_object() {
        Some(fields) => fields
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or_default()))
            .filter(|note| !message.contains(note.as_str()))
            .collect(),
        None => Vec::new(),
    };
    // A conflict's details say what the question became, which its message may not.
    if let Some(status) = details["status"].as_str().filter(|s| !message.contains(*s)) {
        notes.push(format!("status {status}"));
    }
    if notes.is_empty() { format!("{code}: {message}") } else { format!("{code}: {message} ({})", notes.join("; ")) }
}

pub type CliResult<T> = Result<T, CliError>;

/// `--server` and `--token`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The Holdpoint server, e.g. https://holdpoint.example.com; without it (and without a token) an embedded
    /// engine in ./.holdpoint is used.
    #[arg(long, env = "HOLDPOINT_SERVER")]
    pub server: Option<String>,
    /// An API token of that server.
    #[arg(long, env = "HOLDPOINT_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,
}

/// A connection to the REST API.
pub struct Connection {
    /// The server's base URL (for links people can open).
    pub base: String,
    token: String,
    http: reqwest::Client,
    /// The embedded engine, served on loopback while the command runs.
    _embedded: Option<tokio::task::JoinHandle<()>>,
}

/// The settings of `serve` as the environment gives them (`HOLDPOINT_SHELL`, `HOLDPOINT_SCRIPTS_DIR`, ...).
#[derive(Debug, Parser)]
struct EnvironmentOnly {
    #[command(flatten)]
    config: ServeConfig,
}

impl Connection {
    /// Connects as a script or agent ([`LocalIdentity::Cli`] on the embedded engine).
    pub async fn open(args: &ServerArgs) -> CliResult<Self> {
        Self::open_as(args, LocalIdentity::Cli).await
    }

    /// Connects to `--server` with `--token`, or to the embedded engine as `identity`.
    pub async fn open_as(args: &ServerArgs, identity: LocalIdentity) -> CliResult<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| CliError::Failed(e.to_string()))?;
        let server = args.server.as_deref().map(str::trim).filter(|s| !s.is_empty());
        if let Some(server) = server {
            check_server_url(server)?;
        }
        match (server, &args.token) {
            (Some(server), Some(token)) => Ok(Connection {
                base: server.trim_end_matches('/').to_owned(),
                token: token.expose().to_owned(),
                http,
                _embedded: None,
            }),
            (Some(_), None) => Err(CliError::Usage("--server needs --token (or HOLDPOINT_TOKEN)".into())),
            (None, Some(_)) => Err(CliError::Usage("--token needs --server (or HOLDPOINT_SERVER)".into())),
            (None, None) => Self::embedded(http, identity).await,
        }
    }

    /// Starts the embedded engine on `.holdpoint/holdpoint.db` and serves it on a loopback port.
    async fn embedded(http: reqwest::Client, identity: LocalIdentity) -> CliResult<Self> {
        // Said every time: a person who meant a server and forgot to name it would otherwise see an empty, private
        // list of questions and think nobody asked anything.
        eprintln!(
            "holdpoint: no --server given (nor HOLDPOINT_SERVER): using the embedded engine in ./{LOCAL_DIR}/ \
             (pass --server URL --token TOKEN to use a running Holdpoint)"
        );
        let mut config = environment_config()?;
        config.database = DatabaseLocation { data_dir: PathBuf::from(LOCAL_DIR), database_url: None };
        config.addr = "127.0.0.1:0".parse().map_err(|_| CliError::Failed("bad loopback address".into()))?;
        config.bootstrap_token = None;
        let state = crate::server::build_state(config)
            .await
            .map_err(|e| CliError::Failed(format!("cannot open the embedded engine in {LOCAL_DIR}/: {e}")))?;
        let token = local_token(&state, identity).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| CliError::Failed(format!("cannot listen on loopback: {e}")))?;
        let addr = listener.local_addr().map_err(|e| CliError::Failed(e.to_string()))?;
        let router = crate::doors::http::router(state);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Connection { base: format!("http://{addr}"), token, http, _embedded: Some(server) })
    }

    /// Sends a request; a refusal becomes one readable line.
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> CliResult<Value> {
        let url = format!("{}/api/v1{path}", self.base);
        let mut request = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        self.read(request).await
    }

    /// `POST /files`: uploads `bytes` as a file named `name` of `media_type`, for an answer's file field; returns what
    /// the server stored (`{"file_id", "name", "size", "media_type", "sha256"}`), which the answer references.
    pub async fn upload(&self, name: &str, media_type: &str, bytes: Vec<u8>) -> CliResult<Value> {
        let name = percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
        let url = format!("{}/api/v1/files?name={name}", self.base);
        let request =
            self.http.post(&url).bearer_auth(&self.token).header(reqwest::header::CONTENT_TYPE, media_type).body(bytes);
        self.read(request).await
    }

    /// `GET /files/{id}`: the bytes of a file (an answer's upload) the caller may see.
    pub async fn download(&self, file_id: &str) -> CliResult<Vec<u8>> {
        let id = percent_encoding::utf8_percent_encode(file_id, percent_encoding::NON_ALPHANUMERIC);
        let response =
            self.reach(self.http.get(format!("{}/api/v1/files/{id}", self.base)).bearer_auth(&self.token)).await?;
        if !response.status().is_success() {
            return Err(self.refusal(response).await);
        }
        let bytes = response.bytes().await.map_err(|err| CliError::Failed(format!("the download broke off: {err}")))?;
        Ok(bytes.to_vec())
    }

    /// Sends `request`; a server out of reach is a failure that says where it was looked for.
    async fn reach(&self, request: reqwest::RequestBuilder) -> CliResult<reqwest::Response> {
        request.send().await.map_err(|err| {
            let reason =
                if err.is_connect() { "connection refused or host unreachable".to_owned() } else { err.to_string() };
            CliError::Failed(format!("cannot reach the Holdpoint server at {}: {reason}", self.base))
        })
    }

    /// Sends `request` and reads its answer; a refusal becomes one readable line.
    async fn read(&self, request: reqwest::RequestBuilder) -> CliResult<Value> {
        let response = self.reach(request).await?;
        if response.status().is_success() {
            return Ok(response.json().await.unwrap_or(Value::Null));
        }
        Err(self.refusal(response).await)
    }

    /// The server's refusal, as the error of its code (read from the one JSON error shape, else from the status).
    async fn refusal(&self, response: reqwest::Response) -> CliError {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let fallback = match status.as_u16() {
            401 => "unauthorized",
            403 => "forbidden",
            404 => "not_found",
            409 => "conflict",
            422 => "invalid",
            429 => "rate_limited",
            _ => "failed",
        };
        CliError::Api {
            status: status.as_u16(),
            code: json["error"]["code"].as_str().unwrap_or(fallback).to_owned(),
            message: json["error"]["message"].as_str().unwrap_or(text.trim()).to_owned(),
            details: json["error"]["details"].clone(),
        }
    }

    pub async fn get(&self, path: &str) -> CliResult<Value> {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> CliResult<Value> {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// Where a person finds `path` of the web UI: on the server, or on `holdpoint serve` over the embedded engine
    /// (whose own loopback port dies with this process).
    pub fn ui_link(&self, path: &str) -> String {
        if self.is_embedded() {
            format!("{path} of `holdpoint serve --data-dir {LOCAL_DIR}`")
        } else {
            format!("{}{path}", self.base)
        }
    }

    /// The token requests are made with.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether this is the embedded engine (its agents may be defined by files in `.holdpoint/agents/`).
    pub fn is_embedded(&self) -> bool {
        self._embedded.is_some()
    }
}

/// The settings `serve` would take from the environment (the CLI's runtime reads `HOLDPOINT_SHELL`, ...).
pub fn environment_config() -> CliResult<ServeConfig> {
    EnvironmentOnly::try_parse_from(["holdpoint"])
        .map(|e| e.config)
        .map_err(|e| CliError::Usage(format!("the environment has an invalid setting: {e}")))
}

/// A token of the embedded engine for `identity`, made on first use and kept (readable by its owner only) in
/// `.holdpoint/`.
async fn local_token(state: &crate::state::AppState, identity: LocalIdentity) -> CliResult<String> {
    let path = Path::new(LOCAL_DIR).join(identity.token_file());
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let secret = existing.trim().to_owned();
        if state.store.principal_by_token_hash(&hash_secret(&secret)).await.ok().flatten().is_some() {
            return Ok(secret);
        }
    }
    let workspace = state
        .store
        .ensure_workspace(DEFAULT_WORKSPACE)
        .await
        .map_err(|e| CliError::Failed(format!("cannot open the embedded engine: {e}")))?;
    let secret = new_token_secret();
    let (name, role) = match identity {
        LocalIdentity::Cli => ("cli".to_owned(), app::types::Role::Admin),
        // Named by the login, as that is who answered; approver is the least role that may answer everything.
        LocalIdentity::Person => {
            let login = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_default();
            let login = if login.trim().is_empty() { "local person".to_owned() } else { login };
            (login, app::types::Role::Approver)
        }
    };
    let row = TokenRow {
        id: uuid::Uuid::now_v7(),
        workspace_id: workspace.id,
        name,
        role,
        secret_hash: hash_secret(&secret),
        created_at: crate::store::now(),
        created_by: Some("cli".into()),
        maker_id: None,
    };
    let actor = crate::store::AuditActor::policy("embedded engine", None);
    crate::people::store_token(state.store.as_ref(), &row, &actor)
        .await
        .map_err(|e| CliError::Failed(format!("cannot create the CLI token: {e}")))?;
    write_private(&path, &secret)?;
    Ok(secret)
}

fn write_private(path: &Path, contents: &str) -> CliResult<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|e| CliError::Failed(format!("cannot write {}: {e}", path.display())))?;
    file.write_all(contents.as_bytes()).map_err(|e| CliError::Failed(format!("cannot write {}: {e}", path.display())))
}

/// `--server` must be an `http` or `https` URL: `127.0.0.1:3000` or a mistyped scheme is a mistake on the command line
/// (exit 2), not a server that could not be reached.
fn check_server_url(server: &str) -> CliResult<()> {
    match url::Url::parse(server) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(()),
        _ => Err(CliError::Usage(format!(
            "--server (or HOLDPOINT_SERVER) must be an http:// or https:// URL, e.g. http://127.0.0.1:3000; got {server:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::api_error_line;

    #[test]
    fn a_refusal_says_each_fault_once() {
        let details = json!({"fields": {"value.day": "must be a date, YYYY-MM-DD"}});
        let message = "the answer is not valid: value.day: must be a date, YYYY-MM-DD";
        assert_eq!(
            api_error_line(422, "invalid", message, &details),
            "invalid: the answer is not valid: value.day: must be a date, YYYY-MM-DD"
        );
        let details = json!({"fields": {"value.day": "must be a date, YYYY-MM-DD", "value.qty": "must be at least 1"}});
        assert_eq!(
            api_error_line(422, "invalid", message, &details),
            "invalid: the answer is not valid: value.day: must be a date, YYYY-MM-DD (value.qty: must be at least 1)"
        );
        let details = json!({"status": "expired"});
        assert_eq!(
            api_error_line(409, "conflict", "the question is not pending", &details),
            "conflict: the question is not pending (status expired)"
        );
    }
}
