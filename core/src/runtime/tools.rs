//! Built-in tools as the model sees them (JSON schemas), and the two that act on the world: `http_request` and
//! `shell`. `ask_user` and `spawn_agents` act on Holdpoint itself and live in the executor; `ask_user` takes the
//! arguments MCP's `ask_user` takes ([`crate::questions::ask_user`]), rich fields and `response_schema` included.

use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::settings::{RuntimeConfig, ShellMode};
use crate::egress::{EgressPolicy, GuardedClient};

pub const ASK_USER: &str = "ask_user";
pub const SPAWN_AGENTS: &str = "spawn_agents";
pub const HTTP_REQUEST: &str = "http_request";
pub const SHELL: &str = "shell";
pub const BUILT_IN: [&str; 4] = [ASK_USER, SPAWN_AGENTS, HTTP_REQUEST, SHELL];

/// The most of a response body or command output given back to the model.
const OUTPUT_MAX_BYTES: usize = 64 * 1024;
const SHELL_DEFAULT_TIMEOUT: u64 = 60;
const SHELL_MAX_TIMEOUT: u64 = 600;

/// The Chat Completions `tools` entry of a built-in tool.
pub fn definition(name: &str) -> Option<Value> {
    let (description, parameters) = match name {
        ASK_USER => (
            "Ask a person and wait for the answer. Use kind `blocking` (default) when you cannot go on without it, \
             `non_blocking` for a preference (you go on with your default), `error_recovery` after a failure to ask \
             how to go on (answers: retry, skip, abort or one of your options). Ask for one value of a response_type \
             (text, boolean, choice, multi_choice, number, integer, date, datetime, time, rating, email, url, \
             markdown, table with its columns), or several at once with response_type `form` and `fields` (each \
             with its own type and bounds), or with a `response_schema` (a JSON Schema object of primitives, as \
             MCP elicitation's requestedSchema) instead of fields. The result is the resolved question.",
            crate::questions::ask_user::AskUserArgs::parameters_schema(),
        ),
        SPAWN_AGENTS => (
            "Start sub-agents by name, each with its own task, and (with wait: true, the default) wait for their \
             results; or resume a paused sub-agent run of yours with resume_run_id.",
            json!({
                "type": "object",
                "properties": {
                    "agents": {"type": "array", "items": {"type": "object", "properties": {
                        "agent": {"type": "string"}, "input": {"type": "string"}}, "required": ["agent", "input"]}},
                    "wait": {"type": "boolean"},
                    "resume_run_id": {"type": "string"},
                    "prompt": {"type": "string"}
                }
            }),
        ),
        HTTP_REQUEST => (
            "Make an HTTP request to an allow-listed host. The result has the status, content type and body.",
            json!({
                "type": "object",
                "properties": {
                    "method": {"type": "string"},
                    "url": {"type": "string"},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "body": {"type": "string"}
                },
                "required": ["method", "url"]
            }),
        ),
        SHELL => (
            "Run a shell command on the Holdpoint server. The result has the exit code, stdout and stderr.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "cwd": {"type": "string"},
                    "timeout_seconds": {"type": "integer"}
                },
                "required": ["command"]
            }),
        ),
        _ => return None,
    };
    Some(
        json!({ "type": "function", "function": { "name": name, "description": description, "parameters": parameters } }),
    )
}

/// The client of the `http_request` tool, the one every executor uses (the server's workers and `holdpoint run`
/// alike), through the outbound guard. It follows no redirects: the allow-list is checked on the URL the model asked
/// for, and a redirect could lead anywhere; the model gets the redirect itself. An address written in
/// `HOLDPOINT_HTTP_ALLOWED_HOSTS` is reached whatever its range; a name only at public addresses unless
/// `HOLDPOINT_HTTP_ALLOW_PRIVATE`.
pub fn http_client(config: &RuntimeConfig) -> GuardedClient {
    EgressPolicy::new("HOLDPOINT_HTTP_ALLOW_PRIVATE", config.http_allow_private)
        .naming(config.http_allowed_hosts.iter().map(String::as_str))
        .client(reqwest::Client::builder())
        .expect("an HTTP client without TLS settings of its own builds")
}

/// A tool that could not do its work; the model gets the message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

/// What is kept of an output while it is read: its first `OUTPUT_MAX_BYTES` bytes, and how many there were in all.
/// Nothing past the cap is kept, so an output of any size costs the cap in memory.
#[derive(Debug, Default)]
struct Capped {
    kept: Vec<u8>,
    total: u64,
}

impl Capped {
    fn push(&mut self, chunk: &[u8]) {
        let room = OUTPUT_MAX_BYTES - self.kept.len();
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        self.total += chunk.len() as u64;
    }

    fn over_cap(&self) -> bool {
        self.total > OUTPUT_MAX_BYTES as u64
    }

    /// The text the model gets: what was kept, and a marker when there was more. `total` is the size in bytes of
    /// the whole output, when it is known.
    fn into_text(self, total: Option<u64>) -> String {
        let whole = total == Some(self.kept.len() as u64);
        let kept = if whole { &self.kept[..] } else { without_split_character(&self.kept) };
        let text = String::from_utf8_lossy(kept);
        if whole && text.len() <= OUTPUT_MAX_BYTES {
            return text.into_owned();
        }
        // Replacement characters for invalid bytes can make the text longer than the bytes it came from.
        let mut end = text.len().min(OUTPUT_MAX_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        match total {
            Some(total) => format!("{}\n[truncated: {total} bytes in all]", &text[..end]),
            None => format!("{}\n[truncated: more than {OUTPUT_MAX_BYTES} bytes]", &text[..end]),
        }
    }
}

/// `bytes` without the first bytes of a UTF-8 character whose rest was cut off at the end.
fn without_split_character(bytes: &[u8]) -> &[u8] {
    for start in (bytes.len().saturating_sub(3)..bytes.len()).rev() {
        let lead = bytes[start];
        if lead & 0b1100_0000 == 0b1000_0000 {
            continue;
        }
        let length = match lead {
            0b1100_0000..=0b1101_1111 => 2,
            0b1110_0000..=0b1110_1111 => 3,
            0b1111_0000..=0b1111_0111 => 4,
            _ => 1,
        };
        return if start + length > bytes.len() { &bytes[..start] } else { bytes };
    }
    bytes
}

/// Reads `pipe` to its end, keeping what the model gets. The rest is read and counted, not kept: a command that
/// prints a lot goes on to its end as it would in a terminal, where a closed pipe would stop it half-way.
async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> std::io::Result<Capped> {
    use tokio::io::AsyncReadExt;
    let mut capped = Capped::default();
    let Some(mut pipe) = pipe else { return Ok(capped) };
    let mut buffer = vec![0; 64 * 1024];
    loop {
        match pipe.read(&mut buffer).await? {
            0 => return Ok(capped),
            read => capped.push(&buffer[..read]),
        }
    }
}

#[derive(Debug, Deserialize)]
struct HttpArgs {
    method: String,
    url: String,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
}

/// Whether `url`'s host (with or without its port) is on the allow-list.
fn host_allowed(url: &reqwest::Url, allowed: &[String]) -> bool {
    let Some(host) = url.host_str() else { return false };
    let with_port = url.port_or_known_default().map(|port| format!("{host}:{port}"));
    allowed.iter().map(|a| a.trim()).any(|a| a.eq_ignore_ascii_case(host) || Some(a.to_owned()) == with_port)
}

pub async fn http_request(http: &GuardedClient, config: &RuntimeConfig, args: &Value) -> Result<Value, ToolError> {
    let args: HttpArgs =
        serde_json::from_value(args.clone()).map_err(|e| ToolError(format!("invalid arguments: {e}")))?;
    let url = reqwest::Url::parse(&args.url).map_err(|e| ToolError(format!("invalid url {:?}: {e}", args.url)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError(format!("only http and https URLs are allowed, not {}", url.scheme())));
    }
    if !host_allowed(&url, &config.http_allowed_hosts) {
        return Err(ToolError(format!(
            "the host {} is not allowed (HOLDPOINT_HTTP_ALLOWED_HOSTS)",
            url.host_str().unwrap_or("")
        )));
    }
    let method = reqwest::Method::from_bytes(args.method.to_uppercase().as_bytes())
        .map_err(|_| ToolError(format!("invalid method {:?}", args.method)))?;
    let mut request = http.request(method, url).timeout(Duration::from_secs(30));
    for (name, value) in &args.headers {
        request = request.header(name, value);
    }
    if let Some(body) = args.body {
        request = request.body(body);
    }
    let mut response = http.send(request).await.map_err(|e| ToolError(format!("request failed: {e}")))?;
    let status = response.status().as_u16();
    let content_type =
        response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let length = response.content_length();
    let mut body = Capped::default();
    let reading = |e: reqwest::Error| ToolError(format!("reading the response failed: {e}"));
    while let Some(chunk) = response.chunk().await.map_err(reading)? {
        body.push(&chunk);
        if body.over_cap() {
            // The rest is never read: the model would not get it, and a body can be endless.
            let body = body.into_text(length.filter(|&length| length > OUTPUT_MAX_BYTES as u64));
            return Ok(json!({ "status": status, "content_type": content_type, "body": body }));
        }
    }
    let total = body.total;
    Ok(json!({ "status": status, "content_type": content_type, "body": body.into_text(Some(total)) }))
}

#[derive(Debug, Deserialize)]
struct ShellArgs {
    command: String,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

/// Runs `sh -c command`; a non-zero exit is an error whose output the model still sees.
pub async fn shell(config: &RuntimeConfig, args: &Value) -> Result<Value, ToolError> {
    let args: ShellArgs =
        serde_json::from_value(args.clone()).map_err(|e| ToolError(format!("invalid arguments: {e}")))?;
    match config.shell {
        ShellMode::Off => return Err(ToolError("the shell tool is disabled on this server (HOLDPOINT_SHELL)".into())),
        ShellMode::DryRun => {
            return Ok(json!({
                "dry_run": true,
                "command": args.command,
                "note": "This server runs shell commands in dry-run mode: the command was approved but not executed.",
            }));
        }
        ShellMode::On => {}
    }
    let timeout = args.timeout_seconds.unwrap_or(SHELL_DEFAULT_TIMEOUT).clamp(1, SHELL_MAX_TIMEOUT);
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&args.command)
        .kill_on_drop(true)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    command.process_group(0);
    if let Some(cwd) = &args.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(|e| ToolError(format!("the command could not start: {e}")))?;
    let mut group = ProcessGroup(child.id());
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let finished = async {
        let (status, stdout, stderr) = tokio::join!(child.wait(), read_capped(stdout), read_capped(stderr));
        std::io::Result::Ok((status?, stdout?, stderr?))
    };
    let (status, stdout, stderr) = tokio::time::timeout(Duration::from_secs(timeout), finished)
        .await
        .map_err(|_| ToolError(format!("the command did not finish within {timeout} s and was killed")))?
        .map_err(|e| ToolError(format!("reading the command's output failed: {e}")))?;
    group.0 = None;
    let (stdout_total, stderr_total) = (stdout.total, stderr.total);
    let result = json!({
        "exit_code": status.code(),
        "stdout": stdout.into_text(Some(stdout_total)),
        "stderr": stderr.into_text(Some(stderr_total)),
    });
    if status.success() { Ok(result) } else { Err(ToolError(result.to_string())) }
}

/// The process group of a running command (`sh` leads it), killed whole if the call is abandoned before the
/// command has finished: its timeout passed, or the worker lost the run's lease and dropped the call. Killing `sh`
/// alone (`kill_on_drop`) would leave what it started running: a pipeline's other commands, anything in the
/// background.
struct ProcessGroup(Option<u32>);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let Some(id) = self.0.take() else { return };
        // Signalling a group takes `kill(2)` with a negative pid, which the standard library does not offer without
        // `unsafe`; the shell's own `kill` does it. A group's id is not given to anyone else while `sh` is unreaped or
        // any process of the group lives.
        let killed = std::process::Command::new("sh")
            .args(["-c", "kill -s KILL -- -\"$1\"", "sh", &id.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Err(err) = killed {
            tracing::warn!(error = %err, group = id, "could not kill an abandoned command's processes");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_tool_has_a_definition() {
        for name in BUILT_IN {
            assert_eq!(definition(name).unwrap()["function"]["name"], name);
        }
        assert!(definition("rm_rf").is_none());
    }

    #[test]
    fn ask_user_offers_the_models_the_rich_fields_and_the_response_schema_of_mcps_ask_user() {
        let parameters = &definition(ASK_USER).unwrap()["function"]["parameters"];
        assert_eq!(parameters, &crate::questions::ask_user::AskUserArgs::parameters_schema());
        let fields = &parameters["properties"]["fields"]["items"];
        assert!(fields["properties"]["response_type"].to_string().contains("\"table\""), "{fields}");
        assert!(fields["properties"]["columns"].is_object(), "{fields}");
        assert!(parameters["properties"]["response_schema"].is_object(), "{parameters}");
    }

    #[test]
    fn an_output_within_the_cap_is_kept_whole() {
        let mut output = Capped::default();
        output.push("héllo".as_bytes());
        assert_eq!(output.into_text(Some(6)), "héllo");
    }

    #[test]
    fn an_output_past_the_cap_keeps_the_cap_and_says_how_much_there_was() {
        let mut output = Capped::default();
        for _ in 0..3 {
            output.push(&[b'a'; OUTPUT_MAX_BYTES]);
        }
        assert!(output.over_cap());
        let text = output.into_text(Some(3 * OUTPUT_MAX_BYTES as u64));
        assert_eq!(
            text,
            format!("{}\n[truncated: {} bytes in all]", "a".repeat(OUTPUT_MAX_BYTES), 3 * OUTPUT_MAX_BYTES)
        );
        let mut endless = Capped::default();
        endless.push(&[b'a'; OUTPUT_MAX_BYTES + 1]);
        assert!(endless.into_text(None).ends_with(&format!("\n[truncated: more than {OUTPUT_MAX_BYTES} bytes]")));
    }

    #[test]
    fn a_character_cut_at_the_cap_is_left_out_whole() {
        let mut output = Capped::default();
        output.push(&[b'a'; OUTPUT_MAX_BYTES - 1]);
        output.push("é and more".as_bytes());
        let text = output.into_text(Some(OUTPUT_MAX_BYTES as u64 + 10));
        assert_eq!(
            text,
            format!("{}\n[truncated: {} bytes in all]", "a".repeat(OUTPUT_MAX_BYTES - 1), OUTPUT_MAX_BYTES + 10)
        );
    }

    #[test]
    fn hosts_are_allowed_by_name_or_by_name_and_port() {
        let allowed = vec!["api.example.com".to_owned(), "127.0.0.1:8080".to_owned()];
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(host_allowed(&url("https://api.example.com/x"), &allowed));
        assert!(host_allowed(&url("http://127.0.0.1:8080/"), &allowed));
        assert!(!host_allowed(&url("http://127.0.0.1:9090/"), &allowed));
        assert!(!host_allowed(&url("https://evil.example.com/"), &allowed));
    }
}
