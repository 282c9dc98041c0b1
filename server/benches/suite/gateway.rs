//! The MCP gateway's overhead: an allowed tool call through `/mcp/gateway` against the same call made to the
//! upstream directly, side by side in one run, at 200 calls a second each.
//!
//! The upstream is a minimal MCP server in this process (rmcp's streamable HTTP server with one tool, `echo`) on
//! loopback; the gateway is a `holdpoint serve` on SQLite with `HOLDPOINT_UPSTREAM_ALLOW_PRIVATE=true`, the
//! upstream registered and the workspace's rules allowing every call. Both clients are rmcp's, each with a session
//! of its own opened before timing; a call's latency runs from sending `tools/call` to having its result.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolRequestParams, ServerCapabilities, ServerConfig};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde_json::json;
use tokio::net::TcpListener;

use crate::report::{Figure, Section};
use crate::server::{FreshDb, Server, expect_success, http};
use crate::{Samples, ms};

/// Calls a second on each path, and for how long.
const RATE: u32 = 200;
const DURATION: Duration = Duration::from_secs(10);
/// Calls made on each path before timing, so that connections and caches are warm.
const WARM_UP: usize = 200;

/// The upstream of the benchmark: one tool that echoes its text.
#[derive(Clone)]
struct Echo;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[tool_router]
impl Echo {
    #[tool(description = "Echoes its text.")]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }
}

#[tool_handler]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

type Client = RunningService<RoleClient, ()>;

async fn connect(url: String, token: Option<&str>) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    tokio::time::timeout(Duration::from_secs(10), ().serve(StreamableHttpClientTransport::from_config(config)))
        .await
        .map_err(|_| format!("{url}: no MCP session within 10 s"))?
        .map_err(|e| format!("{url}: {e}"))
}

pub async fn run() -> Result<Section, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("cannot listen: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service = StreamableHttpService::new(|| Ok(Echo), Arc::new(LocalSessionManager::default()), config);
    let upstream = tokio::spawn(async move {
        let _ = axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await;
    });
    let db = FreshDb::sqlite()?;
    let server = Server::start_with("gateway", &db, &[("HOLDPOINT_UPSTREAM_ALLOW_PRIVATE", "true")]).await?;
    let measured = measure(&server, port).await;
    server.stop().await;
    upstream.abort();
    let (direct, through) = measured?;

    let mut section = Section::new("MCP gateway");
    let added_p50 = through.p50().saturating_sub(direct.p50());
    let added_p99 = through.p99().saturating_sub(direct.p99());
    section.figures.push(Figure::new(
        format!("Allowed call, added by the gateway, {RATE} calls/s: p50"),
        ms(added_p50),
        "≤ 1 ms",
        added_p50 <= Duration::from_millis(1),
    ));
    section.figures.push(Figure::new(
        format!("Allowed call, added by the gateway, {RATE} calls/s: p99"),
        ms(added_p99),
        "≤ 5 ms",
        added_p99 <= Duration::from_millis(5),
    ));
    for (label, samples) in [("directly", &direct), ("through the gateway", &through)] {
        section.figures.push(Figure::info(
            format!("Allowed call {label}"),
            format!("p50 {} · p99 {} · max {}", ms(samples.p50()), ms(samples.p99()), ms(samples.max())),
        ));
    }
    section.notes.push(format!(
        "A fresh server on SQLite with `HOLDPOINT_UPSTREAM_ALLOW_PRIVATE=true`, one upstream registered (an rmcp \
         streamable HTTP server in the load generator with one tool, `echo`) and rules whose default is `allow`. Two \
         rmcp clients, one to the upstream and one to `/mcp/gateway`, each call `echo` {RATE} times a second for {} s \
         at once, after {WARM_UP} calls each to warm up; a sample runs from sending `tools/call` to having its \
         result. The added figures are the gateway's percentile minus the direct one: {} calls timed directly, {} \
         through the gateway.",
        DURATION.as_secs(),
        direct.len(),
        through.len()
    ));
    Ok(section)
}

async fn measure(server: &Server, port: u16) -> Result<(Samples, Samples), String> {
    let client = http();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    expect_success(
        client
            .put(format!("{}/api/v1/rules", server.base))
            .bearer_auth(&server.token)
            .json(&json!({ "rules": [], "default": "allow" }))
            .send()
            .await
            .map_err(|e| e.to_string())?,
        "allowing every call",
    )
    .await?;
    expect_success(
        client
            .post(format!("{}/api/v1/upstreams", server.base))
            .bearer_auth(&server.token)
            .json(&json!({ "name": "bench", "url": upstream_url }))
            .send()
            .await
            .map_err(|e| e.to_string())?,
        "registering the upstream",
    )
    .await?;
    let direct = Arc::new(connect(upstream_url, None).await?);
    let through = Arc::new(connect(format!("{}/mcp/gateway", server.base), Some(&server.token)).await?);
    for _ in 0..WARM_UP {
        call(&direct, "echo").await?;
        call(&through, "bench__echo").await?;
    }
    let (direct, through) = tokio::join!(steadily(direct, "echo"), steadily(through, "bench__echo"));
    Ok((direct?, through?))
}

/// One call of `tool`, timed; an error result is a failure of the run.
async fn call(client: &Client, tool: &'static str) -> Result<Duration, String> {
    let arguments = json!({ "text": "ping" }).as_object().cloned().unwrap_or_default();
    let started = Instant::now();
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .map_err(|e| format!("{tool}: {e}"))?;
    let elapsed = started.elapsed();
    if result.is_error == Some(true) {
        return Err(format!("{tool} answered an error: {:?}", result.content));
    }
    Ok(elapsed)
}

/// [`RATE`] calls a second for [`DURATION`], each started on time whatever the ones before it take.
async fn steadily(client: Arc<Client>, tool: &'static str) -> Result<Samples, String> {
    let count = (u64::from(RATE) * DURATION.as_secs()) as usize;
    let interval = Duration::from_secs_f64(1.0 / f64::from(RATE));
    let started = tokio::time::Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..count {
        tokio::time::sleep_until(started + interval * n as u32).await;
        let client = Arc::clone(&client);
        calls.spawn(async move { call(&client, tool).await });
    }
    let mut samples = Samples::default();
    while let Some(done) = calls.join_next().await {
        samples.push(done.map_err(|e| e.to_string())??);
    }
    Ok(samples)
}
