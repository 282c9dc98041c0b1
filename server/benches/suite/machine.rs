//! What the figures were measured on: CPU, cores, memory, OS, toolchain, PostgreSQL, and how busy the machine was
//! with other work (figures taken on a busy machine are worse and must say so).

use std::time::Duration;

/// The machine's description, taken when the suite starts.
#[derive(Debug)]
pub struct Machine {
    cpu: String,
    cores: String,
    memory: String,
    os: String,
    rustc: String,
    postgres: String,
    filesystem: String,
    fsync: String,
    commit: String,
    date: String,
    load_before: String,
    /// Share of CPU time other processes used in the 2 s before the suite started, 0..=1.
    busy_before: f64,
}

impl Machine {
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        vec![
            ("date", self.date.clone()),
            ("commit", self.commit.clone()),
            ("CPU", self.cpu.clone()),
            ("cores", self.cores.clone()),
            ("memory", self.memory.clone()),
            ("OS", self.os.clone()),
            ("rustc", self.rustc.clone()),
            ("PostgreSQL", self.postgres.clone()),
            ("SQLite files on", self.filesystem.clone()),
            ("one durable write there (4 KiB overwrite + fdatasync)", self.fsync.clone()),
            (
                "CPU used by other processes just before the run",
                format!("{:.0} % (load average {})", self.busy_before * 100.0, self.load_before),
            ),
        ]
    }

    /// Whether other work competed for the CPU when the suite started.
    pub fn busy(&self) -> bool {
        self.busy_before > 0.2
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let output = std::process::Command::new(program).args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// (busy, total) jiffies of all CPUs.
pub fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = read("/proc/stat");
    let fields: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The CPU time a process has used so far (user and system, its threads included), in jiffies.
pub fn process_jiffies(pid: u32) -> Option<u64> {
    let stat = read(&format!("/proc/{pid}/stat"));
    // The command name, in parentheses, may hold spaces: count the fields after its closing one.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    // utime and stime are the 14th and 15th fields of the line, the 12th and 13th after the name.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// How many jiffies make a second (`USER_HZ`; what `/proc` counts CPU time in).
pub fn jiffies_per_second() -> u64 {
    command_output("getconf", &["CLK_TCK"]).and_then(|hz| hz.parse().ok()).unwrap_or(100)
}

/// The share of CPU time in use over `window` (the suite is idle meanwhile, so it is other processes').
async fn cpu_busy(window: Duration) -> f64 {
    let Some((busy0, total0)) = cpu_jiffies() else { return 0.0 };
    tokio::time::sleep(window).await;
    let Some((busy1, total1)) = cpu_jiffies() else { return 0.0 };
    if total1 == total0 { 0.0 } else { (busy1 - busy0) as f64 / (total1 - total0) as f64 }
}

/// The mount holding `path`: its device and filesystem type (durable figures depend on what `fsync` costs).
fn filesystem_of(path: &std::path::Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mounts = read("/proc/mounts");
    mounts
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() >= 3 && path.starts_with(fields[1])).then(|| (fields[1].len(), fields[0], fields[2]))
        })
        .max_by_key(|(len, _, _)| *len)
        .map_or_else(|| "unknown".to_owned(), |(_, device, kind)| format!("{kind} ({device})"))
}

/// What one durable commit costs the disk at least: a 4 KiB overwrite followed by `fdatasync`, the pattern of a
/// SQLite WAL commit with `synchronous=FULL`. Every durable write of the suite pays this.
fn fsync_cost(dir: &std::path::Path) -> String {
    use std::io::{Seek, SeekFrom, Write};
    let measure = || -> std::io::Result<crate::Samples> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("fsync-probe");
        let mut file = std::fs::File::create(&path)?;
        let block = [0x5au8; 4096];
        for _ in 0..64 {
            file.write_all(&block)?;
        }
        file.sync_all()?;
        let mut samples = crate::Samples::default();
        for n in 0..200u64 {
            file.seek(SeekFrom::Start((n % 64) * 4096))?;
            file.write_all(&block)?;
            let started = std::time::Instant::now();
            file.sync_data()?;
            samples.push(started.elapsed());
        }
        drop(file);
        std::fs::remove_file(path)?;
        Ok(samples)
    };
    match measure() {
        Ok(samples) => format!("p50 {} · p99 {}", crate::ms(samples.p50()), crate::ms(samples.p99())),
        Err(err) => format!("not measured ({err})"),
    }
}

pub async fn describe(postgres_version: Option<String>) -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|rest| rest.split_once(':')).map(|(_, v)| v.trim()))
        .unwrap_or("unknown")
        .to_owned();
    let logical = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
    let available = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or_else(|| "unknown".into(), |kib| format!("{:.1} GiB", kib as f64 / 1024.0 / 1024.0));
    let os_release = read("/etc/os-release");
    let os_name = os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map_or("Linux", |v| v.trim_matches('"'))
        .to_owned();
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_owned();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let root = crate::server::workspace_root();
    let commit = command_output("git", &["-C", &root.display().to_string(), "rev-parse", "--short", "HEAD"])
        .map_or_else(
            || "unknown".into(),
            |hash| {
                // The report itself is rewritten by every run; only other changes make the measured tree differ.
                let dirty = command_output(
                    "git",
                    &["-C", &root.display().to_string(), "status", "--porcelain", "--", ".", ":!docs/benchmarks.md"],
                )
                .is_some_and(|s| !s.is_empty());
                if dirty { format!("{hash} (with uncommitted changes)") } else { hash }
            },
        );
    let load_before = load_average();
    let busy_before = cpu_busy(Duration::from_secs(2)).await;
    Machine {
        cpu,
        cores: format!("{logical} logical CPUs ({available} available to the suite)"),
        memory,
        os: format!("{os_name}, Linux {kernel}"),
        rustc: command_output(&rustc, &["-V"]).unwrap_or_else(|| "unknown".into()),
        postgres: postgres_version.unwrap_or_else(|| "not reachable".into()),
        filesystem: filesystem_of(&crate::server::scratch_dir()),
        fsync: fsync_cost(&crate::server::scratch_dir()),
        commit,
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        load_before,
        busy_before,
    }
}
