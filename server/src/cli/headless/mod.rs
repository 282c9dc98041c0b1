//! `holdpoint ask`, `run` and `resume`: Holdpoint for shell scripts, CI jobs and cron.
//!
//! For them the process exiting *is* the pause: it saves everything, writes `.holdpoint/pause.json`, prints the
//! same JSON and exits 10; a later process picks up where it stopped. Exit codes: 0 completed / answered /
//! approved; 1 error; 2 usage; 10 paused; 11 rejected; 12 expired or cancelled.

mod ask;
mod run;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use ask::{AskArgs, AskType, ask};
pub use run::{ResumeArgs, RunArgs, resume, run};

use crate::cli::client::{CliError, CliResult, LOCAL_DIR};

pub const EXIT_PAUSED: u8 = 10;
pub const EXIT_REJECTED: u8 = 11;
pub const EXIT_EXPIRED: u8 = 12;
const PAUSE_FILE: &str = "pause.json";

/// How a command reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people: progress on stderr, the result on stdout.
    Text,
    /// The outcome as one JSON object on stdout, an error included.
    Json,
}

fn pause_path() -> PathBuf {
    Path::new(LOCAL_DIR).join(PAUSE_FILE)
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
