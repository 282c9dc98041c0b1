//! Questions, events, the audit log, workspaces, server secrets, tokens and sessions as stored: [`Store`], written
//! once for both databases. The hot writes of a HITL cycle (asking and resolving a question) and the appending of
//! events and audit entries stay each backend's own, behind [`SqlBackend`].

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::watch;
use uuid::Uuid;

use super::backend::{FromBoth, Sql, SqlBackend, Statement};
use super::grants::USE_GRANT;
use super::idempotency::{claim_idempotency_key, idempotent_resource};
use super::sql::*;
use super::*;

/// The columns of `events`, in the order of [`EventRow`].
const EVENT_COLUMNS: &str = "id, workspace_id, event_type, project, run_id, question_id, data, created_at";

table_row!(TokenRow in "tokens": id, workspace_id, name, role, secret_hash, created_at, created_by, maker_id);
/// Inserts a token unless one with its secret exists.
static INSERT_TOKEN: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{} ON CONFLICT (secret_hash) DO NOTHING", TokenRow::insert()));

#[async_trait]
impl<B> Store for B
where
    B: SqlBackend + RunStore + PeopleStore + OutboxStore + WebhookStore + GrantStore,
{
    fn backend(&self) -> Backend {
        B::BACKEND
    }

    fn committed_events(&self) -> watch::Receiver<Committed> {
        self.committed().subscribe()
    }

    async fn ping(&self) -> StoreResult<()> {
        self.read().execute(Statement::new("SELECT 1")).await?;
        Ok(())
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<WorkspaceRow> {
        self.write_alone()
            .execute(
                Statement::new(
                    "INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
                )
                .bind(Uuid::now_v7())
                .bind(name)
                .bind(now()),
            )
            .await?;
        self.write_alone()
            .fetch_one(Statement::new("SELECT id, name, created_at FROM workspaces WHERE name = $1").bind(name))
            .await
    }

    async fn server_secret(&self, name: &str, generated: &str) -> StoreResult<String> {
        self.write_alone().execute(Statement::new(INSERT_SERVER_SECRET).bind(name).bind(generated).bind(now())).await?;
        let (value,): (String,) = self.write_alone().fetch_one(Statement::new(SERVER_SECRET).bind(name)).await?;
        Ok(value)
    }

    async fn insert_token(&self, token: &TokenRow, audit: &NewAuditEntry) -> StoreResult<bool> {
        let mut write = self.begin_write().await?;
        let inserted = write.execute(Statement::new(INSERT_TOKEN.as_str()).bind_row(token)).await?;
        let created = inserted == 1;
        if created {
            self.append_audit_in(&mut write, audit).await?;
        }
        self.commit_write(write, None).await?;
        Ok(created)
    }

    async fn principal_by_token_hash(&self, secret_hash: &[u8]) -> StoreResult<Option<Principal>> {
        if let Some(principal) = self.token_cache().get(secret_hash) {
            return Ok(Some(principal));
        }
        let generation = self.token_cache().generation();
        let record: Option<PrincipalRecord> = self
            .read()
            .fetch_optional(
                Statement::new(format!("{} AND t.secret_hash = $1", LIVE_TOKEN_PRINCIPAL.as_str())).bind(secret_hash),
            )
            .await?;
        let principal = record.map(PrincipalRecord::into_principal).transpose()?;
        if let Some(principal) = &principal {
            self.token_cache().remember(secret_hash, principal, generation);
        }
        Ok(principal)
    }

    async fn insert_session(&self, session: &SessionRow) -> StoreResult<()> {
        self.write_alone()
            .execute(
                Statement::new(
                    "INSERT INTO sessions (id_hash, workspace_id, token_id, user_id, csrf_token, created_at, \
                     expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(&session.id_hash)
                .bind(session.workspace_id)
                .bind((session.principal_kind == PrincipalKind::Token).then_some(session.principal_id))
                .bind((session.principal_kind == PrincipalKind::User).then_some(session.principal_id))
                .bind(&session.csrf_token)
                .bind(session.created_at)
                .bind(session.expires_at),
            )
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
        // A revoked token, a disabled account or a removed membership (the person's, or their token's maker's) ends
        // the session at once: the principal is looked up afresh on every request, never cached in the session.
        let found: Option<Found> = self
            .read()
            .fetch_optional(
                Statement::new(format!(
                    "SELECT p.*, s.csrf_token FROM sessions s JOIN ({}) p \
                     ON p.id = s.token_id WHERE s.id_hash = $1 AND s.expires_at > $2 \
                     UNION ALL \
                     SELECT p.*, s.csrf_token FROM sessions s JOIN ({} WHERE u.disabled_at IS NULL) p \
                     ON p.id = s.user_id AND p.workspace_id = s.workspace_id WHERE s.id_hash = $1 AND s.expires_at > $2",
                    LIVE_TOKEN_PRINCIPAL.as_str(),
                    super::people::USER_PRINCIPAL
                ))
                .bind(id_hash)
                .bind(now),
            )
            .await?;
        found.map(|f| Ok((f.principal.into_principal()?, f.csrf_token))).transpose()
    }

    async fn delete_session(&self, id_hash: &[u8]) -> StoreResult<()> {
        self.write_alone().execute(Statement::new("DELETE FROM sessions WHERE id_hash = $1").bind(id_hash)).await?;
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
            && let Some(existing) = question_by_idempotency_key(self, key).await?
        {
            return Ok(Created { value: existing, created: false });
        }
        // A question that supersedes others or reaches people runs more statements after its insert.
        let more_follow = !with.is_empty();
        if idempotency.is_none()
            && !more_follow
            && let Some(created) = self.ask_on_hot_path(q, event).await?
        {
            return Ok(created);
        }
        let mut write = self.begin_asking(idempotency.is_some()).await?;
        if let Some(key) = idempotency
            && let Err(err) = claim_idempotency_key(&mut write, key, q.id, q.created_at).await
        {
            // A concurrent request with the same key won the race: answer with its question.
            if is_unique_violation_of(&err) {
                drop(write);
                if let Some(existing) = question_by_idempotency_key(self, key).await? {
                    return Ok(Created { value: existing, created: false });
                }
            }
            return Err(err);
        }
        let asked = self.insert_question_in(&mut write, q, event, more_follow).await?;
        let mut last = asked;
        for superseded in &with.supersedes {
            if let Some(id) = resolve_in(self, &mut write, superseded, &**RESOLVE_PENDING_RETURNING).await? {
                last = id;
            }
        }
        if let Some(granted) = &with.answered_by_grant {
            let at = granted.transition.resolved.updated_at;
            let used =
                write.execute(Statement::new(USE_GRANT).bind(q.workspace_id).bind(granted.grant_id).bind(at)).await?;
            if used == 0 {
                return Err(StoreError::GrantNotLive);
            }
            self.append_audit_in(&mut write, &granted.used).await?;
            let Some(id) = resolve_in(self, &mut write, &granted.transition, &**RESOLVE_PENDING_RETURNING).await?
            else {
                return Err(StoreError::Corrupt("a question just inserted was not pending".into()));
            };
            last = id;
        }
        for notification in &with.reach.notifications {
            write.execute(Statement::insert(notification)).await?;
        }
        for delivery in &with.reach.deliveries {
            write.execute(Statement::insert(delivery)).await?;
        }
        for entry in &with.audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        if last == asked {
            self.commit_one_event(write, asked, event).await?;
        } else {
            self.commit_write(write, Some(last)).await?;
        }
        Ok(Created { value: q.clone(), created: true })
    }

    async fn question(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<QuestionRow>> {
        self.read().fetch_optional(Statement::by_id(QUESTION_COLUMNS, "questions", workspace_id, id)).await
    }

    async fn list_questions(&self, workspace_id: Uuid, filter: &QuestionFilter) -> StoreResult<Vec<QuestionRow>> {
        list_question_rows(self, QUESTION_COLUMNS, workspace_id, filter).await
    }

    async fn list_question_summaries(
        &self,
        workspace_id: Uuid,
        filter: &QuestionFilter,
    ) -> StoreResult<Vec<QuestionSummaryRow>> {
        list_question_rows(self, QUESTION_SUMMARY_COLUMNS, workspace_id, filter).await
    }

    async fn count_questions(&self, workspace_id: Uuid, filter: &QuestionFilter) -> StoreResult<u32> {
        // Counting stops at the filter's limit: a badge that says "200+" needs no more, and the index walk
        // stays one page long however many questions the workspace has.
        let mut query = filtered_questions::<B>("SELECT COUNT(*) FROM (SELECT 1 FROM questions", workspace_id, filter);
        query.push(" LIMIT ").push_bind(i64::from(filter.limit)).push(") AS capped");
        let (count,): (i64,) = self.read().fetch_one(query).await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    async fn resolve_question(&self, transition: QuestionTransition) -> StoreResult<ResolveOutcome> {
        if let Some(writer) = self.writer_elsewhere() {
            let store = self.clone();
            return writer.run(async move { store.resolve_question(transition).await }).await;
        }
        // A question of a run may requeue it, and an answer may take files: statements of their own.
        if transition.resolved.run_id.is_none() && transition.files.is_empty() {
            match self.resolve_on_hot_path(&transition).await? {
                Some(true) => return Ok(ResolveOutcome::Resolved(transition.resolved)),
                Some(false) => {
                    return not_resolved(self, transition.resolved.workspace_id, transition.resolved.id).await;
                }
                None => {}
            }
        }
        let (mut write, update) = self.begin_resolving().await?;
        let Some(event_id) = resolve_in(self, &mut write, &transition, update).await? else {
            drop(write);
            return not_resolved(self, transition.resolved.workspace_id, transition.resolved.id).await;
        };
        requeue_and_commit(self, write, &transition, event_id).await?;
        Ok(ResolveOutcome::Resolved(transition.resolved))
    }

    async fn change_pending_question(&self, change: &PendingQuestionChange) -> StoreResult<bool> {
        if let Some(writer) = self.writer_elsewhere() {
            let (store, change) = (self.clone(), change.clone());
            return writer.run(async move { store.change_pending_question(&change).await }).await;
        }
        let question = &change.question;
        let mut write = self.begin_write().await?;
        if let (PendingEffect::Resolves(_), Some(run_id)) = (&change.effect, question.run_id) {
            // The run first, as every resolving write of a run's question locks it: taken in the other order, this
            // write and a run's transition could each wait for the other's lock.
            self.lock_run_in(&mut write, question.workspace_id, run_id).await?;
        }
        let changed =
            write.execute(Bind::bind_pending_change(Statement::new(CHANGE_PENDING_QUESTION), question)).await?;
        if changed == 0 {
            return Ok(false);
        }
        match &change.effect {
            PendingEffect::Recorded { event, audit, reach } => {
                let event_id = self.append_event_and_audit_in(&mut write, event, audit).await?;
                super::escalation::write_reach(&mut write, reach).await?;
                self.commit_one_event(write, event_id, event).await?;
            }
            PendingEffect::Resolves(transition) => {
                // The change's update holds the question (its row, or the whole database on SQLite): it is still
                // pending.
                let Some(event_id) = resolve_in(self, &mut write, transition, &**RESOLVE_PENDING_RETURNING).await?
                else {
                    return Ok(false);
                };
                requeue_and_commit(self, write, transition, event_id).await?;
            }
        }
        Ok(true)
    }

    async fn overdue_questions(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<QuestionRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {QUESTION_COLUMNS} FROM questions \
                     WHERE status = 'pending' AND timeout_at IS NOT NULL AND timeout_at <= $1 \
                     ORDER BY timeout_at LIMIT $2"
                ))
                .bind(now)
                .bind(limit),
            )
            .await
    }

    async fn pending_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        self.read()
            .fetch_all(Statement::new("SELECT kind, COUNT(*) FROM questions WHERE status = 'pending' GROUP BY kind"))
            .await
    }

    async fn next_deadline(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (next,): (Option<DateTime<Utc>>,) = self
            .read()
            .fetch_one(Statement::new(
                "SELECT MIN(timeout_at) FROM questions WHERE status = 'pending' AND timeout_at IS NOT NULL",
            ))
            .await?;
        Ok(next)
    }

    async fn events_after(&self, after: i64, limit: i64) -> StoreResult<Vec<EventRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!("SELECT {EVENT_COLUMNS} FROM events WHERE id > $1 ORDER BY id LIMIT $2"))
                    .bind(after)
                    .bind(limit),
            )
            .await
    }

    async fn workspace_events_after(&self, workspace_id: Uuid, after: i64, limit: i64) -> StoreResult<Vec<EventRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {EVENT_COLUMNS} FROM events WHERE workspace_id = $1 AND id > $2 ORDER BY id LIMIT $3"
                ))
                .bind(workspace_id)
                .bind(after)
                .bind(limit),
            )
            .await
    }

    async fn last_event_id(&self) -> StoreResult<i64> {
        let (id,): (i64,) = self.read().fetch_one(Statement::new(LAST_EVENT_ID)).await?;
        Ok(id)
    }

    async fn append_audit(&self, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
        let mut write = self.begin_write().await?;
        let row = self.append_audit_in(&mut write, entry).await?;
        self.commit_write(write, None).await?;
        if !B::SEALS_AUDIT_AT_COMMIT {
            return Ok(row);
        }
        let id = row.id;
        self.read()
            .fetch_optional(Statement::new(format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id = $1")).bind(id))
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("audit entry {id} is not in the log after its commit")))
    }

    async fn list_audit(&self, workspace_id: Uuid, query: &AuditQuery) -> StoreResult<Vec<AuditRow>> {
        let mut sql = Statement::new(format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE workspace_id = "));
        sql.push_bind(workspace_id);
        let filter = &query.filter;
        sql.push_filter("action = ", filter.action.clone());
        sql.push_filter("actor = ", filter.actor.clone());
        sql.push_filter("actor_kind = ", filter.actor_kind.map(|v| v.as_str()));
        sql.push_filter("subject_id = ", filter.subject_id.clone());
        sql.push_filter("created_at >= ", filter.since);
        sql.push_filter("created_at < ", filter.until);
        sql.push_filter(if query.ascending { "seq > " } else { "seq < " }, query.cursor_seq);
        sql.push(if query.ascending { " ORDER BY seq LIMIT " } else { " ORDER BY seq DESC LIMIT " });
        sql.push_bind(i64::from(query.limit));
        self.read().fetch_all(sql).await
    }

    async fn audit_heads(&self) -> StoreResult<Vec<AuditHead>> {
        // Workspaces with a head or with entries: a chain whose head row was deleted is still walked.
        self.read()
            .fetch_all(Statement::new(
                "SELECT w.id AS workspace_id, w.name AS workspace, h.seq, h.hash FROM workspaces w \
                 LEFT JOIN audit_heads h ON h.workspace_id = w.id \
                 WHERE h.workspace_id IS NOT NULL OR EXISTS (SELECT 1 FROM audit_log a WHERE a.workspace_id = w.id) \
                 ORDER BY w.name",
            ))
            .await
    }

    async fn audit_chain(&self, workspace_id: Uuid, after_seq: i64, limit: u32) -> StoreResult<Vec<AuditRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE workspace_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
                ))
                .bind(workspace_id)
                .bind(after_seq)
                .bind(i64::from(limit)),
            )
            .await
    }
}

/// `head` (a `SELECT ... FROM questions`) with the filter's conditions on the workspace's questions (not its
/// cursor, order or limit).
fn filtered_questions<B: SqlBackend>(head: &str, workspace_id: Uuid, filter: &QuestionFilter) -> Statement<'static> {
    let mut query = Statement::new(format!("{head} WHERE workspace_id = "));
    query.push_bind(workspace_id);
    query.push_filter("status = ", filter.status.map(|v| v.as_str()));
    query.push_filter("kind = ", filter.kind.map(|v| v.as_str()));
    query.push_filter("project = ", filter.project.clone());
    query.push_filter("urgency = ", filter.urgency.map(|v| v.as_str()));
    query.push_filter("run_id = ", filter.run_id);
    query.push_filter("created_by = ", filter.created_by);
    if let Some(text) = &filter.text {
        B::push_text_match(&mut query, text);
    }
    query
}

/// One page of questions in the filter's order, starting after its cursor, as rows of `columns`.
async fn list_question_rows<B: SqlBackend, R: FromBoth>(
    backend: &B,
    columns: &str,
    workspace_id: Uuid,
    filter: &QuestionFilter,
) -> StoreResult<Vec<R>> {
    let head = format!("SELECT {columns} FROM questions");
    let limit = i64::from(filter.limit);
    if filter.sort == QuestionSort::CreatedDesc {
        let mut query = filtered_questions::<B>(&head, workspace_id, filter);
        if let Some(QuestionCursor::Created { id }) = &filter.after {
            query.push(" AND id < ").push_bind(*id);
        }
        query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        return backend.read().fetch_all(query).await;
    }
    // Soonest deadline first, then the questions without one, oldest first: two queries rather than one
    // `ORDER BY timeout_at NULLS LAST`, because each can walk an index in its order and stop after a
    // page, where the single query sorted every matching question for every page (SQLite's indexes
    // keep NULLs first, so none can serve NULLS LAST).
    let mut rows: Vec<R> = Vec::new();
    let past_dated = matches!(filter.after, Some(QuestionCursor::Deadline { timeout_at: None, .. }));
    if !past_dated {
        let mut query = filtered_questions::<B>(&head, workspace_id, filter);
        query.push(" AND timeout_at IS NOT NULL");
        if let Some(QuestionCursor::Deadline { timeout_at: Some(at), id }) = &filter.after {
            query.push(" AND (timeout_at > ").push_bind(*at);
            query.push(" OR (timeout_at = ").push_bind(*at);
            query.push(" AND id > ").push_bind(*id);
            query.push("))");
        }
        query.push(" ORDER BY timeout_at ASC, id ASC LIMIT ").push_bind(limit);
        rows = backend.read().fetch_all(query).await?;
    }
    let missing = limit - rows.len() as i64;
    if missing > 0 {
        let mut query = filtered_questions::<B>(&head, workspace_id, filter);
        query.push(" AND timeout_at IS NULL");
        if let Some(QuestionCursor::Deadline { timeout_at: None, id }) = &filter.after {
            query.push(" AND id > ").push_bind(*id);
        }
        query.push(" ORDER BY id ASC LIMIT ").push_bind(missing);
        rows.extend(backend.read().fetch_all::<R>(query).await?);
    }
    Ok(rows)
}

/// Writes `transition` inside `write` with `update` (the resolving update, `$1`..`$7` as `bind_resolved` binds them,
/// returning a row if it changed one): the event's id if the question was still pending and all of it is written.
async fn resolve_in<B: SqlBackend>(
    backend: &B,
    write: &mut B::Write,
    transition: &QuestionTransition,
    update: impl Into<Cow<'static, str>> + Send,
) -> StoreResult<Option<i64>> {
    let updated: Vec<(Uuid,)> =
        write.fetch_all(Bind::bind_resolved(Statement::new(update), &transition.resolved)).await?;
    if updated.is_empty() {
        return Ok(None);
    }
    let resolved = &transition.resolved;
    super::files::attach_files_in(write, resolved.workspace_id, resolved.id, &transition.files).await?;
    Ok(Some(backend.append_event_and_audit_in(write, &transition.event, &transition.audit).await?))
}

/// Ends the write of a transition (its event `event_id` appended): in the same write, a run whose last holding
/// question this was goes back to the queue, so an answer can never be acknowledged without its run being picked
/// up; then commits.
async fn requeue_and_commit<B: SqlBackend>(
    backend: &B,
    mut write: B::Write,
    transition: &QuestionTransition,
    event_id: i64,
) -> StoreResult<()> {
    let resolved = &transition.resolved;
    let requeued = match resolved.run_id {
        Some(run_id) => {
            super::run_steps::requeue_if_unheld(backend, &mut write, resolved.workspace_id, run_id, resolved.updated_at)
                .await?
        }
        None => None,
    };
    match requeued {
        Some(last) => backend.commit_write(write, Some(last)).await,
        None => backend.commit_one_event(write, event_id, &transition.event).await,
    }
}

async fn question_by_idempotency_key<B: SqlBackend + Store>(
    backend: &B,
    key: &IdempotencyKey,
) -> StoreResult<Option<QuestionRow>> {
    match idempotent_resource(backend, key).await? {
        Some(id) => backend.question(key.workspace_id, id).await,
        None => Ok(None),
    }
}
