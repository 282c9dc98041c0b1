//! A schema of one test's own on the tests' PostgreSQL (`HOLDPOINT_TEST_POSTGRES_URL`, default the local `test`
//! database), for the store's unit tests; the integration tests have theirs in `tests/common`.

use sqlx::PgPool;

/// Dropped, with everything in it, when the test ends. Its connections carry its name as `application_name`, so
/// that a test can find its own among every test's in `pg_stat_activity`.
pub(super) struct PostgresSchema {
    admin_url: String,
    name: String,
    /// The database URL whose connections work in the schema.
    pub(super) url: String,
}

impl PostgresSchema {
    /// `None`, with a notice, when PostgreSQL is unreachable outside CI (the test is then skipped).
    pub(super) async fn new() -> Option<Self> {
        let admin_url = std::env::var("HOLDPOINT_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let admin = match PgPool::connect(&admin_url).await {
            Ok(pool) => pool,
            Err(err) if std::env::var("CI").as_deref() == Ok("true") => panic!("PostgreSQL is required in CI: {err}"),
            Err(err) => {
                eprintln!("SKIPPED: PostgreSQL at {admin_url} is unreachable ({err})");
                return None;
            }
        };
        let name = format!("t_{}", uuid::Uuid::now_v7().simple());
        sqlx::query(&format!("CREATE SCHEMA {name}")).execute(&admin).await.unwrap();
        let separator = if admin_url.contains('?') { '&' } else { '?' };
        let url = format!("{admin_url}{separator}options=-c%20search_path%3D{name}&application_name={name}");
        Some(Self { admin_url, name, url })
    }
}

impl Drop for PostgresSchema {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        // The test's runtime cannot be blocked on; a thread with its own can.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                if let Ok(pool) = PgPool::connect(&admin_url).await {
                    let _ = sqlx::query(&format!("DROP SCHEMA {name} CASCADE")).execute(&pool).await;
                }
            });
        })
        .join();
    }
}
