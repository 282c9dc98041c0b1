//! Webhook latency: from an event to the first attempt of its webhook delivery reaching the receiver, at a steady
//! rate of 1 and of 100 events a second.
//!
//! The receiver is a local HTTP server in this process that notes when each request arrived and answers `204`.
//! What is timed is the server's webhook worker — hearing the event from its hub, queueing the delivery, claiming the
//! endpoint's head and signing and sending it — and the round trip on loopback.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::net::TcpListener;

use crate::report::{Figure, Section};
use crate::server::{FreshDb, Server, ask_steadily, expect_success, http, question_number};
use crate::{Samples, ms};

/// Events a second, and how long each rate is kept up.
const RATES: [(u32, Duration); 2] = [(1, Duration::from_secs(15)), (100, Duration::from_secs(10))];
/// How long the last deliveries may take to arrive before they count as lost.
const DRAIN: Duration = Duration::from_secs(10);
const TITLE: &str = "Webhook bench question";

/// When each question's `question_asked` delivery first arrived, by the question's number in its title.
type Arrivals = Arc<Mutex<HashMap<usize, Instant>>>;

pub async fn run() -> Result<Section, String> {
    let mut section = Section::new("Webhook latency");
    for (rate, duration) in RATES {
        let (samples, lost) = measure(rate, duration).await?;
        let label = format!("Event → first webhook attempt, {rate} event{}/s", if rate == 1 { "" } else { "s" });
        let measured = format!("p50 {} · p99 {} · max {}", ms(samples.p50()), ms(samples.p99()), ms(samples.max()));
        let pass = lost == 0 && samples.p99() <= Duration::from_millis(500);
        section.figures.push(Figure::new(label.clone(), measured, "p99 ≤ 500 ms", pass));
        section.notes.push(format!(
            "{label}: {} deliveries timed{}.",
            samples.len(),
            if lost == 0 { String::new() } else { format!(", **{lost} never arrived within {} s**", DRAIN.as_secs()) }
        ));
    }
    section.notes.insert(
        0,
        format!(
            "A fresh server on SQLite with `HOLDPOINT_WEBHOOK_ALLOW_PRIVATE=true` and one webhook subscribed to \
             `question_asked` at a receiver on loopback that answers `204`. Questions are asked at a steady rate \
             from one client; a delivery's latency runs from sending the `POST /api/v1/questions` that makes the \
             event (so the event's own commit is inside the figure) to the receiver having read the delivery's \
             request. Rates and lengths: {}.",
            RATES.iter().map(|(r, d)| format!("{r}/s for {} s", d.as_secs())).collect::<Vec<_>>().join(", ")
        ),
    );
    Ok(section)
}

async fn measure(rate: u32, duration: Duration) -> Result<(Samples, usize), String> {
    let arrivals: Arrivals = Arc::default();
    let receiver = TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("cannot listen: {e}"))?;
    let port = receiver.local_addr().map_err(|e| e.to_string())?.port();
    let receiver_task = tokio::spawn(serve_receiver(receiver, Arc::clone(&arrivals)));
    let db = FreshDb::sqlite()?;
    let server =
        Server::start_with(&format!("webhooks-{rate}"), &db, &[("HOLDPOINT_WEBHOOK_ALLOW_PRIVATE", "true")]).await?;
    let result = ask_at(&server, rate, duration, port, &arrivals).await;
    server.stop().await;
    receiver_task.abort();
    result
}

async fn ask_at(
    server: &Server,
    rate: u32,
    duration: Duration,
    port: u16,
    arrivals: &Arrivals,
) -> Result<(Samples, usize), String> {
    let client = http();
    expect_success(
        client
            .post(format!("{}/api/v1/webhooks", server.base))
            .bearer_auth(&server.token)
            .json(&json!({ "url": format!("http://127.0.0.1:{port}/hook"), "events": ["question_asked"] }))
            .send()
            .await
            .map_err(|e| e.to_string())?,
        "subscribing the receiver",
    )
    .await?;
    let asked_at = ask_steadily(server, rate, duration, TITLE, &json!({})).await?;
    let count = asked_at.len();
    let deadline = Instant::now() + DRAIN;
    while Instant::now() < deadline && arrivals.lock().unwrap().len() < count {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let arrived = arrivals.lock().unwrap();
    let mut samples = Samples::default();
    for (n, asked) in asked_at.iter().enumerate() {
        if let Some(at) = arrived.get(&n) {
            samples.push(at.saturating_duration_since(*asked));
        }
    }
    let lost = count - samples.len();
    Ok((samples, lost))
}

/// Takes every delivery; notes when each question's first arrived.
async fn serve_receiver(listener: TcpListener, arrivals: Arrivals) {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let arrivals = Arc::clone(&arrivals);
            async move {
                if let Some(n) = question_number(&body, TITLE) {
                    arrivals.lock().unwrap().entry(n).or_insert_with(Instant::now);
                }
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let _ = axum::serve(listener, app).await;
}
