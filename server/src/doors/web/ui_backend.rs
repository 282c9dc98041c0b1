//! The store and the use cases as the UI's pages and server functions reach them ([`UiBackend`]), for the session
//! `require_session` found.

use std::sync::Arc;

use app::backend::{UiBackend, UiBackendHandle};
use app::types::{Page, Question, QuestionStatus, QuestionSummary, SessionInfo};

use crate::credentials::Caller;
use crate::doors::auth::csrf_matches;
use crate::error::AppError;
use crate::rules;
use crate::state::AppState;
use crate::store::{
    AuditQuery, QuestionCursor, QuestionFilter, QuestionSort, QuestionSummaryRow, RunFilter, Store, ToolCallFilter,
};
use crate::visibility::Visibility;

/// The UI's view of the store.
struct StoreUiBackend {
    store: Arc<dyn Store>,
    /// The channels this server sends on, for the channels' health.
    sends_on: crate::notifications::SendsOn,
    /// The server, for the use cases the UI shares with the REST API (the approval rules).
    app: AppState,
}

/// What the pages and server functions of this server reach the store and the use cases through.
pub(super) fn handle(state: &AppState) -> UiBackendHandle {
    UiBackendHandle(Arc::new(StoreUiBackend {
        store: Arc::clone(&state.store),
        sends_on: state.sends_on.clone(),
        app: state.clone(),
    }))
}

/// The caller of the server function being run, as `require_session` found it: what the REST API's use cases are
/// handed. It must be the session's own.
fn ui_caller(session: &SessionInfo) -> Result<Caller, String> {
    let caller = leptos::prelude::use_context::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>().cloned())
        .ok_or_else(|| refused(AppError::Unauthorized("not signed in".into())))?;
    if caller.principal.id != session.principal_id {
        return Err(refused(AppError::Unauthorized("the request's caller is not the session's".into())));
    }
    Ok(caller)
}

/// A use case's error as a server function's: a refusal (401, 403, 422, ...) puts its status on the response, so
/// the logs and the metrics count it as refused, not as a fault of the server; anything else stays a 500.
fn refused(err: impl Into<AppError>) -> String {
    let err = err.into();
    if let AppError::Internal(cause) = &err {
        tracing::error!(error = %cause, "internal error in a server function");
    }
    let (status, _) = err.status_and_code();
    if status.is_client_error()
        && let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>()
    {
        response.set_status(status);
    }
    err.to_string()
}

/// What the session may see: the same rule as the REST API's (an `agent` token's session sees only what it
/// created).
fn visibility(session: &SessionInfo) -> Visibility {
    Visibility::of(session.role, session.principal_id)
}

/// The store's filter for one of the UI's lists of questions, narrowed as the session's role requires.
fn question_filter(session: &SessionInfo, filter: &app::InboxFilter, limit: u32) -> Result<QuestionFilter, String> {
    if let Some(text) = &filter.text {
        crate::questions::check_search_text(text).map_err(refused)?;
    }
    Ok(QuestionFilter {
        status: filter.status,
        kind: filter.kind,
        project: filter.project.clone(),
        urgency: filter.urgency,
        text: filter.text.clone(),
        sort: if filter.by_deadline { QuestionSort::Deadline } else { QuestionSort::CreatedDesc },
        limit,
        created_by: visibility(session).created_by_filter(),
        ..Default::default()
    })
}

/// The filter of one page of a list: `limit` questions after `after` (a cursor the list gave out), and one more
/// to know whether a next page follows (see [`QuestionFilter::cut_to_page`]).
fn page_filter(
    session: &SessionInfo,
    filter: &app::InboxFilter,
    after: Option<String>,
    limit: u32,
) -> Result<QuestionFilter, String> {
    let mut page = question_filter(session, filter, limit + 1)?;
    page.after = match after.filter(|a| !a.is_empty()) {
        None => None,
        Some(after) => Some(
            QuestionCursor::parse(&after, page.sort)
                .ok_or("this list's position is not one it gave out: start it again from the top")?,
        ),
    };
    Ok(page)
}

#[async_trait::async_trait]
impl UiBackend for StoreUiBackend {
    async fn questions(
        &self,
        session: &SessionInfo,
        filter: &app::InboxFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<Page<Question>, String> {
        let filter = page_filter(session, filter, after, limit)?;
        let mut rows = self.store.list_questions(session.workspace_id, &filter).await.map_err(refused)?;
        let next_cursor = filter.cut_to_page(&mut rows, |row| (row.timeout_at, row.id));
        let items =
            rows.iter().map(|r| r.to_question(&session.workspace)).collect::<Result<_, _>>().map_err(refused)?;
        Ok(Page { items, next_cursor })
    }

    async fn question_summaries(
        &self,
        session: &SessionInfo,
        filter: &app::InboxFilter,
        after: Option<String>,
        limit: u32,
    ) -> Result<Page<QuestionSummary>, String> {
        let filter = page_filter(session, filter, after, limit)?;
        let mut rows = self.store.list_question_summaries(session.workspace_id, &filter).await.map_err(refused)?;
        let next_cursor = filter.cut_to_page(&mut rows, |row| (row.timeout_at, row.id));
        let items =
            rows.into_iter().map(QuestionSummaryRow::into_summary).collect::<Result<_, _>>().map_err(refused)?;
        Ok(Page { items, next_cursor })
    }

    async fn pending_count(&self, session: &SessionInfo, cap: u32) -> Result<u32, String> {
        let pending = app::InboxFilter { status: Some(QuestionStatus::Pending), ..Default::default() };
        let filter = question_filter(session, &pending, cap)?;
        self.store.count_questions(session.workspace_id, &filter).await.map_err(refused)
    }

    async fn members(&self, session: &SessionInfo) -> Result<Vec<app::types::Member>, String> {
        let rows = self.store.members(session.workspace_id, None, 1000).await.map_err(refused)?;
        rows.iter().map(crate::store::MemberRow::to_member).collect::<Result<_, _>>().map_err(refused)
    }

    async fn notifications(
        &self,
        session: &SessionInfo,
        unread_only: bool,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<app::types::NotificationPage, String> {
        if !session.account {
            return Err("a token has no notifications: sign in with your account".into());
        }
        let of = crate::notifications::NotificationsOf {
            workspace_id: session.workspace_id,
            workspace: &session.workspace,
            user_id: session.principal_id,
        };
        crate::notifications::notifications_of(self.store.as_ref(), of, unread_only, cursor.as_deref(), limit)
            .await
            .map_err(refused)
    }

    async fn unread_notifications(&self, session: &SessionInfo) -> Result<Option<u32>, String> {
        if !session.account {
            return Ok(None);
        }
        let unread = self.store.unread_notifications(session.workspace_id, session.principal_id).await;
        unread.map(Some).map_err(refused)
    }

    async fn channel_health(&self, session: &SessionInfo) -> Result<Vec<app::types::ChannelHealth>, String> {
        if session.role != app::types::Role::Admin {
            return Err("the channels' health is for admins".into());
        }
        crate::notifications::channel_health_of(self.store.as_ref(), session.workspace_id, &self.sends_on)
            .await
            .map_err(refused)
    }

    async fn escalation_policies(&self, session: &SessionInfo) -> Result<Vec<app::types::EscalationPolicy>, String> {
        let rows = self.store.escalation_policies(session.workspace_id).await.map_err(refused)?;
        Ok(rows.into_iter().map(crate::escalation::wire).collect())
    }

    async fn my_reach(&self, session: &SessionInfo) -> Result<Option<app::MyReach>, String> {
        if !session.account {
            return Ok(None);
        }
        let member = self.store.member(session.workspace_id, session.principal_id).await.map_err(refused)?;
        let Some(member) = member else { return Ok(None) };
        let preferences = member.preferences().map_err(refused)?;
        Ok(Some(app::MyReach {
            username: member.username,
            role: member.role,
            email: member.email,
            slack_user_id: member.slack_user_id,
            preferences,
            away_until: member.away_until,
            delegate: member.delegate,
            email_sends: self.sends_on.email,
        }))
    }

    async fn tokens(&self, session: &SessionInfo) -> Result<Vec<app::types::TokenInfo>, String> {
        let rows = self.store.tokens(session.workspace_id, None, 1000).await.map_err(refused)?;
        rows.iter().map(crate::store::TokenInfoRow::to_token_info).collect::<Result<_, _>>().map_err(refused)
    }

    async fn runs(
        &self,
        session: &SessionInfo,
        status: Option<app::types::RunStatus>,
        project: Option<String>,
        limit: u32,
    ) -> Result<Page<app::types::Run>, String> {
        let filter = RunFilter {
            status,
            project,
            limit,
            created_by: visibility(session).created_by_filter(),
            ..Default::default()
        };
        let rows = self.store.list_runs(session.workspace_id, &filter).await.map_err(refused)?;
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            items.push(crate::runs::to_wire(self.store.as_ref(), row, &session.workspace).await.map_err(refused)?);
        }
        Ok(Page { items, next_cursor: None })
    }

    async fn run_detail(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<app::RunTimeline>, String> {
        let found = self.store.run(session.workspace_id, id).await.map_err(refused)?;
        let Some(row) = found.filter(|r| visibility(session).sees(r.created_by)) else {
            return Ok(None);
        };
        let run = crate::runs::to_wire(self.store.as_ref(), &row, &session.workspace).await.map_err(refused)?;
        let messages = self.store.messages(id, 0, 10_000).await.map_err(refused)?;
        let calls = self
            .store
            .tool_calls(id, &ToolCallFilter { limit: 10_000, ..Default::default() })
            .await
            .map_err(refused)?;
        let tool_calls = calls.iter().map(|c| c.to_tool_call()).collect::<Result<_, _>>().map_err(refused)?;
        let mut questions = Vec::new();
        for question_id in &run.pending_question_ids {
            if let Some(q) = self.question(session, *question_id).await? {
                questions.push(q);
            }
        }
        Ok(Some(app::RunTimeline {
            run,
            messages: messages.iter().map(|m| m.to_message()).collect(),
            tool_calls,
            questions,
        }))
    }

    async fn answer_draft(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<app::AnswerDraft>, String> {
        Ok(self.app.answer_drafts.get(session.principal_id, id))
    }

    async fn question(&self, session: &SessionInfo, id: uuid::Uuid) -> Result<Option<Question>, String> {
        let row = self.store.question(session.workspace_id, id).await.map_err(refused)?;
        row.filter(|r| visibility(session).sees(r.created_by))
            .map(|r| r.to_question(&session.workspace))
            .transpose()
            .map_err(refused)
    }

    async fn audit(
        &self,
        session: &SessionInfo,
        filter: &app::types::AuditFilter,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<Page<app::types::AuditEntry>, String> {
        if session.role != app::types::Role::Admin {
            return Err("Only admins may read the audit log.".into());
        }
        let cursor_seq = cursor.and_then(|c| c.strip_prefix("s.").and_then(|seq| seq.parse::<i64>().ok()));
        let query = AuditQuery { filter: filter.clone(), ascending: false, cursor_seq, limit: limit + 1 };
        let mut rows = self.store.list_audit(session.workspace_id, &query).await.map_err(refused)?;
        let next_cursor = if rows.len() > limit as usize {
            rows.truncate(limit as usize);
            rows.last().map(|last| format!("s.{}", last.seq))
        } else {
            None
        };
        let items = rows.iter().map(|r| r.to_entry(&session.workspace)).collect::<Result<_, _>>().map_err(refused)?;
        Ok(Page { items, next_cursor })
    }

    async fn upstreams(&self, session: &SessionInfo) -> Result<Vec<app::types::Upstream>, String> {
        let caller = ui_caller(session)?;
        let listed = crate::doors::gateway::list(self.app.store.as_ref(), &self.app.configured_upstreams, &caller)
            .await
            .map_err(refused)?;
        Ok(listed.items)
    }

    async fn rules_text(&self, session: &SessionInfo) -> Result<app::RulesText, String> {
        let caller = ui_caller(session)?;
        let stored = rules::service::get(self.store.as_ref(), &caller).await.map_err(refused)?;
        rules::text::rules_text(stored).map_err(refused)
    }

    async fn check_rules_text(
        &self,
        session: &SessionInfo,
        yaml: &str,
    ) -> Result<Result<usize, app::RulesRefusal>, String> {
        let caller = ui_caller(session)?;
        let checked = match rules::text::parse_yaml(yaml) {
            Ok(body) => {
                rules::service::check_only(self.app.store.as_ref(), self.app.config.timeout_bounds(), &caller, &body)
                    .await
                    .map(|check| check.rules)
            }
            Err(err) => Err(err),
        };
        rules::text::refusal_or(checked)
    }

    async fn save_rules_text(
        &self,
        session: &SessionInfo,
        csrf: &str,
        yaml: &str,
    ) -> Result<Result<app::RulesText, app::RulesRefusal>, String> {
        let caller = ui_caller(session)?;
        if !csrf_matches(&session.csrf_token, Some(csrf)) {
            return Err(refused(AppError::Forbidden(
                "the page's CSRF token is not this session's: reload the page".into(),
            )));
        }
        let saved = match rules::text::parse_yaml(yaml) {
            Ok(body) => rules::service::save(self.app.store.as_ref(), self.app.config.timeout_bounds(), &caller, &body)
                .await
                .and_then(rules::text::rules_text),
            Err(err) => Err(err),
        };
        rules::text::refusal_or(saved)
    }

    async fn test_rules_call(
        &self,
        session: &SessionInfo,
        tool: &str,
        arguments: &str,
        agent: Option<&str>,
    ) -> Result<Result<app::types::RuleTestResult, app::RulesRefusal>, String> {
        let caller = ui_caller(session)?;
        let tested = match rules::text::parse_arguments(arguments) {
            Ok(arguments) => {
                let request =
                    app::types::RuleTestRequest { tool: tool.to_owned(), arguments, agent: agent.map(str::to_owned) };
                rules::service::test(&self.app.rules(), &caller, &request).await
            }
            Err(err) => Err(err),
        };
        rules::text::refusal_or(tested)
    }
}
