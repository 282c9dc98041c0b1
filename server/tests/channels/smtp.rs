//! A real SMTP server for the tests: aiosmtpd on loopback (`smtp_sink.py`), which parses each message it accepts
//! with Python's own MIME and HTML parsers and reports what it found, one JSON line per message.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use super::python::{here, python};

/// The SMTP server process, ended with the test.
pub struct Sink {
    _process: Child,
    pub port: u16,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Sink {
    pub async fn start() -> Sink {
        Sink::start_on(0).await
    }

    /// A server on `port` of the loopback address (0: any free one).
    pub async fn start_on(port: u16) -> Sink {
        let python = tokio::task::spawn_blocking(python).await.unwrap();
        let mut process = Command::new(python)
            .arg(here().join("smtp_sink.py"))
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.unwrap().unwrap().unwrap();
        let port = first.strip_prefix("LISTENING ").unwrap_or_else(|| panic!("{first}")).parse().unwrap();
        Sink { _process: process, port, lines }
    }

    /// `smtp://` to this server, in the clear (it offers no STARTTLS).
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}?tls=none", self.port)
    }

    /// The next message the server accepts within `wait`, if one comes.
    pub async fn message_within(&mut self, wait: Duration) -> Option<Value> {
        let line = tokio::time::timeout(wait, self.lines.next_line()).await.ok()?.unwrap();
        Some(serde_json::from_str(&line.expect("the SMTP server ended")).unwrap())
    }

    /// The next message the server accepted, as it parsed it.
    pub async fn next_message(&mut self) -> Value {
        self.message_within(Duration::from_secs(20)).await.expect("the SMTP server accepted no message")
    }
}
