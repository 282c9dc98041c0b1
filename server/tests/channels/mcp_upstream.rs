//! An upstream MCP server for the gateway's tests: `mcp_upstream.py` (the official Python SDK's FastMCP) on
//! loopback, which reports every tool call it receives, one JSON line each.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::python::{here, python, python_mcp2};

/// The server process, ended with the test (or by [`McpUpstream::stop`]).
pub struct McpUpstream {
    process: Child,
    pub port: u16,
    calls: Arc<Mutex<Vec<Value>>>,
}

impl McpUpstream {
    /// Starts a server calling itself `name`.
    pub async fn start(name: &str) -> McpUpstream {
        let python = tokio::task::spawn_blocking(python).await.unwrap();
        McpUpstream::start_script(python, "mcp_upstream.py", name).await
    }

    /// Starts `mcp_mrtr_upstream.py` (the SDK 2.x server that asks with multi round-trip requests) as `name`.
    pub async fn start_mrtr(name: &str) -> McpUpstream {
        let python = tokio::task::spawn_blocking(python_mcp2).await.unwrap();
        McpUpstream::start_script(python, "mcp_mrtr_upstream.py", name).await
    }

    async fn start_script(python: std::path::PathBuf, script: &str, name: &str) -> McpUpstream {
        let mut process = Command::new(python)
            .arg(here().join(script))
            .arg(name)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(port) = line.strip_prefix("LISTENING ") {
                    return port.parse().unwrap();
                }
            }
            panic!("the MCP upstream ended before listening")
        })
        .await
        .expect("the MCP upstream listens within 30 s");
        let calls = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&calls);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(call) = serde_json::from_str::<Value>(&line) {
                    recorded.lock().unwrap().push(call);
                }
            }
        });
        McpUpstream { process, port, calls }
    }

    /// Its streamable HTTP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The tool calls it received so far: `{"tool", "arguments"}` each.
    pub fn calls(&self) -> Vec<Value> {
        self.calls.lock().unwrap().clone()
    }

    /// Waits (up to 10 s) until it has received `count` calls; returns them.
    pub async fn calls_within(&self, count: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let calls = self.calls();
            if calls.len() >= count {
                return calls;
            }
            assert!(tokio::time::Instant::now() < deadline, "the upstream got {} calls, not {count}", calls.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the server, as a crash would.
    pub async fn stop(mut self) {
        self.process.kill().await.unwrap();
    }
}

/// The same server as a configured upstream's process (`--stdio`): how the gateway starts it, and what it recorded
/// in its file (its process id at each start, then its calls).
pub struct StdioUpstream {
    record: std::path::PathBuf,
}

impl StdioUpstream {
    /// An upstream recording to a file of its own.
    pub fn new() -> StdioUpstream {
        let record = std::env::temp_dir().join(format!("holdpoint-stdio-upstream-{}.jsonl", uuid::Uuid::now_v7()));
        StdioUpstream { record }
    }

    /// The configuration file's entry for it: `[[gateway.upstreams]]` with this `name` in `workspace`.
    pub async fn entry(&self, workspace: &str, name: &str) -> holdpoint::doors::gateway::stdio::StdioUpstream {
        let python = tokio::task::spawn_blocking(python).await.unwrap();
        holdpoint::doors::gateway::stdio::StdioUpstream {
            workspace: workspace.to_owned(),
            name: name.to_owned(),
            command: python.display().to_string(),
            args: vec![here().join("mcp_upstream.py").display().to_string(), name.to_owned(), "--stdio".into()],
            env: [("MCP_UPSTREAM_RECORD".to_owned(), self.record.display().to_string())].into(),
            cwd: Some(std::env::temp_dir()),
        }
    }

    fn lines(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.record).unwrap_or_default();
        text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }

    /// The process ids it was started with, in order.
    pub fn pids(&self) -> Vec<u32> {
        self.lines().iter().filter_map(|line| line["pid"].as_u64()).map(|pid| pid as u32).collect()
    }

    /// The tool calls it received: `{"tool", "arguments"}` each.
    pub fn calls(&self) -> Vec<Value> {
        self.lines().into_iter().filter(|line| line.get("tool").is_some()).collect()
    }
}

impl Drop for StdioUpstream {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.record);
    }
}

/// Whether process `pid` still runs (a zombie, killed and not yet reaped, does not).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}
