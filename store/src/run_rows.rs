//! Rows of agents and runs as stored, and the inputs of the run store's methods.

use chrono::{DateTime, Utc};
use holdpoint_types::{
    Agent, AgentSpec, RunExecutor, RunMessage, RunStatus, RunStatusEventData, Segment, ToolCall, ToolCallStatus,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::types::Json;
use uuid::Uuid;

use super::StoreError;

fn parse<T: std::str::FromStr<Err = holdpoint_types::UnknownVariant>>(value: &str) -> Result<T, StoreError> {
    value.parse().map_err(|err: holdpoint_types::UnknownVariant| StoreError::Corrupt(err.to_string()))
}

fn count(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// The step budget of a segment when neither the run nor its agent names one.
pub const DEFAULT_MAX_STEPS: u32 = 50;

#[derive(Debug, Clone, sqlx::FromRow, Serialize, Deserialize)]
pub struct AgentRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub name: String,
    pub spec: Json<AgentSpec>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl AgentRow {
    /// The wire form of the definition.
    pub fn to_agent(&self) -> Agent {
        let spec = &self.spec.0;
        Agent {
            id: self.id,
            name: spec.name.clone(),
            description: spec.description.clone(),
            system_prompt: spec.system_prompt.clone(),
            model: spec.model.clone(),
            scripted: spec.model.starts_with("script:"),
            tools: spec.tools.clone(),
            approval_policy: spec.approval_policy.clone(),
            max_steps: spec.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
            model_settings: spec.model_settings.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A run as stored.
#[derive(Debug, Clone, sqlx::FromRow, Serialize, Deserialize)]
pub struct RunRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub agent_id: Option<Uuid>,
    /// The definition the run executes, copied when it was created.
    pub agent: Json<AgentSpec>,
    pub project: Option<String>,
    pub input: String,
    pub status: RunStatus,
    pub step_count: i32,
    pub max_steps: i32,
    pub max_total_steps: i32,
    pub parent_run_id: Option<Uuid>,
    pub parent_run_ids: Json<Vec<Uuid>>,
    pub result: Option<String>,
    pub error_message: Option<String>,
    pub resume_prompt: Option<String>,
    pub lease_owner: Option<Uuid>,
    pub lease_until: Option<DateTime<Utc>>,
    pub created_by: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    /// `server` (its workers execute it) or `client` (a `holdpoint run` process does; the server keeps the state).
    pub executor: RunExecutor,
    /// A final answer that asks the user something pauses the run instead of completing it.
    pub pause_on_input: bool,
}

impl RunRow {
    /// The wire form, with the parts kept in other tables.
    pub fn to_run(
        &self,
        workspace: &str,
        segments: Vec<Segment>,
        pending_question_ids: Vec<Uuid>,
    ) -> Result<holdpoint_types::Run, StoreError> {
        Ok(holdpoint_types::Run {
            id: self.id,
            workspace: workspace.to_owned(),
            agent_id: self.agent_id,
            agent_name: self.agent.0.name.clone(),
            model: self.agent.0.model.clone(),
            scripted: self.agent.0.model.starts_with("script:"),
            executor: self.executor,
            project: self.project.clone(),
            input: self.input.clone(),
            status: self.status,
            step_count: count(self.step_count),
            max_steps: count(self.max_steps),
            max_total_steps: count(self.max_total_steps),
            segments,
            parent_run_id: self.parent_run_id,
            parent_run_ids: self.parent_run_ids.0.clone(),
            result: self.result.clone(),
            error_message: self.error_message.clone(),
            pending_question_ids,
            created_at: self.created_at,
            updated_at: self.updated_at,
            completed_at: self.completed_at,
        })
    }

    /// What a `run_status` event says about the run as it is now.
    pub fn status_event(&self) -> Result<RunStatusEventData, StoreError> {
        Ok(RunStatusEventData {
            run_id: self.id,
            status: self.status,
            agent_name: self.agent.0.name.clone(),
            project: self.project.clone(),
            parent_run_id: self.parent_run_id,
            step_count: count(self.step_count),
            error_message: self.error_message.clone(),
            updated_at: self.updated_at,
        })
    }
}

#[derive(Debug, Clone, sqlx::FromRow, Serialize, Deserialize)]
pub struct SegmentRow {
    pub id: Uuid,
    pub run_id: Uuid,
    pub idx: i32,
    pub resumed_from: Option<Uuid>,
    pub start_step: i32,
    pub steps: i32,
    pub max_steps: i32,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub end_status: Option<String>,
}

impl SegmentRow {
    pub fn to_segment(&self) -> Result<Segment, StoreError> {
        Ok(Segment {
            id: self.id,
            index: count(self.idx),
            resumed_from: self.resumed_from,
            start_step: count(self.start_step),
            steps: count(self.steps),
            max_steps: count(self.max_steps),
            started_at: self.started_at,
            ended_at: self.ended_at,
            end_status: self.end_status.as_deref().map(parse).transpose()?,
        })
    }
}

#[derive(Debug, Clone, sqlx::FromRow, Serialize, Deserialize)]
pub struct MessageRow {
    pub id: Uuid,
    pub run_id: Uuid,
    pub seq: i32,
    pub step: i32,
    pub role: String,
    pub content: Json<Value>,
    pub created_at: DateTime<Utc>,
}

impl MessageRow {
    pub fn to_message(&self) -> RunMessage {
        RunMessage {
            id: self.id,
            run_id: self.run_id,
            seq: count(self.seq),
            step: count(self.step),
            role: self.role.clone(),
            content: self.content.0.clone(),
            created_at: self.created_at,
        }
    }
}

#[derive(Debug, Clone, sqlx::FromRow, Serialize, Deserialize)]
pub struct ToolCallRow {
    pub id: Uuid,
    pub run_id: Uuid,
    pub message_id: Uuid,
    pub call_id: String,
    pub tool_name: String,
    pub input: Json<Value>,
    pub edited_input: Option<Json<Value>>,
    pub output: Option<Json<Value>>,
    pub status: ToolCallStatus,
    pub duration_ms: Option<i64>,
    pub step: i32,
    pub decided_by: Option<String>,
    pub decision_comment: Option<String>,
    pub question_id: Option<Uuid>,
    pub child_run_ids: Json<Vec<Uuid>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ToolCallRow {
    pub fn to_tool_call(&self) -> Result<ToolCall, StoreError> {
        Ok(ToolCall {
            id: self.id,
            run_id: self.run_id,
            message_id: self.message_id,
            call_id: self.call_id.clone(),
            tool_name: self.tool_name.clone(),
            input: self.input.0.clone(),
            edited_input: self.edited_input.as_ref().map(|v| v.0.clone()),
            output: self.output.as_ref().map(|v| v.0.clone()),
            status: self.status,
            duration_ms: self.duration_ms.and_then(|d| u64::try_from(d).ok()),
            step: count(self.step),
            decided_by: self.decided_by.clone(),
            decision_comment: self.decision_comment.clone(),
            question_id: self.question_id,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// How a page of runs is chosen (newest first).
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    pub agent_id: Option<Uuid>,
    pub parent_run_id: Option<Uuid>,
    pub project: Option<String>,
    /// Only runs created with this token (an `agent` token reads its own runs only).
    pub created_by: Option<Uuid>,
    pub before: Option<Uuid>,
    pub limit: u32,
}

/// How a page of tool calls is chosen (by step, then creation).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolCallFilter {
    /// Only the calls of one assistant message.
    pub message_id: Option<Uuid>,
    pub tool_name: Option<String>,
    pub status: Option<ToolCallStatus>,
    pub after: Option<Uuid>,
    pub limit: u32,
}

/// A change of a run's status made by the worker that holds its lease.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunTransition {
    pub status: RunStatus,
    pub result: Option<String>,
    pub error_message: Option<String>,
    pub at: DateTime<Utc>,
}

/// What became of `prepare_resume`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ResumeOutcome {
    /// The run will continue; it is `queued` now unless it still waits on questions the caller resolves next.
    Accepted(RunRow),
    /// Not in a state that can be resumed.
    NotResumable(RunRow),
    /// The cumulative step count has reached the total cap.
    CapReached(RunRow),
    NotFound,
}
