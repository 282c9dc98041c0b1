//! Questions as a person reads them at a terminal: the list as aligned columns, one question in full, and what an
//! answer did.

use app::types::{FormField, Question, ResponseType, TableColumn};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::channels::asked::kind_text;

/// The questions as aligned columns: id, kind, urgency, age, deadline, (status,) title.
pub(super) fn table(items: &[Value], with_status: bool, now: DateTime<Utc>) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["ID", "KIND", "URGENCY", "AGE", "DEADLINE"];
    if with_status {
        header.push("STATUS");
    }
    header.push("TITLE");
    rows.push(header.into_iter().map(str::to_owned).collect());
    for question in items {
        let mut row = vec![
            text(&question["id"]),
            text(&question["kind"]),
            text(&question["urgency"]),
            timestamp(&question["created_at"]).map_or_else(|| "-".into(), |t| human_duration(now - t)),
            // A resolved question's deadline no longer matters.
            if question["status"] == "pending" { deadline(&question["timeout_at"], now) } else { "-".into() },
        ];
        if with_status {
            row.push(text(&question["status"]));
        }
        let title = text(&question["title"]);
        row.push(if title.chars().count() > 60 {
            format!("{}…", title.chars().take(59).collect::<String>())
        } else {
            title
        });
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> =
        (0..columns).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| if c + 1 == columns { cell.clone() } else { format!("{cell:<width$}", width = widths[c]) })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn text(value: &Value) -> String {
    value.as_str().map_or_else(|| if value.is_null() { "-".into() } else { value.to_string() }, str::to_owned)
}

fn timestamp(value: &Value) -> Option<DateTime<Utc>> {
    value.as_str().and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc))
}

fn deadline(value: &Value, now: DateTime<Utc>) -> String {
    match timestamp(value) {
        None => "-".into(),
        Some(at) if at > now => format!("in {}", human_duration(at - now)),
        Some(at) => format!("{} ago", human_duration(now - at)),
    }
}

/// `45s`, `12m`, `3h05m`, `2d04h`: a duration at a glance.
fn human_duration(duration: chrono::TimeDelta) -> String {
    let secs = duration.num_seconds().max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// The question as a person reads it.
pub(super) fn describe(q: &Value, now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(text(&q["title"]));
    line(format!("id:        {}", text(&q["id"])));
    line(format!("status:    {}", text(&q["status"])));
    line(format!("kind:      {} (answered with {})", text(&q["kind"]), text(&q["response_type"])));
    line(format!("urgency:   {}", text(&q["urgency"])));
    if let Some(project) = q["project"].as_str() {
        line(format!("project:   {project}"));
    }
    if let Some(asked) = timestamp(&q["created_at"]) {
        line(format!("asked:     {} ({} ago)", asked.to_rfc3339(), human_duration(now - asked)));
    }
    if let Some(at) = timestamp(&q["timeout_at"]) {
        line(format!("deadline:  {} ({})", at.to_rfc3339(), deadline(&q["timeout_at"], now)));
    }
    if let Some(run) = q["run_id"].as_str() {
        line(format!("run:       {run}"));
    }
    let lineage: Vec<String> = q["parent_run_ids"].as_array().into_iter().flatten().map(text).collect();
    if !lineage.is_empty() {
        line(format!("lineage:   {}", lineage.join(" → ")));
    }
    if let Some(assignee) = q["assignee"].as_object() {
        line(format!("assignee:  {}", Value::Object(assignee.clone())));
    }
    if let Some(body) = q["body"].as_str().filter(|b| !b.trim().is_empty()) {
        line(String::new());
        line(body.trim_end().to_owned());
    }
    if let Some(action) = q["action"].as_object() {
        line(String::new());
        line(format!("Action: {}", text(&action["tool_name"])));
        line(indent(&pretty(&action["arguments"])));
        if q["allow_edit"] == true {
            line("  (editable: holdpoint approve ID --edit JSON)".into());
        }
    }
    let options = q["options"].as_array().cloned().unwrap_or_default();
    if !options.is_empty() {
        line(String::new());
        line("Options:".into());
        for option in &options {
            let mut entry = format!("  {}  {}", text(&option["value"]), text(&option["label"]));
            if let Some(description) = option["description"].as_str() {
                entry.push_str(&format!(" — {description}"));
            }
            line(entry);
        }
    }
    // What a single value takes, in words, as a form's field says it: its bounds, a rating's stars, how many choices,
    // a table's rows and columns (by the keys `--row` names).
    if let Ok(question) = serde_json::from_value::<Question>(q.clone())
        && !matches!(
            question.response_type,
            ResponseType::Text
                | ResponseType::Boolean
                | ResponseType::Choice
                | ResponseType::Approval
                | ResponseType::ErrorRecovery
                | ResponseType::Form
        )
    {
        line(String::new());
        line(format!("Takes: {}", kind_text(question.response_type, &question.options, &question.rules)));
        for column in &question.rules.columns {
            line(column_line(column));
        }
    }
    let fields = q["fields"].as_array().cloned().unwrap_or_default();
    if !fields.is_empty() {
        line(String::new());
        line("Fields:".into());
        for field in &fields {
            let required = if field["required"] == true { ", required" } else { "" };
            let mut entry = format!(
                "  {} ({}{required}): {}",
                text(&field["key"]),
                text(&field["response_type"]),
                text(&field["label"])
            );
            let values: Vec<String> =
                field["options"].as_array().into_iter().flatten().map(|o| text(&o["value"])).collect();
            if !values.is_empty() {
                entry.push_str(&format!(" [{}]", values.join(", ")));
            }
            // What the field takes, in words, as email and Slack say it: its bounds and a table's columns.
            let asked = serde_json::from_value::<FormField>(field.clone()).ok();
            if let Some(field) = &asked
                && !matches!(field.response_type, ResponseType::Text | ResponseType::Choice)
            {
                entry.push_str(&format!(" — {}", kind_text(field.response_type, &field.options, &field.rules)));
            }
            line(entry);
            for column in asked.iter().flat_map(|f| &f.rules.columns) {
                line(format!("    {}", column_line(column)));
            }
        }
    }
    if q["context"].as_object().is_some_and(|c| !c.is_empty()) {
        line(String::new());
        line("Context:".into());
        line(indent(&pretty(&q["context"])));
    }
    if !q["default_response"].is_null() {
        line(String::new());
        line(format!("At the deadline: {}", answer_line(q, &q["default_response"])));
    }
    if !q["response"].is_null() {
        line(String::new());
        let mut by = format!("Answer: {}", answer_line(q, &q["response"]));
        if let Some(who) = q["answered_by"].as_str() {
            by.push_str(&format!(" — by {who}"));
        }
        if let Some(resolution) = q["resolution"].as_str() {
            by.push_str(&format!(" ({resolution})"));
        }
        line(by);
    }
    if q["status"] == "pending" {
        line(String::new());
        line(format!("Answer with: {}", how_to_answer(q)));
    }
    out
}

/// A table's column as `--row` names it: "  column size (choice, required): Size [s, l]".
fn column_line(column: &TableColumn) -> String {
    let required = if column.required { ", required" } else { "" };
    let mut entry = format!("  column {} ({}{required}): {}", column.key, column.response_type, column.label);
    if !column.options.is_empty() {
        let values: Vec<&str> = column.options.iter().map(|o| o.value.as_str()).collect();
        entry.push_str(&format!(" [{}]", values.join(", ")));
    }
    entry
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// An answer (or the default) of question `q` as a person reads it: a form field by field under the fields' labels,
/// a choice by its label, a file as its name and size; then its comment and edited arguments.
fn answer_line(q: &Value, answer: &Value) -> String {
    let value = &answer["value"];
    let mut line = match (value, serde_json::from_value::<app::types::Question>(q.clone())) {
        // A file question's answer reads as the file, not as its record.
        (Value::Object(file), _) if file.contains_key("file_id") => format!(
            "{} ({})",
            file.get("name").and_then(Value::as_str).unwrap_or("a file"),
            app::types::size_text(file.get("size").and_then(Value::as_u64).unwrap_or(0))
        ),
        (_, Ok(question)) => app::types::answer_in_words(&question, value),
        // A question this version cannot read (a newer server's): the value as sent.
        (Value::String(text), Err(_)) => text.clone(),
        (other, Err(_)) => other.to_string(),
    };
    if let Some(comment) = answer["comment"].as_str() {
        line.push_str(&format!(" (comment: {comment})"));
    }
    if !answer["edited_arguments"].is_null() {
        line.push_str(&format!(" (edited arguments: {})", answer["edited_arguments"]));
    }
    line
}

/// What answering `q` did, after "Answered ID: ": the answer, or, for an approval that needs more, how far it is.
pub(super) fn outcome_line(q: &Value) -> String {
    match (q["status"].as_str(), q["required_approvals"].as_u64()) {
        (Some("pending"), Some(required)) => {
            let given = q["approvals"].as_array().map_or(0, Vec::len);
            format!("approval recorded, {given} of {required}; still pending")
        }
        _ => answer_line(q, &q["response"]),
    }
}

fn how_to_answer(q: &Value) -> String {
    let id = text(&q["id"]);
    match q["response_type"].as_str() {
        Some("approval") => format!("holdpoint approve {id}  |  holdpoint reject {id} --comment WHY"),
        Some("boolean") => format!("holdpoint answer {id} yes|no"),
        Some("choice") => format!("holdpoint answer {id} OPTION"),
        Some("multi_choice") => format!("holdpoint answer {id} OPTION,OPTION"),
        Some("form") => format!(
            "holdpoint answer {id} --field KEY=VALUE ... [--file KEY=@PATH] [--row KEY COLUMN=VALUE,...]  |  \
             holdpoint answer {id} '{{\"KEY\": VALUE, ...}}'"
        ),
        Some("table") => {
            format!("holdpoint answer {id} --row COLUMN=VALUE,... --row ...  |  holdpoint answer {id} '[{{...}}]'")
        }
        Some("number" | "integer" | "rating") => format!("holdpoint answer {id} NUMBER"),
        Some("file") => format!("holdpoint answer {id} --file @PATH"),
        Some("error_recovery") => format!("holdpoint answer {id} retry|skip|abort"),
        _ => format!("holdpoint answer {id} \"TEXT\""),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    #[test]
    fn the_table_aligns_columns_and_says_when_the_deadline_is() {
        let now = Utc::now();
        let items = vec![json!({
            "id": "0190", "kind": "approval", "urgency": "high", "title": "Deploy?", "status": "pending",
            "created_at": (now - chrono::TimeDelta::minutes(5)).to_rfc3339(),
            "timeout_at": (now + chrono::TimeDelta::minutes(10)).to_rfc3339(),
        })];
        let table = table(&items, false, now);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("ID    KIND      URGENCY  AGE  DEADLINE"), "{table}");
        assert!(lines[1].contains("5m") && lines[1].contains("in 10m") && lines[1].ends_with("Deploy?"), "{table}");
    }

    #[test]
    fn durations_read_at_a_glance() {
        let d = chrono::TimeDelta::seconds;
        assert_eq!(
            [
                human_duration(d(45)),
                human_duration(d(720)),
                human_duration(d(3 * 3600 + 300)),
                human_duration(d(2 * 86_400 + 4 * 3600))
            ],
            ["45s", "12m", "3h05m", "2d04h"]
        );
    }
}
