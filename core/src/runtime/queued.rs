//! A run as it enters the queue: its row and its first segment, built alike for a run started through the API, a
//! sub-agent a run spawns, a run a client executes and the demo's.

use crate::store::Json;
use chrono::{DateTime, Utc};
use holdpoint_types::{AgentSpec, RunExecutor, RunStatus};
use uuid::Uuid;

use crate::store::{DEFAULT_MAX_STEPS, RunRow, SegmentRow};

/// A new queued run and its first segment.
pub struct NewRunRow {
    pub run: RunRow,
    pub segment: SegmentRow,
}

/// Builds a queued run of `agent` (a stored agent's id, or `None` for an inline one).
#[allow(clippy::too_many_arguments)]
pub fn new_run_row(
    workspace_id: Uuid,
    agent_id: Option<Uuid>,
    spec: AgentSpec,
    input: String,
    project: Option<String>,
    parent: Option<&RunRow>,
    max_steps: Option<u32>,
    max_total_steps: u32,
    created_by: Option<Uuid>,
    at: DateTime<Utc>,
) -> NewRunRow {
    let id = Uuid::now_v7();
    let max_steps = max_steps.or(spec.max_steps).unwrap_or(DEFAULT_MAX_STEPS);
    let max_steps = i32::try_from(max_steps).unwrap_or(i32::MAX);
    let parent_run_ids = parent.map_or_else(Vec::new, |p| {
        let mut lineage = p.parent_run_ids.0.clone();
        lineage.push(p.id);
        lineage
    });
    let run = RunRow {
        id,
        workspace_id,
        agent_id,
        agent: Json(spec),
        project,
        input,
        status: RunStatus::Queued,
        step_count: 0,
        max_steps,
        max_total_steps: i32::try_from(max_total_steps).unwrap_or(i32::MAX),
        parent_run_id: parent.map(|p| p.id),
        parent_run_ids: Json(parent_run_ids),
        result: None,
        error_message: None,
        resume_prompt: None,
        lease_owner: None,
        lease_until: None,
        created_by,
        created_at: at,
        updated_at: at,
        completed_at: None,
        executor: RunExecutor::Server,
        pause_on_input: false,
    };
    let segment = SegmentRow {
        id: Uuid::now_v7(),
        run_id: id,
        idx: 1,
        resumed_from: None,
        start_step: 0,
        steps: 0,
        max_steps,
        started_at: at,
        ended_at: None,
        end_status: None,
    };
    NewRunRow { run, segment }
}
