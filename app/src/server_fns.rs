//! Server functions: the UI's private calls into the server. Agents use the REST API instead.

use leptos::prelude::*;

use serde::{Deserialize, Serialize};

use crate::types::{
    AuditEntry, AuditFilter, Page, Question, QuestionKind, QuestionStatus, QuestionSummary, Run, RunMessage, RunStatus,
    SessionInfo, ToolCall, Urgency,
};

/// The inbox's filters, as the URL carries them: `?status=&kind=&project=&urgency=&q=&sort=`.
///
/// No `status` means pending (what a responder opens the inbox for); `status=all` means any status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InboxFilter {
    /// `None`: any status.
    pub status: Option<QuestionStatus>,
    pub kind: Option<QuestionKind>,
    pub project: Option<String>,
    pub urgency: Option<Urgency>,
    /// Matches title or body, case-insensitively.
    pub text: Option<String>,
    /// Soonest deadline first (questions without one last) instead of newest first.
    pub by_deadline: bool,
}

pub use crate::types::SEARCH_MAX_CHARS;

impl InboxFilter {
    /// Reads the filters from query parameters; values that name nothing are ignored.
    pub fn from_query(get: impl Fn(&str) -> Option<String>) -> Self {
        let non_empty = |name: &str| get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        InboxFilter {
            status: match non_empty("status").as_deref() {
                None => Some(QuestionStatus::Pending),
                Some("all") => None,
                Some(other) => Some(other.parse().unwrap_or(QuestionStatus::Pending)),
            },
            kind: non_empty("kind").and_then(|k| k.parse().ok()),
            project: non_empty("project"),
            urgency: non_empty("urgency").and_then(|u| u.parse().ok()),
            text: non_empty("q"),
            by_deadline: non_empty("sort").as_deref() == Some("deadline"),
        }
    }

    /// Whether a question belongs in the list (for questions that arrive live).
    pub fn matches(&self, q: &Question) -> bool {
        let text_matches = self.text.as_ref().is_none_or(|t| {
            let t = lowercase(t);
            lowercase(&q.title).contains(&t) || lowercase(&q.body).contains(&t)
        });
        self.status.is_none_or(|s| s == q.status)
            && self.kind.is_none_or(|k| k == q.kind)
            && self.urgency.is_none_or(|u| u == q.urgency)
            && self.project.as_ref().is_none_or(|p| q.project.as_ref() == Some(p))
            && text_matches
    }

    /// Puts questions (or their summaries) in the list's order.
    pub fn sort<Q: Listed>(&self, questions: &mut [Q]) {
        questions.sort_by(|a, b| self.order(a, b));
    }

    /// Which of two questions (or summaries) comes first in the list, as the server orders it.
    pub fn order(&self, a: &impl Listed, b: &impl Listed) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        if !self.by_deadline {
            return b.id().cmp(&a.id());
        }
        match (a.deadline(), b.deadline()) {
            (Some(x), Some(y)) => x.cmp(&y).then(a.id().cmp(&b.id())),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            // The store lists the questions without a deadline oldest first: a page ends where the next begins.
            (None, None) => a.id().cmp(&b.id()),
        }
    }
}

/// Unicode's lower case. In the browser, `String.prototype.toLowerCase` computes it: Rust's `to_lowercase` would
/// bring Unicode's case tables into the wasm (7 KiB gzipped, in the module of every page with a text filter).
fn lowercase(text: &str) -> String {
    #[cfg(feature = "hydrate")]
    {
        String::from(js_sys::JsString::from(text).to_lower_case())
    }
    #[cfg(not(feature = "hydrate"))]
    {
        text.to_lowercase()
    }
}

/// What a list's order needs of a question: a question and its summary sort alike.
pub trait Listed {
    fn id(&self) -> uuid::Uuid;
    fn deadline(&self) -> Option<chrono::DateTime<chrono::Utc>>;
}

impl Listed for Question {
    fn id(&self) -> uuid::Uuid {
        self.id
    }
    fn deadline(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.timeout_at
    }
}

impl Listed for QuestionSummary {
    fn id(&self) -> uuid::Uuid {
        self.id
    }
    fn deadline(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.timeout_at
    }
}

/// The signed-in session of this request, set by the server's session layer before any page or server function runs.
#[cfg(feature = "ssr")]
fn request_session() -> Result<SessionInfo, ServerFnError> {
    use_context::<http::request::Parts>().and_then(|parts| parts.extensions.get::<SessionInfo>().cloned()).ok_or_else(
        || {
            // A refusal, not a fault: the logs and the metrics count it so.
            if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                response.set_status(http::StatusCode::UNAUTHORIZED);
            }
            ServerFnError::new("not signed in")
        },
    )
}

#[cfg(feature = "ssr")]
fn backend() -> Result<crate::backend::UiBackendHandle, ServerFnError> {
    use_context::<crate::backend::UiBackendHandle>().ok_or_else(|| ServerFnError::new("no backend in context"))
}

/// Who is signed in, for the top bar and for the CSRF token of forms.
#[server(prefix = "/ui/fn")]
pub async fn current_session() -> Result<SessionInfo, ServerFnError> {
    request_session()
}

/// The hidden input of the question page's plain form that says how many rows the table `name` showed.
pub fn rows_input(name: &str) -> String {
    format!("{name}.rows")
}

/// The name of the plain form's submit button that adds a row to a table instead of answering; its value is the
/// table's name (`value`, `field.<key>`).
pub const ADD_ROW: &str = "add_row";

/// What a person sent from the question page's plain form when the server refused the answer, shown again there:
/// the form's inputs by name, as sent (the CSRF token left out), each problem by the path the server named it
/// (`value.<key>`, `value.<key>[row].<column>`), and the files the request uploaded, by input name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerDraft {
    pub values: Vec<(String, String)>,
    pub errors: std::collections::BTreeMap<String, String>,
    pub files: std::collections::BTreeMap<String, crate::types::UploadedFile>,
}

impl AnswerDraft {
    /// The first value sent under `name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Whether `value` was sent under `name` (a checked box or radio button).
    pub fn sent(&self, name: &str, value: &str) -> bool {
        self.values.iter().any(|(n, v)| n == name && v == value)
    }
}

/// What the question page shows: the question, and while it is pending the plain form that answers it, rendered
/// here (see `pages::plain_answer_form`) with the inputs of the person's last refused answer, if kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionOnPage {
    pub question: Question,
    /// The answer form as HTML; `None` once the question is resolved, or when it is not the viewer's to answer.
    pub answer_form: Option<String>,
    /// Why the viewer may not answer it, whoever holds it (its kind needs another role, it is assigned to someone
    /// else, or it is reserved for other approvers): said in place of the form.
    pub refusal: Option<String>,
}

/// One question, for its page.
#[server(prefix = "/ui/fn")]
pub async fn question_page(id: uuid::Uuid) -> Result<Option<QuestionOnPage>, ServerFnError> {
    let session = request_session()?;
    let backend = backend()?.0;
    let Some(question) = backend.question(&session, id).await.map_err(ServerFnError::new)? else {
        return Ok(None);
    };
    let refusal = question
        .refusal_to_decide(session.decider())
        .filter(|_| question.status == crate::types::QuestionStatus::Pending);
    let answer_form = if question.status == crate::types::QuestionStatus::Pending && refusal.is_none() {
        let draft = backend.answer_draft(&session, id).await.map_err(ServerFnError::new)?.unwrap_or_default();
        Some(crate::pages::plain_answer_form(&question, &session.csrf_token, draft))
    } else {
        None
    };
    Ok(Some(QuestionOnPage { question, answer_form, refusal }))
}

/// The most questions a list of questions (the inbox, the approval queue) loads at once; the next are a click away.
pub const QUESTION_PAGE: usize = 200;

/// A page of the approval queue's questions, filtered and sorted as the URL says: the first [`QUESTION_PAGE`]
/// after `after` (the `next_cursor` of the page before; `None` from the top).
#[server(prefix = "/ui/fn")]
pub async fn inbox_questions(filter: InboxFilter, after: Option<String>) -> Result<Page<Question>, ServerFnError> {
    let session = request_session()?;
    let limit = QUESTION_PAGE as u32;
    backend()?.0.questions(&session, &filter, after, limit).await.map_err(ServerFnError::new)
}

/// A page of the inbox's list: what it shows of each question the filter selects, in its order (as
/// [`inbox_questions`]).
#[server(prefix = "/ui/fn")]
pub async fn inbox_summaries(
    filter: InboxFilter,
    after: Option<String>,
) -> Result<Page<QuestionSummary>, ServerFnError> {
    let session = request_session()?;
    let limit = QUESTION_PAGE as u32;
    backend()?.0.question_summaries(&session, &filter, after, limit).await.map_err(ServerFnError::new)
}

/// Everything the run page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTimeline {
    pub run: Run,
    /// The conversation, in order.
    pub messages: Vec<RunMessage>,
    /// Every tool call, by step.
    pub tool_calls: Vec<ToolCall>,
    /// The run's pending questions.
    pub questions: Vec<Question>,
}

/// The runs of the workspace, newest first.
#[server(prefix = "/ui/fn")]
pub async fn runs_list(status: Option<RunStatus>, project: Option<String>) -> Result<Page<Run>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.runs(&session, status, project, 100).await.map_err(ServerFnError::new)
}

/// One run with its timeline, for its page.
#[server(prefix = "/ui/fn")]
pub async fn run_detail(id: uuid::Uuid) -> Result<Option<RunTimeline>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.run_detail(&session, id).await.map_err(ServerFnError::new)
}

/// A page of the audit log (admins only), newest first, for `/audit`.
#[server(prefix = "/ui/fn")]
pub async fn audit_entries(
    // A filter with every field empty encodes to nothing at all; it must then read back as the empty filter.
    #[server(default)] filter: AuditFilter,
    cursor: Option<String>,
) -> Result<Page<AuditEntry>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.audit(&session, &filter, cursor, 100).await.map_err(ServerFnError::new)
}

/// How far the unread badge counts: beyond it, it says "200+".
pub const PENDING_COUNT_CAP: u32 = 200;

/// How many questions are pending (counted up to [`PENDING_COUNT_CAP`]), for the unread badge.
#[server(prefix = "/ui/fn")]
pub async fn pending_count() -> Result<u32, ServerFnError> {
    let session = request_session()?;
    backend()?.0.pending_count(&session, PENDING_COUNT_CAP).await.map_err(ServerFnError::new)
}

/// How questions reach a person: their addresses and, per channel, the lowest urgency that reaches them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MyReach {
    pub username: String,
    pub role: crate::types::Role,
    pub email: Option<String>,
    pub slack_user_id: Option<String>,
    pub preferences: crate::types::NotificationPreferences,
    /// Until when they are away, and who takes their questions meanwhile.
    #[serde(default, deserialize_with = "crate::types::time::optional")]
    pub away_until: Option<chrono::DateTime<chrono::Utc>>,
    pub delegate: Option<String>,
    /// Whether this server sends email, and so the verification link of an address a person sets.
    #[serde(default)]
    pub email_sends: bool,
}

/// What `/settings` shows: how questions reach the signed-in person (`None` for a token's session), and the
/// workspace's people, among whom they choose who stands in while they are away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct YourSettingsData {
    pub reach: Option<MyReach>,
    pub members: Vec<crate::types::Member>,
}

/// `/settings`' data.
#[server(prefix = "/ui/fn")]
pub async fn your_settings() -> Result<YourSettingsData, ServerFnError> {
    let session = request_session()?;
    let backend = backend()?;
    let reach = backend.0.my_reach(&session).await.map_err(ServerFnError::new)?;
    let members = backend.0.members(&session).await.map_err(ServerFnError::new)?;
    Ok(YourSettingsData { reach, members })
}

/// What `/settings/workspace` shows: the workspace's people, and for an admin its tokens, its channels' health and
/// its escalation policies (empty for anyone else).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceSettingsData {
    pub members: Vec<crate::types::Member>,
    pub tokens: Vec<crate::types::TokenInfo>,
    pub channels: Vec<crate::types::ChannelHealth>,
    pub escalation: Vec<crate::types::EscalationPolicy>,
}

/// `/settings/workspace`'s data.
#[server(prefix = "/ui/fn")]
pub async fn workspace_settings() -> Result<WorkspaceSettingsData, ServerFnError> {
    let session = request_session()?;
    let backend = backend()?;
    let members = backend.0.members(&session).await.map_err(ServerFnError::new)?;
    let admin = session.role == crate::types::Role::Admin;
    let tokens = if admin { backend.0.tokens(&session).await.map_err(ServerFnError::new)? } else { Vec::new() };
    let channels =
        if admin { backend.0.channel_health(&session).await.map_err(ServerFnError::new)? } else { Vec::new() };
    let escalation =
        if admin { backend.0.escalation_policies(&session).await.map_err(ServerFnError::new)? } else { Vec::new() };
    Ok(WorkspaceSettingsData { members, tokens, channels, escalation })
}

/// How far the bell counts: beyond it, it says "99+".
pub const UNREAD_NOTIFICATIONS_CAP: u32 = 99;

/// How many of the signed-in person's notifications are unread, for the bell; `None` for a token's session.
#[server(prefix = "/ui/fn")]
pub async fn unread_notification_count() -> Result<Option<u32>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.unread_notifications(&session).await.map_err(ServerFnError::new)
}

/// A page of the signed-in person's notifications, newest first, for `/notifications`.
#[server(prefix = "/ui/fn")]
pub async fn notification_list(
    unread_only: bool,
    cursor: Option<String>,
) -> Result<crate::types::NotificationPage, ServerFnError> {
    let session = request_session()?;
    backend()?.0.notifications(&session, unread_only, cursor, 50).await.map_err(ServerFnError::new)
}

pub use crate::types::{RuleFault, RulesRefusal, RulesText};

/// `/settings/rules`' data: the document, and whether the session may save it (admins).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulesPageData {
    pub rules: RulesText,
    pub admin: bool,
}

/// `/settings/rules`' data.
#[server(prefix = "/ui/fn")]
pub async fn rules_page() -> Result<RulesPageData, ServerFnError> {
    let session = request_session()?;
    let rules = backend()?.0.rules_text(&session).await.map_err(ServerFnError::new)?;
    Ok(RulesPageData { rules, admin: session.role == crate::types::Role::Admin })
}

/// `/settings/gateway`'s data: the workspace's upstream MCP servers with their health, for an admin; `None` for
/// anyone else (only admins see them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewayPageData {
    pub upstreams: Option<Vec<crate::types::Upstream>>,
}

/// `/settings/gateway`'s data.
#[server(prefix = "/ui/fn")]
pub async fn gateway_page() -> Result<GatewayPageData, ServerFnError> {
    let session = request_session()?;
    if session.role != crate::types::Role::Admin {
        return Ok(GatewayPageData { upstreams: None });
    }
    let upstreams = backend()?.0.upstreams(&session).await.map_err(ServerFnError::new)?;
    Ok(GatewayPageData { upstreams: Some(upstreams) })
}

/// Checks the rules document as typed (YAML), as saving would, without saving it: the number of rules, or the
/// faults.
#[server(prefix = "/ui/fn")]
pub async fn check_rules(yaml: String) -> Result<Result<usize, RulesRefusal>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.check_rules_text(&session, &yaml).await.map_err(ServerFnError::new)
}

/// Saves the rules document as typed (YAML; admins): the stored document with its new version, or the faults with
/// nothing stored. `csrf` is the session's CSRF token, as every state-changing request of a session sends it.
#[server(prefix = "/ui/fn")]
pub async fn save_rules(yaml: String, csrf: String) -> Result<Result<RulesText, RulesRefusal>, ServerFnError> {
    let session = request_session()?;
    backend()?.0.save_rules_text(&session, &csrf, &yaml).await.map_err(ServerFnError::new)
}

/// What the stored rules decide about a call: `arguments` as typed (a JSON object), `agent` optional.
#[server(prefix = "/ui/fn")]
pub async fn test_rules(
    tool: String,
    arguments: String,
    agent: Option<String>,
) -> Result<Result<crate::types::RuleTestResult, RulesRefusal>, ServerFnError> {
    let session = request_session()?;
    let agent = agent.filter(|agent| !agent.trim().is_empty());
    backend()?.0.test_rules_call(&session, &tool, &arguments, agent.as_deref()).await.map_err(ServerFnError::new)
}
