//! The interrupts a waiting run ends its stream with, each with the JSON Schema of the value it takes.

use super::*;

/// The interrupts of a waiting run: one per pending question that holds it, oldest first. A run waiting for its
/// sub-agents is held by their questions (and their sub-agents'), so those are its interrupts.
pub(super) async fn interrupts(state: &AppState, workspace: &str, run: &RunRow) -> Result<Vec<Value>, AppError> {
    let mut ids = state.store.pending_question_ids(run.workspace_id, run.id).await?;
    if run.status == RunStatus::WaitingForChildren {
        ids.extend(descendants_pending_question_ids(state, run).await?);
        // Question ids are UUIDv7: in id order is in the order they were asked.
        ids.sort_unstable();
    }
    let mut interrupts = Vec::new();
    for id in ids {
        let Some(row) = state.store.question(run.workspace_id, id).await? else { continue };
        if row.status != QuestionStatus::Pending || row.kind == QuestionKind::NonBlocking {
            continue;
        }
        interrupts.push(interrupt_of(&row.to_question(workspace)?));
    }
    Ok(interrupts)
}

/// The most sub-agent runs one stream looks through for questions: far above what a run can spawn and wait for.
pub(super) const DESCENDANTS_MAX: usize = 500;

/// The pending questions of the runs below `run` that still wait: its sub-agents', theirs, and so on.
pub(super) async fn descendants_pending_question_ids(state: &AppState, run: &RunRow) -> Result<Vec<Uuid>, AppError> {
    let mut ids = Vec::new();
    let mut parents = vec![run.id];
    let mut looked_at = 0;
    while let Some(parent) = parents.pop() {
        let filter = crate::store::RunFilter {
            parent_run_id: Some(parent),
            limit: DESCENDANTS_MAX as u32,
            ..Default::default()
        };
        for child in state.store.list_runs(run.workspace_id, &filter).await? {
            looked_at += 1;
            if looked_at > DESCENDANTS_MAX {
                return Ok(ids);
            }
            let waits = matches!(
                child.status,
                RunStatus::WaitingForInput | RunStatus::WaitingForApproval | RunStatus::WaitingForChildren
            );
            if waits {
                ids.extend(state.store.pending_question_ids(run.workspace_id, child.id).await?);
            }
            if child.status == RunStatus::WaitingForChildren {
                parents.push(child.id);
            }
        }
    }
    Ok(ids)
}

/// A paused run's one interrupt, whose id is the run's: resolving it resumes the run (`payload.prompt`, if given,
/// is the next user message), cancelling it cancels the run.
pub(super) fn paused_interrupt(run: &RunRow) -> Value {
    let message = match &run.error_message {
        Some(reason) => format!("The run paused: {reason}. Resume it to go on."),
        None => "The run paused (its step budget is spent, or it asks something). Resume it to go on.".to_owned(),
    };
    json!({
        "id": run.id,
        "reason": "input_required",
        "message": message,
        "responseSchema": {
            "type": "object",
            "properties": { "prompt": { "type": "string", "maxLength": PROMPT_MAX_CHARS,
                "description": "The next user message, if any" } },
        },
        "metadata": { METADATA_KEY: { "run_id": run.id, "paused": true } },
    })
}

/// A pending question as an AG-UI interrupt: an approval is a `tool_call` of its call, a yes/no question a
/// `confirmation`, any other an `input_required` whose `responseSchema` describes the value to send.
pub(super) fn interrupt_of(question: &Question) -> Value {
    let mut message = question.title.clone();
    if !question.body.trim().is_empty() {
        message.push_str("\n\n");
        message.push_str(&question.body);
    }
    let mut meta = json!({ "question_id": question.id, "run_id": question.run_id, "kind": question.kind,
        "response_type": question.response_type });
    let mut interrupt = json!({ "id": question.id, "message": message });
    if is_approval(question) {
        interrupt["reason"] = json!("tool_call");
        if let Some(call_id) = &question.tool_call_id {
            interrupt["toolCallId"] = json!(call_id);
        }
        let mut properties = json!({ "approved": { "type": "boolean" } });
        if question.allow_edit {
            properties["editedArgs"] = json!({ "type": "object" });
        }
        interrupt["responseSchema"] = json!({ "type": "object", "properties": properties, "required": ["approved"] });
        if let Some(action) = &question.action {
            meta["tool_name"] = json!(action.tool_name);
            meta["arguments"] = action.arguments.clone();
        }
    } else if question.response_type == ResponseType::Boolean {
        interrupt["reason"] = json!("confirmation");
    } else {
        interrupt["reason"] = json!("input_required");
        interrupt["responseSchema"] = question.response_schema.clone().unwrap_or_else(|| value_schema(question));
    }
    if let Some(deadline) = question.timeout_at {
        interrupt["expiresAt"] = json!(deadline.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    interrupt["metadata"] = json!({ METADATA_KEY: meta });
    interrupt
}

/// The JSON Schema of a question's value.
pub(super) fn value_schema(question: &Question) -> Value {
    if question.response_type == ResponseType::Form {
        return form_schema(&question.fields);
    }
    let mut schema = type_schema(question.response_type, &question.options, &question.rules);
    if question.response_type == ResponseType::ErrorRecovery && question.options.is_empty() {
        schema = json!({ "type": "string", "enum": ["retry", "skip", "abort"] });
    }
    schema
}

pub(super) fn form_schema(fields: &[FormField]) -> Value {
    let mut properties = serde_json::Map::new();
    for field in fields {
        let mut property = type_schema(field.response_type, &field.options, &field.rules);
        property["title"] = json!(field.label);
        if let Some(description) = &field.description {
            property["description"] = json!(description);
        }
        if let Some(default) = &field.default {
            property["default"] = default.clone();
        }
        properties.insert(field.key.clone(), property);
    }
    let required: Vec<&str> = fields.iter().filter(|f| f.required).map(|f| f.key.as_str()).collect();
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

pub(super) fn choices(options: &[QuestionOption]) -> Value {
    options.iter().map(|o| json!({ "const": o.value, "title": o.label })).collect()
}

pub(super) fn bounded(mut schema: Value, rules: &FieldRules) -> Value {
    if let Some(min) = &rules.min {
        schema["minimum"] = json!(min);
    }
    if let Some(max) = &rules.max {
        schema["maximum"] = json!(max);
    }
    schema
}

/// The JSON Schema of one value of `response_type`.
pub(super) fn type_schema(response_type: ResponseType, options: &[QuestionOption], rules: &FieldRules) -> Value {
    match response_type {
        ResponseType::Boolean | ResponseType::Approval => json!({ "type": "boolean" }),
        ResponseType::Number => bounded(json!({ "type": "number" }), rules),
        ResponseType::Integer => bounded(json!({ "type": "integer" }), rules),
        ResponseType::Rating => json!({ "type": "integer", "minimum": 1, "maximum": rules.rating_max() }),
        ResponseType::Choice | ResponseType::ErrorRecovery => json!({ "type": "string", "oneOf": choices(options) }),
        ResponseType::MultiChoice => {
            let mut schema = json!({ "type": "array", "uniqueItems": true,
                "items": { "type": "string", "oneOf": choices(options) } });
            if let Some(min) = rules.min_items {
                schema["minItems"] = json!(min);
            }
            if let Some(max) = rules.max_items {
                schema["maxItems"] = json!(max);
            }
            schema
        }
        ResponseType::Date => json!({ "type": "string", "format": "date" }),
        ResponseType::Datetime => json!({ "type": "string", "format": "date-time" }),
        ResponseType::Time => json!({ "type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$" }),
        ResponseType::Email => json!({ "type": "string", "format": "email" }),
        ResponseType::Url => json!({ "type": "string", "format": "uri" }),
        ResponseType::Markdown => json!({ "type": "string", "maxLength": 10_000 }),
        ResponseType::Table => {
            let mut row = serde_json::Map::new();
            for column in &rules.columns {
                let mut property = type_schema(column.response_type, &column.options, &FieldRules::default());
                property["title"] = json!(column.label);
                row.insert(column.key.clone(), property);
            }
            let required: Vec<&str> = rules.columns.iter().filter(|c| c.required).map(|c| c.key.as_str()).collect();
            let mut schema = json!({ "type": "array",
                "items": { "type": "object", "properties": row, "required": required } });
            if let Some(min) = rules.min_rows {
                schema["minItems"] = json!(min);
            }
            if let Some(max) = rules.max_rows {
                schema["maxItems"] = json!(max);
            }
            schema
        }
        ResponseType::File => json!({ "type": "object", "required": ["file_id"],
            "properties": { "file_id": { "type": "string", "format": "uuid" } },
            "description": "An upload of POST /api/v1/files" }),
        ResponseType::Form => json!({ "type": "object" }),
        ResponseType::Text => json!({ "type": "string", "minLength": 1, "maxLength": 10_000 }),
    }
}
