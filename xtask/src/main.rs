//! `cargo xtask`: the README's commands. `serve` builds and runs Holdpoint, `demo` the same with the demo workspace
//! loaded; `test` runs every test; `dist` makes the release's downloads; `bench` runs the benchmark suite (never part
//! of `test`).
//!
//! It does what cargo-leptos would (wasm build, wasm-bindgen, wasm-opt, CSS and assets into the site root, then the
//! server) without needing cargo-leptos, which takes half an hour to compile. Every tool it needs is installed on
//! first use and found again at once after that.

mod dist;
mod sdk_python;
mod sdk_typescript;
mod site;
mod tools;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  serve [--release] [-- ARGS...]   build the site and the server, then run `holdpoint serve ARGS...`
  demo [--release] [-- ARGS...]    the same with `holdpoint demo ARGS...`: agents that ask every kind of question
  test                             run every test: unit, API (SQLite and PostgreSQL), browser (Playwright),
                                   the Python and TypeScript libraries' suites
  site [--release]                 build only the site (wasm, JS, CSS) into target/site
  dist                             build the site and a release binary with it built in, then pack them into
                                   target/dist: holdpoint-<version>-<target>.tar.gz and a Debian package
  bench [-- ARGS...]               build the site, run the benchmark suite (release build) and write
                                   docs/benchmarks.md; ARGS: --only hitl,delivery,webhooks,fanout,inbox,rebuild,site  --out PATH
";

/// Why a step failed: one line for the person at the terminal.
pub type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve("serve", &args[1..]),
        Some("demo") => serve("demo", &args[1..]),
        Some("test") => test(&args[1..]),
        Some("site") => tools::ensure_site_tools().and_then(|tools| site::build(&tools)),
        Some("dist") => dist::dist(&args[1..]),
        Some("bench") => bench(&args[1..]),
        // `test`'s own step, run in the background while it compiles (not for people to call).
        Some(PREPARE_TEST_PACKAGES) => prepare_test_packages(),
        _ => {
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// Runs a command in the workspace root, failing with its name if it fails.
pub fn run(command: &mut Command) -> Result {
    let shown = format!("{command:?}");
    eprintln!("xtask: running {shown}");
    if command.get_current_dir().is_none() {
        command.current_dir(root());
    }
    let status = command.status().map_err(|e| format!("cannot run {shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} failed ({status})")) }
}

/// A command running while xtask goes on with other steps, its output kept in a log file under `target/xtask-logs/`
/// (printed when it fails) so that it does not interleave with the foreground step's. Dropped before it was waited
/// for (a step before failed), it is stopped.
pub struct Background {
    what: &'static str,
    child: Option<std::process::Child>,
    log: PathBuf,
}

impl Background {
    /// Starts `command` in the workspace root; `what` names it in messages ("installing wasm-bindgen-cli").
    pub fn start(what: &'static str, command: &mut Command) -> Result<Self> {
        let logs = root().join("target/xtask-logs");
        std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
        let name: String = what.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let errors = file.try_clone().map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        if command.get_current_dir().is_none() {
            command.current_dir(root());
        }
        eprintln!("xtask: {what} in the background: {command:?} (output in {})", log.display());
        let child = command
            .stdin(std::process::Stdio::null())
            .stdout(file)
            .stderr(errors)
            .spawn()
            .map_err(|e| format!("cannot run {command:?}: {e}"))?;
        Ok(Self { what, child: Some(child), log })
    }

    /// Waits for the command to end; if it failed, prints its output and says so.
    pub fn wait(mut self) -> Result {
        let mut child = self.child.take().expect("a background command is waited for once");
        let started = std::time::Instant::now();
        let status = child.wait().map_err(|e| format!("{}: cannot wait for it: {e}", self.what))?;
        let waited = started.elapsed().as_secs_f64();
        if status.success() {
            eprintln!("xtask: {} ended ({waited:.0} s waited for it)", self.what);
            return Ok(());
        }
        let output = std::fs::read_to_string(&self.log).unwrap_or_default();
        eprintln!("{output}");
        Err(format!("{} failed ({status}); its output is above and in {}", self.what, self.log.display()))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Builds the site and the server, then runs `holdpoint <command>` (`serve` or `demo`, which take the same flags).
fn serve(command: &str, args: &[String]) -> Result {
    let release = args.iter().take_while(|a| *a != "--").any(|a| a == "--release");
    let passthrough: Vec<&String> = args.iter().skip_while(|a| *a != "--").skip(1).collect();
    let tools = tools::ensure_site_tools()?;
    site::build(&tools)?;
    let profile = if release { "release" } else { "debug" };
    let mut build = cargo();
    build.args(["build", "--package", "holdpoint-server", "--bin", "holdpoint"]);
    if release {
        build.arg("--release");
    }
    run(&mut build)?;
    let binary = root().join("target").join(profile).join("holdpoint");
    let mut server = Command::new(binary);
    server.arg(command).args(passthrough).env("HOLDPOINT_SITE_ROOT", site::site_root());
    run(&mut server)
}

/// Builds the site (the suite measures its bundle and the server renders pages with it), then runs the suite in
/// `server/benches/suite/` through `cargo bench`, which builds the server and the suite in the release profile.
fn bench(args: &[String]) -> Result {
    let passthrough: Vec<&String> = match args.first().map(String::as_str) {
        None => Vec::new(),
        Some("--") => args[1..].iter().collect(),
        Some(_) => return Err(format!("`cargo xtask bench` takes its arguments after `--`, got {args:?}")),
    };
    // Installing the site's tools happens once per machine (wasm-bindgen-cli alone compiles for about 3 minutes):
    // it is timed apart, so the figure compares across runs.
    let installing = std::time::Instant::now();
    let tools = tools::ensure_site_tools()?;
    tools.wasm_bindgen()?;
    let installed_in = installing.elapsed().as_secs_f64();
    let started = std::time::Instant::now();
    site::build(&tools)?;
    let result = run(cargo()
        .args(["bench", "--package", "holdpoint-server", "--bench", "suite", "--"])
        .args(passthrough)
        .env("HOLDPOINT_SITE_ROOT", site::site_root()));
    eprintln!(
        "xtask: bench took {:.0} s (site, release build and suite), after {installed_in:.0} s checking or installing its tools",
        started.elapsed().as_secs_f64()
    );
    result
}

fn test(args: &[String]) -> Result {
    if !args.is_empty() {
        return Err(format!("`cargo xtask test` takes no arguments, got {args:?}"));
    }
    tools::ensure_chromium()?;
    // Installing the suites' packages (npm, PyPI) is mostly downloading and unpacking, which takes little of the CPU
    // the compilers use: it runs in the background while the site and the server compile.
    let current = std::env::current_exe().map_err(|e| format!("cannot locate the xtask program: {e}"))?;
    let packages =
        Background::start("installing the test suites' packages", Command::new(current).arg(PREPARE_TEST_PACKAGES))?;
    let tools = tools::ensure_site_tools()?;
    site::build(&tools)?;
    // One build of the server serves the API tests, the browser tests and the packages' tests: `cargo test` builds
    // `holdpoint` in the test profile with the site built in, as `cargo xtask dist` does in the release profile, and
    // the end-to-end tests start that very binary. The browser tests give it the site's directory all the same (the
    // site as `cargo xtask serve` serves it); `dist.test.mjs` runs it from the packages, on its embedded site.
    run(cargo().args([
        "test",
        "--workspace",
        "--exclude",
        "frontend",
        "--features",
        "holdpoint-server/embed-site",
        "--no-fail-fast",
    ]))?;
    let binary = root().join("target/debug/holdpoint");
    let packing = std::time::Instant::now();
    let dist = dist::package(&binary, &root().join("target/dist-test"), dist::Compression::Fast)?;
    eprintln!("xtask: packed the test build in {:.1} s", packing.elapsed().as_secs_f64());
    packages.wait()?;
    run(Command::new("node")
        .args(["--test", "--test-concurrency=1", "end2end/tests/"])
        .env("HOLDPOINT_BIN", &binary)
        .env("HOLDPOINT_SITE_ROOT", site::site_root())
        .env("HOLDPOINT_DIST_TARBALL", &dist.tarball)
        .env("HOLDPOINT_DIST_DEB", &dist.deb))?;
    sdk_python::test(&binary)?;
    sdk_typescript::test(&binary)
}

/// The hidden command `test` runs in the background.
const PREPARE_TEST_PACKAGES: &str = "prepare-test-packages";

/// Installs what the browser suite and the libraries' suites import, each only if it is missing or out of date.
fn prepare_test_packages() -> Result {
    tools::ensure_end2end_packages()?;
    sdk_python::prepare()?;
    sdk_typescript::prepare()
}
