//! Built-in tools as the model sees them (JSON schemas), and the two that act on the world: `http_request` and
//! `shell`. `ask_user` and `spawn_agents` act on Holdpoint itself and live in the executor.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{RuntimeConfig, ShellMode};

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
             how to go on (answers: retry, skip, abort or one of your options). The result is the resolved question.",
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "The question, 1..=300 characters"},
                    "body": {"type": "string", "description": "Details, Markdown"},
                    "kind": {"type": "string", "enum": ["blocking", "non_blocking", "error_recovery"]},
                    "response_type": {"type": "string", "enum": ["text", "boolean", "choice", "multi_choice", "error_recovery", "form"]},
                    "options": {"type": "array", "items": {"type": "object", "properties": {
                        "value": {"type": "string"}, "label": {"type": "string"}, "description": {"type": "string"}},
                        "required": ["value", "label"]}},
                    "fields": {"type": "array", "items": {"type": "object", "properties": {
                        "key": {"type": "string"}, "label": {"type": "string"},
                        "response_type": {"type": "string", "enum": ["text", "choice", "multi_choice", "boolean", "number"]},
                        "options": {"type": "array"}, "required": {"type": "boolean"}},
                        "required": ["key", "label", "response_type"]}},
                    "timeout_seconds": {"type": "integer"},
                    "default_response": {"type": "object", "properties": {"value": {}, "comment": {"type": "string"}}},
                    "context": {"type": "object"}
                },
                "required": ["title"]
            }),
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
/// alike). It follows no redirects: the allow-list is checked on the URL the model asked for, and a redirect could
/// lead anywhere; the model gets the redirect itself.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client without TLS settings of its own builds")
}

/// A tool that could not do its work; the model gets the message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

fn truncate(text: String) -> String {
    if text.len() <= OUTPUT_MAX_BYTES {
        return text;
    }
    let mut end = OUTPUT_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[truncated: {} bytes in all]", &text[..end], text.len())
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

pub async fn http_request(http: &reqwest::Client, config: &RuntimeConfig, args: &Value) -> Result<Value, ToolError> {
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
    let response = request.send().await.map_err(|e| ToolError(format!("request failed: {e}")))?;
    let status = response.status().as_u16();
    let content_type =
        response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = response.text().await.map_err(|e| ToolError(format!("reading the response failed: {e}")))?;
    Ok(json!({ "status": status, "content_type": content_type, "body": truncate(body) }))
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
    command.arg("-c").arg(&args.command).kill_on_drop(true).stdin(std::process::Stdio::null());
    if let Some(cwd) = &args.cwd {
        command.current_dir(cwd);
    }
    let output = tokio::time::timeout(Duration::from_secs(timeout), command.output())
        .await
        .map_err(|_| ToolError(format!("the command did not finish within {timeout} s and was killed")))?
        .map_err(|e| ToolError(format!("the command could not start: {e}")))?;
    let result = json!({
        "exit_code": output.status.code(),
        "stdout": truncate(String::from_utf8_lossy(&output.stdout).into_owned()),
        "stderr": truncate(String::from_utf8_lossy(&output.stderr).into_owned()),
    });
    if output.status.success() { Ok(result) } else { Err(ToolError(result.to_string())) }
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
    fn hosts_are_allowed_by_name_or_by_name_and_port() {
        let allowed = vec!["api.example.com".to_owned(), "127.0.0.1:8080".to_owned()];
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(host_allowed(&url("https://api.example.com/x"), &allowed));
        assert!(host_allowed(&url("http://127.0.0.1:8080/"), &allowed));
        assert!(!host_allowed(&url("http://127.0.0.1:9090/"), &allowed));
        assert!(!host_allowed(&url("https://evil.example.com/"), &allowed));
    }
}
