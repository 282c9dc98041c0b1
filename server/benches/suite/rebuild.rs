//! Resume: rebuilding a 500-message conversation from the database, timed in-process through
//! [`holdpoint::runtime::executor::rebuild_request`], the code a resumed run executes before it calls its model.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::types::Json;
use uuid::Uuid;

use holdpoint::runtime::ledger::RunLedger;
use holdpoint::store::{MessageRow, Store};

use crate::report::{Figure, Section};
use crate::server::{Backend, FreshDb, Postgres};
use crate::{Samples, ms};

const MESSAGES: usize = 500;
const WARM_UP: usize = 20;
const ITERATIONS: usize = 300;
const BUDGET: Duration = Duration::from_secs(20);

pub async fn run(postgres: Option<&Postgres>) -> Result<Section, String> {
    let mut section = Section::new("Resume: rebuild a 500-message conversation");
    section.notes.push(format!(
        "A run is stored through the library's store (created, claimed, then {MESSAGES} messages appended: the \
         system prompt, the task, then model turns that each call `http_request` and the tool results, 0.3–1 KiB \
         each, as a real run stores them). The suite then calls `holdpoint::runtime::executor::rebuild_request` \
         in-process: it reads the messages in order and builds the Chat Completions request (the conversation and \
         the tool definitions) that the resumed run would send to its model, serialised as the model client sends it. {WARM_UP} warm-up calls, then up to \
         {ITERATIONS} timed ones. Judged on the median."
    ));
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && postgres.is_none() {
            continue;
        }
        let db = FreshDb::fresh(backend, postgres).await?;
        let samples = measure(&db).await?;
        section.figures.push(Figure::new(
            format!("rebuild of a {MESSAGES}-message conversation, {}", backend.label()),
            format!("p50 {} · p99 {}", ms(samples.p50()), ms(samples.p99())),
            "≤ 5 ms",
            samples.p50() <= Duration::from_millis(5),
        ));
    }
    Ok(section)
}

fn conversation(run_id: Uuid) -> Vec<MessageRow> {
    let at = holdpoint::store::now();
    let message = |seq: usize, step: usize, role: &str, content: Value| MessageRow {
        id: Uuid::now_v7(),
        run_id,
        seq: seq as i32,
        step: step as i32,
        role: role.to_owned(),
        content: Json(content),
        created_at: at,
    };
    let mut messages = vec![
        message(
            1,
            0,
            "system",
            json!({ "role": "system", "content": "You keep the fleet's services healthy. Check each service, fix what is broken, and ask a person before anything risky." }),
        ),
        message(
            2,
            0,
            "user",
            json!({ "role": "user", "content": "Go through the 250 services in the inventory and report their health." }),
        ),
    ];
    let mut step = 0;
    while messages.len() < MESSAGES {
        let seq = messages.len() + 1;
        if seq % 2 == 1 {
            step += 1;
            messages.push(message(seq, step, "assistant", json!({
                "role": "assistant",
                "content": format!("Service {step} is next; I will read its health endpoint before deciding anything."),
                "tool_calls": [{
                    "id": format!("call_{step:04}"),
                    "type": "function",
                    "function": {
                        "name": "http_request",
                        "arguments": json!({ "method": "GET", "url": format!("https://inventory.internal/services/{step}/health") }).to_string(),
                    }
                }]
            })));
        } else {
            let output = json!({
                "status": 200,
                "body": format!("{{\"service\":\"svc-{step}\",\"healthy\":{},\"p99_ms\":{},\"version\":\"1.{}.3\",\"checks\":[\"db\",\"cache\",\"queue\"],\"notes\":\"{}\"}}",
                    step % 7 != 0, 40 + step % 90, step % 30, "all dependencies answered within their budget; ".repeat(1 + step % 12)),
            });
            messages.push(message(
                seq,
                step,
                "tool",
                json!({
                    "role": "tool",
                    "tool_call_id": format!("call_{step:04}"),
                    "content": output.to_string(),
                }),
            ));
        }
    }
    messages
}

async fn measure(db: &FreshDb) -> Result<Samples, String> {
    let store = holdpoint::store::connect(&db.url).await.map_err(|e| e.to_string())?;
    let ledger = holdpoint::runtime::ledger::LocalLedger {
        store: Arc::clone(&store),
        metrics: Arc::new(holdpoint::metrics::Metrics::new()),
        hub: None,
        bounds: holdpoint::questions::TimeoutBounds { min_seconds: 1, max_seconds: 86_400 },
        sends_on: holdpoint::notifications::SendsOn::default(),
        rules_cache: Default::default(),
    };
    let result = measure_on(store.as_ref(), &ledger).await;
    drop(ledger);
    drop(store);
    result
}

async fn measure_on(store: &dyn Store, ledger: &dyn RunLedger) -> Result<Samples, String> {
    let workspace = store.ensure_workspace(holdpoint::server::DEFAULT_WORKSPACE).await.map_err(|e| e.to_string())?.id;
    let spec: app::types::AgentSpec = serde_json::from_value(json!({
        "name": "fleet-keeper",
        "system_prompt": "You keep the fleet's services healthy.",
        "model": "openai:gpt-4o-mini",
        "tools": ["http_request", "ask_user"],
    }))
    .map_err(|e| e.to_string())?;
    let now = holdpoint::store::now();
    let new = holdpoint::runtime::queued::new_run_row(
        workspace,
        None,
        spec,
        "Go through the 250 services in the inventory and report their health.".into(),
        None,
        None,
        None,
        500,
        None,
        now,
    );
    store.create_run(&new.run, &new.segment, None).await.map_err(|e| e.to_string())?;
    let owner = Uuid::now_v7();
    let run = store
        .claim_run_by_id(new.run.id, owner, now + chrono::Duration::minutes(10), now)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the new run could not be claimed")?;
    for batch in conversation(run.id).chunks(50) {
        store.append_messages(run.id, owner, batch, &[], None, &[]).await.map_err(|e| e.to_string())?;
    }
    let mut samples = Samples::default();
    let started = Instant::now();
    for n in 0..WARM_UP + ITERATIONS {
        let timer = Instant::now();
        let request = holdpoint::runtime::executor::rebuild_request(ledger, &run).await.map_err(|e| e.to_string())?;
        let elapsed = timer.elapsed();
        let request: serde_json::Value = serde_json::from_slice(&request).map_err(|e| e.to_string())?;
        let count = request["messages"].as_array().map_or(0, Vec::len);
        if count != MESSAGES {
            return Err(format!("the rebuilt conversation has {count} messages, not {MESSAGES}"));
        }
        if n >= WARM_UP {
            samples.push(elapsed);
        }
        if started.elapsed() > BUDGET {
            break;
        }
    }
    Ok(samples)
}
