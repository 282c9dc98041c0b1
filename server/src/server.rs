//! Starting the server: open the store, make sure the default workspace (and bootstrap token) exist, start the
//! event hub, serve until told to stop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leptos::config::LeptosOptions;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::config::{ConnectionConfig, ServeConfig};
use crate::credentials::hash_secret;
use crate::events::EventHub;
use crate::state::{App, AppState};
use crate::store::{self, StoreError};

pub use crate::people::DEFAULT_WORKSPACE;

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
    #[error(
        "HOLDPOINT_BOOTSTRAP_TOKEN is {length} characters long; it must have at least {MIN_BOOTSTRAP_TOKEN_CHARS} \
         (use a long random value, e.g. `hp_` and the output of `openssl rand -hex 24`)"
    )]
    BootstrapTokenTooShort { length: usize },
    #[error(
        "HOLDPOINT_BOOTSTRAP_TOKEN is the example settings' placeholder, which anyone can read; make one of your own \
         (`hp_` and the output of `openssl rand -hex 24`)"
    )]
    BootstrapTokenIsThePlaceholder,
    /// A bearer token is sent in a header, which holds visible ASCII only: a token with a space, a line break (one
    /// read from a file often ends in one) or other characters could never be presented, and nobody could sign in.
    #[error(
        "HOLDPOINT_BOOTSTRAP_TOKEN has a character other than visible ASCII (at position {position}: a space, a line \
         break, a tab or a non-ASCII character); no request can send it. Remove it"
    )]
    BootstrapTokenNotSendable { position: usize },
    #[error("the bootstrap token: {0}")]
    BootstrapToken(String),
    #[error("the notification channels' settings: {0}")]
    Channels(String),
    #[error("single sign-on: {0}")]
    Sso(#[from] crate::sso::SsoSetupError),
    #[error("the MCP gateway's configured upstreams: {0}")]
    Upstreams(String),
    #[error("file storage: {0}")]
    Files(#[from] crate::files::FilesSetupError),
}

/// The shortest bootstrap token taken: it is an admin credential that anyone who can reach the server may guess
/// at, so it needs the entropy of a generated token, not of a password.
pub const MIN_BOOTSTRAP_TOKEN_CHARS: usize = 32;
/// How the bootstrap token of the example settings (`holdpoint.toml.example`) begins.
pub const PLACEHOLDER_BOOTSTRAP_TOKEN_PREFIX: &str = "hp_replace_with";

/// Everything but the socket: what tests use to drive the router directly.
pub async fn build_state(config: ServeConfig) -> Result<AppState, ServerError> {
    check_settings(&config)?;
    let url = config.database.prepare().map_err(ServerError::DataDir)?;
    let token_cache = std::time::Duration::from_secs(config.token_cache_seconds);
    let settings = store::StoreSettings { token_cache, postgres_connections: config.database_connections };
    let store = store::connect_with(&url, settings).await?;
    let workspace = store.ensure_workspace(DEFAULT_WORKSPACE).await?;
    let configured_upstreams =
        crate::doors::gateway::stdio::Configured::resolve(store.as_ref(), &config.gateway_upstreams)
            .await
            .map_err(ServerError::Upstreams)?;
    let channel_keys =
        crate::notifications::channel_keys(store.as_ref(), config.channels.vapid_private_key.as_ref()).await?;
    let slack = config.channels.slack().map_err(|e| ServerError::Channels(e.to_string()))?;
    let sends_on = config.sends_on();
    let sso =
        crate::sso::Sso::configure(&config.sso, config.public_url.as_deref(), store.as_ref()).await?.map(Arc::new);
    let files = crate::files::FileStorage::open(&config.files, &config.database.data_dir)?;
    let hub = EventHub::start(Arc::clone(&store), config.sse_buffer).await?;
    if let Some(secret) = &config.bootstrap_token {
        let installed =
            crate::people::install_bootstrap_token(store.as_ref(), &hub, &workspace, hash_secret(secret.expose()))
                .await
                .map_err(|e| ServerError::BootstrapToken(e.to_string()))?;
        if installed.created {
            tracing::info!("created the bootstrap admin token for workspace {DEFAULT_WORKSPACE:?}");
        }
        for id in installed.revoked {
            tracing::info!(token = %id, "revoked the token an earlier HOLDPOINT_BOOTSTRAP_TOKEN made");
        }
    }
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let runtime = crate::runtime::Runtime::new(
        Arc::clone(&store),
        Arc::clone(&metrics),
        hub.clone(),
        config.runtime.clone(),
        config.scripts_dir(),
        config.timeout_bounds(),
        sends_on.clone(),
    );
    let webhooks_queued = Arc::new(tokio::sync::Notify::new());
    if config.run_workers {
        crate::workers::deadlines::spawn(Arc::clone(&store), Arc::clone(&metrics), hub.clone(), sends_on.clone());
        crate::runtime::spawn_workers(Arc::clone(&runtime), Arc::clone(&store), hub.clone());
        crate::files::spawn_sweeper(Arc::clone(&store), files.clone());
        let sender = crate::channels::webhooks::WebhookSender::new(config.channels.webhook_urls())
            .map_err(ServerError::Channels)?;
        let worker = crate::workers::webhook_sender::WebhookWorker::new(
            Arc::clone(&store),
            sender,
            Arc::clone(&metrics),
            Arc::clone(&webhooks_queued),
        );
        Arc::new(worker).spawn(&hub);
    }
    let site = crate::doors::web::site::Site::choose(&config);
    if !site.is_built() {
        tracing::warn!(
            ?site,
            "the built site is missing: pages will not hydrate. Set HOLDPOINT_SITE_ROOT to the directory of a built \
             site (`cargo xtask site` builds one into target/site), or run a binary with the site built in \
             (`cargo xtask dist`)"
        );
    }
    let leptos_options = LeptosOptions::builder()
        .output_name("holdpoint")
        .site_root(site.leptos_site_root())
        .site_pkg_dir("pkg")
        .site_addr(config.addr)
        .build();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let gateway_waits = Arc::new(crate::doors::gateway::waits::Waits::new(
        Arc::clone(&store),
        runtime.instance,
        config.gateway_hold_seconds,
    ));
    gateway_waits.start().await?;
    if config.run_workers {
        crate::doors::gateway::waits::spawn_keeper(Arc::clone(&gateway_waits), Arc::clone(&metrics));
    }
    Ok(AppState(Arc::new(App {
        config,
        store,
        channel_keys,
        slack,
        sends_on,
        sso,
        hub,
        webhooks_queued,
        metrics,
        runtime,
        shutdown,
        leptos_options,
        site,
        rules_cache: Default::default(),
        configured_upstreams: Arc::new(configured_upstreams),
        files,
        answer_drafts: Default::default(),
        gateway_waits,
    })))
}

/// The checks of the settings that need no database and no network: what `holdpoint config check` runs too.
pub fn check_settings(config: &ServeConfig) -> Result<(), ServerError> {
    if let Some(secret) = &config.bootstrap_token {
        if let Some(position) = secret.expose().chars().position(|c| !c.is_ascii_graphic()) {
            return Err(ServerError::BootstrapTokenNotSendable { position: position + 1 });
        }
        let length = secret.expose().chars().count();
        if length < MIN_BOOTSTRAP_TOKEN_CHARS {
            return Err(ServerError::BootstrapTokenTooShort { length });
        }
        // The example settings' placeholder is published with every release: as an admin token it lets anyone in.
        if secret.expose().starts_with(PLACEHOLDER_BOOTSTRAP_TOKEN_PREFIX) {
            return Err(ServerError::BootstrapTokenIsThePlaceholder);
        }
    }
    let url = config.database.url();
    if !crate::store::is_supported_url(&url) {
        return Err(StoreError::UnsupportedUrl(crate::store::redacted_url(&url)).into());
    }
    config.channels.email_sender().map_err(|e| ServerError::Channels(e.to_string()))?;
    config.channels.slack().map_err(|e| ServerError::Channels(e.to_string()))?;
    crate::files::FileStorage::check(&config.files)?;
    Ok(())
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
    if state.config.run_workers {
        start_outbox(&state, local)?;
    }
    let stopping = state.clone();
    let stop = async move {
        shutdown_signal().await;
        // The gateway's waiting calls end first, with their questions cancelled (no later start makes them), and the
        // other instances learn this one stopped; then streams end (they tell their clients to reconnect), then
        // every connection finishes what it sends.
        stopping.gateway_waits.cancel_all(&stopping).await;
        stopping.gateway_waits.stop().await;
        stopping.shutdown.cancel();
    };
    let connections = state.config.connections.clone();
    serve_connections(crate::doors::http::router(state), listener, &connections, stop).await;
    Ok(())
}

/// The address people reach this server at: `HOLDPOINT_PUBLIC_URL`, or the one it listens on.
pub(crate) fn public_url(config: &ServeConfig, local: std::net::SocketAddr) -> String {
    match &config.public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None if local.ip().is_unspecified() => format!("http://127.0.0.1:{}", local.port()),
        None => format!("http://{local}"),
    }
}

/// Starts the outbox's worker, which sends the notifications questions are asked with.
fn start_outbox(state: &AppState, local: std::net::SocketAddr) -> Result<(), ServerError> {
    let outbox = crate::workers::outbox::Outbox::new(
        Arc::clone(&state.store),
        Arc::clone(&state.metrics),
        &state.config.channels,
        state.channel_keys.clone(),
        public_url(&state.config, local),
    )
    .map_err(ServerError::Channels)?;
    if outbox.sends_anything() {
        Arc::new(outbox).spawn(&state.hub);
    }
    Ok(())
}

/// Serves `router` on `listener` until `stop` completes, then waits for every open connection to finish.
///
/// HTTP/1.1 only, straight on hyper's connection builder rather than `axum::serve`: its auto builder first reads
/// a few bytes to tell HTTP/1 from HTTP/2, and hyper's read buffer then grows from 8 to 16 KiB on the next read,
/// for the life of every connection (docs/benchmarks.md, SSE fan-out). Nothing here speaks HTTP/2 without TLS,
/// and a TLS-terminating proxy speaks HTTP/1.1 to its backends.
///
/// A socket costs a file descriptor and memory whether or not it sends anything, so `limits` bounds them: at most
/// `max_connections` are open (the next one is accepted when one closes; until then it waits in the kernel's
/// listen queue, as it would if the server were busy, rather than being refused outright), a connection with no
/// request in flight is closed after `idle_timeout_seconds`, and one whose request headers have started to arrive
/// after `header_read_timeout_seconds`. hyper's own header timeout is not used: it runs from the moment hyper
/// waits for a request, so it would also close idle connections, and it needs its timer on every connection.
pub async fn serve_connections(
    router: axum::Router,
    listener: TcpListener,
    limits: &ConnectionConfig,
    stop: impl Future<Output = ()>,
) {
    let http1 = hyper::server::conn::http1::Builder::new();
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections as usize));
    let timeouts = Timeouts {
        header_read: Duration::from_secs(limits.header_read_timeout_seconds),
        idle: Duration::from_secs(limits.idle_timeout_seconds),
    };
    tokio::pin!(stop);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut stop => break,
        };
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
        let activity = Arc::new(Activity::new());
        // The router is shared (an `Arc` inside); each request only adds the peer's address, which the rate limits
        // are keyed on, and marks the connection busy until its response has been written.
        let service = tower::service_fn({
            let (router, activity) = (router.clone(), Arc::clone(&activity));
            move |request: axum::extract::Request<hyper::body::Incoming>| {
                let in_flight = activity.request_started();
                let mut request = request.map(axum::body::Body::new);
                request.extensions_mut().insert(axum::extract::ConnectInfo(remote));
                let response = router.clone().oneshot(request);
                async move {
                    let response = response.await?;
                    Ok::<_, std::convert::Infallible>(response.map(|body| {
                        axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
                            let _busy_until_the_body_is_dropped = &in_flight;
                            frame
                        }))
                    }))
                }
            }
        });
        let io = hyper_util::rt::TokioIo::new(WatchedIo { inner: stream, activity: Arc::clone(&activity) });
        let connection = http1.serve_connection(io, hyper_util::service::TowerToHyperService::new(service));
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            let _slot = slot;
            tokio::pin!(connection);
            loop {
                // No deadline while a request is in flight; a change of state (a request's end, the next one's
                // first bytes) wakes the loop to work out the new one.
                let deadline = activity.deadline(&timeouts);
                let expired = async move {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    ended = &mut connection => {
                        if let Err(err) = ended {
                            tracing::trace!(error = %err, %remote, "connection ended with an error");
                        }
                        break;
                    }
                    () = activity.changed.notified() => {}
                    () = expired => {
                        if activity.deadline(&timeouts).is_some_and(|deadline| deadline <= Instant::now()) {
                            // Dropping the connection closes the socket; no request is in flight to be cut.
                            tracing::debug!(%remote, "closed a connection that sent no request in time");
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
}

/// The connection timeouts of [`serve_connections`].
#[derive(Clone, Copy)]
struct Timeouts {
    header_read: Duration,
    idle: Duration,
}

/// What a connection is doing, as far as its timeouts care: how many requests are in flight, since when it has
/// had none, and when the next request's first bytes arrived.
struct Activity {
    state: std::sync::Mutex<ActivityState>,
    /// Told when the deadline moves earlier than the one the connection's task sleeps until, or appears.
    changed: tokio::sync::Notify,
}

struct ActivityState {
    in_flight: usize,
    idle_since: Instant,
    head_started: Option<Instant>,
}

impl Activity {
    fn new() -> Self {
        let state = ActivityState { in_flight: 0, idle_since: Instant::now(), head_started: None };
        Activity { state: std::sync::Mutex::new(state), changed: tokio::sync::Notify::new() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        // The state is a few numbers, consistent after every statement: a panic elsewhere cannot leave it torn.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bytes arrived: with no request in flight, they begin the next request's headers.
    fn bytes_read(&self) {
        let mut state = self.state();
        if state.in_flight == 0 && state.head_started.is_none() {
            state.head_started = Some(Instant::now());
            self.changed.notify_one();
        }
    }

    /// A request's headers are complete and it is being handled; the connection is busy until the guard drops.
    fn request_started(self: &Arc<Self>) -> InFlight {
        let mut state = self.state();
        state.in_flight += 1;
        state.head_started = None;
        InFlight(Arc::clone(self))
    }

    /// When the connection is to be closed if nothing changes; `None` while a request is in flight.
    fn deadline(&self, timeouts: &Timeouts) -> Option<Instant> {
        let state = self.state();
        match (state.in_flight, state.head_started) {
            (0, Some(started)) => Some(started + timeouts.header_read),
            (0, None) => Some(state.idle_since + timeouts.idle),
            _ => None,
        }
    }
}

/// One request in flight, until its response body has been written (or abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.in_flight -= 1;
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
            state.head_started = None;
            self.0.changed.notify_one();
        }
    }
}

/// The socket, telling [`Activity`] when bytes arrive.
struct WatchedIo {
    inner: tokio::net::TcpStream,
    activity: Arc<Activity>,
}

impl tokio::io::AsyncRead for WatchedIo {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl tokio::io::AsyncWrite for WatchedIo {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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
    let base = public_url(&state.config, local);
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
