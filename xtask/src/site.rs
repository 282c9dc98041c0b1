//! The site build: the `frontend` crate to wasm, wasm-bindgen's JS glue, wasm-opt, and the stylesheet, all into
//! `target/site/pkg` under the names the server's `<HydrationScripts>` asks for (`holdpoint.js`,
//! `holdpoint_bg.wasm`, `holdpoint.css`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::SiteTools;
use crate::{Result, cargo, root, run};

const OUTPUT_NAME: &str = "holdpoint";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
const WASM_PROFILE: &str = "wasm-release";

pub fn site_root() -> PathBuf {
    root().join("target/site")
}

fn pkg_dir() -> PathBuf {
    site_root().join("pkg")
}

pub fn build(tools: &SiteTools) -> Result {
    run(cargo().args(["build", "--package", "frontend", "--lib", "--target", WASM_TARGET, "--profile", WASM_PROFILE]))?;
    let wasm = root().join("target").join(WASM_TARGET).join(WASM_PROFILE).join("frontend.wasm");
    let pkg = pkg_dir();
    std::fs::create_dir_all(&pkg).map_err(|e| format!("cannot create {}: {e}", pkg.display()))?;
    let bundle = pkg.join(format!("{OUTPUT_NAME}_bg.wasm"));
    if is_newer(&wasm, &bundle) {
        run(Command::new(&tools.wasm_bindgen)
            .args(["--target", "web", "--no-typescript", "--out-name", OUTPUT_NAME, "--out-dir"])
            .arg(&pkg)
            .arg(&wasm))?;
        // Bulk memory and friends are what rustc emits for wasm32 today; wasm-opt must be told it may keep them.
        run(Command::new(&tools.wasm_opt)
            .args([
                "-Oz",
                "--enable-bulk-memory",
                "--enable-nontrapping-float-to-int",
                "--enable-sign-ext",
                "--enable-mutable-globals",
                "--enable-reference-types",
                "--enable-multivalue",
            ])
            .arg(&bundle)
            .arg("-o")
            .arg(&bundle))?;
    }
    copy(&root().join("style/main.css"), &pkg.join(format!("{OUTPUT_NAME}.css")))?;
    let public = root().join("public");
    if public.is_dir() {
        copy_dir(&public, &site_root())?;
    }
    for name in [format!("{OUTPUT_NAME}_bg.wasm"), format!("{OUTPUT_NAME}.js"), format!("{OUTPUT_NAME}.css")] {
        gzip(&pkg.join(name))?;
    }
    let size = std::fs::metadata(pkg.join(format!("{OUTPUT_NAME}_bg.wasm.gz"))).map(|m| m.len()).unwrap_or(0);
    eprintln!("xtask: site built in {} (wasm bundle {} KiB gzipped)", site_root().display(), size / 1024);
    Ok(())
}

fn is_newer(source: &Path, target: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(source), modified(target)) {
        (Some(s), Some(t)) => s > t,
        _ => true,
    }
}

fn copy(from: &Path, to: &Path) -> Result {
    std::fs::copy(from, to).map(|_| ()).map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result {
    let entries = std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
            copy_dir(&entry.path(), &target)?;
        } else {
            copy(&entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Writes `file.gz` beside `file`, which the server sends to browsers that accept gzip.
fn gzip(file: &Path) -> Result {
    let data = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let mut target = file.as_os_str().to_owned();
    target.push(".gz");
    let out = std::fs::File::create(&target).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::best());
    encoder.write_all(&data).and_then(|()| encoder.finish().map(|_| ())).map_err(|e| e.to_string())
}
