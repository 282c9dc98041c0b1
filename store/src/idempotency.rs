//! Idempotency keys as stored: what a creation with a key made, so that a retry of it gets that instead of a
//! second one.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{Sql, SqlBackend, Statement};
use super::{IdempotencyKey, StoreError, StoreResult};

/// What the creation with a key made, and the hash of its request (`$1` workspace, `$2` scope, `$3` key).
const IDEMPOTENT_RESOURCE: &str = "SELECT resource_id, request_hash FROM idempotency_keys \
     WHERE workspace_id = $1 AND scope = $2 AND key = $3";
/// Records a key (`$1`..`$6`).
const CLAIM_IDEMPOTENCY_KEY: &str = "INSERT INTO idempotency_keys (workspace_id, scope, key, request_hash, resource_id, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";

/// The id of what a creation with this key made before; [`StoreError::IdempotencyMismatch`] if the key came with
/// another request then. Read on the writer's connections ([`SqlBackend::write_alone`]): the creation a concurrent
/// request's key claim lost to may be in a batch not yet committed.
pub(super) async fn idempotent_resource<B: SqlBackend>(backend: &B, key: &IdempotencyKey) -> StoreResult<Option<Uuid>> {
    let found: Option<(Uuid, Vec<u8>)> = backend
        .write_alone()
        .fetch_optional(Statement::new(IDEMPOTENT_RESOURCE).bind(key.workspace_id).bind(key.scope).bind(&key.key))
        .await?;
    let Some((resource_id, request_hash)) = found else { return Ok(None) };
    if request_hash != key.request_hash {
        return Err(StoreError::IdempotencyMismatch { resource_id });
    }
    Ok(Some(resource_id))
}

/// Records the key for `resource_id` inside the creating write; a unique violation means a concurrent request with
/// the same key won the race.
pub(super) async fn claim_idempotency_key(
    write: &mut impl Sql,
    key: &IdempotencyKey,
    resource_id: Uuid,
    at: DateTime<Utc>,
) -> StoreResult<()> {
    write
        .execute(
            Statement::new(CLAIM_IDEMPOTENCY_KEY)
                .bind(key.workspace_id)
                .bind(key.scope)
                .bind(&key.key)
                .bind(&key.request_hash)
                .bind(resource_id)
                .bind(at),
        )
        .await?;
    Ok(())
}
