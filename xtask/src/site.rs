//! The site build: the `frontend` crate to wasm, wasm-bindgen's JS glue, wasm-opt, and the stylesheet, all into
//! `target/site/pkg` under the names the server's `<HydrationScripts>` asks for (`holdpoint.js`,
//! `holdpoint_bg.wasm`, `holdpoint.css`).

use std::num::NonZeroU64;
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

/// The module the split wasm's loader imports `initSync` from, as the browser addresses it.
const MAIN_MODULE_URL: &str = "/pkg/holdpoint.js";
/// The name Leptos' `HydrationScripts` looks for (unhashed builds): the splitter's loader for the lazy modules.
const SPLIT_LOADER: &str = "__wasm_split.______________________.js";
/// Which lazy modules each lazy function needs; `HydrationScripts` reads it to preload a page's modules.
const SPLIT_MANIFEST: &str = "__wasm_split_manifest.json";

pub fn build(tools: &SiteTools) -> Result {
    run(cargo().args(["build", "--package", "frontend", "--lib", "--target", WASM_TARGET, "--profile", WASM_PROFILE]))?;
    let wasm = root().join("target").join(WASM_TARGET).join(WASM_PROFILE).join("frontend.wasm");
    let pkg = pkg_dir();
    std::fs::create_dir_all(&pkg).map_err(|e| format!("cannot create {}: {e}", pkg.display()))?;
    let bundle = pkg.join(format!("{OUTPUT_NAME}_bg.wasm"));
    // This program is what splits and optimizes the modules: a new build of it (another split, another merge limit)
    // redoes them as a new frontend.wasm does.
    let xtask = std::env::current_exe().map_err(|e| format!("cannot locate the xtask program: {e}"))?;
    if is_newer(&wasm, &bundle) || is_newer(&xtask, &bundle) {
        remove_modules(&pkg)?;
        let split_main = split(&wasm, &pkg)?;
        // The split main module keeps the linker's exports (the lazy modules import them) and its mangled names
        // (the splitter's loader refers to them).
        run(Command::new(tools.wasm_bindgen()?)
            .args(["--target", "web", "--no-typescript", "--keep-lld-exports", "--no-demangle"])
            .args(["--out-name", OUTPUT_NAME, "--out-dir"])
            .arg(&pkg)
            .arg(&split_main))?;
        for module in wasm_modules(&pkg)? {
            optimize(tools, &module)?;
        }
    }
    copy(&root().join("style/main.css"), &pkg.join(format!("{OUTPUT_NAME}.css")))?;
    let public = root().join("public");
    if public.is_dir() {
        copy_dir(&public, &site_root())?;
    }
    let mut sent = wasm_modules(&pkg)?;
    sent.push(pkg.join(format!("{OUTPUT_NAME}.js")));
    sent.push(pkg.join(format!("{OUTPUT_NAME}.css")));
    sent.push(pkg.join(SPLIT_LOADER));
    gzip_all(&sent)?;
    let size = std::fs::metadata(pkg.join(format!("{OUTPUT_NAME}_bg.wasm.gz"))).map(|m| m.len()).unwrap_or(0);
    eprintln!("xtask: site built in {} (main wasm module {} KiB gzipped)", site_root().display(), size / 1024);
    Ok(())
}

/// How many bytes a page may fetch in vain to save one module fetch, when the splitter merges the chunks of code
/// the lazy functions share (`wasm_split_cli_support::Options::merge_bytes_per_fetch`, in input bytes: about four
/// times the gzipped size). Unmerged, the chunks would make a page fetch about 110 modules, most under a kilobyte;
/// merged under this limit, a page fetches 7–19, and fewer bytes, as each module carries its own headers, types and
/// imports.
const MERGE_BYTES_PER_FETCH: u64 = 3000;

/// Cuts the code only lazy functions (`#[lazy]`, `#[lazy_route]`) reach out of `wasm` into modules of their own in
/// `pkg`, with the loader and the manifest; returns the main module, which wasm-bindgen then processes as usual.
fn split(wasm: &Path, pkg: &Path) -> Result<PathBuf> {
    let input = std::fs::read(wasm).map_err(|e| format!("cannot read {}: {e}", wasm.display()))?;
    let main = wasm.with_file_name("frontend_split.wasm");
    let link_name = format!("./{SPLIT_LOADER}");
    let mut options = wasm_split_cli_support::Options::new(&input);
    options.output_dir = pkg;
    options.main_out_path = &main;
    options.main_module = MAIN_MODULE_URL;
    options.link_name = &link_name;
    options.merge_bytes_per_fetch = MERGE_BYTES_PER_FETCH;
    let split =
        wasm_split_cli_support::transform(options).map_err(|e| format!("cannot split {}: {e:#}", wasm.display()))?;
    let manifest = serde_json::to_string_pretty(&split.prefetch_map).map_err(|e| e.to_string())?;
    let path = pkg.join(SPLIT_MANIFEST);
    std::fs::write(&path, manifest).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(main)
}

/// The previous build's wasm modules: the splitter names lazy modules after their functions, and a module whose
/// function is gone must not linger in the site.
fn remove_modules(pkg: &Path) -> Result {
    for module in wasm_modules(pkg)? {
        for path in [module.clone(), module.with_extension("wasm.gz")] {
            if path.exists() {
                std::fs::remove_file(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
            }
        }
    }
    Ok(())
}

fn wasm_modules(pkg: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(pkg).map_err(|e| format!("cannot read {}: {e}", pkg.display()))?;
    let mut modules = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|extension| extension == "wasm") {
            modules.push(path);
        }
    }
    modules.sort();
    Ok(modules)
}

fn optimize(tools: &SiteTools, module: &Path) -> Result {
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
            // Every module would otherwise carry its own copy of these two custom sections, which no browser reads.
            "--strip-target-features",
            "--strip-producers",
        ])
        .arg(module)
        .arg("-o")
        .arg(module))
}

fn is_newer(source: &Path, target: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(source), modified(target)) {
        (Some(s), Some(t)) => s > t,
        _ => true,
    }
}

/// Copies a file unless the target already holds the same bytes: the server built with `embed-site` includes the
/// site's files, and a file written anew, even unchanged, would make cargo compile the server again.
fn copy(from: &Path, to: &Path) -> Result {
    let contents = std::fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    if std::fs::read(to).is_ok_and(|existing| existing == contents) {
        return Ok(());
    }
    std::fs::write(to, contents).map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
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

/// Writes `file.gz` beside `file`, which the server sends to browsers that accept gzip. Zopfli writes plain gzip,
/// about 5 % smaller than zlib's level 9: a file is compressed once per build and downloaded on every first visit.
fn gzip(file: &Path) -> Result {
    let mut target = file.as_os_str().to_owned();
    target.push(".gz");
    if !is_newer(file, Path::new(&target)) {
        return Ok(());
    }
    let data = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let out = std::fs::File::create(&target).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    // Fewer iterations than the default 15, as zopfli advises for large inputs: each one costs a full pass.
    let options = zopfli::Options { iteration_count: NonZeroU64::new(5).expect("5 is not zero"), ..Default::default() };
    zopfli::compress(options, zopfli::Format::Gzip, &data[..], std::io::BufWriter::new(out))
        .map_err(|e| format!("cannot compress {}: {e}", file.display()))
}

/// Compresses the files on every core: the split site is dozens of modules.
fn gzip_all(files: &[PathBuf]) -> Result {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(file) = files.get(index) else { return Ok(()) };
                        gzip(file)?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|worker| worker.join().unwrap_or_else(|_| Err("gzip panicked".to_owned())))
    })
}
