//! The `holdpoint` command line. `serve` runs the server, `demo` runs it with a demo workspace loaded; `ask`, `run`
//! and `resume` are for headless agents and scripts ([`crate::headless`]); `questions`, `show`, `answer`, `approve`
//! and `reject` are for people answering from a terminal ([`crate::responder`]); `token`, `user` and `audit`
//! administer it; `completions` prints shell completions.

use std::io::IsTerminal;
use std::process::ExitCode;

use app::types::{ActorKind, Role};
use clap::{CommandFactory, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use uuid::Uuid;

use crate::client::CliError;
use crate::config::{DatabaseLocation, ServeConfig};
use crate::credentials::{hash_secret, new_token_secret};
use crate::store::{self, AuditActor, TokenRow};

/// Holdpoint: a human-in-the-loop control plane for AI agents.
#[derive(Debug, Parser)]
#[command(name = "holdpoint", version, about)]
struct Cli {
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
    Ask(Box<crate::headless::AskArgs>),
    /// Run an agent on a task; exits 0 when it completes, 10 when it pauses for a person (--pause-on-approval).
    Run(Box<crate::headless::RunArgs>),
    /// Resume a paused run with decisions on its pending tool calls and an optional prompt.
    Resume(Box<crate::headless::ResumeArgs>),
    /// List questions (pending ones by default) as a table, or the API's page with --output json.
    Questions(Box<crate::responder::QuestionsArgs>),
    /// Show a question in full: body, options or fields, the action of an approval, context, lineage, answer.
    Show(Box<crate::responder::ShowArgs>),
    /// Answer a question; the value is read by its type (yes/no, an option, options separated by commas, JSON for
    /// a form). Exits 0 answered, 1 refused (with the error's code), 2 usage.
    Answer(Box<crate::responder::AnswerArgs>),
    /// Approve an approval question, optionally with edited arguments (--edit JSON).
    Approve(Box<crate::responder::ApproveArgs>),
    /// Reject an approval question; the comment is passed to the agent as the reason.
    Reject(Box<crate::responder::RejectArgs>),
    /// Print shell completions, e.g. `holdpoint completions bash > /etc/bash_completion.d/holdpoint`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage people's accounts.
    #[command(subcommand)]
    User(UserCommand),
    /// Check the audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
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
        database: DatabaseLocation,
    },
    /// Set a person's password: an operator's reset for someone who is locked out.
    SetPassword {
        username: String,
        /// Read the password from the first line of standard input instead of the terminal.
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        database: DatabaseLocation,
    },
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Walk every workspace's audit chain: recompute each entry's hash, check that seq has no gaps and that each
    /// entry links to the one before. Exits 0 when all is intact, 1 naming the first altered, missing or reordered
    /// entry.
    Verify {
        #[command(flatten)]
        database: DatabaseLocation,
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
        database: DatabaseLocation,
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
    let cli = Cli::parse();
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(shell, &mut Cli::command(), "holdpoint", &mut std::io::stdout());
        return ExitCode::SUCCESS;
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
        | Command::Reject(_) => "warn,sqlx=error",
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
            Command::Ask(args) => crate::headless::ask(*args).await,
            Command::Run(args) => crate::headless::run(*args).await,
            Command::Resume(args) => crate::headless::resume(*args).await,
            Command::Questions(args) => crate::responder::list(*args).await,
            Command::Show(args) => crate::responder::show(*args).await,
            Command::Answer(args) => crate::responder::answer(*args).await,
            Command::Approve(args) => crate::responder::approve(*args).await,
            Command::Reject(args) => crate::responder::reject(*args).await,
            Command::Completions { .. } => Ok(0),
            Command::Token(TokenCommand::Create { workspace, role, name, database }) => {
                create_token(&workspace, role, &name, &database).await.map(|()| 0).map_err(failed)
            }
            Command::User(command) => user_command(command).await.map(|()| 0),
            Command::Audit(AuditCommand::Verify { database }) => verify_audit(&database).await.map_err(failed),
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

/// Whether the command prints JSON on stdout, and if so whether its documents carry an `outcome` (`ask`, `run`,
/// `resume`); `None` for text output.
fn json_output(command: &Command) -> Option<bool> {
    use crate::headless::OutputFormat::Json;
    match command {
        Command::Ask(args) => (args.output == Json).then_some(true),
        Command::Run(args) => (args.output == Json).then_some(true),
        Command::Resume(args) => (args.output == Json).then_some(true),
        Command::Questions(args) => (args.output == crate::responder::ListFormat::Json).then_some(false),
        Command::Show(args) => (args.output == Json).then_some(false),
        Command::Answer(args) => (args.output == Json).then_some(false),
        Command::Approve(args) => (args.output == Json).then_some(false),
        Command::Reject(args) => (args.output == Json).then_some(false),
        _ => None,
    }
}

async fn create_token(workspace: &str, role: Role, name: &str, database: &DatabaseLocation) -> Result<(), String> {
    let url = database.prepare().map_err(|e| e.to_string())?;
    let store = store::connect(&url).await.map_err(|e| e.to_string())?;
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
            let workspace_row = store.ensure_workspace(&workspace).await.map_err(|e| failed(e.to_string()))?;
            let user = match store.user_by_username(&username).await.map_err(|e| failed(e.to_string()))? {
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
                crate::audit::action::MEMBER_ADDED,
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
                        crate::audit::action::PASSWORD_CHANGED,
                        user.id,
                        serde_json::json!({ "username": username }),
                        "holdpoint user set-password",
                    )
                })
                .collect();
            store.set_password(user.id, &hash, &recorded).await.map_err(|e| failed(e.to_string()))?;
            eprintln!("The password of {username} is set.");
            Ok(())
        }
    }
}

/// `holdpoint audit verify`: 0 when every chain is intact, 1 (with the first break on stderr) when not.
async fn verify_audit(database: &DatabaseLocation) -> Result<u8, String> {
    let url = database.prepare().map_err(|e| e.to_string())?;
    let store = store::connect(&url).await.map_err(|e| e.to_string())?;
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

async fn open_store(database: &DatabaseLocation) -> Result<std::sync::Arc<dyn store::Store>, String> {
    let url = database.prepare().map_err(|e| e.to_string())?;
    store::connect(&url).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
