//! Approval rules: how long one decision takes against a 100-rule document, timed in-process through the code the
//! server runs — the document compiled once (as [`holdpoint::rules::RulesCache`] keeps it), then each call
//! evaluated by [`holdpoint::rules::evaluate`] — and one whole [`holdpoint::rules::Rules::decide`] round, which also
//! reads the stored version (one indexed row) to know its compiled document is current.

use std::time::{Duration, Instant};

use app::types::RulesDocument;
use serde_json::{Value, json};

use holdpoint::rules::{Rules, RulesCache, ToolCall};
use holdpoint::store::{AuditActor, NewAuditEntry, RulesRow, Store};

use crate::report::{Figure, Section};
use crate::server::{Backend, FreshDb, Postgres};
use crate::{Samples, ms};

const RULES: usize = 100;
/// Decisions timed against the compiled document (after as many untimed warm-up ones as there are calls × 50).
const DECISIONS: usize = 200_000;
const DECISIONS_BUDGET: Duration = Duration::from_secs(30);
/// Whole `decide` rounds timed per database.
const ROUNDS: usize = 3_000;
const ROUNDS_BUDGET: Duration = Duration::from_secs(15);
const TARGET: Duration = Duration::from_micros(50);

pub async fn run(postgres: Option<&Postgres>) -> Result<Section, String> {
    let mut section = Section::new("Approval rules: decisions against 100 rules");
    let document = document();
    let calls = calls();
    let compiled_at = Instant::now();
    let compiled = holdpoint::rules::engine::compile(&document, 1).map_err(|e| format!("{e:?}"))?;
    let compile_time = compiled_at.elapsed();
    let (samples, matched) = decisions(&compiled, &calls);
    section.notes.push(format!(
        "A document of {RULES} rules, as a workspace would write them: tool globs (`shell`, `mcp:github/*`, \
         `payments_*`, `*delete*`), agent globs (`deploy-*`, `*-staging`), CEL conditions over the arguments \
         (`args.amount > 1000`, `args.command.startsWith(\"kubectl delete\") && args.namespace == \"prod\"`, \
         `args.url.contains(...)`, `has(args.force) && args.force`, `run != null && run.project == ...`, \
         `now.getHours() ...`), {dry} of them dry-run, allow, ask and deny mixed, default `ask`. It is compiled \
         once ({compile}, as the server does once per stored version and caches), then {calls} different calls \
         (shell commands, payments, HTTP requests, gateway tools, unknown tools; with and without an agent and a \
         run) are decided in turn through `holdpoint::rules::evaluate`, the function `Rules::decide` and \
         `POST /rules/test` call: tool and agent globs, the CEL variables bound once per call, every matching \
         rule's `when` run, the verdict built. Each decision is timed alone; {n} of them (an average of {matched:.1} \
         rules matched per call). Target: p99 ≤ 50 µs.",
        dry = document.rules.iter().filter(|r| r.mode == app::types::RuleMode::DryRun).count(),
        compile = us(compile_time),
        calls = calls.len(),
        n = samples.len(),
    ));
    section.figures.push(Figure::new(
        format!("one decision against {RULES} rules (compiled once)"),
        format!("p50 {} · p99 {}", us(samples.p50()), us(samples.p99())),
        "p99 ≤ 50 µs",
        samples.p99() <= TARGET,
    ));
    section
        .figures
        .push(Figure::info(format!("compiling the {RULES} rules (once per saved version)"), us(compile_time)));
    section.notes.push(format!(
        "`Rules::decide` round: the same document stored through the library's store, then `Rules::decide` called \
         for the same calls minus those a dry-run rule matches (a dry-run match also appends an audit entry, a \
         durable write measured elsewhere). Each round reads the stored version (one indexed row), finds the \
         compiled document in memory, evaluates and counts the matches: what every door pays per call before it \
         asks anyone. Up to {ROUNDS} rounds per database, reported without a target."
    ));
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && postgres.is_none() {
            continue;
        }
        let db = FreshDb::fresh(backend, postgres).await?;
        let rounds = rounds(&db, &document, &compiled, &calls).await?;
        section.figures.push(Figure::info(
            format!("one `Rules::decide` round (version read + decision), {}", backend.label()),
            format!("p50 {} · p99 {}", ms(rounds.p50()), ms(rounds.p99())),
        ));
    }
    Ok(section)
}

fn us(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

/// The benchmark's document: a hundred rules in families, each family spread over its own tools, agents and
/// thresholds so that no two rules are the same.
fn document() -> RulesDocument {
    let mut rules = Vec::with_capacity(RULES);
    let decisions = ["allow", "ask", "deny"];
    for i in 0..RULES {
        let decision = decisions[i % 3];
        let mode = if i % 7 == 3 { "dry_run" } else { "enforce" };
        let rule = match i % 10 {
            0 => json!({ "tools": [format!("mcp:svc{i}/*"), "mcp:github/create_*"] }),
            1 => json!({ "tools": ["payments_*"], "when": format!("args.amount > {}", 1000 + i * 10) }),
            2 => json!({
                "tools": ["shell"],
                "when": format!(
                    "args.command.startsWith(\"kubectl delete\") && args.namespace == \"{}\"",
                    ["prod", "staging", "dev"][i % 3]
                ),
            }),
            3 => json!({ "tools": ["shell", "bash"], "agents": [format!("deploy-{i}*"), "*-staging"] }),
            4 => json!({
                "tools": ["http_request"],
                "when": format!("args.method != \"GET\" && args.url.contains(\"internal-{i}\")"),
            }),
            5 => {
                json!({ "tools": ["*delete*", "*drop*"], "agents": ["ops-*"], "when": "has(args.force) && args.force" })
            }
            6 => json!({
                "tools": ["shell"],
                "when": format!("args.command.contains(\"rm -rf\") || args.command.matches(\"^terraform (apply|destroy)\") && {i} > 0"),
            }),
            7 => json!({
                "tools": ["payments_*", "mcp:stripe/*"],
                "when": format!("args.currency in [\"EUR\", \"USD\"] && args.amount >= {} && run != null && run.project == \"billing-{}\"", 50 * i, i % 4),
            }),
            8 => json!({ "tools": [format!("tool_{i}"), format!("mcp:upstream{i}/read_*")] }),
            _ => json!({
                "tools": ["*"],
                "agents": [format!("agent-{i}-*")],
                "when": format!("now.getHours() >= {} && size(args) > 0", i % 24),
            }),
        };
        let mut rule = rule;
        rule["name"] = json!(format!("rule-{i:03}"));
        rule["decision"] = json!(decision);
        rule["mode"] = json!(mode);
        if decision != "allow" {
            rule["reason"] = json!(format!("Rule {i} wants a person to look at this first."));
        }
        rules.push(rule);
    }
    serde_json::from_value(json!({ "rules": rules, "default": "ask" })).expect("the benchmark's document is valid")
}

/// The calls decided in turn: (tool, arguments, agent, run project).
fn calls() -> Vec<(String, Value, Option<String>, Option<String>)> {
    let call = |tool: &str, args: Value, agent: Option<&str>, project: Option<&str>| {
        (tool.to_owned(), args, agent.map(str::to_owned), project.map(str::to_owned))
    };
    vec![
        call(
            "shell",
            json!({ "command": "kubectl delete deployment api", "namespace": "prod" }),
            Some("deploy-13-bot"),
            Some("platform"),
        ),
        call("shell", json!({ "command": "ls -la /var/log", "namespace": "dev" }), Some("ops-helper"), None),
        call("shell", json!({ "command": "terraform apply -auto-approve", "namespace": "staging" }), None, None),
        call(
            "payments_transfer",
            json!({ "amount": 5000, "currency": "EUR", "to": "DE89 3704 0044 0532 0130 00" }),
            Some("billing-agent"),
            Some("billing-1"),
        ),
        call("payments_refund", json!({ "amount": 120, "currency": "USD" }), Some("agent-19-support"), None),
        call(
            "http_request",
            json!({ "method": "POST", "url": "https://internal-34.example/api/restart", "body": { "why": "stuck" } }),
            Some("ops-1"),
            None,
        ),
        call("http_request", json!({ "method": "GET", "url": "https://example.org/" }), None, None),
        call("mcp:github/create_issue", json!({ "repo": "acme/api", "title": "Flaky test" }), Some("triage"), None),
        call("db_drop_table", json!({ "table": "sessions", "force": true }), Some("ops-cleanup"), None),
        call("tool_unknown", json!({}), None, None),
    ]
}

fn tool_call<'a>(call: &'a (String, Value, Option<String>, Option<String>)) -> ToolCall<'a> {
    ToolCall {
        tool: &call.0,
        arguments: &call.1,
        agent: call.2.as_deref(),
        run: call
            .3
            .as_ref()
            .map(|project| holdpoint::rules::RunRef { id: uuid::Uuid::now_v7(), project: Some(project.clone()) }),
    }
}

/// Every decision timed alone; also the mean number of rules matched per call.
fn decisions(
    compiled: &holdpoint::rules::CompiledRules,
    calls: &[(String, Value, Option<String>, Option<String>)],
) -> (Samples, f64) {
    let calls: Vec<ToolCall<'_>> = calls.iter().map(tool_call).collect();
    let mut matched = 0;
    for call in calls.iter().cycle().take(calls.len() * 50) {
        std::hint::black_box(holdpoint::rules::evaluate(compiled, call));
    }
    let mut samples = Samples::default();
    let started = Instant::now();
    for call in calls.iter().cycle().take(DECISIONS) {
        let timer = Instant::now();
        let (verdict, _) = holdpoint::rules::evaluate(compiled, std::hint::black_box(call));
        samples.push(timer.elapsed());
        matched += verdict.matched.len();
        if started.elapsed() > DECISIONS_BUDGET {
            break;
        }
    }
    let mean = matched as f64 / samples.len().max(1) as f64;
    (samples, mean)
}

async fn rounds(
    db: &FreshDb,
    document: &RulesDocument,
    compiled: &holdpoint::rules::CompiledRules,
    calls: &[(String, Value, Option<String>, Option<String>)],
) -> Result<Samples, String> {
    let store = holdpoint::store::connect(&db.url).await.map_err(|e| e.to_string())?;
    let result = rounds_on(store.as_ref(), document, compiled, calls).await;
    drop(store);
    result
}

async fn rounds_on(
    store: &dyn Store,
    document: &RulesDocument,
    compiled: &holdpoint::rules::CompiledRules,
    calls: &[(String, Value, Option<String>, Option<String>)],
) -> Result<Samples, String> {
    let workspace_id =
        store.ensure_workspace(holdpoint::server::DEFAULT_WORKSPACE).await.map_err(|e| e.to_string())?.id;
    let now = holdpoint::store::now();
    let row = RulesRow {
        workspace_id,
        version: 1,
        document: sqlx::types::Json(document.clone()),
        updated_at: now,
        updated_by: "bench".into(),
    };
    let audit = NewAuditEntry {
        workspace_id,
        actor: AuditActor::policy("bench", None),
        action: "rules.updated".into(),
        subject_type: "rules".into(),
        subject_id: Some("1".into()),
        before: None,
        after: None,
        diff: None,
        created_at: now,
    };
    if !store.save_rules(&row, 0, &audit).await.map_err(|e| e.to_string())? {
        return Err("the benchmark's rules could not be stored".into());
    }
    let metrics = holdpoint::metrics::Metrics::new();
    let cache = RulesCache::default();
    let rules = Rules { store, metrics: &metrics, cache: &cache };
    // Calls a dry-run rule matches would also append an audit entry each: a write, not what is measured here.
    let calls: Vec<ToolCall<'_>> = calls
        .iter()
        .map(tool_call)
        .filter(|call| {
            let (_, evaluation) = holdpoint::rules::evaluate(compiled, call);
            evaluation.matched.iter().all(|&i| compiled.rules[i].mode != app::types::RuleMode::DryRun)
        })
        .collect();
    if calls.is_empty() {
        return Err("every call matches a dry-run rule".into());
    }
    for call in calls.iter().take(20) {
        rules.decide(workspace_id, call).await.map_err(|e| e.to_string())?;
    }
    let mut samples = Samples::default();
    let started = Instant::now();
    for call in calls.iter().cycle().take(ROUNDS) {
        let timer = Instant::now();
        let verdict = rules.decide(workspace_id, call).await.map_err(|e| e.to_string())?;
        samples.push(timer.elapsed());
        std::hint::black_box(verdict);
        if started.elapsed() > ROUNDS_BUDGET {
            break;
        }
    }
    Ok(samples)
}
