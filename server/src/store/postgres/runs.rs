//! Agents, runs, their conversations and tool calls, on PostgreSQL.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use sqlx::types::Json;
use uuid::Uuid;

use app::types::{AgentSpec, EventType, RunStatus};

use super::*;
use crate::store::questions::{claim_idempotency_key, idempotent_resource};
use crate::store::run_sql::*;
use sqlx::Postgres;

impl PostgresStore {
    /// Fails with [`StoreError::LeaseLost`] unless `owner` holds the run's lease and it is running.
    pub(in crate::store) async fn fence(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        run_id: Uuid,
        owner: Uuid,
    ) -> StoreResult<()> {
        let held: Option<(Uuid,)> =
            sqlx::query_as("SELECT id FROM runs WHERE id = $1 AND lease_owner = $2 AND status = 'running'")
                .bind(run_id)
                .bind(owner)
                .fetch_optional(&mut **tx)
                .await?;
        held.map(|_| ()).ok_or(StoreError::LeaseLost)
    }

    pub(in crate::store) async fn append_run_event(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        run: &RunRow,
    ) -> StoreResult<i64> {
        let data = event_data(&run.status_event()?)?;
        let event = NewEvent {
            workspace_id: run.workspace_id,
            event_type: EventType::RunStatus,
            project: run.project.clone(),
            run_id: Some(run.id),
            question_id: None,
            data,
            created_at: run.updated_at,
        };
        Self::append_event(tx, &event).await
    }

    /// Queues a run waiting for input or approval once no question holds it. Returns the event id.
    pub(crate) async fn requeue_if_unheld(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        workspace_id: Uuid,
        run_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        let row: Option<RunRow> = sqlx::query_as(&format!(
            "UPDATE runs SET status = 'queued', updated_at = $1 WHERE id = $2 AND workspace_id = $3 \
             AND status IN ('waiting_for_input', 'waiting_for_approval') AND NOT EXISTS ({HOLDING_QUESTIONS}) \
             RETURNING {RUN_COLUMNS}"
        ))
        .bind(at)
        .bind(run_id)
        .bind(workspace_id)
        .fetch_optional(&mut **tx)
        .await?;
        match row {
            Some(run) => Ok(Some(Self::append_run_event(tx, &run).await?)),
            None => Ok(None),
        }
    }

    /// The children `run_id`'s open `spawn_agents` calls wait on that have not settled.
    pub(in crate::store) async fn unsettled_children(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        run_id: Uuid,
    ) -> StoreResult<i64> {
        let lists: Vec<(Json<Vec<Uuid>>,)> = sqlx::query_as(
            "SELECT child_run_ids FROM tool_calls WHERE run_id = $1 AND tool_name = 'spawn_agents' \
             AND status = 'running'",
        )
        .bind(run_id)
        .fetch_all(&mut **tx)
        .await?;
        let ids: Vec<Uuid> = lists.into_iter().flat_map(|(list,)| list.0).collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let mut query = QueryBuilder::<Postgres>::new("SELECT COUNT(*) FROM runs WHERE id IN (");
        let mut separated = query.separated(", ");
        for id in ids {
            separated.push_bind(id);
        }
        query.push(format!(") AND status NOT IN {SETTLED_CHILD}"));
        let (count,): (i64,) = query.build_query_as().fetch_one(&mut **tx).await?;
        Ok(count)
    }

    /// Queues a parent waiting for children once all of them have settled. Returns the event id.
    pub(in crate::store) async fn requeue_parent_if_settled(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        parent_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        if Self::unsettled_children(tx, parent_id).await? > 0 {
            return Ok(None);
        }
        let row: Option<RunRow> = sqlx::query_as(&format!(
            "UPDATE runs SET status = 'queued', updated_at = $1 WHERE id = $2 \
             AND status = 'waiting_for_children' RETURNING {RUN_COLUMNS}"
        ))
        .bind(at)
        .bind(parent_id)
        .fetch_optional(&mut **tx)
        .await?;
        match row {
            Some(run) => Ok(Some(Self::append_run_event(tx, &run).await?)),
            None => Ok(None),
        }
    }

    /// Cancels the run's pending questions (recorded as `actor`'s doing); returns the last event id.
    pub(in crate::store) async fn cancel_questions_of_run(
        &self,
        tx: &mut sqlx::Transaction<'static, Postgres>,
        run: &RunRow,
        reason: &str,
        at: DateTime<Utc>,
        actor: &AuditActor,
        records: &dyn CascadeRecords,
    ) -> StoreResult<Option<i64>> {
        let response = app::types::AnswerBody {
            value: serde_json::Value::Null,
            comment: Some(reason.to_owned()),
            edited_arguments: None,
        };
        let rows: Vec<QuestionRow> = sqlx::query_as(&format!(
            "UPDATE questions SET status = 'cancelled', resolution = 'cancelled', response = $1, \
             resolved_at = $2, updated_at = $2 WHERE run_id = $3 AND workspace_id = $4 AND status = 'pending' \
             RETURNING {}",
            QUESTION_COLUMNS
        ))
        .bind(Json(&response))
        .bind(at)
        .bind(run.id)
        .bind(run.workspace_id)
        .fetch_all(&mut **tx)
        .await?;
        let workspace = self.workspace_name_in(tx, run.workspace_id).await?;
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
            last = Some(self.append_event_and_audit(tx, &event, &audit_entry).await?);
        }
        Ok(last)
    }

    pub(in crate::store) async fn workspace_name_in(
        &self,
        tx: &mut sqlx::Transaction<'static, Postgres>,
        workspace_id: Uuid,
    ) -> StoreResult<String> {
        if let Some(name) = self.caches.workspace_names.get(workspace_id) {
            return Ok(name);
        }
        let (name,): (String,) =
            sqlx::query_as("SELECT name FROM workspaces WHERE id = $1").bind(workspace_id).fetch_one(&mut **tx).await?;
        self.caches.workspace_names.remember(workspace_id, &name);
        Ok(name)
    }

    pub(in crate::store) async fn end_open_segment(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        run_id: Uuid,
        status: RunStatus,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE run_segments SET ended_at = $1, end_status = $2 WHERE run_id = $3 AND ended_at IS NULL")
            .bind(at)
            .bind(status.as_str())
            .bind(run_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// What follows a run reaching a terminal status: its questions are cancelled, a waiting parent may
    /// go on. Returns the last event id.
    pub(in crate::store) async fn after_settling(
        &self,
        tx: &mut sqlx::Transaction<'static, Postgres>,
        run: &RunRow,
        at: DateTime<Utc>,
        records: &dyn CascadeRecords,
    ) -> StoreResult<Option<i64>> {
        let status = run.status;
        let mut last = None;
        if status.is_terminal() {
            let actor = records.run_lifecycle(run);
            last = self.cancel_questions_of_run(tx, run, &format!("the run is {status}"), at, &actor, records).await?;
        }
        if let Some(parent) = run.parent_run_id
            && (status.is_terminal() || status == RunStatus::Paused)
        {
            last = Self::requeue_parent_if_settled(tx, parent, at).await?.or(last);
        }
        Ok(last)
    }

    pub(in crate::store) async fn run_by_idempotency_key(&self, key: &IdempotencyKey) -> StoreResult<Option<RunRow>> {
        match idempotent_resource(self, key).await? {
            Some(id) => RunStore::run(self, key.workspace_id, id).await,
            None => Ok(None),
        }
    }

    pub(in crate::store) async fn insert_segment(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        segment: &SegmentRow,
    ) -> StoreResult<()> {
        sqlx::query(&format!(
            "INSERT INTO run_segments ({SEGMENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(segment.id)
        .bind(segment.run_id)
        .bind(segment.idx)
        .bind(segment.resumed_from)
        .bind(segment.start_step)
        .bind(segment.steps)
        .bind(segment.max_steps)
        .bind(segment.started_at)
        .bind(segment.ended_at)
        .bind(&segment.end_status)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}

#[async_trait]
impl RunStore for PostgresStore {
    async fn insert_agent(&self, agent: &AgentRow) -> StoreResult<()> {
        let inserted = sqlx::query(&format!("INSERT INTO agents ({AGENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"))
            .bind(agent.id)
            .bind(agent.workspace_id)
            .bind(&agent.name)
            .bind(&agent.spec)
            .bind(agent.created_at)
            .bind(agent.updated_at)
            .execute(&self.pool)
            .await;
        match inserted {
            Ok(_) => Ok(()),
            Err(err) if is_unique_violation(&err) => Err(StoreError::Duplicate("agent name")),
            Err(err) => Err(err.into()),
        }
    }

    async fn update_agent(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        spec: &AgentSpec,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<AgentRow>> {
        let updated = sqlx::query_as(&format!(
            "UPDATE agents SET name = $1, spec = $2, updated_at = $3 WHERE workspace_id = $4 AND id = $5 \
             RETURNING {AGENT_COLUMNS}"
        ))
        .bind(&spec.name)
        .bind(Json(spec))
        .bind(at)
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await;
        match updated {
            Ok(row) => Ok(row),
            Err(err) if is_unique_violation(&err) => Err(StoreError::Duplicate("agent name")),
            Err(err) => Err(err.into()),
        }
    }

    async fn agent(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<AgentRow>> {
        let row = sqlx::query_as(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = $1 AND id = $2"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row)
    }

    async fn agent_by_name(&self, workspace_id: Uuid, name: &str) -> StoreResult<Option<AgentRow>> {
        let row = sqlx::query_as(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = $1 AND name = $2"))
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row)
    }

    async fn list_agents(&self, workspace_id: Uuid, after: Option<&str>, limit: u32) -> StoreResult<Vec<AgentRow>> {
        let mut query =
            QueryBuilder::<Postgres>::new(format!("SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = "));
        query.push_bind(workspace_id);
        if let Some(after) = after {
            query.push(" AND name > ").push_bind(after.to_owned());
        }
        query.push(" ORDER BY name LIMIT ").push_bind(i64::from(limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn create_run(
        &self,
        run: &RunRow,
        segment: &SegmentRow,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Created<RunRow>> {
        if let Some(key) = idempotency
            && let Some(existing) = self.run_by_idempotency_key(key).await?
        {
            return Ok(Created { value: existing, created: false });
        }
        let mut tx = self.pool.begin().await?;
        if let Some(key) = idempotency {
            let claimed = claim_idempotency_key(&mut tx, key, run.id, run.created_at).await;
            if let Err(err) = claimed {
                if is_unique_violation_of(&err) {
                    drop(tx);
                    if let Some(existing) = self.run_by_idempotency_key(key).await? {
                        return Ok(Created { value: existing, created: false });
                    }
                }
                return Err(err);
            }
        }
        sqlx::query(&format!(
            "INSERT INTO runs ({RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
             $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)"
        ))
        .bind(run.id)
        .bind(run.workspace_id)
        .bind(run.agent_id)
        .bind(&run.agent)
        .bind(&run.project)
        .bind(&run.input)
        .bind(run.status)
        .bind(run.step_count)
        .bind(run.max_steps)
        .bind(run.max_total_steps)
        .bind(run.parent_run_id)
        .bind(&run.parent_run_ids)
        .bind(&run.result)
        .bind(&run.error_message)
        .bind(&run.resume_prompt)
        .bind(run.lease_owner)
        .bind(run.lease_until)
        .bind(run.created_by)
        .bind(run.created_at)
        .bind(run.updated_at)
        .bind(run.completed_at)
        .bind(run.executor)
        .bind(run.pause_on_input)
        .execute(&mut *tx)
        .await?;
        Self::insert_segment(&mut tx, segment).await?;
        Self::append_run_event(&mut tx, run).await?;
        tx.commit().await?;
        Ok(Created { value: run.clone(), created: true })
    }

    async fn run(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<RunRow>> {
        let row = sqlx::query_as(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE workspace_id = $1 AND id = $2"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row)
    }

    async fn list_runs(&self, workspace_id: Uuid, filter: &RunFilter) -> StoreResult<Vec<RunRow>> {
        let mut query = QueryBuilder::<Postgres>::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE workspace_id = "));
        query.push_bind(workspace_id);
        if let Some(status) = filter.status {
            query.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(agent_id) = filter.agent_id {
            query.push(" AND agent_id = ").push_bind(agent_id);
        }
        if let Some(parent) = filter.parent_run_id {
            query.push(" AND parent_run_id = ").push_bind(parent);
        }
        if let Some(project) = &filter.project {
            query.push(" AND project = ").push_bind(project.clone());
        }
        if let Some(created_by) = filter.created_by {
            query.push(" AND created_by = ").push_bind(created_by);
        }
        if let Some(before) = filter.before {
            query.push(" AND id < ").push_bind(before);
        }
        query.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(filter.limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn segments(&self, run_id: Uuid) -> StoreResult<Vec<SegmentRow>> {
        let rows =
            sqlx::query_as(&format!("SELECT {SEGMENT_COLUMNS} FROM run_segments WHERE run_id = $1 ORDER BY idx"))
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows)
    }

    async fn pending_question_ids(&self, workspace_id: Uuid, run_id: Uuid) -> StoreResult<Vec<Uuid>> {
        let rows: Vec<(Uuid,)> = sqlx::query_as(
            "SELECT id FROM questions WHERE run_id = $1 AND workspace_id = $2 AND status = 'pending' ORDER BY id",
        )
        .bind(run_id)
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    async fn messages(&self, run_id: Uuid, after_seq: i32, limit: u32) -> StoreResult<Vec<MessageRow>> {
        let rows = sqlx::query_as(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM run_messages WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        ))
        .bind(run_id)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    async fn message(&self, run_id: Uuid, id: Uuid) -> StoreResult<Option<MessageRow>> {
        let row = sqlx::query_as(&format!("SELECT {MESSAGE_COLUMNS} FROM run_messages WHERE run_id = $1 AND id = $2"))
            .bind(run_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row)
    }

    async fn tool_calls(&self, run_id: Uuid, filter: &ToolCallFilter) -> StoreResult<Vec<ToolCallRow>> {
        let mut query =
            QueryBuilder::<Postgres>::new(format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE run_id = "));
        query.push_bind(run_id);
        if let Some(message_id) = filter.message_id {
            query.push(" AND message_id = ").push_bind(message_id);
        }
        if let Some(name) = &filter.tool_name {
            query.push(" AND tool_name = ").push_bind(name.clone());
        }
        if let Some(status) = filter.status {
            query.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(after) = filter.after {
            query.push(" AND id > ").push_bind(after);
        }
        query.push(" ORDER BY step, id LIMIT ").push_bind(i64::from(filter.limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn tool_call(&self, run_id: Uuid, id: Uuid) -> StoreResult<Option<ToolCallRow>> {
        let row = sqlx::query_as(&format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE run_id = $1 AND id = $2"))
            .bind(run_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row)
    }

    async fn workspace_name(&self, workspace_id: Uuid) -> StoreResult<String> {
        if let Some(name) = self.caches.workspace_names.get(workspace_id) {
            return Ok(name);
        }
        let (name,): (String,) = sqlx::query_as("SELECT name FROM workspaces WHERE id = $1")
            .bind(workspace_id)
            .fetch_one(&self.pool)
            .await?;
        self.caches.workspace_names.remember(workspace_id, &name);
        Ok(name)
    }

    async fn claim_run(
        &self,
        owner: Uuid,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<RunRow>> {
        let mut tx = self.pool.begin().await?;
        let claimed: Option<RunRow> = sqlx::query_as(&format!(
            // Concurrent claimers skip the rows others are claiming instead of queueing behind them.
            "UPDATE runs SET status = 'running', lease_owner = $1, lease_until = $2, updated_at = $3 \
             WHERE id = (SELECT id FROM runs WHERE executor = 'server' AND ({CLAIMABLE}) \
             ORDER BY updated_at LIMIT 1 FOR UPDATE SKIP LOCKED) AND ({CLAIMABLE}) RETURNING {RUN_COLUMNS}"
        ))
        .bind(owner)
        .bind(lease_until)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(run) = claimed else {
            return Ok(None);
        };
        Self::append_run_event(&mut tx, &run).await?;
        tx.commit().await?;
        Ok(Some(run))
    }

    async fn claim_run_by_id(
        &self,
        run_id: Uuid,
        owner: Uuid,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<RunRow>> {
        let mut tx = self.pool.begin().await?;
        let claimed: Option<RunRow> = sqlx::query_as(&format!(
            "UPDATE runs SET status = 'running', lease_owner = $1, lease_until = $2, updated_at = $3 \
             WHERE id = $4 AND ({CLAIMABLE}) RETURNING {RUN_COLUMNS}"
        ))
        .bind(owner)
        .bind(lease_until)
        .bind(now)
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(run) = claimed else {
            return Ok(None);
        };
        Self::append_run_event(&mut tx, &run).await?;
        tx.commit().await?;
        Ok(Some(run))
    }

    async fn renew_lease(&self, run_id: Uuid, owner: Uuid, until: DateTime<Utc>) -> StoreResult<bool> {
        let result =
            sqlx::query("UPDATE runs SET lease_until = $1 WHERE id = $2 AND lease_owner = $3 AND status = 'running'")
                .bind(until)
                .bind(run_id)
                .bind(owner)
                .execute(&self.pool)
                .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn current_segment(&self, run_id: Uuid, owner: Uuid, at: DateTime<Utc>) -> StoreResult<SegmentRow> {
        let mut tx = self.pool.begin().await?;
        Self::fence(&mut tx, run_id, owner).await?;
        let last: Option<SegmentRow> = sqlx::query_as(&format!(
            "SELECT {SEGMENT_COLUMNS} FROM run_segments WHERE run_id = $1 ORDER BY idx DESC LIMIT 1"
        ))
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(open) = last.as_ref().filter(|s| s.ended_at.is_none()) {
            let open = open.clone();
            tx.commit().await?;
            return Ok(open);
        }
        let (step_count, max_steps): (i32, i32) =
            sqlx::query_as("SELECT step_count, max_steps FROM runs WHERE id = $1")
                .bind(run_id)
                .fetch_one(&mut *tx)
                .await?;
        let segment = SegmentRow {
            id: Uuid::now_v7(),
            run_id,
            idx: last.as_ref().map_or(1, |s| s.idx + 1),
            resumed_from: last.as_ref().map(|s| s.id),
            start_step: step_count,
            steps: 0,
            max_steps,
            started_at: at,
            ended_at: None,
            end_status: None,
        };
        Self::insert_segment(&mut tx, &segment).await?;
        tx.commit().await?;
        Ok(segment)
    }

    async fn append_messages(
        &self,
        run_id: Uuid,
        owner: Uuid,
        messages: &[MessageRow],
        tool_calls: &[ToolCallRow],
        step: Option<i32>,
        audit: &[NewAuditEntry],
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        Self::fence(&mut tx, run_id, owner).await?;
        for entry in audit {
            self.append_audit_in(&mut tx, entry).await?;
        }
        for m in messages {
            sqlx::query(&format!("INSERT INTO run_messages ({MESSAGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
                .bind(m.id)
                .bind(m.run_id)
                .bind(m.seq)
                .bind(m.step)
                .bind(&m.role)
                .bind(&m.content)
                .bind(m.created_at)
                .execute(&mut *tx)
                .await?;
        }
        for c in tool_calls {
            sqlx::query(&format!(
                "INSERT INTO tool_calls ({TOOL_CALL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
                 $11, $12, $13, $14, $15, $16, $17)"
            ))
            .bind(c.id)
            .bind(c.run_id)
            .bind(c.message_id)
            .bind(&c.call_id)
            .bind(&c.tool_name)
            .bind(&c.input)
            .bind(&c.edited_input)
            .bind(&c.output)
            .bind(c.status)
            .bind(c.duration_ms)
            .bind(c.step)
            .bind(&c.decided_by)
            .bind(&c.decision_comment)
            .bind(c.question_id)
            .bind(&c.child_run_ids)
            .bind(c.created_at)
            .bind(c.updated_at)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(step) = step {
            let at = messages.last().map_or_else(crate::store::now, |m| m.created_at);
            sqlx::query("UPDATE runs SET step_count = $1, updated_at = $2 WHERE id = $3")
                .bind(step)
                .bind(at)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE run_segments SET steps = steps + 1 WHERE run_id = $1 AND ended_at IS NULL")
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn update_tool_call(&self, owner: Uuid, c: &ToolCallRow, audit: Option<&NewAuditEntry>) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        Self::fence(&mut tx, c.run_id, owner).await?;
        if let Some(entry) = audit {
            self.append_audit_in(&mut tx, entry).await?;
        }
        sqlx::query(
            "UPDATE tool_calls SET edited_input = $1, output = $2, status = $3, duration_ms = $4, \
             decided_by = $5, decision_comment = $6, question_id = $7, child_run_ids = $8, updated_at = $9 \
             WHERE id = $10 AND run_id = $11",
        )
        .bind(&c.edited_input)
        .bind(&c.output)
        .bind(c.status)
        .bind(c.duration_ms)
        .bind(&c.decided_by)
        .bind(&c.decision_comment)
        .bind(c.question_id)
        .bind(&c.child_run_ids)
        .bind(c.updated_at)
        .bind(c.id)
        .bind(c.run_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn take_resume_prompt(&self, run_id: Uuid, owner: Uuid) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        Self::fence(&mut tx, run_id, owner).await?;
        sqlx::query("UPDATE runs SET resume_prompt = NULL WHERE id = $1").bind(run_id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn release_run(
        &self,
        run_id: Uuid,
        owner: Uuid,
        t: &RunTransition,
        records: &dyn CascadeRecords,
    ) -> StoreResult<RunRow> {
        let mut tx = self.pool.begin().await?;
        Self::lock_run_and_parent(&mut tx, run_id).await?;
        Self::fence(&mut tx, run_id, owner).await?;
        let mut status = t.status;
        let still_held = match status {
            RunStatus::WaitingForInput | RunStatus::WaitingForApproval => {
                let (held,): (i64,) = sqlx::query_as(&format!(
                    "SELECT COUNT(*) FROM runs WHERE id = $1 AND EXISTS ({HOLDING_QUESTIONS})"
                ))
                .bind(run_id)
                .fetch_one(&mut *tx)
                .await?;
                held > 0
            }
            RunStatus::WaitingForChildren => Self::unsettled_children(&mut tx, run_id).await? > 0,
            _ => true,
        };
        if !still_held {
            status = RunStatus::Queued;
        }
        Self::end_open_segment(&mut tx, run_id, t.status, t.at).await?;
        let completed_at = status.is_terminal().then_some(t.at);
        let run: RunRow = sqlx::query_as(&format!(
            "UPDATE runs SET status = $1, result = COALESCE($2, result), error_message = $3, \
             lease_owner = NULL, lease_until = NULL, updated_at = $4, completed_at = $5 WHERE id = $6 \
             RETURNING {RUN_COLUMNS}"
        ))
        .bind(status.as_str())
        .bind(&t.result)
        .bind(&t.error_message)
        .bind(t.at)
        .bind(completed_at)
        .bind(run_id)
        .fetch_one(&mut *tx)
        .await?;
        Self::append_run_event(&mut tx, &run).await?;
        self.after_settling(&mut tx, &run, t.at, records).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn cancel_run(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        actor: &AuditActor,
        records: &dyn CascadeRecords,
    ) -> StoreResult<Option<(RunRow, bool)>> {
        let mut tx = self.pool.begin().await?;
        let existing: Option<RunRow> =
            sqlx::query_as(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE workspace_id = $1 AND id = $2"))
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(existing) = existing else { return Ok(None) };
        if existing.status.is_terminal() {
            return Ok(Some((existing, false)));
        }
        Self::lock_run_tree(&mut tx, id).await?;
        let mut to_cancel = vec![id];
        let mut cancelled_root = None;
        while let Some(run_id) = to_cancel.pop() {
            let previous: Option<(String,)> =
                sqlx::query_as("SELECT status FROM runs WHERE id = $1").bind(run_id).fetch_optional(&mut *tx).await?;
            let run: Option<RunRow> = sqlx::query_as(&format!(
                "UPDATE runs SET status = 'cancelled', lease_owner = NULL, lease_until = NULL, updated_at = $1, \
                 completed_at = $1, error_message = COALESCE(error_message, 'cancelled') WHERE id = $2 \
                 AND status NOT IN ('completed', 'failed', 'cancelled') RETURNING {RUN_COLUMNS}"
            ))
            .bind(at)
            .bind(run_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(run) = run else { continue };
            Self::end_open_segment(&mut tx, run.id, RunStatus::Cancelled, at).await?;
            Self::append_run_event(&mut tx, &run).await?;
            let previous = previous.map_or_else(String::new, |(status,)| status);
            self.append_audit_in(&mut tx, &records.run_cancelled(&run, &previous, actor)).await?;
            self.cancel_questions_of_run(&mut tx, &run, "the run was cancelled", at, actor, records).await?;
            let children: Vec<(Uuid,)> = sqlx::query_as(
                "SELECT id FROM runs WHERE parent_run_id = $1 AND status NOT IN ('completed', 'failed', 'cancelled')",
            )
            .bind(run.id)
            .fetch_all(&mut *tx)
            .await?;
            to_cancel.extend(children.into_iter().map(|(child,)| child));
            if run.id == id {
                cancelled_root = Some(run);
            }
        }
        let Some(root) = cancelled_root else {
            // It ended while this transaction waited for its lock: say how it is now, not how it was.
            let now: Option<RunRow> = sqlx::query_as(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"))
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            return Ok(Some((now.unwrap_or(existing), false)));
        };
        if let Some(parent) = root.parent_run_id {
            Self::requeue_parent_if_settled(&mut tx, parent, at).await?;
        }
        tx.commit().await?;
        Ok(Some((root, true)))
    }

    async fn prepare_resume(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        prompt: Option<&str>,
        at: DateTime<Utc>,
    ) -> StoreResult<ResumeOutcome> {
        let mut tx = self.pool.begin().await?;
        let existing: Option<RunRow> =
            sqlx::query_as(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE workspace_id = $1 AND id = $2"))
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(existing) = existing else { return Ok(ResumeOutcome::NotFound) };
        if !existing.status.is_resumable() {
            return Ok(ResumeOutcome::NotResumable(existing));
        }
        if existing.step_count >= existing.max_total_steps {
            return Ok(ResumeOutcome::CapReached(existing));
        }
        let run: RunRow = sqlx::query_as(&format!(
            "UPDATE runs SET resume_prompt = COALESCE($1, resume_prompt), error_message = NULL, updated_at = $2, \
             status = CASE WHEN status = 'paused' OR NOT EXISTS ({HOLDING_QUESTIONS}) THEN 'queued' ELSE status END \
             WHERE id = $3 RETURNING {RUN_COLUMNS}"
        ))
        .bind(prompt)
        .bind(at)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        Self::append_run_event(&mut tx, &run).await?;
        tx.commit().await?;
        Ok(ResumeOutcome::Accepted(run))
    }

    async fn requeue_stalled_runs(&self, at: DateTime<Utc>) -> StoreResult<usize> {
        let candidates: Vec<(Uuid, Uuid, String)> = sqlx::query_as(&format!(
            "SELECT id, workspace_id, status FROM runs WHERE (status IN ('waiting_for_input', 'waiting_for_approval') \
             AND NOT EXISTS ({HOLDING_QUESTIONS})) OR status = 'waiting_for_children' LIMIT 500"
        ))
        .fetch_all(&self.pool)
        .await?;
        let mut requeued = 0;
        for (id, workspace_id, status) in candidates {
            let mut tx = self.pool.begin().await?;
            let event = if status == "waiting_for_children" {
                Self::requeue_parent_if_settled(&mut tx, id, at).await?
            } else {
                Self::requeue_if_unheld(&mut tx, workspace_id, id, at).await?
            };
            if event.is_some() {
                requeued += 1;
            }
            tx.commit().await?;
        }
        Ok(requeued)
    }

    async fn child_run_status(&self, ids: &[Uuid]) -> StoreResult<Vec<RunRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = QueryBuilder::<Postgres>::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id IN ("));
        let mut separated = query.separated(", ");
        for id in ids {
            separated.push_bind(*id);
        }
        query.push(")");
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }
}

impl PostgresStore {
    /// Every transaction that changes several runs locks them first, all in one statement and in id order, and
    /// only then touches questions and the audit chain, as an answer does after locking its question's run
    /// (`resolve_question`). Taken as the work reached them instead (a child after its parent's audit entry, a
    /// parent after its child's questions), two such transactions could each hold what the other waits for, and
    /// PostgreSQL would abort one of them.
    pub(in crate::store) async fn lock_runs(tx: &mut sqlx::Transaction<'_, Postgres>, ids: &[Uuid]) -> StoreResult<()> {
        sqlx::query("SELECT id FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE")
            .bind(ids)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Before cancelling `root`: it, every run below it, and its parent (which cancelling may requeue).
    pub(in crate::store) async fn lock_run_tree(
        tx: &mut sqlx::Transaction<'_, Postgres>,
        root: Uuid,
    ) -> StoreResult<()> {
        let mut tree = vec![root];
        let mut level = vec![root];
        while !level.is_empty() {
            let children: Vec<(Uuid,)> = sqlx::query_as("SELECT id FROM runs WHERE parent_run_id = ANY($1)")
                .bind(&level)
                .fetch_all(&mut **tx)
                .await?;
            level = children.into_iter().map(|(id,)| id).collect();
            tree.extend_from_slice(&level);
        }
        tree.extend(Self::parent_of(tx, root).await?);
        Self::lock_runs(tx, &tree).await
    }

    /// Before a run's worker releases it: the run and its parent (which its ending may requeue).
    pub(in crate::store) async fn lock_run_and_parent(
        tx: &mut sqlx::Transaction<'_, Postgres>,
        run_id: Uuid,
    ) -> StoreResult<()> {
        match Self::parent_of(tx, run_id).await? {
            Some(parent) => Self::lock_runs(tx, &[run_id, parent]).await,
            // One run: the fence that follows locks it.
            None => Ok(()),
        }
    }

    pub(in crate::store) async fn parent_of(
        tx: &mut sqlx::Transaction<'_, Postgres>,
        run_id: Uuid,
    ) -> StoreResult<Option<Uuid>> {
        let parent: Option<(Option<Uuid>,)> = sqlx::query_as("SELECT parent_run_id FROM runs WHERE id = $1")
            .bind(run_id)
            .fetch_optional(&mut **tx)
            .await?;
        Ok(parent.and_then(|(parent,)| parent))
    }
}
