//! Upstreams started as local processes (MCP's stdio transport): the operator's, declared in the configuration
//! file's `[[gateway.upstreams]]` and never through the API, since whoever could register one there could run any
//! program on the server.
//!
//! - [`StdioUpstream`]: one entry as the file gives it, checked when the file is read ([`parse_entries`]): a bad
//!   entry stops the server naming its key (`gateway.upstreams[1].name`).
//! - [`Configured`]: the entries as the server runs them, each in its workspace, resolved at startup: a name that
//!   an upstream registered through the API already has in that workspace is a startup error naming both.
//! - [`spawn`]: starts one as a child process for rmcp's child-process transport. The process is started when the
//!   gateway first needs it (a `tools/list` or a call), started again at the next need after it died, and killed
//!   when the connection is dropped or the server shuts down. It does not inherit Holdpoint's environment, which
//!   holds its secrets: only [`INHERITED_VARIABLES`] and the entry's `env`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use app::types::{Upstream, UpstreamHealth, UpstreamProcess, UpstreamTransport};
use chrono::{DateTime, Utc};
use rmcp::transport::TokioChildProcess;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::store::Store;

/// Where the entries are in the configuration file, as errors name them.
pub const KEY: &str = "gateway.upstreams";
/// The variables of Holdpoint's own environment a configured process gets (when they are set): what programs need
/// to find their tools and speak the locale, none of Holdpoint's settings or secrets.
pub const INHERITED_VARIABLES: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// The most entries the file may have.
const ENTRIES_MAX: usize = 50;

/// One `[[gateway.upstreams]]` entry: an MCP server the gateway starts as a child process and speaks to over its
/// stdin and stdout.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioUpstream {
    /// The workspace whose gateway lists it (created if missing); the default workspace unless given.
    #[serde(default = "default_workspace")]
    pub workspace: String,
    /// How the gateway names it, as an API upstream's name: 1..=32 of `a-z`, `0-9` and `-`.
    pub name: String,
    /// The program: a path, or a name looked up in `PATH`.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for it, on top of [`INHERITED_VARIABLES`]; their values (credentials, often) are never shown.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (an absolute path); Holdpoint's own unless given.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

impl std::fmt::Debug for StdioUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioUpstream")
            .field("workspace", &self.workspace)
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .finish()
    }
}

fn default_workspace() -> String {
    crate::people::DEFAULT_WORKSPACE.to_owned()
}

/// Reads the file's `[[gateway.upstreams]]` array. `Err` is the key of what is wrong (`gateway.upstreams[2].env.A`)
/// and why.
pub fn parse_entries(value: toml::Value) -> Result<Vec<StdioUpstream>, (String, String)> {
    let toml::Value::Array(items) = value else {
        return Err((KEY.into(), "expected an array of tables: [[gateway.upstreams]] with name, command, ...".into()));
    };
    if items.len() > ENTRIES_MAX {
        return Err((KEY.into(), format!("at most {ENTRIES_MAX} upstreams")));
    }
    let mut entries = Vec::with_capacity(items.len());
    let mut seen = BTreeSet::new();
    for (index, item) in items.into_iter().enumerate() {
        let key = format!("{KEY}[{index}]");
        if !item.is_table() {
            return Err((key, "expected a table with name, command, args, env, cwd and workspace".into()));
        }
        // The key a value of the wrong type is at is named (`gateway.upstreams[0].args[1]`), not only its table.
        let entry: StdioUpstream = serde_path_to_error::deserialize(item).map_err(|e| {
            let at = e.path().to_string();
            let at = if at == "." { key.clone() } else { format!("{key}.{at}") };
            (at, e.into_inner().message().to_owned())
        })?;
        check(&entry).map_err(|(field, problem)| (format!("{key}.{field}"), problem))?;
        if !seen.insert((entry.workspace.clone(), entry.name.clone())) {
            return Err((
                format!("{key}.name"),
                format!("workspace {:?} has another upstream named {:?} above", entry.workspace, entry.name),
            ));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// What is wrong with an entry, as its field and the reason.
fn check(entry: &StdioUpstream) -> Result<(), (String, String)> {
    let fail = |field: String, problem: &str| Err((field, problem.to_owned()));
    if entry.workspace.trim().is_empty() || entry.workspace.len() > 64 {
        return fail("workspace".into(), "1..=64 characters");
    }
    if !super::valid_name(&entry.name) {
        return fail("name".into(), "1..=32 characters of a-z, 0-9 and -");
    }
    if entry.command.trim().is_empty() {
        return fail("command".into(), "the program to start: a path or a name found in PATH");
    }
    if entry.command.contains('\0') {
        return fail("command".into(), "no NUL character");
    }
    if let Some(index) = entry.args.iter().position(|arg| arg.contains('\0')) {
        return fail(format!("args[{index}]"), "no NUL character");
    }
    for (name, value) in &entry.env {
        if name.is_empty() || name.contains(['=', '\0']) {
            return fail(format!("env.{name}"), "a variable's name is not empty and has no '=' or NUL");
        }
        if value.contains('\0') {
            return fail(format!("env.{name}"), "no NUL character");
        }
    }
    if let Some(cwd) = &entry.cwd
        && !cwd.is_absolute()
    {
        return fail("cwd".into(), "an absolute path");
    }
    Ok(())
}

/// One configured upstream as the server runs it.
pub struct ConfiguredUpstream {
    /// Stable across restarts: derived from the workspace and the name.
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub spec: StdioUpstream,
    /// When this server read it: what the API shows as created and updated.
    pub since: DateTime<Utc>,
    /// How the gateway last found it; kept in memory (the file, not the database, holds these upstreams).
    health: Mutex<UpstreamHealth>,
}

impl ConfiguredUpstream {
    /// Records how the gateway found it at `at`.
    pub fn record(&self, at: DateTime<Utc>, problem: Option<&str>) {
        let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        match problem {
            None => health.last_success_at = Some(at),
            Some(problem) => {
                health.last_error_at = Some(at);
                health.last_error = Some(problem.chars().take(500).collect());
            }
        }
    }

    /// As the API shows it: the names of its variables, never their values.
    pub fn wire(&self) -> Upstream {
        Upstream {
            id: self.id,
            name: self.spec.name.clone(),
            url: None,
            transport: UpstreamTransport::Stdio,
            configured: true,
            process: Some(UpstreamProcess {
                command: self.spec.command.clone(),
                args: self.spec.args.clone(),
                env: self.spec.env.keys().cloned().collect(),
                cwd: self.spec.cwd.as_ref().map(|cwd| cwd.display().to_string()),
            }),
            headers: Vec::new(),
            created_at: self.since,
            updated_at: self.since,
            health: self.health.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        }
    }
}

/// The configured upstreams of every workspace.
#[derive(Default)]
pub struct Configured {
    upstreams: Vec<Arc<ConfiguredUpstream>>,
}

impl Configured {
    /// Resolves each entry's workspace (creating it if missing) and refuses a name an upstream registered through
    /// the API has in that workspace: `Err` names both.
    pub async fn resolve(store: &dyn Store, entries: &[StdioUpstream]) -> Result<Configured, String> {
        let since = crate::store::now();
        let mut upstreams = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let workspace = store.ensure_workspace(&entry.workspace).await.map_err(|e| e.to_string())?;
            if store.upstream(workspace.id, &entry.name).await.map_err(|e| e.to_string())?.is_some() {
                return Err(format!(
                    "`{KEY}[{index}]` names its upstream {:?}, but workspace {:?} has an upstream of that name \
                     registered through the API: rename one of them (`DELETE /api/v1/upstreams/{}` removes the API's)",
                    entry.name, entry.workspace, entry.name
                ));
            }
            let digest = Sha256::digest(format!("{}\n{}", entry.workspace, entry.name).as_bytes());
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(&digest[..16]);
            upstreams.push(Arc::new(ConfiguredUpstream {
                id: uuid::Builder::from_random_bytes(bytes).into_uuid(),
                workspace_id: workspace.id,
                spec: entry.clone(),
                since,
                health: Mutex::new(UpstreamHealth::default()),
            }));
        }
        Ok(Configured { upstreams })
    }

    /// A workspace's configured upstreams, by name.
    pub fn of(&self, workspace_id: Uuid) -> Vec<Arc<ConfiguredUpstream>> {
        let mut found: Vec<_> =
            self.upstreams.iter().filter(|upstream| upstream.workspace_id == workspace_id).cloned().collect();
        found.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        found
    }

    /// The workspace's configured upstream of that name.
    pub fn find(&self, workspace_id: Uuid, name: &str) -> Option<Arc<ConfiguredUpstream>> {
        self.upstreams.iter().find(|u| u.workspace_id == workspace_id && u.spec.name == name).cloned()
    }
}

/// Starts `spec`'s process for rmcp's child-process transport: stdin and stdout carry MCP, stderr is logged line by
/// line under the upstream's name. The process is killed when the transport is dropped (and so when the server
/// stops, whatever else happens).
pub fn spawn(spec: &StdioUpstream) -> std::io::Result<TokioChildProcess> {
    let mut command = tokio::process::Command::new(&spec.command);
    command.args(&spec.args).env_clear().kill_on_drop(true);
    for name in INHERITED_VARIABLES {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&spec.env);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let (process, stderr) = TokioChildProcess::builder(command).stderr(std::process::Stdio::piped()).spawn()?;
    if let Some(stderr) = stderr {
        let name = spec.name.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let line: String = line.chars().take(2000).collect();
                tracing::info!(upstream = %name, "{line}");
            }
        });
    }
    Ok(process)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Result<Vec<StdioUpstream>, (String, String)> {
        let mut table: toml::Table = toml::from_str(text).unwrap();
        let mut gateway = table.remove("gateway").unwrap();
        parse_entries(gateway.as_table_mut().unwrap().remove("upstreams").unwrap())
    }

    #[test]
    fn an_entry_needs_only_a_name_and_a_command_and_is_in_the_default_workspace() {
        let read = entries("[[gateway.upstreams]]\nname = \"files\"\ncommand = \"mcp-files\"\n").unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].workspace, "default");
        assert!(read[0].args.is_empty() && read[0].env.is_empty() && read[0].cwd.is_none());
    }

    #[test]
    fn a_bad_entry_is_named_by_its_key() {
        let cases = [
            ("[[gateway.upstreams]]\nname = \"Files!\"\ncommand = \"x\"\n", "gateway.upstreams[0].name"),
            ("[[gateway.upstreams]]\nname = \"a\"\ncommand = \" \"\n", "gateway.upstreams[0].command"),
            ("[[gateway.upstreams]]\nname = \"a\"\n", "gateway.upstreams[0]"),
            ("[[gateway.upstreams]]\nname = \"a\"\ncommand = \"x\"\ncmd = \"y\"\n", "gateway.upstreams[0].cmd"),
            (
                "[[gateway.upstreams]]\nname = \"a\"\ncommand = \"x\"\nargs = [\"a\", 5]\n",
                "gateway.upstreams[0].args[1]",
            ),
            ("[[gateway.upstreams]]\nname = \"a\"\ncommand = \"x\"\ncwd = \"rel\"\n", "gateway.upstreams[0].cwd"),
            (
                "[[gateway.upstreams]]\nname = \"a\"\ncommand = \"x\"\nenv = { \"A=B\" = \"1\" }\n",
                "gateway.upstreams[0].env.A=B",
            ),
            (
                "[[gateway.upstreams]]\nname = \"a\"\ncommand = \"x\"\n[[gateway.upstreams]]\nname = \"a\"\ncommand = \"y\"\n",
                "gateway.upstreams[1].name",
            ),
            ("[gateway]\nupstreams = \"files\"\n", "gateway.upstreams"),
        ];
        for (text, key) in cases {
            let (named, why) = entries(text).unwrap_err();
            assert_eq!(named, key, "{text}: {why}");
        }
    }

    #[test]
    fn the_same_name_in_two_workspaces_is_two_upstreams() {
        let text = "[[gateway.upstreams]]\nname = \"a\"\ncommand = \"x\"\n[[gateway.upstreams]]\nworkspace = \"ops\"\n\
                    name = \"a\"\ncommand = \"x\"\n";
        assert_eq!(entries(text).unwrap().len(), 2);
    }

    #[test]
    fn debug_output_hides_the_variables_values() {
        let read =
            entries("[[gateway.upstreams]]\nname = \"a\"\ncommand = \"x\"\nenv = { TOKEN = \"s3cret\" }\n").unwrap();
        let shown = format!("{:?}", read[0]);
        assert!(shown.contains("TOKEN") && !shown.contains("s3cret"), "{shown}");
    }
}
