//! Holdpoint's benchmark suite (`cargo xtask bench`, or `cargo bench -p holdpoint-server --bench suite`).
//!
//! A load generator over loopback against real `holdpoint serve` processes (release build, settings as shipped,
//! each on a fresh SQLite file or a fresh PostgreSQL database), so the server's CPU and memory are its own and can
//! be read from `/proc`. Only the conversation rebuild is timed in-process, through the library's own code path.
//! Every part is bounded in time. The suite prints a table and writes `docs/benchmarks.md`: the machine, every
//! figure next to its target with a pass/miss mark, and how each was measured.
//!
//! Flags: `--only hitl,delivery,webhooks,fanout,inbox,rebuild,rules,site,gateway` runs some parts (then nothing is written unless
//! `--out` is given); `--out PATH` writes the report there instead of `docs/benchmarks.md`. `HOLDPOINT_BENCH_HITL` (see
//! `hitl.rs`) runs one configuration of the HITL part, for profiling and A/B runs.

/// The load generator shares the machine's two cores with the server, so what it spends per cycle is taken from
/// the server: with glibc's allocator it spent an eighth of its CPU in `malloc` and `free` (`perf`), as the server
/// did before it moved to mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod delivery;
mod fanout;
mod gateway;
mod hitl;
mod inbox;
mod machine;
mod rebuild;
mod report;
mod rules;
mod server;
mod site;
mod webhooks;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use report::{Figure, Section};

/// The parts of the suite, in the order they run.
const PARTS: [&str; 9] = ["hitl", "delivery", "webhooks", "fanout", "inbox", "rebuild", "rules", "site", "gateway"];

struct Options {
    parts: Vec<String>,
    out: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut parts: Vec<String> = PARTS.iter().map(|p| (*p).to_owned()).collect();
    let mut partial = false;
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // `cargo bench` passes `--bench` to every bench target.
            "--bench" => {}
            "--only" => {
                let list = args.next().ok_or("--only needs a list, e.g. --only hitl,inbox")?;
                parts = list.split(',').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect();
                if let Some(unknown) = parts.iter().find(|p| !PARTS.contains(&p.as_str())) {
                    return Err(format!("unknown part {unknown:?}; the parts are {}", PARTS.join(", ")));
                }
                partial = true;
            }
            "--out" => out = Some(PathBuf::from(args.next().ok_or("--out needs a path")?)),
            other => return Err(format!("unknown argument {other:?} (flags: --only PARTS, --out PATH)")),
        }
    }
    if !partial && out.is_none() {
        out = Some(server::workspace_root().join("docs/benchmarks.md"));
    }
    Ok(Options { parts, out })
}

fn main() -> std::process::ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("bench: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match runtime.block_on(run(options)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(options: Options) -> Result<(), String> {
    let started = Instant::now();
    let postgres = server::postgres().await;
    if let Err(reason) = &postgres {
        eprintln!("bench: PostgreSQL figures are skipped: {reason}");
    }
    let machine_before = machine::describe(postgres.as_ref().ok().map(|p| p.description.clone())).await;
    let mut sections: Vec<Section> = Vec::new();
    for part in &options.parts {
        let part_started = Instant::now();
        eprintln!("bench: {part} ...");
        let section = match part.as_str() {
            "hitl" => hitl::run(postgres.as_ref().ok()).await?,
            "delivery" => delivery::run().await?,
            "webhooks" => webhooks::run().await?,
            "fanout" => fanout::run().await?,
            "inbox" => inbox::run(postgres.as_ref().ok()).await?,
            "rebuild" => rebuild::run(postgres.as_ref().ok()).await?,
            "rules" => rules::run(postgres.as_ref().ok()).await?,
            "site" => site::run().await?,
            "gateway" => gateway::run().await?,
            _ => unreachable!("parts are checked when the flags are read"),
        };
        eprintln!("bench: {part} took {:.1} s", part_started.elapsed().as_secs_f64());
        report::print(&section);
        sections.push(section);
    }
    let elapsed = started.elapsed();
    let load_after = machine::load_average();
    eprintln!("bench: the suite ran in {:.1} s", elapsed.as_secs_f64());
    if let Some(out) = &options.out {
        let text = report::markdown(&machine_before, &load_after, postgres.as_ref().err(), &sections, elapsed, out);
        std::fs::write(out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        eprintln!("bench: wrote {}", out.display());
    }
    let misses: Vec<&Figure> = sections.iter().flat_map(|s| &s.figures).filter(|f| f.pass == Some(false)).collect();
    if !misses.is_empty() {
        eprintln!("bench: {} figure(s) miss their target:", misses.len());
        for figure in misses {
            eprintln!("  - {}: {} (target {})", figure.name, figure.measured, figure.target);
        }
    }
    Ok(())
}

/// Durations measured by one benchmark, for percentiles.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn push(&mut self, sample: Duration) {
        self.0.push(sample);
    }

    pub fn extend(&mut self, other: &Samples) {
        self.0.extend_from_slice(&other.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The nearest-rank percentile (`p` in 0..=100); zero when there are no samples.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    pub fn p50(&self) -> Duration {
        self.percentile(50.0)
    }

    pub fn p99(&self) -> Duration {
        self.percentile(99.0)
    }

    pub fn max(&self) -> Duration {
        self.0.iter().copied().max().unwrap_or_default()
    }
}

/// A duration in milliseconds with a precision that fits its size.
pub fn ms(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}
