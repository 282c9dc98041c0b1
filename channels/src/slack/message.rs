//! The messages that ask a question and that show it resolved: their blocks and fallback text.

use super::*;

pub(super) fn kind_label(kind: QuestionKind) -> &'static str {
    match kind {
        QuestionKind::Blocking => "Question",
        QuestionKind::NonBlocking => "Question (the agent goes on)",
        QuestionKind::Approval => "Approval",
        QuestionKind::ErrorRecovery => "Error recovery",
    }
}

/// The context line under the header: urgency, kind, deadline, project.
pub(super) fn context_block(question: &Question) -> Value {
    let mut elements =
        vec![mrkdwn(&format!("*{}*", question.urgency.as_str().to_uppercase())), mrkdwn(kind_label(question.kind))];
    if let Some(deadline) = deadline_text(question) {
        elements.push(mrkdwn(&format!("Deadline {}", escape_mrkdwn(&deadline))));
    }
    if let Some(project) = &question.project {
        elements.push(mrkdwn(&format!("Project {}", escape_mrkdwn(project))));
    }
    elements.truncate(limits::CONTEXT_ELEMENTS);
    json!({"type": "context", "elements": elements})
}

/// The blocks every form of the message starts with: header, context, body, and an approval's call.
pub(super) fn question_blocks(question: &Question) -> Vec<Value> {
    let mut blocks = vec![
        json!({"type": "header", "text": plain_text(&question.title, limits::HEADER_TEXT)}),
        context_block(question),
    ];
    if !question.body.trim().is_empty() {
        blocks.push(section(&escape_mrkdwn(question.body.trim())));
    }
    if let (ResponseType::Approval, Some(action)) = (question.response_type, &question.action) {
        blocks.push(section(&format!(
            "Tool `{}` with the arguments:\n```{}```",
            escape_mrkdwn(&action.tool_name),
            escape_mrkdwn(&pretty_arguments(&action.arguments))
        )));
    }
    blocks
}

/// The message's `text`, which Slack shows in notifications and reads as `mrkdwn`: the title is escaped, or an agent's
/// `<!channel>` would notify everyone in a channel.
pub(super) fn fallback_text(question: &Question) -> String {
    let text = format!(
        "[{}] {}: {}",
        question.urgency.as_str().to_uppercase(),
        kind_label(question.kind),
        escape_mrkdwn(&question.title)
    );
    truncate_chars(&text, limits::MESSAGE_TEXT)
}

/// The button `value` of a quick answer: which question, which value.
pub(super) fn answer_value(question_id: Uuid, value: &Value) -> String {
    json!({"q": question_id, "v": value}).to_string()
}

pub(super) fn button(text: &str, action_id: &str, value: Option<String>, style: AnswerStyle) -> Value {
    let mut button = json!({"type": "button", "text": plain_text(text, limits::BUTTON_TEXT), "action_id": action_id});
    if let Some(value) = value {
        button["value"] = Value::String(value);
    }
    match style {
        AnswerStyle::Primary => button["style"] = json!("primary"),
        AnswerStyle::Danger => button["style"] = json!("danger"),
        AnswerStyle::Plain => {}
    }
    button
}

/// The most options of a `choice` question shown as buttons: with the modal and "Open" buttons, all of the 20 a
/// question may have fit in one actions block.
pub(super) const SLACK_MAX_CHOICES: usize = limits::ACTION_ELEMENTS - 2;

/// The quick answers a Slack message offers as buttons (a value too long for a button's `value` is answered in
/// the modal or in Holdpoint instead).
pub(super) fn slack_quick_answers(question: &Question) -> Vec<QuickAnswer> {
    quick_answers(question, SLACK_MAX_CHOICES)
        .into_iter()
        .filter(|answer| answer_value(question.id, &answer.value).len() <= limits::BUTTON_VALUE)
        .collect()
}

/// What the question asks for, as a section of mrkdwn: the fields of a form with their bounds, or what its one value
/// is (see [`crate::asked`]).
pub(super) fn asked_block(question: &Question) -> Option<Value> {
    let items = asked(question);
    if items.is_empty() {
        return None;
    }
    let heading = if question.response_type == ResponseType::Form { "*What is asked*" } else { "*The answer is*" };
    let lines: Vec<String> = asked_lines(&items).iter().map(|line| escape_mrkdwn(line)).collect();
    Some(section(&format!("{heading}\n{}", lines.join("\n"))))
}

/// The message that asks `question`: what it asks for, buttons for its quick answers, "Answer…" for the modal, and
/// a link to it in Holdpoint (`open_url`), which says "Answer in Holdpoint" when Slack cannot take the answer (a
/// file, a table).
pub fn question_message(question: &Question, open_url: &str) -> SlackMessage {
    let mut blocks = question_blocks(question);
    let quick = slack_quick_answers(question);
    if quick.is_empty() {
        // Where buttons answer, they say what the answers are.
        blocks.extend(asked_block(question));
    }
    let mut buttons: Vec<Value> = quick
        .iter()
        .enumerate()
        .map(|(i, answer)| {
            button(&answer.label, &format!("answer:{i}"), Some(answer_value(question.id, &answer.value)), answer.style)
        })
        .collect();
    if has_modal(question) {
        let label = if buttons.is_empty() { "Answer…" } else { "With a comment…" };
        buttons.push(button(label, MODAL_ACTION, Some(json!({"q": question.id}).to_string()), AnswerStyle::Plain));
    }
    let open_label = if buttons.is_empty() && question.status == QuestionStatus::Pending {
        "Answer in Holdpoint"
    } else {
        "Open in Holdpoint"
    };
    let mut open = button(open_label, OPEN_ACTION, None, AnswerStyle::Plain);
    open["url"] = Value::String(open_url.to_owned());
    buttons.push(open);
    buttons.truncate(limits::ACTION_ELEMENTS);
    blocks.push(json!({"type": "actions", "block_id": format!("q:{}", question.id), "elements": buttons}));
    SlackMessage { text: fallback_text(question), blocks }
}

/// How a resolved question was resolved, in words, with the answer's label when it has one.
pub(super) fn resolution_text(question: &Question) -> String {
    let by = question.answered_by.as_deref().map(|name| format!(" by {}", escape_mrkdwn(name))).unwrap_or_default();
    let value = question.response.as_ref().map(|response| &response.value);
    let answer = value.map(|value| match (question.response_type, value) {
        (ResponseType::Approval, Value::Bool(true)) => "Approved".to_owned(),
        (ResponseType::Approval, Value::Bool(false)) => "Rejected".to_owned(),
        (ResponseType::Boolean, Value::Bool(true)) => "Yes".to_owned(),
        (ResponseType::Boolean, Value::Bool(false)) => "No".to_owned(),
        (_, value) => truncate_chars(&answer_in_words(question, value), 500),
    });
    let answer = answer.map(|a| format!(": *{}*", escape_mrkdwn(&a))).unwrap_or_default();
    match question.status {
        QuestionStatus::Pending => "Waiting for an answer".to_owned(),
        QuestionStatus::Answered => format!(":white_check_mark: Answered{by}{answer}"),
        QuestionStatus::Defaulted => format!(":hourglass: The deadline passed; the default applied{answer}"),
        QuestionStatus::Expired => ":hourglass: The deadline passed with no answer".to_owned(),
        QuestionStatus::Cancelled => format!(":no_entry_sign: Cancelled{by}"),
    }
}

/// The message once `question` is resolved (anywhere): how and by whom, with no buttons left.
pub fn resolved_message(question: &Question, open_url: &str) -> SlackMessage {
    let mut blocks = question_blocks(question);
    let outcome = resolution_text(question);
    blocks.push(section(&format!("{outcome}\n<{open_url}|Open in Holdpoint>")));
    let text = truncate_chars(&format!("{} — {}", fallback_text(question), outcome), limits::MESSAGE_TEXT);
    SlackMessage { text, blocks }
}
