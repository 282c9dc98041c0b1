//! `holdpoint run` and `resume`: a run followed to its outcome, or to the moment it waits for a person, when the
//! command exits with the pause manifest.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{EXIT_EXPIRED, EXIT_PAUSED, OutputFormat, clear_pause_if, pause_path, print_json, write_json};
use crate::cli::client::{CliError, CliResult, Connection, LOCAL_DIR, ServerArgs};
use crate::runtime::Runtime;
use crate::runtime::remote::RemoteRun;

/// `holdpoint run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The task, as the run's first user message.
    pub task: String,
    /// The agent's name. With the embedded engine, `.holdpoint/agents/NAME.yaml` (or `.json`) defines it if the
    /// engine does not know it yet.
    #[arg(long)]
    pub agent: String,
    /// Exit 10 with a pause manifest when the run waits for an approval or an answer, instead of waiting.
    #[arg(long)]
    pub pause_on_approval: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[arg(long)]
    pub project: Option<String>,
    /// The step budget of each segment.
    #[arg(long)]
    pub max_steps: Option<u32>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `holdpoint resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The run's id.
    pub run: String,
    /// A message for the agent's next segment.
    pub prompt: Option<String>,
    /// Approve this pending tool call (its id or call id; repeat for each).
    #[arg(long = "approve", value_name = "ID")]
    pub approve: Vec<String>,
    /// Reject this pending tool call.
    #[arg(long = "reject", value_name = "ID")]
    pub reject: Vec<String>,
    /// Approve every pending tool call.
    #[arg(long, conflicts_with_all = ["approve", "reject", "reject_all"])]
    pub approve_all: bool,
    /// Reject every pending tool call.
    #[arg(long, conflicts_with_all = ["approve", "reject", "approve_all"])]
    pub reject_all: bool,
    /// The reason given with rejections (and approvals).
    #[arg(long)]
    pub comment: Option<String>,
    /// Exit 10 again if the run waits for a person.
    #[arg(long)]
    pub pause_on_approval: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Finds an agent by name; with the embedded engine, defines it from `.holdpoint/agents/NAME.{yaml,json}` first if
/// needed.
async fn agent_id(connection: &Connection, name: &str) -> CliResult<String> {
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/agents?limit=200&cursor={c}"),
            None => "/agents?limit=200".to_owned(),
        };
        let page = connection.get(&path).await?;
        if let Some(agent) = page["items"].as_array().into_iter().flatten().find(|a| a["name"] == name) {
            return Ok(agent["id"].as_str().unwrap_or_default().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    if connection.is_embedded() {
        for extension in ["yaml", "yml", "json"] {
            let file = Path::new(LOCAL_DIR).join("agents").join(format!("{name}.{extension}"));
            if let Ok(text) = std::fs::read_to_string(&file) {
                let mut spec: Value = if extension == "json" {
                    serde_json::from_str(&text).map_err(|e| CliError::Failed(format!("{}: {e}", file.display())))?
                } else {
                    serde_norway::from_str(&text).map_err(|e| CliError::Failed(format!("{}: {e}", file.display())))?
                };
                spec["name"] = json!(name);
                let created = connection.post("/agents", &spec).await?;
                return Ok(created["id"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    Err(CliError::Failed(format!(
        "there is no agent named {name:?} (define it with POST /api/v1/agents{})",
        if connection.is_embedded() { format!(" or in {LOCAL_DIR}/agents/{name}.yaml") } else { String::new() }
    )))
}

/// `holdpoint run`.
pub async fn run(args: RunArgs) -> CliResult<u8> {
    let connection = Connection::open(&args.server).await?;
    let agent_id = agent_id(&connection, &args.agent).await?;
    let mut body = json!({ "agent_id": agent_id, "input": args.task });
    if !connection.is_embedded() {
        // The agent loop runs here, so its tools act on this machine; the server keeps the state.
        body["executor"] = json!("client");
    }
    if args.pause_on_approval {
        body["pause_on_input"] = json!(true);
    }
    if let Some(project) = &args.project {
        body["project"] = json!(project);
    }
    if let Some(steps) = args.max_steps {
        body["max_steps"] = json!(steps);
    }
    let run = connection.post("/runs", &body).await?;
    let run_id = run["id"].as_str().unwrap_or_default().to_owned();
    if args.output == OutputFormat::Text {
        eprintln!("Run {run_id} of {} started.", args.agent);
    }
    follow(&connection, &run_id, args.pause_on_approval, args.output).await
}

/// `holdpoint resume`.
pub async fn resume(args: ResumeArgs) -> CliResult<u8> {
    // As `show` takes a question's id: what is no run id at all is a usage error, before anything is asked.
    let run_id = uuid::Uuid::parse_str(args.run.trim())
        .map_err(|_| CliError::Usage(format!("{:?} is not a run id (a UUID)", args.run)))?
        .to_string();
    let connection = Connection::open(&args.server).await?;
    let run = connection.get(&format!("/runs/{run_id}")).await?;
    let status = run["status"].as_str().unwrap_or_default();
    let decides = args.approve_all || args.reject_all || !args.approve.is_empty() || !args.reject.is_empty();
    if matches!(status, "paused" | "waiting_for_input" | "waiting_for_approval") {
        let pending = connection.get(&format!("/runs/{run_id}/tool-calls?status=pending_approval&limit=200")).await?;
        let pending = pending["items"].as_array().cloned().unwrap_or_default();
        let mut decisions = Vec::new();
        for call in &pending {
            let id = call["id"].as_str().unwrap_or_default();
            let call_id = call["call_id"].as_str().unwrap_or_default();
            let named = |list: &[String]| list.iter().any(|x| x == id || x == call_id);
            let approved = if args.approve_all || named(&args.approve) {
                Some(true)
            } else if args.reject_all || named(&args.reject) {
                Some(false)
            } else {
                None
            };
            if let Some(approved) = approved {
                let mut decision = json!({ "tool_call_id": id, "approved": approved });
                if let Some(comment) = &args.comment {
                    decision["comment"] = json!(comment);
                }
                decisions.push(decision);
            }
        }
        for named in args.approve.iter().chain(&args.reject) {
            if !pending.iter().any(|c| c["id"] == named.as_str() || c["call_id"] == named.as_str()) {
                return Err(CliError::Failed(format!(
                    "{named} is not a tool call of run {run_id} waiting for approval"
                )));
            }
        }
        let mut body = json!({ "tool_decisions": decisions });
        if let Some(prompt) = &args.prompt {
            body["prompt"] = json!(prompt);
        }
        connection.post(&format!("/runs/{run_id}/resume"), &body).await?;
    } else if (decides || args.prompt.is_some()) && matches!(status, "completed" | "failed" | "cancelled") {
        return Err(CliError::Failed(format!("run {run_id} is {status}; there is nothing to resume")));
    }
    // Otherwise the run is queued or running (people answered in the web UI), or over: follow it to its outcome.
    follow(&connection, &run_id, args.pause_on_approval, args.output).await
}

/// Executes a client-executed run in this process: the worker protocol against the server, the runtime's
/// settings from the environment (`HOLDPOINT_SHELL`, `HOLDPOINT_SCRIPTS_DIR` or `.holdpoint/scripts`, ...).
fn local_executor(connection: &Connection, run_id: &str) -> CliResult<(Arc<RemoteRun>, Arc<Runtime>)> {
    let config = crate::cli::client::environment_config()?;
    let id = uuid::Uuid::parse_str(run_id).map_err(|_| CliError::Failed(format!("{run_id} is not a run id")))?;
    let remote = Arc::new(RemoteRun::new(&connection.base, connection.token(), id, config.runtime.run_lease_seconds));
    let scripts_dir = config.runtime.scripts_dir.clone().unwrap_or_else(|| Path::new(LOCAL_DIR).join("scripts"));
    let runtime = Arc::new(Runtime {
        ledger: Arc::clone(&remote) as Arc<dyn crate::runtime::ledger::RunLedger>,
        metrics: Arc::new(crate::metrics::Metrics::new()),
        http: crate::runtime::tools::http_client(&config.runtime),
        config: config.runtime,
        scripts_dir,
        instance: uuid::Uuid::now_v7(),
    });
    Ok((remote, runtime))
}

/// What `resume` says when the run is queued for the token that started it, which executes it: the decisions
/// are made, and that token's `holdpoint resume RUN` carries on. Exit 0.
fn left_to_its_starter(run_id: &str, output: OutputFormat) -> u8 {
    let next = format!("holdpoint resume {run_id}");
    match output {
        OutputFormat::Json => print_json(&json!({ "outcome": "queued", "run_id": run_id, "resume_hint": next })),
        OutputFormat::Text => {
            eprintln!("Run {run_id} is queued: the token that started it carries it on with `{next}`.");
        }
    }
    0
}

/// Follows a run until it ends (exit 0, 1 or 12) or, with `pause_on_person`, waits for one (exit 10). A run this
/// client executes is claimed and executed here whenever it is queued.
async fn follow(connection: &Connection, run_id: &str, pause_on_person: bool, output: OutputFormat) -> CliResult<u8> {
    let mut shown_seq = 0u64;
    let mut told_waiting = false;
    let mut executor: Option<(Arc<RemoteRun>, Arc<Runtime>)> = None;
    loop {
        let run = connection.get(&format!("/runs/{run_id}")).await?;
        if run["executor"] == "client" && run["status"] == "queued" {
            if executor.is_none() {
                executor = Some(local_executor(connection, run_id)?);
            }
            if let Some((remote, runtime)) = &executor {
                let claimed = match remote.claim(runtime.instance).await {
                    Ok(claimed) => claimed,
                    // Another credential started it (a person deciding an agent's calls): it goes on where that
                    // one runs, when it resumes the run.
                    Err(crate::store::StoreError::Refused { status: 403, .. }) => {
                        return Ok(left_to_its_starter(run_id, output));
                    }
                    Err(e) => return Err(CliError::Failed(format!("cannot claim run {run_id}: {e}"))),
                };
                if let Some(claimed) = claimed {
                    crate::runtime::executor::execute(runtime, claimed).await;
                    continue;
                }
            }
        }
        if output == OutputFormat::Text {
            shown_seq = show_progress(connection, run_id, shown_seq).await?;
        }
        let status = run["status"].as_str().unwrap_or_default().to_owned();
        match status.as_str() {
            "completed" => {
                clear_pause_if(|p| p["run_id"] == run_id);
                let completion = json!({
                    "outcome": "completed",
                    "run_id": run_id,
                    "final_message": run["result"],
                    "steps_taken": run["step_count"],
                });
                match output {
                    OutputFormat::Json => print_json(&completion),
                    OutputFormat::Text => println!("{}", run["result"].as_str().unwrap_or_default()),
                }
                return Ok(0);
            }
            "failed" => {
                let message = run["error_message"].as_str().unwrap_or("the run failed").to_owned();
                let line = format!("run {run_id} failed: {message}");
                if output == OutputFormat::Json {
                    print_json(&json!({ "outcome": "failed", "run_id": run_id, "error_message": message }));
                    return Err(CliError::Reported(line));
                }
                return Err(CliError::Failed(line));
            }
            "cancelled" => {
                if output == OutputFormat::Json {
                    print_json(&json!({ "outcome": "cancelled", "run_id": run_id }));
                } else {
                    eprintln!("Run {run_id} was cancelled.");
                }
                return Ok(EXIT_EXPIRED);
            }
            "waiting_for_approval" | "waiting_for_input" | "paused" if pause_on_person || status == "paused" => {
                let manifest = pause_manifest(connection, &run).await?;
                write_json(&pause_path(), &manifest)?;
                print_json(&manifest);
                return Ok(EXIT_PAUSED);
            }
            "waiting_for_approval" | "waiting_for_input" if !told_waiting => {
                told_waiting = true;
                eprintln!("Waiting for a person: {}", connection.ui_link("/inbox"));
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Prints the messages stored since `after` to stderr; returns the newest seq shown.
async fn show_progress(connection: &Connection, run_id: &str, after: u64) -> CliResult<u64> {
    let mut last = after;
    let page = connection.get(&format!("/runs/{run_id}/messages?limit=200&cursor={after}")).await?;
    for message in page["items"].as_array().into_iter().flatten() {
        last = message["seq"].as_u64().unwrap_or(last);
        let step = message["step"].as_u64().unwrap_or(0);
        let content = &message["content"];
        match message["role"].as_str() {
            Some("assistant") => {
                if let Some(text) = content["content"].as_str().filter(|t| !t.is_empty()) {
                    eprintln!("[step {step}] {text}");
                }
                for call in content["tool_calls"].as_array().into_iter().flatten() {
                    let name = call["function"]["name"].as_str().unwrap_or("?");
                    let arguments = call["function"]["arguments"].as_str().unwrap_or("");
                    eprintln!("[step {step}] → {name} {arguments}");
                }
            }
            Some("tool") => {
                let text = content["content"].as_str().unwrap_or("");
                let clipped: String = text.chars().take(300).collect();
                eprintln!("[step {step}] ← {clipped}");
            }
            _ => {}
        }
    }
    Ok(last)
}

/// The pause manifest (docs/cli.md) of a run waiting for a person.
async fn pause_manifest(connection: &Connection, run: &Value) -> CliResult<Value> {
    let run_id = run["id"].as_str().unwrap_or_default();
    let pending = connection.get(&format!("/runs/{run_id}/tool-calls?status=pending_approval&limit=200")).await?;
    let calls: Vec<Value> = pending["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({ "id": c["id"], "call_id": c["call_id"], "tool_name": c["tool_name"], "input": c["input"],
            "question_id": c["question_id"] })
        })
        .collect();
    let mut last_turn: Option<Value> = None;
    let mut cursor = 0;
    loop {
        let page = connection.get(&format!("/runs/{run_id}/messages?limit=200&cursor={cursor}")).await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if let Some(turn) = items.iter().rev().find(|m| m["role"] == "assistant") {
            last_turn = Some(turn.clone());
        }
        match page["next_cursor"].as_str().and_then(|c| c.parse().ok()) {
            Some(next) => cursor = next,
            None => break,
        }
    }
    let last_turn = last_turn.as_ref();
    let agent_message = last_turn.and_then(|m| m["content"]["content"].as_str().map(str::to_owned));
    // A run that paused on a final answer asking something (`pause_on_input`), not on its step budget.
    let asked_in_text = last_turn.is_some_and(|m| m["content"]["tool_calls"].is_null())
        && agent_message.as_deref().is_some_and(crate::runtime::executor::asks_for_input);
    let (kind, hint) = match run["status"].as_str() {
        Some("waiting_for_approval") => {
            let ids: Vec<String> =
                calls.iter().filter_map(|c| c["id"].as_str()).map(|id| format!("--approve {id}")).collect();
            ("tool_approval_required", format!("holdpoint resume {run_id} {}", ids.join(" ")))
        }
        Some("paused") if asked_in_text => ("input_required", format!("holdpoint resume {run_id} \"<your answer>\"")),
        Some("paused") => ("step_budget_spent", format!("holdpoint resume {run_id} \"go on\"")),
        _ => ("input_required", format!("answer in {}, then: holdpoint resume {run_id}", connection.ui_link("/inbox"))),
    };
    let mut reason = json!({ "type": kind, "question_ids": run["pending_question_ids"] });
    if !calls.is_empty() {
        reason["pending_tool_calls"] = Value::Array(calls);
    }
    let mut manifest = json!({ "outcome": "paused", "run_id": run_id, "pause_reason": reason, "resume_hint": hint });
    if let Some(message) = agent_message {
        manifest["agent_message"] = json!(message);
    }
    Ok(manifest)
}
