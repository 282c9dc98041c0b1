//! The running instances, and which of them holds each MCP gateway call waiting on a question: the rows, and the
//! [`GatewayHoldStore`] trait with its one implementation for both backends. A call lives in the memory of the
//! instance that took it, so the others learn from here whether it is held, or ended, by an instance still running,
//! or was left by one that is gone.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreResult;
use super::backend::{Sql, SqlBackend, Statement};
use super::sql::table_row;

table_row!(GATEWAY_HOLD_COLUMNS = GatewayHoldRow in "gateway_holds": question_id, workspace_id, instance_id,
    released);

/// What `released` says of a call that ended in the instance that held it.
pub const HOLD_ENDED: &str = "ended";
/// What `released` says of a call whose instance was found gone while it held the call.
pub const HOLD_LAPSED: &str = "lapsed";

/// An instance's hold of the gateway call waiting on a question.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct GatewayHoldRow {
    pub question_id: Uuid,
    pub workspace_id: Uuid,
    /// The instance whose memory holds the call.
    pub instance_id: Uuid,
    /// `None` while held; [`HOLD_ENDED`] or [`HOLD_LAPSED`] once not.
    pub released: Option<String>,
}

/// The running instances and the gateway's holds of its waiting calls. Implemented by both stores.
#[async_trait]
pub trait GatewayHoldStore: Send + Sync {
    /// Records that `instance` runs until `until` unless it says so again: at its start, at each renewal, and (with
    /// `until` now) when it stops.
    async fn keep_instance(&self, instance: Uuid, until: DateTime<Utc>) -> StoreResult<()>;
    /// Whether `instance` still runs at `now`.
    async fn instance_alive(&self, instance: Uuid, now: DateTime<Utc>) -> StoreResult<bool>;
    /// Forgets the instances gone before `before`.
    async fn forget_instances(&self, before: DateTime<Utc>) -> StoreResult<()>;
    /// Records a new hold.
    async fn hold_gateway_call(&self, hold: &GatewayHoldRow) -> StoreResult<()>;
    /// Releases the hold of `question`'s call as `released` ([`HOLD_ENDED`] by its instance, [`HOLD_LAPSED`] by
    /// another that found it gone); `false` if `instance` does not hold it, or it was released already.
    async fn release_gateway_hold(&self, question: Uuid, instance: Uuid, released: &str) -> StoreResult<bool>;
    /// The hold of `question`'s call, if a gateway call waited on it.
    async fn gateway_hold(&self, question: Uuid) -> StoreResult<Option<GatewayHoldRow>>;
    /// Up to `limit` calls still held by instances gone at `now`.
    async fn orphaned_gateway_holds(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<GatewayHoldRow>>;
}

#[async_trait]
impl<B: SqlBackend> GatewayHoldStore for B {
    async fn keep_instance(&self, instance: Uuid, until: DateTime<Utc>) -> StoreResult<()> {
        let keep = Statement::new(
            "INSERT INTO instances (id, alive_until) VALUES ($1, $2) \
             ON CONFLICT (id) DO UPDATE SET alive_until = excluded.alive_until",
        )
        .bind(instance)
        .bind(until);
        self.write_audited(keep, None).await.map(|_| ())
    }

    async fn instance_alive(&self, instance: Uuid, now: DateTime<Utc>) -> StoreResult<bool> {
        let alive: Option<(Uuid,)> = self
            .write_alone()
            .fetch_optional(
                Statement::new("SELECT id FROM instances WHERE id = $1 AND alive_until >= $2").bind(instance).bind(now),
            )
            .await?;
        Ok(alive.is_some())
    }

    async fn forget_instances(&self, before: DateTime<Utc>) -> StoreResult<()> {
        let forget = Statement::new("DELETE FROM instances WHERE alive_until < $1").bind(before);
        self.write_audited(forget, None).await.map(|_| ())
    }

    async fn hold_gateway_call(&self, hold: &GatewayHoldRow) -> StoreResult<()> {
        self.write_audited(Statement::insert(hold), None).await.map(|_| ())
    }

    async fn release_gateway_hold(&self, question: Uuid, instance: Uuid, released: &str) -> StoreResult<bool> {
        let release = Statement::new(
            "UPDATE gateway_holds SET released = $1 WHERE question_id = $2 AND instance_id = $3 AND released IS NULL",
        )
        .bind(released.to_owned())
        .bind(question)
        .bind(instance);
        self.write_audited(release, None).await
    }

    async fn gateway_hold(&self, question: Uuid) -> StoreResult<Option<GatewayHoldRow>> {
        self.write_alone()
            .fetch_optional(
                Statement::new(format!("SELECT {GATEWAY_HOLD_COLUMNS} FROM gateway_holds WHERE question_id = $1"))
                    .bind(question),
            )
            .await
    }

    async fn orphaned_gateway_holds(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<GatewayHoldRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {GATEWAY_HOLD_COLUMNS} FROM gateway_holds WHERE released IS NULL \
                     AND instance_id NOT IN (SELECT id FROM instances WHERE alive_until >= $1) LIMIT $2"
                ))
                .bind(now)
                .bind(limit),
            )
            .await
    }
}
