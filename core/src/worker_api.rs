//! The worker protocol: what a client that executes its own run (`holdpoint run` against a server, a run with
//! `executor: client`) asks of the server that keeps the run's state. One operation per call, each the store
//! operation the executor needs, checked here against the caller's workspace and the run the call is addressed to,
//! and fenced on the client's lease like a server worker's writes.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::store::{
    IdempotencyKey, MessageRow, QuestionRow, RunRow, RunTransition, SegmentRow, ToolCallFilter, ToolCallRow,
};

/// The longest lease a client may take on a run, in seconds.
pub const MAX_LEASE_SECONDS: u32 = 300;

/// One operation of `POST /runs/{id}/worker`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WorkerCall {
    /// Claims the run if it is queued (or its lease ran out). Reply: the run, or `null`.
    Claim {
        owner: Uuid,
        lease_seconds: u32,
    },
    /// Reply: whether `owner` still holds the lease.
    RenewLease {
        owner: Uuid,
        lease_seconds: u32,
    },
    /// Reply: the current segment (a new one after a pause).
    CurrentSegment {
        owner: Uuid,
    },
    /// Reply: messages after `after_seq`.
    Messages {
        after_seq: i32,
        limit: u32,
    },
    AppendMessages {
        owner: Uuid,
        messages: Vec<MessageRow>,
        tool_calls: Vec<ToolCallRow>,
        step: Option<i32>,
    },
    /// Reply: the run's tool calls matching the filter.
    ToolCalls {
        filter: ToolCallFilter,
    },
    UpdateToolCall {
        owner: Uuid,
        call: ToolCallRow,
    },
    TakeResumePrompt {
        owner: Uuid,
    },
    /// Reply: the run as released.
    Release {
        owner: Uuid,
        transition: RunTransition,
    },
    /// Reply: a question of this run, or `null`.
    Question {
        id: Uuid,
    },
    /// Reply: the ids of this run's pending questions.
    PendingQuestions,
    /// Asks a question of this run (validated again here), once per tool call `call` (the call's row id) when one
    /// is named. Reply: the id of the question asked (the first one, for a call asked about before).
    CreateQuestion {
        question: QuestionRow,
        #[serde(default)]
        call: Option<Uuid>,
    },
    /// Reply: the workspace's agent of that name, or `null`.
    AgentByName {
        name: String,
    },
    /// Reply: the grant that lets this run's call through without asking (its use counted), or `null`.
    LetThrough {
        call: ToolCallRow,
    },
    /// Reply: what the workspace's approval rules decide about a call of this run (`rules::Verdict`), audited and
    /// counted when `record`.
    RulesVerdict {
        tool: String,
        arguments: serde_json::Value,
        record: bool,
    },
    /// Starts a child run of this run (executed by the server). Reply: `Created<RunRow>`.
    CreateRun {
        run: RunRow,
        segment: SegmentRow,
        key: Option<ChildKey>,
    },
    /// Resumes a paused child of this run. Reply: `ResumeOutcome`.
    PrepareResume {
        id: Uuid,
        prompt: Option<String>,
    },
    /// Reply: this run and its children, of those named by id.
    Runs {
        ids: Vec<Uuid>,
    },
    /// Reply: the workspace's name.
    WorkspaceName,
}

/// The idempotency key a child run is started with, so a takeover never starts it twice.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildKey {
    pub key: String,
    pub request_hash: Vec<u8>,
}

impl From<&IdempotencyKey> for ChildKey {
    fn from(key: &IdempotencyKey) -> Self {
        ChildKey { key: key.key.clone(), request_hash: key.request_hash.clone() }
    }
}

/// What a call answers: JSON of the store's reply.
pub type WorkerReply = Value;
