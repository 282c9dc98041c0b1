//! `holdpoint ask`: one question from a shell script, answered before the command exits or, with `--no-wait`, by
//! a later run of the same command.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use app::types::{
    AnswerBody, ApprovalAction, FieldRules, FieldWidget, NewQuestion, QuestionKind, QuestionOption, ResponseType,
    Urgency,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    EXIT_EXPIRED, EXIT_PAUSED, EXIT_REJECTED, OutputFormat, clear_pause_if, pause_path, print_json, read_json,
    read_pause, write_json,
};
use crate::cli::client::{CliError, CliResult, Connection, LOCAL_DIR, ServerArgs};

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

/// Where `ask --no-wait` notes the question it left waiting, under the question's fingerprint: several gates may wait
/// in one directory, and each finds its own question again (`pause.json` holds only the latest pause).
fn waiting_ask_path(fingerprint: &str) -> PathBuf {
    Path::new(LOCAL_DIR).join(WAITING_ASKS_DIR).join(format!("{fingerprint}.json"))
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
