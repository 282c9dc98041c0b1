//! The store of agents and runs, and the SQL both backends use for it.
//!
//! Every write of the executor is *fenced*: it happens only while the writing worker still holds the run's lease
//! and the run is `running`, so a worker that lost its lease (it stalled, another took over) or whose run was
//! cancelled cannot write a single message more.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use app::types::AgentSpec;

use super::*;

pub(super) const RUN_COLUMNS: &str = "id, workspace_id, agent_id, agent, project, input, status, step_count, max_steps, \
     max_total_steps, parent_run_id, parent_run_ids, result, error_message, resume_prompt, lease_owner, lease_until, \
     created_by, created_at, updated_at, completed_at, executor, pause_on_input";
pub(super) const SEGMENT_COLUMNS: &str = "id, run_id, idx, resumed_from, start_step, steps, max_steps, started_at, ended_at, \
     end_status";
pub(super) const MESSAGE_COLUMNS: &str = "id, run_id, seq, step, role, content, created_at";
pub(super) const TOOL_CALL_COLUMNS: &str = "id, run_id, message_id, call_id, tool_name, input, edited_input, output, status, \
     duration_ms, step, decided_by, decision_comment, question_id, child_run_ids, created_at, updated_at";
pub(super) const AGENT_COLUMNS: &str = "id, workspace_id, name, spec, created_at, updated_at";

/// The `decided_by` of tool calls an agent's approval policy decided (the executor sets it).
pub const POLICY_DECIDER: &str = "policy";

/// Questions that hold a run: every pending one of its workspace but the non-blocking.
pub(super) const HOLDING_QUESTIONS: &str = "SELECT 1 FROM questions WHERE run_id = runs.id AND workspace_id = runs.workspace_id \
     AND status = 'pending' AND kind <> 'non_blocking'";
/// A run a worker may take: queued, or running under a lease that ran out (`$3` is now).
pub(super) const CLAIMABLE: &str = "status = 'queued' OR (status = 'running' AND lease_until < $3)";
/// Statuses in which a child no longer holds up a parent waiting on it.
pub(super) const SETTLED_CHILD: &str = "('completed', 'failed', 'cancelled', 'paused')";

/// The audit entries of what a run's change carries along with it (the pending questions of a run that ends or is
/// cancelled, the unfinished descendants of a cancelled run). Which rows a cascade reaches is known only inside the
/// transaction that makes it, so the use cases hand the store how to word each entry, and the store writes them in
/// that transaction.
pub trait CascadeRecords: Send + Sync {
    /// The entry of a question cancelled with its run; `question` is the row as cancelled.
    fn question_cancelled(&self, question: &QuestionRow, actor: &AuditActor) -> NewAuditEntry;
    /// The entry of a run cancelled by `actor`; `run` is the row as cancelled, `previous_status` what it was.
    fn run_cancelled(&self, run: &RunRow, previous_status: &str, actor: &AuditActor) -> NewAuditEntry;
    /// Who cancels the questions of a run that reached a terminal status by itself.
    fn run_lifecycle(&self, run: &RunRow) -> AuditActor;
}

/// Agents and runs. Implemented by both stores; every method that changes a run's status appends its
/// `run_status` event in the same transaction.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Stores a new agent; [`StoreError::Duplicate`] if the workspace has one of that name.
    async fn insert_agent(&self, agent: &AgentRow) -> StoreResult<()>;
    /// Replaces an agent's definition; `None` if it does not exist.
    async fn update_agent(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        spec: &AgentSpec,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<AgentRow>>;
    async fn agent(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<AgentRow>>;
    async fn agent_by_name(&self, workspace_id: Uuid, name: &str) -> StoreResult<Option<AgentRow>>;
    /// Agents by name, after `after` (a name).
    async fn list_agents(&self, workspace_id: Uuid, after: Option<&str>, limit: u32) -> StoreResult<Vec<AgentRow>>;

    /// Inserts a queued run with its first segment and its `run_status` event. With an idempotency key seen
    /// before, returns the run created then.
    async fn create_run(
        &self,
        run: &RunRow,
        segment: &SegmentRow,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Created<RunRow>>;
    async fn run(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<RunRow>>;
    async fn list_runs(&self, workspace_id: Uuid, filter: &RunFilter) -> StoreResult<Vec<RunRow>>;
    async fn segments(&self, run_id: Uuid) -> StoreResult<Vec<SegmentRow>>;
    /// Ids of the run's pending questions, oldest first.
    async fn pending_question_ids(&self, workspace_id: Uuid, run_id: Uuid) -> StoreResult<Vec<Uuid>>;
    /// Messages in conversation order, after `after_seq`.
    async fn messages(&self, run_id: Uuid, after_seq: i32, limit: u32) -> StoreResult<Vec<MessageRow>>;
    async fn message(&self, run_id: Uuid, id: Uuid) -> StoreResult<Option<MessageRow>>;
    async fn tool_calls(&self, run_id: Uuid, filter: &ToolCallFilter) -> StoreResult<Vec<ToolCallRow>>;
    async fn tool_call(&self, run_id: Uuid, id: Uuid) -> StoreResult<Option<ToolCallRow>>;
    /// The workspace's name (the wire form of a run names it).
    async fn workspace_name(&self, workspace_id: Uuid) -> StoreResult<String>;

    /// Takes the oldest queued run (or a running one whose worker's lease ran out) for `owner` until
    /// `lease_until`, and marks it `running`. At most one worker ever gets a given claim.
    async fn claim_run(
        &self,
        owner: Uuid,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<RunRow>>;
    /// Takes this run (queued, or running under a lease that ran out) for `owner`: how a client that executes its
    /// own run (`holdpoint run` against a server) claims it.
    async fn claim_run_by_id(
        &self,
        run_id: Uuid,
        owner: Uuid,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<RunRow>>;
    /// Extends the lease; `false` if `owner` no longer holds it.
    async fn renew_lease(&self, run_id: Uuid, owner: Uuid, until: DateTime<Utc>) -> StoreResult<bool>;
    /// Starts the next segment if the last one has ended (a resume); returns the current segment.
    async fn current_segment(&self, run_id: Uuid, owner: Uuid, at: DateTime<Utc>) -> StoreResult<SegmentRow>;
    /// Appends messages and tool calls, and `audit` (the entries of the calls the approval policy decided on
    /// arrival) in the same transaction; `step` (the new cumulative count) is set on the run and counted in the
    /// current segment when the messages include a model turn. Fenced.
    async fn append_messages(
        &self,
        run_id: Uuid,
        owner: Uuid,
        messages: &[MessageRow],
        tool_calls: &[ToolCallRow],
        step: Option<i32>,
        audit: &[NewAuditEntry],
    ) -> StoreResult<()>;
    /// Writes a tool call's mutable fields, and `audit` (the entry of a decision this write records) in the same
    /// transaction. Fenced.
    async fn update_tool_call(&self, owner: Uuid, call: &ToolCallRow, audit: Option<&NewAuditEntry>)
    -> StoreResult<()>;
    /// Clears the resume prompt once it is in the conversation. Fenced.
    async fn take_resume_prompt(&self, run_id: Uuid, owner: Uuid) -> StoreResult<()>;
    /// Ends the worker's hold on the run: the segment ends and the run takes `transition.status`. A waiting status
    /// whose reason is already gone (the questions were answered meanwhile, the children finished) becomes
    /// `queued` instead, so no answer is ever missed. Terminal statuses cancel the run's pending questions and may
    /// wake a parent waiting on it, each cancellation recorded as `records` words it. Fenced.
    async fn release_run(
        &self,
        run_id: Uuid,
        owner: Uuid,
        transition: &RunTransition,
        records: &dyn CascadeRecords,
    ) -> StoreResult<RunRow>;
    /// Cancels a run that has not finished, its pending questions and its unfinished descendants, and records it
    /// all in the audit log as done by `actor`, in the words of `records`. `Ok(None)`: no such run.
    async fn cancel_run(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        actor: &AuditActor,
        records: &dyn CascadeRecords,
    ) -> StoreResult<Option<(RunRow, bool)>>;
    /// Accepts a resume: keeps the prompt for the next segment and queues a paused run. Waiting runs are queued
    /// when their last question is resolved.
    async fn prepare_resume(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        prompt: Option<&str>,
        at: DateTime<Utc>,
    ) -> StoreResult<ResumeOutcome>;
    /// Queues waiting runs whose reason to wait is gone (a safety net; normally the resolution queues them).
    async fn requeue_stalled_runs(&self, at: DateTime<Utc>) -> StoreResult<usize>;
    /// Runs by id (the children a `spawn_agents` call reports on).
    async fn child_run_status(&self, ids: &[Uuid]) -> StoreResult<Vec<RunRow>>;
}
