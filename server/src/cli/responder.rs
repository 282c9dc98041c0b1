//! `holdpoint questions`, `show`, `answer`, `approve` and `reject`: answering from a terminal.
//!
//! They speak the REST API like the headless commands ([`crate::cli::client`]); with the embedded engine they act as the
//! person at the terminal ([`LocalIdentity::Person`]). A value is parsed by the question's response type before
//! anything is sent, so a value that cannot be meant is a usage error (exit 2) and the server is not asked; what the
//! server refuses (a conflict, a forbidden role, an invalid value) exits 1 with the error's code. A form may be
//! answered field by field (`--field KEY=VALUE`, each read by its field's type), with files uploaded first
//! (`--file KEY=@PATH`, `POST /files`) and tables row by row (`--row KEY COLUMN=VALUE,...`); a question that is
//! itself a file, with `--file @PATH`.

use app::types::{AnswerBody, FieldRules, FormField, Question, ResponseType, TableColumn};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::channels::asked::kind_text;
use crate::cli::client::{CliError, CliResult, Connection, LocalIdentity, ServerArgs};
use crate::cli::headless::OutputFormat;

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
    /// separated by commas; a number; a JSON array of rows for a table; a JSON object for forms (or --field, --file
    /// and --row instead); retry, skip, abort or an option value for error recovery.
    pub value: Option<String>,
    /// A form field's value, read by the field's type (a number, yes/no, options separated by commas, a JSON array
    /// of rows for a table; dates, times and the rest as given): `--field nodes=3 --field start=2026-03-01`.
    #[arg(long = "field", value_name = "KEY=VALUE")]
    pub fields: Vec<String>,
    /// A file for a form's file field, uploaded first (POST /files) and then referenced: `--file plan=@plan.pdf`
    /// (`--file @plan.pdf` for a question that is itself a file); its media type is guessed from its name unless
    /// given: `--file plan=@plan.bin;type=application/pdf`.
    #[arg(long = "file", value_name = "KEY=@PATH")]
    pub files: Vec<String>,
    /// One row of a table, repeated for each row: `--row disks='{"size": 100}'` or `--row disks size=100,ssd=yes`
    /// (each cell read by its column's type); for a question that is itself a table, `--row size=100,ssd=yes`.
    #[arg(long = "row", value_name = "ROW", num_args = 1..=2)]
    pub rows: Vec<String>,
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
fn outcome_line(q: &Value) -> String {
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

/// Reads `raw` as an answer to a question of `response_type` (with the form's `fields`).
pub fn parse_value(response_type: &str, fields: &[Value], raw: &str) -> CliResult<Value> {
    Ok(match response_type {
        "boolean" | "approval" => Value::Bool(parse_bool(raw)?),
        "multi_choice" => split_list(raw),
        "number" | "integer" | "rating" => Value::from(parse_number("the answer", raw)?),
        "table" => parse_rows_json("the answer", raw)?,
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
                        "number" | "integer" | "rating" => Value::from(parse_number(key, given)?),
                        "boolean" => Value::Bool(parse_bool(given)?),
                        "multi_choice" => split_list(given),
                        "table" => parse_rows_json(key, given)?,
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

/// A number as the command line gives it: a whole number as such, else a finite decimal.
pub(crate) fn parse_number(key: &str, raw: &str) -> CliResult<serde_json::Number> {
    let raw = raw.trim();
    if let Ok(whole) = raw.parse::<i64>() {
        return Ok(whole.into());
    }
    raw.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .ok_or_else(|| CliError::Usage(format!("{} is a number, not {raw:?}", named(key))))
}

/// "field KEY", or what is named as it is ("the answer").
fn named(key: &str) -> String {
    if key.starts_with("the ") { key.to_owned() } else { format!("field {key}") }
}

/// A table given whole: a JSON array of row objects.
fn parse_rows_json(key: &str, raw: &str) -> CliResult<Value> {
    match serde_json::from_str::<Value>(raw) {
        Ok(rows @ Value::Array(_)) => Ok(rows),
        _ => Err(CliError::Usage(format!(
            "{} is a table: give it as a JSON array of rows ('[{{\"COLUMN\": VALUE}}]'), or row by row with --row",
            named(key)
        ))),
    }
}

/// A value given on the command line as the type of the field (or column) it is for. Strings are left as they are:
/// the server checks dates, times, addresses and choices, and names what does not fit.
fn typed_value(key: &str, kind: ResponseType, raw: &str) -> CliResult<Value> {
    Ok(match kind {
        ResponseType::Number | ResponseType::Integer | ResponseType::Rating => Value::from(parse_number(key, raw)?),
        ResponseType::Boolean => Value::Bool(parse_bool(raw)?),
        ResponseType::MultiChoice => split_list(raw),
        ResponseType::Table => parse_rows_json(key, raw)?,
        ResponseType::File => {
            return Err(CliError::Usage(format!("{} is a file: give it with --file {key}=@PATH", named(key))));
        }
        _ => Value::String(raw.to_owned()),
    })
}

/// One row of a table: a JSON object, or `COLUMN=VALUE,...` with each cell read by its column's type.
fn parse_row(key: &str, columns: &[TableColumn], raw: &str) -> CliResult<Value> {
    let raw = raw.trim();
    if raw.starts_with('{') {
        return match serde_json::from_str::<Value>(raw) {
            Ok(row @ Value::Object(_)) => Ok(row),
            _ => Err(CliError::Usage(format!("a row of {} is not a JSON object: {raw}", named(key)))),
        };
    }
    let mut row = serde_json::Map::new();
    for cell in raw.split(',').map(str::trim).filter(|cell| !cell.is_empty()) {
        let Some((column, text)) = cell.split_once('=') else {
            return Err(CliError::Usage(format!("a row is COLUMN=VALUE,... or a JSON object, not {cell:?}")));
        };
        let column = column.trim();
        let Some(def) = columns.iter().find(|c| c.key == column) else {
            let known: Vec<&str> = columns.iter().map(|c| c.key.as_str()).collect();
            return Err(CliError::Usage(format!(
                "{} has no column {column:?} (its columns: {})",
                named(key),
                known.join(", ")
            )));
        };
        row.insert(column.to_owned(), typed_value(&format!("{key}.{column}"), def.response_type, text.trim())?);
    }
    Ok(Value::Object(row))
}

/// A `--file KEY=@PATH[;type=MEDIA/TYPE]`, read but not yet uploaded.
#[derive(Debug, PartialEq)]
pub struct FileArg {
    pub key: String,
    pub path: std::path::PathBuf,
    /// The media type given with `;type=`, else guessed from the file's name.
    pub media_type: String,
}

/// `@PATH` alone is the file of a question that is itself a file (its key is empty).
fn parse_file_arg(raw: &str) -> CliResult<FileArg> {
    let usage = || {
        CliError::Usage(format!(
            "--file takes KEY=@PATH for a form's field (e.g. plan=@plan.pdf), or @PATH for a file question, not {raw:?}"
        ))
    };
    let (key, rest) = match raw.strip_prefix('@') {
        Some(_) => ("", raw),
        None => raw.split_once('=').filter(|(key, _)| !key.trim().is_empty()).ok_or_else(usage)?,
    };
    let rest = rest.strip_prefix('@').ok_or_else(usage)?;
    let (path, media_type) = match rest.rsplit_once(";type=") {
        Some((path, media_type)) if media_type.contains('/') => (path, Some(media_type.trim().to_owned())),
        _ => (rest, None),
    };
    if path.is_empty() {
        return Err(usage());
    }
    let media_type =
        media_type.unwrap_or_else(|| mime_guess::from_path(path).first_or_octet_stream().essence_str().to_owned());
    Ok(FileArg { key: key.trim().to_owned(), path: path.into(), media_type })
}

/// The `--row` values as given, one group per row: a value without `=` is a table field's key, and the value after it
/// that key's row; any other value is a row on its own (`KEY='{...}'`, or a table question's `COLUMN=VALUE,...`).
pub fn group_rows(values: &[String]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut values = values.iter();
    while let Some(value) = values.next() {
        match (value.contains('='), value.trim_start().starts_with('{')) {
            (false, false) => rows.push(std::iter::once(value).chain(values.next()).cloned().collect()),
            _ => rows.push(vec![value.clone()]),
        }
    }
    rows
}

/// What the command line says beyond VALUE: `--field`, `--row` and the uploaded `--file`s (each `(key, the
/// upload's value)`).
#[derive(Debug, Default)]
pub struct Parts<'a> {
    pub fields: &'a [String],
    pub rows: &'a [Vec<String>],
    pub files: Vec<(String, Value)>,
}

/// The answer's value: VALUE read by the question's type, and a form's `--field`s, `--row`s and files on top of it
/// (or a table question's `--row`s after VALUE's rows).
pub fn build_value(question: &Value, raw: Option<&str>, parts: &Parts<'_>) -> CliResult<Value> {
    let response_type = question["response_type"].as_str().unwrap_or("text");
    let fields_json = question["fields"].as_array().cloned().unwrap_or_default();
    if response_type == "file" {
        return match (&parts.files[..], raw) {
            ([(key, file)], None) if key.is_empty() && parts.fields.is_empty() && parts.rows.is_empty() => {
                Ok(file.clone())
            }
            _ => Err(CliError::Usage("this is a file question: give its file, and only it, with --file @PATH".into())),
        };
    }
    if response_type != "form" {
        if !parts.fields.is_empty() || !parts.files.is_empty() {
            return Err(CliError::Usage(format!(
                "--field and --file are for forms; this is a {} question: give its answer as VALUE",
                response_type.replace('_', " ")
            )));
        }
        if response_type == "table" && !parts.rows.is_empty() {
            let rules: FieldRules = serde_json::from_value(question.clone()).unwrap_or_default();
            let mut rows = match raw {
                Some(raw) => parse_rows_json("the answer", raw)?.as_array().cloned().unwrap_or_default(),
                None => Vec::new(),
            };
            for row in parts.rows {
                let [row] = &row[..] else {
                    return Err(CliError::Usage("a table question's --row takes one row: COLUMN=VALUE,...".into()));
                };
                rows.push(parse_row("the answer", &rules.columns, row)?);
            }
            return Ok(Value::Array(rows));
        }
        if !parts.rows.is_empty() {
            return Err(CliError::Usage(format!(
                "--row is for tables; this is a {} question",
                response_type.replace('_', " ")
            )));
        }
        let raw = raw.ok_or_else(|| CliError::Usage("give the answer as VALUE".into()))?;
        return parse_value(response_type, &fields_json, raw);
    }
    let fields: Vec<FormField> = serde_json::from_value(Value::Array(fields_json.clone())).unwrap_or_default();
    let mut object = match raw {
        Some(raw) => parse_value("form", &fields_json, raw)?,
        None => Value::Object(Default::default()),
    };
    let Some(map) = object.as_object_mut() else {
        return Err(CliError::Usage("a form is answered with a JSON object".into()));
    };
    let field_of = |key: &str| -> CliResult<&FormField> {
        fields.iter().find(|f| f.key == key).ok_or_else(|| {
            let known: Vec<&str> = fields.iter().map(|f| f.key.as_str()).collect();
            CliError::Usage(format!("the form has no field {key:?} (its fields: {})", known.join(", ")))
        })
    };
    for given in parts.fields {
        let Some((key, text)) = given.split_once('=') else {
            return Err(CliError::Usage(format!("--field takes KEY=VALUE, not {given:?}")));
        };
        let field = field_of(key.trim())?;
        map.insert(field.key.clone(), typed_value(&field.key, field.response_type, text)?);
    }
    for row in parts.rows {
        let (key, text) = match &row[..] {
            [key, text] => (key.trim(), text.as_str()),
            [given] => match given.split_once('=') {
                Some((key, text)) if text.trim_start().starts_with('{') => (key.trim(), text),
                _ => {
                    return Err(CliError::Usage(format!(
                        "--row takes KEY COLUMN=VALUE,... or KEY='{{JSON}}' for a form's table, not {given:?}"
                    )));
                }
            },
            _ => return Err(CliError::Usage("--row takes one or two values".into())),
        };
        let field = field_of(key)?;
        if field.response_type != ResponseType::Table {
            return Err(CliError::Usage(format!("field {key} is not a table: give it with --field {key}=VALUE")));
        }
        let row = parse_row(key, &field.rules.columns, text)?;
        match map.entry(field.key.clone()).or_insert_with(|| Value::Array(Vec::new())) {
            Value::Array(rows) => rows.push(row),
            _ => return Err(CliError::Usage(format!("field {key} is given whole and row by row: choose one"))),
        }
    }
    for (key, file) in &parts.files {
        if key.is_empty() {
            return Err(CliError::Usage("a form's file is given with --file KEY=@PATH, for its field KEY".into()));
        }
        let field = field_of(key)?;
        if field.response_type != ResponseType::File {
            return Err(CliError::Usage(format!("field {key} is not a file field: give it with --field {key}=VALUE")));
        }
        map.insert(field.key.clone(), file.clone());
    }
    Ok(object)
}

fn split_list(raw: &str) -> Value {
    Value::Array(raw.split(',').map(str::trim).filter(|v| !v.is_empty()).map(|v| json!(v)).collect())
}

/// `holdpoint answer`: VALUE, or a form's `--field`, `--file` and `--row`. Everything the command line can get wrong
/// is refused (exit 2) before a file is uploaded or an answer sent; the server judges the values themselves.
pub async fn answer(args: AnswerArgs) -> CliResult<u8> {
    let id = question_id(&args.id)?;
    if args.value.is_none() && args.fields.is_empty() && args.files.is_empty() && args.rows.is_empty() {
        return Err(CliError::Usage(
            "give the answer: holdpoint answer ID VALUE, or for a form --field KEY=VALUE, --file KEY=@PATH and \
             --row KEY COLUMN=VALUE,..."
                .into(),
        ));
    }
    let files: Vec<FileArg> = args.files.iter().map(|raw| parse_file_arg(raw)).collect::<CliResult<_>>()?;
    let connection = Connection::open_as(&args.server, LocalIdentity::Person).await?;
    let question = connection.get(&format!("/questions/{id}")).await?;
    // Checked with placeholders first, so that a wrong key or type uploads nothing.
    let placeholders = files.iter().map(|f| (f.key.clone(), Value::Null)).collect();
    let rows = group_rows(&args.rows);
    let mut parts = Parts { fields: &args.fields, rows: &rows, files: placeholders };
    build_value(&question, args.value.as_deref(), &parts)?;
    let mut uploaded = Vec::with_capacity(files.len());
    for file in &files {
        let bytes = tokio::fs::read(&file.path)
            .await
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.path.display())))?;
        let name = file.path.file_name().map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
        let stored = connection.upload(&name, &file.media_type, bytes).await?;
        uploaded.push((file.key.clone(), stored));
    }
    parts.files = uploaded;
    let value = build_value(&question, args.value.as_deref(), &parts)?;
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
            println!("{done} {id}: {}", outcome_line(&answered));
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

    fn rich_form() -> Value {
        json!({ "response_type": "form", "fields": [
            { "key": "nodes", "label": "Nodes", "response_type": "integer", "required": true },
            { "key": "start", "label": "Start", "response_type": "date" },
            { "key": "canary", "label": "Canary?", "response_type": "boolean" },
            { "key": "plan", "label": "Plan", "response_type": "file" },
            { "key": "disks", "label": "Disks", "response_type": "table", "columns": [
                { "key": "size", "label": "Size", "response_type": "integer" },
                { "key": "ssd", "label": "SSD?", "response_type": "boolean" },
                { "key": "note", "label": "Note", "response_type": "text" }] }
        ] })
    }

    fn parts<'a>(fields: &'a [String], rows: &'a [Vec<String>]) -> Parts<'a> {
        Parts { fields, rows, files: Vec::new() }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_forms_fields_are_read_by_their_types_and_tables_row_by_row() {
        let fields = strings(&["nodes=3", "start=2026-03-01", "canary=yes"]);
        let rows = vec![strings(&["disks", "size=100,ssd=no,note=a=b"]), strings(&[r#"disks={"size": 200}"#])];
        let mut given = parts(&fields, &rows);
        given.files = vec![("plan".into(), json!({ "file_id": "f" }))];
        assert_eq!(
            build_value(&rich_form(), None, &given).unwrap(),
            json!({ "nodes": 3, "start": "2026-03-01", "canary": true, "plan": { "file_id": "f" },
                    "disks": [{ "size": 100, "ssd": false, "note": "a=b" }, { "size": 200 }] })
        );
        // On top of a JSON object, --field wins.
        let fields = strings(&["nodes=4"]);
        assert_eq!(
            build_value(&rich_form(), Some(r#"{"nodes": "2", "start": "2026-01-01"}"#), &parts(&fields, &[])).unwrap(),
            json!({ "nodes": 4, "start": "2026-01-01" })
        );
    }

    #[test]
    fn what_the_command_line_gets_wrong_is_a_usage_error() {
        let form = rich_form();
        for (fields, rows, says) in [
            (strings(&["nodes"]), vec![], "KEY=VALUE"),
            (strings(&["size=3"]), vec![], "no field \"size\""),
            (strings(&["nodes=many"]), vec![], "field nodes is a number"),
            (strings(&["plan=x.pdf"]), vec![], "--file plan=@PATH"),
            (vec![], vec![strings(&["nodes", "size=1"])], "not a table"),
            (vec![], vec![strings(&["disks", "weight=1"])], "no column \"weight\""),
            (vec![], vec![strings(&["disks", "size"])], "COLUMN=VALUE"),
            (vec![], vec![strings(&["disks=size=1"])], "KEY COLUMN=VALUE"),
        ] {
            match build_value(&form, None, &parts(&fields, &rows)) {
                Err(CliError::Usage(message)) => assert!(message.contains(says), "{says}: {message}"),
                other => panic!("{fields:?} {rows:?}: {other:?}"),
            }
        }
        let text = json!({ "response_type": "text" });
        assert!(matches!(build_value(&text, None, &parts(&strings(&["a=b"]), &[])), Err(CliError::Usage(_))));
    }

    #[test]
    fn row_values_are_grouped_by_the_key_before_them() {
        let given = strings(&["disks", "size=1", r#"disks={"size": 2}"#, "size=3,ssd=no", r#"{"size": 4}"#, "disks"]);
        assert_eq!(
            group_rows(&given),
            [
                strings(&["disks", "size=1"]),
                strings(&[r#"disks={"size": 2}"#]),
                strings(&["size=3,ssd=no"]),
                strings(&[r#"{"size": 4}"#]),
                strings(&["disks"])
            ]
        );
    }

    #[test]
    fn a_table_question_takes_rows_and_a_number_question_a_number() {
        let table = json!({ "response_type": "table", "columns": [
            { "key": "item", "label": "Item", "response_type": "text" },
            { "key": "qty", "label": "Qty", "response_type": "number" }] });
        let rows = vec![strings(&["item=disk,qty=2.5"]), strings(&[r#"{"item": "cpu"}"#])];
        assert_eq!(
            build_value(&table, Some(r#"[{"item": "ram"}]"#), &parts(&[], &rows)).unwrap(),
            json!([{ "item": "ram" }, { "item": "disk", "qty": 2.5 }, { "item": "cpu" }])
        );
        assert_eq!(parse_value("rating", &[], "4").unwrap(), json!(4));
        assert!(matches!(parse_value("integer", &[], "four"), Err(CliError::Usage(_))));
        assert_eq!(parse_value("date", &[], "2026-03-01").unwrap(), json!("2026-03-01"), "the server judges dates");
    }

    #[test]
    fn a_file_argument_names_its_field_path_and_media_type() {
        assert_eq!(
            parse_file_arg("plan=@docs/plan.pdf").unwrap(),
            FileArg { key: "plan".into(), path: "docs/plan.pdf".into(), media_type: "application/pdf".into() }
        );
        assert_eq!(parse_file_arg("plan=@plan.bin;type=image/png").unwrap().media_type, "image/png");
        assert_eq!(parse_file_arg("blob=@data").unwrap().media_type, "application/octet-stream");
        for bad in ["plan=plan.pdf", "plan", "=@x", "plan=@", "@", " =@x"] {
            assert!(matches!(parse_file_arg(bad), Err(CliError::Usage(_))), "{bad}");
        }
        let own = parse_file_arg("@scans/id.png").unwrap();
        assert_eq!((own.key.as_str(), own.media_type.as_str()), ("", "image/png"), "a file question's own file");
    }

    #[test]
    fn a_file_question_is_answered_with_its_one_file() {
        let question = json!({ "response_type": "file" });
        let uploaded = json!({ "file_id": "f", "name": "id.png" });
        let own = Parts { fields: &[], rows: &[], files: vec![(String::new(), uploaded.clone())] };
        assert_eq!(build_value(&question, None, &own).unwrap(), uploaded);
        let keyed = Parts { fields: &[], rows: &[], files: vec![("scan".into(), uploaded.clone())] };
        let none = Parts::default();
        for (raw, given) in [(None, &keyed), (Some("id.png"), &own), (Some("id.png"), &none), (None, &none)] {
            match build_value(&question, raw, given) {
                Err(CliError::Usage(message)) => assert!(message.contains("--file @PATH"), "{message}"),
                other => panic!("{raw:?}: {other:?}"),
            }
        }
        let form = Parts { fields: &[], rows: &[], files: vec![(String::new(), uploaded)] };
        match build_value(&rich_form(), None, &form) {
            Err(CliError::Usage(message)) => assert!(message.contains("--file KEY=@PATH"), "{message}"),
            other => panic!("{other:?}"),
        }
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
