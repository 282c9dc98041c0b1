//! The Python side of the tests: a virtualenv under `target/` with the packages of `requirements.txt`, made on
//! first use and made again only when that file changes, so `cargo test` needs nothing installed beforehand but
//! Python 3 with `venv` (Debian: python3-venv) and PyPI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// This directory: the scripts and `requirements.txt`.
pub fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/channels")
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
    }
}

fn run(command: &mut Command) {
    let status = command.status().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(status.success(), "{command:?} failed: {status}");
}

/// The virtualenv's interpreter, the virtualenv made or brought up to date first. Several test binaries may ask at
/// once (`cargo test` runs them one after another, but two `cargo test` may run side by side): a lock file keeps
/// the install to one of them.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| virtualenv("requirements.txt", "channels-venv")).clone()
}

/// The interpreter of a second virtualenv, with the official MCP Python SDK 2.x (`requirements-mcp2.txt`): the
/// servers that speak MCP 2026-07-28 (multi round-trip requests). The others stay on 1.x, whose servers still send
/// `elicitation/create` during a call, the older way the gateway must keep answering.
pub fn python_mcp2() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| virtualenv("requirements-mcp2.txt", "channels-venv-mcp2")).clone()
}

fn virtualenv(requirements: &str, name: &str) -> PathBuf {
    let target = target_dir();
    std::fs::create_dir_all(&target).unwrap();
    let lock = std::fs::File::create(target.join(format!("{name}.lock"))).unwrap();
    lock.lock().unwrap();
    let venv = target.join(name);
    let python = venv.join("bin/python");
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    }
    let requirements = here().join(requirements);
    let wanted = std::fs::read(&requirements).unwrap();
    let stamp = venv.join("installed-from");
    if std::fs::read(&stamp).ok().as_deref() != Some(wanted.as_slice()) {
        run(Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "-r"])
            .arg(&requirements));
        std::fs::write(&stamp, &wanted).unwrap();
    }
    python
}
