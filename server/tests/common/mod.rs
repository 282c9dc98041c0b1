//! The test harness: a fresh Holdpoint per test on SQLite (a temporary file) or PostgreSQL (a schema of its own),
//! driven through the router with `oneshot`, or over a real socket when a test needs one.
//!
//! PostgreSQL comes from `HOLDPOINT_TEST_POSTGRES_URL` (default: the local `test` database). With `CI=true` it
//! must be reachable; elsewhere its tests are skipped with a loud notice when it is not.

#![allow(dead_code)]

use std::path::PathBuf;

use app::types::Role;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use chrono::Utc;
use holdpoint::config::ServeConfig;
use holdpoint::credentials::{hash_secret, new_token_secret};
use holdpoint::state::AppState;
use holdpoint::store::{AuditActor, TokenRow};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;
use uuid::Uuid;

pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Removes the test's database when the test ends, however it ends.
pub enum Cleanup {
    SqliteFile(PathBuf),
    PostgresSchema { admin_url: String, schema: String },
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        match self {
            Cleanup::SqliteFile(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    let _ = std::fs::remove_file(file);
                }
            }
            Cleanup::PostgresSchema { admin_url, schema } => {
                let (admin_url, schema) = (admin_url.clone(), schema.clone());
                // Drop runs inside the test's runtime, which cannot be blocked on; a thread with its own can.
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                    runtime.block_on(async {
                        if let Ok(pool) = sqlx::PgPool::connect(&admin_url).await {
                            let _ =
                                sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).execute(&pool).await;
                        }
                    });
                })
                .join();
            }
        }
    }
}

/// The database URL for a fresh test database, and what removes it afterwards.
pub async fn fresh_database(backend: Backend) -> Option<(String, Cleanup)> {
    match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join("holdpoint-tests");
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("{}.db", Uuid::now_v7()));
            Some((format!("sqlite://{}", path.display()), Cleanup::SqliteFile(path)))
        }
        Backend::Postgres => {
            let admin_url =
                std::env::var("HOLDPOINT_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.into());
            let pool = match sqlx::PgPool::connect(&admin_url).await {
                Ok(pool) => pool,
                Err(err) if std::env::var("CI").as_deref() == Ok("true") => {
                    panic!("PostgreSQL is required with CI=true but {admin_url} is unreachable: {err}")
                }
                Err(err) => {
                    eprintln!(
                        "\n!!!!! SKIPPED: PostgreSQL at {admin_url} is unreachable ({err}); this PostgreSQL test did \
                         not run. Start PostgreSQL or set HOLDPOINT_TEST_POSTGRES_URL. !!!!!\n"
                    );
                    return None;
                }
            };
            let schema = format!("t_{}", Uuid::now_v7().simple());
            sqlx::query(&format!("CREATE SCHEMA {schema}")).execute(&pool).await.unwrap();
            pool.close().await;
            let separator = if admin_url.contains('?') { '&' } else { '?' };
            let url = format!("{admin_url}{separator}options=-c%20search_path%3D{schema}");
            Some((url, Cleanup::PostgresSchema { admin_url, schema }))
        }
    }
}

/// A Holdpoint of its own for one test, with an admin token for the `default` workspace.
pub struct TestApp {
    pub state: AppState,
    pub router: Router,
    pub database_url: String,
    /// An admin token of the `default` workspace.
    pub token: String,
    _cleanup: Cleanup,
    _files: FilesDirectory,
}

/// Removes the test's uploads directory (see `ServeConfig::for_tests`) when the test ends.
struct FilesDirectory(Option<PathBuf>);

impl FilesDirectory {
    fn of(config: &ServeConfig) -> Self {
        let directory =
            config.files.files_url.as_deref().and_then(|url| url.strip_prefix("file://")).map(PathBuf::from);
        FilesDirectory(directory.filter(|dir| dir.starts_with(std::env::temp_dir().join("holdpoint-test-files"))))
    }
}

impl Drop for FilesDirectory {
    fn drop(&mut self) {
        if let Some(directory) = &self.0 {
            let _ = std::fs::remove_dir_all(directory);
        }
    }
}

/// A response, its body parsed as JSON when it is JSON.
#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub json: Value,
    pub text: String,
}

impl TestApp {
    /// `None` when the backend is PostgreSQL and it is unavailable outside CI (the test is then skipped).
    pub async fn start(backend: Backend) -> Option<TestApp> {
        Self::start_with(backend, |_| {}).await
    }

    pub async fn start_with(backend: Backend, configure: impl FnOnce(&mut ServeConfig)) -> Option<TestApp> {
        let (database_url, cleanup) = fresh_database(backend).await?;
        let mut config = ServeConfig::for_tests(database_url.clone());
        configure(&mut config);
        let files = FilesDirectory::of(&config);
        let state = holdpoint::server::build_state(config).await.expect("the test server starts");
        let router = holdpoint::doors::http::router(state.clone());
        let mut app = TestApp { state, router, database_url, token: String::new(), _cleanup: cleanup, _files: files };
        app.token = app.create_token("default", Role::Admin).await;
        Some(app)
    }

    /// Another server on the same database, as after a restart or as a second instance. Tokens carry over.
    pub async fn restart(&self, configure: impl FnOnce(&mut ServeConfig)) -> (AppState, Router) {
        let mut config = ServeConfig::for_tests(self.database_url.clone());
        configure(&mut config);
        let state = holdpoint::server::build_state(config).await.expect("the restarted server starts");
        let router = holdpoint::doors::http::router(state.clone());
        (state, router)
    }

    /// Starts the real `holdpoint` binary on this test's database; the process ends when the handle drops.
    pub async fn spawn_process(&self) -> ServerProcess {
        self.spawn_process_with(&[]).await
    }

    /// [`Self::spawn_process`] with more environment variables.
    pub async fn spawn_process_with(&self, env: &[(&str, String)]) -> ServerProcess {
        ServerProcess::spawn(&self.database_url, env).await
    }

    /// A new token for `workspace` (created if missing) with `role`.
    pub async fn create_token(&self, workspace: &str, role: Role) -> String {
        let workspace = self.state.store.ensure_workspace(workspace).await.unwrap();
        let secret = new_token_secret();
        holdpoint::people::store_token(
            self.state.store.as_ref(),
            &TokenRow {
                id: Uuid::now_v7(),
                workspace_id: workspace.id,
                name: format!("{role} of {}", workspace.name),
                role,
                secret_hash: hash_secret(&secret),
                created_at: Utc::now(),
                created_by: None,
                maker_id: None,
            },
            &AuditActor::policy("test harness", None),
        )
        .await
        .unwrap();
        secret
    }

    /// Sends a request through the router; `token` becomes a bearer token, `body` a JSON body.
    /// A response that has not come whole within `SEND_LIMIT` fails the test, naming the request, instead of hanging
    /// the run (the longest long-poll a test asks for is 30 s).
    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        const SEND_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);
        let described = format!("{} {}", request.method(), request.uri());
        let exchange = async {
            let response = self.router.clone().oneshot(request).await.unwrap();
            let (parts, body) = response.into_parts();
            (parts, body.collect().await.unwrap().to_bytes())
        };
        let (response, bytes) = tokio::time::timeout(SEND_LIMIT, exchange)
            .await
            .unwrap_or_else(|_| panic!("{described}: no whole response within {SEND_LIMIT:?}"));
        let status = response.status;
        let headers = response.headers;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        TestResponse { status, headers, json, text }
    }

    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> TestResponse {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = match body {
            Some(body) => request.header(header::CONTENT_TYPE, "application/json").body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        };
        self.send(request.unwrap()).await
    }

    pub async fn get(&self, path: &str) -> TestResponse {
        self.call(Method::GET, path, Some(&self.token), None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> TestResponse {
        self.call(Method::POST, path, Some(&self.token), Some(body)).await
    }

    /// Serves the app on a loopback port; returns its base URL. The server lives as long as the test's runtime.
    pub async fn serve(&self) -> String {
        serve_router(&self.state, self.router.clone()).await
    }
}

/// Serves `router` (of `state`, as [`TestApp::restart`] returns them) on a loopback port; returns its base URL. The
/// server lives as long as the test's runtime.
pub async fn serve_router(state: &AppState, router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = state.config.connections.clone();
    tokio::spawn(async move {
        holdpoint::server::serve_connections(router, listener, &limits, std::future::pending()).await;
    });
    format!("http://{addr}")
}

/// A signed-in browser session: its cookie (`hp_session=...`) and its CSRF token.
#[derive(Debug, Clone)]
pub struct Session {
    pub cookie: String,
    pub csrf: String,
}

impl TestApp {
    /// Posts the sign-in form with these urlencoded fields (e.g. `username=alice&password=...`).
    pub async fn post_sign_in(&self, form: &str) -> TestResponse {
        let request = Request::post("/auth/signin")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(form.to_owned()))
            .unwrap();
        self.send(request).await
    }

    /// Signs in with the form; `None` if the server refused (it then redirects back to the form with an error).
    pub async fn sign_in_with(&self, form: &str) -> Option<Session> {
        let response = self.post_sign_in(form).await;
        assert_eq!(response.status, StatusCode::SEE_OTHER, "{}", response.text);
        let set_cookie = response.headers.get(header::SET_COOKIE)?.to_str().unwrap();
        let cookie = set_cookie.split(';').next().unwrap().to_owned();
        // The session's CSRF token, as the pages embed it; read from the store so a test of people and tokens does
        // not also depend on rendering a page.
        let secret = cookie.split_once('=').unwrap().1;
        let (_, csrf) = self
            .state
            .store
            .session_by_hash(&hash_secret(secret), Utc::now())
            .await
            .unwrap()
            .expect("the new session is stored");
        Some(Session { cookie, csrf })
    }

    /// A request made by a browser session (cookie and CSRF header).
    pub async fn session_call(
        &self,
        session: &Session,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> TestResponse {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::COOKIE, &session.cookie)
            .header("x-csrf-token", &session.csrf);
        let request = match body {
            Some(body) => request.header(header::CONTENT_TYPE, "application/json").body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        };
        self.send(request.unwrap()).await
    }

    /// Polls a run (as the admin) until it has `status`, within 20 s; returns it.
    pub async fn wait_for_run(&self, run_id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let run = self.get(&format!("/api/v1/runs/{run_id}")).await.json;
            if run["status"] == status {
                return run;
            }
            assert!(tokio::time::Instant::now() < deadline, "run never became {status}; it is {run}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Adds a person with a password and a role to the `default` workspace through the API (as its admin).
    pub async fn add_person(&self, username: &str, password: &str, role: Role) -> Value {
        let response = self
            .post("/api/v1/members", serde_json::json!({"username": username, "password": password, "role": role}))
            .await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
        response.json
    }
}

/// A `holdpoint serve` process of a test.
pub struct ServerProcess {
    pub base_url: String,
    _child: tokio::process::Child,
    _files: FilesDirectory,
}

impl ServerProcess {
    /// Starts the real `holdpoint` binary on `database_url` on a loopback port of its own; the process ends when
    /// the handle drops.
    pub async fn spawn(database_url: &str, env: &[(&str, String)]) -> ServerProcess {
        use tokio::io::AsyncBufReadExt;
        let files = std::env::temp_dir().join("holdpoint-test-files").join(Uuid::now_v7().to_string());
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"));
        command
            .arg("serve")
            .env("HOLDPOINT_ADDR", "127.0.0.1:0")
            .env("DATABASE_URL", database_url)
            .env("HOLDPOINT_MIN_TIMEOUT_SECONDS", "1")
            // Uploads in a directory of the process's own, not `./data/files` beside the sources.
            .env("HOLDPOINT_FILES_URL", format!("file://{}", files.display()))
            .env("RUST_LOG", "warn");
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the holdpoint binary starts");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let base_url = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("holdpoint listening on ") {
                    return url.to_owned();
                }
            }
            panic!("the server exited before listening")
        })
        .await
        .expect("the server listens within 30 s");
        ServerProcess { base_url, _child: child, _files: FilesDirectory(Some(files)) }
    }

    /// Asks the process to stop (SIGTERM, as a process supervisor does) and waits until it has exited; `false` if
    /// it is still running after `seconds`.
    pub async fn terminate(mut self, seconds: u64) -> bool {
        let pid = self._child.id().expect("the server is running").to_string();
        std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
        tokio::time::timeout(std::time::Duration::from_secs(seconds), self._child.wait()).await.is_ok()
    }

    /// Kills the process with SIGKILL, as a crash would, and waits until it is gone.
    pub async fn kill(mut self) {
        self._child.kill().await.expect("the server process can be killed");
    }
}

/// Asserts the spec's error shape and code; returns the error object.
pub fn assert_error(response: &TestResponse, status: StatusCode, code: &str) -> Value {
    assert_eq!(response.status, status, "unexpected status; body: {}", response.text);
    let error = &response.json["error"];
    assert_eq!(error["code"], code, "unexpected error code; body: {}", response.text);
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "error without a message: {}", response.text);
    error.clone()
}

/// Opens the event stream of `base` with `token`, resuming after `last_event_id` if given.
pub async fn connect_events(base: &str, token: &str, last_event_id: Option<i64>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(format!("{base}/api/v1/events")).bearer_auth(token);
    if let Some(last) = last_event_id {
        request = request.header("last-event-id", last.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response
}

/// Reads `count` SSE events (within 20 s); returns `(id, event type, data)` of each.
pub async fn read_events(response: reqwest::Response, count: usize) -> Vec<(i64, String, Value)> {
    read_events_until(response, |events| events.len() >= count).await
}

/// Reads SSE events until `done` says the ones read so far are enough (within 20 s); returns `(id, event type,
/// data)` of each.
pub async fn read_events_until(
    response: reqwest::Response,
    done: impl Fn(&[(i64, String, Value)]) -> bool,
) -> Vec<(i64, String, Value)> {
    use futures::StreamExt;
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done(&events) {
        let chunk = tokio::time::timeout_at(deadline, stream.next()).await.expect("events arrive in time");
        buffer.push_str(&String::from_utf8_lossy(&chunk.expect("the stream stays open").unwrap()));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let (mut id, mut event, mut data) = (None, None, None);
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("event:") {
                    event = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str(v.trim()).ok();
                }
            }
            if let (Some(id), Some(event), Some(data)) = (id, event, data)
                && !done(&events)
            {
                events.push((id, event, data));
            }
        }
    }
    events
}

/// Runs each named test function against SQLite and against PostgreSQL: one test source, two backends.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let app = $crate::common::TestApp::start($crate::common::Backend::Sqlite).await.unwrap();
                    super::$name(app).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(app) = $crate::common::TestApp::start($crate::common::Backend::Postgres).await {
                        super::$name(app).await;
                    }
                }
            )*
        }
    };
}

/// Runs each named test function, which takes the backend and starts its own app (with its own limits, scripts
/// directory, ...), on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Backend::Postgres).await;
                }
            )*
        }
    };
}

/// A scripts directory of the test's own: script models replay the turns written there, so runs need no provider.
pub struct Scripts {
    pub dir: PathBuf,
}

impl Scripts {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join("holdpoint-test-scripts").join(uuid::Uuid::now_v7().to_string());
        std::fs::create_dir_all(&dir).unwrap();
        Scripts { dir }
    }

    /// Writes a script's turns; returns the model name that runs it.
    pub fn write(&self, name: &str, turns: &serde_json::Value) -> String {
        std::fs::write(self.dir.join(name), turns.to_string()).unwrap();
        format!("script:{name}")
    }
}

impl Drop for Scripts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
