//! Delivery latency: from a question being asked to its message being accepted by the channel's service — an SMTP
//! server taking the email (`250` after `DATA`) and Slack's Web API taking `chat.postMessage` — at a steady rate of 1
//! and of 100 questions a second.
//!
//! Both services are local receivers in this process that note when each message arrived: the SMTP one speaks just
//! enough of RFC 5321 for an SMTP client (greeting, `EHLO`, `MAIL`, `RCPT`, `DATA`, `QUIT`), and the Slack one answers
//! `chat.postMessage` as Slack does (`{"ok": true, "channel", "ts"}`). What is timed is the server's outbox — waking on
//! the question's event, claiming the delivery, rendering and sending it — and the network round trips on loopback.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::report::{Figure, Section};
use crate::server::{FreshDb, Server, ask_steadily, expect_success, http, question_number};
use crate::{Samples, ms};

/// Questions a second, and how long each rate is kept up.
const RATES: [(u32, Duration); 2] = [(1, Duration::from_secs(15)), (100, Duration::from_secs(10))];
/// How long the last messages may take to arrive before they count as lost.
const DRAIN: Duration = Duration::from_secs(10);
const TITLE: &str = "Delivery bench question";

/// When each question's message arrived, by the question's number in its title.
type Arrivals = Arc<Mutex<HashMap<usize, Instant>>>;

pub async fn run() -> Result<Section, String> {
    let mut section = Section::new("Delivery latency");
    for (rate, duration) in RATES {
        let outcome = measure(rate, duration).await?;
        for (channel, samples, lost) in
            [("email", &outcome.email, outcome.email_lost), ("Slack", &outcome.slack, outcome.slack_lost)]
        {
            let label = format!("Asked → {channel} accepted, {rate} question{}/s", if rate == 1 { "" } else { "s" });
            let measured = format!("p50 {} · p99 {} · max {}", ms(samples.p50()), ms(samples.p99()), ms(samples.max()));
            let pass = lost == 0 && samples.p99() <= Duration::from_secs(1);
            section.figures.push(Figure::new(label.clone(), measured, "p99 ≤ 1 s", pass));
            section.notes.push(format!(
                "{label}: {} messages timed{}.",
                samples.len(),
                if lost == 0 {
                    String::new()
                } else {
                    format!(", **{lost} never arrived within {} s**", DRAIN.as_secs())
                }
            ));
        }
    }
    section.notes.insert(
        0,
        format!(
            "A fresh server on SQLite with email (`HOLDPOINT_SMTP_URL`, plain SMTP on loopback) and Slack \
             (`HOLDPOINT_SLACK_API_URL` on loopback, direct messages) configured, and one approver with an email \
             address and a Slack id. Questions (`high`, so both channels take them) are asked at a steady rate \
             from one client; a question's latency runs from sending its `POST /api/v1/questions` to the local \
             SMTP server receiving the end of its email's `DATA`, and to the local Slack stand-in receiving its \
             `chat.postMessage`. Rates and lengths: {}.",
            RATES.iter().map(|(r, d)| format!("{r}/s for {} s", d.as_secs())).collect::<Vec<_>>().join(", ")
        ),
    );
    Ok(section)
}

struct Outcome {
    email: Samples,
    slack: Samples,
    email_lost: usize,
    slack_lost: usize,
}

async fn measure(rate: u32, duration: Duration) -> Result<Outcome, String> {
    let emails: Arrivals = Arc::default();
    let slack_posts: Arrivals = Arc::default();
    let smtp = TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("cannot listen for SMTP: {e}"))?;
    let smtp_port = smtp.local_addr().map_err(|e| e.to_string())?.port();
    let slack = TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("cannot listen for Slack: {e}"))?;
    let slack_port = slack.local_addr().map_err(|e| e.to_string())?.port();
    let smtp_task = tokio::spawn(serve_smtp(smtp, Arc::clone(&emails)));
    let slack_task = tokio::spawn(serve_slack(slack, Arc::clone(&slack_posts)));

    let db = FreshDb::sqlite()?;
    let smtp_url = format!("smtp://127.0.0.1:{smtp_port}?tls=none");
    let slack_url = format!("http://127.0.0.1:{slack_port}/api");
    let env = [
        ("HOLDPOINT_SMTP_URL", smtp_url.as_str()),
        ("HOLDPOINT_EMAIL_FROM", "Holdpoint <holdpoint@example.com>"),
        ("HOLDPOINT_SLACK_BOT_TOKEN", "xoxb-bench"),
        ("HOLDPOINT_SLACK_SIGNING_SECRET", "bench-signing-secret"),
        ("HOLDPOINT_SLACK_API_URL", slack_url.as_str()),
    ];
    let server = Server::start_with(&format!("delivery-{rate}"), &db, &env).await?;
    let result = ask_at(&server, rate, duration, &emails, &slack_posts).await;
    server.stop().await;
    smtp_task.abort();
    slack_task.abort();
    result
}

async fn ask_at(
    server: &Server,
    rate: u32,
    duration: Duration,
    emails: &Arrivals,
    slack_posts: &Arrivals,
) -> Result<Outcome, String> {
    let client = http();
    let member = expect_success(
        client
            .post(format!("{}/api/v1/members", server.base))
            .bearer_auth(&server.token)
            .json(&json!({ "username": "approver", "password": "a long bench password", "role": "approver" }))
            .send()
            .await
            .map_err(|e| e.to_string())?,
        "adding the approver",
    )
    .await?
    .json::<serde_json::Value>()
    .await
    .map_err(|e| e.to_string())?;
    let user_id = member["user_id"].as_str().ok_or("the new member has no user_id")?.to_owned();
    expect_success(
        client
            .patch(format!("{}/api/v1/members/{user_id}", server.base))
            .bearer_auth(&server.token)
            .json(&json!({ "email": "approver@example.com", "slack_user_id": "U0BENCH" }))
            .send()
            .await
            .map_err(|e| e.to_string())?,
        "giving the approver addresses",
    )
    .await?;

    let asked_at = ask_steadily(server, rate, duration, TITLE, &json!({ "urgency": "high" })).await?;
    let count = asked_at.len();
    let deadline = Instant::now() + DRAIN;
    while Instant::now() < deadline {
        let arrived = |arrivals: &Arrivals| arrivals.lock().unwrap().len();
        if arrived(emails) >= count && arrived(slack_posts) >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let latencies = |arrivals: &Arrivals| {
        let arrivals = arrivals.lock().unwrap();
        let mut samples = Samples::default();
        for (n, asked) in asked_at.iter().enumerate() {
            if let Some(arrived) = arrivals.get(&n) {
                samples.push(arrived.saturating_duration_since(*asked));
            }
        }
        let lost = count - samples.len();
        (samples, lost)
    };
    let (email, email_lost) = latencies(emails);
    let (slack, slack_lost) = latencies(slack_posts);
    Ok(Outcome { email, slack, email_lost, slack_lost })
}

/// Accepts every message; notes when the end of each one's `DATA` arrived.
async fn serve_smtp(listener: TcpListener, arrivals: Arrivals) {
    while let Ok((stream, _)) = listener.accept().await {
        let arrivals = Arc::clone(&arrivals);
        tokio::spawn(async move {
            // Replies go out at once, as a real server's do: the figure is the sender's, not this receiver's.
            let _ = stream.set_nodelay(true);
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            if write.write_all(b"220 bench ESMTP\r\n").await.is_err() {
                return;
            }
            let mut message = String::new();
            let mut in_data = false;
            while let Ok(Some(line)) = lines.next_line().await {
                let reply: &[u8] = if in_data {
                    if line != "." {
                        message.push_str(&line);
                        message.push('\n');
                        continue;
                    }
                    in_data = false;
                    if let Some(n) = question_number(&message, TITLE) {
                        arrivals.lock().unwrap().entry(n).or_insert_with(Instant::now);
                    }
                    message.clear();
                    b"250 2.0.0 accepted\r\n"
                } else {
                    let verb = line.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
                    match verb.as_str() {
                        "EHLO" => b"250-bench\r\n250 8BITMIME\r\n",
                        "HELO" | "MAIL" | "RCPT" | "RSET" | "NOOP" => b"250 2.0.0 ok\r\n",
                        "DATA" => {
                            in_data = true;
                            b"354 end with <CRLF>.<CRLF>\r\n"
                        }
                        "QUIT" => {
                            let _ = write.write_all(b"221 2.0.0 bye\r\n").await;
                            return;
                        }
                        _ => b"502 5.5.2 not implemented\r\n",
                    }
                };
                if write.write_all(reply).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Answers `chat.postMessage` as Slack does; notes when each question's post arrived.
async fn serve_slack(listener: TcpListener, arrivals: Arrivals) {
    let app = axum::Router::new().route(
        "/api/chat.postMessage",
        axum::routing::post(move |body: String| {
            let arrivals = Arc::clone(&arrivals);
            async move {
                if let Some(n) = question_number(&body, TITLE) {
                    arrivals.lock().unwrap().entry(n).or_insert_with(Instant::now);
                }
                axum::Json(json!({ "ok": true, "channel": "D0BENCH", "ts": "1700000000.000100" }))
            }
        }),
    );
    let _ = axum::serve(listener, app).await;
}
