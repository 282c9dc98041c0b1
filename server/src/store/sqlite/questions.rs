//! Questions, events, the audit chain, workspaces and tokens' principals, on SQLite.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::*;
use crate::store::grants::USE_GRANT;
use crate::store::outbox::{INSERT_DELIVERY, INSERT_NOTIFICATION};
use crate::store::runs::requeue_if_unheld;
use sqlx::Sqlite;

impl SqliteStore {
    /// `head` (a `SELECT ... FROM questions`) with the filter's conditions on the workspace's questions (not
    /// its cursor, order or limit).
    pub(in crate::store) fn filtered_questions(
        head: &str,
        workspace_id: Uuid,
        filter: &QuestionFilter,
    ) -> QueryBuilder<'static, Sqlite> {
        let mut query = QueryBuilder::<Sqlite>::new(format!("{head} WHERE workspace_id = "));
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
        R: for<'r> sqlx::FromRow<'r, <Sqlite as sqlx::Database>::Row> + Send + Unpin,
    {
        let head = format!("SELECT {columns} FROM questions");
        let limit = i64::from(filter.limit);
        if filter.sort == QuestionSort::CreatedDesc {
            let mut query = Self::filtered_questions(&head, workspace_id, filter);
            if let Some(QuestionCursor::Created { id }) = &filter.after {
                query.push(" AND id < ").push_bind(*id);
            }
            query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
            return Ok(query.build_query_as().fetch_all(&self.read).await?);
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
            rows = query.build_query_as().fetch_all(&self.read).await?;
        }
        let missing = limit - rows.len() as i64;
        if missing > 0 {
            let mut query = Self::filtered_questions(&head, workspace_id, filter);
            query.push(" AND timeout_at IS NULL");
            if let Some(QuestionCursor::Deadline { timeout_at: None, id }) = &filter.after {
                query.push(" AND id > ").push_bind(*id);
            }
            query.push(" ORDER BY id ASC LIMIT ").push_bind(missing);
            rows.extend(query.build_query_as::<R>().fetch_all(&self.read).await?);
        }
        Ok(rows)
    }

    /// Appends an event inside the caller's transaction; returns its id.
    pub(in crate::store) async fn append_event(tx: &mut BatchedWrite, event: &NewEvent) -> StoreResult<i64> {
        let (id,): (i64,) =
            Bind::bind_event(sqlx::query_as::<_, (i64,)>(Self::INSERT_EVENT), event).fetch_one(&mut **tx).await?;
        Ok(id)
    }

    /// The query that stores a question and appends its `question_asked` event: two statements of one query,
    /// which the connection's thread runs in turn, `$N` naming the same argument in both, so the pair costs one
    /// hand-off to that thread.
    pub(in crate::store) fn insert_question_then_event_sql() -> &'static str {
        static SQL: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| insert_question_then_event("", "; ", SqliteStore::INSERT_EVENT));
        &SQL
    }

    /// Appends an audit entry to its workspace's chain inside the caller's transaction, so the entry
    /// commits if and only if the change it records does.
    /// Returns the entry as stored.
    pub(crate) async fn append_audit_in(&self, tx: &mut BatchedWrite, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
        if let Some(row) = self.sealed_on_guessed_head(entry) {
            let guess_held = Bind::bind_audit_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT_IF_HEAD), &row)
                .fetch_optional(&mut **tx)
                .await?;
            if guess_held.is_some() {
                self.audit_heads.remember(row.workspace_id, row.seq, &row.hash);
                return Ok(row);
            }
        }
        self.append_audit_claiming_head(tx, entry).await
    }

    /// The entry sealed as the successor of the head this store guesses (see [`AuditHeads`]), if it has a guess.
    /// `BEGIN IMMEDIATE` makes the writer the only one, so an append can check its guess of the chain's head in the
    /// same statement that inserts the entry, which spares the claim's statement.
    pub(in crate::store) fn sealed_on_guessed_head(&self, entry: &NewAuditEntry) -> Option<AuditRow> {
        let (seq, hash) = self.audit_heads.guess(entry.workspace_id)?;
        Some(AuditRow::seal(entry, seq + 1, hash))
    }

    /// Appends an audit entry after the head it claims (see `CLAIM_AUDIT_HEAD`).
    pub(in crate::store) async fn append_audit_claiming_head(
        &self,
        tx: &mut BatchedWrite,
        entry: &NewAuditEntry,
    ) -> StoreResult<AuditRow> {
        let (seq, prev_hash): (i64, String) = sqlx::query_as(CLAIM_AUDIT_HEAD)
            .bind(entry.workspace_id)
            .bind(super::GENESIS_HASH)
            .fetch_one(&mut **tx)
            .await?;
        let row = AuditRow::seal(entry, seq + 1, prev_hash);
        Bind::bind_audit_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT), &row).fetch_one(&mut **tx).await?;
        // The insert's trigger (migration 0007) has moved the head to this entry.
        self.audit_heads.remember(row.workspace_id, row.seq, &row.hash);
        Ok(row)
    }

    /// Writes `transition` inside `tx`, `before` the resolving update (a savepoint the transaction opens): the event's
    /// id if the question was still pending and all of it is written.
    pub(in crate::store) async fn resolve_in(
        &self,
        tx: &mut BatchedWrite,
        transition: &QuestionTransition,
        before: &str,
    ) -> StoreResult<Option<i64>> {
        let sql = format!("{before}{} RETURNING id", *RESOLVE_PENDING);
        let updated: Vec<(Uuid,)> =
            Bind::bind_resolved(sqlx::query_as(&sql), &transition.resolved).fetch_all(&mut **tx).await?;
        if updated.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.append_event_and_audit(tx, &transition.event, &transition.audit).await?))
    }

    /// Ends the write of a transition (its event `event_id` appended) inside `tx`: in the same transaction, a run
    /// whose last holding question this was goes back to the queue, so an answer can never be acknowledged without
    /// its run being picked up; then commits.
    async fn requeue_and_commit(
        &self,
        mut tx: BatchedWrite,
        transition: &QuestionTransition,
        event_id: i64,
    ) -> StoreResult<()> {
        let resolved = &transition.resolved;
        let requeued = match resolved.run_id {
            Some(run_id) => {
                requeue_if_unheld(self, &mut tx, resolved.workspace_id, run_id, resolved.updated_at).await?
            }
            None => None,
        };
        match requeued {
            Some(last) => self.commit_events(tx, Some(last)).await,
            None => self.commit_one_event(tx, event_id, &transition.event).await,
        }
    }

    /// Appends an event and then an audit entry inside the caller's transaction; returns the event's id.
    /// Where the store has a guess of the audit chain's head, both go in with one query, one hand-off to the
    /// connection's thread: the event's insert, then the entry's checked insert (as in `append_audit_in`), `$N` of
    /// the second shifted past the first's arguments.
    pub(in crate::store) async fn append_event_and_audit(
        &self,
        tx: &mut BatchedWrite,
        event: &NewEvent,
        entry: &NewAuditEntry,
    ) -> StoreResult<i64> {
        let Some(row) = self.sealed_on_guessed_head(entry) else {
            let id = Self::append_event(tx, event).await?;
            self.append_audit_in(tx, entry).await?;
            return Ok(id);
        };
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            let insert_event = SqliteStore::INSERT_EVENT;
            format!("{insert_event}; {}", shift_placeholders(&APPEND_AUDIT_IF_HEAD, placeholder_count(insert_event)))
        });
        let query = Bind::bind_event(sqlx::query_as::<_, (i64,)>(&SQL), event);
        // One row from the event's `RETURNING id`, and a second from the entry's if the guess held.
        let returned: Vec<(i64,)> = Bind::bind_audit_row(query, &row).fetch_all(&mut **tx).await?;
        let Some(&(event_id,)) = returned.first() else {
            return Err(StoreError::Corrupt("the event's insert returned no id".into()));
        };
        if returned.len() == 2 {
            self.audit_heads.remember(row.workspace_id, row.seq, &row.hash);
        } else {
            self.append_audit_claiming_head(tx, entry).await?;
        }
        Ok(event_id)
    }

    /// Commits and announces the newest event id to the hub: the id an insert returns is the event's, and the
    /// one writer commits ids in order.
    pub(in crate::store) async fn commit_events(&self, tx: BatchedWrite, last_event: Option<i64>) -> StoreResult<()> {
        tx.commit().await?;
        if let Some(id) = last_event {
            announce(&self.committed, id, None);
        }
        Ok(())
    }

    /// Commits a transaction that appended exactly one event, `event` with id `id`, and hands that event
    /// to the hub, which can pass it on without reading it back.
    pub(in crate::store) async fn commit_one_event(
        &self,
        tx: BatchedWrite,
        id: i64,
        event: &NewEvent,
    ) -> StoreResult<()> {
        tx.commit().await?;
        announce(&self.committed, id, Some(HubEvent::committed(id, event)));
        Ok(())
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
        .fetch_optional(&self.write)
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
        tx: &mut BatchedWrite,
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
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn committed_events(&self) -> watch::Receiver<Committed> {
        self.committed.subscribe()
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<WorkspaceRow> {
        sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
            .bind(Uuid::now_v7())
            .bind(name)
            .bind(crate::store::now())
            .execute(&self.write)
            .await?;
        let row = sqlx::query_as("SELECT id, name, created_at FROM workspaces WHERE name = $1")
            .bind(name)
            .fetch_one(&self.write)
            .await?;
        Ok(row)
    }

    async fn server_secret(&self, name: &str, generated: &str) -> StoreResult<String> {
        sqlx::query(INSERT_SERVER_SECRET)
            .bind(name)
            .bind(generated)
            .bind(crate::store::now())
            .execute(&self.write)
            .await?;
        Ok(sqlx::query_scalar(SERVER_SECRET).bind(name).fetch_one(&self.write).await?)
    }

    async fn insert_token(&self, token: &TokenRow, audit: &NewAuditEntry) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
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
                .fetch_optional(&self.read)
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
        .execute(&self.write)
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
        .fetch_optional(&self.read)
        .await?;
        found.map(|f| Ok((f.principal.into_principal()?, f.csrf_token))).transpose()
    }

    async fn delete_session(&self, id_hash: &[u8]) -> StoreResult<()> {
        sqlx::query("DELETE FROM sessions WHERE id_hash = $1").bind(id_hash).execute(&self.write).await?;
        Ok(())
    }

    async fn create_question(
        &self,
        q: &QuestionRow,
        event: &NewEvent,
        idempotency: Option<&IdempotencyKey>,
        with: &AskedWith,
    ) -> StoreResult<Created<QuestionRow>> {
        if let Some(writer) = self.writer_elsewhere() {
            let (store, q, event, key) = (self.clone(), q.clone(), event.clone(), idempotency.cloned());
            let with = with.clone();
            return writer.run(async move { store.create_question(&q, &event, key.as_ref(), &with).await }).await;
        }
        if let Some(key) = idempotency
            && let Some(existing) = self.question_by_idempotency_key(key).await?
        {
            return Ok(Created { value: existing, created: false });
        }
        // A question that supersedes others or reaches people runs more statements after its insert.
        let more_follow = !with.is_empty();
        if idempotency.is_none()
            && !more_follow
            && let Some(created) = self.insert_question_directly(q, event).await?
        {
            return Ok(created);
        }
        // The key's claim runs before the question's insert: such a write opens its savepoint apart.
        let mut tx = if idempotency.is_some() { self.begin_write().await? } else { self.begin_write_inline().await? };
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
        let (open, close) = if more_follow { (tx.savepoint(), "") } else { tx.savepoint_released_in_one_query() };
        let sql = format!("{open}{}{close}", Self::insert_question_then_event_sql());
        let query = Bind::bind_question(sqlx::query_as(&sql), q);
        // Read to the end: the savepoint's release may follow the insert in the same query.
        let returned: Vec<(i64,)> = Bind::bind_event(query, event).fetch_all(&mut *tx).await?;
        let Some(&(asked,)) = returned.first() else {
            return Err(StoreError::Corrupt("the question's event returned no id".into()));
        };
        let mut last = asked;
        for superseded in &with.supersedes {
            if let Some(id) = self.resolve_in(&mut tx, superseded, "").await? {
                last = id;
            }
        }
        if let Some(granted) = &with.answered_by_grant {
            let at = granted.transition.resolved.updated_at;
            let used =
                sqlx::query(USE_GRANT).bind(q.workspace_id).bind(granted.grant_id).bind(at).execute(&mut *tx).await?;
            if used.rows_affected() == 0 {
                return Err(StoreError::GrantNotLive);
            }
            self.append_audit_in(&mut tx, &granted.used).await?;
            let Some(id) = self.resolve_in(&mut tx, &granted.transition, "").await? else {
                return Err(StoreError::Corrupt("a question just inserted was not pending".into()));
            };
            last = id;
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
        if last == asked {
            self.commit_one_event(tx, asked, event).await?;
        } else {
            self.commit_events(tx, Some(last)).await?;
        }
        Ok(Created { value: q.clone(), created: true })
    }

    async fn question(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>> {
        let row =
            sqlx::query_as(&format!("SELECT {QUESTION_COLUMNS} FROM questions WHERE workspace_id = $1 AND id = $2"))
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&self.read)
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
        let (count,): (i64,) = query.build_query_as().fetch_one(&self.read).await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    async fn resolve_question(&self, transition: QuestionTransition) -> StoreResult<ResolveOutcome> {
        if let Some(writer) = self.writer_elsewhere() {
            let store = self.clone();
            return writer.run(async move { store.resolve_question(transition).await }).await;
        }
        // A question of a run may requeue it, which takes statements of its own.
        if transition.resolved.run_id.is_none() && self.resolve_in_one_query(&transition).await? {
            return Ok(ResolveOutcome::Resolved(transition.resolved));
        }
        let mut tx = self.begin_write_inline().await?;
        // Nothing to lock before the update: `BEGIN IMMEDIATE` on the one writer already runs write transactions
        // one at a time.
        let savepoint = tx.savepoint();
        let Some(event_id) = self.resolve_in(&mut tx, &transition, savepoint).await? else {
            drop(tx);
            return not_resolved(self, transition.resolved.workspace_id, transition.resolved.id).await;
        };
        self.requeue_and_commit(tx, &transition, event_id).await?;
        Ok(ResolveOutcome::Resolved(transition.resolved))
    }

    async fn change_pending_question(&self, change: &PendingQuestionChange) -> StoreResult<bool> {
        if let Some(writer) = self.writer_elsewhere() {
            let (store, change) = (self.clone(), change.clone());
            return writer.run(async move { store.change_pending_question(&change).await }).await;
        }
        let mut tx = self.begin_write().await?;
        let changed = Bind::bind_pending_change(sqlx::query(CHANGE_PENDING_QUESTION), &change.question)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if changed == 0 {
            return Ok(false);
        }
        match &change.effect {
            PendingEffect::Recorded { event, audit, reach } => {
                let event_id = self.append_event_and_audit(&mut tx, event, audit).await?;
                crate::store::escalation::write_reach(&mut tx, reach).await?;
                self.commit_one_event(tx, event_id, event).await?;
            }
            PendingEffect::Resolves(transition) => {
                // The writer is held since the change: the question is still pending.
                let Some(event_id) = self.resolve_in(&mut tx, transition, "").await? else { return Ok(false) };
                self.requeue_and_commit(tx, transition, event_id).await?;
            }
        }
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
        .fetch_all(&self.read)
        .await?;
        Ok(rows)
    }

    async fn pending_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query_as("SELECT kind, COUNT(*) FROM questions WHERE status = 'pending' GROUP BY kind")
            .fetch_all(&self.read)
            .await?;
        Ok(rows)
    }

    async fn next_deadline(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) =
            sqlx::query_as("SELECT MIN(timeout_at) FROM questions WHERE status = 'pending' AND timeout_at IS NOT NULL")
                .fetch_one(&self.read)
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
        .fetch_all(&self.read)
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
        .fetch_all(&self.read)
        .await?;
        Ok(rows)
    }

    async fn last_event_id(&self) -> StoreResult<i64> {
        last_event_id(&self.read).await
    }

    async fn append_audit(&self, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
        let mut tx = self.begin_write().await?;
        let row = self.append_audit_in(&mut tx, entry).await?;
        tx.commit().await?;
        Ok(row)
    }

    async fn list_audit(&self, workspace_id: Uuid, query: &AuditQuery) -> StoreResult<Vec<AuditRow>> {
        let mut sql =
            QueryBuilder::<Sqlite>::new(format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE workspace_id = "));
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
        Ok(sql.build_query_as().fetch_all(&self.read).await?)
    }

    async fn audit_heads(&self) -> StoreResult<Vec<AuditHead>> {
        // Workspaces with a head or with entries: a chain whose head row was deleted is still walked.
        let rows = sqlx::query_as(
            "SELECT w.id AS workspace_id, w.name AS workspace, h.seq, h.hash FROM workspaces w \
             LEFT JOIN audit_heads h ON h.workspace_id = w.id \
             WHERE h.workspace_id IS NOT NULL OR EXISTS (SELECT 1 FROM audit_log a WHERE a.workspace_id = w.id) \
             ORDER BY w.name",
        )
        .fetch_all(&self.read)
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
        .fetch_all(&self.read)
        .await?;
        Ok(rows)
    }
}
