//! Rows as stored, and the inputs of store methods. Server-side only: the API speaks the wire types of `holdpoint_types`.

use chrono::{DateTime, Utc};
use holdpoint_types::{
    AnswerBody, Approval, ApprovalAction, Assignee, Eligible, Escalation, FieldRules, FormField, Question,
    QuestionKind, QuestionOption, QuestionStatus, QuestionSummary, Resolution, ResponseType, Role, Urgency,
};
use serde_json::Value;
use serde_json::value::RawValue;
use sqlx::types::Json;
use uuid::Uuid;

use super::StoreError;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WorkspaceRow {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// A token as stored: the secret only as its hash.
#[derive(Debug, Clone)]
pub struct TokenRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub name: String,
    pub role: Role,
    pub secret_hash: Vec<u8>,
    pub created_at: DateTime<Utc>,
    /// The name of who created it (`cli` for the command line, `bootstrap` for the configured token).
    pub created_by: Option<String>,
    /// The person it belongs to: the account that made it, whose approvals and claims its own count as. `None` for
    /// a token the operator made (bootstrap, command line, embedded engine): a service identity.
    pub maker_id: Option<Uuid>,
}

/// Whether a principal is an API token or a person's account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrincipalKind {
    Token,
    User,
}

/// Who a request acts as: a live token (directly or through a browser session), or a signed-in person acting in
/// one workspace with the role of their membership there.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    /// The token's or the user's id: what `created_by` records.
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub workspace_id: Uuid,
    pub workspace: String,
    /// The token's name or the person's username: what `answered_by` shows.
    pub name: String,
    pub role: Role,
    /// The person it acts for: a person's own account, or the account that made the token. `None` for a service
    /// token, which acts for nobody.
    pub person: Option<Uuid>,
}

impl Principal {
    /// Who its approvals and claims count as: its person, or a service token itself. Two tokens one person made
    /// are one person; a token that merely has someone's name is not them.
    pub fn counts_as(&self) -> Uuid {
        self.person.unwrap_or(self.id)
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct PrincipalRecord {
    pub id: Uuid,
    pub kind: String,
    pub workspace_id: Uuid,
    pub workspace: String,
    pub name: String,
    pub role: Role,
    pub person: Option<Uuid>,
}

impl PrincipalRecord {
    pub(crate) fn into_principal(self) -> Result<Principal, StoreError> {
        let kind = match self.kind.as_str() {
            "token" => PrincipalKind::Token,
            "user" => PrincipalKind::User,
            other => return Err(StoreError::Corrupt(format!("unknown principal kind {other:?}"))),
        };
        Ok(Principal {
            id: self.id,
            kind,
            workspace_id: self.workspace_id,
            workspace: self.workspace,
            name: self.name,
            role: self.role,
            person: self.person,
        })
    }
}

/// A browser session: a hashed cookie value bound to the principal it was opened for.
#[derive(Clone)]
pub struct SessionRow {
    pub id_hash: Vec<u8>,
    pub workspace_id: Uuid,
    pub principal_id: Uuid,
    pub principal_kind: PrincipalKind,
    pub csrf_token: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// The CSRF token is a secret of the session: redacted.
impl std::fmt::Debug for SessionRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRow")
            .field("workspace_id", &self.workspace_id)
            .field("principal_id", &self.principal_id)
            .field("principal_kind", &self.principal_kind)
            .field("csrf_token", &"[redacted]")
            .field("created_at", &self.created_at)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// A question as stored; its enums are stored as their wire names.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize, serde::Deserialize)]
pub struct QuestionRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub project: Option<String>,
    pub run_id: Option<Uuid>,
    pub tool_call_id: Option<String>,
    pub parent_run_ids: Json<Vec<Uuid>>,
    pub kind: QuestionKind,
    pub response_type: ResponseType,
    pub title: String,
    pub body: String,
    pub options: Json<Vec<QuestionOption>>,
    pub fields: Json<Vec<FormField>>,
    pub action: Option<Json<ApprovalAction>>,
    pub allow_edit: bool,
    pub context: Json<Value>,
    pub urgency: Urgency,
    pub timeout_at: Option<DateTime<Utc>>,
    pub default_response: Option<Json<AnswerBody>>,
    pub status: QuestionStatus,
    pub response: Option<Json<AnswerBody>>,
    pub answered_by: Option<String>,
    pub resolution: Option<Resolution>,
    pub created_by: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub assignee: Option<Json<Assignee>>,
    /// Its escalation plan, taken from its workspace's policy when it was asked.
    pub escalation: Option<Json<Escalation>>,
    /// When its next escalation step is due; `None` once there is none left.
    pub next_escalation_at: Option<DateTime<Utc>>,
    /// Where its own events are sent besides the workspace's webhooks.
    #[serde(default)]
    pub callback_url: Option<String>,
    /// How many distinct people must approve it (1..=10).
    #[serde(default = "one")]
    pub required_approvals: i32,
    #[serde(default)]
    pub eligible: Option<Json<Eligible>>,
    /// The approvals given so far, oldest first.
    #[serde(default)]
    pub approvals: Json<Vec<Approval>>,
    /// Who claimed it (a username or a token's name), until `claim_expires_at`.
    #[serde(default)]
    pub claimed_by: Option<String>,
    #[serde(default)]
    pub claim_expires_at: Option<DateTime<Utc>>,
    /// Who holds the claim, as [`Principal::counts_as`] says: the person, whichever of their tokens claimed.
    #[serde(default)]
    pub claimed_by_id: Option<Uuid>,
    /// How many changes it took while pending (see [`super::PendingQuestionChange`]).
    #[serde(default)]
    pub revision: i64,
    /// A single-value question's bounds (`None` when it has none); boxed, as most questions have none.
    #[serde(default)]
    pub field_rules: Option<Json<Box<FieldRules>>>,
    /// The JSON Schema it was asked with, as given.
    #[serde(default)]
    pub response_schema: Option<Json<Value>>,
}

fn one() -> i32 {
    1
}

impl QuestionRow {
    /// The row as resolving it with `change` leaves it: what the resolving `UPDATE` writes, at the precision the
    /// databases keep.
    pub fn resolved_with(&self, change: &QuestionResolution) -> QuestionRow {
        use chrono::SubsecRound;
        let at = change.at.trunc_subsecs(6);
        QuestionRow {
            status: change.status,
            response: change.response.clone().map(Json),
            answered_by: change.answered_by.clone(),
            resolution: change.resolution,
            resolved_at: Some(at),
            updated_at: at,
            ..self.clone()
        }
    }
}

impl QuestionRow {
    /// The wire form, for a workspace whose name the caller knows.
    pub fn to_question(&self, workspace: &str) -> Result<Question, StoreError> {
        Ok(Question {
            id: self.id,
            workspace: workspace.to_owned(),
            project: self.project.clone(),
            run_id: self.run_id,
            tool_call_id: self.tool_call_id.clone(),
            parent_run_ids: self.parent_run_ids.0.clone(),
            kind: self.kind,
            response_type: self.response_type,
            title: self.title.clone(),
            body: self.body.clone(),
            options: self.options.0.clone(),
            fields: self.fields.0.clone(),
            response_schema: self.response_schema.as_ref().map(|s| s.0.clone()),
            rules: self.field_rules.as_ref().map(|r| FieldRules::clone(&r.0)).unwrap_or_default(),
            action: self.action.as_ref().map(|a| a.0.clone()),
            allow_edit: self.allow_edit,
            context: self.context.0.clone(),
            urgency: self.urgency,
            timeout_at: self.timeout_at,
            default_response: self.default_response.as_ref().map(|d| d.0.clone()),
            status: self.status,
            response: self.response.as_ref().map(|r| r.0.clone()),
            answered_by: self.answered_by.clone(),
            resolution: self.resolution,
            created_at: self.created_at,
            updated_at: self.updated_at,
            resolved_at: self.resolved_at,
            assignee: self.assignee.as_ref().map(|a| a.0.clone()),
            escalation: self.escalation.as_ref().map(|e| e.0.clone()),
            callback_url: self.callback_url.clone(),
            required_approvals: u8::try_from(self.required_approvals).unwrap_or(1),
            eligible: self.eligible.as_ref().map(|e| e.0.clone()),
            approvals: self.approvals.0.clone(),
            claimed_by: self.claimed_by.clone(),
            claim_expires_at: self.claim_expires_at,
        })
    }
}

/// The columns of `questions` a list of them shows, in the order of [`QuestionSummaryRow`].
pub(crate) const QUESTION_SUMMARY_COLUMNS: &str = "id, project, run_id, kind, response_type, title, urgency, timeout_at, status, created_at, updated_at, \
     substr(body, 1, 400) AS body_head, assignee, eligible, options, required_approvals, approvals, claimed_by, claim_expires_at";

/// A question as a list shows it (see [`QuestionSummary`]).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct QuestionSummaryRow {
    pub id: Uuid,
    pub project: Option<String>,
    pub run_id: Option<Uuid>,
    pub kind: QuestionKind,
    pub response_type: ResponseType,
    pub title: String,
    pub urgency: Urgency,
    pub timeout_at: Option<DateTime<Utc>>,
    pub status: QuestionStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The body's beginning, enough for its first line's preview without reading up to 32 KiB per row.
    pub body_head: String,
    pub assignee: Option<Json<Assignee>>,
    pub eligible: Option<Json<Eligible>>,
    /// What the row's choice buttons need (see [`holdpoint_types::row_choices`]).
    pub options: Json<Vec<QuestionOption>>,
    pub required_approvals: i32,
    pub approvals: Json<Vec<Approval>>,
    pub claimed_by: Option<String>,
    pub claim_expires_at: Option<DateTime<Utc>>,
}

impl QuestionSummaryRow {
    pub fn into_summary(self) -> Result<QuestionSummary, StoreError> {
        Ok(QuestionSummary {
            id: self.id,
            kind: self.kind,
            response_type: self.response_type,
            urgency: self.urgency,
            status: self.status,
            project: self.project,
            run_id: self.run_id,
            title: self.title,
            timeout_at: self.timeout_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
            preview: holdpoint_types::preview(&self.body_head),
            assignee: self.assignee.map(|a| a.0),
            eligible: self.eligible.map(|e| e.0),
            choices: holdpoint_types::row_choices(self.response_type, &self.options.0),
            required_approvals: u8::try_from(self.required_approvals).unwrap_or(1),
            approvals_given: u8::try_from(self.approvals.0.len()).unwrap_or(u8::MAX),
            claimed_by: self.claimed_by,
            claim_expires_at: self.claim_expires_at,
        })
    }
}

/// How a page of questions is chosen.
#[derive(Debug, Clone, Default)]
pub struct QuestionFilter {
    pub status: Option<QuestionStatus>,
    pub kind: Option<QuestionKind>,
    pub project: Option<String>,
    pub urgency: Option<Urgency>,
    pub run_id: Option<Uuid>,
    /// Matches title or body, case-insensitively.
    pub text: Option<String>,
    /// Only questions this token or person created (what an `agent` token may see).
    pub created_by: Option<Uuid>,
    pub sort: QuestionSort,
    pub after: Option<QuestionCursor>,
    /// Rows to fetch; callers ask for one more than they show to know whether there is a next page.
    pub limit: u32,
}

impl QuestionFilter {
    /// Cuts `rows`, read with this filter (whose `limit` is one more than a page), to a page, and gives the cursor
    /// of the next page if rows were left. `place` gives a row's deadline and id.
    pub fn cut_to_page<R>(
        &self,
        rows: &mut Vec<R>,
        place: impl Fn(&R) -> (Option<DateTime<Utc>>, Uuid),
    ) -> Option<String> {
        let page = self.limit.saturating_sub(1) as usize;
        if rows.len() <= page {
            return None;
        }
        rows.truncate(page);
        rows.last().map(|last| {
            let (timeout_at, id) = place(last);
            QuestionCursor::past(self.sort, timeout_at, id).to_string()
        })
    }
}

/// The two orders of `GET /questions`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QuestionSort {
    /// Newest first.
    #[default]
    CreatedDesc,
    /// Soonest deadline first; questions without one last.
    Deadline,
}

/// Where the previous page ended, in the terms of its sort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionCursor {
    Created { id: Uuid },
    Deadline { timeout_at: Option<DateTime<Utc>>, id: Uuid },
}

impl QuestionCursor {
    /// The cursor just past the question `id` (whose deadline is `timeout_at`) in `sort`'s order.
    pub fn past(sort: QuestionSort, timeout_at: Option<DateTime<Utc>>, id: Uuid) -> Self {
        match sort {
            QuestionSort::CreatedDesc => QuestionCursor::Created { id },
            QuestionSort::Deadline => QuestionCursor::Deadline { timeout_at, id },
        }
    }

    /// Reads a cursor [`Display`](std::fmt::Display) wrote for a list in `sort`'s order; `None` for any other
    /// text, a cursor of the other order among them.
    pub fn parse(token: &str, sort: QuestionSort) -> Option<Self> {
        let parts: Vec<&str> = token.split('.').collect();
        match (sort, parts.as_slice()) {
            (QuestionSort::CreatedDesc, ["c", id]) => Some(QuestionCursor::Created { id: Uuid::parse_str(id).ok()? }),
            (QuestionSort::Deadline, ["d", at, id]) => {
                let timeout_at = match *at {
                    "none" => None,
                    micros => Some(DateTime::from_timestamp_micros(micros.parse().ok()?)?),
                };
                Some(QuestionCursor::Deadline { timeout_at, id: Uuid::parse_str(id).ok()? })
            }
            _ => None,
        }
    }
}

/// Opaque to clients: `c.<id>` newest first, `d.<deadline in µs, or "none">.<id>` by deadline.
impl std::fmt::Display for QuestionCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuestionCursor::Created { id } => write!(f, "c.{id}"),
            QuestionCursor::Deadline { timeout_at: Some(at), id } => write!(f, "d.{}.{id}", at.timestamp_micros()),
            QuestionCursor::Deadline { timeout_at: None, id } => write!(f, "d.none.{id}"),
        }
    }
}

/// An event to append: the store assigns its id.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub workspace_id: Uuid,
    pub event_type: holdpoint_types::EventType,
    pub project: Option<String>,
    pub run_id: Option<Uuid>,
    pub question_id: Option<Uuid>,
    /// Serialised once, where the event is made: the store binds this text and hands it to the hub, which sends
    /// it on as it is. (As a `serde_json::Value` it was built as a tree, written out for the database, cloned
    /// for the hub and written out again: a tenth of the server's instructions per HITL cycle.)
    pub data: Box<RawValue>,
    pub created_at: DateTime<Utc>,
}

/// The data of a question's event, `{"question": ...}` as [`holdpoint_types::QuestionEventData`] has it, serialised
/// from the question it borrows.
pub fn question_event_data(question: &holdpoint_types::Question) -> Result<Box<RawValue>, StoreError> {
    #[derive(serde::Serialize)]
    struct Data<'a> {
        question: &'a holdpoint_types::Question,
    }
    event_data(&Data { question })
}

/// The data of a question's event around the question already serialised (`event_data` of it).
pub fn question_event_data_around(question: &RawValue) -> Result<Box<RawValue>, StoreError> {
    RawValue::from_string(format!("{{\"question\":{}}}", question.get()))
        .map_err(|err| StoreError::Corrupt(format!("an event's data: {err}")))
}

/// `data` serialised as an event's data.
pub fn event_data(data: &impl serde::Serialize) -> Result<Box<RawValue>, StoreError> {
    serde_json::value::to_raw_value(data).map_err(|err| StoreError::Corrupt(format!("an event's data: {err}")))
}

/// One event as subscribers see it, with its JSON already serialised once for all of them.
#[derive(Debug)]
pub struct HubEvent {
    pub id: i64,
    pub workspace_id: Uuid,
    pub event_type: String,
    pub project: Option<String>,
    pub run_id: Option<Uuid>,
    pub question_id: Option<Uuid>,
    pub data: String,
    pub created_at: DateTime<Utc>,
}

impl From<&EventRow> for HubEvent {
    fn from(row: &EventRow) -> Self {
        HubEvent {
            id: row.id,
            workspace_id: row.workspace_id,
            event_type: row.event_type.clone(),
            project: row.project.clone(),
            run_id: row.run_id,
            question_id: row.question_id,
            data: row.data.0.to_string(),
            created_at: row.created_at,
        }
    }
}

impl HubEvent {
    /// `event`, committed with id `id`.
    pub fn committed(id: i64, event: &NewEvent) -> Self {
        HubEvent {
            id,
            workspace_id: event.workspace_id,
            event_type: event.event_type.as_str().to_owned(),
            project: event.project.clone(),
            run_id: event.run_id,
            question_id: event.question_id,
            data: event.data.get().to_owned(),
            created_at: event.created_at,
        }
    }
}

/// An event of the log.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct EventRow {
    pub id: i64,
    pub workspace_id: Uuid,
    pub event_type: String,
    pub project: Option<String>,
    pub run_id: Option<Uuid>,
    pub question_id: Option<Uuid>,
    pub data: Json<Value>,
    pub created_at: DateTime<Utc>,
}

/// An `Idempotency-Key` of a creation request, with the hash of the request it first came with.
#[derive(Debug, Clone)]
pub struct IdempotencyKey {
    pub workspace_id: Uuid,
    pub scope: &'static str,
    pub key: String,
    pub request_hash: Vec<u8>,
}

/// The result of a creation: the object, and whether this call created it (`false`: an idempotent retry).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Created<T> {
    pub value: T,
    pub created: bool,
}

/// How a pending question is resolved: the one transition out of `pending`.
#[derive(Debug, Clone)]
pub struct QuestionResolution {
    pub status: QuestionStatus,
    pub response: Option<AnswerBody>,
    pub answered_by: Option<String>,
    /// `None` for `expired`: nobody and nothing decided.
    pub resolution: Option<Resolution>,
    pub at: DateTime<Utc>,
    /// Who or what decided, for the audit log.
    pub actor: super::AuditActor,
}

impl QuestionResolution {
    /// A cancellation by `actor` at `at`, with `reason` kept as the response's comment and `answered_by` the person
    /// who cancelled, if a person did.
    pub fn cancelled(
        reason: Option<String>,
        answered_by: Option<String>,
        at: DateTime<Utc>,
        actor: super::AuditActor,
    ) -> Self {
        QuestionResolution {
            status: QuestionStatus::Cancelled,
            response: reason.map(|comment| AnswerBody {
                value: Value::Null,
                comment: Some(comment),
                edited_arguments: None,
            }),
            answered_by,
            resolution: Some(Resolution::Cancelled),
            at,
            actor,
        }
    }

    /// The event this transition appends.
    pub fn event_type(&self) -> holdpoint_types::EventType {
        use holdpoint_types::EventType;
        match self.status {
            QuestionStatus::Expired => EventType::QuestionExpired,
            QuestionStatus::Cancelled => EventType::QuestionCancelled,
            _ => EventType::QuestionAnswered,
        }
    }

    /// The event this transition appends for `resolved`, the question as it leaves it (of workspace `workspace`).
    pub fn event(&self, resolved: &QuestionRow, workspace: &str) -> Result<NewEvent, StoreError> {
        Ok(NewEvent {
            workspace_id: resolved.workspace_id,
            event_type: self.event_type(),
            project: resolved.project.clone(),
            run_id: resolved.run_id,
            question_id: Some(resolved.id),
            data: question_event_data(&resolved.to_question(workspace)?)?,
            created_at: self.at,
        })
    }
}

/// A pending question's one transition out of `pending`, decided whole by the use case that makes it: the row as
/// it leaves `pending`, the event that announces it and the audit entry that records it. The store writes all three
/// or nothing, and only while the question is still pending.
#[derive(Debug, Clone)]
pub struct QuestionTransition {
    pub resolved: QuestionRow,
    pub event: NewEvent,
    pub audit: super::NewAuditEntry,
    /// The uploaded files the answer references, taken by the question in the same write (none, mostly): if one
    /// cannot be, nothing is written ([`super::StoreError::FileUnavailable`]).
    pub files: Vec<super::FileClaim>,
}

/// A change to a pending question that is not its transition out of `pending` by itself: a claim taken
/// or let go, an approval short of the quorum — or the approval that reaches it, which resolves the question in the
/// same write. Decided whole by the use case; the store writes it only if the question is still pending at the
/// revision the use case read (`question.revision - 1`), so two changes never both build on the same state.
#[derive(Debug, Clone)]
pub struct PendingQuestionChange {
    /// The question as the change leaves it, its `revision` one above the one read.
    pub question: QuestionRow,
    pub effect: PendingEffect,
}

/// How a [`PendingQuestionChange`] is recorded.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant, reason = "one is made per change of a question and written at once")]
pub enum PendingEffect {
    /// By an event and an audit entry of its own, with whom the change now reaches (a question handed to someone
    /// else notifies them); the question stays pending.
    Recorded { event: NewEvent, audit: super::NewAuditEntry, reach: super::Reach },
    /// By the transition out of `pending` it completes (its row carries the change), written with it.
    Resolves(QuestionTransition),
}

/// What became of an attempt to resolve a question.
#[derive(Debug, Clone)]
pub enum ResolveOutcome {
    /// This call made the transition; the question as it is now.
    Resolved(QuestionRow),
    /// Someone else resolved it first; the question as they left it.
    NotPending(QuestionRow),
    NotFound,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_row_debug_output_shows_no_csrf_token() {
        let row = SessionRow {
            id_hash: vec![1, 2, 3],
            workspace_id: Uuid::now_v7(),
            principal_id: Uuid::now_v7(),
            principal_kind: PrincipalKind::User,
            csrf_token: "csrf-secret-value".into(),
            created_at: Utc::now(),
            expires_at: Utc::now(),
        };
        let debug = format!("{row:?}");
        assert!(!debug.contains("csrf-secret-value"), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }

    #[test]
    fn cursors_read_back_as_written() {
        let id = Uuid::now_v7();
        let at = DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        for (sort, timeout_at) in
            [(QuestionSort::CreatedDesc, None), (QuestionSort::Deadline, Some(at)), (QuestionSort::Deadline, None)]
        {
            let cursor = QuestionCursor::past(sort, timeout_at, id);
            assert_eq!(QuestionCursor::parse(&cursor.to_string(), sort), Some(cursor));
        }
    }

    #[test]
    fn a_cursor_of_the_other_order_or_of_no_list_reads_as_none() {
        let cursor = QuestionCursor::past(QuestionSort::CreatedDesc, None, Uuid::now_v7()).to_string();
        assert_eq!(QuestionCursor::parse(&cursor, QuestionSort::Deadline), None);
        for garbage in ["garbage", "c.not-a-uuid", "d.soon.0190a000-0000-7000-8000-000000000000", "c"] {
            assert_eq!(QuestionCursor::parse(garbage, QuestionSort::CreatedDesc), None, "{garbage}");
            assert_eq!(QuestionCursor::parse(garbage, QuestionSort::Deadline), None, "{garbage}");
        }
    }
}
