//! The results: a table on stdout and `docs/benchmarks.md`.
//!
//! The generated part of the document is rewritten on every run; what follows [`KEPT_MARKER`] (the analysis of
//! misses and their causes, written by people) is carried over from the existing file.

use std::path::Path;
use std::time::Duration;

use crate::machine::Machine;

/// Everything after this line in `docs/benchmarks.md` is kept when the suite rewrites the file.
const KEPT_MARKER: &str =
    "<!-- Everything below is written by hand and kept when `cargo xtask bench` rewrites this file. -->";

/// One measured figure.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: String,
    pub measured: String,
    /// The target, or `—` for figures reported without one.
    pub target: String,
    /// `None` for figures without a target.
    pub pass: Option<bool>,
}

impl Figure {
    pub fn new(name: impl Into<String>, measured: impl Into<String>, target: impl Into<String>, pass: bool) -> Self {
        Figure { name: name.into(), measured: measured.into(), target: target.into(), pass: Some(pass) }
    }

    /// A figure reported for context, without a target.
    pub fn info(name: impl Into<String>, measured: impl Into<String>) -> Self {
        Figure { name: name.into(), measured: measured.into(), target: "—".into(), pass: None }
    }

    fn mark(&self) -> &'static str {
        match self.pass {
            Some(true) => "✅ pass",
            Some(false) => "❌ miss",
            None => "",
        }
    }
}

/// The figures of one part of the suite, with how they were measured.
#[derive(Debug, Default)]
pub struct Section {
    pub title: String,
    pub figures: Vec<Figure>,
    /// Markdown paragraphs: the method, sample counts, anything that explains the figures.
    pub notes: Vec<String>,
}

impl Section {
    pub fn new(title: impl Into<String>) -> Self {
        Section { title: title.into(), ..Default::default() }
    }
}

pub fn print(section: &Section) {
    let width = section.figures.iter().map(|f| f.name.chars().count()).max().unwrap_or(0).max(6);
    println!("\n{}", section.title);
    for figure in &section.figures {
        let padding = width - figure.name.chars().count();
        println!(
            "  {}{} {:>24}   target {:<22} {}",
            figure.name,
            " ".repeat(padding),
            figure.measured,
            figure.target,
            figure.mark()
        );
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

pub fn markdown(
    machine: &Machine,
    load_after: &str,
    postgres_skipped: Option<&String>,
    sections: &[Section],
    elapsed: Duration,
    out: &Path,
) -> String {
    let mut doc = String::new();
    doc.push_str("# Benchmarks\n\n");
    doc.push_str(
        "Written by `cargo xtask bench` (the suite is `server/benches/suite/`); run it again to refresh the figures. \
         A load generator drives real `holdpoint serve` processes (release build, durable settings as shipped: \
         SQLite in WAL mode with `synchronous=FULL`, PostgreSQL with `synchronous_commit` as the server has it) \
         over loopback, each on a fresh SQLite file or a fresh PostgreSQL database. The load generator and the \
         server share the machine's cores, so every throughput figure also pays for the client.\n\n",
    );
    doc.push_str("## Machine\n\n| | |\n|---|---|\n");
    for (name, value) in machine.rows() {
        doc.push_str(&format!("| {name} | {} |\n", cell(&value)));
    }
    doc.push_str(&format!("| load average after the run | {} |\n", cell(load_after)));
    doc.push_str(&format!("| suite wall time (excluding the build) | {:.0} s |\n\n", elapsed.as_secs_f64()));
    if machine.busy() {
        doc.push_str(
            "**This run happened under load from other processes** (see the load average above): figures, latency \
             percentiles above all, are worse than on an idle machine. Run `cargo xtask bench` again on an idle \
             machine for figures to compare releases by.\n\n",
        );
    }
    if let Some(reason) = postgres_skipped {
        doc.push_str(&format!("PostgreSQL figures were not measured: {reason}.\n\n"));
    }
    doc.push_str("## Results\n\n| figure | measured | target | |\n|---|---|---|---|\n");
    for section in sections {
        for figure in &section.figures {
            doc.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                cell(&figure.name),
                cell(&figure.measured),
                cell(&figure.target),
                figure.mark()
            ));
        }
    }
    doc.push_str("\n## How each figure is measured\n\n");
    for section in sections {
        doc.push_str(&format!("### {}\n\n", section.title));
        for note in &section.notes {
            doc.push_str(note.trim_end());
            doc.push_str("\n\n");
        }
    }
    doc.push_str(KEPT_MARKER);
    doc.push('\n');
    let kept = std::fs::read_to_string(out)
        .ok()
        .and_then(|old| old.split_once(KEPT_MARKER).map(|(_, kept)| kept.to_owned()))
        .unwrap_or_else(|| "\n## Analysis\n\n(Nothing written yet.)\n".to_owned());
    doc.push_str(&kept);
    doc
}
