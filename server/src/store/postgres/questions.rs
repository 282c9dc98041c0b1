//! Questions, events, the audit chain, workspaces and tokens' principals, on PostgreSQL.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::*;
use crate::store::grants::USE_GRANT;
use crate::store::outbox::{INSERT_DELIVERY, INSERT_NOTIFICATION};
use crate::store::runs::requeue_if_unheld;
use sqlx::Postgres;

impl PostgresStore {
    /// `head` (a `SELECT ... FROM questions`) with the filter's conditions on the workspace's questions (not
    /// its cursor, order or limit).
    pub(in crate::store) fn filtered_questions(
        head: &str,
        workspace_id: Uuid,
        filter: &QuestionFilter,
    ) -> QueryBuilder<'static, Postgres> {
        let mut query = QueryBuilder::<Postgres>::new(format!("{head} WHERE workspace_id = "));
        query.push_bind(workspace_id);
        if let Some(status) = filter.status {
            query.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(kind) = filter.kind {
            query.push(" AND kind = ").push_bind(kind.as_str());
        }
        if let Some(project) = &filter.project {
            query.push(" AND project = ").push_bind(project.clone());
        }
        if let Some(urgency) = filter.urgency {
            query.push(" AND urgency = ").push_bind(urgency.as_str());
        }
        if let Some(run_id) = filter.run_id {
            query.push(" AND run_id = ").push_bind(run_id);
        }
        if let Some(created_by) = filter.created_by {
            query.push(" AND created_by = ").push_bind(created_by);
        }
        if let Some(text) = &filter.text {
            Self::push_text_match(&mut query, text);
        }
        query
    }

    /// One page of questions in the filter's order, starting after its cursor, as rows of `columns`.
    pub(in crate::store) async fn list_question_rows<R>(
        &self,
        columns: &str,
        workspace_id: Uuid,
        filter: &QuestionFilter,
    ) -> StoreResult<Vec<R>>
    where
        R: for<'r> sqlx::FromRow<'r, <Postgres as sqlx::Database>::Row> + Send + Unpin,
    {
        let head = format!("SELECT {columns} FROM questions");
        let limit = i64::from(filter.limit);
        if filter.sort == QuestionSort::CreatedDesc {
            let mut query = Self::filtered_questions(&head, workspace_id, filter);
            if let Some(QuestionCursor::Created { id }) = &filter.after {
                query.push(" AND id < ").push_bind(*id);
            }
            query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
            return Ok(query.build_query_as().fetch_all(&self.pool).await?);
        }
        // Soonest deadline first, then the questions without one, oldest first: two queries rather than one
        // `ORDER BY timeout_at NULLS LAST`, because each can walk an index in its order and stop after a
        // page, where the single query sorted every matching question for every page (SQLite's indexes
        // keep NULLs first, so none can serve NULLS LAST).
        let mut rows: Vec<R> = Vec::new();
        let past_dated = matches!(filter.after, Some(QuestionCursor::Deadline { timeout_at: None, .. }));
        if !past_dated {
            let mut query = Self::filtered_questions(&head, workspace_id, filter);
            query.push(" AND timeout_at IS NOT NULL");
            if let Some(QuestionCursor::Deadline { timeout_at: Some(at), id }) = &filter.after {
                query.push(" AND (timeout_at > ").push_bind(*at);
                query.push(" OR (timeout_at = ").push_bind(*at);
                query.push(" AND id > ").push_bind(*id);
                query.push("))");
            }
            query.push(" ORDER BY timeout_at ASC, id ASC LIMIT ").push_bind(limit);
            rows = query.build_query_as().fetch_all(&self.pool).await?;
        }
        let missing = limit - rows.len() as i64;
        if missing > 0 {
            let mut query = Self::filtered_questions(&head, workspace_id, filter);
            query.push(" AND timeout_at IS NULL");
            if let Some(QuestionCursor::Deadline { timeout_at: None, id }) = &filter.after {
                query.push(" AND id > ").push_bind(*id);
            }
            query.push(" ORDER BY id ASC LIMIT ").push_bind(missing);
            rows.extend(query.build_query_as::<R>().fetch_all(&self.pool).await?);
        }
        Ok(rows)
    }

    /// Appends an event inside the caller's transaction; returns its id.
    pub(in crate::store) async fn append_event(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        event: &NewEvent,
    ) -> StoreResult<i64> {
        let (id,): (i64,) =
            Bind::bind_event(sqlx::query_as::<_, (i64,)>(Self::INSERT_EVENT), event).fetch_one(&mut **tx).await?;
        Ok(id)
    }

    /// The statement that stores a question and appends its `question_asked` event, one round trip: the
    /// question's insert is a data-modifying `WITH`, which PostgreSQL runs to completion whatever the main
    /// statement reads.
    pub(in crate::store) fn insert_question_then_event_sql() -> &'static str {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            insert_question_then_event("WITH asked AS (", ") ", PostgresStore::INSERT_EVENT)
        });
        &SQL
    }

    /// Appends an audit entry to its workspace's chain inside the caller's transaction, so the entry
    /// commits if and only if the change it records does. Entries are written as drafts and sealed into the chain
    /// inside COMMIT (migration 0010), so no transaction holds the chain's head over its own statements: instances
    /// append concurrently, and only the commit that seals an entry can know the head it follows. Returns the
    /// draft.
    pub(crate) async fn append_audit_in(
        &self,
        tx: &mut sqlx::Transaction<'static, Postgres>,
        entry: &NewAuditEntry,
    ) -> StoreResult<AuditRow> {
        let draft = AuditRow::unsealed(entry);
        Bind::bind_audit_draft(sqlx::query(INSERT_AUDIT_DRAFT), &draft).execute(&mut **tx).await?;
        Ok(draft)
    }

    /// Writes `transition` inside `tx` with `statement` (the resolving update, `$1`..`$7` as `bind_resolved` binds
    /// them, returning a row if it changed one): `true` if the question was still pending and all of it is written.
    pub(in crate::store) async fn resolve_in(
        &self,
        tx: &mut sqlx::Transaction<'static, Postgres>,
        transition: &QuestionTransition,
        statement: &str,
    ) -> StoreResult<bool> {
        let updated: Vec<(Uuid,)> =
            Bind::bind_resolved(sqlx::query_as(statement), &transition.resolved).fetch_all(&mut **tx).await?;
        if updated.is_empty() {
            return Ok(false);
        }
        self.append_event_and_audit(tx, &transition.event, &transition.audit).await?;
        Ok(true)
    }

    /// Appends an event and then an audit entry's draft inside the caller's transaction, in one statement: the
    /// draft's insert is a data-modifying `WITH` around the event's. Returns the event's (draft) id.
    pub(in crate::store) async fn append_event_and_audit(
        &self,
        tx: &mut sqlx::Transaction<'static, Postgres>,
        event: &NewEvent,
        entry: &NewAuditEntry,
    ) -> StoreResult<i64> {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            let insert_event = PostgresStore::INSERT_EVENT;
            let draft = shift_placeholders(INSERT_AUDIT_DRAFT, placeholder_count(insert_event));
            format!("WITH draft AS ({draft}) {insert_event}")
        });
        let draft = AuditRow::unsealed(entry);
        let query = Bind::bind_event(sqlx::query_as::<_, (i64,)>(&SQL), event);
        let (event_id,) = Bind::bind_audit_draft(query, &draft).fetch_one(&mut **tx).await?;
        Ok(event_id)
    }

    /// The id of what a creation with this key made before; [`StoreError::IdempotencyMismatch`] if the key
    /// came with another request then.
    pub(in crate::store) async fn idempotent_resource(&self, key: &IdempotencyKey) -> StoreResult<Option<Uuid>> {
        let found: Option<(Uuid, Vec<u8>)> = sqlx::query_as(
            "SELECT resource_id, request_hash FROM idempotency_keys \
             WHERE workspace_id = $1 AND scope = $2 AND key = $3",
        )
        .bind(key.workspace_id)
        .bind(key.scope)
        .bind(&key.key)
        .fetch_optional(&self.pool)
        .await?;
        let Some((resource_id, request_hash)) = found else { return Ok(None) };
        if request_hash != key.request_hash {
            return Err(StoreError::IdempotencyMismatch { resource_id });
        }
        Ok(Some(resource_id))
    }

    /// Records the key for `resource_id` inside the creating transaction; a unique violation means a
    /// concurrent request with the same key won the race.
    pub(in crate::store) async fn claim_idempotency_key(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        key: &IdempotencyKey,
        resource_id: Uuid,
        at: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO idempotency_keys (workspace_id, scope, key, request_hash, resource_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(key.workspace_id)
        .bind(key.scope)
        .bind(&key.key)
        .bind(&key.request_hash)
        .bind(resource_id)
        .bind(at)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    pub(in crate::store) async fn question_by_idempotency_key(
        &self,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<QuestionRow>> {
        match self.idempotent_resource(key).await? {
            Some(id) => self.question(key.workspace_id, id).await,
            None => Ok(None),
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn committed_events(&self) -> watch::Receiver<Committed> {
        self.committed.subscribe()
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<WorkspaceRow> {
        sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
            .bind(Uuid::now_v7())
            .bind(name)
            .bind(crate::store::now())
            .execute(&self.pool)
            .await?;
        let row = sqlx::query_as("SELECT id, name, created_at FROM workspaces WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(row)
    }

    async fn server_secret(&self, name: &str, generated: &str) -> StoreResult<String> {
        sqlx::query(INSERT_SERVER_SECRET)
            .bind(name)
            .bind(generated)
            .bind(crate::store::now())
            .execute(&self.pool)
            .await?;
        Ok(sqlx::query_scalar(SERVER_SECRET).bind(name).fetch_one(&self.pool).await?)
    }

    async fn insert_token(&self, token: &TokenRow, audit: &NewAuditEntry) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let result = sqlx::query(
            "INSERT INTO tokens (id, workspace_id, name, role, secret_hash, created_at, created_by, maker_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (secret_hash) DO NOTHING",
        )
        .bind(token.id)
        .bind(token.workspace_id)
        .bind(&token.name)
        .bind(token.role.as_str())
        .bind(&token.secret_hash)
        .bind(token.created_at)
        .bind(&token.created_by)
        .bind(token.maker_id)
        .execute(&mut *tx)
        .await?;
        let created = result.rows_affected() == 1;
        if created {
            self.append_audit_in(&mut tx, audit).await?;
        }
        tx.commit().await?;
        Ok(created)
    }

    async fn principal_by_token_hash(&self, secret_hash: &[u8]) -> StoreResult<Option<Principal>> {
        if let Some(principal) = self.tokens.get(secret_hash) {
            return Ok(Some(principal));
        }
        let generation = self.tokens.generation();
        let record: Option<PrincipalRecord> =
            sqlx::query_as(&format!("{TOKEN_PRINCIPAL} WHERE t.secret_hash = $1 AND t.revoked_at IS NULL"))
                .bind(secret_hash)
                .fetch_optional(&self.pool)
                .await?;
        let principal = record.map(PrincipalRecord::into_principal).transpose()?;
        if let Some(principal) = &principal {
            self.tokens.remember(secret_hash, principal, generation);
        }
        Ok(principal)
    }

    async fn insert_session(&self, session: &SessionRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO sessions (id_hash, workspace_id, token_id, user_id, csrf_token, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&session.id_hash)
        .bind(session.workspace_id)
        .bind((session.principal_kind == PrincipalKind::Token).then_some(session.principal_id))
        .bind((session.principal_kind == PrincipalKind::User).then_some(session.principal_id))
        .bind(&session.csrf_token)
        .bind(session.created_at)
        .bind(session.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn session_by_hash(&self, id_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<(Principal, String)>> {
        #[derive(sqlx::FromRow)]
        struct Found {
            #[sqlx(flatten)]
            principal: PrincipalRecord,
            csrf_token: String,
        }
        // A revoked token, a disabled account or a removed membership ends the session at once: the
        // principal is looked up afresh on every request, never cached in the session.
        let found: Option<Found> = sqlx::query_as(&format!(
            "SELECT p.*, s.csrf_token FROM sessions s JOIN ({TOKEN_PRINCIPAL} WHERE t.revoked_at IS NULL) p \
             ON p.id = s.token_id WHERE s.id_hash = $1 AND s.expires_at > $2 \
             UNION ALL \
             SELECT p.*, s.csrf_token FROM sessions s JOIN ({} WHERE u.disabled_at IS NULL) p \
             ON p.id = s.user_id AND p.workspace_id = s.workspace_id WHERE s.id_hash = $1 AND s.expires_at > $2",
            crate::store::people::USER_PRINCIPAL
        ))
        .bind(id_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        found.map(|f| Ok((f.principal.into_principal()?, f.csrf_token))).transpose()
    }

    async fn delete_session(&self, id_hash: &[u8]) -> StoreResult<()> {
        sqlx::query("DELETE FROM sessions WHERE id_hash = $1").bind(id_hash).execute(&self.pool).await?;
        Ok(())
    }

    async fn create_question(
        &self,
        q: &QuestionRow,
        event: &NewEvent,
        idempotency: Option<&IdempotencyKey>,
        with: &AskedWith,
    ) -> StoreResult<Created<QuestionRow>> {
        if let Some(key) = idempotency
            && let Some(existing) = self.question_by_idempotency_key(key).await?
        {
            return Ok(Created { value: existing, created: false });
        }
        // A question that supersedes others or reaches people runs more statements after its insert.
        if idempotency.is_none()
            && with.is_empty()
            && let Some(created) = self.insert_question_directly(q, event).await?
        {
            return Ok(created);
        }
        let mut tx = self.pool.begin().await?;
        if let Some(key) = idempotency {
            let claimed = Self::claim_idempotency_key(&mut tx, key, q.id, q.created_at).await;
            if let Err(err) = claimed {
                // A concurrent request with the same key won the race: answer with its question.
                if is_unique_violation(&err) {
                    drop(tx);
                    if let Some(existing) = self.question_by_idempotency_key(key).await? {
                        return Ok(Created { value: existing, created: false });
                    }
                }
                return Err(err.into());
            }
        }
        let query = Bind::bind_question(sqlx::query_as::<_, (i64,)>(Self::insert_question_then_event_sql()), q);
        Bind::bind_event(query, event).fetch_one(&mut *tx).await?;
        for superseded in &with.supersedes {
            self.resolve_in(&mut tx, superseded, &RESOLVE_PENDING_RETURNING).await?;
        }
        if let Some(granted) = &with.answered_by_grant {
            let at = granted.transition.resolved.updated_at;
            let used =
                sqlx::query(USE_GRANT).bind(q.workspace_id).bind(granted.grant_id).bind(at).execute(&mut *tx).await?;
            if used.rows_affected() == 0 {
                return Err(StoreError::GrantNotLive);
            }
            self.append_audit_in(&mut tx, &granted.used).await?;
            if !self.resolve_in(&mut tx, &granted.transition, &RESOLVE_PENDING_RETURNING).await? {
                return Err(StoreError::Corrupt("a question just inserted was not pending".into()));
            }
        }
        for notification in &with.reach.notifications {
            Bind::bind_notification(sqlx::query(INSERT_NOTIFICATION), notification).execute(&mut *tx).await?;
        }
        for delivery in &with.reach.deliveries {
            Bind::bind_delivery(sqlx::query(INSERT_DELIVERY), delivery).execute(&mut *tx).await?;
        }
        for entry in &with.audit {
            self.append_audit_in(&mut tx, entry).await?;
        }
        tx.commit().await?;
        Ok(Created { value: q.clone(), created: true })
    }

    async fn question(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>> {
        let row =
            sqlx::query_as(&format!("SELECT {QUESTION_COLUMNS} FROM questions WHERE workspace_id = $1 AND id = $2"))
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row)
    }

    async fn list_questions(&self, workspace_id: Uuid, filter: &QuestionFilter) -> StoreResult<Vec<QuestionRow>> {
        self.list_question_rows(QUESTION_COLUMNS, workspace_id, filter).await
    }

    async fn list_question_summaries(
        &self,
        workspace_id: Uuid,
        filter: &QuestionFilter,
    ) -> StoreResult<Vec<QuestionSummaryRow>> {
        self.list_question_rows(QUESTION_SUMMARY_COLUMNS, workspace_id, filter).await
    }

    async fn count_questions(&self, workspace_id: Uuid, filter: &QuestionFilter) -> StoreResult<u32> {
        // Counting stops at the filter's limit: a badge that says "200+" needs no more, and the index walk
        // stays one page long however many questions the workspace has.
        let mut query = Self::filtered_questions("SELECT COUNT(*) FROM (SELECT 1 FROM questions", workspace_id, filter);
        query.push(" LIMIT ").push_bind(i64::from(filter.limit)).push(") AS capped");
        let (count,): (i64,) = query.build_query_as().fetch_one(&self.pool).await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    async fn resolve_question(&self, transition: QuestionTransition) -> StoreResult<ResolveOutcome> {
        // A question of a run may requeue it, which takes statements of its own.
        if transition.resolved.run_id.is_none() {
            if self.resolve_in_one_query(&transition).await? {
                return Ok(ResolveOutcome::Resolved(transition.resolved));
            }
            return not_resolved(self, transition.resolved.workspace_id, transition.resolved.id).await;
        }
        let mut tx = self.pool.begin().await?;
        if !self.resolve_in(&mut tx, &transition, &RESOLVE_LOCKING_RUN).await? {
            drop(tx);
            return not_resolved(self, transition.resolved.workspace_id, transition.resolved.id).await;
        }
        let resolved = transition.resolved;
        // In the same transaction: a run whose last holding question this was goes back to the queue, so
        // an answer can never be acknowledged without its run being picked up.
        if let Some(run_id) = resolved.run_id {
            requeue_if_unheld(self, &mut tx, resolved.workspace_id, run_id, resolved.updated_at).await?;
        }
        tx.commit().await?;
        Ok(ResolveOutcome::Resolved(resolved))
    }

    async fn change_pending_question(&self, change: &PendingQuestionChange) -> StoreResult<bool> {
        let question = &change.question;
        let mut tx = self.pool.begin().await?;
        if let (PendingEffect::Resolves(_), Some(run_id)) = (&change.effect, question.run_id) {
            // The run first, as every resolving write of a run's question locks it (`RESOLVE_LOCKING_RUN`): taken
            // in the other order, this write and a run's transition could each wait for the other's lock.
            sqlx::query("SELECT id FROM runs WHERE workspace_id = $1 AND id = $2 FOR UPDATE")
                .bind(question.workspace_id)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
        }
        let changed = Bind::bind_pending_change(sqlx::query(CHANGE_PENDING_QUESTION), question)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if changed == 0 {
            return Ok(false);
        }
        match &change.effect {
            PendingEffect::Recorded { event, audit, reach } => {
                self.append_event_and_audit(&mut tx, event, audit).await?;
                crate::store::escalation::write_reach(&mut tx, reach).await?;
            }
            PendingEffect::Resolves(transition) => {
                static RESOLVE: std::sync::LazyLock<String> =
                    std::sync::LazyLock::new(|| format!("{} RETURNING id", *RESOLVE_PENDING));
                // The change's update holds the question's row: it is still pending.
                if !self.resolve_in(&mut tx, transition, &RESOLVE).await? {
                    return Ok(false);
                }
                let resolved = &transition.resolved;
                if let Some(run_id) = resolved.run_id {
                    requeue_if_unheld(self, &mut tx, resolved.workspace_id, run_id, resolved.updated_at).await?;
                }
            }
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn overdue_questions(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<QuestionRow>> {
        let rows = sqlx::query_as(&format!(
            "SELECT {QUESTION_COLUMNS} FROM questions \
             WHERE status = 'pending' AND timeout_at IS NOT NULL AND timeout_at <= $1 \
             ORDER BY timeout_at LIMIT $2"
        ))
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    async fn pending_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query_as("SELECT kind, COUNT(*) FROM questions WHERE status = 'pending' GROUP BY kind")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows)
    }

    async fn next_deadline(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) =
            sqlx::query_as("SELECT MIN(timeout_at) FROM questions WHERE status = 'pending' AND timeout_at IS NOT NULL")
                .fetch_one(&self.pool)
                .await?;
        Ok(next)
    }

    async fn events_after(&self, after: i64, limit: i64) -> StoreResult<Vec<EventRow>> {
        let rows = sqlx::query_as(
            "SELECT id, workspace_id, event_type, project, run_id, question_id, data, created_at \
             FROM events WHERE id > $1 ORDER BY id LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    async fn workspace_events_after(&self, workspace_id: Uuid, after: i64, limit: i64) -> StoreResult<Vec<EventRow>> {
        let rows = sqlx::query_as(
            "SELECT id, workspace_id, event_type, project, run_id, question_id, data, created_at \
             FROM events WHERE workspace_id = $1 AND id > $2 ORDER BY id LIMIT $3",
        )
        .bind(workspace_id)
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    async fn last_event_id(&self) -> StoreResult<i64> {
        last_event_id(&self.pool).await
    }

    async fn append_audit(&self, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
        let mut tx = self.pool.begin().await?;
        let row = self.append_audit_in(&mut tx, entry).await?;
        tx.commit().await?;
        let id = row.id;
        sqlx::query_as(&format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("audit entry {id} is not in the log after its commit")))
    }

    async fn list_audit(&self, workspace_id: Uuid, query: &AuditQuery) -> StoreResult<Vec<AuditRow>> {
        let mut sql =
            QueryBuilder::<Postgres>::new(format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE workspace_id = "));
        sql.push_bind(workspace_id);
        let filter = &query.filter;
        if let Some(action) = &filter.action {
            sql.push(" AND action = ").push_bind(action.clone());
        }
        if let Some(actor) = &filter.actor {
            sql.push(" AND actor = ").push_bind(actor.clone());
        }
        if let Some(kind) = filter.actor_kind {
            sql.push(" AND actor_kind = ").push_bind(kind.as_str());
        }
        if let Some(subject_id) = &filter.subject_id {
            sql.push(" AND subject_id = ").push_bind(subject_id.clone());
        }
        if let Some(since) = filter.since {
            sql.push(" AND created_at >= ").push_bind(since);
        }
        if let Some(until) = filter.until {
            sql.push(" AND created_at < ").push_bind(until);
        }
        if let Some(cursor) = query.cursor_seq {
            sql.push(if query.ascending { " AND seq > " } else { " AND seq < " }).push_bind(cursor);
        }
        sql.push(if query.ascending { " ORDER BY seq LIMIT " } else { " ORDER BY seq DESC LIMIT " });
        sql.push_bind(i64::from(query.limit));
        Ok(sql.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn audit_heads(&self) -> StoreResult<Vec<AuditHead>> {
        // Workspaces with a head or with entries: a chain whose head row was deleted is still walked.
        let rows = sqlx::query_as(
            "SELECT w.id AS workspace_id, w.name AS workspace, h.seq, h.hash FROM workspaces w \
             LEFT JOIN audit_heads h ON h.workspace_id = w.id \
             WHERE h.workspace_id IS NOT NULL OR EXISTS (SELECT 1 FROM audit_log a WHERE a.workspace_id = w.id) \
             ORDER BY w.name",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    async fn audit_chain(&self, workspace_id: Uuid, after_seq: i64, limit: u32) -> StoreResult<Vec<AuditRow>> {
        let rows = sqlx::query_as(&format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE workspace_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        ))
        .bind(workspace_id)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}
