//! The inbox over 1 000 000 stored questions: pages of `GET /api/v1/questions` with the filters the inbox offers,
//! followed through their cursors.
//!
//! The questions are written straight into the database in large transactions (the API would take far longer than
//! the suite may), with the columns the server writes, encoded by the same sqlx types, so the server reads them as
//! its own.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use sqlx::{Connection, QueryBuilder, Sqlite};
use uuid::Uuid;

use crate::report::{Figure, Section};
use crate::server::{Backend, FreshDb, Postgres, Server, expect_success, http};
use crate::{Samples, ms};

pub const QUESTIONS: u64 = 1_000_000;
const PAGE: u32 = 50;
/// Pages followed through `next_cursor` from the first.
const DEPTH: usize = 10;
/// How often each filter's pages are walked.
const WALKS: usize = 10;
/// A filter that takes longer than this in all is cut short (and says so).
const FILTER_BUDGET: Duration = Duration::from_secs(15);
const PROJECTS: u64 = 20;
const SEARCH_WORD: &str = "rollback";

/// The inbox's filters (`/inbox` offers status, kind, project, urgency, text and the deadline order).
const FILTERS: [(&str, &str); 8] = [
    ("pending (the inbox's default)", "status=pending"),
    ("pending approvals", "status=pending&kind=approval"),
    ("pending, one project, high urgency", "status=pending&project=proj-07&urgency=high"),
    ("pending, soonest deadline first", "status=pending&sort=deadline"),
    ("one project, any status", "project=proj-03"),
    ("critical error recoveries, any status", "kind=error_recovery&urgency=critical"),
    ("any status, newest first", ""),
    ("text search", "q=rollback"),
];

pub async fn run(postgres: Option<&Postgres>) -> Result<Section, String> {
    let mut section = Section::new("Inbox over 1 000 000 questions");
    section.notes.push(format!(
        "{QUESTIONS} questions are written into a fresh database in transactions of 100 000 rows (SQLite: \
         multi-row `INSERT`s; PostgreSQL: `INSERT … SELECT FROM UNNEST(…)`), spread over 30 days: 5 % pending \
         (deadlines in the future for half of them), the rest answered, expired, defaulted or cancelled; kinds \
         40 % blocking, 20 % non-blocking, 30 % approval, 10 % error recovery; {PROJECTS} projects plus 10 % \
         without one; urgency 20 % low, 60 % normal, 15 % high, 5 % critical; one title in 16 mentions \
         \"{SEARCH_WORD}\". PostgreSQL then gets the `ANALYZE` its autovacuum would run after such a load; SQLite \
         gets nothing (Holdpoint never runs `ANALYZE` on it). A fresh server then answers `GET /api/v1/questions` \
         with each filter below: the first page and {} more through `next_cursor`, {PAGE} questions a page, the \
         walk repeated {WALKS} times after one walk to warm up. A sample is one page: from sending the request to \
         having read the whole response.",
        DEPTH - 1
    ));
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && postgres.is_none() {
            continue;
        }
        let db = FreshDb::fresh(backend, postgres).await?;
        let seeding = Instant::now();
        seed(&db).await?;
        let seeded_in = seeding.elapsed();
        let server = Server::start(&format!("inbox-{}", backend.label()), &db).await?;
        let measured = measure(&server).await;
        server.stop().await;
        let measured = measured?;
        let mut all = Samples::default();
        for (label, samples, pages, cut_short) in &measured {
            all.extend(samples);
            section.figures.push(Figure::new(
                format!("inbox over 1M, {}: {label}", backend.label()),
                format!("p50 {} · p99 {}", ms(samples.p50()), ms(samples.p99())),
                "p99 ≤ 10 ms",
                samples.p99() <= Duration::from_millis(10),
            ));
            if *cut_short || *pages < DEPTH {
                section.notes.push(format!(
                    "{} \"{label}\": {} samples{}{}.",
                    backend.label(),
                    samples.len(),
                    if *pages < DEPTH { format!(", only {pages} page(s) deep") } else { String::new() },
                    if *cut_short { format!(", cut short after {} s", FILTER_BUDGET.as_secs()) } else { String::new() }
                ));
            }
        }
        section.figures.push(Figure::new(
            format!("inbox over 1M, {}: every page above", backend.label()),
            format!("p50 {} · p99 {}", ms(all.p50()), ms(all.p99())),
            "p99 ≤ 10 ms",
            all.p99() <= Duration::from_millis(10),
        ));
        section.notes.push(format!(
            "{}: seeding took {:.1} s; {} pages measured in all.",
            backend.label(),
            seeded_in.as_secs_f64(),
            all.len()
        ));
    }
    Ok(section)
}

/// Walks every filter; per filter: its samples, how deep its pages went, and whether it ran out of time.
async fn measure(server: &Server) -> Result<Vec<(&'static str, Samples, usize, bool)>, String> {
    let client = http();
    let mut results = Vec::new();
    for (label, query) in FILTERS {
        let mut samples = Samples::default();
        let started = Instant::now();
        let mut cut_short = false;
        let mut depth = DEPTH;
        for walk in 0..=WALKS {
            let mut cursor: Option<String> = None;
            let mut pages = 0;
            while pages < DEPTH {
                let mut url = format!("{}/api/v1/questions?limit={PAGE}&{query}", server.base);
                if let Some(cursor) = &cursor {
                    url.push_str(&format!("&cursor={cursor}"));
                }
                let sent = Instant::now();
                let response = client.get(&url).bearer_auth(&server.token).send().await.map_err(|e| e.to_string())?;
                let body = expect_success(response, &format!("GET /questions?{query}"))
                    .await?
                    .bytes()
                    .await
                    .map_err(|e| e.to_string())?;
                let elapsed = sent.elapsed();
                if walk > 0 {
                    samples.push(elapsed);
                }
                pages += 1;
                let page: Value = serde_json::from_slice(&body).map_err(|e| format!("not a page: {e}"))?;
                if page["items"].as_array().is_none_or(Vec::is_empty) {
                    return Err(format!("the filter {query:?} found no questions: the seed is wrong"));
                }
                match page["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => break,
                }
            }
            depth = depth.min(pages);
            if started.elapsed() > FILTER_BUDGET && walk < WALKS {
                cut_short = true;
                break;
            }
        }
        results.push((label, samples, depth, cut_short));
    }
    Ok(results)
}

/// A small, fast, deterministic generator (SplitMix64): the same data on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One seeded question, in the columns the server writes (the others keep their defaults).
struct SeedRow {
    id: Uuid,
    project: Option<String>,
    kind: &'static str,
    response_type: &'static str,
    title: String,
    body: String,
    action: Option<String>,
    urgency: &'static str,
    timeout_at: Option<DateTime<Utc>>,
    status: &'static str,
    response: Option<String>,
    answered_by: Option<String>,
    resolution: Option<&'static str>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    resolved_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, workspace_id, project, kind, response_type, title, body, action, urgency, timeout_at, \
     status, response, answered_by, resolution, created_at, updated_at, resolved_at";

const TITLES: [&str; 16] = [
    "Deploy release 1.{n} to production?",
    "Rollback the billing migration {n}?",
    "Which persona should the release notes of build {n} use?",
    "Approve shell: terraform apply (plan {n})",
    "Severity of incident {n}?",
    "Mention the deprecation in changelog {n}?",
    "Retry the failed HTTP request {n}?",
    "Merge pull request #{n}?",
    "Rotate the API key of tenant {n}?",
    "Scale the worker pool to {n} nodes?",
    "Send the weekly report {n} to customers?",
    "Delete the stale branch feature-{n}?",
    "Which region should cluster {n} run in?",
    "Accept the vendor quote {n}?",
    "Pause the nightly job {n}?",
    "Restart the cache tier after alert {n}?",
];

fn seed_row(n: u64, start: DateTime<Utc>, now: DateTime<Utc>, rng: &mut Rng) -> SeedRow {
    // 1M questions over 30 days: one every 2.592 s, ids in creation order as UUIDv7 are.
    let created_at = start + chrono::Duration::milliseconds((n * 2592) as i64);
    let mut tail = [0u8; 10];
    tail[..8].copy_from_slice(&n.to_be_bytes());
    tail[8..].copy_from_slice(&(rng.next() as u16).to_be_bytes());
    let id = uuid::Builder::from_unix_timestamp_millis(created_at.timestamp_millis() as u64, &tail).into_uuid();
    let kind = match rng.below(100) {
        0..40 => "blocking",
        40..60 => "non_blocking",
        60..90 => "approval",
        _ => "error_recovery",
    };
    let response_type = match kind {
        "approval" => "approval",
        "error_recovery" => "error_recovery",
        _ if n.is_multiple_of(2) => "text",
        _ => "boolean",
    };
    let action = (kind == "approval").then(|| {
        format!(r#"{{"tool_name":"shell","arguments":{{"command":"terraform apply -target=module.m{}"}}}}"#, n % 97)
    });
    let project = if rng.below(10) == 0 { None } else { Some(format!("proj-{:02}", rng.below(PROJECTS))) };
    let urgency = match rng.below(100) {
        0..20 => "low",
        20..80 => "normal",
        80..95 => "high",
        _ => "critical",
    };
    let title = TITLES[rng.below(TITLES.len() as u64) as usize].replace("{n}", &n.to_string());
    let body = format!("Asked by agent `worker-{}` while working on ticket {}. Details are in the context.", n % 37, n);
    let has_deadline = rng.below(2) == 0;
    let (status, resolution) = match rng.below(1000) {
        0..50 => ("pending", None),
        50..900 => ("answered", Some("human")),
        900..950 => ("expired", None),
        950..980 => ("defaulted", Some("default_on_timeout")),
        _ => ("cancelled", Some("cancelled")),
    };
    let resolved_at = (status != "pending").then(|| created_at + chrono::Duration::minutes(5));
    // Pending questions' deadlines lie ahead (so the deadline worker has nothing to do); the others' are past.
    let timeout_at = has_deadline.then(|| {
        if status == "pending" {
            now + chrono::Duration::minutes(10 + rng.below(60 * 24 * 30) as i64)
        } else {
            created_at + chrono::Duration::hours(1)
        }
    });
    let response = match status {
        "answered" | "defaulted" => Some(r#"{"value":"yes"}"#.to_owned()),
        "cancelled" => Some(r#"{"value":null,"comment":"the run was cancelled"}"#.to_owned()),
        _ => None,
    };
    SeedRow {
        id,
        project,
        kind,
        response_type,
        title,
        body,
        action,
        urgency,
        timeout_at,
        status,
        response,
        answered_by: (status == "answered").then(|| "alice".to_owned()),
        resolution,
        created_at,
        updated_at: resolved_at.unwrap_or(created_at),
        resolved_at,
    }
}

/// Creates the schema and the `default` workspace through the library, then bulk-loads the questions.
async fn seed(db: &FreshDb) -> Result<(), String> {
    let store = holdpoint::store::connect(&db.url).await.map_err(|e| e.to_string())?;
    let workspace = store.ensure_workspace(holdpoint::server::DEFAULT_WORKSPACE).await.map_err(|e| e.to_string())?.id;
    drop(store);
    let now = Utc::now();
    let start = Utc.timestamp_millis_opt(now.timestamp_millis() - 31 * 24 * 3600 * 1000).unwrap();
    let mut rng = Rng(0x486F_6C64_706F_696E);
    match db.backend {
        Backend::Sqlite => seed_sqlite(&db.url, workspace, start, now, &mut rng).await,
        Backend::Postgres => seed_postgres(&db.url, workspace, start, now, &mut rng).await,
    }
}

async fn seed_sqlite(
    url: &str,
    workspace: Uuid,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
    rng: &mut Rng,
) -> Result<(), String> {
    use std::str::FromStr;
    // Seeding need not survive a power cut: the server opens the file with its own settings afterwards.
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(|e| e.to_string())?
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Off);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await.map_err(|e| e.to_string())?;
    // 17 columns × 1 000 rows stays under SQLite's 32 766 bound parameters.
    const STATEMENT_ROWS: u64 = 1_000;
    const TRANSACTION_ROWS: u64 = 100_000;
    let mut n = 0;
    while n < QUESTIONS {
        let mut tx = conn.begin().await.map_err(|e| e.to_string())?;
        let end = (n + TRANSACTION_ROWS).min(QUESTIONS);
        while n < end {
            let rows: Vec<SeedRow> = (n..(n + STATEMENT_ROWS).min(end)).map(|i| seed_row(i, start, now, rng)).collect();
            n += rows.len() as u64;
            let mut insert = QueryBuilder::<Sqlite>::new(format!("INSERT INTO questions ({COLUMNS}) "));
            insert.push_values(rows, |mut values, row| {
                values
                    .push_bind(row.id)
                    .push_bind(workspace)
                    .push_bind(row.project)
                    .push_bind(row.kind)
                    .push_bind(row.response_type)
                    .push_bind(row.title)
                    .push_bind(row.body)
                    .push_bind(row.action)
                    .push_bind(row.urgency)
                    .push_bind(row.timeout_at)
                    .push_bind(row.status)
                    .push_bind(row.response)
                    .push_bind(row.answered_by)
                    .push_bind(row.resolution)
                    .push_bind(row.created_at)
                    .push_bind(row.updated_at)
                    .push_bind(row.resolved_at);
            });
            insert.build().execute(&mut *tx).await.map_err(|e| format!("seeding SQLite: {e}"))?;
        }
        tx.commit().await.map_err(|e| e.to_string())?;
    }
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut conn).await.map_err(|e| e.to_string())?;
    conn.close().await.map_err(|e| e.to_string())
}

async fn seed_postgres(
    url: &str,
    workspace: Uuid,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
    rng: &mut Rng,
) -> Result<(), String> {
    let mut conn = sqlx::PgConnection::connect(url).await.map_err(|e| e.to_string())?;
    const TRANSACTION_ROWS: u64 = 100_000;
    let mut n = 0;
    while n < QUESTIONS {
        let rows: Vec<SeedRow> =
            (n..(n + TRANSACTION_ROWS).min(QUESTIONS)).map(|i| seed_row(i, start, now, rng)).collect();
        n += rows.len() as u64;
        let mut ids = Vec::with_capacity(rows.len());
        let mut projects = Vec::with_capacity(rows.len());
        let mut kinds = Vec::with_capacity(rows.len());
        let mut response_types = Vec::with_capacity(rows.len());
        let mut titles = Vec::with_capacity(rows.len());
        let mut bodies = Vec::with_capacity(rows.len());
        let mut actions = Vec::with_capacity(rows.len());
        let mut urgencies = Vec::with_capacity(rows.len());
        let mut timeouts = Vec::with_capacity(rows.len());
        let mut statuses = Vec::with_capacity(rows.len());
        let mut responses = Vec::with_capacity(rows.len());
        let mut answered_by = Vec::with_capacity(rows.len());
        let mut resolutions = Vec::with_capacity(rows.len());
        let mut created = Vec::with_capacity(rows.len());
        let mut updated = Vec::with_capacity(rows.len());
        let mut resolved = Vec::with_capacity(rows.len());
        for row in rows {
            ids.push(row.id);
            projects.push(row.project);
            kinds.push(row.kind.to_owned());
            response_types.push(row.response_type.to_owned());
            titles.push(row.title);
            bodies.push(row.body);
            actions.push(row.action);
            urgencies.push(row.urgency.to_owned());
            timeouts.push(row.timeout_at);
            statuses.push(row.status.to_owned());
            responses.push(row.response);
            answered_by.push(row.answered_by);
            resolutions.push(row.resolution.map(str::to_owned));
            created.push(row.created_at);
            updated.push(row.updated_at);
            resolved.push(row.resolved_at);
        }
        sqlx::query(&format!(
            "INSERT INTO questions ({COLUMNS}) SELECT id, $1, project, kind, response_type, title, body, \
             action::jsonb, urgency, timeout_at, status, response::jsonb, answered_by, resolution, created_at, \
             updated_at, resolved_at FROM UNNEST($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], \
             $7::text[], $8::text[], $9::text[], $10::timestamptz[], $11::text[], $12::text[], $13::text[], \
             $14::text[], $15::timestamptz[], $16::timestamptz[], $17::timestamptz[]) AS u(id, project, kind, \
             response_type, title, body, action, urgency, timeout_at, status, response, answered_by, resolution, \
             created_at, updated_at, resolved_at)"
        ))
        .bind(workspace)
        .bind(ids)
        .bind(projects)
        .bind(kinds)
        .bind(response_types)
        .bind(titles)
        .bind(bodies)
        .bind(actions)
        .bind(urgencies)
        .bind(timeouts)
        .bind(statuses)
        .bind(responses)
        .bind(answered_by)
        .bind(resolutions)
        .bind(created)
        .bind(updated)
        .bind(resolved)
        .execute(&mut conn)
        .await
        .map_err(|e| format!("seeding PostgreSQL: {e}"))?;
    }
    sqlx::query("ANALYZE questions").execute(&mut conn).await.map_err(|e| e.to_string())?;
    conn.close().await.map_err(|e| e.to_string())
}
