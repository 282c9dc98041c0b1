//! The build script of the server: it tells cargo to rebuild when a migration is added, makes the version
//! `holdpoint --version` prints (with the commit it was built from), and (feature `embed-site`) fails clearly when
//! the site to embed has not been built.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // `sqlx::migrate!` embeds the migrations when the server compiles; without this, adding a migration file would
    // not rebuild it (the sqlx documentation's recommended build script).
    println!("cargo:rerun-if-changed=../migrations");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    let shown = match commit(&manifest_dir) {
        Some(commit) => format!("{version} ({commit})"),
        None => version,
    };
    println!("cargo:rustc-env=HOLDPOINT_VERSION={shown}");
    if std::env::var_os("CARGO_FEATURE_EMBED_SITE").is_some() {
        check_site(&manifest_dir.join("../target/site"));
    }
}

/// The short hash of the checked-out commit, or nothing outside a git checkout (a source archive, a registry
/// download) or without git. The script runs again only when `HEAD` or the branch it names moves, so the server is
/// rebuilt for a new commit and not on every build.
fn commit(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git").args(args).current_dir(dir).output().ok()?;
        let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
        (output.status.success() && !text.is_empty()).then_some(text)
    };
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    // `--git-path` knows where a worktree keeps its HEAD and where the branches of the shared repository are.
    let mut watched = vec![git(&["rev-parse", "--path-format=absolute", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "--quiet", "HEAD"]) {
        watched.push(git(&["rev-parse", "--path-format=absolute", "--git-path", &branch]));
        // A branch's ref may live in `packed-refs` instead of a file of its own (after `git gc`).
        watched.push(git(&["rev-parse", "--path-format=absolute", "--git-path", "packed-refs"]));
    }
    // A path that does not exist would make cargo run the script on every build.
    for path in watched.into_iter().flatten().filter(|path| Path::new(path).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    Some(commit)
}

/// The site `embed-site` embeds (`server/src/doors/web/site.rs`) must have been built; without this check the failure
/// would be the embedding macro's, which does not say how to build it.
fn check_site(site: &Path) {
    let bundle = site.join("pkg/holdpoint_bg.wasm");
    if !bundle.is_file() {
        panic!(
            "the feature `embed-site` embeds the built site, and {} is missing: build the site first with \
             `cargo xtask site` (`cargo xtask dist` builds it and the binary together)",
            bundle.display()
        );
    }
}
