//! SSE fan-out: N clients hold `GET /api/v1/events` open; one question is asked; how long until every client has
//! read its `question_asked`, and how much server memory each open stream costs.
//!
//! The subscribers are plain TCP connections that write one request and scan what comes back, not full HTTP
//! clients: 10 000 of them must cost the load generator as little CPU and memory as possible, so the figures are
//! the server's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::report::{Figure, Section};
use crate::server::{FreshDb, Server, expect_success, http};
use crate::{Samples, ms};

const SIZES: [usize; 2] = [1_000, 10_000];
/// Questions asked, one after the other, to every set of subscribers.
const ROUNDS: usize = 5;
/// Connections opened at once: the listen backlog (1024) must never overflow.
const CONNECTING: usize = 128;
const PROJECT: &str = "fanout";

pub async fn run() -> Result<Section, String> {
    let mut section = Section::new("SSE fan-out");
    let needed = SIZES.iter().max().copied().unwrap_or(0) as u64 + 200;
    let limit = open_files_limit();
    if limit < needed {
        return Err(format!(
            "the fan-out needs {needed} open files in this process and in the server, but the limit is {limit}: \
             raise it (`ulimit -n {needed}`) and run again"
        ));
    }
    for size in SIZES {
        let outcome = measure(size).await?;
        let label = format!("SSE fan-out, {size} subscribers");
        let latency = format!(
            "p50 {} · p99 {} · max {}",
            ms(outcome.latency.p50()),
            ms(outcome.latency.p99()),
            ms(outcome.latency.max())
        );
        let per_subscriber = format!("{:.1} KiB", outcome.rss_per_subscriber_kib);
        if size == 10_000 {
            section.figures.push(Figure::new(
                format!("{label}: every subscriber has the event"),
                latency,
                "p99 ≤ 1 s",
                outcome.latency.p99() <= Duration::from_secs(1) && outcome.missing == 0,
            ));
            section.figures.push(Figure::new(
                format!("{label}: server RSS per subscriber"),
                per_subscriber,
                "≤ 16 KiB",
                outcome.rss_per_subscriber_kib <= 16.0,
            ));
        } else {
            section.figures.push(Figure::info(format!("{label}: every subscriber has the event"), latency));
            section.figures.push(Figure::info(format!("{label}: server RSS per subscriber"), per_subscriber));
        }
        section.notes.push(format!(
            "{label}: connected in {:.1} s; server RSS {} KiB before, {} KiB with every stream open; {} deliveries \
             measured{}.",
            outcome.connect_time.as_secs_f64(),
            outcome.rss_before_kib,
            outcome.rss_after_kib,
            outcome.latency.len(),
            if outcome.missing == 0 {
                String::new()
            } else {
                format!(", **{} never arrived within 30 s**", outcome.missing)
            }
        ));
    }
    section.notes.insert(
        0,
        format!(
            "A fresh server on SQLite. N connections open `GET /api/v1/events?project={PROJECT}` (at most \
             {CONNECTING} connecting at once) and each waits for its `200`. The server's VmRSS (`/proc/<pid>/status`) \
             is read after a warm-up request and again once all N streams are open and the server has been idle \
             for a second; the difference divided by N is the RSS per subscriber. Then {ROUNDS} questions are asked \
             one after another; for each, the time from sending `POST /api/v1/questions` to each subscriber reading \
             its `question_asked` frame is one sample (N × {ROUNDS} samples)."
        ),
    );
    Ok(section)
}

struct Outcome {
    latency: Samples,
    missing: usize,
    connect_time: Duration,
    rss_before_kib: u64,
    rss_after_kib: u64,
    rss_per_subscriber_kib: f64,
}

/// The soft limit on open files of this process (the server inherits it).
fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits.lines().find(|l| l.starts_with("Max open files")).and_then(|l| {
                l.trim_start_matches("Max open files").split_whitespace().next().and_then(|v| v.parse().ok())
            })
        })
        .unwrap_or(u64::MAX)
}

async fn measure(size: usize) -> Result<Outcome, String> {
    let db = FreshDb::sqlite()?;
    let server = Server::start(&format!("fanout-{size}"), &db).await?;
    let result = measure_on(&server, size).await;
    server.stop().await;
    result
}

async fn measure_on(server: &Server, size: usize) -> Result<Outcome, String> {
    let client = http();
    let ask = |n: usize| {
        let request = client
            .post(format!("{}/api/v1/questions", server.base))
            .bearer_auth(&server.token)
            .json(&json!({ "title": format!("Fan-out probe {n}"), "project": PROJECT }));
        async move { expect_success(request.send().await.map_err(|e| e.to_string())?, "POST /questions").await }
    };
    // Warm-up: the first request opens the database connections and fills the allocator's pools.
    ask(0).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before_kib = server.rss_kib()?;

    let (arrivals, mut arrived) = mpsc::unbounded_channel::<(usize, Instant)>();
    let (connected_tx, mut connected) = mpsc::channel::<Result<(), String>>(size);
    let gate = Arc::new(Semaphore::new(CONNECTING));
    let request = format!(
        "GET /api/v1/events?project={PROJECT} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Accept: text/event-stream\r\n\r\n",
        server.addr, server.token
    );
    let connecting = Instant::now();
    let mut subscribers = JoinSet::new();
    for _ in 0..size {
        let (addr, request, gate) = (server.addr.clone(), request.clone(), gate.clone());
        let (arrivals, connected_tx) = (arrivals.clone(), connected_tx.clone());
        subscribers.spawn(async move {
            let permit = gate.acquire_owned().await.expect("the gate stays open");
            let stream = subscribe(&addr, &request).await;
            drop(permit);
            match stream {
                Ok((stream, rest)) => {
                    let _ = connected_tx.send(Ok(())).await;
                    read_events(stream, rest, arrivals).await;
                }
                Err(err) => {
                    let _ = connected_tx.send(Err(err)).await;
                }
            }
        });
    }
    drop(arrivals);
    for _ in 0..size {
        match tokio::time::timeout(Duration::from_secs(120), connected.recv()).await {
            Ok(Some(Ok(()))) => {}
            Ok(Some(Err(err))) => return Err(format!("a subscriber could not connect: {err}")),
            Ok(None) | Err(_) => return Err("the subscribers did not all connect within 120 s".into()),
        }
    }
    let connect_time = connecting.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after_kib = server.rss_kib()?;

    let mut latency = Samples::default();
    let mut missing = 0;
    for round in 0..ROUNDS {
        let sent = Instant::now();
        ask(round + 1).await?;
        let mut received = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while received < size {
            match tokio::time::timeout_at(deadline, arrived.recv()).await {
                Ok(Some((n, at))) if n == round => {
                    received += 1;
                    latency.push(at.saturating_duration_since(sent));
                }
                // A late arrival of an earlier round (one that had timed out) is not this round's.
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        missing += size - received;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    subscribers.abort_all();
    let rss_per_subscriber_kib = rss_after_kib.saturating_sub(rss_before_kib) as f64 / size as f64;
    Ok(Outcome { latency, missing, connect_time, rss_before_kib, rss_after_kib, rss_per_subscriber_kib })
}

/// Opens a stream: sends the request and reads the response head; returns the stream and any body bytes read.
async fn subscribe(addr: &str, request: &str) -> Result<(TcpStream, Vec<u8>), String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    stream.write_all(request.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
    let mut head = Vec::with_capacity(1024);
    let mut buffer = [0u8; 1024];
    loop {
        let n = stream.read(&mut buffer).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection before answering".into());
        }
        head.extend_from_slice(&buffer[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let status =
                String::from_utf8_lossy(&head[..head.iter().position(|b| *b == b'\r').unwrap_or(0)]).into_owned();
            if !status.starts_with("HTTP/1.1 200") {
                return Err(format!("the event stream answered {status:?}"));
            }
            return Ok((stream, head[end + 4..].to_vec()));
        }
        if head.len() > 16 * 1024 {
            return Err("the response head is too long".into());
        }
    }
}

/// Reports the arrival of each `question_asked` frame (numbered from 0) until the stream ends.
async fn read_events(mut stream: TcpStream, mut pending: Vec<u8>, arrivals: mpsc::UnboundedSender<(usize, Instant)>) {
    const MARKER: &[u8] = b"question_asked";
    let mut seen = 0usize;
    let mut buffer = [0u8; 2048];
    loop {
        // Frames end with a blank line; whatever follows the last one waits for the next read.
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = pending.drain(..end + 2).collect();
            if frame.windows(MARKER.len()).any(|w| w == MARKER) {
                let _ = arrivals.send((seen, Instant::now()));
                seen += 1;
            }
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&buffer[..n]),
        }
    }
}
