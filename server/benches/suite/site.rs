//! The web UI: the size of the wasm bundle browsers download, and how long the server takes to render `/inbox`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::report::{Figure, Section};
use crate::server::{FreshDb, Server, expect_success, http, site_root};
use crate::{Samples, ms};

const QUESTIONS: usize = 60;
const WARM_UP: usize = 30;
const RENDERS: usize = 400;
const BUDGET: Duration = Duration::from_secs(30);

pub async fn run() -> Result<Section, String> {
    let mut section = Section::new("Web UI");
    let pkg = site_root().join("pkg");
    match wasm_loads(&pkg) {
        Ok(loads) => report_wasm(&mut section, &pkg, &loads),
        Err(err) => {
            section.figures.push(Figure::new("wasm bundle, gzip", "not built", "≤ 400 KiB", false));
            section.notes.push(format!(
                "No site in {} ({err}): run `cargo xtask bench` (it builds the site first) or `cargo xtask site`.",
                pkg.display()
            ));
        }
    }

    let db = FreshDb::sqlite()?;
    let server = Server::start("ssr", &db).await?;
    let renders = measure_ssr(&server).await;
    server.stop().await;
    let renders = renders?;
    section.figures.push(Figure::new(
        "`/inbox` server-side render",
        format!("p50 {} · p99 {}", ms(renders.p50()), ms(renders.p99())),
        "p50 ≤ 5 ms",
        renders.p50() <= Duration::from_millis(5),
    ));
    section.notes.push(format!(
        "`/inbox` SSR: a fresh server on SQLite with {QUESTIONS} pending questions of every kind (asked through \
         the API); a session opened through `POST /auth/signin` with the admin token; then `GET /inbox` with the \
         session cookie, {WARM_UP} times to warm up and {} times timed, one after another, from sending the \
         request to having read the whole page (which lists the {QUESTIONS} questions).",
        renders.len()
    ));
    Ok(section)
}

async fn measure_ssr(server: &Server) -> Result<Samples, String> {
    let client = http();
    for n in 0..QUESTIONS {
        let question = match n % 4 {
            0 => json!({ "title": format!("Deploy release 1.{n} to production?"), "project": "infra",
                          "body": "The **canary** is green.\n\n- 3 services\n- 1 migration" }),
            1 => json!({ "title": format!("Which persona for the notes of build {n}?"), "response_type": "choice",
                          "options": [{ "value": "formal", "label": "Formal" }, { "value": "casual", "label": "Casual" }],
                          "urgency": "high" }),
            2 => json!({ "title": format!("Run: terraform apply (plan {n})"), "kind": "approval",
                          "action": { "tool_name": "shell", "arguments": { "command": "terraform apply" } },
                          "urgency": "critical", "timeout_seconds": 3600 }),
            _ => json!({ "title": format!("Mention the deprecation in changelog {n}?"), "kind": "non_blocking",
                          "response_type": "boolean", "default_response": { "value": false }, "timeout_seconds": 7200 }),
        };
        let response = client
            .post(format!("{}/api/v1/questions", server.base))
            .bearer_auth(&server.token)
            .json(&question)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        expect_success(response, "POST /questions").await?;
    }
    let signed_in = client
        .post(format!("{}/auth/signin", server.base))
        // The token is `hp_bench_` and hex digits: nothing in it needs escaping in a form body.
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("token={}&next=%2Finbox", server.token))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let cookie = signed_in
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{}=", holdpoint::doors::auth::SESSION_COOKIE)))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .ok_or_else(|| format!("sign-in set no session cookie ({})", signed_in.status()))?;
    let mut samples = Samples::default();
    let started = Instant::now();
    for n in 0..WARM_UP + RENDERS {
        let sent = Instant::now();
        let response = client
            .get(format!("{}/inbox", server.base))
            .header(reqwest::header::COOKIE, &cookie)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let page = expect_success(response, "GET /inbox").await?.text().await.map_err(|e| e.to_string())?;
        let elapsed = sent.elapsed();
        if !page.contains("Deploy release 1.0 to production?") {
            return Err("the rendered inbox does not list the questions (is the session signed in?)".into());
        }
        if n >= WARM_UP {
            samples.push(elapsed);
        }
        if started.elapsed() > BUDGET {
            break;
        }
    }
    Ok(samples)
}

/// Each page's lazy route, by the name the splitter gives its module (`__{route}_view_{hash}`), and its path.
const PAGES: [(&str, &str); 9] = [
    ("inbox_route", "/inbox"),
    ("question_route", "/questions/{id}"),
    ("approvals_route", "/approvals"),
    ("runs_route", "/runs"),
    ("run_route", "/runs/{id}"),
    ("settings_route", "/settings"),
    ("workspace_settings_route", "/settings/workspace"),
    ("audit_route", "/audit"),
    ("sign_in_route", "/signin"),
];

/// What the browser downloads of wasm to show and hydrate one page, gzipped as the server sends it, and then, once
/// the page is hydrated, of the deferred module (the event stream, the live modal, the answer forms: `app::deferred`)
/// beyond what the page already has.
struct WasmLoad {
    path: &'static str,
    gzipped: u64,
    modules: usize,
    after_hydration: u64,
}

/// The deferred module's lazy function, by the name the splitter gives its module (`deferred_{hash}`).
const DEFERRED: &str = "deferred_";

fn gzipped_size(pkg: &Path, module: &str) -> Result<u64, String> {
    let file = pkg.join(format!("{module}.wasm.gz"));
    std::fs::metadata(&file).map(|m| m.len()).map_err(|e| format!("{}: {e}", file.display()))
}

/// The first load of every page: the main module plus the modules its route needs, as the splitter's manifest
/// (`__wasm_split_manifest.json`, which the server also reads to preload them) lists them.
fn wasm_loads(pkg: &Path) -> Result<Vec<WasmLoad>, String> {
    let main = gzipped_size(pkg, "holdpoint_bg")?;
    let manifest_path = pkg.join("__wasm_split_manifest.json");
    let manifest = std::fs::read_to_string(&manifest_path).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let manifest: BTreeMap<String, Vec<String>> = serde_json::from_str(&manifest).map_err(|e| e.to_string())?;
    let deferred = manifest
        .iter()
        .find(|(name, _)| name.starts_with(DEFERRED))
        .map(|(_, modules)| modules)
        .ok_or("no deferred module in the manifest")?;
    PAGES
        .iter()
        .map(|(route, path)| {
            let prefix = format!("__{route}_view_");
            let modules = manifest
                .iter()
                .find(|(name, _)| name.starts_with(&prefix))
                .map(|(_, modules)| modules)
                .ok_or_else(|| format!("no module for {path} in the manifest"))?;
            let lazy = modules.iter().map(|m| gzipped_size(pkg, m)).sum::<Result<u64, String>>()?;
            // The sign-in page neither listens nor answers: it never fetches the deferred module.
            let after_hydration = deferred
                .iter()
                .filter(|_| *path != "/signin")
                .filter(|m| !modules.contains(m))
                .map(|m| gzipped_size(pkg, m))
                .sum::<Result<u64, String>>()?;
            Ok(WasmLoad { path, gzipped: main + lazy, modules: modules.len() + 1, after_hydration })
        })
        .collect()
}

fn report_wasm(section: &mut Section, pkg: &Path, loads: &[WasmLoad]) {
    let size = |name: &str| std::fs::metadata(pkg.join(name)).map(|m| m.len()).unwrap_or(0);
    let kib = |bytes: u64| format!("{} KiB", bytes / 1024);
    let heaviest = loads.iter().max_by_key(|load| load.gzipped).expect("PAGES is not empty");
    section.figures.push(Figure::new(
        format!("wasm to load a page, gzip: the heaviest ({})", heaviest.path),
        kib(heaviest.gzipped),
        "≤ 400 KiB",
        heaviest.gzipped <= 400 * 1024,
    ));
    for load in loads {
        section.figures.push(Figure::info(
            format!("wasm to load {}, gzip", load.path),
            format!(
                "{} in {} modules, then {} after hydration",
                kib(load.gzipped),
                load.modules,
                kib(load.after_hydration)
            ),
        ));
    }
    let all: u64 = std::fs::read_dir(pkg)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .filter(|entry| entry.file_name().to_string_lossy().ends_with(".wasm.gz"))
                .filter_map(|entry| entry.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    section.notes.push(format!(
        "The site as `cargo xtask site` builds it (wasm-release profile; Leptos' splitter cuts each page, a lazy \
         route, into modules of its own; wasm-bindgen; `wasm-opt -Oz` on every module), gzipped by zopfli as the \
         server sends it. A page's first load is the main module ({} gzipped, {} before gzip: the router and the top \
         bar) plus the modules its route needs, which the server names in the page's `<head>` so they download in \
         parallel with the main module: what the page needs to show and hydrate. Once it is hydrated, the page \
         fetches the deferred module (`app::deferred`: the event stream, the live modal, the answer forms of the \
         inbox's split view and the run page, the inbox's keys and row answers): \"then … after hydration\" is \
         what of it the page does not have yet. All modules together: {}. The JS glue adds \
         {} and the stylesheet {}, gzipped. A page's modules are fetched once; moving to another page fetches only \
         the modules it does not share with the pages seen before.",
        kib(size("holdpoint_bg.wasm.gz")),
        kib(size("holdpoint_bg.wasm")),
        kib(all),
        kib(size("holdpoint.js.gz")),
        kib(size("holdpoint.css.gz")),
    ));
}
