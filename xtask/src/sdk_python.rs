//! The Python library's suite (`sdk/python`) against the real server binary.
//!
//! It runs in a virtualenv of its own under `target/`, with every package pinned by `sdk/python/constraints.txt`.
//! The install is redone only when `pyproject.toml` or the constraints change, so a second run starts the tests at
//! once.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, root, run};

/// What the virtualenv was last installed from: the files whose change calls for a new install.
const INSTALL_INPUTS: [&str; 2] = ["sdk/python/pyproject.toml", "sdk/python/constraints.txt"];

fn venv() -> PathBuf {
    root().join("target/sdk-python-venv")
}

/// Creates or updates the virtualenv.
pub fn prepare() -> Result {
    let sdk = root().join("sdk/python");
    let venv = venv();
    let python = venv.join("bin/python");
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv)).map_err(|e| {
            format!("{e}: the Python library's tests need Python 3.10 or newer with venv (Debian: python3-venv)")
        })?;
    }
    let mut wanted = Vec::new();
    for input in INSTALL_INPUTS {
        let path = root().join(input);
        wanted.extend(std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?);
    }
    // The install is editable, so it points at this checkout: a virtualenv copied from another one installs again.
    wanted.extend(sdk.display().to_string().as_bytes());
    let stamp = venv.join("installed-from");
    if std::fs::read(&stamp).ok().as_deref() != Some(wanted.as_slice()) {
        run(Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .arg("--constraint")
            .arg(sdk.join("constraints.txt"))
            .arg("--editable")
            .arg(format!("{}[test]", sdk.display())))?;
        std::fs::write(&stamp, &wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    }
    Ok(())
}

/// Runs pytest in the virtualenv [`prepare`] made, with `HOLDPOINT_BIN` set to `binary`.
pub fn test(binary: &Path) -> Result {
    let (sdk, venv) = (root().join("sdk/python"), venv());
    let python = venv.join("bin/python");
    let started = std::time::Instant::now();
    let result = run(Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(&sdk)
        .env("HOLDPOINT_BIN", binary)
        .env("MYPY_CACHE_DIR", venv.join("mypy-cache"))
        .env("PYTHONDONTWRITEBYTECODE", "1"));
    eprintln!("xtask: the Python library's suite took {:.0} s", started.elapsed().as_secs_f64());
    result
}
