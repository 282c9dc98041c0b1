//! Finding, and on first use installing, the tools the build and the tests need.
//!
//! Each check is quick when the tool is already there, so a second run starts building at once.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use crate::{Background, Result, root, run};

/// `wasm-opt` from npm's `binaryen`: Debian's binaryen 108 produces wasm that fails to hydrate
/// (`WebAssembly.Table.set(): Argument 1 is invalid`).
const BINARYEN_VERSION: &str = "132.0.0";

/// The tools of the site build. On a machine's first build, wasm-bindgen's CLI compiles (about 3 minutes) while the
/// wasm builds; it is first needed once the wasm is built.
pub struct SiteTools {
    wasm_bindgen: PathBuf,
    installing_wasm_bindgen: Mutex<Option<Background>>,
    pub wasm_opt: PathBuf,
}

impl SiteTools {
    /// wasm-bindgen's CLI, once its install (if one was needed) has ended.
    pub fn wasm_bindgen(&self) -> Result<&PathBuf> {
        let installing = self.installing_wasm_bindgen.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(install) = installing {
            install.wait()?;
        }
        Ok(&self.wasm_bindgen)
    }
}

fn output_of(command: &mut Command) -> Option<String> {
    let output = command.stderr(Stdio::null()).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The version of `name` that Cargo.lock pins.
fn locked_version(name: &str) -> Result<String> {
    let lock =
        std::fs::read_to_string(root().join("Cargo.lock")).map_err(|e| format!("cannot read Cargo.lock: {e}"))?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{name}\"")
            && let Some(version) = lines.next().and_then(|l| l.strip_prefix("version = \""))
        {
            return Ok(version.trim_end_matches('"').to_owned());
        }
    }
    Err(format!("{name} is not in Cargo.lock"))
}

fn cargo_bin_dir() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from(".cargo"))
        .join("bin")
}

fn ensure_wasm_target() -> Result {
    let installed = output_of(Command::new("rustup").args(["target", "list", "--installed"])).unwrap_or_default();
    if installed.lines().any(|l| l.trim() == "wasm32-unknown-unknown") {
        return Ok(());
    }
    run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))
}

/// wasm-bindgen's CLI must be exactly the version of the `wasm-bindgen` crate in Cargo.lock. A missing one is
/// installed in the background: the wasm build that comes first leaves a core idle for most of its link-time
/// optimisation, which the install's compilation takes.
fn ensure_wasm_bindgen() -> Result<(PathBuf, Option<Background>)> {
    let version = locked_version("wasm-bindgen")?;
    let binary = cargo_bin_dir().join("wasm-bindgen");
    let installed = output_of(Command::new(&binary).arg("--version")).unwrap_or_default();
    if installed.split_whitespace().nth(1) == Some(version.as_str()) {
        return Ok((binary, None));
    }
    eprintln!("xtask: installing wasm-bindgen-cli {version} in the background (once; it must match Cargo.lock)");
    let install = Background::start(
        "installing wasm-bindgen-cli",
        crate::cargo().args(["install", "wasm-bindgen-cli", "--version", &version, "--force"]),
    )?;
    Ok((binary, Some(install)))
}

fn tools_dir() -> PathBuf {
    root().join("target/xtask-tools")
}

fn ensure_npm() -> Result {
    output_of(Command::new("npm").arg("--version")).map(|_| ()).ok_or_else(|| {
        "npm is missing: install Node.js 20 or newer (Debian: `apt-get install -y nodejs npm`)".to_owned()
    })
}

fn ensure_wasm_opt() -> Result<PathBuf> {
    let dir = tools_dir();
    let binary = dir.join("node_modules/.bin/wasm-opt");
    let installed = output_of(Command::new(&binary).arg("--version")).unwrap_or_default();
    let major = BINARYEN_VERSION.split('.').next().unwrap_or_default();
    if !installed.contains(&format!("version {major}")) {
        ensure_npm()?;
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        run(Command::new("npm").args([
            "install",
            "--prefix",
            &dir.display().to_string(),
            "--no-audit",
            "--no-fund",
            "--no-save",
            &format!("binaryen@{BINARYEN_VERSION}"),
        ]))?;
    }
    Ok(binary)
}

/// Everything the site build needs.
pub fn ensure_site_tools() -> Result<SiteTools> {
    ensure_wasm_target()?;
    let (wasm_bindgen, installing) = ensure_wasm_bindgen()?;
    let wasm_opt = ensure_wasm_opt()?;
    Ok(SiteTools { wasm_bindgen, installing_wasm_bindgen: Mutex::new(installing), wasm_opt })
}

fn is_root() -> bool {
    output_of(Command::new("id").arg("-u")).is_some_and(|uid| uid.trim() == "0")
}

/// Chromium from Debian (Playwright's own browser download cannot work here).
pub fn ensure_chromium() -> Result {
    let chromium = PathBuf::from("/usr/bin/chromium");
    if !chromium.exists() {
        let install = "apt-get install -y chromium";
        if !is_root() {
            return Err(format!("Chromium is missing; install it with: sudo {install}"));
        }
        eprintln!("xtask: installing Chromium from Debian's packages");
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    Ok(())
}

/// The end2end npm packages.
pub fn ensure_end2end_packages() -> Result {
    ensure_npm()?;
    let end2end = root().join("end2end");
    // Every package the tests import: a checkout that installed before one was added installs again.
    let installed = ["playwright-core", "@modelcontextprotocol/sdk", "axe-core"]
        .iter()
        .all(|package| end2end.join("node_modules").join(package).join("package.json").exists());
    if !installed {
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&end2end))?;
    }
    Ok(())
}
