//! The executor loop: build the conversation from the stored messages, call the model, persist its
//! answer and the tool calls it asks for, settle each call (run it, ask for approval, ask a person, start
//! children), persist each result, and repeat until the model answers without tool calls, the step budget is
//! spent, or something waits for a person.
//!
//! Nothing lives only in memory between two writes: a run that waits holds no task, and whichever worker claims
//! it next rebuilds the conversation from the database and goes on from the first tool call that has no result.

use crate::store::Json;
use holdpoint_types::{
    AgentSpec, NewQuestion, QuestionKind, QuestionStatus, Resolution, RuleDecision, RunStatus, ToolCallStatus,
    ToolPolicy,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::Runtime;
use super::ledger::RunLedger;
use super::model::{ChatRequest, ModelError, model_for, model_name};
use super::tools::{self, ASK_USER, HTTP_REQUEST, SHELL, SPAWN_AGENTS};
use crate::error::AppError;
use crate::store::{
    MessageRow, POLICY_DECIDER, QuestionRow, RunRow, RunTransition, StoreError, StoreResult, ToolCallFilter,
    ToolCallRow, now,
};

/// What the model is told when a person rejects a call.
pub const REJECTION_DIRECTIVE: &str = "A person rejected this tool call. Do not retry the same call with the same \
     arguments; take the reason into account, change your approach, or ask the person.";

/// The conversation of a run as stored, in order.
struct Conversation {
    messages: Vec<MessageRow>,
}

impl Conversation {
    async fn load(ledger: &dyn RunLedger, run_id: Uuid) -> StoreResult<Self> {
        let mut messages = Vec::new();
        loop {
            let after = messages.last().map_or(0, |m: &MessageRow| m.seq);
            let page = ledger.messages(run_id, after, 1000).await?;
            let done = page.len() < 1000;
            messages.extend(page);
            if done {
                return Ok(Conversation { messages });
            }
        }
    }

    fn next_seq(&self) -> i32 {
        self.messages.last().map_or(1, |m| m.seq + 1)
    }

    fn last_assistant(&self) -> Option<&MessageRow> {
        self.messages.iter().rev().find(|m| m.role == "assistant")
    }

    /// The model's final answer (a turn without tool calls), if it is the last message and was given after
    /// `step`: what a worker stored just before it stopped without ending the run.
    fn final_answer_after(&self, step: i32) -> Option<&MessageRow> {
        self.messages.last().filter(|m| {
            m.role == "assistant" && m.step > step && m.content.0["tool_calls"].as_array().is_none_or(Vec::is_empty)
        })
    }

    /// The ids of the tool calls the model made so far in the run.
    fn call_ids(&self) -> std::collections::HashSet<String> {
        self.messages
            .iter()
            .filter(|m| m.role == "assistant")
            .filter_map(|m| m.content.0["tool_calls"].as_array())
            .flatten()
            .filter_map(|call| call["id"].as_str().map(str::to_owned))
            .collect()
    }

    fn has_result_for(&self, call_id: &str) -> bool {
        self.messages.iter().any(|m| m.role == "tool" && m.content.0["tool_call_id"] == call_id)
    }

    /// The Chat Completions request for the next model turn.
    fn request<'a>(&'a self, spec: &'a AgentSpec) -> ChatRequest<'a> {
        ChatRequest {
            model: model_name(spec),
            messages: self.messages.iter().map(|m| &m.content.0).collect(),
            tools: spec.tools.iter().filter_map(|name| tools::definition(name)).collect(),
        }
    }
}

/// Rebuilds a run's conversation from the database and returns the body of the Chat Completions request its next
/// model turn sends: what a resumed run does before it calls the model again (the model client serialises the same
/// request). Public so the benchmark suite times the very code path a resume takes.
pub async fn rebuild_request(ledger: &dyn RunLedger, run: &RunRow) -> StoreResult<Vec<u8>> {
    let conversation = Conversation::load(ledger, run.id).await?;
    serde_json::to_vec(&conversation.request(&run.agent.0)).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn message(run_id: Uuid, seq: i32, step: i32, role: &str, content: Value) -> MessageRow {
    MessageRow {
        id: Uuid::now_v7(),
        run_id,
        seq,
        step,
        role: role.to_owned(),
        content: Json(content),
        created_at: now(),
    }
}

/// What settling the open tool calls of the last model turn came to.
enum Settled {
    /// Every call has its result: ask the model again.
    Continue,
    /// Something still waits for a person or for child runs.
    Wait(RunStatus),
    /// The run cannot go on.
    Fail(String),
}

/// Executes a run this worker has claimed until it waits, pauses or ends. Errors other than a lost lease fail
/// the run with a message (the cause is logged).
///
/// Losing the lease stops the execution where it is, whatever it awaits (a tool, the model, a write): the run is
/// another worker's from then on, and a tool still running here would act a second time alongside the new owner's.
/// Nothing more is recorded (the writes are fenced); the new owner goes on from the stored state, and runs the call
/// in flight again (it is still `running` without a result).
pub async fn execute(rt: &Runtime, run: RunRow) {
    let mut lease = rt.keep_lease(run.id);
    let outcome = tokio::select! {
        biased;
        outcome = advance(rt, &run) => outcome,
        () = lease.lost() => Err(StoreError::LeaseLost),
    };
    drop(lease);
    match outcome {
        Ok(()) => {}
        Err(StoreError::LeaseLost) => {
            tracing::warn!(run = %run.id, "lost the run's lease; stopped executing it where it was");
        }
        Err(err) => {
            tracing::error!(run = %run.id, error = %err, "run failed on a storage error");
            let _ = release(rt, &run, RunStatus::Failed, None, Some(format!("internal error: {err}"))).await;
        }
    }
}

async fn release(
    rt: &Runtime,
    run: &RunRow,
    status: RunStatus,
    result: Option<String>,
    error_message: Option<String>,
) -> StoreResult<()> {
    let released =
        rt.ledger.release_run(run.id, rt.instance, &RunTransition { status, result, error_message, at: now() }).await?;
    rt.metrics.run_transition(released.status.as_str());
    Ok(())
}

async fn advance(rt: &Runtime, run: &RunRow) -> StoreResult<()> {
    let spec = &run.agent.0;
    let segment = rt.ledger.current_segment(run.id, rt.instance, now()).await?;
    let mut conversation = Conversation::load(rt.ledger.as_ref(), run.id).await?;
    if conversation.messages.is_empty() {
        let mut first = Vec::new();
        if !spec.system_prompt.is_empty() {
            first.push(message(run.id, 1, 0, "system", json!({ "role": "system", "content": spec.system_prompt })));
        }
        let seq = first.len() as i32 + 1;
        first.push(message(run.id, seq, 0, "user", json!({ "role": "user", "content": run.input })));
        rt.ledger.append_messages(run, rt.instance, &first, &[], None).await?;
        conversation = Conversation::load(rt.ledger.as_ref(), run.id).await?;
    }
    // A final answer given in this segment means the worker before this one stored it and stopped (it crashed or
    // lost the lease) before it ended the run: the answer stands, and the model is not asked again. A resumed run
    // starts a new segment, so an answer from before its pause is not taken for one.
    if let Some(answer) = conversation.final_answer_after(segment.start_step) {
        return end_on_answer(rt, run, answer).await;
    }
    let model = match model_for(spec, &rt.config, &rt.scripts_dir, std::sync::Arc::clone(&rt.metrics)) {
        Ok(model) => model,
        Err(err) => return release(rt, run, RunStatus::Failed, None, Some(err.to_string())).await,
    };
    let mut step = run.step_count;
    let mut segment_steps = segment.steps;
    let mut prompt = run.resume_prompt.clone();
    loop {
        match settle_open_calls(rt, run, &conversation).await? {
            Settled::Continue => {}
            Settled::Wait(status) => return release(rt, run, status, None, None).await,
            Settled::Fail(reason) => return release(rt, run, RunStatus::Failed, None, Some(reason)).await,
        }
        conversation = Conversation::load(rt.ledger.as_ref(), run.id).await?;
        if let Some(text) = prompt.take() {
            let user =
                message(run.id, conversation.next_seq(), step, "user", json!({ "role": "user", "content": text }));
            rt.ledger.append_messages(run, rt.instance, &[user], &[], None).await?;
            rt.ledger.take_resume_prompt(run.id, rt.instance).await?;
            conversation = Conversation::load(rt.ledger.as_ref(), run.id).await?;
        }
        if step >= run.max_total_steps {
            let reason = format!("the run reached the cap of {} steps in all", run.max_total_steps);
            return release(rt, run, RunStatus::Paused, None, Some(reason)).await;
        }
        if segment_steps >= segment.max_steps {
            return release(rt, run, RunStatus::Paused, None, None).await;
        }
        let request = conversation.request(spec);
        let calling = std::time::Instant::now();
        let reply = model.complete(&request).await;
        let outcome = match &reply {
            Ok(_) => "ok",
            Err(ModelError::Unavailable(_)) => "unavailable",
            Err(_) => "failed",
        };
        rt.metrics.model_call(outcome, calling.elapsed());
        let reply = match reply {
            Ok(reply) => reply,
            // An outage past the retry window: nothing of the call was stored, so a resume makes the same call.
            Err(err @ ModelError::Unavailable(_)) => {
                return release(rt, run, RunStatus::Paused, None, Some(err.to_string())).await;
            }
            Err(err) => return release(rt, run, RunStatus::Failed, None, Some(err.to_string())).await,
        };
        step += 1;
        segment_steps += 1;
        let reply = with_distinct_call_ids(reply, step, conversation.call_ids());
        let assistant = message(run.id, conversation.next_seq(), step, "assistant", reply);
        let mut calls = tool_calls_of(spec, &assistant);
        apply_rules(rt, run, &mut calls).await?;
        rt.ledger.append_messages(run, rt.instance, std::slice::from_ref(&assistant), &calls, Some(step)).await?;
        if calls.is_empty() {
            return end_on_answer(rt, run, &assistant).await;
        }
        conversation = Conversation::load(rt.ledger.as_ref(), run.id).await?;
    }
}

/// Ends the run on the model's final answer: completed with its text as the result, or paused when the answer
/// asks for input and the run pauses on input.
async fn end_on_answer(rt: &Runtime, run: &RunRow, answer: &MessageRow) -> StoreResult<()> {
    let result = match &answer.content.0["content"] {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    if run.pause_on_input && asks_for_input(&result) {
        return release(rt, run, RunStatus::Paused, None, None).await;
    }
    release(rt, run, RunStatus::Completed, Some(result), None).await
}

/// Whether a final answer asks the user something: its last sentence is a question.
pub fn asks_for_input(text: &str) -> bool {
    text.trim_end().ends_with('?')
}

/// The model's reply with each tool call's id distinct within the run (`used`: the ids of its earlier calls). A
/// provider that sends none, an empty one, or one used before (some OpenAI-compatible servers number each turn's
/// calls from one) has it replaced by `call_<step>_<n>` in the reply itself, so the conversation sent back pairs
/// each result with its own call.
fn with_distinct_call_ids(mut reply: Value, step: i32, mut used: std::collections::HashSet<String>) -> Value {
    let Some(calls) = reply.get_mut("tool_calls").and_then(Value::as_array_mut) else { return reply };
    for (n, call) in calls.iter_mut().enumerate() {
        let id = call["id"].as_str().unwrap_or_default().to_owned();
        if !id.is_empty() && used.insert(id) {
            continue;
        }
        let mut fresh = format!("call_{step}_{}", n + 1);
        while !used.insert(fresh.clone()) {
            fresh.push('_');
        }
        call["id"] = Value::String(fresh);
    }
    reply
}

/// The tool calls of a model turn, each with the status its tool and the agent's policy give it.
fn tool_calls_of(spec: &AgentSpec, assistant: &MessageRow) -> Vec<ToolCallRow> {
    let Some(calls) = assistant.content.0["tool_calls"].as_array() else { return Vec::new() };
    calls
        .iter()
        .map(|call| {
            // Every call has an id of its own by now (`with_distinct_call_ids`).
            let call_id = call["id"].as_str().unwrap_or_default().to_owned();
            let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let raw = call.pointer("/function/arguments").cloned().unwrap_or(Value::Null);
            let parsed = match &raw {
                Value::String(text) => serde_json::from_str::<Value>(text).map_err(|e| e.to_string()),
                other => Ok(other.clone()),
            };
            let (input, status, output, decided_by, comment) = match parsed {
                Err(err) => (
                    raw.clone(),
                    ToolCallStatus::Error,
                    Some(json!({ "error": format!("the arguments are not valid JSON: {err}") })),
                    None,
                    None,
                ),
                Ok(input) if !spec.tools.contains(&name) || !tools::BUILT_IN.contains(&name.as_str()) => (
                    input,
                    ToolCallStatus::Error,
                    Some(
                        json!({ "error": format!("there is no tool {name:?}; available: {}", spec.tools.join(", ")) }),
                    ),
                    None,
                    None,
                ),
                // Asking a person and starting sub-agents (whose own calls follow their own policies) need no
                // approval of their own.
                Ok(input) if name == ASK_USER || name == SPAWN_AGENTS => {
                    (input, ToolCallStatus::Running, None, None, None)
                }
                Ok(input) => match spec.approval_policy.for_tool(&name) {
                    ToolPolicy::Auto => (input, ToolCallStatus::Approved, None, Some(POLICY_DECIDER.to_owned()), None),
                    ToolPolicy::Prompt => (input, ToolCallStatus::PendingApproval, None, None, None),
                    ToolPolicy::Never => (
                        input,
                        ToolCallStatus::Rejected,
                        None,
                        Some(POLICY_DECIDER.to_owned()),
                        Some(format!("the agent's approval policy never allows {name}")),
                    ),
                },
            };
            ToolCallRow {
                id: Uuid::now_v7(),
                run_id: assistant.run_id,
                message_id: assistant.id,
                call_id,
                tool_name: name,
                input: Json(input),
                edited_input: None,
                output: output.map(Json),
                status,
                duration_ms: None,
                step: assistant.step,
                decided_by,
                decision_comment: comment,
                question_id: None,
                child_run_ids: Json(Vec::new()),
                created_at: assistant.created_at,
                updated_at: assistant.created_at,
            }
        })
        .collect()
}

/// Who decided a call the workspace's approval rules decided, as its tool call records it.
pub const RULES_DECIDER: &str = crate::rules::RULES_DECIDER;

/// Applies the workspace's approval rules to the calls the agent's policy decided: the stricter of the two
/// stands (deny > ask > allow), so a rule can make an `auto` call ask or refuse it, and never lets a call the
/// policy prompts for or never allows run unasked. A call no rule matches keeps the policy's decision — the
/// policy is the agent's own default — unless the document's default is `deny`: a workspace closed by default
/// stays closed.
async fn apply_rules(rt: &Runtime, run: &RunRow, calls: &mut [ToolCallRow]) -> StoreResult<()> {
    for call in calls.iter_mut() {
        let decided_by_policy = matches!(
            call.status,
            ToolCallStatus::Approved | ToolCallStatus::PendingApproval | ToolCallStatus::Rejected
        );
        if !decided_by_policy {
            continue;
        }
        let verdict = rt.ledger.rules_verdict(run, &call.tool_name, &call.input.0, true).await?;
        let counts = verdict.rule.is_some() || verdict.decision == RuleDecision::Deny;
        match verdict.decision {
            _ if !counts || call.status == ToolCallStatus::Rejected => {}
            RuleDecision::Deny => {
                call.status = ToolCallStatus::Rejected;
                call.decided_by = Some(RULES_DECIDER.to_owned());
                call.decision_comment = Some(match (&verdict.rule, &verdict.reason) {
                    (Some(rule), Some(reason)) => format!("denied by rule {rule}: {reason}"),
                    (Some(rule), None) => format!("denied by rule {rule}"),
                    (None, _) => "denied by the workspace's default rule".to_owned(),
                });
            }
            RuleDecision::Ask if call.status == ToolCallStatus::Approved => {
                call.status = ToolCallStatus::PendingApproval;
                call.decided_by = None;
            }
            RuleDecision::Ask | RuleDecision::Allow => {}
        }
    }
    Ok(())
}

async fn settle_open_calls(rt: &Runtime, run: &RunRow, conversation: &Conversation) -> StoreResult<Settled> {
    let Some(assistant) = conversation.last_assistant() else { return Ok(Settled::Continue) };
    let filter = ToolCallFilter { message_id: Some(assistant.id), limit: 1000, ..Default::default() };
    let mut open: Vec<ToolCallRow> = rt
        .ledger
        .tool_calls(run.id, &filter)
        .await?
        .into_iter()
        .filter(|call| !conversation.has_result_for(&call.call_id))
        .collect();
    if open.is_empty() {
        return Ok(Settled::Continue);
    }

    // First pass: everything that needs a person or child runs gets them, and nothing runs while anything of the
    // batch still waits, so a person sees the whole batch before any of it acts.
    let (mut waits_approval, mut waits_input, mut waits_children) = (false, false, false);
    for call in &mut open {
        let status = call.status;
        match (call.tool_name.as_str(), status) {
            (_, ToolCallStatus::PendingApproval) => {
                let pending = match call.question_id {
                    None => {
                        let granted = let_through_by_grant(rt, run, call).await?;
                        if !granted {
                            ask_approval(rt, run, call, assistant).await?;
                        }
                        !granted
                    }
                    Some(id) => question_is_pending(rt, run, id).await?,
                };
                waits_approval |= pending;
            }
            (ASK_USER, ToolCallStatus::Running) => {
                let pending = match call.question_id {
                    None => ask_user(rt, run, call).await?,
                    Some(id) => question_is_pending(rt, run, id).await?,
                };
                waits_input |= pending;
            }
            (SPAWN_AGENTS, ToolCallStatus::Running) => {
                if call.child_run_ids.0.is_empty() {
                    super::children::spawn(rt, run, call).await?;
                }
                if call.status == ToolCallStatus::Running {
                    waits_children |= !super::children::settled(rt, call).await?;
                }
            }
            _ => {}
        }
    }
    if waits_approval {
        return Ok(Settled::Wait(RunStatus::WaitingForApproval));
    }
    if waits_input {
        return Ok(Settled::Wait(RunStatus::WaitingForInput));
    }
    if waits_children {
        return Ok(Settled::Wait(RunStatus::WaitingForChildren));
    }

    // Second pass: every call is decided; settle them in the order the model asked for them.
    for mut call in open {
        let status = call.status;
        let output = match (call.tool_name.as_str(), status) {
            (_, ToolCallStatus::PendingApproval) => {
                decide_from_question(rt, run, &mut call).await?;
                match call.status {
                    ToolCallStatus::Approved => run_tool(rt, run, &mut call).await?,
                    _ => rejection(&call),
                }
            }
            (ASK_USER, ToolCallStatus::Running) => match answer_of(rt, run, &call).await? {
                Ok(output) => {
                    finish(&mut call, ToolCallStatus::Completed, output.clone(), None);
                    output
                }
                Err(reason) => return Ok(Settled::Fail(reason)),
            },
            (SPAWN_AGENTS, ToolCallStatus::Running) => {
                let output = super::children::report(rt, &call).await?;
                finish(&mut call, ToolCallStatus::Completed, output.clone(), None);
                output
            }
            (_, ToolCallStatus::Approved | ToolCallStatus::Running) => run_tool(rt, run, &mut call).await?,
            (_, ToolCallStatus::Rejected) => rejection(&call),
            (_, ToolCallStatus::Completed | ToolCallStatus::Error) => {
                call.output.as_ref().map_or(Value::Null, |o| o.0.clone())
            }
        };
        if call.output.is_none() {
            call.output = Some(Json(output.clone()));
        }
        call.updated_at = now();
        rt.ledger.update_tool_call(run, rt.instance, &call).await?;
        let conversation = Conversation::load(rt.ledger.as_ref(), run.id).await?;
        let result = message(
            run.id,
            conversation.next_seq(),
            call.step,
            "tool",
            json!({ "role": "tool", "tool_call_id": call.call_id, "content": output.to_string() }),
        );
        rt.ledger.append_messages(run, rt.instance, &[result], &[], None).await?;
    }
    Ok(Settled::Continue)
}

fn finish(call: &mut ToolCallRow, status: ToolCallStatus, output: Value, duration_ms: Option<i64>) {
    call.status = status;
    call.output = Some(Json(output));
    if duration_ms.is_some() {
        call.duration_ms = duration_ms;
    }
}

/// What the model reads for a rejected call: the reason, and not to retry it unchanged.
fn rejection(call: &ToolCallRow) -> Value {
    json!({
        "status": "rejected",
        "reason": call.decision_comment.clone().unwrap_or_else(|| "no reason was given".to_owned()),
        "instruction": REJECTION_DIRECTIVE,
    })
}

/// Runs an approved call (with the edited arguments, if a person edited them) and records its outcome.
async fn run_tool(rt: &Runtime, run: &RunRow, call: &mut ToolCallRow) -> StoreResult<Value> {
    call.status = ToolCallStatus::Running;
    call.updated_at = now();
    rt.ledger.update_tool_call(run, rt.instance, call).await?;
    let arguments = call.edited_input.as_ref().unwrap_or(&call.input).0.clone();
    let started = std::time::Instant::now();
    let outcome = match call.tool_name.as_str() {
        HTTP_REQUEST => tools::http_request(&rt.http, &rt.config, &arguments).await,
        SHELL => tools::shell(&rt.config, &arguments).await,
        other => Err(tools::ToolError(format!("{other} cannot be run this way"))),
    };
    let elapsed = started.elapsed();
    rt.metrics.tool_call(&call.tool_name, outcome.is_ok(), elapsed);
    let duration = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
    let (status, mut output) = match outcome {
        Ok(output) => (ToolCallStatus::Completed, output),
        Err(err) => (ToolCallStatus::Error, json!({ "error": err.0 })),
    };
    if let Some(edited) = &call.edited_input {
        output = json!({
            "note": "A person edited the arguments before approving; the call ran with edited_arguments.",
            "edited_arguments": edited.0,
            "result": output,
        });
    }
    finish(call, status, output.clone(), Some(duration));
    Ok(output)
}

async fn question_is_pending(rt: &Runtime, run: &RunRow, id: Uuid) -> StoreResult<bool> {
    Ok(rt.ledger.question(run.workspace_id, id).await?.is_some_and(|q| q.status == QuestionStatus::Pending))
}

/// Approves a call a live grant covers, without asking: the grant's use is counted and audited with the
/// grant and its maker, and the call records who let it through. `false` when no grant covers it.
async fn let_through_by_grant(rt: &Runtime, run: &RunRow, call: &mut ToolCallRow) -> StoreResult<bool> {
    let Some(grant) = rt.ledger.let_through(run, call).await? else { return Ok(false) };
    call.status = ToolCallStatus::Approved;
    call.decided_by = Some(crate::grants::GRANT_DECIDER.into());
    call.decision_comment = Some(format!("allowed by grant {} made by {}", grant.id, grant.created_by));
    call.updated_at = now();
    rt.ledger.update_tool_call(run, rt.instance, call).await?;
    Ok(true)
}

/// Creates the `approval` question of a call and links it.
async fn ask_approval(rt: &Runtime, run: &RunRow, call: &mut ToolCallRow, assistant: &MessageRow) -> StoreResult<()> {
    let spec = &run.agent.0;
    let arguments = serde_json::to_string_pretty(&call.input.0).unwrap_or_default();
    let summary = match (call.tool_name.as_str(), call.input.0["command"].as_str(), call.input.0["url"].as_str()) {
        (SHELL, Some(command), _) => format!("Run: {}", clip(command, 200)),
        (HTTP_REQUEST, _, Some(url)) => {
            format!("{} {}?", call.input.0["method"].as_str().unwrap_or("GET").to_uppercase(), clip(url, 200))
        }
        (tool, _, _) => format!("Allow {tool}?"),
    };
    let mut body =
        format!("**{}** wants to call `{}` with:\n\n```json\n{}\n```\n", spec.name, call.tool_name, arguments);
    if let Some(reasoning) = assistant.content.0["content"].as_str().filter(|t| !t.trim().is_empty()) {
        body.push_str(&format!("\nThe agent said:\n\n> {}\n", reasoning.replace('\n', "\n> ")));
    }
    // A call a rule asks about is asked as that rule says (who, how many, how soon), with its reason.
    let verdict = rt.ledger.rules_verdict(run, &call.tool_name, &call.input.0, false).await?;
    let ask = match (&verdict.rule, verdict.decision) {
        (Some(rule), RuleDecision::Ask) => {
            match &verdict.reason {
                Some(reason) => body.push_str(&format!("\nRule `{rule}`: {reason}\n")),
                None => body.push_str(&format!("\nAsked by rule `{rule}`.\n")),
            }
            verdict.ask
        }
        _ => holdpoint_types::RuleAsk::default(),
    };
    let several = ask.required_approvals.unwrap_or(1) > 1;
    let input = NewQuestion {
        kind: Some(QuestionKind::Approval),
        title: clip(&format!("{}: {summary}", spec.name), 300),
        body: clip(&body, crate::questions::BODY_MAX_BYTES / 2),
        action: Some(holdpoint_types::ApprovalAction {
            tool_name: call.tool_name.clone(),
            arguments: call.input.0.clone(),
        }),
        // Several people cannot each edit what they all allow.
        allow_edit: ask.allow_edit.unwrap_or(true) && !several,
        context: Some(json!({ "run_id": run.id, "agent": spec.name, "step": call.step, "call_id": call.call_id })),
        project: run.project.clone(),
        run_id: Some(run.id),
        urgency: ask.urgency,
        timeout_seconds: ask.timeout_seconds,
        assignee: ask.assignee,
        required_approvals: ask.required_approvals,
        eligible: ask.eligible,
        ..Default::default()
    };
    let question = match new_question_for(rt, run, call, input).await {
        Ok(question) => question,
        Err(err) => {
            // Cannot happen for a well-formed approval; refuse the call rather than leave it waiting forever.
            call.status = ToolCallStatus::Rejected;
            call.decided_by = Some(POLICY_DECIDER.into());
            call.decision_comment = Some(format!("the approval question could not be created: {err}"));
            call.updated_at = now();
            return rt.ledger.update_tool_call(run, rt.instance, call).await;
        }
    };
    call.question_id = Some(rt.ledger.ask(&question, call.id).await?);
    call.updated_at = now();
    rt.ledger.update_tool_call(run, rt.instance, call).await
}

fn clip(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut clipped: String = text.chars().take(max_chars - 1).collect();
    clipped.push('…');
    clipped
}

/// A question of this run about this call: validated like any other, with the run's lineage.
async fn new_question_for(
    rt: &Runtime,
    run: &RunRow,
    call: &ToolCallRow,
    input: NewQuestion,
) -> Result<QuestionRow, AppError> {
    let mut row = rt.ledger.prepare_question(input, run.workspace_id, run.created_by).await?;
    row.tool_call_id = Some(call.call_id.clone());
    row.parent_run_ids = Json(run.parent_run_ids.0.clone());
    Ok(row)
}

/// Asks the question of an `ask_user` call. Returns whether the run must wait for it (`false` for a
/// non-blocking question, whose call completes at once, and for arguments that are not a valid question, which
/// the model is told about).
async fn ask_user(rt: &Runtime, run: &RunRow, call: &mut ToolCallRow) -> StoreResult<bool> {
    let built = match ask_user_input(&call.input.0) {
        Ok(input) if input.kind == Some(QuestionKind::Approval) => {
            Err("ask_user cannot ask for approvals: tool calls are approved through the approval policy".to_owned())
        }
        Ok(mut input) => {
            input.project = run.project.clone();
            input.run_id = Some(run.id);
            input.action = None;
            new_question_for(rt, run, call, input).await.map_err(|err| match err.detail().details {
                Some(details) => format!("{err} ({details})"),
                None => err.to_string(),
            })
        }
        Err(reason) => Err(reason),
    };
    let question = match built {
        Ok(question) => question,
        Err(reason) => {
            finish(
                call,
                ToolCallStatus::Error,
                json!({ "error": format!("the question is not valid: {reason}") }),
                None,
            );
            call.updated_at = now();
            rt.ledger.update_tool_call(run, rt.instance, call).await?;
            return Ok(false);
        }
    };
    let question_id = rt.ledger.ask(&question, call.id).await?;
    call.question_id = Some(question_id);
    let blocking = question.kind != QuestionKind::NonBlocking;
    if !blocking {
        let output = json!({
            "status": "pending",
            "question_id": question_id,
            "note": "This question does not block you: go on with your default; the answer may come later.",
        });
        finish(call, ToolCallStatus::Completed, output, None);
    }
    call.updated_at = now();
    rt.ledger.update_tool_call(run, rt.instance, call).await?;
    Ok(blocking)
}

/// The question an `ask_user` call's arguments ask: a `POST /questions` body, in the spellings MCP's `ask_user`
/// takes too (an option may be a plain string, its own value and label).
fn ask_user_input(input: &Value) -> Result<NewQuestion, String> {
    let input = crate::questions::ask_user::plain_options_as_objects(input.clone());
    serde_json::from_value(input).map_err(|e| e.to_string())
}

/// The result of an `ask_user` call whose question is resolved; `Err` with the reason when the run must fail
/// (a blocking question expired with nobody answering).
async fn answer_of(rt: &Runtime, run: &RunRow, call: &ToolCallRow) -> StoreResult<Result<Value, String>> {
    let Some(question) = (match call.question_id {
        Some(id) => rt.ledger.question(run.workspace_id, id).await?,
        None => None,
    }) else {
        return Ok(Ok(call.output.as_ref().map_or(Value::Null, |o| o.0.clone())));
    };
    let response = question.response.as_ref().map(|r| &r.0);
    let comment = response.and_then(|r| r.comment.clone());
    Ok(match question.status {
        QuestionStatus::Answered | QuestionStatus::Defaulted => {
            let mut output = json!({ "status": question.status, "value": response.map(|r| r.value.clone()) });
            if let Some(comment) = comment {
                output["comment"] = Value::String(comment);
            }
            Ok(output)
        }
        QuestionStatus::Cancelled => Ok(json!({
            "status": "cancelled",
            "reason": comment.unwrap_or_else(|| "the question was cancelled".into()),
        })),
        _ => Err(format!("the question {:?} expired without an answer", question.title)),
    })
}

/// Turns the resolution of a call's approval question into the call's decision.
async fn decide_from_question(rt: &Runtime, run: &RunRow, call: &mut ToolCallRow) -> StoreResult<()> {
    let question = match call.question_id {
        Some(id) => rt.ledger.question(run.workspace_id, id).await?,
        None => None,
    };
    let (approved, decided_by, comment, edited) = match &question {
        Some(q) if matches!(q.status, QuestionStatus::Answered | QuestionStatus::Defaulted) => {
            let response = q.response.as_ref().map(|r| r.0.clone());
            let approved = response.as_ref().is_some_and(|r| r.value == Value::Bool(true));
            let by = match q.resolution {
                Some(Resolution::DefaultOnTimeout) => "default on timeout".to_owned(),
                _ => q.answered_by.clone().unwrap_or_else(|| "unknown".into()),
            };
            let comment = response.as_ref().and_then(|r| r.comment.clone());
            let edited = response.and_then(|r| r.edited_arguments).filter(|_| approved);
            (approved, by, comment, edited)
        }
        Some(q) if q.status == QuestionStatus::Expired => {
            (false, "deadline".to_owned(), Some("nobody decided before the approval's deadline".to_owned()), None)
        }
        Some(q) => {
            let reason = q.response.as_ref().and_then(|r| r.0.comment.clone());
            (
                false,
                q.answered_by.clone().unwrap_or_else(|| "cancelled".into()),
                reason.or(Some("the approval was cancelled".into())),
                None,
            )
        }
        None => (false, "unknown".to_owned(), Some("the approval question is missing".to_owned()), None),
    };
    call.status = if approved { ToolCallStatus::Approved } else { ToolCallStatus::Rejected };
    call.decided_by = Some(decided_by);
    call.decision_comment = comment;
    call.edited_input = edited.map(Json);
    call.updated_at = now();
    rt.ledger.update_tool_call(run, rt.instance, call).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_answer_asks_for_input_when_it_ends_with_a_question() {
        assert!(asks_for_input("Which environment should I use?\n"));
        assert!(!asks_for_input("Deployed. Anything else? No."));
        assert!(!asks_for_input(""));
    }
}
