//! The `holdpoint` command line. `serve` runs the server, `demo` runs it with a demo workspace loaded; `ask`, `run`
//! and `resume` are for headless agents and scripts ([`crate::cli::headless`]); `questions`, `show`, `answer`, `approve`
//! and `reject` are for people answering from a terminal ([`crate::cli::responder`]); `token`, `user` and `audit`
//! administer it; `completions` prints shell completions.

pub mod backup;
pub mod client;
pub mod headless;
pub mod responder;
mod rules;

use std::io::IsTerminal;
use std::process::ExitCode;

use app::types::{ActorKind, Role};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use uuid::Uuid;

use crate::cli::client::CliError;
use crate::config::{DatabaseLocation, ServeConfig};
use crate::credentials::{hash_secret, new_token_secret};
use crate::store::{self, AuditActor, TokenRow};

/// Holdpoint: a human-in-the-loop control plane for AI agents.
#[derive(Debug, Parser)]
#[command(name = "holdpoint", version = env!("HOLDPOINT_VERSION"), about)]
struct Cli {
    /// The configuration file (TOML): a key for every flag, e.g. `data_dir = "/var/lib/holdpoint"`. Flags and
    /// environment variables win over it. Default: /etc/holdpoint/holdpoint.toml when it exists.
    #[arg(long, env = "HOLDPOINT_CONFIG", global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,

    /// Log format on stderr: `text` or `json`.
    #[arg(long, env = "HOLDPOINT_LOG_FORMAT", default_value = "text", global = true)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (web UI and API).
    Serve(Box<ServeConfig>),
    /// Run the server with a demo loaded: scripted agents that ask every kind of question.
    ///
    /// Takes the flags of `serve`. Shell commands run in dry-run mode, never for real. Prints an admin token to sign
    /// in with unless a bootstrap token is set.
    Demo(Box<ServeConfig>),
    /// Ask a person and wait for the answer: for shell scripts and CI gates. Prints the resolved question as JSON;
    /// exits 0 answered/approved, 11 rejected, 12 expired or cancelled, 10 paused (with --no-wait).
    Ask(Box<crate::cli::headless::AskArgs>),
    /// Run an agent on a task; exits 0 when it completes, 10 when it pauses for a person (--pause-on-approval).
    Run(Box<crate::cli::headless::RunArgs>),
    /// Resume a paused run with decisions on its pending tool calls and an optional prompt.
    Resume(Box<crate::cli::headless::ResumeArgs>),
    /// List questions (pending ones by default) as a table, or the API's page with --output json.
    Questions(Box<crate::cli::responder::QuestionsArgs>),
    /// Show a question in full: body, options or fields, the action of an approval, context, lineage, answer.
    Show(Box<crate::cli::responder::ShowArgs>),
    /// Answer a question; the value is read by its type (yes/no, an option, options separated by commas, JSON for
    /// a form). Exits 0 answered, 1 refused (with the error's code), 2 usage.
    Answer(Box<crate::cli::responder::AnswerArgs>),
    /// Approve an approval question, optionally with edited arguments (--edit JSON).
    Approve(Box<crate::cli::responder::ApproveArgs>),
    /// Reject an approval question; the comment is passed to the agent as the reason.
    Reject(Box<crate::cli::responder::RejectArgs>),
    /// Print shell completions, e.g. `holdpoint completions bash > /etc/bash_completion.d/holdpoint`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Keep the workspace's approval rules in a file: get (as YAML), apply FILE [--check], test a call.
    #[command(subcommand)]
    Rules(rules::RulesCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage people's accounts.
    #[command(subcommand)]
    User(UserCommand),
    /// Check the audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Check the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Copy the embedded SQLite database to a file while the server runs (a consistent snapshot). For PostgreSQL
    /// it says how to use pg_dump.
    Backup {
        /// The backup file to write; it must not exist.
        #[arg(long, value_name = "FILE")]
        to: std::path::PathBuf,
        #[command(flatten)]
        database: DatabaseLocation,
    },
    /// Put a backup in place as the database of an empty data directory (stop the server first).
    Restore {
        /// A file written by `holdpoint backup`.
        file: std::path::PathBuf,
        #[command(flatten)]
        database: DatabaseLocation,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate the configuration (file, environment and these flags, as `serve` would take them) and print the
    /// effective settings with where each came from; secrets are redacted. Exits 0 when valid, 2 when not.
    Check(Box<ServeConfig>),
}

/// The database of an administrative command, which creates none unless asked: run from the wrong directory, it
/// would otherwise make a new empty database and hand out a token no server knows.
#[derive(Debug, clap::Args)]
struct AdminDatabase {
    #[command(flatten)]
    location: DatabaseLocation,
    /// Create the database if there is none yet (otherwise the command refuses).
    #[arg(long)]
    create_database: bool,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Create a person's account with a role in a workspace, or add an existing account to another workspace.
    /// A new account's password is asked for on the terminal (or read from stdin's first line with --password-stdin).
    Create {
        /// 1..=64 lower-case letters, digits, '.', '_' or '-'.
        username: String,
        /// The workspace to join (created if missing).
        #[arg(long, default_value = crate::server::DEFAULT_WORKSPACE)]
        workspace: String,
        /// viewer, responder, approver or admin.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// The name shown for the person; defaults to the username.
        #[arg(long)]
        display_name: Option<String>,
        /// Read the password from the first line of standard input instead of the terminal.
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        database: AdminDatabase,
    },
    /// Set a person's password: an operator's reset for someone who is locked out.
    SetPassword {
        username: String,
        /// Read the password from the first line of standard input instead of the terminal.
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        database: AdminDatabase,
    },
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Walk every workspace's audit chain: recompute each entry's hash, check that seq has no gaps and that each
    /// entry links to the one before. Exits 0 when all is intact, 1 naming the first altered, missing or reordered
    /// entry.
    Verify {
        #[command(flatten)]
        database: AdminDatabase,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a token and print it once; only its hash is kept.
    Create {
        /// The workspace the token belongs to (created if missing).
        #[arg(long, default_value = crate::server::DEFAULT_WORKSPACE)]
        workspace: String,
        /// viewer, responder, approver, admin or agent.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// A name that says whose or what the token is (shown as who answered).
        #[arg(long)]
        name: String,
        #[command(flatten)]
        database: AdminDatabase,
    },
}

fn parse_role(value: &str) -> Result<Role, String> {
    value.parse().map_err(|_| "expected one of viewer, responder, approver, admin, agent".to_owned())
}

fn init_tracing(format: LogFormat, default_filter: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // Colour codes are for people at a terminal; in a file, a pipe or a log collector they are noise.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Parses the command line, runs the command, and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (command, file) = match with_configuration_file(&args, crate::config_file::ConfigFile::locate(&args)) {
        Ok(parsed) => parsed,
        // The version and the help need no settings: a file that cannot be read does not stand in their way.
        Err(_) if asks_for_help_or_version(&args) => (Cli::command(), None),
        Err(error) => {
            eprintln!("holdpoint: {error}");
            return ExitCode::from(2);
        }
    };
    let matches = match command.clone().try_get_matches_from(&args) {
        Ok(matches) => matches,
        Err(error) => refuse_command_line(&args, error),
    };
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    // `[[gateway.upstreams]]` is no flag's: the file hands it to the commands that serve (or check what they would).
    if let (
        Some(file),
        Command::Serve(config) | Command::Demo(config) | Command::Config(ConfigCommand::Check(config)),
    ) = (&file, &mut cli.command)
    {
        config.gateway_upstreams = file.gateway_upstreams().to_vec();
    }
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(shell, &mut Cli::command(), "holdpoint", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    if let Command::Config(ConfigCommand::Check(config)) = &cli.command {
        return check_configuration(&command, &matches, file.as_ref(), config);
    }
    // The commands for scripts and people talk on stderr; the server's logs would drown that out.
    let filter = match cli.command {
        Command::Ask(_)
        | Command::Run(_)
        | Command::Resume(_)
        | Command::Questions(_)
        | Command::Show(_)
        | Command::Answer(_)
        | Command::Approve(_)
        | Command::Reject(_)
        | Command::Rules(_) => "warn,sqlx=error",
        _ => "info,sqlx=warn,tower_http=info,leptos=warn",
    };
    init_tracing(cli.log_format, filter);
    let json_errors = json_output(&cli.command);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("holdpoint: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let failed = |message: String| CliError::Failed(message);
    let result: Result<u8, CliError> = runtime.block_on(async {
        match cli.command {
            Command::Serve(config) => crate::server::run(*config).await.map(|()| 0).map_err(|e| failed(e.to_string())),
            Command::Demo(config) => crate::demo::run(*config).await.map(|()| 0).map_err(failed),
            Command::Ask(args) => crate::cli::headless::ask(*args).await,
            Command::Run(args) => crate::cli::headless::run(*args).await,
            Command::Resume(args) => crate::cli::headless::resume(*args).await,
            Command::Questions(args) => crate::cli::responder::list(*args).await,
            Command::Show(args) => crate::cli::responder::show(*args).await,
            Command::Answer(args) => crate::cli::responder::answer(*args).await,
            Command::Approve(args) => crate::cli::responder::approve(*args).await,
            Command::Reject(args) => crate::cli::responder::reject(*args).await,
            Command::Rules(command) => rules::run(command).await,
            Command::Completions { .. } => Ok(0),
            Command::Token(TokenCommand::Create { workspace, role, name, database }) => {
                create_token(&workspace, role, &name, &database).await.map(|()| 0).map_err(failed)
            }
            Command::User(command) => user_command(command).await.map(|()| 0),
            Command::Audit(AuditCommand::Verify { database }) => verify_audit(&database).await.map_err(failed),
            Command::Config(ConfigCommand::Check(_)) => Ok(0),
            Command::Backup { to, database } => {
                let copied = crate::cli::backup::backup(&database, &to).await.map_err(failed)?;
                eprintln!(
                    "Backed up {} questions ({} bytes) to {}.",
                    copied.questions,
                    copied.bytes,
                    copied.file.display()
                );
                for directory in &copied.left_beside {
                    eprintln!("Not in the backup: {}; copy it beside the backup.", directory.display());
                }
                Ok(0)
            }
            Command::Restore { file, database } => {
                let copied = crate::cli::backup::restore(&database, &file).await.map_err(failed)?;
                eprintln!(
                    "Restored {} questions into {}; `holdpoint serve` with the same data directory opens it.",
                    copied.questions,
                    copied.file.display()
                );
                Ok(0)
            }
        }
    });
    // The embedded engine's tasks die with the runtime; do not wait for them.
    runtime.shutdown_background();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("holdpoint: {error}");
            if let Some(outcome) = json_errors {
                // With --output json, stdout is one JSON document whatever happened.
                if let Some(mut document) = error.to_json() {
                    if outcome {
                        document["outcome"] = serde_json::json!("error");
                    }
                    println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
                }
            }
            ExitCode::from(error.exit_code())
        }
    }
}

/// A command line clap refuses: clap's message on stderr and exit 2, and with `--output json` on a command that
/// prints JSON, the one JSON document on stdout as well, as every other failure of such a command gives.
fn refuse_command_line(args: &[std::ffi::OsString], error: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let shows_text = matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if !shows_text && let Some(outcome) = json_requested(args) {
        let rendered = error.to_string();
        let message = rendered.lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned();
        if let Some(mut document) = CliError::Usage(message).to_json() {
            if outcome {
                document["outcome"] = serde_json::json!("error");
            }
            println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
        }
    }
    error.exit()
}

/// [`json_output`] read from the words of a command line clap could not parse: `--output json` given to a command
/// that prints JSON.
fn json_requested(args: &[std::ffi::OsString]) -> Option<bool> {
    let words: Vec<&str> = args.iter().skip(1).filter_map(|word| word.to_str()).collect();
    let json = words.windows(2).any(|pair| pair == ["--output", "json"]) || words.contains(&"--output=json");
    let command = Cli::command();
    let named = words.iter().find(|word| !word.starts_with('-') && command.find_subcommand(word).is_some())?;
    match *named {
        "ask" | "run" | "resume" if json => Some(true),
        "questions" | "show" | "answer" | "approve" | "reject" if json => Some(false),
        _ => None,
    }
}

/// Whether the command line asks only for the version or a help text.
fn asks_for_help_or_version(args: &[std::ffi::OsString]) -> bool {
    args.iter().skip(1).any(|arg| matches!(arg.to_str(), Some("--version" | "-V" | "--help" | "-h")))
        || args.get(1).and_then(|arg| arg.to_str()) == Some("help")
}

/// The command line's definition with the configuration file's values as its defaults, and the file.
///
/// A default file this user may not read is needed only by the commands that take the server's settings; the
/// others (`ask`, `questions`, `--version`, ...) run without it, so that anyone on the server's machine can use them.
fn with_configuration_file(
    args: &[std::ffi::OsString],
    located: Result<Option<crate::config_file::ConfigFile>, crate::config_file::ConfigFileError>,
) -> Result<(clap::Command, Option<crate::config_file::ConfigFile>), crate::config_file::ConfigFileError> {
    let file = match located {
        Err(crate::config_file::ConfigFileError::DefaultUnreadable { .. }) if !takes_the_servers_settings(args) => None,
        located => located?,
    };
    let command = match &file {
        Some(file) => file.apply(Cli::command())?,
        None => Cli::command(),
    };
    Ok((command, file))
}

/// Whether the command `args` name takes the server's settings: it has `serve`'s database flags, as `serve`,
/// `demo`, `config check` and the commands that open the database directly (`token`, `backup`, ...) do. The
/// subcommand is found by its words alone, since the full parse may need what the file would have given.
fn takes_the_servers_settings(args: &[std::ffi::OsString]) -> bool {
    let mut command = Cli::command();
    for word in args.iter().skip(1).map(|word| word.to_string_lossy()) {
        if word.starts_with('-') {
            continue;
        }
        match command.find_subcommand(word.as_ref()) {
            Some(sub) => command = sub.clone(),
            None => break,
        }
    }
    command.get_arguments().any(|arg| matches!(arg.get_long(), Some("data-dir" | "database-url")))
}

/// `holdpoint config check`: the settings `serve` would run with, where each came from, and whether they hold
/// together (the checks `serve` makes before it opens the database).
fn check_configuration(
    command: &clap::Command,
    matches: &clap::ArgMatches,
    file: Option<&crate::config_file::ConfigFile>,
    config: &ServeConfig,
) -> ExitCode {
    let (Some(config_command), Some(config_matches)) =
        (command.find_subcommand("config"), matches.subcommand_matches("config"))
    else {
        return ExitCode::from(2);
    };
    let (Some(check_command), Some(check_matches)) =
        (config_command.find_subcommand("check"), config_matches.subcommand_matches("check"))
    else {
        return ExitCode::from(2);
    };
    let settings = crate::config_file::effective(check_command, check_matches, file);
    print!("{}", crate::config_file::render(&settings, file));
    // Building the email transport (to check its settings) needs a runtime, though it connects to nothing.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("holdpoint: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let _entered = runtime.enter();
    match crate::server::check_settings(config) {
        Ok(()) => {
            eprintln!("holdpoint: the configuration is valid");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("holdpoint: {error}");
            ExitCode::from(2)
        }
    }
}

/// Whether the command prints JSON on stdout, and if so whether its documents carry an `outcome` (`ask`, `run`,
/// `resume`); `None` for text output.
fn json_output(command: &Command) -> Option<bool> {
    use crate::cli::headless::OutputFormat::Json;
    match command {
        Command::Ask(args) => (args.output == Json).then_some(true),
        Command::Run(args) => (args.output == Json).then_some(true),
        Command::Resume(args) => (args.output == Json).then_some(true),
        Command::Questions(args) => (args.output == crate::cli::responder::ListFormat::Json).then_some(false),
        Command::Show(args) => (args.output == Json).then_some(false),
        Command::Answer(args) => (args.output == Json).then_some(false),
        Command::Approve(args) => (args.output == Json).then_some(false),
        Command::Reject(args) => (args.output == Json).then_some(false),
        _ => None,
    }
}

async fn create_token(workspace: &str, role: Role, name: &str, database: &AdminDatabase) -> Result<(), String> {
    let name = &crate::people::check_token_name(name).map_err(|message| format!("--name {message}"))?;
    let store = open_store(database).await?;
    let workspace_row = store.ensure_workspace(workspace).await.map_err(|e| e.to_string())?;
    let secret = new_token_secret();
    // Whoever runs the command on the server's machine, named by their login as far as the environment says.
    let operator = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into());
    let actor = AuditActor { kind: ActorKind::Human, id: None, name: format!("holdpoint token create ({operator})") };
    crate::people::store_token(
        store.as_ref(),
        &TokenRow {
            id: Uuid::now_v7(),
            workspace_id: workspace_row.id,
            name: name.to_owned(),
            role,
            secret_hash: hash_secret(&secret),
            created_at: crate::store::now(),
            created_by: Some("cli".into()),
            maker_id: None,
        },
        &actor,
    )
    .await
    .map_err(|e| e.to_string())?;
    eprintln!("Created token {name:?} (role {role}) for workspace {workspace:?}. It is shown only this once:");
    println!("{secret}");
    Ok(())
}

/// Reads a password from the terminal (twice, not echoed) or from stdin's first line, and checks its length.
fn read_password(from_stdin: bool) -> Result<String, CliError> {
    let failed = |e: std::io::Error| CliError::Failed(format!("cannot read the password: {e}"));
    let password = if from_stdin {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map_err(failed)?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    } else {
        let first = rpassword::prompt_password("Password: ").map_err(failed)?;
        let again = rpassword::prompt_password("Password again: ").map_err(failed)?;
        if first != again {
            return Err(CliError::Usage("the two passwords differ".into()));
        }
        first
    };
    crate::people::check_password(&password).map_err(|problem| CliError::Usage(format!("the password {problem}")))?;
    Ok(password)
}

async fn user_command(command: UserCommand) -> Result<(), CliError> {
    let failed = |e: String| CliError::Failed(e);
    match command {
        UserCommand::Create { username, workspace, role, display_name, password_stdin, database } => {
            crate::people::check_username(&username).map_err(|p| CliError::Usage(format!("the username {p}")))?;
            if role == Role::Agent {
                return Err(CliError::Usage("people hold human roles: viewer, responder, approver or admin".into()));
            }
            let store = open_store(&database).await.map_err(failed)?;
            let existing = store.user_by_username(&username).await.map_err(|e| failed(e.to_string()))?;
            // An existing account only joins: a password or name given for it would be silently dropped.
            if existing.is_some() && (password_stdin || display_name.is_some()) {
                return Err(CliError::Usage(format!(
                    "the account {username} exists, and this command only adds it to the workspace: leave out \
                     --password-stdin and --display-name (`holdpoint user set-password {username}` sets a password)"
                )));
            }
            let workspace_row = store.ensure_workspace(&workspace).await.map_err(|e| failed(e.to_string()))?;
            let user = match existing {
                Some(existing) => existing,
                None => {
                    let password = read_password(password_stdin)?;
                    let user = crate::store::UserRow {
                        id: Uuid::now_v7(),
                        display_name: display_name.unwrap_or_else(|| username.clone()),
                        username: username.clone(),
                        password_hash: Some(
                            crate::people::hash_password(password).await.map_err(|e| failed(e.to_string()))?,
                        ),
                        created_at: crate::store::now(),
                        disabled_at: None,
                    };
                    store.insert_user(&user, &[]).await.map_err(|e| failed(e.to_string()))?;
                    user
                }
            };
            let added = operator_action(
                workspace_row.id,
                crate::actions::MEMBER_ADDED,
                user.id,
                serde_json::json!({ "username": username, "role": role }),
                "holdpoint user create",
            );
            store.insert_membership(workspace_row.id, user.id, role, &[added]).await.map_err(|e| match e {
                crate::store::StoreError::Duplicate(_) => {
                    failed(format!("{username} is a member of {workspace:?} already"))
                }
                other => failed(other.to_string()),
            })?;
            eprintln!("{username} is now {} of workspace {workspace:?}.", role.with_article());
            Ok(())
        }
        UserCommand::SetPassword { username, password_stdin, database } => {
            let store = open_store(&database).await.map_err(failed)?;
            let user = store
                .user_by_username(&username)
                .await
                .map_err(|e| failed(e.to_string()))?
                .ok_or_else(|| failed(format!("there is no account {username:?}")))?;
            let password = read_password(password_stdin)?;
            let hash = crate::people::hash_password(password).await.map_err(|e| failed(e.to_string()))?;
            // Recorded in every workspace the person acts in, with the change.
            let recorded: Vec<_> = store
                .workspaces_of(user.id)
                .await
                .map_err(|e| failed(e.to_string()))?
                .into_iter()
                .map(|workspace_id| {
                    operator_action(
                        workspace_id,
                        crate::actions::PASSWORD_CHANGED,
                        user.id,
                        serde_json::json!({ "username": username }),
                        "holdpoint user set-password",
                    )
                })
                .collect();
            store.set_password(user.id, &hash, None, &recorded).await.map_err(|e| failed(e.to_string()))?;
            eprintln!("The password of {username} is set; their sessions are ended.");
            Ok(())
        }
    }
}

/// `holdpoint audit verify`: 0 when every chain is intact, 1 (with the first break on stderr) when not.
async fn verify_audit(database: &AdminDatabase) -> Result<u8, String> {
    let store = open_store(database).await?;
    match crate::audit::verify(store.as_ref()).await.map_err(|e| e.to_string())? {
        Ok(verified) => {
            println!("audit log verified: {verified}");
            Ok(0)
        }
        Err(broken) => {
            println!("audit log verification FAILED");
            eprintln!("holdpoint: the audit log is not intact: {broken}");
            Ok(1)
        }
    }
}

/// Records what an operator did on the server's machine, named by their login as far as the environment says.
fn operator_action(
    workspace_id: Uuid,
    action: &str,
    user_id: Uuid,
    after: serde_json::Value,
    command: &str,
) -> store::NewAuditEntry {
    let operator = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into());
    store::NewAuditEntry {
        workspace_id,
        actor: AuditActor { kind: ActorKind::Human, id: None, name: format!("{command} ({operator})") },
        action: action.to_owned(),
        subject_type: "user".into(),
        subject_id: Some(user_id.to_string()),
        before: None,
        after: Some(after),
        diff: None,
        created_at: store::now(),
    }
}

/// Says on stderr which database a command that opens one directly acts on.
pub(crate) fn say_database(shown: &str) {
    eprintln!("holdpoint: using the database {shown}");
}

/// Opens the database of an administrative command, saying which one on stderr; refuses to create a SQLite file
/// that does not exist unless `--create-database` asks for it.
async fn open_store(database: &AdminDatabase) -> Result<std::sync::Arc<dyn store::Store>, String> {
    let location = &database.location;
    let shown = match location.sqlite_file() {
        Some(file) => {
            let file = std::path::absolute(&file).unwrap_or(file);
            if !file.exists() && !database.create_database {
                return Err(format!(
                    "there is no database at {}: point this command at the server's database (--data-dir, \
                     DATABASE_URL or the configuration file's data_dir), or pass --create-database to make a new one",
                    file.display()
                ));
            }
            file.display().to_string()
        }
        None => {
            let url = location.url();
            let shown = store::redacted_url(&url);
            if !store::is_supported_url(&url) {
                return Err(store::StoreError::UnsupportedUrl(shown).to_string());
            }
            let holds_one = store::postgres_holds_a_schema(&url).await.map_err(|e| e.to_string())?;
            if !holds_one && !database.create_database {
                return Err(format!(
                    "the database {shown} holds no Holdpoint schema: point this command at the server's database \
                     (DATABASE_URL or the configuration file's database_url), or pass --create-database to set this \
                     one up"
                ));
            }
            shown
        }
    };
    say_database(&shown);
    let url = location.prepare().map_err(|e| e.to_string())?;
    store::connect(&url).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// `.env.example` is where the README sends people for every setting: each variable `serve` reads is in it,
    /// except the hidden ones (for tests).
    #[test]
    fn every_setting_of_serve_is_in_the_example_environment() {
        let example = include_str!("../../../.env.example");
        let listed: Vec<&str> = example
            .lines()
            .filter_map(|line| line.trim_start_matches('#').trim_start().split_once('=').map(|(name, _)| name))
            .collect();
        let command = Cli::command();
        let serve = command.find_subcommand("serve").unwrap();
        let missing: Vec<String> = serve
            .get_arguments()
            .filter(|arg| !arg.is_hide_set())
            .filter_map(|arg| arg.get_env().map(|name| name.to_string_lossy().into_owned()))
            .filter(|name| !listed.contains(&name.as_str()))
            .collect();
        assert!(missing.is_empty(), ".env.example lacks {missing:?}");
    }

    /// The package keeps /etc/holdpoint/holdpoint.toml readable by root and the holdpoint group only: any other user
    /// still runs the commands that talk to a server, while the server's own commands say why they cannot start.
    #[test]
    fn an_unreadable_default_file_stops_only_the_commands_that_take_the_servers_settings() {
        let unreadable = || {
            Err(crate::config_file::ConfigFileError::DefaultUnreadable {
                path: crate::config_file::DEFAULT_PATH.into(),
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            })
        };
        let args = |words: &[&str]| -> Vec<std::ffi::OsString> {
            std::iter::once("holdpoint").chain(words.iter().copied()).map(Into::into).collect()
        };
        for words in [
            &["--version"][..],
            &["ask", "Deploy?", "--type", "approval"],
            &["questions"],
            &["answer", "0192f0c4-0000-7000-8000-000000000000", "yes"],
            &["completions", "bash"],
            &["rules", "get"],
        ] {
            let (_, file) = with_configuration_file(&args(words), unreadable())
                .unwrap_or_else(|error| panic!("{words:?} runs without the file: {error}"));
            assert!(file.is_none(), "{words:?}");
        }
        for words in [
            &["serve"][..],
            &["serve", "--addr", "127.0.0.1:3000"],
            &["demo"],
            &["config", "check"],
            &["token", "create", "--workspace", "default"],
            &["audit", "verify"],
            &["backup", "--to", "copy.db"],
            &["restore", "copy.db"],
        ] {
            let refused = with_configuration_file(&args(words), unreadable()).err();
            let message = refused.unwrap_or_else(|| panic!("{words:?} needs the server's settings")).to_string();
            assert!(message.contains("/etc/holdpoint/holdpoint.toml") && message.contains("--config"), "{message}");
        }
    }

    /// A value for `arg` that parses and differs from its default, so reading it proves it came from the file.
    fn sample(arg: &clap::Arg) -> String {
        let key = arg.get_long().unwrap().replace('-', "_");
        if !arg.get_action().takes_values() {
            return "true".into();
        }
        let default = arg.get_default_values().first().map(|value| value.to_string_lossy().into_owned());
        let possible: Vec<String> = arg.get_possible_values().iter().map(|p| p.get_name().to_owned()).collect();
        if let Some(other) = possible.iter().find(|name| Some(*name) != default.as_ref()) {
            return other.clone();
        }
        if let Some(number) = default.as_deref().and_then(|d| d.parse::<u64>().ok()) {
            return (number + 1).to_string();
        }
        let sample = match key.as_str() {
            "addr" => "0.0.0.0:8080",
            "data_dir" | "scripts_dir" | "site_root" => "/srv/holdpoint",
            "database_url" => "postgres://holdpoint:pw@db.example/holdpoint",
            "bootstrap_token" => "hp_0123456789abcdef0123456789abcdef01234567",
            "public_url" | "oidc_issuer" => "https://holdpoint.example",
            "oidc_client_id" | "oidc_client_secret" | "oidc_provision_workspace" | "oidc_display_name" => "ops",
            "oidc_provision_role" => "viewer",
            "smtp_url" => "smtp://mailer:pw@mail.example:587",
            "email_from" => "Holdpoint <hp@example.com>",
            "slack_bot_token" | "slack_signing_secret" | "slack_channel" => "xoxb-1",
            "slack_api_url" => "https://slack.example/api/",
            "vapid_private_key" => "pX6Be2-FxSAnzGJ3dbM2jWxDfV2TU1iFVd1N3lRWq5s",
            "vapid_subject" => "mailto:ops@example.com",
            "http_allowed_hosts" => "api.example.com",
            "model_endpoints" | "openai_base_url" => "https://models.example/v1",
            "openai_api_key" => "sk-0123",
            "trusted_proxies" => "10.0.0.1",
            "files_url" => "s3://holdpoint-files/uploads",
            other => panic!("`{other}` needs a sample value in this test (one that parses and is not its default)"),
        };
        sample.to_owned()
    }

    /// Every flag of `serve` is a key of the configuration file, and a value read from it is what `serve` gets.
    #[test]
    fn every_setting_of_serve_is_read_from_the_configuration_file() {
        let serve = Cli::command().find_subcommand("serve").unwrap().clone();
        let settable: Vec<&clap::Arg> =
            serve.get_arguments().filter(|arg| arg.get_long().is_some() && arg.get_id() != "help").collect();
        assert!(settable.len() > 40, "{} settings", settable.len());
        let mut text = String::new();
        for arg in &settable {
            let key = arg.get_long().unwrap().replace('-', "_");
            text.push_str(&format!("{key} = {}\n", toml::Value::String(sample(arg))));
        }
        let path = std::path::Path::new("holdpoint.toml");
        let file = crate::config_file::ConfigFile::parse(path, &text).unwrap();
        let command = file.apply(Cli::command()).unwrap();
        let matches = command.clone().try_get_matches_from(["holdpoint", "serve"]).unwrap();
        let serve_matches = matches.subcommand_matches("serve").unwrap();
        let settings =
            crate::config_file::effective(command.find_subcommand("serve").unwrap(), serve_matches, Some(&file));
        for arg in settable {
            let key = arg.get_long().unwrap().replace('-', "_");
            let setting = settings.iter().find(|s| s.key == key).unwrap();
            // A variable set in the test's own environment rightly wins over the file.
            let from_environment = arg.get_env().is_some_and(|name| std::env::var_os(name).is_some());
            if !from_environment {
                assert_eq!(setting.source, "file", "{key}");
                let raw: Vec<String> = serve_matches
                    .get_raw(arg.get_id().as_str())
                    .unwrap()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect();
                assert_eq!(raw.join(","), sample(arg), "{key}");
            }
        }
        Cli::from_arg_matches(&matches).expect("the file's values make a valid `serve`");
    }
}
