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
    let tools = tools::ensure_site_tools()?;
    tools::ensure_browser_tools()?;
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
    let packages = dist::package(&binary, &root().join("target/dist-test"), dist::Compression::Fast)?;
    eprintln!("xtask: packed the test build in {:.1} s", packing.elapsed().as_secs_f64());
    run(Command::new("node")
        .args(["--test", "--test-concurrency=1", "end2end/tests/"])
        .env("HOLDPOINT_BIN", &binary)
        .env("HOLDPOINT_SITE_ROOT", site::site_root())
        .env("HOLDPOINT_DIST_TARBALL", &packages.tarball)
        .env("HOLDPOINT_DIST_DEB", &packages.deb))?;
    sdk_python::test(&binary)?;
    sdk_typescript::test(&binary)
}
