//! Events and audit entries as PostgreSQL appends them (audit entries as drafts the commit seals), and a question's
//! insert with its event off the hot path: what `SqlBackend` runs for the areas written once.

use super::*;

impl PostgresStore {
    /// Appends an event inside the caller's transaction; returns its id.
    pub(crate) async fn append_event(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        event: &NewEvent,
    ) -> StoreResult<i64> {
        let (id,): (i64,) =
            Bind::bind_event(sqlx::query_as::<_, (i64,)>(Self::INSERT_EVENT), event).fetch_one(&mut **tx).await?;
        Ok(id)
    }

    /// Stores a question and appends its `question_asked` event inside `tx`, in one statement: the question's
    /// insert is a data-modifying `WITH`, which PostgreSQL runs to completion whatever the main statement reads.
    /// Returns the event's (draft) id.
    pub(crate) async fn insert_question_then_event(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        q: &QuestionRow,
        event: &NewEvent,
    ) -> StoreResult<i64> {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            insert_question_then_event("WITH asked AS (", ") ", PostgresStore::INSERT_EVENT)
        });
        let query = Bind::bind_row(sqlx::query_as::<_, (i64,)>(&SQL), q);
        let (asked,) = Bind::bind_event(query, event).fetch_one(&mut **tx).await?;
        Ok(asked)
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

    /// Appends an event and then an audit entry's draft inside the caller's transaction, in one statement: the
    /// draft's insert is a data-modifying `WITH` around the event's. Returns the event's (draft) id.
    pub(crate) async fn append_event_and_audit(
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
}
