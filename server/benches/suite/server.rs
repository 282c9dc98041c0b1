//! Fresh databases and real `holdpoint serve` processes for the benchmarks.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use uuid::Uuid;

/// Where PostgreSQL is unless `HOLDPOINT_BENCH_POSTGRES_URL` (or the tests' `HOLDPOINT_TEST_POSTGRES_URL`) says.
const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the server crate is in the workspace").to_path_buf()
}

/// Scratch space for SQLite files and server logs: on the same disk as a real data directory would be (a tmpfs
/// would make `fsync` free and the durable figures meaningless).
pub fn scratch_dir() -> PathBuf {
    workspace_root().join("target/bench")
}

/// The site the servers serve (`cargo xtask bench` builds it first and names it).
pub fn site_root() -> PathBuf {
    std::env::var_os("HOLDPOINT_SITE_ROOT").map_or_else(|| workspace_root().join("target/site"), PathBuf::from)
}

/// A PostgreSQL server the suite may create databases on.
#[derive(Debug, Clone)]
pub struct Postgres {
    pub admin_url: String,
    /// `version()` and the settings that decide what a commit costs.
    pub description: String,
}

/// The PostgreSQL server to use, or why there is none.
pub async fn postgres() -> Result<Postgres, String> {
    let admin_url = std::env::var("HOLDPOINT_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("HOLDPOINT_TEST_POSTGRES_URL"))
        .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.into());
    let pool = tokio::time::timeout(Duration::from_secs(5), sqlx::PgPool::connect(&admin_url))
        .await
        .map_err(|_| format!("{admin_url} did not answer within 5 s"))?
        .map_err(|err| format!("{admin_url} is unreachable: {err}"))?;
    let (version, sync_commit, fsync, shared_buffers): (String, String, String, String) = sqlx::query_as(
        "SELECT version(), current_setting('synchronous_commit'), current_setting('fsync'), \
         current_setting('shared_buffers')",
    )
    .fetch_one(&pool)
    .await
    .map_err(|err| format!("cannot query {admin_url}: {err}"))?;
    pool.close().await;
    let version = version.split(" on ").next().unwrap_or(&version).to_owned();
    Ok(Postgres {
        admin_url,
        description: format!(
            "{version} (synchronous_commit={sync_commit}, fsync={fsync}, shared_buffers={shared_buffers})"
        ),
    })
}

/// Which database a benchmark runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn label(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// A database of its own for one benchmark, removed when dropped.
pub struct FreshDb {
    pub url: String,
    pub backend: Backend,
    /// The SQLite file's directory, or the PostgreSQL admin URL and database name.
    cleanup: Cleanup,
}

enum Cleanup {
    Directory(PathBuf),
    Database { admin_url: String, name: String },
}

impl FreshDb {
    pub fn sqlite() -> Result<FreshDb, String> {
        FreshDb::sqlite_in(&scratch_dir())
    }

    /// A SQLite file under `parent` (`/dev/shm` shows what the server does when `fsync` costs nothing).
    pub fn sqlite_in(parent: &std::path::Path) -> Result<FreshDb, String> {
        let dir = parent.join(format!("holdpoint-bench-db-{}", Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let url = format!("sqlite://{}", dir.join("holdpoint.db").display());
        Ok(FreshDb { url, backend: Backend::Sqlite, cleanup: Cleanup::Directory(dir) })
    }

    pub async fn postgres(postgres: &Postgres) -> Result<FreshDb, String> {
        let name = format!("holdpoint_bench_{}", Uuid::now_v7().simple());
        let pool = sqlx::PgPool::connect(&postgres.admin_url).await.map_err(|e| e.to_string())?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&pool)
            .await
            .map_err(|e| format!("cannot create database {name}: {e}"))?;
        pool.close().await;
        let mut url = reqwest::Url::parse(&postgres.admin_url).map_err(|e| format!("bad PostgreSQL URL: {e}"))?;
        url.set_path(&format!("/{name}"));
        Ok(FreshDb {
            url: url.to_string(),
            backend: Backend::Postgres,
            cleanup: Cleanup::Database { admin_url: postgres.admin_url.clone(), name },
        })
    }

    pub async fn fresh(backend: Backend, postgres: Option<&Postgres>) -> Result<FreshDb, String> {
        match (backend, postgres) {
            (Backend::Sqlite, _) => FreshDb::sqlite(),
            (Backend::Postgres, Some(postgres)) => FreshDb::postgres(postgres).await,
            (Backend::Postgres, None) => Err("PostgreSQL is not reachable".into()),
        }
    }
}

impl Drop for FreshDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Directory(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Database { admin_url, name } => {
                let (admin_url, name) = (admin_url.clone(), name.clone());
                // Drop may run inside the runtime, which cannot be blocked on; a thread with its own can.
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                    runtime.block_on(async {
                        if let Ok(pool) = sqlx::PgPool::connect(&admin_url).await {
                            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .execute(&pool)
                                .await;
                        }
                    });
                })
                .join();
            }
        }
    }
}

/// A running `holdpoint serve`; killed if dropped without [`Server::stop`].
pub struct Server {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// The bootstrap admin token of the `default` workspace.
    pub token: String,
    pub pid: u32,
    child: tokio::process::Child,
}

impl Server {
    /// Starts `holdpoint serve` on `db` with the shipped defaults, on a free loopback port. Its log goes to
    /// `target/bench/logs/<name>.log`.
    pub async fn start(name: &str, db: &FreshDb) -> Result<Server, String> {
        Self::start_with(name, db, &[]).await
    }

    /// [`Server::start`] with settings of `env` on top (channels to send on, say).
    pub async fn start_with(name: &str, db: &FreshDb, env: &[(&str, &str)]) -> Result<Server, String> {
        let logs = scratch_dir().join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
        let log_path = logs.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let token = format!("hp_bench_{}", Uuid::new_v4().simple());
        let data_dir = scratch_dir().join(format!("data-{}", Uuid::now_v7().simple()));
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"))
            .arg("serve")
            .env("HOLDPOINT_ADDR", "127.0.0.1:0")
            .env("DATABASE_URL", &db.url)
            .env("HOLDPOINT_DATA_DIR", &data_dir)
            .env("HOLDPOINT_BOOTSTRAP_TOKEN", &token)
            .env("HOLDPOINT_SITE_ROOT", site_root())
            // The abuse limits on creations (20 a second per token by default) would cap a load generator that
            // asks with one token from one address; the suite measures what the server can do, so it lifts them.
            .env("HOLDPOINT_CREATE_RATE_BURST", "1000000")
            .env("HOLDPOINT_CREATE_RATE_PER_SECOND", "1000000")
            .env("HOLDPOINT_CREATE_IP_RATE_BURST", "1000000")
            .env("HOLDPOINT_CREATE_IP_RATE_PER_SECOND", "1000000")
            // The fan-out holds 10 000 event streams at once, the default connection cap, besides its other clients,
            // all with the one token (32 streams per caller by default).
            .env("HOLDPOINT_MAX_CONNECTIONS", "20000")
            .env("HOLDPOINT_STREAMS_PER_CALLER", "20000")
            // The shipped log level, whatever the shell running the suite has set.
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", env!("CARGO_BIN_EXE_holdpoint")))?;
        let pid = child.id().ok_or("the server exited at once")?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        let base = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("holdpoint listening on ") {
                    return Some(url.to_owned());
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(|| format!("the server did not start; see {}", log_path.display()))?;
        // Keep reading stdout so a late line never meets a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let addr = base.trim_start_matches("http://").to_owned();
        Ok(Server { base, addr, token, pid, child })
    }

    /// The server's resident memory, from `/proc/<pid>/status`.
    pub fn rss_kib(&self) -> Result<u64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .map_err(|e| format!("cannot read the server's /proc status: {e}"))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| "no VmRSS in /proc status".into())
    }

    /// Asks the server to stop (SIGTERM) and waits; kills it if it takes more than 15 s.
    pub async fn stop(mut self) {
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pid.to_string()]).status();
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// An HTTP client for loopback load: no proxy from the environment, connections kept alive.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1024)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client")
}

/// Fails with the status and body unless the response is a success.
pub async fn expect_success(response: reqwest::Response, what: &str) -> Result<reqwest::Response, String> {
    if response.status().is_success() {
        Ok(response)
    } else {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        Err(format!("{what}: {status} {body}"))
    }
}

/// Asks `rate` questions a second for `duration` from one client, the `n`th titled `{title} #{n}` with `fields` added
/// to its body, and waits until every `POST` has been answered; returns when each was sent, in order.
pub async fn ask_steadily(
    server: &Server,
    rate: u32,
    duration: Duration,
    title: &str,
    fields: &serde_json::Value,
) -> Result<Vec<std::time::Instant>, String> {
    let client = http();
    let count = (u64::from(rate) * duration.as_secs()) as usize;
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
    let started = tokio::time::Instant::now();
    let mut asked_at = Vec::with_capacity(count);
    let mut requests = tokio::task::JoinSet::new();
    for n in 0..count {
        tokio::time::sleep_until(started + interval * n as u32).await;
        asked_at.push(std::time::Instant::now());
        let (client, base, token) = (client.clone(), server.base.clone(), server.token.clone());
        let mut body = fields.clone();
        body["title"] = serde_json::Value::String(format!("{title} #{n}"));
        requests.spawn(async move {
            let response = client
                .post(format!("{base}/api/v1/questions"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            expect_success(response, "asking").await.map(drop)
        });
    }
    while let Some(done) = requests.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    Ok(asked_at)
}

/// The question number in a text that carries a title [`ask_steadily`] gave (`{title} #12`).
pub fn question_number(text: &str, title: &str) -> Option<usize> {
    let after = &text[text.find(title)? + title.len()..];
    let digits: String = after.trim_start_matches(" #").chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
