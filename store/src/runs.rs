//! The store of agents and runs, written once for both backends, and its SQL; the steps its writes share (fencing,
//! settling, a run's events) are in [`super::run_steps`].
//!
//! Every write of the executor is *fenced*: it happens only while the writing worker still holds the run's lease
//! and the run is `running`, so a worker that lost its lease (it stalled, another took over) or whose run was
//! cancelled cannot write a single message more.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use holdpoint_types::{AgentSpec, RunStatus};
use sqlx::types::Json;

use super::backend::{Sql, SqlBackend, Statement};
use super::idempotency::claim_idempotency_key;
use super::run_steps::{
    after_settling, agent_name_taken, append_run_event, cancel_questions_of_run, end_open_segment, fence,
    insert_segment, push_ids, requeue_if_unheld, requeue_parent_if_settled, run_by_idempotency_key, unsettled_children,
    update_run_in, workspace_name_on,
};
use super::sql::{is_unique_violation, table_row};
use super::*;

table_row!(RUN_COLUMNS = RunRow in "runs": id, workspace_id, agent_id, agent, project, input, status, step_count,
    max_steps, max_total_steps, parent_run_id, parent_run_ids, result, error_message, resume_prompt, lease_owner,
    lease_until, created_by, created_at, updated_at, completed_at, executor, pause_on_input);
table_row!(SEGMENT_COLUMNS = SegmentRow in "run_segments": id, run_id, idx, resumed_from, start_step, steps, max_steps,
    started_at, ended_at, end_status);
table_row!(MESSAGE_COLUMNS = MessageRow in "run_messages": id, run_id, seq, step, role, content, created_at);
table_row!(TOOL_CALL_COLUMNS = ToolCallRow in "tool_calls": id, run_id, message_id, call_id, tool_name, input,
    edited_input, output, status, duration_ms, step, decided_by, decision_comment, question_id, child_run_ids,
    created_at, updated_at);
table_row!(AGENT_COLUMNS = AgentRow in "agents": id, workspace_id, name, spec, created_at, updated_at);

/// The `decided_by` of tool calls an agent's approval policy decided (the executor sets it).
pub const POLICY_DECIDER: &str = "policy";

/// Questions that hold a run: every pending one of its workspace but the non-blocking.
pub(super) const HOLDING_QUESTIONS: &str = "SELECT 1 FROM questions WHERE run_id = runs.id AND workspace_id = runs.workspace_id \
     AND status = 'pending' AND kind <> 'non_blocking'";
/// A run a worker may take: queued, or running under a lease that ran out (`$3` is now).
pub(super) const CLAIMABLE: &str = "status = 'queued' OR (status = 'running' AND lease_until < $3)";
/// Gives a run to worker `$1` until `$2` (`$3` is now), marking it `running`; the claims add which run.
const CLAIM: &str = "UPDATE runs SET status = 'running', lease_owner = $1, lease_until = $2, updated_at = $3";
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

/// Agents and runs. Written once for both stores; every method that changes a run's status appends its
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
    /// The run a creation with this idempotency key made, whatever request came with the key; `None` if none did.
    /// What keys a run to something outside Holdpoint (an AG-UI thread) reads, without creating one.
    async fn run_by_key(&self, key: &IdempotencyKey) -> StoreResult<Option<RunRow>>;
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

#[async_trait]
impl<B: SqlBackend> RunStore for B {
    async fn insert_agent(&self, agent: &AgentRow) -> StoreResult<()> {
        self.write_alone().execute(Statement::insert(agent)).await.map_err(agent_name_taken)?;
        Ok(())
    }

    async fn update_agent(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        spec: &AgentSpec,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<AgentRow>> {
        self.write_alone()
            .fetch_optional(
                Statement::new(format!(
                    "UPDATE agents SET name = $1, spec = $2, updated_at = $3 WHERE workspace_id = $4 AND id = $5 \
                     RETURNING {AGENT_COLUMNS}"
                ))
                .bind(&spec.name)
                .bind(Json(spec))
                .bind(at)
                .bind(workspace_id)
                .bind(id),
            )
            .await
            .map_err(agent_name_taken)
    }

    async fn agent(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<AgentRow>> {
        self.read().fetch_optional(Statement::by_id(AGENT_COLUMNS, "agents", workspace_id, id)).await
    }

    async fn agent_by_name(&self, workspace_id: Uuid, name: &str) -> StoreResult<Option<AgentRow>> {
        self.read()
            .fetch_optional(
                Statement::new(format!("SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = $1 AND name = $2"))
                    .bind(workspace_id)
                    .bind(name),
            )
            .await
    }

    async fn list_agents(&self, workspace_id: Uuid, after: Option<&str>, limit: u32) -> StoreResult<Vec<AgentRow>> {
        let mut query = Statement::new(format!("SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = "));
        query.push_bind(workspace_id);
        query.push_filter("name > ", after);
        query.push(" ORDER BY name LIMIT ").push_bind(i64::from(limit));
        self.read().fetch_all(query).await
    }

    async fn create_run(
        &self,
        run: &RunRow,
        segment: &SegmentRow,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Created<RunRow>> {
        if let Some(key) = idempotency
            && let Some(existing) = run_by_idempotency_key(self, key).await?
        {
            return Ok(Created { value: existing, created: false });
        }
        let mut write = self.begin_write().await?;
        if let Some(key) = idempotency {
            let claimed = claim_idempotency_key(&mut write, key, run.id, run.created_at).await;
            if let Err(err) = claimed {
                if matches!(&err, StoreError::Database(err) if is_unique_violation(err)) {
                    drop(write);
                    if let Some(existing) = run_by_idempotency_key(self, key).await? {
                        return Ok(Created { value: existing, created: false });
                    }
                }
                return Err(err);
            }
        }
        write.execute(Statement::insert(run)).await?;
        insert_segment(&mut write, segment).await?;
        let event_id = append_run_event(self, &mut write, run).await?;
        self.commit_write(write, Some(event_id)).await?;
        Ok(Created { value: run.clone(), created: true })
    }

    async fn run(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<RunRow>> {
        self.read().fetch_optional(Statement::by_id(RUN_COLUMNS, "runs", workspace_id, id)).await
    }

    async fn run_by_key(&self, key: &IdempotencyKey) -> StoreResult<Option<RunRow>> {
        match run_by_idempotency_key(self, key).await {
            Err(StoreError::IdempotencyMismatch { resource_id }) => {
                RunStore::run(self, key.workspace_id, resource_id).await
            }
            other => other,
        }
    }

    async fn list_runs(&self, workspace_id: Uuid, filter: &RunFilter) -> StoreResult<Vec<RunRow>> {
        let mut query = Statement::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE workspace_id = "));
        query.push_bind(workspace_id);
        query.push_filter("status = ", filter.status.map(|v| v.as_str()));
        query.push_filter("agent_id = ", filter.agent_id);
        query.push_filter("parent_run_id = ", filter.parent_run_id);
        query.push_filter("project = ", filter.project.as_deref());
        query.push_filter("created_by = ", filter.created_by);
        query.push_filter("id < ", filter.before);
        query.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(filter.limit));
        self.read().fetch_all(query).await
    }

    async fn segments(&self, run_id: Uuid) -> StoreResult<Vec<SegmentRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!("SELECT {SEGMENT_COLUMNS} FROM run_segments WHERE run_id = $1 ORDER BY idx"))
                    .bind(run_id),
            )
            .await
    }

    async fn pending_question_ids(&self, workspace_id: Uuid, run_id: Uuid) -> StoreResult<Vec<Uuid>> {
        let rows: Vec<(Uuid,)> = self
            .read()
            .fetch_all(
                Statement::new(
                    "SELECT id FROM questions WHERE run_id = $1 AND workspace_id = $2 AND status = 'pending' \
                     ORDER BY id",
                )
                .bind(run_id)
                .bind(workspace_id),
            )
            .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    async fn messages(&self, run_id: Uuid, after_seq: i32, limit: u32) -> StoreResult<Vec<MessageRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {MESSAGE_COLUMNS} FROM run_messages WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
                ))
                .bind(run_id)
                .bind(after_seq)
                .bind(i64::from(limit)),
            )
            .await
    }

    async fn message(&self, run_id: Uuid, id: Uuid) -> StoreResult<Option<MessageRow>> {
        self.read()
            .fetch_optional(
                Statement::new(format!("SELECT {MESSAGE_COLUMNS} FROM run_messages WHERE run_id = $1 AND id = $2"))
                    .bind(run_id)
                    .bind(id),
            )
            .await
    }

    async fn tool_calls(&self, run_id: Uuid, filter: &ToolCallFilter) -> StoreResult<Vec<ToolCallRow>> {
        let mut query = Statement::new(format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE run_id = "));
        query.push_bind(run_id);
        query.push_filter("message_id = ", filter.message_id);
        query.push_filter("tool_name = ", filter.tool_name.as_deref());
        query.push_filter("status = ", filter.status.map(|v| v.as_str()));
        query.push_filter("id > ", filter.after);
        query.push(" ORDER BY step, id LIMIT ").push_bind(i64::from(filter.limit));
        self.read().fetch_all(query).await
    }

    async fn tool_call(&self, run_id: Uuid, id: Uuid) -> StoreResult<Option<ToolCallRow>> {
        self.read()
            .fetch_optional(
                Statement::new(format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE run_id = $1 AND id = $2"))
                    .bind(run_id)
                    .bind(id),
            )
            .await
    }

    async fn workspace_name(&self, workspace_id: Uuid) -> StoreResult<String> {
        workspace_name_on(self, &mut self.read(), workspace_id).await
    }

    async fn claim_run(
        &self,
        owner: Uuid,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<RunRow>> {
        let claim = Statement::new(format!(
            // Concurrent claimers skip the rows others are claiming instead of queueing behind them.
            "{CLAIM} WHERE id = (SELECT id FROM runs WHERE executor = 'server' AND ({CLAIMABLE}) \
             ORDER BY updated_at LIMIT 1{}) AND ({CLAIMABLE}) RETURNING {RUN_COLUMNS}",
            B::FOR_UPDATE_SKIP_LOCKED
        ));
        update_run_with_event(self, claim.bind(owner).bind(lease_until).bind(now)).await
    }

    async fn claim_run_by_id(
        &self,
        run_id: Uuid,
        owner: Uuid,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<RunRow>> {
        let claim = Statement::new(format!("{CLAIM} WHERE id = $4 AND ({CLAIMABLE}) RETURNING {RUN_COLUMNS}"));
        update_run_with_event(self, claim.bind(owner).bind(lease_until).bind(now).bind(run_id)).await
    }

    async fn renew_lease(&self, run_id: Uuid, owner: Uuid, until: DateTime<Utc>) -> StoreResult<bool> {
        let renewed = self
            .write_alone()
            .execute(
                Statement::new(
                    "UPDATE runs SET lease_until = $1 WHERE id = $2 AND lease_owner = $3 AND status = 'running'",
                )
                .bind(until)
                .bind(run_id)
                .bind(owner),
            )
            .await?;
        Ok(renewed == 1)
    }

    async fn current_segment(&self, run_id: Uuid, owner: Uuid, at: DateTime<Utc>) -> StoreResult<SegmentRow> {
        let mut write = self.begin_write().await?;
        fence(&mut write, run_id, owner).await?;
        let last: Option<SegmentRow> = write
            .fetch_optional(
                Statement::new(format!(
                    "SELECT {SEGMENT_COLUMNS} FROM run_segments WHERE run_id = $1 ORDER BY idx DESC LIMIT 1"
                ))
                .bind(run_id),
            )
            .await?;
        if let Some(open) = last.as_ref().filter(|s| s.ended_at.is_none()) {
            let open = open.clone();
            self.commit_write(write, None).await?;
            return Ok(open);
        }
        let (step_count, max_steps): (i32, i32) = write
            .fetch_one(Statement::new("SELECT step_count, max_steps FROM runs WHERE id = $1").bind(run_id))
            .await?;
        let segment = SegmentRow {
            id: Uuid::now_v7(),
            run_id,
            idx: last.as_ref().map_or(1, |s| s.idx + 1),
            resumed_from: last.as_ref().map(|s| s.id),
            start_step: step_count,
            steps: 0,
            max_steps,
            started_at: at,
            ended_at: None,
            end_status: None,
        };
        insert_segment(&mut write, &segment).await?;
        self.commit_write(write, None).await?;
        Ok(segment)
    }

    async fn append_messages(
        &self,
        run_id: Uuid,
        owner: Uuid,
        messages: &[MessageRow],
        tool_calls: &[ToolCallRow],
        step: Option<i32>,
        audit: &[NewAuditEntry],
    ) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        fence(&mut write, run_id, owner).await?;
        for entry in audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        for m in messages {
            write.execute(Statement::insert(m)).await?;
        }
        for c in tool_calls {
            write.execute(Statement::insert(c)).await?;
        }
        if let Some(step) = step {
            let at = messages.last().map_or_else(crate::now, |m| m.created_at);
            write
                .execute(
                    Statement::new("UPDATE runs SET step_count = $1, updated_at = $2 WHERE id = $3")
                        .bind(step)
                        .bind(at)
                        .bind(run_id),
                )
                .await?;
            write
                .execute(
                    Statement::new("UPDATE run_segments SET steps = steps + 1 WHERE run_id = $1 AND ended_at IS NULL")
                        .bind(run_id),
                )
                .await?;
        }
        self.commit_write(write, None).await
    }

    async fn update_tool_call(&self, owner: Uuid, c: &ToolCallRow, audit: Option<&NewAuditEntry>) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        fence(&mut write, c.run_id, owner).await?;
        if let Some(entry) = audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        write
            .execute(
                Statement::new(
                    "UPDATE tool_calls SET edited_input = $1, output = $2, status = $3, duration_ms = $4, \
                     decided_by = $5, decision_comment = $6, question_id = $7, child_run_ids = $8, updated_at = $9 \
                     WHERE id = $10 AND run_id = $11",
                )
                .bind(&c.edited_input)
                .bind(&c.output)
                .bind(c.status)
                .bind(c.duration_ms)
                .bind(&c.decided_by)
                .bind(&c.decision_comment)
                .bind(c.question_id)
                .bind(&c.child_run_ids)
                .bind(c.updated_at)
                .bind(c.id)
                .bind(c.run_id),
            )
            .await?;
        self.commit_write(write, None).await
    }

    async fn take_resume_prompt(&self, run_id: Uuid, owner: Uuid) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        fence(&mut write, run_id, owner).await?;
        write.execute(Statement::new("UPDATE runs SET resume_prompt = NULL WHERE id = $1").bind(run_id)).await?;
        self.commit_write(write, None).await
    }

    async fn release_run(
        &self,
        run_id: Uuid,
        owner: Uuid,
        t: &RunTransition,
        records: &dyn CascadeRecords,
    ) -> StoreResult<RunRow> {
        let mut write = self.begin_write().await?;
        self.lock_run_and_parent(&mut write, run_id).await?;
        fence(&mut write, run_id, owner).await?;
        let mut status = t.status;
        let still_held = match status {
            RunStatus::WaitingForInput | RunStatus::WaitingForApproval => {
                let (held,): (i64,) = write
                    .fetch_one(
                        Statement::new(format!(
                            "SELECT COUNT(*) FROM runs WHERE id = $1 AND EXISTS ({HOLDING_QUESTIONS})"
                        ))
                        .bind(run_id),
                    )
                    .await?;
                held > 0
            }
            RunStatus::WaitingForChildren => unsettled_children(&mut write, run_id).await? > 0,
            _ => true,
        };
        if !still_held {
            status = RunStatus::Queued;
        }
        end_open_segment(&mut write, run_id, t.status, t.at).await?;
        let completed_at = status.is_terminal().then_some(t.at);
        let run: RunRow = write
            .fetch_one(
                Statement::new(format!(
                    "UPDATE runs SET status = $1, result = COALESCE($2, result), error_message = $3, \
                     lease_owner = NULL, lease_until = NULL, updated_at = $4, completed_at = $5 WHERE id = $6 \
                     RETURNING {RUN_COLUMNS}"
                ))
                .bind(status.as_str())
                .bind(&t.result)
                .bind(&t.error_message)
                .bind(t.at)
                .bind(completed_at)
                .bind(run_id),
            )
            .await?;
        let mut last = append_run_event(self, &mut write, &run).await?;
        if let Some(id) = after_settling(self, &mut write, &run, t.at, records).await? {
            last = id;
        }
        self.commit_write(write, Some(last)).await?;
        Ok(run)
    }

    async fn cancel_run(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        actor: &AuditActor,
        records: &dyn CascadeRecords,
    ) -> StoreResult<Option<(RunRow, bool)>> {
        let mut write = self.begin_write().await?;
        let existing: Option<RunRow> =
            write.fetch_optional(Statement::by_id(RUN_COLUMNS, "runs", workspace_id, id)).await?;
        let Some(existing) = existing else { return Ok(None) };
        if existing.status.is_terminal() {
            return Ok(Some((existing, false)));
        }
        self.lock_run_tree(&mut write, id).await?;
        let mut last = None;
        let mut to_cancel = vec![id];
        let mut cancelled_root = None;
        while let Some(run_id) = to_cancel.pop() {
            let previous: Option<(String,)> =
                write.fetch_optional(Statement::new("SELECT status FROM runs WHERE id = $1").bind(run_id)).await?;
            let run: Option<RunRow> = write
                .fetch_optional(
                    Statement::new(format!(
                        "UPDATE runs SET status = 'cancelled', lease_owner = NULL, lease_until = NULL, \
                         updated_at = $1, completed_at = $1, error_message = COALESCE(error_message, 'cancelled') \
                         WHERE id = $2 AND status NOT IN ('completed', 'failed', 'cancelled') RETURNING {RUN_COLUMNS}"
                    ))
                    .bind(at)
                    .bind(run_id),
                )
                .await?;
            let Some(run) = run else { continue };
            end_open_segment(&mut write, run.id, RunStatus::Cancelled, at).await?;
            last = Some(append_run_event(self, &mut write, &run).await?);
            let previous = previous.map_or_else(String::new, |(status,)| status);
            self.append_audit_in(&mut write, &records.run_cancelled(&run, &previous, actor)).await?;
            last = cancel_questions_of_run(self, &mut write, &run, "the run was cancelled", at, actor, records)
                .await?
                .or(last);
            let children: Vec<(Uuid,)> = write
                .fetch_all(
                    Statement::new(
                        "SELECT id FROM runs WHERE parent_run_id = $1 \
                         AND status NOT IN ('completed', 'failed', 'cancelled')",
                    )
                    .bind(run.id),
                )
                .await?;
            to_cancel.extend(children.into_iter().map(|(child,)| child));
            if run.id == id {
                cancelled_root = Some(run);
            }
        }
        let Some(root) = cancelled_root else {
            // It ended while this transaction waited for its lock: say how it is now, not how it was.
            let now: Option<RunRow> = write
                .fetch_optional(Statement::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1")).bind(id))
                .await?;
            return Ok(Some((now.unwrap_or(existing), false)));
        };
        if let Some(parent) = root.parent_run_id {
            last = requeue_parent_if_settled(self, &mut write, parent, at).await?.or(last);
        }
        self.commit_write(write, last).await?;
        Ok(Some((root, true)))
    }

    async fn prepare_resume(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        prompt: Option<&str>,
        at: DateTime<Utc>,
    ) -> StoreResult<ResumeOutcome> {
        let mut write = self.begin_write().await?;
        // Held to the commit: a cancel (which locks the run's tree) cannot land between the check and the update,
        // which would queue a cancelled run again.
        self.lock_run_in(&mut write, workspace_id, id).await?;
        let existing: Option<RunRow> =
            write.fetch_optional(Statement::by_id(RUN_COLUMNS, "runs", workspace_id, id)).await?;
        let Some(existing) = existing else { return Ok(ResumeOutcome::NotFound) };
        if !existing.status.is_resumable() {
            return Ok(ResumeOutcome::NotResumable(existing));
        }
        if existing.step_count >= existing.max_total_steps {
            return Ok(ResumeOutcome::CapReached(existing));
        }
        let run: RunRow = write
            .fetch_one(
                Statement::new(format!(
                    "UPDATE runs SET resume_prompt = COALESCE($1, resume_prompt), error_message = NULL, \
                     updated_at = $2, status = CASE WHEN status = 'paused' OR NOT EXISTS ({HOLDING_QUESTIONS}) \
                     THEN 'queued' ELSE status END WHERE id = $3 RETURNING {RUN_COLUMNS}"
                ))
                .bind(prompt)
                .bind(at)
                .bind(id),
            )
            .await?;
        let event_id = append_run_event(self, &mut write, &run).await?;
        self.commit_write(write, Some(event_id)).await?;
        Ok(ResumeOutcome::Accepted(run))
    }

    async fn requeue_stalled_runs(&self, at: DateTime<Utc>) -> StoreResult<usize> {
        let candidates: Vec<(Uuid, Uuid, String)> = self
            .read()
            .fetch_all(Statement::new(format!(
                "SELECT id, workspace_id, status FROM runs WHERE (status IN ('waiting_for_input', \
                 'waiting_for_approval') AND NOT EXISTS ({HOLDING_QUESTIONS})) OR status = 'waiting_for_children' \
                 LIMIT 500"
            )))
            .await?;
        let mut requeued = 0;
        for (id, workspace_id, status) in candidates {
            let mut write = self.begin_write().await?;
            let event = if status == "waiting_for_children" {
                requeue_parent_if_settled(self, &mut write, id, at).await?
            } else {
                requeue_if_unheld(self, &mut write, workspace_id, id, at).await?
            };
            if event.is_some() {
                requeued += 1;
            }
            self.commit_write(write, event).await?;
        }
        Ok(requeued)
    }

    async fn child_run_status(&self, ids: &[Uuid]) -> StoreResult<Vec<RunRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = Statement::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id IN ("));
        push_ids(&mut query, ids.iter().copied());
        query.push(")");
        self.read().fetch_all(query).await
    }
}

/// Runs `update` (an `UPDATE` of one run, returning it) in a write of its own with the run's `run_status` event: the
/// run as changed, or `None` if the update changed none.
async fn update_run_with_event<B: SqlBackend>(backend: &B, update: Statement<'_>) -> StoreResult<Option<RunRow>> {
    let mut write = backend.begin_write().await?;
    let Some((run, event_id)) = update_run_in(backend, &mut write, update).await? else {
        return Ok(None);
    };
    backend.commit_write(write, Some(event_id)).await?;
    Ok(Some(run))
}
