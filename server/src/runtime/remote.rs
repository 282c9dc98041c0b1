//! A [`Store`] that is a run on a server: what lets `holdpoint run` execute the agent loop in its own process while
//! the server keeps the state. Each executor operation is one call of the worker protocol
//! ([`crate::worker_api`]); everything else a store can do is refused, since a client worker needs none of it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use uuid::Uuid;

use app::types::{AgentSpec, Role};

use crate::store::*;
use crate::worker_api::WorkerCall;

/// The worker protocol for one run on one server.
pub struct RemoteRun {
    http: reqwest::Client,
    url: String,
    token: String,
    lease_seconds: u32,
    committed: watch::Sender<crate::store::Committed>,
}

impl RemoteRun {
    pub fn new(base: &str, token: &str, run_id: Uuid, lease_seconds: u32) -> Self {
        RemoteRun {
            http: reqwest::Client::new(),
            url: format!("{}/api/v1/runs/{run_id}/worker", base.trim_end_matches('/')),
            token: token.to_owned(),
            lease_seconds,
            committed: watch::channel(crate::store::Committed::default()).0,
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
            .map_err(|e| StoreError::Corrupt(format!("the server is unreachable: {e}")))?;
        let status = response.status();
        let body: serde_json::Value =
            response.json().await.map_err(|e| StoreError::Corrupt(format!("the server's reply is unreadable: {e}")))?;
        if status.as_u16() == 409 {
            // The server fences writes on the lease, as the database does for its own workers.
            return Err(StoreError::LeaseLost);
        }
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("refused").to_owned();
            return Err(StoreError::Corrupt(format!("the server refused a worker call ({status}): {message}")));
        }
        serde_json::from_value(body).map_err(|e| StoreError::Corrupt(format!("the server's reply does not fit: {e}")))
    }

    /// Claims the run if it is queued; `None` if it is not (it waits, runs elsewhere, or is over).
    pub async fn claim(&self, owner: Uuid) -> StoreResult<Option<RunRow>> {
        self.call(WorkerCall::Claim { owner, lease_seconds: self.lease_seconds }).await
    }
}

fn unavailable<T>(what: &str) -> StoreResult<T> {
    Err(StoreError::Corrupt(format!("{what} is not available to a client worker")))
}

#[async_trait]
impl RunStore for RemoteRun {
    async fn insert_agent(&self, _: &AgentRow) -> StoreResult<()> {
        unavailable("defining agents")
    }
    async fn update_agent(&self, _: Uuid, _: Uuid, _: &AgentSpec, _: DateTime<Utc>) -> StoreResult<Option<AgentRow>> {
        unavailable("defining agents")
    }
    async fn agent(&self, _: Uuid, _: Uuid) -> StoreResult<Option<AgentRow>> {
        unavailable("reading agents by id")
    }
    async fn agent_by_name(&self, _: Uuid, name: &str) -> StoreResult<Option<AgentRow>> {
        self.call(WorkerCall::AgentByName { name: name.to_owned() }).await
    }
    async fn list_agents(&self, _: Uuid, _: Option<&str>, _: u32) -> StoreResult<Vec<AgentRow>> {
        unavailable("listing agents")
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
    async fn run(&self, _: Uuid, id: Uuid) -> StoreResult<Option<RunRow>> {
        let mut runs: Vec<RunRow> = self.call(WorkerCall::Runs { ids: vec![id] }).await?;
        Ok(runs.pop())
    }
    async fn list_runs(&self, _: Uuid, _: &RunFilter) -> StoreResult<Vec<RunRow>> {
        unavailable("listing runs")
    }
    async fn segments(&self, _: Uuid) -> StoreResult<Vec<SegmentRow>> {
        unavailable("listing segments")
    }
    async fn pending_question_ids(&self, _: Uuid, _: Uuid) -> StoreResult<Vec<Uuid>> {
        self.call(WorkerCall::PendingQuestions).await
    }
    async fn messages(&self, _: Uuid, after_seq: i32, limit: u32) -> StoreResult<Vec<MessageRow>> {
        self.call(WorkerCall::Messages { after_seq, limit }).await
    }
    async fn message(&self, _: Uuid, _: Uuid) -> StoreResult<Option<MessageRow>> {
        unavailable("reading one message")
    }
    async fn tool_calls(&self, _: Uuid, filter: &ToolCallFilter) -> StoreResult<Vec<ToolCallRow>> {
        self.call(WorkerCall::ToolCalls { filter: filter.clone() }).await
    }
    async fn tool_call(&self, _: Uuid, _: Uuid) -> StoreResult<Option<ToolCallRow>> {
        unavailable("reading one tool call")
    }
    async fn workspace_name(&self, _: Uuid) -> StoreResult<String> {
        self.call(WorkerCall::WorkspaceName).await
    }
    async fn claim_run(&self, _: Uuid, _: DateTime<Utc>, _: DateTime<Utc>) -> StoreResult<Option<RunRow>> {
        unavailable("claiming any run")
    }
    async fn claim_run_by_id(
        &self,
        _: Uuid,
        owner: Uuid,
        _: DateTime<Utc>,
        _: DateTime<Utc>,
    ) -> StoreResult<Option<RunRow>> {
        self.claim(owner).await
    }
    async fn renew_lease(&self, _: Uuid, owner: Uuid, _: DateTime<Utc>) -> StoreResult<bool> {
        self.call(WorkerCall::RenewLease { owner, lease_seconds: self.lease_seconds }).await
    }
    async fn current_segment(&self, _: Uuid, owner: Uuid, _: DateTime<Utc>) -> StoreResult<SegmentRow> {
        self.call(WorkerCall::CurrentSegment { owner }).await
    }
    async fn append_messages(
        &self,
        _: Uuid,
        owner: Uuid,
        messages: &[MessageRow],
        tool_calls: &[ToolCallRow],
        step: Option<i32>,
    ) -> StoreResult<()> {
        let call =
            WorkerCall::AppendMessages { owner, messages: messages.to_vec(), tool_calls: tool_calls.to_vec(), step };
        self.call(call).await
    }
    async fn update_tool_call(&self, owner: Uuid, call: &ToolCallRow) -> StoreResult<()> {
        self.call(WorkerCall::UpdateToolCall { owner, call: call.clone() }).await
    }
    async fn take_resume_prompt(&self, _: Uuid, owner: Uuid) -> StoreResult<()> {
        self.call(WorkerCall::TakeResumePrompt { owner }).await
    }
    async fn release_run(&self, _: Uuid, owner: Uuid, transition: &RunTransition) -> StoreResult<RunRow> {
        self.call(WorkerCall::Release { owner, transition: transition.clone() }).await
    }
    async fn cancel_run(
        &self,
        _: Uuid,
        _: Uuid,
        _: DateTime<Utc>,
        _: &AuditActor,
    ) -> StoreResult<Option<(RunRow, bool)>> {
        unavailable("cancelling runs")
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
    async fn requeue_stalled_runs(&self, _: DateTime<Utc>) -> StoreResult<usize> {
        unavailable("sweeping runs")
    }
    async fn child_run_status(&self, ids: &[Uuid]) -> StoreResult<Vec<RunRow>> {
        self.call(WorkerCall::Runs { ids: ids.to_vec() }).await
    }
}

#[async_trait]
impl PeopleStore for RemoteRun {
    fn relays_to_server(&self) -> bool {
        true
    }
    async fn insert_user(&self, _: &UserRow, _: &[NewAuditEntry]) -> StoreResult<()> {
        unavailable("accounts")
    }
    async fn user_by_username(&self, _: &str) -> StoreResult<Option<UserRow>> {
        unavailable("accounts")
    }
    async fn set_password(&self, _: Uuid, _: &str, _: &[NewAuditEntry]) -> StoreResult<()> {
        unavailable("accounts")
    }
    async fn user_principal(&self, _: Uuid, _: Option<&str>) -> StoreResult<Option<Principal>> {
        unavailable("accounts")
    }
    async fn workspaces_of(&self, _: Uuid) -> StoreResult<Vec<Uuid>> {
        unavailable("members")
    }
    async fn insert_membership(&self, _: Uuid, _: Uuid, _: Role, _: &[NewAuditEntry]) -> StoreResult<()> {
        unavailable("members")
    }
    async fn member(&self, _: Uuid, _: Uuid) -> StoreResult<Option<MemberRow>> {
        unavailable("members")
    }
    async fn set_member_settings(&self, _: Uuid, _: Uuid, _: &MemberSettings, _: &NewAuditEntry) -> StoreResult<bool> {
        unavailable("members")
    }
    async fn members(&self, _: Uuid, _: Option<&str>, _: u32) -> StoreResult<Vec<MemberRow>> {
        unavailable("members")
    }
    async fn change_role(&self, _: Uuid, _: Uuid, _: Role, _: &AuditOfMembership<'_>) -> StoreResult<MembershipChange> {
        unavailable("members")
    }
    async fn remove_member(&self, _: Uuid, _: Uuid, _: &AuditOfMembership<'_>) -> StoreResult<MembershipChange> {
        unavailable("members")
    }
    async fn tokens(&self, _: Uuid, _: Option<Uuid>, _: u32) -> StoreResult<Vec<TokenInfoRow>> {
        unavailable("tokens")
    }
    async fn token_info(&self, _: Uuid, _: Uuid) -> StoreResult<Option<TokenInfoRow>> {
        unavailable("tokens")
    }
    async fn revoke_token(
        &self,
        _: Uuid,
        _: Uuid,
        _: DateTime<Utc>,
        _: &NewAuditEntry,
    ) -> StoreResult<Option<TokenInfoRow>> {
        unavailable("tokens")
    }
    async fn has_credentials(&self, _: Uuid) -> StoreResult<bool> {
        unavailable("tokens")
    }
    async fn replace_signin_link(&self, _: &SigninLinkRow) -> StoreResult<()> {
        unavailable("sign-in links")
    }
    async fn use_signin_link(&self, _: &[u8], _: DateTime<Utc>) -> StoreResult<Option<Principal>> {
        unavailable("sign-in links")
    }
}

#[async_trait]
impl Store for RemoteRun {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }
    fn committed_events(&self) -> watch::Receiver<crate::store::Committed> {
        self.committed.subscribe()
    }
    async fn ping(&self) -> StoreResult<()> {
        Ok(())
    }
    async fn ensure_workspace(&self, _: &str) -> StoreResult<WorkspaceRow> {
        unavailable("workspaces")
    }
    async fn server_secret(&self, _: &str, _: &str) -> StoreResult<String> {
        unavailable("server secrets")
    }
    async fn insert_token(&self, _: &TokenRow, _: &NewAuditEntry) -> StoreResult<bool> {
        unavailable("tokens")
    }
    async fn principal_by_token_hash(&self, _: &[u8]) -> StoreResult<Option<Principal>> {
        unavailable("tokens")
    }
    async fn insert_session(&self, _: &SessionRow) -> StoreResult<()> {
        unavailable("sessions")
    }
    async fn session_by_hash(&self, _: &[u8], _: DateTime<Utc>) -> StoreResult<Option<(Principal, String)>> {
        unavailable("sessions")
    }
    async fn delete_session(&self, _: &[u8]) -> StoreResult<()> {
        unavailable("sessions")
    }
    async fn create_question(
        &self,
        question: &QuestionRow,
        _: &NewEvent,
        _: Option<&IdempotencyKey>,
        _: &[QuestionTransition],
    ) -> StoreResult<Created<QuestionRow>> {
        self.call::<serde_json::Value>(WorkerCall::CreateQuestion { question: question.clone() }).await?;
        Ok(Created { value: question.clone(), created: true })
    }
    async fn question(&self, _: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>> {
        self.call(WorkerCall::Question { id }).await
    }
    async fn list_questions(&self, _: Uuid, _: &QuestionFilter) -> StoreResult<Vec<QuestionRow>> {
        unavailable("listing questions")
    }
    async fn list_question_summaries(&self, _: Uuid, _: &QuestionFilter) -> StoreResult<Vec<QuestionSummaryRow>> {
        unavailable("listing questions")
    }
    async fn count_questions(&self, _: Uuid, _: &QuestionFilter) -> StoreResult<u32> {
        unavailable("counting questions")
    }
    async fn resolve_question(&self, _: QuestionTransition) -> StoreResult<ResolveOutcome> {
        unavailable("answering questions")
    }
    async fn overdue_questions(&self, _: DateTime<Utc>, _: i64) -> StoreResult<Vec<QuestionRow>> {
        unavailable("deadlines")
    }
    async fn pending_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        unavailable("counts")
    }
    async fn next_deadline(&self) -> StoreResult<Option<DateTime<Utc>>> {
        unavailable("deadlines")
    }
    async fn events_after(&self, _: i64, _: i64) -> StoreResult<Vec<EventRow>> {
        unavailable("the event log")
    }
    async fn workspace_events_after(&self, _: Uuid, _: i64, _: i64) -> StoreResult<Vec<EventRow>> {
        unavailable("the event log")
    }
    async fn last_event_id(&self) -> StoreResult<i64> {
        unavailable("the event log")
    }
    async fn append_audit(&self, _: &NewAuditEntry) -> StoreResult<AuditRow> {
        unavailable("the audit log")
    }
    async fn list_audit(&self, _: Uuid, _: &AuditQuery) -> StoreResult<Vec<AuditRow>> {
        unavailable("the audit log")
    }
    async fn audit_heads(&self) -> StoreResult<Vec<AuditHead>> {
        unavailable("the audit log")
    }
    async fn audit_chain(&self, _: Uuid, _: i64, _: u32) -> StoreResult<Vec<AuditRow>> {
        unavailable("the audit log")
    }
}
