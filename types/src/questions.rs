//! Wire types of questions: their kinds, shapes and statuses, what a caller asks, and what the API and a list of
//! them return.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{AnswerBody, Escalation, FieldRules, Role, UnknownVariant, time};

wire_enum! {
    /// What a question is for; decides the run status while pending and the default urgency and timeout.
    QuestionKind {
        Blocking = "blocking",
        NonBlocking = "non_blocking",
        Approval = "approval",
        ErrorRecovery = "error_recovery",
    }
}

impl QuestionKind {
    /// The urgency a question of this kind gets when the caller names none.
    pub fn default_urgency(self) -> Urgency {
        match self {
            QuestionKind::NonBlocking => Urgency::Low,
            _ => Urgency::High,
        }
    }

    /// The timeout a question of this kind gets when the caller names none (`None`: no deadline).
    pub fn default_timeout_seconds(self) -> Option<i64> {
        match self {
            QuestionKind::Blocking => Some(30 * 60),
            QuestionKind::NonBlocking => None,
            QuestionKind::Approval => Some(15 * 60),
            QuestionKind::ErrorRecovery => Some(10 * 60),
        }
    }
}

wire_enum! {
    /// The shape an answer's `value` must have.
    ResponseType {
        Text = "text",
        Boolean = "boolean",
        Choice = "choice",
        MultiChoice = "multi_choice",
        Approval = "approval",
        ErrorRecovery = "error_recovery",
        Form = "form",
        Number = "number",
        // Rich fields (docs/api.md), as form fields and as single-value questions; their attributes are `FieldRules`.
        /// A whole number, with `min`, `max` and `step`.
        Integer = "integer",
        /// `YYYY-MM-DD`.
        Date = "date",
        /// RFC 3339 with an offset: `2026-03-01T09:30:00+01:00`.
        Datetime = "datetime",
        /// `HH:MM`, 24-hour.
        Time = "time",
        /// A whole number of stars, 1..=`max` (3..=10, default 5).
        Rating = "rating",
        Email = "email",
        /// An absolute `http` or `https` URL.
        Url = "url",
        /// Markdown, at most 10 000 characters.
        Markdown = "markdown",
        /// An array of row objects, one value per column.
        Table = "table",
        /// An uploaded file (`POST /files`), as a form field or as a question's one value: its value an
        /// [`UploadedFile`].
        File = "file",
    }
}

wire_enum! {
    /// How soon a person should look at a question.
    Urgency {
        Low = "low",
        Normal = "normal",
        High = "high",
        Critical = "critical",
    }
}

wire_enum! {
    /// Where a question is in its life. Exactly one transition out of `pending` ever happens.
    QuestionStatus {
        Pending = "pending",
        Answered = "answered",
        Defaulted = "defaulted",
        Expired = "expired",
        Cancelled = "cancelled",
    }
}

wire_enum! {
    /// Who or what resolved a question.
    Resolution {
        Human = "human",
        DefaultOnTimeout = "default_on_timeout",
        Policy = "policy",
        Cancelled = "cancelled",
    }
}

/// The longest search text (`q`) the server takes; the search fields stop there.
pub const SEARCH_MAX_CHARS: usize = 200;

/// One choice of a `choice`, `multi_choice` or `error_recovery` question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct QuestionOption {
    /// What an answer sends.
    pub value: String,
    /// What a person reads.
    pub label: String,
    /// A longer explanation, shown under the label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One field of a `form` question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct FormField {
    /// The key of this field in the answer object.
    pub key: String,
    /// What a person reads.
    pub label: String,
    /// Any type but `approval`, `error_recovery` and `form`.
    pub response_type: ResponseType,
    /// Choices, for `choice` and `multi_choice` fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<QuestionOption>,
    /// Whether an answer must contain this field.
    #[serde(default)]
    pub required: bool,
    // Rich fields (docs/api.md).
    /// A line of help shown under the label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What an empty input shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// What the input starts with; a value that fits the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The bounds of its type: `min`, `max`, `step`, `widget`, `min_items`, `max_items`, `columns`, `min_rows`,
    /// `max_rows`, `accept`, `max_bytes`.
    #[serde(flatten)]
    pub rules: FieldRules,
    /// What else the definition named, which is no attribute of it: refused by name, as a misspelt bound
    /// (`minimum` for `min`) would otherwise be dropped and the value never held to it.
    #[serde(flatten, skip_serializing_if = "serde_json::Map::is_empty")]
    #[cfg_attr(feature = "server", schema(ignore))]
    pub unknown: serde_json::Map<String, Value>,
}

impl FormField {
    /// A field with only its key, label and type.
    pub fn new(key: impl Into<String>, label: impl Into<String>, response_type: ResponseType) -> Self {
        FormField {
            key: key.into(),
            label: label.into(),
            response_type,
            options: Vec::new(),
            required: false,
            description: None,
            placeholder: None,
            default: None,
            rules: FieldRules::default(),
            unknown: serde_json::Map::new(),
        }
    }
}

/// The action an `approval` question asks permission for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ApprovalAction {
    /// The tool the agent wants to call.
    pub tool_name: String,
    /// The arguments it wants to call it with.
    #[serde(default)]
    pub arguments: Value,
}

/// The body of `POST /questions`: the fields of a question a caller may set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NewQuestion {
    /// Defaults to `blocking`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<QuestionKind>,
    /// Defaults to `approval` for approval questions, `error_recovery` for error recovery, else `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_type: Option<ResponseType>,
    /// 1..=300 characters.
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 300))]
    pub title: String,
    /// Markdown, at most 32 KiB.
    #[serde(default)]
    pub body: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<QuestionOption>,
    /// A form's fields, 1..=30.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FormField>,
    /// Instead of `fields`: a JSON Schema object whose properties are MCP elicitation's primitives, turned into
    /// fields; answers are also validated against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<Object>))]
    pub response_schema: Option<Value>,
    /// A single-value question's bounds, named as a form field's (`min`, `max`, `columns`, ...).
    #[serde(flatten)]
    pub rules: FieldRules,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<ApprovalAction>,
    #[serde(default)]
    pub allow_edit: bool,
    /// A JSON object of at most 16 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// 1..=100 characters, not only spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 100, pattern = r"\S"))]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urgency: Option<Urgency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_response: Option<AnswerBody>,
    /// Restricts who may answer, on top of the role rules: one person (`{"user": "alice"}`), a minimum role
    /// (`{"role": "approver"}`), or the member of a role given a question least recently (`{"role": "approver",
    /// "strategy": "round_robin"}`), who becomes its assignee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<AssigneeRequest>,
    /// Where the question's own events are sent, signed with the workspace's callback secret: an `http`
    /// or `https` URL, checked as a webhook's is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// How many distinct people must approve an approval question (1..=10, default 1). Approvals short
    /// of it leave the question pending; the first rejection answers it `false`. More than one needs an assignee
    /// that is a role, or none: one person assigned cannot give several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 10))]
    pub required_approvals: Option<u8>,
    /// Who may give those approvals, on top of the role rules: `{"role": R}` (that role and above) or
    /// `{"users": [...]}` (those people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible: Option<Eligible>,
    /// What else the definition named, which is no attribute of it: refused by name, as a misspelt bound
    /// (`minimum` for `min`) would otherwise be dropped and the value never held to it.
    #[serde(flatten, skip_serializing_if = "serde_json::Map::is_empty")]
    #[cfg_attr(feature = "server", schema(ignore))]
    pub unknown: serde_json::Map<String, Value>,
}

/// Who may approve a question that needs several approvals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Eligible {
    /// Anyone whose role is at least this one (`approver` or `admin`).
    Role(Role),
    /// These people (by username), 1..=50 of them.
    Users(Vec<String>),
}

impl std::fmt::Display for Eligible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Eligible::Role(role) => write!(f, "any {role}"),
            Eligible::Users(users) => write!(f, "{}", users.join(", ")),
        }
    }
}

/// One person's approval of a question that needs several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Approval {
    /// Their username (or token name).
    pub by: String,
    #[serde(deserialize_with = "time::required", serialize_with = "time::write")]
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The person it counts as: the approver's account, or the account that made the token that gave it. A quorum
    /// counts distinct people, so two tokens of one person are one approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person_id: Option<Uuid>,
}

/// Who a new question is for: `{"user": U}`, `{"role": R}`, or `{"role": R, "strategy": "round_robin"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AssigneeRequest {
    /// One person, by username.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// A role: anyone of it and above, or with `strategy`, one member of exactly this role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<AssignStrategy>,
}

wire_enum! {
    /// How a role's question is given to one of its members.
    AssignStrategy {
        /// To the member of the role who was given a question least recently.
        RoundRobin = "round_robin",
    }
}

impl From<Assignee> for AssigneeRequest {
    fn from(assignee: Assignee) -> Self {
        match assignee {
            Assignee::User(user) => AssigneeRequest { user: Some(user), ..Default::default() },
            Assignee::Role(role) => AssigneeRequest { role: Some(role), ..Default::default() },
        }
    }
}

/// Who may answer a question with an assignee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Assignee {
    /// Only this person (by username), signed in with their own account.
    User(String),
    /// Anyone whose role is at least this one (`responder`, `approver` or `admin`).
    Role(Role),
}

impl std::fmt::Display for Assignee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Assignee::User(name) => write!(f, "{name}"),
            Assignee::Role(role) => write!(f, "any {role}"),
        }
    }
}

/// A question as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Question {
    pub id: Uuid,
    /// The workspace's name.
    pub workspace: String,
    pub project: Option<String>,
    pub run_id: Option<Uuid>,
    pub tool_call_id: Option<String>,
    /// Lineage of runs, root first.
    pub parent_run_ids: Vec<Uuid>,
    pub kind: QuestionKind,
    pub response_type: ResponseType,
    pub title: String,
    pub body: String,
    pub options: Vec<QuestionOption>,
    pub fields: Vec<FormField>,
    /// The JSON Schema the question was asked with, as given (its `fields` were made from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<Object>))]
    pub response_schema: Option<Value>,
    /// A single-value question's bounds, named as a form field's.
    #[serde(flatten)]
    pub rules: FieldRules,
    pub action: Option<ApprovalAction>,
    pub allow_edit: bool,
    pub context: Value,
    pub urgency: Urgency,
    #[serde(default, deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub timeout_at: Option<DateTime<Utc>>,
    pub default_response: Option<AnswerBody>,
    pub status: QuestionStatus,
    pub response: Option<AnswerBody>,
    pub answered_by: Option<String>,
    pub resolution: Option<Resolution>,
    #[serde(deserialize_with = "time::required", serialize_with = "time::write")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "time::required", serialize_with = "time::write")]
    pub updated_at: DateTime<Utc>,
    #[serde(default, deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub resolved_at: Option<DateTime<Utc>>,
    /// Who may answer besides the role rules; absent when anyone of a suitable role may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<Assignee>,
    /// Its escalation plan, absent when no policy applied when it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
    /// Where its own events are sent besides the workspace's webhooks, if the asker named a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// How many distinct people must approve it (approval questions; 1 when absent).
    #[serde(default = "one_approval", skip_serializing_if = "is_one_approval")]
    pub required_approvals: u8,
    /// Who may give those approvals, when restricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible: Option<Eligible>,
    /// The approvals given so far, oldest first (`[]` when absent). An approval counts while whoever gave it may
    /// decide the question: one by someone since removed from the workspace, or whose role or name it no longer
    /// allows, is taken out when the next approval is counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
    /// Who is working on it: while the claim lasts only they (or an admin) may answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub claim_expires_at: Option<DateTime<Utc>>,
}

fn one_approval() -> u8 {
    1
}

fn is_one_approval(required: &u8) -> bool {
    *required == 1
}

impl Question {
    /// Who holds its claim at `now`, if anyone: a claim past its expiry holds nothing.
    pub fn claim_holder(&self, now: DateTime<Utc>) -> Option<&str> {
        match (&self.claimed_by, self.claim_expires_at) {
            (Some(by), Some(until)) if until > now => Some(by),
            _ => None,
        }
    }

    /// "1 of 2" for a question that needs several approvals; `None` for one that needs one.
    pub fn approval_progress(&self) -> Option<String> {
        (self.required_approvals > 1).then(|| format!("{} of {}", self.approvals.len(), self.required_approvals))
    }

    /// Why `decider` may not decide this question, whoever holds it; `None` if they may (see [`refusal_to_decide`]).
    pub fn refusal_to_decide(&self, decider: Decider<'_>) -> Option<String> {
        refusal_to_decide(self.kind, self.assignee.as_ref(), self.eligible.as_ref(), decider)
    }
}

/// Someone who would answer, claim or end a question, as the question's own rules see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decider<'a> {
    /// The role they act with in the question's workspace.
    pub role: Role,
    /// Their username, or the name of the token they act with.
    pub name: &'a str,
    /// Whether they act with a person's own account: a question assigned to a person, or reserved for named
    /// approvers, is theirs when they sign in as themselves, never through a token that merely has their name.
    pub account: bool,
}

/// Why `decider` may not decide a question of `kind` with this assignee and these eligible approvers, whoever holds
/// its claim; `None` if they may. In order: their role's right to answer the kind, the assignee, who is eligible.
/// The server refuses with this reason, the web UI offers only what it would accept, and a question's
/// notifications reach only the people it allows.
pub fn refusal_to_decide(
    kind: QuestionKind,
    assignee: Option<&Assignee>,
    eligible: Option<&Eligible>,
    decider: Decider<'_>,
) -> Option<String> {
    let Decider { role, name, account } = decider;
    if !role.may_answer_kind(kind) {
        return Some(format!("{} may not answer {} questions", role.with_article(), kind.as_str().replace('_', " ")));
    }
    match assignee {
        Some(Assignee::User(username)) if !(account && name == username) => {
            return Some(format!("this question is assigned to {username}"));
        }
        Some(Assignee::Role(least)) if role.rank() < least.rank() => {
            return Some(format!("this question is assigned to {least}s and above"));
        }
        _ => {}
    }
    match eligible {
        Some(Eligible::Role(least)) if role.rank() < least.rank() => {
            Some(format!("only {least}s and above may decide this approval"))
        }
        Some(Eligible::Users(users)) if !(account && users.iter().any(|user| user == name)) => {
            Some(format!("only {} may decide this approval", users.join(", ")))
        }
        _ => None,
    }
}

/// What a list of questions shows of each (the inbox): a question without its body, inputs and answer, so a page
/// of them is quick to read, render and send along for hydration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionSummary {
    pub id: Uuid,
    pub project: Option<String>,
    pub run_id: Option<Uuid>,
    pub kind: QuestionKind,
    pub response_type: ResponseType,
    pub title: String,
    pub urgency: Urgency,
    #[serde(default, deserialize_with = "time::optional")]
    pub timeout_at: Option<DateTime<Utc>>,
    pub status: QuestionStatus,
    #[serde(deserialize_with = "time::required")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "time::required")]
    pub updated_at: DateTime<Utc>,
    /// The body's first line of text, short (see [`preview`]).
    pub preview: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<Assignee>,
    /// Who may decide an approval, when it says (see [`Question::eligible`]): with the kind and the assignee, what
    /// a row needs to offer its one-click answers only to whom the server would take them from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible: Option<Eligible>,
    /// A choice question's options when they are few enough to answer from the row (see [`row_choices`]); empty
    /// otherwise, so a question with a long list of options costs its row nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<QuestionOption>,
    /// How many approvals it needs (1 when absent) and has.
    #[serde(default = "one_approval", skip_serializing_if = "is_one_approval")]
    pub required_approvals: u8,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub approvals_given: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub claim_expires_at: Option<DateTime<Utc>>,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

impl QuestionSummary {
    /// Who holds its claim at `now`, if anyone.
    pub fn claim_holder(&self, now: DateTime<Utc>) -> Option<&str> {
        match (&self.claimed_by, self.claim_expires_at) {
            (Some(by), Some(until)) if until > now => Some(by),
            _ => None,
        }
    }

    /// "1 of 2" for a question that needs several approvals.
    pub fn approval_progress(&self) -> Option<String> {
        (self.required_approvals > 1).then(|| format!("{} of {}", self.approvals_given, self.required_approvals))
    }

    /// Why `decider` may not decide it (see [`refusal_to_decide`]); `None` if they may.
    pub fn refusal_to_decide(&self, decider: Decider<'_>) -> Option<String> {
        refusal_to_decide(self.kind, self.assignee.as_ref(), self.eligible.as_ref(), decider)
    }
}

/// The most options a list row offers as buttons: more would not fit beside the title, and a longer list deserves
/// the whole question's page.
pub const ROW_CHOICES_MAX: usize = 3;

/// The options a row offers as buttons: a single-choice question's, when it has at most [`ROW_CHOICES_MAX`].
/// Several choices at once, forms and error recoveries need more than one click, so their rows link to the
/// question instead.
pub fn row_choices(response_type: ResponseType, options: &[QuestionOption]) -> Vec<QuestionOption> {
    if response_type == ResponseType::Choice && options.len() <= ROW_CHOICES_MAX {
        options.to_vec()
    } else {
        Vec::new()
    }
}

/// The most characters of a body a list row shows: more would be cut off by the row's width anyway.
pub const PREVIEW_MAX_CHARS: usize = 160;

/// A body's first non-empty line as plain text, for a one-line preview: Markdown's block markers (`#`, `>`, `-`)
/// and emphasis and code marks dropped, cut to [`PREVIEW_MAX_CHARS`] with an ellipsis.
pub fn preview(body: &str) -> String {
    let line = body.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
    let line = line.trim_start_matches(['#', '>', '-', '*', '+', ' ']);
    let plain: String = line.chars().filter(|c| !matches!(c, '*' | '_' | '`')).collect();
    match plain.char_indices().nth(PREVIEW_MAX_CHARS) {
        Some((cut, _)) => format!("{}…", plain[..cut].trim_end()),
        None => plain,
    }
}

impl From<&Question> for QuestionSummary {
    fn from(question: &Question) -> Self {
        QuestionSummary {
            id: question.id,
            project: question.project.clone(),
            run_id: question.run_id,
            preview: preview(&question.body),
            assignee: question.assignee.clone(),
            eligible: question.eligible.clone(),
            choices: row_choices(question.response_type, &question.options),
            kind: question.kind,
            response_type: question.response_type,
            title: question.title.clone(),
            urgency: question.urgency,
            timeout_at: question.timeout_at,
            status: question.status,
            created_at: question.created_at,
            updated_at: question.updated_at,
            required_approvals: question.required_approvals,
            approvals_given: u8::try_from(question.approvals.len()).unwrap_or(u8::MAX),
            claimed_by: question.claimed_by.clone(),
            claim_expires_at: question.claim_expires_at,
        }
    }
}

/// A plain pending-style question for unit tests of the pages and components (in the UI crate, so not behind
/// `cfg(test)` of this one; nothing else calls it, and the linker leaves it out of every binary).
#[doc(hidden)]
pub fn sample_question(title: &str, status: QuestionStatus) -> Question {
    let now = Utc::now();
    Question {
        id: Uuid::now_v7(),
        workspace: "default".into(),
        project: None,
        run_id: None,
        tool_call_id: None,
        parent_run_ids: vec![],
        kind: QuestionKind::Blocking,
        response_type: ResponseType::Text,
        title: title.into(),
        body: String::new(),
        options: vec![],
        fields: vec![],
        response_schema: None,
        rules: FieldRules::default(),
        action: None,
        allow_edit: false,
        context: serde_json::json!({}),
        urgency: Urgency::High,
        timeout_at: None,
        default_response: None,
        status,
        response: None,
        answered_by: None,
        resolution: None,
        created_at: now,
        updated_at: now,
        resolved_at: None,
        assignee: None,
        escalation: None,
        callback_url: None,
        required_approvals: 1,
        eligible: None,
        approvals: Vec::new(),
        claimed_by: None,
        claim_expires_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FieldWidget;

    #[test]
    fn who_may_decide_a_question_follows_its_kind_then_its_assignee_then_who_is_eligible() {
        use QuestionKind::{Approval, Blocking};
        let person = |role, name| Decider { role, name, account: true };
        let token = |role, name| Decider { role, name, account: false };
        let alice = Assignee::User("alice".into());
        let approvers = Eligible::Role(Role::Approver);
        let named = Eligible::Users(vec!["alice".into(), "bob".into()]);
        type Case<'a> = (QuestionKind, Option<&'a Assignee>, Option<&'a Eligible>, Decider<'a>, Option<&'a str>);
        let cases: [Case<'_>; 12] = [
            (Blocking, None, None, person(Role::Responder, "carol"), None),
            (Blocking, None, None, person(Role::Viewer, "carol"), Some("a viewer may not answer blocking questions")),
            (
                Approval,
                None,
                None,
                person(Role::Responder, "carol"),
                Some("a responder may not answer approval questions"),
            ),
            (Approval, None, None, token(Role::Agent, "ci"), Some("an agent may not answer approval questions")),
            (Blocking, Some(&alice), None, person(Role::Responder, "alice"), None),
            (Blocking, Some(&alice), None, token(Role::Admin, "alice"), Some("this question is assigned to alice")),
            (Blocking, Some(&alice), None, person(Role::Admin, "carol"), Some("this question is assigned to alice")),
            (
                Blocking,
                Some(&Assignee::Role(Role::Approver)),
                None,
                person(Role::Responder, "carol"),
                Some("this question is assigned to approvers and above"),
            ),
            (Approval, None, Some(&approvers), person(Role::Admin, "carol"), None),
            (Approval, None, Some(&named), person(Role::Approver, "bob"), None),
            (
                Approval,
                None,
                Some(&named),
                token(Role::Approver, "bob"),
                Some("only alice, bob may decide this approval"),
            ),
            (
                Approval,
                None,
                Some(&named),
                person(Role::Admin, "carol"),
                Some("only alice, bob may decide this approval"),
            ),
        ];
        for (kind, assignee, eligible, decider, refusal) in cases {
            assert_eq!(
                refusal_to_decide(kind, assignee, eligible, decider).as_deref(),
                refusal,
                "{kind:?} assigned to {assignee:?}, eligible {eligible:?}, decided by {decider:?}"
            );
        }
    }

    #[test]
    fn a_row_offers_the_options_of_a_single_choice_with_at_most_three() {
        let options = |n: usize| {
            (0..n)
                .map(|i| QuestionOption { value: format!("v{i}"), label: format!("Option {i}"), description: None })
                .collect::<Vec<_>>()
        };
        assert_eq!(row_choices(ResponseType::Choice, &options(3)), options(3));
        assert!(row_choices(ResponseType::Choice, &options(4)).is_empty(), "four need the question's page");
        assert!(row_choices(ResponseType::MultiChoice, &options(2)).is_empty(), "several at once need a form");
        let mut question = sample_question("Which?", QuestionStatus::Pending);
        question.response_type = ResponseType::Choice;
        question.options = options(2);
        assert_eq!(QuestionSummary::from(&question).choices, options(2));
    }

    #[test]
    fn each_kind_has_the_default_urgency_and_timeout_of_the_spec() {
        assert_eq!(QuestionKind::Blocking.default_timeout_seconds(), Some(1800));
        assert_eq!(QuestionKind::Approval.default_timeout_seconds(), Some(900));
        assert_eq!(QuestionKind::ErrorRecovery.default_timeout_seconds(), Some(600));
        assert_eq!(QuestionKind::NonBlocking.default_timeout_seconds(), None);
        assert_eq!(QuestionKind::NonBlocking.default_urgency(), Urgency::Low);
        assert_eq!(QuestionKind::Approval.default_urgency(), Urgency::High);
    }

    #[test]
    fn a_single_value_questions_bounds_sit_at_its_top_level_as_a_fields_do() {
        let asked: NewQuestion =
            serde_json::from_str(r#"{"title": "How was it?", "response_type": "rating", "max": 10}"#).unwrap();
        assert_eq!(asked.response_type, Some(ResponseType::Rating));
        assert_eq!(asked.rules.max, Some(10.into()));
        let field: FormField = serde_json::from_value(serde_json::json!({
            "key": "n", "label": "N", "response_type": "integer", "min": 1, "max": 9, "widget": "slider", "default": 3
        }))
        .unwrap();
        assert_eq!(field.rules.widget, Some(FieldWidget::Slider));
        assert_eq!(field.default, Some(serde_json::json!(3)));
        let mut question = sample_question("How was it?", QuestionStatus::Pending);
        question.rules = asked.rules;
        let written = serde_json::to_value(&question).unwrap();
        assert_eq!(written["max"], 10);
        assert!(written.get("response_schema").is_none(), "absent, not null");
        assert_eq!(serde_json::from_value::<Question>(written).unwrap(), question);
    }

    #[test]
    fn a_minimal_new_question_needs_only_a_title() {
        let q: NewQuestion = serde_json::from_str(r#"{"title":"Deploy?"}"#).unwrap();
        assert_eq!(q.title, "Deploy?");
        assert_eq!(q.kind, None);
    }

    #[test]
    fn a_form_field_without_file_attributes_reads_and_writes_as_before() {
        let field: FormField =
            serde_json::from_str(r#"{"key":"doc","label":"Doc","response_type":"file","accept":["image/*"]}"#).unwrap();
        assert_eq!(field.response_type, ResponseType::File);
        assert_eq!(field.rules.accept, ["image/*"]);
        assert_eq!(field.rules.max_bytes, None);
        let plain: FormField = serde_json::from_str(r#"{"key":"n","label":"N","response_type":"number"}"#).unwrap();
        let written = serde_json::to_value(&plain).unwrap();
        assert!(written.get("accept").is_none() && written.get("max_bytes").is_none(), "{written}");
    }
}
