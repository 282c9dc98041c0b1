//! `holdpoint rules get | apply FILE [--check] | test`: the workspace's approval rules kept in a file (YAML or
//! JSON), in git, and applied through the API.

use serde_json::Value;

use crate::cli::client::{CliError, CliResult, Connection, LocalIdentity, ServerArgs};

/// The `rules` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RulesCommand {
    /// Print the workspace's rules document as YAML (the file `apply` reads).
    Get {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Save a rules document from FILE (YAML or JSON); admins only. Every fault is printed with its field and
    /// nothing is saved.
    Apply {
        /// The document: `{rules: [...], default: allow|ask|deny}` in YAML or JSON.
        file: std::path::PathBuf,
        /// Only check the document through the server; save nothing (for CI).
        #[arg(long)]
        check: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show what the saved rules decide about a call: the decision, the deciding rule and every rule that matched.
    Test {
        /// The tool's name, e.g. shell or mcp:github/create_issue.
        #[arg(long)]
        tool: String,
        /// The call's arguments, a JSON object.
        #[arg(long, visible_alias = "arguments", default_value = "{}")]
        args: String,
        /// The calling agent's name, matched by the rules' `agents`.
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Runs a `rules` subcommand; exit 0 on success, 1 on a refusal (with the faults), 2 on a bad command line.
pub async fn run(command: RulesCommand) -> CliResult<u8> {
    match command {
        RulesCommand::Get { server } => {
            let connection = Connection::open_as(&server, LocalIdentity::Cli).await?;
            let stored = connection.get("/rules").await?;
            let document = serde_json::json!({ "default": stored["default"], "rules": stored["rules"] });
            let yaml = serde_norway::to_string(&document).map_err(|e| CliError::Failed(e.to_string()))?;
            print!("{yaml}");
            eprintln!(
                "# version {} saved by {}",
                stored["version"],
                stored["updated_by"].as_str().unwrap_or("nobody yet")
            );
            Ok(0)
        }
        RulesCommand::Apply { file, check, server } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.display())))?;
            let document = parse_file(&text)?;
            let connection = Connection::open_as(&server, LocalIdentity::Cli).await?;
            if check {
                let checked = connection.post("/rules/check", &document).await?;
                eprintln!("{}: valid ({} rules); nothing was saved", file.display(), checked["rules"]);
            } else {
                let saved = connection.send(reqwest::Method::PUT, "/rules", Some(&document)).await?;
                eprintln!("Saved {} as version {}.", file.display(), saved["version"]);
            }
            Ok(0)
        }
        RulesCommand::Test { tool, args, agent, server } => {
            let arguments: Value =
                serde_json::from_str(&args).map_err(|e| CliError::Usage(format!("--args is not JSON: {e}")))?;
            let connection = Connection::open_as(&server, LocalIdentity::Cli).await?;
            let mut call = serde_json::json!({ "tool": tool, "arguments": arguments });
            if let Some(agent) = agent {
                call["agent"] = Value::String(agent);
            }
            let tested = connection.post("/rules/test", &call).await?;
            println!("{}", serde_json::to_string_pretty(&tested).unwrap_or_default());
            Ok(0)
        }
    }
}

/// A document from a file's text: JSON when it parses as JSON, else YAML (of which JSON is a subset, but JSON's
/// own parser reports its errors better).
fn parse_file(text: &str) -> CliResult<Value> {
    if let Ok(json) = serde_json::from_str::<Value>(text) {
        return Ok(json);
    }
    serde_norway::from_str::<Value>(text)
        .map_err(|e| CliError::Usage(format!("the file is neither JSON nor YAML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yaml_file_reads_as_the_json_document() {
        let yaml =
            "default: deny\nrules:\n  - name: big\n    tools: [pay]\n    when: args.amount > 1000\n    decision: ask\n";
        let document = parse_file(yaml).unwrap();
        assert_eq!(
            document,
            serde_json::json!({ "default": "deny", "rules": [
                { "name": "big", "tools": ["pay"], "when": "args.amount > 1000", "decision": "ask" }] })
        );
    }

    #[test]
    fn a_json_file_reads_as_itself() {
        let document = parse_file(r#"{"rules": [], "default": "allow"}"#).unwrap();
        assert_eq!(document, serde_json::json!({ "rules": [], "default": "allow" }));
    }
}
