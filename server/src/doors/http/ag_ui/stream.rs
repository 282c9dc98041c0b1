//! The stream of a thread's run as AG-UI events, from a message on until the run ends or waits for people.

use super::*;

pub(super) fn event(data: Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(data.to_string()))
}

/// The run from its message after `after_seq` on, as AG-UI events, until it ends or waits for people. The resume
/// entries skipped because their questions were resolved elsewhere first come right after `RUN_STARTED`, as a
/// `CUSTOM` event named [`ALREADY_RESOLVED`] whose value is `{"entries": [...]}`.
#[expect(clippy::too_many_arguments, reason = "the stream's own parts, each passed once")]
pub(super) fn run_events(
    state: AppState,
    slot: crate::events::StreamSlot,
    workspace: String,
    run: RunRow,
    after_seq: i32,
    thread_id: String,
    run_id: String,
    already_resolved: Vec<Value>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let holdpoint = json!({ METADATA_KEY: { "run_id": run.id } });
    async_stream::stream! {
        let _slot = slot;
        yield event(json!({
            "type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "metadata": holdpoint,
        }));
        if !already_resolved.is_empty() {
            yield event(json!({
                "type": "CUSTOM", "name": ALREADY_RESOLVED, "value": { "entries": already_resolved },
            }));
        }
        let (mut receiver, _) = state.hub.subscribe();
        let mut seen = after_seq;
        loop {
            // The status first: messages are stored before the run leaves `running`, so a run read as waiting or
            // ended has all its messages stored by the time they are read.
            let current = match state.store.run(run.workspace_id, run.id).await {
                Ok(Some(current)) => current,
                Ok(None) => {
                    yield event(json!({ "type": "RUN_ERROR", "message": "the run is gone", "code": "not_found" }));
                    return;
                }
                Err(err) => {
                    tracing::warn!(run = %run.id, error = %err, "the AG-UI stream could not read its run");
                    yield event(json!({ "type": "RUN_ERROR", "message": "internal error", "code": "internal" }));
                    return;
                }
            };
            let messages = match state.store.messages(run.id, seen, 1000).await {
                Ok(messages) => messages,
                Err(err) => {
                    tracing::warn!(run = %run.id, error = %err, "the AG-UI stream could not read the run's messages");
                    yield event(json!({ "type": "RUN_ERROR", "message": "internal error", "code": "internal" }));
                    return;
                }
            };
            let more = messages.len() == 1000;
            for message in &messages {
                seen = message.seq;
                for data in events_of(message) {
                    yield event(data);
                }
            }
            if more {
                continue;
            }
            let finished = |outcome: Value, result: Option<Value>| {
                let mut data = json!({ "type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id,
                    "outcome": outcome, "metadata": holdpoint });
                if let Some(result) = result {
                    data["result"] = result;
                }
                data
            };
            match current.status {
                RunStatus::Completed => {
                    let result = current.result.clone().map(Value::String);
                    yield event(finished(json!({ "type": "success" }), result));
                    return;
                }
                RunStatus::Cancelled => {
                    yield event(finished(json!({ "type": "cancelled" }), None));
                    return;
                }
                RunStatus::Failed => {
                    let message = current.error_message.clone().unwrap_or_else(|| "the run failed".to_owned());
                    yield event(json!({ "type": "RUN_ERROR", "message": message, "code": "run_failed",
                        "metadata": holdpoint }));
                    return;
                }
                RunStatus::Paused => {
                    yield event(finished(json!({ "type": "interrupt", "interrupts": [paused_interrupt(&current)] }), None));
                    return;
                }
                RunStatus::WaitingForInput | RunStatus::WaitingForApproval | RunStatus::WaitingForChildren => {
                    match interrupts(&state, &workspace, &current).await {
                        Ok(interrupts) if !interrupts.is_empty() => {
                            yield event(finished(json!({ "type": "interrupt", "interrupts": interrupts }), None));
                            return;
                        }
                        // Its last question was just resolved (the run is about to be queued again), or its
                        // sub-agents are at work and have asked nothing yet.
                        Ok(_) => {}
                        Err(err) => {
                            tracing::warn!(run = %run.id, error = %err, "the AG-UI stream could not read the run's questions");
                            yield event(json!({ "type": "RUN_ERROR", "message": "internal error", "code": "internal" }));
                            return;
                        }
                    }
                }
                RunStatus::Queued | RunStatus::Running => {}
            }
            // Until something of this run happens, or the poll interval passes (messages are not events).
            let wait = tokio::time::sleep(POLL_INTERVAL);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    received = receiver.recv() => match received {
                        Ok(event) if event.run_id != Some(run.id) => continue,
                        // The hub is gone (the server is stopping): only the poll interval wakes the stream.
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                            (&mut wait).await;
                            break;
                        }
                        _ => break,
                    },
                    () = &mut wait => break,
                    () = state.shutdown.cancelled() => {
                        yield event(json!({ "type": "RUN_ERROR", "code": "server_shutdown",
                            "message": "the server is shutting down; the run goes on, and its interrupts come with \
                                        the next request on the thread" }));
                        return;
                    }
                }
            }
        }
    }
}

/// The AG-UI events of one stored message: a model turn as a step with its text and tool calls, a tool's result.
/// The conversation's system and user messages are the client's own, and are not sent back.
pub(super) fn events_of(message: &MessageRow) -> Vec<Value> {
    let content = &message.content.0;
    let id = message.id.to_string();
    match message.role.as_str() {
        "assistant" => {
            let step = format!("step {}", message.step);
            let mut events = vec![json!({ "type": "STEP_STARTED", "stepName": step })];
            let text = text_of(&content["content"]);
            if !text.is_empty() {
                events.push(json!({ "type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant" }));
                events.push(json!({ "type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text }));
                events.push(json!({ "type": "TEXT_MESSAGE_END", "messageId": id }));
            }
            for (n, call) in content["tool_calls"].as_array().into_iter().flatten().enumerate() {
                // The executor's own fallback, so that the id is the one its questions name.
                let call_id =
                    call["id"].as_str().map_or_else(|| format!("call_{}_{}", message.step, n + 1), str::to_owned);
                let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default();
                let arguments = match call.pointer("/function/arguments") {
                    Some(Value::String(arguments)) => arguments.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                events.push(json!({ "type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name,
                    "parentMessageId": id }));
                if !arguments.is_empty() {
                    events.push(json!({ "type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments }));
                }
                events.push(json!({ "type": "TOOL_CALL_END", "toolCallId": call_id }));
            }
            events.push(json!({ "type": "STEP_FINISHED", "stepName": step }));
            events
        }
        "tool" => {
            let result = match &content["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            vec![json!({ "type": "TOOL_CALL_RESULT", "messageId": id, "toolCallId": content["tool_call_id"],
                "content": result, "role": "tool" })]
        }
        _ => Vec::new(),
    }
}
