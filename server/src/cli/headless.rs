//! `holdpoint ask`, `run` and `resume`: Holdpoint for shell scripts, CI jobs and cron.
//!
//! For them the process exiting *is* the pause: it saves everything, writes `.holdpoint/pause.json`, prints the
//! same JSON and exits 10; a later process picks up where it stopped. Exit codes: 0 completed / answered /
//! approved; 1 error; 2 usage; 10 paused; 11 rejected; 12 expired or cancelled.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use app::types::{
    AnswerBody, ApprovalAction, FieldRules, FieldWidget, NewQuestion, QuestionKind, QuestionOption, ResponseType,
    Urgency,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use std::sync::Arc;

use crate::cli::client::{CliError, CliResult, Connection, LOCAL_DIR, ServerArgs};
use crate::runtime::Runtime;
use crate::runtime::remote::RemoteRun;

pub const EXIT_PAUSED: u8 = 10;
pub const EXIT_REJECTED: u8 = 11;
pub const EXIT_EXPIRED: u8 = 12;
const PAUSE_FILE: &str = "pause.json";
/// The folder of `.holdpoint/` that holds the questions `ask --no-wait` left waiting, one file each.
const WAITING_ASKS_DIR: &str = "asks";

/// `--type`: a question's response type, by the API's name (`multi-choice` and `error-recovery` work too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AskType(pub ResponseType);

impl clap::ValueEnum for AskType {
    fn value_variants<'a>() -> &'a [Self] {
        static ASKABLE: std::sync::LazyLock<Vec<AskType>> =
            std::sync::LazyLock::new(|| ResponseType::ALL.iter().copied().map(AskType).collect());
        &ASKABLE
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let value = clap::builder::PossibleValue::new(self.0.as_str());
        Some(match self.0 {
            ResponseType::MultiChoice => value.alias("multi-choice").help("Several options (--min-items, --max-items)"),
            ResponseType::ErrorRecovery => value
                .alias("error-recovery")
                .help("Answered with retry, skip, abort or one of the options; `--body` carries the error"),
            ResponseType::Integer | ResponseType::Number => value.help("Within --min, --max and --step (--slider)"),
            ResponseType::Rating => value.help("1 to --max stars (3..=10, default 5)"),
            ResponseType::Date => value.help("YYYY-MM-DD"),
            ResponseType::Datetime => value.help("RFC 3339 with an offset"),
            ResponseType::Time => value.help("HH:MM"),
            ResponseType::Table => value.help("Rows of --columns (--min-rows, --max-rows)"),
            ResponseType::File => value.help("An upload (--accept, --max-bytes), written to --save once answered"),
            ResponseType::Form => value.help("The fields of --fields, or of --schema"),
            _ => value,
        })
    }
}

/// `holdpoint ask`.
#[derive(Debug, clap::Args)]
pub struct AskArgs {
    /// The question, 1..=300 characters.
    pub title: String,
    /// The answer's type (default `text`; `form` with `--schema`).
    #[arg(long = "type", value_enum)]
    pub response_type: Option<AskType>,
    /// An option of a choice: `VALUE=LABEL` (repeat for each).
    #[arg(long = "option", value_name = "VALUE=LABEL")]
    pub options: Vec<String>,
    /// The fields of a form, as JSON: `[{"key", "label", "response_type", "options"?, "required"?}]`.
    #[arg(long, value_name = "JSON", conflicts_with = "schema")]
    pub fields: Option<String>,
    /// A form as a JSON Schema object (MCP elicitation's: string, number, integer, boolean, enum, arrays of those),
    /// instead of `--fields`.
    #[arg(long, value_name = "JSON")]
    pub schema: Option<String>,
    /// The least value of an `integer` or `number`.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub min: Option<serde_json::Number>,
    /// The greatest value of an `integer` or `number`; a `rating`'s number of stars.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max: Option<serde_json::Number>,
    /// The increment of an `integer` or `number`, from `--min` (or 0).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub step: Option<serde_json::Number>,
    /// Show an `integer` or `number` with both bounds as a slider.
    #[arg(long)]
    pub slider: bool,
    /// The fewest options of a `multi_choice`.
    #[arg(long, value_name = "N")]
    pub min_items: Option<u32>,
    /// The most options of a `multi_choice`.
    #[arg(long, value_name = "N")]
    pub max_items: Option<u32>,
    /// A `table`'s columns, as JSON: `[{"key", "label", "response_type", "options"?, "required"?}]`.
    #[arg(long, value_name = "JSON")]
    pub columns: Option<String>,
    /// The fewest rows of a `table`.
    #[arg(long, value_name = "N")]
    pub min_rows: Option<u32>,
    /// The most rows of a `table` (at most 200).
    #[arg(long, value_name = "N")]
    pub max_rows: Option<u32>,
    /// A media type a `file` may have (`application/pdf`, or `image/*`); repeat for each. Any when absent.
    #[arg(long, value_name = "MEDIA/TYPE")]
    pub accept: Vec<String>,
    /// The largest `file`, in bytes (at most the server's upload limit).
    #[arg(long, value_name = "N")]
    pub max_bytes: Option<u64>,
    /// For a `file`: where to write the file once answered (`--output text` then prints this path).
    #[arg(long, value_name = "PATH")]
    pub save: Option<std::path::PathBuf>,
    /// Details, in Markdown.
    #[arg(long)]
    pub body: Option<String>,
    #[arg(long)]
    pub project: Option<String>,
    /// How long people have, e.g. `15m`, `2h`, `90s`.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// The answer applied when the timeout passes (`true`/`false` for approvals and booleans, an option value,
    /// values separated by commas for multi-choice, a number for numbers and ratings, JSON for forms and tables).
    #[arg(long = "default", value_name = "VALUE", allow_negative_numbers = true)]
    pub default_value: Option<String>,
    /// `low`, `normal`, `high` or `critical`.
    #[arg(long)]
    pub urgency: Option<String>,
    /// For approvals: the action's tool name (default `ci-gate`).
    #[arg(long)]
    pub tool: Option<String>,
    /// For approvals: the action's arguments as JSON (default `{"title": TITLE}`).
    #[arg(long, value_name = "JSON")]
    pub arguments: Option<String>,
    /// For approvals: how many distinct people must approve (1..=10); the first rejection rejects.
    #[arg(long = "approvals", value_name = "N", value_parser = clap::value_parser!(u8).range(1..=10))]
    pub required_approvals: Option<u8>,
    /// Create the question and exit 10 without waiting; run the same command again later to get the answer.
    #[arg(long)]
    pub no_wait: bool,
    /// `json`: the resolved question (or the pause manifest, or the error) as JSON; `text`: only the answer's
    /// value, for `$(holdpoint ask ...)`.
    #[arg(long, value_enum, default_value = "json")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// How a command reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people: progress on stderr, the result on stdout.
    Text,
    /// The outcome as one JSON object on stdout, an error included.
    Json,
}

/// `holdpoint run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The task, as the run's first user message.
    pub task: String,
    /// The agent's name. With the embedded engine, `.holdpoint/agents/NAME.yaml` (or `.json`) defines it if the
    /// engine does not know it yet.
    #[arg(long)]
    pub agent: String,
    /// Exit 10 with a pause manifest when the run waits for an approval or an answer, instead of waiting.
    #[arg(long)]
    pub pause_on_approval: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[arg(long)]
    pub project: Option<String>,
    /// The step budget of each segment.
    #[arg(long)]
    pub max_steps: Option<u32>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `holdpoint resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The run's id.
    pub run: String,
    /// A message for the agent's next segment.
    pub prompt: Option<String>,
    /// Approve this pending tool call (its id or call id; repeat for each).
    #[arg(long = "approve", value_name = "ID")]
    pub approve: Vec<String>,
    /// Reject this pending tool call.
    #[arg(long = "reject", value_name = "ID")]
    pub reject: Vec<String>,
    /// Approve every pending tool call.
    #[arg(long, conflicts_with_all = ["approve", "reject", "reject_all"])]
    pub approve_all: bool,
    /// Reject every pending tool call.
    #[arg(long, conflicts_with_all = ["approve", "reject", "approve_all"])]
    pub reject_all: bool,
    /// The reason given with rejections (and approvals).
    #[arg(long)]
    pub comment: Option<String>,
    /// Exit 10 again if the run waits for a person.
    #[arg(long)]
    pub pause_on_approval: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub server: ServerArgs,
}

fn pause_path() -> PathBuf {
    Path::new(LOCAL_DIR).join(PAUSE_FILE)
}

/// Where `ask --no-wait` notes the question it left waiting, under the question's fingerprint: several gates may wait
/// in one directory, and each finds its own question again (`pause.json` holds only the latest pause).
fn waiting_ask_path(fingerprint: &str) -> PathBuf {
    Path::new(LOCAL_DIR).join(WAITING_ASKS_DIR).join(format!("{fingerprint}.json"))
}

fn write_json(path: &Path, value: &Value) -> CliResult<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| CliError::Failed(format!("cannot create {}/: {e}", dir.display())))?;
    }
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    std::fs::write(path, text + "\n").map_err(|e| CliError::Failed(format!("cannot write {}: {e}", path.display())))
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn read_pause() -> Option<Value> {
    read_json(&pause_path())
}

fn clear_pause_if(matches: impl Fn(&Value) -> bool) {
    if read_pause().is_some_and(|p| matches(&p)) {
        let _ = std::fs::remove_file(pause_path());
    }
}

fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

fn parse_default(kind: ResponseType, raw: &str) -> CliResult<Value> {
    Ok(match kind {
        ResponseType::Boolean | ResponseType::Approval => match raw {
            "true" | "yes" | "approve" => Value::Bool(true),
            "false" | "no" | "reject" => Value::Bool(false),
            _ => return Err(CliError::Usage(format!("--default must be true or false, not {raw:?}"))),
        },
        ResponseType::MultiChoice => Value::Array(raw.split(',').map(|v| Value::String(v.trim().to_owned())).collect()),
        ResponseType::Form | ResponseType::Table => {
            serde_json::from_str(raw).map_err(|e| CliError::Usage(format!("--default is not JSON: {e}")))?
        }
        numeric if numeric.is_numeric() => Value::Number(
            crate::cli::responder::parse_number("the default", raw)
                .map_err(|_| CliError::Usage(format!("--default must be a number, not {raw:?}")))?,
        ),
        _ => Value::String(raw.to_owned()),
    })
}

/// A JSON flag's value, or a usage error naming the flag.
fn json_arg<T: serde::de::DeserializeOwned>(flag: &str, raw: &Option<String>) -> CliResult<Option<T>> {
    raw.as_deref()
        .map(|raw| serde_json::from_str(raw).map_err(|e| CliError::Usage(format!("{flag} is not valid: {e}"))))
        .transpose()
}

/// The `POST /questions` body of an `ask`.
fn question_body(args: &AskArgs) -> CliResult<NewQuestion> {
    let response_type = match (args.response_type, &args.schema) {
        (Some(AskType(response_type)), _) => response_type,
        (None, Some(_)) => ResponseType::Form,
        (None, None) => ResponseType::Text,
    };
    let kind = match response_type {
        ResponseType::Approval => Some(QuestionKind::Approval),
        ResponseType::ErrorRecovery => Some(QuestionKind::ErrorRecovery),
        _ => None,
    };
    let action = if response_type == ResponseType::Approval {
        let arguments = match &args.arguments {
            Some(raw) => {
                serde_json::from_str(raw).map_err(|e| CliError::Usage(format!("--arguments is not JSON: {e}")))?
            }
            None => json!({ "title": args.title }),
        };
        let tool_name = args.tool.clone().unwrap_or_else(|| "ci-gate".into());
        Some(ApprovalAction { tool_name, arguments })
    } else {
        None
    };
    let options = args
        .options
        .iter()
        .map(|option| match option.split_once('=') {
            Some((value, label)) => Ok(QuestionOption { value: value.into(), label: label.into(), description: None }),
            None => Err(CliError::Usage(format!("--option must be VALUE=LABEL, not {option:?}"))),
        })
        .collect::<CliResult<_>>()?;
    let fields = json_arg("--fields", &args.fields)?.unwrap_or_default();
    let rules = FieldRules {
        min: args.min.clone(),
        max: args.max.clone(),
        step: args.step.clone(),
        widget: args.slider.then_some(FieldWidget::Slider),
        min_items: args.min_items,
        max_items: args.max_items,
        columns: json_arg("--columns", &args.columns)?.unwrap_or_default(),
        min_rows: args.min_rows,
        max_rows: args.max_rows,
        accept: args.accept.clone(),
        max_bytes: args.max_bytes,
    };
    if args.save.is_some() && response_type != ResponseType::File {
        return Err(CliError::Usage(format!("--save is for a file question (--type file), not {response_type}")));
    }
    let urgency = match &args.urgency {
        Some(raw) => Some(raw.parse::<Urgency>().map_err(|_| {
            let known: Vec<&str> = Urgency::ALL.iter().map(|u| u.as_str()).collect();
            CliError::Usage(format!("--urgency must be one of {}, not {raw:?}", known.join(", ")))
        })?),
        None => None,
    };
    let default_response = match &args.default_value {
        Some(raw) => {
            Some(AnswerBody { value: parse_default(response_type, raw)?, comment: None, edited_arguments: None })
        }
        None => None,
    };
    Ok(NewQuestion {
        kind,
        response_type: Some(response_type),
        title: args.title.clone(),
        body: args.body.clone().unwrap_or_default(),
        options,
        fields,
        response_schema: json_arg("--schema", &args.schema)?,
        rules,
        action,
        project: args.project.clone(),
        urgency,
        timeout_seconds: args.timeout.map(|timeout| i64::try_from(timeout.as_secs().max(1)).unwrap_or(i64::MAX)),
        default_response,
        required_approvals: args.required_approvals,
        ..NewQuestion::default()
    })
}

/// The exit code a resolved question stands for.
fn question_exit(question: &Value) -> u8 {
    match question["status"].as_str() {
        Some("answered" | "defaulted") if question["response_type"] == "approval" => {
            if question["response"]["value"] == Value::Bool(true) { 0 } else { EXIT_REJECTED }
        }
        Some("answered" | "defaulted") => 0,
        _ => EXIT_EXPIRED,
    }
}

/// `holdpoint ask`: asks (or, when an earlier `--no-wait` of the same question left it waiting, finds it again) and
/// waits for the answer.
pub async fn ask(args: AskArgs) -> CliResult<u8> {
    let body = serde_json::to_value(question_body(&args)?).map_err(|e| CliError::Failed(e.to_string()))?;
    let fingerprint = hex::encode(Sha256::digest(body.to_string()));
    let connection = Connection::open(&args.server).await?;
    let waiting = waiting_ask_path(&fingerprint);
    let earlier = read_json(&waiting)
        .or_else(|| read_pause().filter(|p| p["question_fingerprint"] == fingerprint.as_str()))
        .and_then(|p| p["question_ids"][0].as_str().map(str::to_owned));
    let found = match earlier {
        // A note of a question this server does not know (another server, a new database, another agent's token)
        // is stale: the command asks anew rather than failing until someone deletes the note.
        Some(id) => match connection.get(&format!("/questions/{id}")).await {
            Err(CliError::Api { status: 404, .. }) => None,
            found => Some(found?),
        },
        None => None,
    };
    let question = match found {
        Some(question) => question,
        None => connection.post("/questions", &body).await?,
    };
    let id = question["id"].as_str().unwrap_or_default().to_owned();
    if question["status"] == "pending" && args.no_wait {
        let approval = args.response_type == Some(AskType(ResponseType::Approval));
        let pause_type = if approval { "tool_approval_required" } else { "input_required" };
        let manifest = json!({
            "outcome": "paused",
            "question_fingerprint": fingerprint,
            "pause_reason": { "type": pause_type, "question_ids": [id] },
            "question_ids": [id],
            "question_url": connection.ui_link(&format!("/questions/{id}")),
            "resume_hint": "run the same `holdpoint ask` command again to wait for the answer",
        });
        write_json(&waiting, &manifest)?;
        write_json(&pause_path(), &manifest)?;
        print_json(&manifest);
        return Ok(EXIT_PAUSED);
    }
    let resolved = wait_for_answer(&connection, question).await?;
    let _ = std::fs::remove_file(&waiting);
    clear_pause_if(|p| p["question_fingerprint"] == fingerprint.as_str());
    let value = &resolved["response"]["value"];
    let saved = match (&args.save, value["file_id"].as_str()) {
        (Some(path), Some(file_id)) => Some(save_file(&connection, file_id, path).await?),
        _ => None,
    };
    match args.output {
        OutputFormat::Json => print_json(&resolved),
        OutputFormat::Text => match (saved, value) {
            (Some(path), _) => println!("{}", path.display()),
            (None, Value::String(text)) => println!("{text}"),
            (None, Value::Null) => {}
            (None, other) => println!("{other}"),
        },
    }
    Ok(question_exit(&resolved))
}

/// Writes the answer's file `file_id` to `path` whole or not at all (through a temporary file beside it, renamed).
async fn save_file(connection: &Connection, file_id: &str, path: &std::path::Path) -> CliResult<std::path::PathBuf> {
    let bytes = connection.download(file_id).await?;
    let cannot = |err: std::io::Error| CliError::Failed(format!("cannot write {}: {err}", path.display()));
    let mut partial = path.as_os_str().to_owned();
    partial.push(".part");
    tokio::fs::write(&partial, bytes).await.map_err(cannot)?;
    tokio::fs::rename(&partial, path).await.map_err(cannot)?;
    Ok(path.to_owned())
}

/// Long-polls the question until it is resolved, with a progress line on a terminal's stderr.
async fn wait_for_answer(connection: &Connection, mut question: Value) -> CliResult<Value> {
    let id = question["id"].as_str().unwrap_or_default().to_owned();
    let interactive = std::io::stderr().is_terminal();
    let deadline = question["timeout_at"].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    // Already resolved when asked (a grant approved it): nothing to wait for, nothing to say.
    if question["status"] == "pending" {
        eprintln!("Waiting for an answer: {}", connection.ui_link(&format!("/questions/{id}")));
    }
    let spinner = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let mut tick = 0;
    while question["status"] == "pending" {
        if interactive {
            let left = deadline.map_or_else(
                || "no deadline".to_owned(),
                |d| {
                    let secs = (d.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds().max(0);
                    format!("deadline in {}m{:02}s", secs / 60, secs % 60)
                },
            );
            eprint!("\r{} waiting ({left})   ", spinner[tick % spinner.len()]);
            tick += 1;
        }
        // Short polls on a terminal keep the countdown moving; elsewhere one long poll at a time.
        let wait = if interactive { 1 } else { 30 };
        question = connection.get(&format!("/questions/{id}/wait?timeout_seconds={wait}")).await?;
    }
    if interactive {
        eprintln!("\r{}\r", " ".repeat(40));
    }
    Ok(question)
}

/// Finds an agent by name; with the embedded engine, defines it from `.holdpoint/agents/NAME.{yaml,json}` first if
/// needed.
async fn agent_id(connection: &Connection, name: &str) -> CliResult<String> {
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/agents?limit=200&cursor={c}"),
            None => "/agents?limit=200".to_owned(),
        };
        let page = connection.get(&path).await?;
        if let Some(agent) = page["items"].as_array().into_iter().flatten().find(|a| a["name"] == name) {
            return Ok(agent["id"].as_str().unwrap_or_default().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    if connection.is_embedded() {
        for extension in ["yaml", "yml", "json"] {
            let file = Path::new(LOCAL_DIR).join("agents").join(format!("{name}.{extension}"));
            if let Ok(text) = std::fs::read_to_string(&file) {
                let mut spec: Value = if extension == "json" {
                    serde_json::from_str(&text).map_err(|e| CliError::Failed(format!("{}: {e}", file.display())))?
                } else {
                    serde_norway::from_str(&text).map_err(|e| CliError::Failed(format!("{}: {e}", file.display())))?
                };
                spec["name"] = json!(name);
                let created = connection.post("/agents", &spec).await?;
                return Ok(created["id"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    Err(CliError::Failed(format!(
        "there is no agent named {name:?} (define it with POST /api/v1/agents{})",
        if connection.is_embedded() { format!(" or in {LOCAL_DIR}/agents/{name}.yaml") } else { String::new() }
    )))
}

/// `holdpoint run`.
pub async fn run(args: RunArgs) -> CliResult<u8> {
    let connection = Connection::open(&args.server).await?;
    let agent_id = agent_id(&connection, &args.agent).await?;
    let mut body = json!({ "agent_id": agent_id, "input": args.task });
    if !connection.is_embedded() {
        // The agent loop runs here, so its tools act on this machine; the server keeps the state.
        body["executor"] = json!("client");
    }
    if args.pause_on_approval {
        body["pause_on_input"] = json!(true);
    }
    if let Some(project) = &args.project {
        body["project"] = json!(project);
    }
    if let Some(steps) = args.max_steps {
        body["max_steps"] = json!(steps);
    }
    let run = connection.post("/runs", &body).await?;
    let run_id = run["id"].as_str().unwrap_or_default().to_owned();
    if args.output == OutputFormat::Text {
        eprintln!("Run {run_id} of {} started.", args.agent);
    }
    follow(&connection, &run_id, args.pause_on_approval, args.output).await
}

/// `holdpoint resume`.
pub async fn resume(args: ResumeArgs) -> CliResult<u8> {
    let connection = Connection::open(&args.server).await?;
    let run_id = args.run.trim().to_owned();
    let run = connection.get(&format!("/runs/{run_id}")).await?;
    let status = run["status"].as_str().unwrap_or_default();
    let decides = args.approve_all || args.reject_all || !args.approve.is_empty() || !args.reject.is_empty();
    if matches!(status, "paused" | "waiting_for_input" | "waiting_for_approval") {
        let pending = connection.get(&format!("/runs/{run_id}/tool-calls?status=pending_approval&limit=200")).await?;
        let pending = pending["items"].as_array().cloned().unwrap_or_default();
        let mut decisions = Vec::new();
        for call in &pending {
            let id = call["id"].as_str().unwrap_or_default();
            let call_id = call["call_id"].as_str().unwrap_or_default();
            let named = |list: &[String]| list.iter().any(|x| x == id || x == call_id);
            let approved = if args.approve_all || named(&args.approve) {
                Some(true)
            } else if args.reject_all || named(&args.reject) {
                Some(false)
            } else {
                None
            };
            if let Some(approved) = approved {
                let mut decision = json!({ "tool_call_id": id, "approved": approved });
                if let Some(comment) = &args.comment {
                    decision["comment"] = json!(comment);
                }
                decisions.push(decision);
            }
        }
        for named in args.approve.iter().chain(&args.reject) {
            if !pending.iter().any(|c| c["id"] == named.as_str() || c["call_id"] == named.as_str()) {
                return Err(CliError::Failed(format!(
                    "{named} is not a tool call of run {run_id} waiting for approval"
                )));
            }
        }
        let mut body = json!({ "tool_decisions": decisions });
        if let Some(prompt) = &args.prompt {
            body["prompt"] = json!(prompt);
        }
        connection.post(&format!("/runs/{run_id}/resume"), &body).await?;
    } else if (decides || args.prompt.is_some()) && matches!(status, "completed" | "failed" | "cancelled") {
        return Err(CliError::Failed(format!("run {run_id} is {status}; there is nothing to resume")));
    }
    // Otherwise the run is queued or running (people answered in the web UI), or over: follow it to its outcome.
    follow(&connection, &run_id, args.pause_on_approval, args.output).await
}

/// Executes a client-executed run in this process: the worker protocol against the server, the runtime's
/// settings from the environment (`HOLDPOINT_SHELL`, `HOLDPOINT_SCRIPTS_DIR` or `.holdpoint/scripts`, ...).
fn local_executor(connection: &Connection, run_id: &str) -> CliResult<(Arc<RemoteRun>, Arc<Runtime>)> {
    let config = crate::cli::client::environment_config()?;
    let id = uuid::Uuid::parse_str(run_id).map_err(|_| CliError::Failed(format!("{run_id} is not a run id")))?;
    let remote = Arc::new(RemoteRun::new(&connection.base, connection.token(), id, config.runtime.run_lease_seconds));
    let scripts_dir = config.runtime.scripts_dir.clone().unwrap_or_else(|| Path::new(LOCAL_DIR).join("scripts"));
    let runtime = Arc::new(Runtime {
        ledger: Arc::clone(&remote) as Arc<dyn crate::runtime::ledger::RunLedger>,
        metrics: Arc::new(crate::metrics::Metrics::new()),
        http: crate::runtime::tools::http_client(&config.runtime),
        config: config.runtime,
        scripts_dir,
        instance: uuid::Uuid::now_v7(),
    });
    Ok((remote, runtime))
}

/// Follows a run until it ends (exit 0, 1 or 12) or, with `pause_on_person`, waits for one (exit 10). A run this
/// client executes is claimed and executed here whenever it is queued.
async fn follow(connection: &Connection, run_id: &str, pause_on_person: bool, output: OutputFormat) -> CliResult<u8> {
    let mut shown_seq = 0u64;
    let mut told_waiting = false;
    let mut executor: Option<(Arc<RemoteRun>, Arc<Runtime>)> = None;
    loop {
        let run = connection.get(&format!("/runs/{run_id}")).await?;
        if run["executor"] == "client" && run["status"] == "queued" {
            if executor.is_none() {
                executor = Some(local_executor(connection, run_id)?);
            }
            if let Some((remote, runtime)) = &executor {
                let claimed = remote
                    .claim(runtime.instance)
                    .await
                    .map_err(|e| CliError::Failed(format!("cannot claim run {run_id}: {e}")))?;
                if let Some(claimed) = claimed {
                    crate::runtime::executor::execute(runtime, claimed).await;
                    continue;
                }
            }
        }
        if output == OutputFormat::Text {
            shown_seq = show_progress(connection, run_id, shown_seq).await?;
        }
        let status = run["status"].as_str().unwrap_or_default().to_owned();
        match status.as_str() {
            "completed" => {
                clear_pause_if(|p| p["run_id"] == run_id);
                let completion = json!({
                    "outcome": "completed",
                    "run_id": run_id,
                    "final_message": run["result"],
                    "steps_taken": run["step_count"],
                });
                match output {
                    OutputFormat::Json => print_json(&completion),
                    OutputFormat::Text => println!("{}", run["result"].as_str().unwrap_or_default()),
                }
                return Ok(0);
            }
            "failed" => {
                let message = run["error_message"].as_str().unwrap_or("the run failed").to_owned();
                let line = format!("run {run_id} failed: {message}");
                if output == OutputFormat::Json {
                    print_json(&json!({ "outcome": "failed", "run_id": run_id, "error_message": message }));
                    return Err(CliError::Reported(line));
                }
                return Err(CliError::Failed(line));
            }
            "cancelled" => {
                if output == OutputFormat::Json {
                    print_json(&json!({ "outcome": "cancelled", "run_id": run_id }));
                } else {
                    eprintln!("Run {run_id} was cancelled.");
                }
                return Ok(EXIT_EXPIRED);
            }
            "waiting_for_approval" | "waiting_for_input" | "paused" if pause_on_person || status == "paused" => {
                let manifest = pause_manifest(connection, &run).await?;
                write_json(&pause_path(), &manifest)?;
                print_json(&manifest);
                return Ok(EXIT_PAUSED);
            }
            "waiting_for_approval" | "waiting_for_input" if !told_waiting => {
                told_waiting = true;
                eprintln!("Waiting for a person: {}", connection.ui_link("/inbox"));
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Prints the messages stored since `after` to stderr; returns the newest seq shown.
async fn show_progress(connection: &Connection, run_id: &str, after: u64) -> CliResult<u64> {
    let mut last = after;
    let page = connection.get(&format!("/runs/{run_id}/messages?limit=200&cursor={after}")).await?;
    for message in page["items"].as_array().into_iter().flatten() {
        last = message["seq"].as_u64().unwrap_or(last);
        let step = message["step"].as_u64().unwrap_or(0);
        let content = &message["content"];
        match message["role"].as_str() {
            Some("assistant") => {
                if let Some(text) = content["content"].as_str().filter(|t| !t.is_empty()) {
                    eprintln!("[step {step}] {text}");
                }
                for call in content["tool_calls"].as_array().into_iter().flatten() {
                    let name = call["function"]["name"].as_str().unwrap_or("?");
                    let arguments = call["function"]["arguments"].as_str().unwrap_or("");
                    eprintln!("[step {step}] → {name} {arguments}");
                }
            }
            Some("tool") => {
                let text = content["content"].as_str().unwrap_or("");
                let clipped: String = text.chars().take(300).collect();
                eprintln!("[step {step}] ← {clipped}");
            }
            _ => {}
        }
    }
    Ok(last)
}

/// The pause manifest (docs/cli.md) of a run waiting for a person.
async fn pause_manifest(connection: &Connection, run: &Value) -> CliResult<Value> {
    let run_id = run["id"].as_str().unwrap_or_default();
    let pending = connection.get(&format!("/runs/{run_id}/tool-calls?status=pending_approval&limit=200")).await?;
    let calls: Vec<Value> = pending["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({ "id": c["id"], "call_id": c["call_id"], "tool_name": c["tool_name"], "input": c["input"],
            "question_id": c["question_id"] })
        })
        .collect();
    let mut last_turn: Option<Value> = None;
    let mut cursor = 0;
    loop {
        let page = connection.get(&format!("/runs/{run_id}/messages?limit=200&cursor={cursor}")).await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if let Some(turn) = items.iter().rev().find(|m| m["role"] == "assistant") {
            last_turn = Some(turn.clone());
        }
        match page["next_cursor"].as_str().and_then(|c| c.parse().ok()) {
            Some(next) => cursor = next,
            None => break,
        }
    }
    let last_turn = last_turn.as_ref();
    let agent_message = last_turn.and_then(|m| m["content"]["content"].as_str().map(str::to_owned));
    // A run that paused on a final answer asking something (`pause_on_input`), not on its step budget.
    let asked_in_text = last_turn.is_some_and(|m| m["content"]["tool_calls"].is_null())
        && agent_message.as_deref().is_some_and(crate::runtime::executor::asks_for_input);
    let (kind, hint) = match run["status"].as_str() {
        Some("waiting_for_approval") => {
            let ids: Vec<String> =
                calls.iter().filter_map(|c| c["id"].as_str()).map(|id| format!("--approve {id}")).collect();
            ("tool_approval_required", format!("holdpoint resume {run_id} {}", ids.join(" ")))
        }
        Some("paused") if asked_in_text => ("input_required", format!("holdpoint resume {run_id} \"<your answer>\"")),
        Some("paused") => ("step_budget_spent", format!("holdpoint resume {run_id} \"go on\"")),
        _ => ("input_required", format!("answer in {}, then: holdpoint resume {run_id}", connection.ui_link("/inbox"))),
    };
    let mut reason = json!({ "type": kind, "question_ids": run["pending_question_ids"] });
    if !calls.is_empty() {
        reason["pending_tool_calls"] = Value::Array(calls);
    }
    let mut manifest = json!({ "outcome": "paused", "run_id": run_id, "pause_reason": reason, "resume_hint": hint });
    if let Some(message) = agent_message {
        manifest["agent_message"] = json!(message);
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Ask {
        #[command(flatten)]
        args: AskArgs,
    }

    /// `holdpoint ask` with these arguments after the title, as clap reads them.
    fn parsed(arguments: &[&str]) -> Result<AskArgs, clap::Error> {
        <Ask as clap::Parser>::try_parse_from(["ask", "Apply?"].iter().chain(arguments)).map(|ask| ask.args)
    }

    fn args(kind: &str) -> AskArgs {
        parsed(&["--type", kind]).unwrap()
    }

    #[test]
    fn approvals_asks_for_that_many_people() {
        let mut gate = args("approval");
        gate.required_approvals = Some(2);
        assert_eq!(question_body(&gate).unwrap().required_approvals, Some(2));
        assert_eq!(question_body(&args("approval")).unwrap().required_approvals, None);
        let parse = |n: &str| parsed(&["--type", "approval", "--approvals", n]);
        assert_eq!(parse("3").unwrap().required_approvals, Some(3));
        assert!(parse("11").is_err(), "at most 10 people");
    }

    #[test]
    fn an_approval_gate_carries_an_action_and_a_typed_default() {
        let mut gate = args("approval");
        gate.default_value = Some("false".into());
        gate.timeout = Some(Duration::from_secs(900));
        let body = serde_json::to_value(question_body(&gate).unwrap()).unwrap();
        assert_eq!(body["kind"], "approval");
        assert_eq!(body["action"]["tool_name"], "ci-gate");
        assert_eq!(body["default_response"], json!({ "value": false }));
        assert_eq!(body["timeout_seconds"], 900);
    }

    #[test]
    fn an_error_recovery_question_has_its_kind() {
        let mut recovery = args("error-recovery");
        recovery.default_value = Some("retry".into());
        let body = serde_json::to_value(question_body(&recovery).unwrap()).unwrap();
        assert_eq!(
            (body["kind"].as_str(), body["response_type"].as_str()),
            (Some("error_recovery"), Some("error_recovery"))
        );
        assert_eq!(body["default_response"]["value"], "retry");
    }

    #[test]
    fn an_urgency_is_checked_before_anything_is_sent() {
        let mut urgent = args("text");
        urgent.urgency = Some("critical".into());
        assert_eq!(question_body(&urgent).unwrap().urgency, Some(Urgency::Critical));
        urgent.urgency = Some("asap".into());
        let Err(CliError::Usage(message)) = question_body(&urgent) else { panic!("a usage error") };
        assert_eq!(message, r#"--urgency must be one of low, normal, high, critical, not "asap""#);
    }

    #[test]
    fn options_are_value_equals_label() {
        let mut choice = args("choice");
        choice.options = vec!["eu=Europe".into(), "us=United States".into()];
        let body = serde_json::to_value(question_body(&choice).unwrap()).unwrap();
        assert_eq!(body["options"][1], json!({ "value": "us", "label": "United States" }));
        choice.options = vec!["eu".into()];
        assert!(matches!(question_body(&choice), Err(CliError::Usage(_))));
    }

    #[test]
    fn every_type_a_question_may_have_can_be_asked() {
        for response_type in ResponseType::ALL.iter() {
            let body = question_body(&args(response_type.as_str())).unwrap();
            assert_eq!(body.response_type, Some(*response_type));
        }
        let file =
            parsed(&["--type", "file", "--accept", "image/*", "--accept", "application/pdf", "--max-bytes", "9"]);
        let body = serde_json::to_value(question_body(&file.unwrap()).unwrap()).unwrap();
        assert_eq!((&body["accept"], &body["max_bytes"]), (&json!(["image/*", "application/pdf"]), &json!(9)));
        let Err(CliError::Usage(message)) = question_body(&parsed(&["--save", "x.pdf"]).unwrap()) else {
            panic!("a usage error")
        };
        assert!(message.contains("--type file"), "{message}");
        assert_eq!(question_body(&parsed(&[]).unwrap()).unwrap().response_type, Some(ResponseType::Text));
        assert_eq!(args("multi-choice").response_type, Some(AskType(ResponseType::MultiChoice)));
    }

    #[test]
    fn bounds_and_a_numeric_default_are_sent_as_the_api_names_them() {
        let confidence =
            parsed(&["--type", "integer", "--min", "0", "--max", "100", "--step", "5", "--slider", "--default", "50"])
                .unwrap();
        let body = serde_json::to_value(question_body(&confidence).unwrap()).unwrap();
        assert_eq!(
            [&body["min"], &body["max"], &body["step"], &body["widget"], &body["default_response"]["value"]],
            [&json!(0), &json!(100), &json!(5), &json!("slider"), &json!(50)]
        );
        let score = parsed(&["--type", "number", "--min", "-1.5", "--default", "0.25"]).unwrap();
        let body = serde_json::to_value(question_body(&score).unwrap()).unwrap();
        assert_eq!((&body["min"], &body["default_response"]["value"]), (&json!(-1.5), &json!(0.25)));
        let mut rating = args("rating");
        rating.default_value = Some("four".into());
        let Err(CliError::Usage(message)) = question_body(&rating) else { panic!("a usage error") };
        assert_eq!(message, r#"--default must be a number, not "four""#);
        assert!(parsed(&["--type", "integer", "--min", "ten"]).is_err(), "a bound is a number");
    }

    #[test]
    fn a_table_takes_its_columns_and_a_schema_makes_a_form() {
        let columns = r#"[{"key": "host", "label": "Host", "response_type": "text", "required": true}]"#;
        let table = parsed(&["--type", "table", "--columns", columns, "--max-rows", "5"]).unwrap();
        let body = serde_json::to_value(question_body(&table).unwrap()).unwrap();
        assert_eq!((&body["columns"][0]["key"], &body["max_rows"]), (&json!("host"), &json!(5)));
        let schema = r#"{"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}}"#;
        let form = question_body(&parsed(&["--schema", schema]).unwrap()).unwrap();
        assert_eq!(form.response_type, Some(ResponseType::Form));
        assert_eq!(form.response_schema.unwrap()["properties"]["replicas"]["minimum"], 1);
        let Err(CliError::Usage(message)) = question_body(&parsed(&["--type", "table", "--columns", "[{"]).unwrap())
        else {
            panic!("a usage error")
        };
        assert!(message.starts_with("--columns is not valid"), "{message}");
        assert!(parsed(&["--schema", schema, "--fields", "[]"]).is_err(), "a form has fields or a schema");
    }

    #[test]
    fn exit_codes_follow_the_resolution() {
        let approval = |status: &str, value: Value| json!({ "status": status, "response_type": "approval", "response": { "value": value } });
        assert_eq!(question_exit(&approval("answered", json!(true))), 0);
        assert_eq!(question_exit(&approval("answered", json!(false))), EXIT_REJECTED);
        assert_eq!(question_exit(&approval("defaulted", json!(false))), EXIT_REJECTED);
        assert_eq!(question_exit(&json!({ "status": "expired", "response_type": "text" })), EXIT_EXPIRED);
        assert_eq!(question_exit(&json!({ "status": "cancelled", "response_type": "text" })), EXIT_EXPIRED);
        assert_eq!(
            question_exit(&json!({ "status": "answered", "response_type": "text", "response": { "value": "x" } })),
            0
        );
    }
}
