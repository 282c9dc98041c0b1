//! A webhook receiver for the tests: `webhook_receiver.py` on loopback, which verifies each request with the
//! `standardwebhooks` package and reports it, one JSON line per request.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::python::{here, python};

/// The receiver process, ended with the test.
pub struct Receiver {
    _process: Child,
    stdin: ChildStdin,
    pub port: u16,
    lines: Lines<BufReader<ChildStdout>>,
    /// Requests reported while a command waited for its acknowledgement: the next ones [`Receiver::request_within`]
    /// returns.
    early: VecDeque<Value>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let python = tokio::task::spawn_blocking(python).await.unwrap();
        let mut process = Command::new(python)
            .arg(here().join("webhook_receiver.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = process.stdin.take().unwrap();
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.unwrap().unwrap().unwrap();
        let port = first.strip_prefix("LISTENING ").unwrap_or_else(|| panic!("{first}")).parse().unwrap();
        Receiver { _process: process, stdin, port, lines, early: VecDeque::new() }
    }

    /// The receiver's URL with `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Sends the receiver a command and waits until it has taken it; requests reported meanwhile are kept for
    /// [`Receiver::request_within`], since a sender's retries come whenever they are due.
    pub async fn command(&mut self, command: Value) {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        loop {
            let line = self.next_line(Duration::from_secs(10)).await.expect("the receiver takes commands");
            if line.get("ack").is_some() {
                assert_eq!(line["ack"], command, "{line}");
                return;
            }
            self.early.push_back(line);
        }
    }

    /// Verify with this secret too.
    pub async fn trust(&mut self, secret: &str) {
        self.command(json!({ "secret": secret })).await;
    }

    async fn next_line(&mut self, wait: Duration) -> Option<Value> {
        let line = tokio::time::timeout(wait, self.lines.next_line()).await.ok()?.unwrap();
        Some(serde_json::from_str(&line.expect("the receiver ended")).unwrap())
    }

    /// The next request the receiver got within `wait`, if one came.
    pub async fn request_within(&mut self, wait: Duration) -> Option<Value> {
        match self.early.pop_front() {
            Some(request) => Some(request),
            None => self.next_line(wait).await,
        }
    }

    /// The next request the receiver got.
    pub async fn next_request(&mut self) -> Value {
        self.request_within(Duration::from_secs(30)).await.expect("the receiver got no request")
    }
}
