//! The web UI: the size of the wasm bundle browsers download, and how long the server takes to render `/inbox`.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::report::{Figure, Section};
use crate::server::{FreshDb, Server, expect_success, http, site_root, workspace_root};
use crate::{Samples, ms};

const QUESTIONS: usize = 60;
const WARM_UP: usize = 30;
const RENDERS: usize = 400;
const BUDGET: Duration = Duration::from_secs(30);

pub async fn run() -> Result<Section, String> {
    let mut section = Section::new("Web UI");
    let pkg = site_root().join("pkg");
    let size = |name: &str| std::fs::metadata(pkg.join(name)).map(|m| m.len()).ok();
    match (size("holdpoint_bg.wasm.gz"), size("holdpoint_bg.wasm")) {
        (Some(gzipped), Some(raw)) => {
            section.figures.push(Figure::new(
                "wasm bundle, gzip",
                format!("{} KiB", gzipped / 1024),
                "≤ 400 KiB",
                gzipped <= 400 * 1024,
            ));
            let js = size("holdpoint.js.gz").unwrap_or(0);
            let css = size("holdpoint.css.gz").unwrap_or(0);
            section.notes.push(format!(
                "The bundle is `{}` as `cargo xtask site` builds it (wasm-release profile, wasm-bindgen, \
                 `wasm-opt -Oz`), gzipped at level 9 as the server sends it: {} KiB ({} KiB before gzip). The JS \
                 glue adds {} KiB and the stylesheet {} KiB, gzipped.",
                pkg.join("holdpoint_bg.wasm").strip_prefix(workspace_root()).unwrap_or(&pkg).display(),
                gzipped / 1024,
                raw / 1024,
                js / 1024,
                css / 1024
            ));
        }
        _ => {
            section.figures.push(Figure::new("wasm bundle, gzip", "not built", "≤ 400 KiB", false));
            section.notes.push(format!(
                "No bundle in {}: run `cargo xtask bench` (it builds the site first) or `cargo xtask site`.",
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
        .find(|v| v.starts_with(&format!("{}=", holdpoint::auth::SESSION_COOKIE)))
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
