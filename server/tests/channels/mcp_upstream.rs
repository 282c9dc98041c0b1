//! An upstream MCP server for the gateway's tests: `mcp_upstream.py` (the official Python SDK's FastMCP) on
//! loopback, which reports every tool call it receives, one JSON line each.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::python::{here, python};

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
        let mut process = Command::new(python)
            .arg(here().join("mcp_upstream.py"))
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
