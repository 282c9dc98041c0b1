//! The full human-in-the-loop cycle: an agent asks (`POST /questions`), a person's event stream shows the
//! question, the person answers (`POST /questions/{id}/answer`), and the agent's long-poll
//! (`GET /questions/{id}/wait`) returns the answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tokio::sync::Mutex;

use crate::report::{Figure, Section};
use crate::server::{Backend, FreshDb, Postgres, Server, expect_success, http};
use crate::{Samples, ms};

/// Cycles before this are not counted: connections, caches and the database warm up.
const WARM_UP: Duration = Duration::from_secs(2);
const MEASURE: Duration = Duration::from_secs(8);
const PROJECT: &str = "hitl-bench";
/// A memory-backed filesystem: SQLite there shows the server's own cost of a cycle, without the disk's flushes.
const TMPFS: &str = "/dev/shm";

struct Outcome {
    /// Latency of each cycle that started and ended inside the measuring window.
    cycles: Samples,
    /// From the agent sending the question to the person's stream showing it.
    seen: Samples,
    errors: u64,
    /// What the window cost the machine's CPUs; `None` if `/proc` could not be read.
    cpu: Option<CpuUse>,
}

/// CPU time over the measuring window, in jiffies.
struct CpuUse {
    server: u64,
    load_generator: u64,
    /// Every CPU's busy time, the two above included (PostgreSQL's backends are the rest).
    busy: u64,
    /// Busy and idle time of every CPU.
    total: u64,
}

impl CpuUse {
    fn sample(server_pid: u32) -> Option<[u64; 4]> {
        let (busy, total) = crate::machine::cpu_jiffies()?;
        let server = crate::machine::process_jiffies(server_pid)?;
        let load_generator = crate::machine::process_jiffies(std::process::id())?;
        Some([server, load_generator, busy, total])
    }

    fn between(before: [u64; 4], after: [u64; 4]) -> Self {
        let d = |i: usize| after[i].saturating_sub(before[i]);
        Self { server: d(0), load_generator: d(1), busy: d(2), total: d(3) }
    }

    /// "server 0.81 ms · load generator 0.20 ms · the rest 0.04 ms; 21 % idle", per cycle of `cycles`.
    fn per_cycle(&self, cycles: usize) -> String {
        let hz = crate::machine::jiffies_per_second() as f64;
        let per = |jiffies: u64| ms(Duration::from_secs_f64(jiffies as f64 / hz / cycles.max(1) as f64));
        let rest = self.busy.saturating_sub(self.server + self.load_generator);
        let idle = 100.0 * (1.0 - self.busy as f64 / self.total.max(1) as f64);
        format!(
            "server {} · load generator {} · the rest {}; {idle:.0} % idle",
            per(self.server),
            per(self.load_generator),
            per(rest)
        )
    }
}

pub async fn run(postgres: Option<&Postgres>) -> Result<Section, String> {
    let mut section = Section::new("Full HITL cycle");
    let memory = std::path::Path::new(TMPFS);
    let only = Only::from_env()?;
    for (backend, in_memory) in [(Backend::Sqlite, false), (Backend::Postgres, false), (Backend::Sqlite, true)] {
        if (backend == Backend::Postgres && postgres.is_none()) || (in_memory && !memory.is_dir()) {
            continue;
        }
        if only.as_ref().is_some_and(|only| only.backend != where_label(backend, in_memory)) {
            continue;
        }
        for agents in [1usize, 16] {
            if only.as_ref().is_some_and(|only| only.agents.is_some_and(|n| n != agents)) {
                continue;
            }
            let db = if in_memory { FreshDb::sqlite_in(memory)? } else { FreshDb::fresh(backend, postgres).await? };
            let where_ = where_label(backend, in_memory);
            let name = format!("hitl-{}-{agents}", where_.replace(' ', "-"));
            let server = Server::start_with(&name, &db, &channel_settings()).await?;
            let outcome = measure(&server, agents).await;
            server.stop().await;
            let outcome = outcome?;
            let label = format!("HITL cycle, {agents} agent{}, {where_}", if agents == 1 { "" } else { "s" });
            let rate = outcome.cycles.len() as f64 / MEASURE.as_secs_f64();
            let latency = format!("p50 {} · p99 {}", ms(outcome.cycles.p50()), ms(outcome.cycles.p99()));
            if in_memory {
                section.figures.push(Figure::info(format!("{label}: latency"), latency));
                section.figures.push(Figure::info(format!("{label}: throughput"), format!("{rate:.0} cycles/s")));
                section.figures.extend(cpu_figure(&label, &outcome));
                section.notes.push(format!(
                    "{label}: {} cycles in the {} s window.",
                    outcome.cycles.len(),
                    MEASURE.as_secs()
                ));
                continue;
            }
            match (backend, agents) {
                (Backend::Sqlite, 1) => {
                    let pass = outcome.cycles.p50() <= Duration::from_millis(2)
                        && outcome.cycles.p99() <= Duration::from_millis(10);
                    section.figures.push(Figure::new(
                        format!("{label}: latency"),
                        latency,
                        "p50 ≤ 2 ms, p99 ≤ 10 ms",
                        pass,
                    ));
                    section.figures.push(Figure::info(format!("{label}: throughput"), format!("{rate:.0} cycles/s")));
                }
                (Backend::Sqlite, _) => {
                    section.figures.push(Figure::new(
                        format!("{label}: throughput"),
                        format!("{rate:.0} cycles/s"),
                        "≥ 3 000 cycles/s",
                        rate >= 3000.0,
                    ));
                    section.figures.push(Figure::info(format!("{label}: latency"), latency));
                }
                (Backend::Postgres, 1) => {
                    section.figures.push(Figure::info(format!("{label}: latency"), latency));
                    section.figures.push(Figure::info(format!("{label}: throughput"), format!("{rate:.0} cycles/s")));
                }
                (Backend::Postgres, _) => {
                    section.figures.push(Figure::new(
                        format!("{label}: throughput"),
                        format!("{rate:.0} cycles/s"),
                        "≥ 1 000 cycles/s",
                        rate >= 1000.0,
                    ));
                    section.figures.push(Figure::info(format!("{label}: latency"), latency));
                }
            }
            section.figures.push(Figure::info(
                format!("{label}: asked → seen on the event stream"),
                format!("p50 {} · p99 {}", ms(outcome.seen.p50()), ms(outcome.seen.p99())),
            ));
            section.figures.extend(cpu_figure(&label, &outcome));
            if outcome.errors > 0 {
                section.notes.push(format!("**{label}: {} request(s) failed** (see the server log).", outcome.errors));
            }
            section.notes.push(format!(
                "{label}: {} cycles in the {} s window.",
                outcome.cycles.len(),
                MEASURE.as_secs()
            ));
        }
    }
    section.notes.insert(
        0,
        format!(
            "Each agent loops: `POST /api/v1/questions` (a text question), then `GET /api/v1/questions/{{id}}/wait`. \
             One person holds `GET /api/v1/events?project={PROJECT}` open and answers every `question_asked` it \
             reads with `POST /api/v1/questions/{{id}}/answer`. A cycle's latency runs from the agent sending its \
             question to its long-poll returning the answer; cycles/s counts the cycles that started after a {} s \
             warm-up and ended within the next {} s. Every agent, the person and the server each use their own \
             connections; the bootstrap admin token authenticates every request (the suite lifts the per-token and \
             per-address creation rate limits, which would otherwise cap it at 20 questions a second). Each \
             configuration gets a fresh \
             database and server. The rows \"SQLite on tmpfs\" (no target) repeat the SQLite runs with the database \
             file in `{TMPFS}`, where `fsync` costs nothing: the difference to the durable rows is what the disk's \
             flushes cost (see \"one durable write\" under Machine). \"CPU per cycle\" divides CPU time over \
             the {} s window by the cycles counted: the server's and the load generator's (utime and stime of \
             `/proc/<pid>/stat`), and \"the rest\", every CPU's busy time (`/proc/stat`) less those two, which on \
             PostgreSQL is its backends; \"idle\" is the share of the machine's CPU time that nothing used.",
            WARM_UP.as_secs(),
            MEASURE.as_secs(),
            MEASURE.as_secs()
        ),
    );
    Ok(section)
}

/// `HOLDPOINT_BENCH_CHANNELS=idle` configures every channel (email, Slack, web push) with nobody to reach on them:
/// what configured channels cost a cycle that sends nothing, for an A/B against the same load without them.
fn channel_settings() -> Vec<(&'static str, &'static str)> {
    if std::env::var("HOLDPOINT_BENCH_CHANNELS").as_deref() != Ok("idle") {
        return Vec::new();
    }
    vec![
        // Nothing listens on port 1 of the loopback address; no member has an address, so nothing is sent.
        ("HOLDPOINT_SMTP_URL", "smtp://127.0.0.1:1?tls=none"),
        ("HOLDPOINT_EMAIL_FROM", "Holdpoint <holdpoint@example.com>"),
        ("HOLDPOINT_SLACK_BOT_TOKEN", "xoxb-bench"),
        ("HOLDPOINT_SLACK_SIGNING_SECRET", "bench-signing-secret"),
        ("HOLDPOINT_SLACK_API_URL", "http://127.0.0.1:1/api"),
        ("HOLDPOINT_VAPID_SUBJECT", "mailto:bench@example.com"),
    ]
}

/// The row "CPU per cycle" of a configuration, when `/proc` could be read.
fn cpu_figure(label: &str, outcome: &Outcome) -> Option<Figure> {
    let cpu = outcome.cpu.as_ref()?;
    Some(Figure::info(format!("{label}: CPU per cycle"), cpu.per_cycle(outcome.cycles.len())))
}

fn where_label(backend: Backend, in_memory: bool) -> &'static str {
    if in_memory { "SQLite on tmpfs" } else { backend.label() }
}

/// `HOLDPOINT_BENCH_HITL=postgresql` (or `sqlite`, `tmpfs`), optionally with `:16` or `:1`, runs one configuration
/// of this part: for profiling and A/B runs, which need the same load again without the other rows' minute.
struct Only {
    backend: &'static str,
    agents: Option<usize>,
}

impl Only {
    fn from_env() -> Result<Option<Self>, String> {
        let Ok(value) = std::env::var("HOLDPOINT_BENCH_HITL") else { return Ok(None) };
        let (backend, agents) = value.split_once(':').map_or((value.as_str(), None), |(b, n)| (b, Some(n)));
        let backend = match backend {
            "sqlite" => where_label(Backend::Sqlite, false),
            "postgresql" => where_label(Backend::Postgres, false),
            "tmpfs" => where_label(Backend::Sqlite, true),
            other => {
                return Err(format!("HOLDPOINT_BENCH_HITL: unknown backend {other:?} (sqlite, postgresql, tmpfs)"));
            }
        };
        let agents = agents
            .map(|n| n.parse().map_err(|_| format!("HOLDPOINT_BENCH_HITL: {n:?} is not a number of agents")))
            .transpose()?;
        Ok(Some(Self { backend, agents }))
    }
}

async fn measure(server: &Server, agents: usize) -> Result<Outcome, String> {
    let epoch = Instant::now();
    let errors = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(Samples::default()));
    let warm_end = epoch + WARM_UP;
    let end = warm_end + MEASURE;
    let person =
        tokio::spawn(person(server.base.clone(), server.token.clone(), epoch, warm_end, seen.clone(), errors.clone()));
    // The person's stream must be open before the first question, or the first cycles would wait for nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut tasks = Vec::new();
    for agent in 0..agents {
        let (base, token, errors) = (server.base.clone(), server.token.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let client = http();
            let mut cycles = Samples::default();
            let mut n = 0u64;
            while Instant::now() < end {
                n += 1;
                let started = Instant::now();
                match cycle(&client, &base, &token, agent, n, epoch).await {
                    Ok(()) => {
                        if started >= warm_end && Instant::now() <= end {
                            cycles.push(started.elapsed());
                        }
                    }
                    Err(err) => {
                        if errors.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!("bench: a cycle failed: {err}");
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            cycles
        }));
    }
    let server_pid = server.pid;
    let cpu = tokio::spawn(async move {
        tokio::time::sleep_until(warm_end.into()).await;
        let before = CpuUse::sample(server_pid);
        tokio::time::sleep_until(end.into()).await;
        Some(CpuUse::between(before?, CpuUse::sample(server_pid)?))
    });
    let mut cycles = Samples::default();
    for task in tasks {
        cycles.extend(&task.await.map_err(|e| e.to_string())?);
    }
    person.abort();
    let cpu = cpu.await.ok().flatten();
    let seen = seen.lock().await.clone();
    Ok(Outcome { cycles, seen, errors: errors.load(Ordering::Relaxed), cpu })
}

/// One agent's cycle: ask, then long-poll until answered.
async fn cycle(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    agent: usize,
    n: u64,
    epoch: Instant,
) -> Result<(), String> {
    let question = json!({
        "title": format!("Agent {agent}: may I deploy build {n}?"),
        "body": "The canary is green; the change touches the billing service.",
        "project": PROJECT,
        "context": { "sent_us": epoch.elapsed().as_micros() as u64 },
    });
    let response = client.post(format!("{base}/api/v1/questions")).bearer_auth(token).json(&question).send().await;
    let created = expect_success(response.map_err(|e| e.to_string())?, "POST /questions").await?;
    let created: Read = serde_json::from_slice(&created.bytes().await.map_err(|e| e.to_string())?)
        .map_err(|e| format!("the created question: {e}"))?;
    let id = created.id;
    let response = client
        .get(format!("{base}/api/v1/questions/{id}/wait?timeout_seconds=30"))
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let waited = expect_success(response, "GET /wait").await?.bytes().await.map_err(|e| e.to_string())?;
    let waited: Read = serde_json::from_slice(&waited).map_err(|e| format!("the long-poll's question: {e}"))?;
    if waited.status != "answered" {
        return Err(format!("the long-poll returned a question that is {}", waited.status));
    }
    Ok(())
}

/// What the load generator reads of a question: the whole body is parsed (so it must be JSON), the rest of its
/// fields skipped rather than built into a `serde_json::Value`, since the load generator's CPU is the server's too.
#[derive(serde::Deserialize)]
struct Read {
    id: uuid::Uuid,
    status: String,
    #[serde(default)]
    context: Option<SentAt>,
}

#[derive(serde::Deserialize)]
struct SentAt {
    sent_us: Option<u64>,
}

/// A `question_asked` event's data.
#[derive(serde::Deserialize)]
struct Asked {
    question: Read,
}

/// The person: reads the event stream and answers every question it shows.
async fn person(
    base: String,
    token: String,
    epoch: Instant,
    warm_end: Instant,
    seen: Arc<Mutex<Samples>>,
    errors: Arc<AtomicU64>,
) {
    let client = http();
    let stream = client.get(format!("{base}/api/v1/events?project={PROJECT}")).bearer_auth(&token).send().await;
    let Ok(stream) = stream else {
        errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("bench: the person's event stream did not open");
        return;
    };
    let mut bytes = stream.bytes_stream();
    let mut buffer = Vec::new();
    while let Some(Ok(chunk)) = bytes.next().await {
        buffer.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(end) = buffer[start..].windows(2).position(|pair| pair == b"\n\n").map(|at| start + at) {
            let frame = std::str::from_utf8(&buffer[start..end]).unwrap_or_default();
            start = end + 2;
            if !frame.lines().any(|l| l.strip_prefix("event:").is_some_and(|e| e.trim() == "question_asked")) {
                continue;
            }
            let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data:")) else { continue };
            let Ok(Asked { question }) = serde_json::from_str::<Asked>(data.trim()) else { continue };
            if let Some(sent) = question.context.and_then(|context| context.sent_us) {
                let now = Instant::now();
                if now >= warm_end {
                    let sent = epoch + Duration::from_micros(sent);
                    seen.lock().await.push(now.saturating_duration_since(sent));
                }
            }
            let id = question.id;
            let (client, base, token, errors) = (client.clone(), base.clone(), token.clone(), errors.clone());
            tokio::spawn(async move {
                let answer = client
                    .post(format!("{base}/api/v1/questions/{id}/answer"))
                    .bearer_auth(&token)
                    .json(&json!({ "value": "yes, go ahead" }))
                    .send()
                    .await;
                let ok = match answer {
                    // Read to its end, so the connection goes back to the pool for the next answer.
                    Ok(response) => match expect_success(response, "POST /answer").await {
                        Ok(response) => response.bytes().await.map(|_| ()).map_err(|err| err.to_string()),
                        Err(err) => Err(err),
                    },
                    Err(err) => Err(err.to_string()),
                };
                if let Err(err) = ok
                    && errors.fetch_add(1, Ordering::Relaxed) == 0
                {
                    eprintln!("bench: an answer failed: {err}");
                }
            });
        }
        buffer.drain(..start);
    }
}
