//! Wire types of agents and runs (docs/api.md, "Agents" and "Runs").

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::UnknownVariant;

wire_enum! {
    /// What the executor does with a tool call the model asked for.
    ToolPolicy {
        /// Run it.
        Auto = "auto",
        /// Ask an `approval` question and pause before running any call of the batch.
        Prompt = "prompt",
        /// Refuse it; the model is told why.
        Never = "never",
    }
}

/// An agent's approval policy: `{"default": "auto", "tools": {"shell": "prompt"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ApprovalPolicy {
    /// The policy of every tool not named in `tools`.
    #[serde(default = "default_policy")]
    pub default: ToolPolicy,
    /// Per-tool policies, by the name of a built-in tool.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(schema_with = tool_policies_schema))]
    pub tools: BTreeMap<String, ToolPolicy>,
}

fn default_policy() -> ToolPolicy {
    ToolPolicy::Auto
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy { default: ToolPolicy::Auto, tools: BTreeMap::new() }
    }
}

impl ApprovalPolicy {
    /// The policy for one tool. `shell` is `prompt` unless the policy names it: running commands on the server is
    /// never automatic by accident.
    pub fn for_tool(&self, tool: &str) -> ToolPolicy {
        match self.tools.get(tool) {
            Some(policy) => *policy,
            None if tool == "shell" => ToolPolicy::Prompt,
            None => self.default,
        }
    }
}

wire_enum! {
    /// A tool the runtime provides to agents.
    BuiltInTool {
        /// Asks a person a question.
        AskUser = "ask_user",
        /// Starts child runs of other agents.
        SpawnAgents = "spawn_agents",
        /// Makes an HTTP request.
        HttpRequest = "http_request",
        /// Runs a command on the server (needs `HOLDPOINT_ENABLE_SHELL_TOOL`).
        Shell = "shell",
    }
}

/// The schema of an agent's `tools`: built-in tools, each at most once.
#[cfg(feature = "server")]
fn tool_list_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let tool = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(BuiltInTool::ALL.iter().map(|tool| tool.as_str())));
    ArrayBuilder::new()
        .items(tool)
        .unique_items(true)
        .description(Some("The tools the agent may call, each once."))
        .build()
}

/// The schema of a policy's per-tool policies: keys are built-in tools.
#[cfg(feature = "server")]
fn tool_policies_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
    use utoipa::openapi::{Ref, RefOr};
    let mut policies = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some("Per-tool policies, by the name of a built-in tool."))
        .additional_properties(Some(AdditionalProperties::<utoipa::openapi::Schema>::FreeForm(false)));
    for tool in BuiltInTool::ALL {
        policies = policies.property(tool.as_str(), RefOr::Ref(Ref::from_schema_name("ToolPolicy")));
    }
    policies.build()
}

/// Per-agent settings of its model provider; the conventional `OPENAI_BASE_URL` / `OPENAI_API_KEY` apply otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ModelSettings {
    /// Base URL of an OpenAI-compatible API, e.g. `http://127.0.0.1:11434/v1` for Ollama: `OPENAI_BASE_URL` or one
    /// of the endpoints the operator allows (`HOLDPOINT_MODEL_ENDPOINTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(format = "uri"))]
    pub base_url: Option<String>,
    /// The server's variable holding that endpoint's key, as the operator configured it (`OPENAI_API_KEY` for
    /// `OPENAI_BASE_URL`); any other is refused. Keys themselves are never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

impl ModelSettings {
    fn is_empty(&self) -> bool {
        self.base_url.is_none() && self.api_key_env.is_none()
    }
}

/// An agent definition as a caller writes it: `POST /agents`, `PUT /agents/{id}`, or inline in `POST /runs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AgentSpec {
    /// Unique within the workspace; `spawn_agents` and the CLI name agents by it. 1..=100 characters, not only
    /// spaces (it is trimmed).
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 100, pattern = r"\S"))]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// At most 64 KiB of UTF-8 (the schema's limit in characters is one any such text meets).
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(max_length = 16384))]
    pub system_prompt: String,
    /// `provider:model`: `openai:<model>` or `script:<file>` (a scripted list of model turns, a file in the server's
    /// scripts directory).
    #[cfg_attr(feature = "server", schema(pattern = r"^(openai|script):.*\S"))]
    pub model: String,
    /// The tools the agent may call, each once.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(schema_with = tool_list_schema))]
    pub tools: Vec<String>,
    #[serde(default)]
    pub approval_policy: ApprovalPolicy,
    /// The step budget of each segment (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 500))]
    pub max_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "ModelSettings::is_empty")]
    pub model_settings: ModelSettings,
}

/// A stored agent definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Agent {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    pub model: String,
    /// `true` for `script:` models: their turns are replayed from a file, not generated.
    pub scripted: bool,
    pub tools: Vec<String>,
    pub approval_policy: ApprovalPolicy,
    pub max_steps: u32,
    pub model_settings: ModelSettings,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "super::time::required")]
    pub updated_at: DateTime<Utc>,
}

wire_enum! {
    /// Where a run is. `queued` runs wait for a worker; `waiting_*` and `paused` runs wait for a person.
    RunStatus {
        Queued = "queued",
        Running = "running",
        WaitingForInput = "waiting_for_input",
        WaitingForApproval = "waiting_for_approval",
        /// A `spawn_agents` call with `wait: true` waits for its child runs.
        WaitingForChildren = "waiting_for_children",
        /// The step budget of the segment (or the total cap) is spent; `POST /runs/{id}/resume` continues it.
        Paused = "paused",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

impl RunStatus {
    /// Whether the run is over for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled)
    }

    /// The statuses `POST /runs/{id}/resume` accepts.
    pub fn is_resumable(self) -> bool {
        matches!(self, RunStatus::Paused | RunStatus::WaitingForInput | RunStatus::WaitingForApproval)
    }
}

wire_enum! {
    /// Who executes a run's agent loop.
    RunExecutor {
        /// The server's workers.
        Server = "server",
        /// The client that started it (`holdpoint run` against a server): the server keeps the state, the client
        /// claims the run and executes it, so its tools act on the client's machine.
        Client = "client",
    }
}

/// The body of `POST /runs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NewRun {
    /// A stored agent; or give `agent` inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Uuid>,
    /// An agent definition used for this run only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSpec>,
    /// The task, as the first user message, not empty: at most 64 KiB of UTF-8 (the schema's limit in characters is one
    /// any such text meets).
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 16384, pattern = r"\S"))]
    pub input: String,
    /// 1..=100 characters, not only spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 100, pattern = r"\S"))]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<Uuid>,
    /// The step budget of each segment; defaults to the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 500))]
    pub max_steps: Option<u32>,
    /// `server` (default) or `client`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<RunExecutor>,
    /// A final answer that asks the user something (ends with a question mark) pauses the run instead of completing
    /// it; `resume` with a prompt answers it. For headless runs (`holdpoint run --pause-on-approval`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pause_on_input: bool,
}

/// One stretch of execution: the first, and one more per resume, each with its own step budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Segment {
    pub id: Uuid,
    /// 1 for the first segment.
    pub index: u32,
    /// The segment this one continues.
    pub resumed_from: Option<Uuid>,
    /// The run's cumulative step count when the segment started.
    pub start_step: u32,
    /// Steps taken in this segment.
    pub steps: u32,
    /// This segment's budget.
    pub max_steps: u32,
    #[serde(deserialize_with = "super::time::required")]
    pub started_at: DateTime<Utc>,
    #[serde(default, deserialize_with = "super::time::optional")]
    pub ended_at: Option<DateTime<Utc>>,
    /// The run's status when the segment ended.
    pub end_status: Option<RunStatus>,
}

/// A run: the stable handle of one task across every pause and resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Run {
    pub id: Uuid,
    pub workspace: String,
    /// `null` for runs of an inline agent.
    pub agent_id: Option<Uuid>,
    pub agent_name: String,
    pub model: String,
    /// `true` when the model is a `script:`: the run replays scripted turns.
    pub scripted: bool,
    /// Who executes the agent loop.
    pub executor: RunExecutor,
    pub project: Option<String>,
    pub input: String,
    pub status: RunStatus,
    /// Cumulative across segments.
    pub step_count: u32,
    /// The budget of each segment.
    pub max_steps: u32,
    /// The cap on `step_count`; resume is refused once it is reached.
    pub max_total_steps: u32,
    pub segments: Vec<Segment>,
    pub parent_run_id: Option<Uuid>,
    /// Lineage, root first (the parent last).
    pub parent_run_ids: Vec<Uuid>,
    /// The model's final answer, once completed.
    pub result: Option<String>,
    pub error_message: Option<String>,
    pub pending_question_ids: Vec<Uuid>,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "super::time::required")]
    pub updated_at: DateTime<Utc>,
    #[serde(default, deserialize_with = "super::time::optional")]
    pub completed_at: Option<DateTime<Utc>>,
}

/// One LLM message of a run, exactly as the model saw or said it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RunMessage {
    pub id: Uuid,
    pub run_id: Uuid,
    /// Position in the conversation, from 1.
    pub seq: u32,
    /// The step that produced it (0 for the system prompt and the task).
    pub step: u32,
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The Chat Completions message object.
    pub content: Value,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
}

wire_enum! {
    /// Where a tool call is.
    ToolCallStatus {
        PendingApproval = "pending_approval",
        Approved = "approved",
        Rejected = "rejected",
        Running = "running",
        Completed = "completed",
        Error = "error",
    }
}

/// One tool invocation requested by an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ToolCall {
    pub id: Uuid,
    pub run_id: Uuid,
    /// The assistant message that asked for it.
    pub message_id: Uuid,
    /// The model's id of the call; `call_<step>_<n>` when the model gave none, an empty one, or one it used before
    /// in the run.
    pub call_id: String,
    pub tool_name: String,
    /// The arguments the model gave.
    pub input: Value,
    /// The arguments a person replaced them with when approving; what actually ran.
    pub edited_input: Option<Value>,
    pub output: Option<Value>,
    pub status: ToolCallStatus,
    /// Tool wall-clock time only.
    pub duration_ms: Option<u64>,
    pub step: u32,
    /// `policy`, or the name of who approved or rejected it.
    pub decided_by: Option<String>,
    pub decision_comment: Option<String>,
    /// The question it waits on (approval, or the question an `ask_user` call asked).
    pub question_id: Option<Uuid>,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "super::time::required")]
    pub updated_at: DateTime<Utc>,
}

/// One decision of `POST /runs/{id}/resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ToolDecision {
    /// The tool call's `id`, or its model `call_id`.
    pub tool_call_id: String,
    pub approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_arguments: Option<Value>,
}

/// The body of `POST /runs/{id}/resume`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ResumeRequest {
    /// A user message added after the answers, e.g. guidance for the next segment. At most 10 000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(max_length = 10000))]
    pub prompt: Option<String>,
    /// Decisions on tool calls pending approval, each under the checks an answer to its question passes (one
    /// that needs several approvals is approved where it is asked, not here); the ones left undecided are rejected.
    #[serde(default)]
    pub tool_decisions: Vec<ToolDecision>,
}

/// The `data:` of a `run_status` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RunStatusEventData {
    pub run_id: Uuid,
    pub status: RunStatus,
    pub agent_name: String,
    pub project: Option<String>,
    pub parent_run_id: Option<Uuid>,
    pub step_count: u32,
    pub error_message: Option<String>,
    #[serde(deserialize_with = "super::time::required")]
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_needs_approval_unless_the_policy_names_it() {
        let policy: ApprovalPolicy = serde_json::from_str(r#"{"default": "auto"}"#).unwrap();
        assert_eq!(policy.for_tool("http_request"), ToolPolicy::Auto);
        assert_eq!(policy.for_tool("shell"), ToolPolicy::Prompt);
        let named: ApprovalPolicy = serde_json::from_str(r#"{"tools": {"shell": "never"}}"#).unwrap();
        assert_eq!(named.for_tool("shell"), ToolPolicy::Never);
    }

    #[test]
    fn run_statuses_know_which_may_be_resumed() {
        assert!(RunStatus::Paused.is_resumable());
        assert!(!RunStatus::Running.is_resumable());
        assert!(!RunStatus::WaitingForChildren.is_resumable());
        assert!(RunStatus::Cancelled.is_terminal());
        for status in RunStatus::ALL {
            assert_eq!(serde_json::to_value(status).unwrap(), Value::String(status.to_string()));
        }
    }
}
