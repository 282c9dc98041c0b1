//! `holdpoint questions`, `show`, `answer`, `approve` and `reject`: answering from a terminal.
//!
//! They speak the REST API like the headless commands ([`crate::client`]); with the embedded engine they act as the
//! person at the terminal ([`LocalIdentity::Person`]). A value is parsed by the question's response type before
//! anything is sent, so a value that cannot be meant is a usage error (exit 2) and the server is not asked; what the
//! server refuses (a conflict, a forbidden role, an invalid value) exits 1 with the error's code.

use app::types::AnswerBody;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::client::{CliError, CliResult, Connection, LocalIdentity, ServerArgs};
use crate::headless::OutputFormat;

/// The statuses `questions --status` filters on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFilter {
    Pending,
    Answered,
    Defaulted,
    Expired,
    Cancelled,
    /// Every status.
    All,
}

/// The kinds `questions --kind` filters on; the API's spelling, with hyphens accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindFilter {
    Blocking,
    #[value(name = "non_blocking", alias = "non-blocking")]
    NonBlocking,
    Approval,
    #[value(name = "error_recovery", alias = "error-recovery")]
    ErrorRecovery,
}

/// `holdpoint questions`.
#[derive(Debug, clap::Args)]
pub struct QuestionsArgs {
    #[arg(long, value_enum, default_value = "pending")]
    pub status: StatusFilter,
    #[arg(long, value_enum)]
    pub kind: Option<KindFilter>,
    #[arg(long)]
    pub project: Option<String>,
    /// How many questions to list, 1..=200.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=200))]
    pub limit: u32,
    /// The `next_cursor` of an earlier page.
    #[arg(long)]
    pub cursor: Option<String>,
    /// `table` for people, `json` for the API's page.
    #[arg(long, value_enum, default_value = "table")]
    pub output: ListFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// How `questions` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
}

/// `holdpoint show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The question's id.
    pub id: String,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `holdpoint answer`.
#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The question's id.
    pub id: String,
    /// The answer, read by the question's type: text as is; yes/no/true/false; an option value; option values
    /// separated by commas; a JSON object for forms; retry, skip, abort or an option value for error recovery.
    pub value: String,
    /// Free text for the agent.
    #[arg(long)]
    pub comment: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `holdpoint approve`.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The approval question's id.
    pub id: String,
    #[arg(long)]
    pub comment: Option<String>,
    /// Replacement arguments for the action, as a JSON object (only where the question allows editing).
    #[arg(long, value_name = "JSON")]
    pub edit: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `holdpoint reject`.
#[derive(Debug, clap::Args)]
pub struct RejectArgs {
    /// The approval question's id.
    pub id: String,
    /// The reason, passed to the agent.
    #[arg(long)]
    pub comment: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `holdpoint questions`: a page of questions, newest first.
pub async fn list(args: QuestionsArgs) -> CliResult<u8> {
    let mut query = vec![format!("limit={}", args.limit)];
    let status = match args.status {
        StatusFilter::Pending => Some("pending"),
        StatusFilter::Answered => Some("answered"),
        StatusFilter::Defaulted => Some("defaulted"),
        StatusFilter::Expired => Some("expired"),
        StatusFilter::Cancelled => Some("cancelled"),
        StatusFilter::All => None,
    };
    if let Some(status) = status {
        query.push(format!("status={status}"));
    }
    if let Some(kind) = args.kind {
        query.push(format!("kind={}", kind_name(kind)));
    }
    if let Some(project) = &args.project {
        query.push(format!("project={}", encode(project)));
    }
    if let Some(cursor) = &args.cursor {
        query.push(format!("cursor={}", encode(cursor)));
    }
    let connection = Connection::open_as(&args.server, LocalIdentity::Person).await?;
    let page = connection.get(&format!("/questions?{}", query.join("&"))).await?;
    match args.output {
        ListFormat::Json => print_json(&page),
        ListFormat::Table => {
            let items = page["items"].as_array().cloned().unwrap_or_default();
            print!("{}", table(&items, status != Some("pending"), Utc::now()));
            if items.is_empty() {
                eprintln!("No questions.");
            }
            if let Some(next) = page["next_cursor"].as_str() {
                eprintln!("More: --cursor {next}");
            }
        }
    }
    Ok(0)
}

fn kind_name(kind: KindFilter) -> &'static str {
    match kind {
        KindFilter::Blocking => "blocking",
        KindFilter::NonBlocking => "non_blocking",
        KindFilter::Approval => "approval",
        KindFilter::ErrorRecovery => "error_recovery",
    }
}

fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

/// The questions as aligned columns: id, kind, urgency, age, deadline, (status,) title.
fn table(items: &[Value], with_status: bool, now: DateTime<Utc>) -> String {
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

/// A question id from the command line: a UUID, else a usage error.
fn question_id(raw: &str) -> CliResult<String> {
    uuid::Uuid::parse_str(raw.trim())
        .map(|id| id.to_string())
        .map_err(|_| CliError::Usage(format!("{raw:?} is not a question id (a UUID)")))
}

/// `holdpoint show`: the question in full.
pub async fn show(args: ShowArgs) -> CliResult<u8> {
    let id = question_id(&args.id)?;
    let connection = Connection::open_as(&args.server, LocalIdentity::Person).await?;
    let question = connection.get(&format!("/questions/{id}")).await?;
    match args.output {
        OutputFormat::Json => print_json(&question),
        OutputFormat::Text => print!("{}", describe(&question, Utc::now())),
    }
    Ok(0)
}

/// The question as a person reads it.
fn describe(q: &Value, now: DateTime<Utc>) -> String {
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
            line(entry);
        }
    }
    if q["context"].as_object().is_some_and(|c| !c.is_empty()) {
        line(String::new());
        line("Context:".into());
        line(indent(&pretty(&q["context"])));
    }
    if !q["default_response"].is_null() {
        line(String::new());
        line(format!("At the deadline: {}", answer_line(&q["default_response"])));
    }
    if !q["response"].is_null() {
        line(String::new());
        let mut by = format!("Answer: {}", answer_line(&q["response"]));
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

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

fn answer_line(answer: &Value) -> String {
    let value = &answer["value"];
    let mut line = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
    if let Some(comment) = answer["comment"].as_str() {
        line.push_str(&format!(" (comment: {comment})"));
    }
    if !answer["edited_arguments"].is_null() {
        line.push_str(&format!(" (edited arguments: {})", answer["edited_arguments"]));
    }
    line
}

fn how_to_answer(q: &Value) -> String {
    let id = text(&q["id"]);
    match q["response_type"].as_str() {
        Some("approval") => format!("holdpoint approve {id}  |  holdpoint reject {id} --comment WHY"),
        Some("boolean") => format!("holdpoint answer {id} yes|no"),
        Some("choice") => format!("holdpoint answer {id} OPTION"),
        Some("multi_choice") => format!("holdpoint answer {id} OPTION,OPTION"),
        Some("form") => format!("holdpoint answer {id} '{{\"KEY\": VALUE, ...}}'"),
        Some("error_recovery") => format!("holdpoint answer {id} retry|skip|abort"),
        _ => format!("holdpoint answer {id} \"TEXT\""),
    }
}

/// Reads `raw` as an answer to a question of `response_type` (with the form's `fields`).
pub fn parse_value(response_type: &str, fields: &[Value], raw: &str) -> CliResult<Value> {
    Ok(match response_type {
        "boolean" | "approval" => Value::Bool(parse_bool(raw)?),
        "multi_choice" => split_list(raw),
        "form" => {
            let mut object: Value = serde_json::from_str(raw)
                .map_err(|e| CliError::Usage(format!("a form is answered with a JSON object: {e}")))?;
            let Some(map) = object.as_object_mut() else {
                return Err(CliError::Usage("a form is answered with a JSON object, e.g. '{\"count\": 3}'".into()));
            };
            // A shell makes strings of everything; each field is read as its own type, as the value alone is.
            for field in fields {
                let (Some(key), Some(kind)) = (field["key"].as_str(), field["response_type"].as_str()) else {
                    continue;
                };
                if let Some(Value::String(given)) = map.get(key) {
                    let typed = match kind {
                        "number" => Value::from(parse_number(key, given)?),
                        "boolean" => Value::Bool(parse_bool(given)?),
                        "multi_choice" => split_list(given),
                        _ => continue,
                    };
                    map.insert(key.to_owned(), typed);
                }
            }
            object
        }
        // text, choice, error_recovery: the value as given; the server checks it against the options.
        _ => Value::String(raw.to_owned()),
    })
}

fn parse_bool(raw: &str) -> CliResult<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" | "true" => Ok(true),
        "no" | "n" | "false" => Ok(false),
        _ => Err(CliError::Usage(format!("expected yes, no, true or false, not {raw:?}"))),
    }
}

fn parse_number(key: &str, raw: &str) -> CliResult<serde_json::Number> {
    let raw = raw.trim();
    if let Ok(whole) = raw.parse::<i64>() {
        return Ok(whole.into());
    }
    raw.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .ok_or_else(|| CliError::Usage(format!("field {key} is a number, not {raw:?}")))
}

fn split_list(raw: &str) -> Value {
    Value::Array(raw.split(',').map(str::trim).filter(|v| !v.is_empty()).map(|v| json!(v)).collect())
}

/// `holdpoint answer`.
pub async fn answer(args: AnswerArgs) -> CliResult<u8> {
    let id = question_id(&args.id)?;
    let connection = Connection::open_as(&args.server, LocalIdentity::Person).await?;
    let question = connection.get(&format!("/questions/{id}")).await?;
    let response_type = question["response_type"].as_str().unwrap_or("text");
    let fields = question["fields"].as_array().cloned().unwrap_or_default();
    let value = parse_value(response_type, &fields, &args.value)?;
    let body = AnswerBody { value, comment: args.comment.clone(), edited_arguments: None };
    submit(&connection, &id, &body, args.output, "Answered").await
}

/// `holdpoint approve`.
pub async fn approve(args: ApproveArgs) -> CliResult<u8> {
    let id = question_id(&args.id)?;
    let edited = match &args.edit {
        Some(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(object @ Value::Object(_)) => Some(object),
            Ok(_) => return Err(CliError::Usage("--edit takes the action's arguments as a JSON object".into())),
            Err(e) => return Err(CliError::Usage(format!("--edit is not JSON: {e}"))),
        },
        None => None,
    };
    let connection = Connection::open_as(&args.server, LocalIdentity::Person).await?;
    require_approval(&connection, &id).await?;
    let body = AnswerBody { value: Value::Bool(true), comment: args.comment.clone(), edited_arguments: edited };
    submit(&connection, &id, &body, args.output, "Approved").await
}

/// `holdpoint reject`.
pub async fn reject(args: RejectArgs) -> CliResult<u8> {
    let id = question_id(&args.id)?;
    let connection = Connection::open_as(&args.server, LocalIdentity::Person).await?;
    require_approval(&connection, &id).await?;
    let body = AnswerBody { value: Value::Bool(false), comment: args.comment.clone(), edited_arguments: None };
    submit(&connection, &id, &body, args.output, "Rejected").await
}

/// Refuses (usage) to approve or reject what is not an approval: its answer is not a yes or no to an action.
async fn require_approval(connection: &Connection, id: &str) -> CliResult<()> {
    let question = connection.get(&format!("/questions/{id}")).await?;
    match question["response_type"].as_str() {
        Some("approval") => Ok(()),
        other => Err(CliError::Usage(format!(
            "question {id} is not an approval but a {} question: use holdpoint answer {id} VALUE",
            other.unwrap_or("?").replace('_', " ")
        ))),
    }
}

async fn submit(
    connection: &Connection,
    id: &str,
    body: &AnswerBody,
    output: OutputFormat,
    done: &str,
) -> CliResult<u8> {
    let body = serde_json::to_value(body).map_err(|e| CliError::Failed(e.to_string()))?;
    let answered = connection.post(&format!("/questions/{id}/answer"), &body).await?;
    match output {
        OutputFormat::Json => print_json(&answered),
        OutputFormat::Text => {
            println!("{done} {id}: {}", answer_line(&answered["response"]));
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boolean_is_yes_no_true_or_false() {
        assert_eq!(parse_value("boolean", &[], "Yes").unwrap(), json!(true));
        assert_eq!(parse_value("boolean", &[], "false").unwrap(), json!(false));
        assert!(matches!(parse_value("boolean", &[], "maybe"), Err(CliError::Usage(_))));
    }

    #[test]
    fn multi_choice_values_are_separated_by_commas() {
        assert_eq!(parse_value("multi_choice", &[], "eu, us,,").unwrap(), json!(["eu", "us"]));
    }

    #[test]
    fn text_choice_and_error_recovery_are_taken_as_given() {
        for kind in ["text", "choice", "error_recovery"] {
            assert_eq!(parse_value(kind, &[], " retry ").unwrap(), json!(" retry "));
        }
    }

    #[test]
    fn form_fields_given_as_strings_are_read_as_their_type() {
        let fields = vec![
            json!({ "key": "count", "response_type": "number" }),
            json!({ "key": "ratio", "response_type": "number" }),
            json!({ "key": "ok", "response_type": "boolean" }),
            json!({ "key": "regions", "response_type": "multi_choice" }),
            json!({ "key": "name", "response_type": "text" }),
        ];
        let raw = r#"{"count": "3", "ratio": 0.5, "ok": "yes", "regions": "eu,us", "name": "42"}"#;
        assert_eq!(
            parse_value("form", &fields, raw).unwrap(),
            json!({ "count": 3, "ratio": 0.5, "ok": true, "regions": ["eu", "us"], "name": "42" })
        );
        assert!(matches!(parse_value("form", &fields, r#"{"count": "three"}"#), Err(CliError::Usage(_))));
        assert!(matches!(parse_value("form", &fields, "[1]"), Err(CliError::Usage(_))));
        assert!(matches!(parse_value("form", &fields, "count=3"), Err(CliError::Usage(_))));
    }

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
