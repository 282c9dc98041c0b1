//! `spawn_agents`: sub-agent runs started by a run, which it may wait on or resume.

use crate::store::Json;
use holdpoint_types::{RunStatus, ToolCallStatus};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::Runtime;
use crate::store::{IdempotencyKey, ResumeOutcome, RunRow, StoreResult, ToolCallRow, now};

/// How many sub-agents one call may start.
const MAX_CHILDREN: usize = 10;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnArgs {
    #[serde(default)]
    agents: Vec<SpawnItem>,
    #[serde(default = "wait_by_default")]
    wait: bool,
    #[serde(default)]
    resume_run_id: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
}

fn wait_by_default() -> bool {
    true
}

#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct SpawnItem {
    agent: String,
    input: String,
}

async fn fail(rt: &Runtime, run: &RunRow, call: &mut ToolCallRow, message: String) -> StoreResult<()> {
    call.status = ToolCallStatus::Error;
    call.output = Some(Json(json!({ "error": message })));
    call.updated_at = now();
    rt.ledger.update_tool_call(run, rt.instance, call).await
}

/// Starts (or resumes) the children of a `spawn_agents` call and records them on the call. A call that does not
/// wait completes at once; one with bad arguments fails and the model is told why.
pub async fn spawn(rt: &Runtime, run: &RunRow, call: &mut ToolCallRow) -> StoreResult<()> {
    let args: SpawnArgs = match serde_json::from_value(call.input.0.clone()) {
        Ok(args) => args,
        Err(err) => return fail(rt, run, call, format!("invalid arguments: {err}")).await,
    };
    let mut children = Vec::new();
    if let Some(raw) = &args.resume_run_id {
        let Ok(child_id) = Uuid::parse_str(raw) else {
            return fail(rt, run, call, format!("{raw:?} is not a run id")).await;
        };
        let child = rt.ledger.run(run.workspace_id, child_id).await?;
        let Some(child) = child.filter(|c| c.parent_run_id == Some(run.id)) else {
            return fail(rt, run, call, format!("{child_id} is not a sub-agent run of this run")).await;
        };
        if child.status != RunStatus::Paused {
            return fail(rt, run, call, format!("only paused runs can be resumed; {child_id} is {}", child.status))
                .await;
        }
        match rt.ledger.prepare_resume(run.workspace_id, child_id, args.prompt.as_deref(), now()).await? {
            ResumeOutcome::Accepted(_) => children.push(child_id),
            ResumeOutcome::CapReached(c) => {
                let message =
                    format!("{child_id} has reached the cap of {} steps and cannot be resumed", c.max_total_steps);
                return fail(rt, run, call, message).await;
            }
            ResumeOutcome::NotResumable(c) => {
                return fail(rt, run, call, format!("only paused runs can be resumed; {child_id} is {}", c.status))
                    .await;
            }
            ResumeOutcome::NotFound => return fail(rt, run, call, format!("no run {child_id}")).await,
        }
    } else {
        if args.agents.is_empty() || args.agents.len() > MAX_CHILDREN {
            return fail(rt, run, call, format!("give 1..={MAX_CHILDREN} agents, or resume_run_id")).await;
        }
        for (n, item) in args.agents.iter().enumerate() {
            let Some(agent) = rt.ledger.agent_by_name(run.workspace_id, item.agent.trim()).await? else {
                return fail(rt, run, call, format!("there is no agent named {:?} in this workspace", item.agent))
                    .await;
            };
            if item.input.trim().is_empty() {
                return fail(rt, run, call, format!("agents[{n}].input must not be empty")).await;
            }
            let new = super::queued::new_run_row(
                run.workspace_id,
                Some(agent.id),
                agent.spec.0.clone(),
                item.input.clone(),
                run.project.clone(),
                Some(run),
                None,
                rt.config.max_total_steps,
                run.created_by,
                now(),
            );
            // Keyed by the call: a worker that takes the run over after a crash finds the children already
            // started instead of starting them twice.
            let key = IdempotencyKey {
                workspace_id: run.workspace_id,
                scope: "runs",
                key: format!("spawn:{}:{n}", call.id),
                request_hash: Sha256::digest(serde_json::to_vec(item).unwrap_or_default()).to_vec(),
            };
            let created = rt.ledger.create_run(&new.run, &new.segment, Some(&key)).await?;
            children.push(created.value.id);
        }
    }
    call.child_run_ids = Json(children.clone());
    if !args.wait {
        let runs: Vec<Value> = children.iter().map(|id| json!({ "run_id": id, "status": "queued" })).collect();
        call.status = ToolCallStatus::Completed;
        call.output = Some(Json(json!({ "runs": runs, "note": "started without waiting for them" })));
    }
    call.updated_at = now();
    rt.ledger.update_tool_call(run, rt.instance, call).await
}

fn is_settled(status: RunStatus) -> bool {
    matches!(status, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled | RunStatus::Paused)
}

/// Whether every child the call waits on has finished or paused.
pub async fn settled(rt: &Runtime, call: &ToolCallRow) -> StoreResult<bool> {
    let children = rt.ledger.child_run_status(&call.child_run_ids.0).await?;
    Ok(children.len() == call.child_run_ids.0.len() && children.iter().all(|c| is_settled(c.status)))
}

/// What the parent's model reads once its children have settled.
pub async fn report(rt: &Runtime, call: &ToolCallRow) -> StoreResult<Value> {
    let children = rt.ledger.child_run_status(&call.child_run_ids.0).await?;
    let runs: Vec<Value> = call
        .child_run_ids
        .0
        .iter()
        .filter_map(|id| children.iter().find(|c| c.id == *id))
        .map(|child| {
            let mut entry = json!({ "run_id": child.id, "agent": child.agent.0.name, "status": child.status });
            if let Some(result) = &child.result {
                entry["result"] = Value::String(result.clone());
            }
            if let Some(error) = &child.error_message {
                entry["error_message"] = Value::String(error.clone());
            }
            if child.status == RunStatus::Paused {
                entry["note"] = Value::String("paused: resume it with spawn_agents {\"resume_run_id\": ...}".into());
            }
            entry
        })
        .collect();
    Ok(json!({ "runs": runs }))
}
