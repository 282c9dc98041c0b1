//! `holdpoint questions`, `show`, `answer`, `approve` and `reject`: answering from a terminal.
//!
//! They speak the REST API like the headless commands ([`crate::cli::client`]); with the embedded engine they act as the
//! person at the terminal ([`LocalIdentity::Person`]). A value is parsed by the question's response type before
//! anything is sent, so a value that cannot be meant is a usage error (exit 2) and the server is not asked; what the
//! server refuses (a conflict, a forbidden role, an invalid value) exits 1 with the error's code. A form may be
//! answered field by field (`--field KEY=VALUE`, each read by its field's type), with files uploaded first
//! (`--file KEY=@PATH`, `POST /files`) and tables row by row (`--row KEY COLUMN=VALUE,...`); a question that is
//! itself a file, with `--file @PATH`.

mod render;
mod values;

use app::types::AnswerBody;
use chrono::Utc;
use serde_json::Value;

use crate::cli::client::{CliError, CliResult, Connection, LocalIdentity, ServerArgs};
use crate::cli::headless::OutputFormat;
use render::{describe, outcome_line, table};
pub(crate) use values::parse_number;
use values::{FileArg, Parts, build_value, group_rows, parse_file_arg};

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
