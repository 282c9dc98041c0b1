//! Events and audit entries as SQLite appends and commits them (audit entries on its guess of the chain's head),
//! and a question's insert with its event off the hot path: what `SqlBackend` runs for the areas written once.

use super::*;

impl SqliteStore {
    /// Appends an event inside the caller's transaction; returns its id.
    pub(crate) async fn append_event(tx: &mut BatchedWrite, event: &NewEvent) -> StoreResult<i64> {
        let (id,): (i64,) =
            Bind::bind_event(sqlx::query_as::<_, (i64,)>(Self::INSERT_EVENT), event).fetch_one(&mut **tx).await?;
        Ok(id)
    }

    /// Stores a question and appends its `question_asked` event inside `tx`: two statements of one query, which the
    /// connection's thread runs in turn, `$N` naming the same argument in both, so the pair costs one hand-off to
    /// that thread. A write begun inline opens its savepoint in the same query and, if `more_follow` says no other
    /// statement follows, releases it there too. Returns the event's id.
    pub(crate) async fn insert_question_then_event(
        tx: &mut BatchedWrite,
        q: &QuestionRow,
        event: &NewEvent,
        more_follow: bool,
    ) -> StoreResult<i64> {
        static SQL: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| insert_question_then_event("", "; ", SqliteStore::INSERT_EVENT));
        let (open, close) = if more_follow { (tx.savepoint(), "") } else { tx.savepoint_released_in_one_query() };
        let sql = format!("{open}{}{close}", *SQL);
        let query = Bind::bind_row(sqlx::query_as(&sql), q);
        // Read to the end: the savepoint's release may follow the insert in the same query.
        let returned: Vec<(i64,)> = Bind::bind_event(query, event).fetch_all(&mut **tx).await?;
        let Some(&(asked,)) = returned.first() else {
            return Err(StoreError::Corrupt("the question's event returned no id".into()));
        };
        Ok(asked)
    }

    /// Appends an audit entry to its workspace's chain inside the caller's transaction, so the entry
    /// commits if and only if the change it records does.
    /// Returns the entry as stored.
    pub(crate) async fn append_audit_in(&self, tx: &mut BatchedWrite, entry: &NewAuditEntry) -> StoreResult<AuditRow> {
        if let Some(row) = self.sealed_on_guessed_head(entry) {
            let guess_held = Bind::bind_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT_IF_HEAD), &row)
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
    pub(crate) fn sealed_on_guessed_head(&self, entry: &NewAuditEntry) -> Option<AuditRow> {
        let (seq, hash) = self.audit_heads.guess(entry.workspace_id)?;
        Some(AuditRow::seal(entry, seq + 1, hash))
    }

    /// Appends an audit entry after the head it claims (see `CLAIM_AUDIT_HEAD`).
    pub(crate) async fn append_audit_claiming_head(
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
        Bind::bind_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT), &row).fetch_one(&mut **tx).await?;
        // The insert's trigger (migration 0007) has moved the head to this entry.
        self.audit_heads.remember(row.workspace_id, row.seq, &row.hash);
        Ok(row)
    }

    /// Appends an event and then an audit entry inside the caller's transaction; returns the event's id.
    /// Where the store has a guess of the audit chain's head, both go in with one query, one hand-off to the
    /// connection's thread: the event's insert, then the entry's checked insert (as in `append_audit_in`), `$N` of
    /// the second shifted past the first's arguments.
    pub(crate) async fn append_event_and_audit(
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
        let returned: Vec<(i64,)> = Bind::bind_row(query, &row).fetch_all(&mut **tx).await?;
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
    pub(crate) async fn commit_events(&self, tx: BatchedWrite, last_event: Option<i64>) -> StoreResult<()> {
        tx.commit().await?;
        if let Some(id) = last_event {
            announce(&self.committed, id, None);
        }
        Ok(())
    }

    /// Commits a transaction that appended exactly one event, `event` with id `id`, and hands that event
    /// to the hub, which can pass it on without reading it back.
    pub(crate) async fn commit_one_event(&self, tx: BatchedWrite, id: i64, event: &NewEvent) -> StoreResult<()> {
        tx.commit().await?;
        announce(&self.committed, id, Some(HubEvent::committed(id, event)));
        Ok(())
    }
}
