//! What executing a run needs of the place the run is kept: its [`RunLedger`]. The server's workers keep it in the
//! server's own store ([`LocalLedger`]); `holdpoint run` keeps it on a server it reaches over the worker protocol
//! ([`super::remote::RemoteRun`]). The executor sees only this trait, so both execute the same loop.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use holdpoint_types::{NewQuestion, ToolCallStatus};
use uuid::Uuid;

use crate::error::AppError;
use crate::events::EventHub;
use crate::metrics::Metrics;
use crate::questions::{Asking, TimeoutBounds};
use crate::store::{
    AgentRow, Created, GrantRow, IdempotencyKey, MessageRow, QuestionRow, ResumeOutcome, RunRow, RunTransition,
    SegmentRow, Store, StoreError, StoreResult, ToolCallFilter, ToolCallRow,
};

/// A run's state as its executor reads and writes it. Every write is fenced on `owner`'s lease.
#[async_trait]
pub trait RunLedger: Send + Sync {
    /// Extends the lease; `false` if `owner` no longer holds it.
    async fn renew_lease(&self, run_id: Uuid, owner: Uuid, until: DateTime<Utc>) -> StoreResult<bool>;
    /// Starts the next segment if the last one has ended (a resume); returns the current segment.
    async fn current_segment(&self, run_id: Uuid, owner: Uuid, at: DateTime<Utc>) -> StoreResult<SegmentRow>;
    /// Messages in conversation order, after `after_seq`.
    async fn messages(&self, run_id: Uuid, after_seq: i32, limit: u32) -> StoreResult<Vec<MessageRow>>;
    /// Appends messages and the tool calls of a model turn (with the audit entries of the calls its policy
    /// decided); `step` is the new cumulative step count when the messages include a model turn.
    async fn append_messages(
        &self,
        run: &RunRow,
        owner: Uuid,
        messages: &[MessageRow],
        tool_calls: &[ToolCallRow],
        step: Option<i32>,
    ) -> StoreResult<()>;
    async fn tool_calls(&self, run_id: Uuid, filter: &ToolCallFilter) -> StoreResult<Vec<ToolCallRow>>;
    /// Writes a tool call's mutable fields (with the audit entry of a decision the write records).
    async fn update_tool_call(&self, run: &RunRow, owner: Uuid, call: &ToolCallRow) -> StoreResult<()>;
    /// Clears the resume prompt once it is in the conversation.
    async fn take_resume_prompt(&self, run_id: Uuid, owner: Uuid) -> StoreResult<()>;
    /// Ends the worker's hold on the run (see [`crate::store::RunStore::release_run`]).
    async fn release_run(&self, run_id: Uuid, owner: Uuid, transition: &RunTransition) -> StoreResult<RunRow>;
    async fn question(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>>;
    /// A question of the run from `input`, checked as every door checks what it asks.
    async fn prepare_question(
        &self,
        input: NewQuestion,
        workspace_id: Uuid,
        created_by: Option<Uuid>,
    ) -> Result<QuestionRow, AppError>;
    /// Asks a prepared question about the tool call `call` (its row's id), as every door asks it, once per call: a
    /// worker that takes the run over from one that asked and died before linking the call to the question gets
    /// that question back instead of asking a second. Returns the id of the question asked.
    async fn ask(&self, question: &QuestionRow, call: Uuid) -> StoreResult<Uuid>;
    async fn run(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<RunRow>>;
    async fn agent_by_name(&self, workspace_id: Uuid, name: &str) -> StoreResult<Option<AgentRow>>;
    /// Starts a child run (executed by the server); with a key seen before, returns the child started then.
    async fn create_run(
        &self,
        run: &RunRow,
        segment: &SegmentRow,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Created<RunRow>>;
    /// Accepts the resume of a paused child.
    async fn prepare_resume(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        prompt: Option<&str>,
        at: DateTime<Utc>,
    ) -> StoreResult<ResumeOutcome>;
    /// Runs by id (the children a `spawn_agents` call reports on).
    async fn child_run_status(&self, ids: &[Uuid]) -> StoreResult<Vec<RunRow>>;
    /// The live grant that lets `call` of `run` through without asking, its use counted and audited;
    /// `None` when a person must be asked.
    async fn let_through(&self, run: &RunRow, call: &ToolCallRow) -> StoreResult<Option<GrantRow>>;
    /// What the workspace's approval rules decide about a call of `run` of `tool` with `arguments`: audited and
    /// counted when `record`, else only evaluated.
    async fn rules_verdict(
        &self,
        run: &RunRow,
        tool: &str,
        arguments: &serde_json::Value,
        record: bool,
    ) -> StoreResult<crate::rules::Verdict>;
}

/// A run kept in this server's store: the ledger of the server's own workers, and what the worker protocol's
/// endpoint writes through for a client's run, so the audit entries a run's writes carry are decided here either way.
pub struct LocalLedger {
    pub store: Arc<dyn Store>,
    pub metrics: Arc<Metrics>,
    /// The server's event hub, which keeps the questions runs ask in memory while they are pending.
    pub hub: Option<EventHub>,
    /// The timeouts questions may have.
    pub bounds: TimeoutBounds,
    /// The channels outside Holdpoint's pages questions are delivered on.
    pub sends_on: crate::notifications::SendsOn,
    /// The workspaces' approval rules, compiled once per saved version for this ledger's runs.
    pub rules_cache: crate::rules::RulesCache,
}

impl LocalLedger {
    fn asking(&self) -> Asking<'_> {
        Asking {
            store: self.store.as_ref(),
            metrics: &self.metrics,
            hub: self.hub.as_ref(),
            bounds: self.bounds,
            sends_on: &self.sends_on,
            // The executor's questions name no callback URL.
            callbacks: crate::channels::webhooks::UrlPolicy::default(),
            // Uploads are refused beyond the server's own limit whatever a field promises.
            max_upload_bytes: crate::files::MAX_UPLOAD_BYTES_LIMIT,
        }
    }
}

#[async_trait]
impl RunLedger for LocalLedger {
    async fn renew_lease(&self, run_id: Uuid, owner: Uuid, until: DateTime<Utc>) -> StoreResult<bool> {
        self.store.renew_lease(run_id, owner, until).await
    }
    async fn current_segment(&self, run_id: Uuid, owner: Uuid, at: DateTime<Utc>) -> StoreResult<SegmentRow> {
        self.store.current_segment(run_id, owner, at).await
    }
    async fn messages(&self, run_id: Uuid, after_seq: i32, limit: u32) -> StoreResult<Vec<MessageRow>> {
        self.store.messages(run_id, after_seq, limit).await
    }
    async fn append_messages(
        &self,
        run: &RunRow,
        owner: Uuid,
        messages: &[MessageRow],
        tool_calls: &[ToolCallRow],
        step: Option<i32>,
    ) -> StoreResult<()> {
        let audit = crate::audit::policy_decisions(run, tool_calls);
        self.store.append_messages(run.id, owner, messages, tool_calls, step, &audit).await
    }
    async fn tool_calls(&self, run_id: Uuid, filter: &ToolCallFilter) -> StoreResult<Vec<ToolCallRow>> {
        self.store.tool_calls(run_id, filter).await
    }
    async fn update_tool_call(&self, run: &RunRow, owner: Uuid, call: &ToolCallRow) -> StoreResult<()> {
        // Only a call still waiting for approval can be refused by its policy; the lease fences every other writer
        // of the call, so what is stored now is what the write replaces.
        let audit = match call.status {
            ToolCallStatus::Rejected | ToolCallStatus::Approved
                if call.question_id.is_none() && call.decided_by.is_some() =>
            {
                let previous = self.store.tool_call(run.id, call.id).await?.map(|stored| stored.status);
                previous.and_then(|previous| crate::audit::policy_refusal(run, previous, call))
            }
            _ => None,
        };
        self.store.update_tool_call(owner, call, audit.as_ref()).await
    }
    async fn take_resume_prompt(&self, run_id: Uuid, owner: Uuid) -> StoreResult<()> {
        self.store.take_resume_prompt(run_id, owner).await
    }
    async fn release_run(&self, run_id: Uuid, owner: Uuid, transition: &RunTransition) -> StoreResult<RunRow> {
        self.store.release_run(run_id, owner, transition, &crate::audit::RunCascades).await
    }
    async fn question(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>> {
        self.store.question(workspace_id, id).await
    }
    async fn prepare_question(
        &self,
        input: NewQuestion,
        workspace_id: Uuid,
        created_by: Option<Uuid>,
    ) -> Result<QuestionRow, AppError> {
        self.asking().prepare(input, workspace_id, created_by).await
    }
    async fn ask(&self, question: &QuestionRow, call: Uuid) -> StoreResult<Uuid> {
        let workspace = self.store.workspace_name(question.workspace_id).await?;
        let key = crate::questions::tool_call_key(question.workspace_id, call);
        Ok(self.asking().record(question, &workspace, Some(&key)).await?.question.id)
    }
    async fn run(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<RunRow>> {
        self.store.run(workspace_id, id).await
    }
    async fn agent_by_name(&self, workspace_id: Uuid, name: &str) -> StoreResult<Option<AgentRow>> {
        self.store.agent_by_name(workspace_id, name).await
    }
    async fn create_run(
        &self,
        run: &RunRow,
        segment: &SegmentRow,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Created<RunRow>> {
        self.store.create_run(run, segment, idempotency).await
    }
    async fn prepare_resume(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        prompt: Option<&str>,
        at: DateTime<Utc>,
    ) -> StoreResult<ResumeOutcome> {
        self.store.prepare_resume(workspace_id, id, prompt, at).await
    }
    async fn child_run_status(&self, ids: &[Uuid]) -> StoreResult<Vec<RunRow>> {
        self.store.child_run_status(ids).await
    }
    async fn let_through(&self, run: &RunRow, call: &ToolCallRow) -> StoreResult<Option<GrantRow>> {
        crate::grants::let_through(self.store.as_ref(), &crate::grants::call_of_run(run, call), call_record(call)).await
    }
    async fn rules_verdict(
        &self,
        run: &RunRow,
        tool: &str,
        arguments: &serde_json::Value,
        record: bool,
    ) -> StoreResult<crate::rules::Verdict> {
        let rules =
            crate::rules::Rules { store: self.store.as_ref(), metrics: &self.metrics, cache: &self.rules_cache };
        rules.decide_for_run(run, tool, arguments, record).await.map_err(|err| match err {
            AppError::Internal(cause) => StoreError::Corrupt(format!("the approval rules: {cause}")),
            other => StoreError::Corrupt(format!("the approval rules: {other}")),
        })
    }
}

/// What the audit entry of a call a grant let through says of the call besides its tool and arguments.
fn call_record(call: &ToolCallRow) -> serde_json::Value {
    serde_json::json!({ "call_id": call.call_id, "tool_call_id": call.id, "step": call.step })
}
