//! The steps the writes of [`RunStore`](super::RunStore) share, each taken on the write it belongs to: fencing a
//! write to the run's lease, a run's `run_updated` event, its open segment ended, a run settled (requeued once no
//! question holds it, a parent requeued once its children settled, its pending questions cancelled), and the reads
//! such a write makes (its workspace's name, a run by its idempotency key).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use holdpoint_types::{EventType, RunStatus};
use sqlx::types::Json;

use super::backend::{Sql, SqlBackend, Statement};
use super::idempotency::idempotent_resource;
use super::runs::{HOLDING_QUESTIONS, RUN_COLUMNS, SETTLED_CHILD};
use super::sql::{QUESTION_COLUMNS, is_unique_violation};
use super::*;

/// A unique violation of an agent's name, as [`StoreError::Duplicate`].
pub(super) fn agent_name_taken(err: StoreError) -> StoreError {
    match err {
        StoreError::Database(err) if is_unique_violation(&err) => StoreError::Duplicate("agent name"),
        err => err,
    }
}

/// Appends `ids`, each a placeholder bound to it, separated by commas (the inside of an `IN (...)`).
pub(super) fn push_ids(statement: &mut Statement<'_>, ids: impl IntoIterator<Item = Uuid>) {
    for (n, id) in ids.into_iter().enumerate() {
        if n > 0 {
            statement.push(", ");
        }
        statement.push_bind(id);
    }
}

/// Fails with [`StoreError::LeaseLost`] unless `owner` holds the run's lease and it is running.
pub(super) async fn fence(write: &mut impl Sql, run_id: Uuid, owner: Uuid) -> StoreResult<()> {
    let held: Option<(Uuid,)> = write
        .fetch_optional(
            Statement::new("SELECT id FROM runs WHERE id = $1 AND lease_owner = $2 AND status = 'running'")
                .bind(run_id)
                .bind(owner),
        )
        .await?;
    held.map(|_| ()).ok_or(StoreError::LeaseLost)
}

/// Appends the run's `run_status` event, saying how it is now; its id.
pub(super) async fn append_run_event<B: SqlBackend>(
    backend: &B,
    write: &mut B::Write,
    run: &RunRow,
) -> StoreResult<i64> {
    let event = NewEvent {
        workspace_id: run.workspace_id,
        event_type: EventType::RunStatus,
        project: run.project.clone(),
        run_id: Some(run.id),
        question_id: None,
        data: event_data(&run.status_event()?)?,
        created_at: run.updated_at,
    };
    backend.append_event_in(write, &event).await
}

/// Runs `update` (an `UPDATE` of one run, returning it) inside the write and, if it changed the run, appends the
/// run's `run_status` event: the run as changed and the event's id.
pub(super) async fn update_run_in<B: SqlBackend>(
    backend: &B,
    write: &mut B::Write,
    update: Statement<'_>,
) -> StoreResult<Option<(RunRow, i64)>> {
    let Some(run) = write.fetch_optional::<RunRow>(update).await? else {
        return Ok(None);
    };
    let event_id = append_run_event(backend, write, &run).await?;
    Ok(Some((run, event_id)))
}

/// Queues a run waiting for input or approval once no question holds it. Returns the event id.
pub(super) async fn requeue_if_unheld<B: SqlBackend>(
    backend: &B,
    write: &mut B::Write,
    workspace_id: Uuid,
    run_id: Uuid,
    at: DateTime<Utc>,
) -> StoreResult<Option<i64>> {
    let requeue = Statement::new(format!(
        "UPDATE runs SET status = 'queued', updated_at = $1 WHERE id = $2 AND workspace_id = $3 \
         AND status IN ('waiting_for_input', 'waiting_for_approval') AND NOT EXISTS ({HOLDING_QUESTIONS}) \
         RETURNING {RUN_COLUMNS}"
    ));
    let requeued = update_run_in(backend, write, requeue.bind(at).bind(run_id).bind(workspace_id)).await?;
    Ok(requeued.map(|(_, event_id)| event_id))
}

/// The children `run_id`'s open `spawn_agents` calls wait on that have not settled.
pub(super) async fn unsettled_children(write: &mut impl Sql, run_id: Uuid) -> StoreResult<i64> {
    let lists: Vec<(Json<Vec<Uuid>>,)> = write
        .fetch_all(
            Statement::new(
                "SELECT child_run_ids FROM tool_calls WHERE run_id = $1 AND tool_name = 'spawn_agents' \
                 AND status = 'running'",
            )
            .bind(run_id),
        )
        .await?;
    let mut ids = lists.into_iter().flat_map(|(list,)| list.0).peekable();
    if ids.peek().is_none() {
        return Ok(0);
    }
    let mut query = Statement::new("SELECT COUNT(*) FROM runs WHERE id IN (");
    push_ids(&mut query, ids);
    query.push(&format!(") AND status NOT IN {SETTLED_CHILD}"));
    let (count,): (i64,) = write.fetch_one(query).await?;
    Ok(count)
}

/// Queues a parent waiting for children once all of them have settled. Returns the event id.
pub(super) async fn requeue_parent_if_settled<B: SqlBackend>(
    backend: &B,
    write: &mut B::Write,
    parent_id: Uuid,
    at: DateTime<Utc>,
) -> StoreResult<Option<i64>> {
    if unsettled_children(write, parent_id).await? > 0 {
        return Ok(None);
    }
    let requeue = Statement::new(format!(
        "UPDATE runs SET status = 'queued', updated_at = $1 WHERE id = $2 AND status = 'waiting_for_children' \
         RETURNING {RUN_COLUMNS}"
    ));
    let requeued = update_run_in(backend, write, requeue.bind(at).bind(parent_id)).await?;
    Ok(requeued.map(|(_, event_id)| event_id))
}

/// Cancels the run's pending questions (recorded as `actor`'s doing); returns the last event id.
pub(super) async fn cancel_questions_of_run<B: SqlBackend>(
    backend: &B,
    write: &mut B::Write,
    run: &RunRow,
    reason: &str,
    at: DateTime<Utc>,
    actor: &AuditActor,
    records: &dyn CascadeRecords,
) -> StoreResult<Option<i64>> {
    let response = holdpoint_types::AnswerBody {
        value: serde_json::Value::Null,
        comment: Some(reason.to_owned()),
        edited_arguments: None,
    };
    let rows: Vec<QuestionRow> = write
        .fetch_all(
            Statement::new(format!(
                "UPDATE questions SET status = 'cancelled', resolution = 'cancelled', response = $1, \
                 resolved_at = $2, updated_at = $2 WHERE run_id = $3 AND workspace_id = $4 AND status = 'pending' \
                 RETURNING {QUESTION_COLUMNS}"
            ))
            .bind(Json(&response))
            .bind(at)
            .bind(run.id)
            .bind(run.workspace_id),
        )
        .await?;
    let workspace = workspace_name_on(backend, write, run.workspace_id).await?;
    let mut last = None;
    for row in rows {
        let question = row.to_question(&workspace)?;
        let event = NewEvent {
            workspace_id: row.workspace_id,
            event_type: EventType::QuestionCancelled,
            project: row.project.clone(),
            run_id: row.run_id,
            question_id: Some(row.id),
            data: question_event_data(&question)?,
            created_at: at,
        };
        let audit_entry = records.question_cancelled(&row, actor);
        last = Some(backend.append_event_and_audit_in(write, &event, &audit_entry).await?);
    }
    Ok(last)
}

/// The workspace's name: the one this store has read before, or read now through `sql` and remembered.
pub(super) async fn workspace_name_on(
    backend: &impl SqlBackend,
    sql: &mut impl Sql,
    workspace_id: Uuid,
) -> StoreResult<String> {
    if let Some(name) = backend.caches().workspace_names.get(workspace_id) {
        return Ok(name);
    }
    let (name,): (String,) =
        sql.fetch_one(Statement::new("SELECT name FROM workspaces WHERE id = $1").bind(workspace_id)).await?;
    backend.caches().workspace_names.remember(workspace_id, &name);
    Ok(name)
}

/// Ends the run's open segment, with the status that ended it.
pub(super) async fn end_open_segment(
    write: &mut impl Sql,
    run_id: Uuid,
    status: RunStatus,
    at: DateTime<Utc>,
) -> StoreResult<()> {
    write
        .execute(
            Statement::new(
                "UPDATE run_segments SET ended_at = $1, end_status = $2 WHERE run_id = $3 AND ended_at IS NULL",
            )
            .bind(at)
            .bind(status.as_str())
            .bind(run_id),
        )
        .await?;
    Ok(())
}

/// What follows a run reaching a terminal status: its questions are cancelled, a waiting parent may go on. Returns
/// the last event id.
pub(super) async fn after_settling<B: SqlBackend>(
    backend: &B,
    write: &mut B::Write,
    run: &RunRow,
    at: DateTime<Utc>,
    records: &dyn CascadeRecords,
) -> StoreResult<Option<i64>> {
    let status = run.status;
    let mut last = None;
    if status.is_terminal() {
        let actor = records.run_lifecycle(run);
        last =
            cancel_questions_of_run(backend, write, run, &format!("the run is {status}"), at, &actor, records).await?;
    }
    if let Some(parent) = run.parent_run_id
        && (status.is_terminal() || status == RunStatus::Paused)
    {
        last = requeue_parent_if_settled(backend, write, parent, at).await?.or(last);
    }
    Ok(last)
}

pub(super) async fn run_by_idempotency_key<B: SqlBackend>(
    backend: &B,
    key: &IdempotencyKey,
) -> StoreResult<Option<RunRow>> {
    match idempotent_resource(backend, key).await? {
        Some(id) => RunStore::run(backend, key.workspace_id, id).await,
        None => Ok(None),
    }
}

pub(super) async fn insert_segment(write: &mut impl Sql, segment: &SegmentRow) -> StoreResult<()> {
    write.execute(Statement::insert(segment)).await?;
    Ok(())
}
