//! The seam between the UI's server functions and the server's store (server only).
//!
//! `app` cannot depend on the server crate (the server depends on `app`), so the server provides an implementation
//! of [`UiBackend`] as context and the server functions call it.

use std::sync::Arc;

use crate::types::{AuditEntry, AuditFilter, Page, Question, QuestionSummary, Run, RunStatus, SessionInfo};
use crate::{InboxFilter, RunTimeline};

/// What the UI's server functions need from the server.
#[async_trait::async_trait]
pub trait UiBackend: Send + Sync + 'static {
    /// A page of the questions of the session's workspace that pass the filter, in its order: the first `limit`
    /// after `after` (a `next_cursor` this list gave out; `None` from the start).
    async fn questions(
        &self,
        session: &SessionInfo,
        filter: &InboxFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<Page<Question>, String>;

    /// The same list as [`UiBackend::questions`], with only what a list shows of each question.
    async fn question_summaries(
        &self,
        session: &SessionInfo,
        filter: &InboxFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<Page<QuestionSummary>, String>;

    /// How many questions of the session's workspace wait for an answer, counting no further than `cap`.
    async fn pending_count(&self, session: &SessionInfo, cap: u32) -> Result<u32, String>;

    /// The runs of the session's workspace, newest first.
    async fn runs(
        &self,
        session: &SessionInfo,
        status: Option<RunStatus>,
        project: Option<String>,
        limit: u32,
    ) -> Result<Page<Run>, String>;

    /// One run with its messages, tool calls and pending questions (`None` if there is no such run there).
    async fn run_detail(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<RunTimeline>, String>;

    /// The inputs of the session's last refused answer to a question from its page's plain form, if still kept.
    async fn answer_draft(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<crate::AnswerDraft>, String>;

    /// One question of the session's workspace (`None` if there is no such question there).
    async fn question(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<Question>, String>;

    /// The people of the session's workspace, by username.
    async fn members(&self, session: &SessionInfo) -> Result<Vec<crate::types::Member>, String>;

    /// The API tokens of the session's workspace, newest first (the caller checks that the session is an admin's).
    async fn tokens(&self, session: &SessionInfo) -> Result<Vec<crate::types::TokenInfo>, String>;

    /// A page of the session's person's notifications, newest first, after `cursor` (a `next_cursor` it gave out).
    /// A token's session has none.
    async fn notifications(
        &self,
        session: &SessionInfo,
        unread_only: bool,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<crate::types::NotificationPage, String>;

    /// How many of the session's person's notifications are unread; `None` for a token's session, which has none.
    async fn unread_notifications(&self, session: &SessionInfo) -> Result<Option<u32>, String>;

    /// How each channel is doing in the session's workspace (the caller checks that the session is an admin's).
    async fn channel_health(&self, session: &SessionInfo) -> Result<Vec<crate::types::ChannelHealth>, String>;

    /// The session's workspace's escalation policies.
    async fn escalation_policies(&self, session: &SessionInfo) -> Result<Vec<crate::types::EscalationPolicy>, String>;

    /// How questions reach the session's person (their addresses and channel thresholds); `None` for a token's
    /// session.
    async fn my_reach(&self, session: &SessionInfo) -> Result<Option<crate::MyReach>, String>;

    /// A page of the workspace's audit log, newest first, after `cursor` (a `next_cursor` it gave out). Admins only.
    async fn audit(
        &self,
        session: &SessionInfo,
        filter: &AuditFilter,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<Page<AuditEntry>, String>;

    /// The workspace's approval rules as the Settings → Rules page edits them: the document in YAML, its version,
    /// who saved it and when.
    async fn rules_text(&self, session: &SessionInfo) -> Result<crate::RulesText, String>;

    /// Checks a rules document written in YAML as saving it would (`POST /rules/check`'s use case): its number of
    /// rules, or each fault by field.
    async fn check_rules_text(
        &self,
        session: &SessionInfo,
        yaml: &str,
    ) -> Result<Result<usize, crate::RulesRefusal>, String>;

    /// Saves a rules document written in YAML (`PUT /rules`' use case; admins): the stored document, or each fault
    /// by field with nothing stored. `csrf` must be the session's CSRF token (compared in constant time).
    async fn save_rules_text(
        &self,
        session: &SessionInfo,
        csrf: &str,
        yaml: &str,
    ) -> Result<Result<crate::RulesText, crate::RulesRefusal>, String>;

    /// The workspace's upstream MCP servers with their health (`GET /upstreams`' use case; admins).
    async fn upstreams(&self, session: &SessionInfo) -> Result<Vec<crate::types::Upstream>, String>;

    /// What the stored rules decide about a call (`POST /rules/test`'s use case); `arguments` is the call's
    /// arguments as the person typed them (a JSON object).
    async fn test_rules_call(
        &self,
        session: &SessionInfo,
        tool: &str,
        arguments: &str,
        agent: Option<&str>,
    ) -> Result<Result<crate::types::RuleTestResult, crate::RulesRefusal>, String>;
}

/// The context value the server provides to every page render and server function call.
#[derive(Clone)]
pub struct UiBackendHandle(pub Arc<dyn UiBackend>);
