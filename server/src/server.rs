//! Starting the server: open the store, make sure the default workspace (and bootstrap token) exist, start the
//! event hub, serve until told to stop.

use std::sync::Arc;

use app::types::Role;
use leptos::config::LeptosOptions;
use tokio::net::TcpListener;
use tower::ServiceExt;
use uuid::Uuid;

use crate::auth::hash_secret;
use crate::config::ServeConfig;
use crate::events::EventHub;
use crate::state::{App, AppState};
use crate::store::{self, AuditActor, StoreError, TokenRow};

/// The workspace every installation starts with.
pub const DEFAULT_WORKSPACE: &str = "default";

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    DataDir(std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("server error: {0}")]
    Serve(std::io::Error),
}

/// Everything but the socket: what tests use to drive the router directly.
pub async fn build_state(config: ServeConfig) -> Result<AppState, ServerError> {
    let url = config.database.prepare().map_err(ServerError::DataDir)?;
    let token_cache = std::time::Duration::from_secs(config.token_cache_seconds);
    let settings = store::StoreSettings { token_cache, postgres_connections: config.database_connections };
    let store = store::connect_with(&url, settings).await?;
    let workspace = store.ensure_workspace(DEFAULT_WORKSPACE).await?;
    if let Some(secret) = &config.bootstrap_token {
        let created = store
            .insert_token(
                &TokenRow {
                    id: Uuid::now_v7(),
                    workspace_id: workspace.id,
                    name: "bootstrap".into(),
                    role: Role::Admin,
                    secret_hash: hash_secret(secret.expose()),
                    created_at: crate::store::now(),
                    created_by: Some("bootstrap".into()),
                },
                &AuditActor::policy("bootstrap token configuration", None),
            )
            .await?;
        if created {
            tracing::info!("created the bootstrap admin token for workspace {DEFAULT_WORKSPACE:?}");
        }
    }
    let hub = EventHub::start(Arc::clone(&store), config.sse_buffer).await?;
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let runtime = crate::runtime::Runtime::new(Arc::clone(&store), Arc::clone(&metrics), &config);
    if config.run_workers {
        crate::deadlines::spawn(Arc::clone(&store), Arc::clone(&metrics));
        crate::runtime::spawn_workers(Arc::clone(&runtime), hub.clone());
    }
    let site_root = config.site_root();
    if !site_root.join("pkg").is_dir() {
        tracing::warn!(site_root = %site_root.display(), "the built site is missing: pages will not hydrate (run `cargo xtask serve`)");
    }
    let leptos_options = LeptosOptions::builder()
        .output_name("holdpoint")
        .site_root(site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(config.addr)
        .build();
    let shutdown = tokio_util::sync::CancellationToken::new();
    Ok(AppState(Arc::new(App { config, store, hub, metrics, runtime, shutdown, leptos_options })))
}

/// Serves until Ctrl-C or SIGTERM.
pub async fn run(config: ServeConfig) -> Result<(), ServerError> {
    let addr = config.addr;
    let state = build_state(config).await?;
    let listener = bind(addr).await?;
    serve(state, listener).await
}

/// Opens the listening socket; its `local_addr` is the real address when port 0 was asked for.
pub async fn bind(addr: std::net::SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr).await.map_err(|source| ServerError::Bind { addr, source })
}

/// Serves `state` on `listener` until Ctrl-C or SIGTERM (what `serve` and `demo` share).
pub async fn serve(state: AppState, listener: TcpListener) -> Result<(), ServerError> {
    let local = listener.local_addr().map_err(ServerError::Serve)?;
    tracing::info!(backend = ?state.store.backend(), "Holdpoint listening on http://{local}");
    // Test harnesses that pass port 0 read the real address from this line on stdout.
    println!("holdpoint listening on http://{local}");
    print_first_start_link(&state, local).await?;
    let shutdown = state.shutdown.clone();
    let stop = async move {
        shutdown_signal().await;
        // Streams end first (they tell their clients to reconnect), then every connection finishes what it sends.
        shutdown.cancel();
    };
    serve_connections(crate::http::router(state), listener, stop).await;
    Ok(())
}

/// Serves `router` on `listener` until `stop` completes, then waits for every open connection to finish.
///
/// HTTP/1.1 only, straight on hyper's connection builder rather than `axum::serve`: its auto builder first reads
/// a few bytes to tell HTTP/1 from HTTP/2, and hyper's read buffer then grows from 8 to 16 KiB on the next read,
/// for the life of every connection (docs/benchmarks.md, SSE fan-out). Nothing here speaks HTTP/2 without TLS,
/// and a TLS-terminating proxy speaks HTTP/1.1 to its backends.
pub async fn serve_connections(router: axum::Router, listener: TcpListener, stop: impl Future<Output = ()>) {
    let http1 = hyper::server::conn::http1::Builder::new();
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    wait_after_accept_error(&err).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        // Every response and every event is written whole, in one call: waiting to coalesce it with a later write
        // (Nagle) only delays it.
        let _ = stream.set_nodelay(true);
        // The router is shared (an `Arc` inside); each connection only adds the peer's address, which the rate
        // limits are keyed on.
        let service = router.clone().map_request(move |mut request: axum::extract::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(axum::extract::ConnectInfo(remote));
            request.map(axum::body::Body::new)
        });
        let connection = http1.serve_connection(
            hyper_util::rt::TokioIo::new(stream),
            hyper_util::service::TowerToHyperService::new(service),
        );
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::trace!(error = %err, %remote, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
}

/// A client that gave up before its connection was accepted is no reason to pause; anything else (out of file
/// descriptors, say) is, so the loop does not spin while it lasts.
async fn wait_after_accept_error(err: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(err.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset) {
        return;
    }
    tracing::error!(error = %err, "could not accept a connection; retrying in a second");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
}

/// Like a notebook server: while nobody has a way to sign in (no token, no password), each start prints a fresh
/// one-time link that signs its opener in as the workspace's first admin. Printed to stdout, never logged.
async fn print_first_start_link(state: &AppState, local: std::net::SocketAddr) -> Result<(), ServerError> {
    let workspace = state.store.ensure_workspace(DEFAULT_WORKSPACE).await?;
    let Some(code) = crate::people::first_start_signin_code(state.store.as_ref(), workspace.id).await? else {
        return Ok(());
    };
    let base = match &state.config.public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None if local.ip().is_unspecified() => format!("http://127.0.0.1:{}", local.port()),
        None => format!("http://{local}"),
    };
    tracing::info!("nobody can sign in yet: printed a one-time sign-in link for the first admin");
    println!(
        "\nNobody can sign in yet. Open this one-time link (valid {} hours) to sign in as the admin:\n\n    \
         {base}/signin?code={code}\n\nThen set a password under Settings, or create tokens there.\n",
        crate::people::SIGNIN_LINK_HOURS
    );
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
