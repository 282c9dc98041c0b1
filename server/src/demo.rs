//! `holdpoint demo`: the server with a demo workspace loaded, so a newcomer sees every kind of question within
//! seconds, asked by agents that really run through the executor.
//!
//! The agents (`server/demo/agents.yaml`) use `script:` models whose turns are replayed from the YAML files beside
//! it, so no model provider or API key is needed. At start the demo writes those scripts into the scripts
//! directory (`demo/`), creates or updates the agents in the `default` workspace, starts one run of each top-level
//! agent (unless one is still open from an earlier start) and serves exactly like `holdpoint serve`. Within a
//! second or two the inbox has an approval of a `shell` call, a blocking choice, a non-blocking preference, a form,
//! and an error-recovery question from a sub-agent.
//!
//! The demo never executes commands: the `shell` tool runs in dry-run mode whatever the configuration says.

use std::path::Path;

use app::types::{AgentSpec, Role};
use serde::Deserialize;
use sqlx::types::Json;
use uuid::Uuid;

use crate::config::ServeConfig;
use crate::credentials::{hash_secret, new_token_secret};
use crate::runtime::Runtime;
use crate::runtime::settings::ShellMode;
use crate::server::{self, DEFAULT_WORKSPACE};
use crate::store::{AgentRow, AuditActor, RunFilter, Store, TokenRow, now};

/// The subfolder of the scripts directory the demo's scripts are written to (agents name them `demo/<file>`).
pub const SCRIPTS_SUBDIR: &str = "demo";
/// The project of every demo run, so the demo's questions are easy to filter out (or to find).
pub const PROJECT: &str = "demo";
/// The name of the admin token the demo creates when no bootstrap token is configured.
pub const TOKEN_NAME: &str = "demo";

/// The demo's agent definitions.
const AGENTS: &str = include_str!("../demo/agents.yaml");

/// The scripts of the demo's agents, by file name under [`SCRIPTS_SUBDIR`].
pub const SCRIPTS: [(&str, &str); 5] = [
    ("release-manager.yaml", include_str!("../demo/release-manager.yaml")),
    ("writer.yaml", include_str!("../demo/writer.yaml")),
    ("triage.yaml", include_str!("../demo/triage.yaml")),
    ("coordinator.yaml", include_str!("../demo/coordinator.yaml")),
    ("migrator.yaml", include_str!("../demo/migrator.yaml")),
];

/// One entry of `agents.yaml`: an agent definition and, for top-level agents, the task the demo starts it with.
#[derive(Debug, Clone, Deserialize)]
pub struct DemoAgent {
    #[serde(flatten)]
    pub spec: AgentSpec,
    /// The input of the run the demo starts; `None` for sub-agents, which run only when spawned.
    #[serde(default)]
    pub start: Option<String>,
}

/// The demo's agents, in the order their runs are started.
pub fn agents() -> Result<Vec<DemoAgent>, String> {
    serde_norway::from_str(AGENTS).map_err(|e| format!("the demo's agents.yaml is invalid: {e}"))
}

/// Writes the demo's scripts into `<scripts_dir>/demo/`, replacing older copies so that an upgraded binary
/// replays its own scripts.
pub fn write_scripts(scripts_dir: &Path) -> Result<(), String> {
    let dir = scripts_dir.join(SCRIPTS_SUBDIR);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create the scripts directory {}: {e}", dir.display()))?;
    for (file, text) in SCRIPTS {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| format!("cannot write the demo script {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Creates the agent, or brings a same-named one up to date with the demo's definition.
async fn upsert_agent(store: &dyn Store, workspace_id: Uuid, spec: &AgentSpec) -> Result<AgentRow, String> {
    let failed = |e: crate::store::StoreError| format!("cannot save the demo agent {:?}: {e}", spec.name);
    if let Some(existing) = store.agent_by_name(workspace_id, &spec.name).await.map_err(failed)? {
        if existing.spec.0 == *spec {
            return Ok(existing);
        }
        return store
            .update_agent(workspace_id, existing.id, spec, now())
            .await
            .map_err(failed)?
            .ok_or_else(|| format!("the demo agent {:?} disappeared while it was being updated", spec.name));
    }
    let at = now();
    let row = AgentRow {
        id: Uuid::now_v7(),
        workspace_id,
        name: spec.name.clone(),
        spec: Json(spec.clone()),
        created_at: at,
        updated_at: at,
    };
    store.insert_agent(&row).await.map_err(failed)?;
    Ok(row)
}

/// Whether the agent has a run that is not over yet; restarting the demo then leaves it be instead of asking
/// the same questions twice.
async fn has_open_run(store: &dyn Store, workspace_id: Uuid, agent_id: Uuid) -> Result<bool, String> {
    let filter = RunFilter { agent_id: Some(agent_id), limit: 100, ..Default::default() };
    let runs = store.list_runs(workspace_id, &filter).await.map_err(|e| format!("cannot list the demo's runs: {e}"))?;
    Ok(runs.iter().any(|run| !run.status.is_terminal()))
}

/// Creates an admin token for the demo and returns its id and secret (the secret is shown once, never stored).
async fn create_token(store: &dyn Store, workspace_id: Uuid) -> Result<(Uuid, String), String> {
    let secret = new_token_secret();
    let token = TokenRow {
        id: Uuid::now_v7(),
        workspace_id,
        name: TOKEN_NAME.to_owned(),
        role: Role::Admin,
        secret_hash: hash_secret(&secret),
        created_at: now(),
        created_by: Some("demo".into()),
        maker_id: None,
    };
    let actor = AuditActor::policy("holdpoint demo", None);
    crate::people::store_token(store, &token, &actor)
        .await
        .map_err(|e| format!("cannot create the demo token: {e}"))?;
    Ok((token.id, secret))
}

/// Loads the demo agents into the `default` workspace (replacing the definitions of same-named agents) and starts a
/// run of each top-level agent that has no open run. Returns how many runs were started. The scripts must be
/// written first, and the runtime's `shell` should be dry-run: the release manager asks to run `terraform apply`.
pub async fn load(store: &dyn Store, runtime: &Runtime, created_by: Option<Uuid>) -> Result<usize, String> {
    let workspace = store
        .ensure_workspace(DEFAULT_WORKSPACE)
        .await
        .map_err(|e| format!("cannot open the {DEFAULT_WORKSPACE:?} workspace: {e}"))?;
    // Every agent exists before any run starts: the coordinator spawns the migrator by name.
    let mut to_start = Vec::new();
    for agent in agents()? {
        let name = agent.spec.name.clone();
        let spec = crate::runs::validate_agent(agent.spec, runtime).map_err(|err| {
            let detail = err.detail();
            let fields = detail.details.map(|d| format!(" {d}")).unwrap_or_default();
            format!("the demo agent {name:?} is invalid: {}{fields}", detail.message)
        })?;
        let row = upsert_agent(store, workspace.id, &spec).await?;
        if let Some(input) = agent.start {
            to_start.push((row, input));
        }
    }
    let mut started = 0;
    for (agent, input) in to_start {
        if has_open_run(store, workspace.id, agent.id).await? {
            tracing::info!(agent = %agent.name, "the demo agent already has an open run; not starting another");
            continue;
        }
        let new = crate::runtime::queued::new_run_row(
            workspace.id,
            Some(agent.id),
            agent.spec.0.clone(),
            input,
            Some(PROJECT.to_owned()),
            None,
            None,
            runtime.config.max_total_steps,
            created_by,
            now(),
        );
        store
            .create_run(&new.run, &new.segment, None)
            .await
            .map_err(|e| format!("cannot start the demo agent {:?}: {e}", agent.name))?;
        started += 1;
    }
    Ok(started)
}

/// Runs `holdpoint demo`: loads the demo, then serves until Ctrl-C or SIGTERM.
pub async fn run(mut config: ServeConfig) -> Result<(), String> {
    // The release manager asks to run `terraform apply`: approving it in a demo must never run it.
    if config.runtime.shell != ShellMode::DryRun {
        tracing::info!("the demo runs the shell tool in dry-run mode: commands are reported, never executed");
    }
    config.runtime.shell = ShellMode::DryRun;
    write_scripts(&config.scripts_dir())?;
    let addr = config.addr;
    let has_bootstrap_token = config.bootstrap_token.is_some();
    let state = server::build_state(config).await.map_err(|e| e.to_string())?;
    if !state.config.run_workers {
        tracing::warn!("HOLDPOINT_RUN_WORKERS is off: the demo's runs will wait in the queue and ask nothing");
    }
    let token = if has_bootstrap_token {
        None
    } else {
        let workspace = state
            .store
            .ensure_workspace(DEFAULT_WORKSPACE)
            .await
            .map_err(|e| format!("cannot open the {DEFAULT_WORKSPACE:?} workspace: {e}"))?;
        Some(create_token(state.store.as_ref(), workspace.id).await?)
    };
    let started = load(state.store.as_ref(), &state.runtime, token.as_ref().map(|(id, _)| *id)).await?;
    // Bind before printing, so the sign-in address has the real port even when port 0 was asked for.
    let listener = server::bind(addr).await.map_err(|e| e.to_string())?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!(
        "holdpoint demo: started {started} demo run(s) in project {PROJECT:?}; their questions appear at \
         http://{local}/inbox (shell commands run in dry-run mode)"
    );
    // Test harnesses read the token from this line on stdout.
    match &token {
        Some((_, secret)) => println!("Demo token (sign in at http://{local}/signin): {secret}"),
        None => println!("Sign in at http://{local}/signin with your bootstrap token"),
    }
    server::serve(state, listener).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::questions::{TimeoutBounds, build_question};
    use crate::runtime::model::{ScriptModel, ScriptTurn};
    use app::types::{NewQuestion, QuestionKind, ResponseType};
    use std::collections::HashSet;

    fn turns(file: &str) -> Vec<ScriptTurn> {
        let (_, text) = SCRIPTS.iter().find(|(name, _)| *name == file).expect("the script is embedded");
        ScriptModel::parse(file, text).expect("the script parses");
        serde_norway::from_str(text).expect("the script is a list of turns")
    }

    fn script_of(agent: &DemoAgent) -> &str {
        agent.spec.model.strip_prefix("script:demo/").expect("demo agents use demo scripts")
    }

    #[test]
    fn every_agent_replays_an_embedded_script_with_tools_it_has() {
        let agents = agents().unwrap();
        let names: HashSet<&str> = agents.iter().map(|a| a.spec.name.as_str()).collect();
        assert_eq!(names.len(), agents.len(), "agent names are unique");
        for agent in &agents {
            for turn in turns(script_of(agent)) {
                for call in turn.tool_calls {
                    assert!(
                        agent.spec.tools.contains(&call.name),
                        "{} calls {} it does not have",
                        agent.spec.name,
                        call.name
                    );
                    if call.name == "spawn_agents" {
                        for child in call.arguments["agents"].as_array().unwrap() {
                            assert!(names.contains(child["agent"].as_str().unwrap()), "spawns an unknown agent");
                        }
                    }
                }
            }
        }
        let scripts: HashSet<&str> = agents.iter().map(script_of).collect();
        assert_eq!(scripts, SCRIPTS.iter().map(|(name, _)| *name).collect(), "every script is used");
    }

    #[test]
    fn every_question_the_demo_asks_is_valid_and_every_kind_is_asked() {
        let bounds = TimeoutBounds { min_seconds: 300, max_seconds: 86_400 };
        let mut asked = HashSet::new();
        for agent in agents().unwrap() {
            for turn in turns(script_of(&agent)) {
                for call in turn.tool_calls.iter().filter(|c| c.name == "ask_user") {
                    let input: NewQuestion = serde_json::from_value(call.arguments.clone()).unwrap();
                    let row = build_question(input, Uuid::nil(), None, bounds, now())
                        .unwrap_or_else(|e| panic!("{}: {:?}", agent.spec.name, e.detail()));
                    asked.insert((row.kind, row.response_type));
                }
                if turn
                    .tool_calls
                    .iter()
                    .any(|c| agent.spec.approval_policy.for_tool(&c.name) == app::types::ToolPolicy::Prompt)
                {
                    asked.insert((QuestionKind::Approval, ResponseType::Approval));
                }
            }
        }
        for (kind, response_type) in [
            (QuestionKind::Approval, ResponseType::Approval),
            (QuestionKind::Blocking, ResponseType::Choice),
            (QuestionKind::Blocking, ResponseType::Form),
            (QuestionKind::NonBlocking, ResponseType::Boolean),
            (QuestionKind::ErrorRecovery, ResponseType::ErrorRecovery),
        ] {
            assert!(asked.contains(&(kind, response_type)), "no {kind} {response_type} question");
        }
    }

    #[test]
    fn only_top_level_agents_are_started() {
        let agents = agents().unwrap();
        let started: Vec<&str> = agents.iter().filter(|a| a.start.is_some()).map(|a| a.spec.name.as_str()).collect();
        assert_eq!(started, ["release-manager", "writer", "triage", "coordinator"]);
    }

    #[test]
    fn the_scripts_are_written_under_demo() {
        let dir = std::env::temp_dir().join(format!("holdpoint-demo-{}", Uuid::now_v7()));
        write_scripts(&dir).unwrap();
        for (file, text) in SCRIPTS {
            assert_eq!(std::fs::read_to_string(dir.join(SCRIPTS_SUBDIR).join(file)).unwrap(), text);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
