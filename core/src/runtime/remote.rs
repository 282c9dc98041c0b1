//! A run's ledger kept on a server: what lets `holdpoint run` execute the agent loop in its own process while the
//! server keeps the state. Each ledger operation is one call of the worker protocol ([`crate::worker_api`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use holdpoint_types::NewQuestion;

use super::ledger::RunLedger;
use crate::error::AppError;
use crate::questions::TimeoutBounds;
use crate::store::{
    AgentRow, Created, GrantRow, IdempotencyKey, MessageRow, QuestionRow, ResumeOutcome, RunRow, RunTransition,
    SegmentRow, StoreError, StoreResult, ToolCallFilter, ToolCallRow,
};
use crate::worker_api::WorkerCall;

/// The worker protocol for one run on one server.
pub struct RemoteRun {
    http: reqwest::Client,
    url: String,
    token: String,
    lease_seconds: u32,
}

impl RemoteRun {
    pub fn new(base: &str, token: &str, run_id: Uuid, lease_seconds: u32) -> Self {
        RemoteRun {
            http: reqwest::Client::new(),
            url: format!("{}/api/v1/runs/{run_id}/worker", base.trim_end_matches('/')),
            token: token.to_owned(),
            lease_seconds,
        }
    }

    async fn call<T: DeserializeOwned>(&self, call: WorkerCall) -> StoreResult<T> {
        let response = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .json(&call)
            .send()
            .await
            .map_err(|e| StoreError::Unreachable(e.to_string()))?;
        let status = response.status();
        let body: serde_json::Value =
            response.json().await.map_err(|e| StoreError::Unreachable(format!("its reply is unreadable: {e}")))?;
        if status.as_u16() == 409 {
            // The server fences writes on the lease, as the database does for its own workers.
            return Err(StoreError::LeaseLost);
        }
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("refused").to_owned();
            return Err(StoreError::Refused { status: status.as_u16(), message });
        }
        serde_json::from_value(body).map_err(|e| StoreError::Unreachable(format!("its reply does not fit: {e}")))
    }

    /// Claims the run if it is queued; `None` if it is not (it waits, runs elsewhere, or is over).
    pub async fn claim(&self, owner: Uuid) -> StoreResult<Option<RunRow>> {
        self.call(WorkerCall::Claim { owner, lease_seconds: self.lease_seconds }).await
    }
}

/// Questions are checked here as far as the run's own process can (fields, timeout); the server checks them again with
/// its own bounds and its members when it asks them.
const CLIENT_BOUNDS: TimeoutBounds = TimeoutBounds { min_seconds: 1, max_seconds: 30 * 86_400 };

#[async_trait]
impl RunLedger for RemoteRun {
    async fn renew_lease(&self, _: Uuid, owner: Uuid, _: DateTime<Utc>) -> StoreResult<bool> {
        self.call(WorkerCall::RenewLease { owner, lease_seconds: self.lease_seconds }).await
    }
    async fn current_segment(&self, _: Uuid, owner: Uuid, _: DateTime<Utc>) -> StoreResult<SegmentRow> {
        self.call(WorkerCall::CurrentSegment { owner }).await
    }
    async fn messages(&self, _: Uuid, after_seq: i32, limit: u32) -> StoreResult<Vec<MessageRow>> {
        self.call(WorkerCall::Messages { after_seq, limit }).await
    }
    /// The server records the policy's decisions itself: a worker's word is not an audit entry.
    async fn append_messages(
        &self,
        _: &RunRow,
        owner: Uuid,
        messages: &[MessageRow],
        tool_calls: &[ToolCallRow],
        step: Option<i32>,
    ) -> StoreResult<()> {
        let call =
            WorkerCall::AppendMessages { owner, messages: messages.to_vec(), tool_calls: tool_calls.to_vec(), step };
        self.call(call).await
    }
    async fn tool_calls(&self, _: Uuid, filter: &ToolCallFilter) -> StoreResult<Vec<ToolCallRow>> {
        self.call(WorkerCall::ToolCalls { filter: filter.clone() }).await
    }
    async fn update_tool_call(&self, _: &RunRow, owner: Uuid, call: &ToolCallRow) -> StoreResult<()> {
        self.call(WorkerCall::UpdateToolCall { owner, call: call.clone() }).await
    }
    async fn take_resume_prompt(&self, _: Uuid, owner: Uuid) -> StoreResult<()> {
        self.call(WorkerCall::TakeResumePrompt { owner }).await
    }
    async fn release_run(&self, _: Uuid, owner: Uuid, transition: &RunTransition) -> StoreResult<RunRow> {
        self.call(WorkerCall::Release { owner, transition: transition.clone() }).await
    }
    async fn question(&self, _: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>> {
        self.call(WorkerCall::Question { id }).await
    }
    async fn prepare_question(
        &self,
        input: NewQuestion,
        workspace_id: Uuid,
        created_by: Option<Uuid>,
    ) -> Result<QuestionRow, AppError> {
        crate::questions::build_question(input, workspace_id, created_by, CLIENT_BOUNDS, crate::store::now())
    }
    async fn ask(&self, question: &QuestionRow, call: Uuid) -> StoreResult<Uuid> {
        // A server that replies nothing stored the question as sent.
        let asked: Option<Uuid> =
            self.call(WorkerCall::CreateQuestion { question: question.clone(), call: Some(call) }).await?;
        Ok(asked.unwrap_or(question.id))
    }
    async fn run(&self, _: Uuid, id: Uuid) -> StoreResult<Option<RunRow>> {
        let mut runs: Vec<RunRow> = self.call(WorkerCall::Runs { ids: vec![id] }).await?;
        Ok(runs.pop())
    }
    async fn agent_by_name(&self, _: Uuid, name: &str) -> StoreResult<Option<AgentRow>> {
        self.call(WorkerCall::AgentByName { name: name.to_owned() }).await
    }
    async fn let_through(&self, _: &RunRow, call: &ToolCallRow) -> StoreResult<Option<GrantRow>> {
        self.call(WorkerCall::LetThrough { call: call.clone() }).await
    }
    async fn rules_verdict(
        &self,
        _: &RunRow,
        tool: &str,
        arguments: &serde_json::Value,
        record: bool,
    ) -> StoreResult<crate::rules::Verdict> {
        self.call(WorkerCall::RulesVerdict { tool: tool.to_owned(), arguments: arguments.clone(), record }).await
    }
    async fn create_run(
        &self,
        run: &RunRow,
        segment: &SegmentRow,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Created<RunRow>> {
        let call =
            WorkerCall::CreateRun { run: run.clone(), segment: segment.clone(), key: idempotency.map(Into::into) };
        self.call(call).await
    }
    async fn prepare_resume(
        &self,
        _: Uuid,
        id: Uuid,
        prompt: Option<&str>,
        _: DateTime<Utc>,
    ) -> StoreResult<ResumeOutcome> {
        self.call(WorkerCall::PrepareResume { id, prompt: prompt.map(str::to_owned) }).await
    }
    async fn child_run_status(&self, ids: &[Uuid]) -> StoreResult<Vec<RunRow>> {
        self.call(WorkerCall::Runs { ids: ids.to_vec() }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_that_cannot_be_reached_is_reported_as_unreachable_not_as_corrupt_data() {
        // Nothing listens on port 1 of the loopback address: the connection is refused at once.
        let remote = RemoteRun::new("http://127.0.0.1:1", "token", Uuid::now_v7(), 30);
        match remote.claim(Uuid::now_v7()).await {
            Err(StoreError::Unreachable(_)) => {}
            other => panic!("expected Unreachable, got {other:?}"),
        }
        match remote.messages(Uuid::now_v7(), 0, 10).await {
            Err(StoreError::Unreachable(_)) => {}
            other => panic!("expected Unreachable, got {other:?}"),
        }
    }
}
