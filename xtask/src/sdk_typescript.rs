//! The TypeScript library's suite (`sdk/typescript`) against the real server binary.
//!
//! The packages are exactly those `package-lock.json` pins, installed with `npm ci` only when `node_modules` is
//! missing or was installed from other manifests, so a second run starts compiling at once. `tsc` (strict)
//! compiles the library, then its tests and examples against the library's own declarations, and node's test
//! runner runs what it wrote.

use std::path::Path;
use std::process::Command;

use crate::{Result, root, run};

/// What `node_modules` was last installed from: the files whose change calls for a new install.
const INSTALL_INPUTS: [&str; 2] = ["package.json", "package-lock.json"];
/// Written into `node_modules` after an install succeeds, with the contents of `INSTALL_INPUTS`.
const INSTALL_STAMP: &str = "node_modules/.holdpoint-installed-from";
/// What tsc writes: removed first, so a deleted test never runs from an earlier build.
const BUILD_OUTPUTS: [&str; 2] = ["dist", "dist-test"];
const OLDEST_NODE_MAJOR: u32 = 20;

/// Installs the pinned packages if needed.
pub fn prepare() -> Result {
    check_node()?;
    ensure_installed(&root().join("sdk/typescript"))
}

/// Builds the library and its tests with the packages [`prepare`] installed, then runs them with `HOLDPOINT_BIN` set
/// to `binary`.
pub fn test(binary: &Path) -> Result {
    let sdk = root().join("sdk/typescript");
    for output in BUILD_OUTPUTS {
        let path = sdk.join(output);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
        }
    }
    let tsc = sdk.join("node_modules/.bin/tsc");
    run(Command::new(&tsc).args(["-p", "tsconfig.json"]).current_dir(&sdk))?;
    run(Command::new(&tsc).args(["-p", "tsconfig.test.json"]).current_dir(&sdk))?;
    let started = std::time::Instant::now();
    // Two files at a time: most of a test's time is spent waiting for the server (deadlines, long-polls).
    let result = run(Command::new("node")
        .args(["--test", "--test-concurrency=2", "dist-test/tests/"])
        .current_dir(&sdk)
        .env("HOLDPOINT_BIN", binary));
    eprintln!("xtask: the TypeScript library's suite took {:.0} s", started.elapsed().as_secs_f64());
    result
}

fn check_node() -> Result {
    let output = Command::new("node").arg("--version").output().map_err(|e| {
        format!("cannot run node ({e}): the TypeScript library's tests need Node.js {OLDEST_NODE_MAJOR} or newer")
    })?;
    let version = String::from_utf8_lossy(&output.stdout);
    let major = version.trim().trim_start_matches('v').split('.').next().and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if major >= OLDEST_NODE_MAJOR => Ok(()),
        _ => Err(format!(
            "the TypeScript library's tests need Node.js {OLDEST_NODE_MAJOR} or newer, found {:?}",
            version.trim()
        )),
    }
}

fn ensure_installed(sdk: &Path) -> Result {
    let mut wanted = Vec::new();
    for input in INSTALL_INPUTS {
        let path = sdk.join(input);
        wanted.extend(std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?);
    }
    let stamp = sdk.join(INSTALL_STAMP);
    if std::fs::read(&stamp).ok().as_deref() == Some(wanted.as_slice()) {
        return Ok(());
    }
    run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(sdk))
        .map_err(|e| format!("{e}: the TypeScript library's tests need npm and the npm registry"))?;
    std::fs::write(&stamp, &wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))
}
