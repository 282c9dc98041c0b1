//! An S3-compatible server for the file storage's tests: `s3_server.py` (moto's server) on loopback, with one bucket
//! made. A test that cannot start it fails: nothing is skipped.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::python::{here, python};

/// The server process, ended with the test (its stdin closes and it is killed on drop).
pub struct S3Server {
    _process: Child,
    port: u16,
    bucket: String,
}

impl S3Server {
    /// Starts a server with the bucket `bucket`.
    pub async fn start(bucket: &str) -> S3Server {
        let python = tokio::task::spawn_blocking(python).await.unwrap();
        let mut process = Command::new(python)
            .arg(here().join("s3_server.py"))
            .arg(bucket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the S3 server (moto) starts");
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(port) = line.strip_prefix("listening ") {
                    return port.trim().parse().unwrap();
                }
            }
            panic!("the S3 server ended before listening")
        })
        .await
        .expect("the S3 server listens within 60 s");
        S3Server { _process: process, port, bucket: bucket.to_owned() }
    }

    /// Its endpoint, for `AWS_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The keys of the bucket's objects (moto answers unsigned requests).
    pub async fn keys(&self) -> Vec<String> {
        let url = format!("{}/{}?list-type=2", self.endpoint(), self.bucket);
        let listing = reqwest::get(url).await.unwrap().text().await.unwrap();
        listing
            .split("<Key>")
            .skip(1)
            .filter_map(|rest| rest.split_once("</Key>").map(|(key, _)| key.to_owned()))
            .collect()
    }
}
