//! The SQL both backends agree on: column lists, statements, the binding of rows to statements, and the
//! bookkeeping of committed events. Each backend (`sqlite`, `postgres`) writes its own queries with these; where
//! the dialects differ, the backend says so in its own code.

use sqlx::postgres::PgArguments;
use sqlx::sqlite::SqliteArguments;
use sqlx::types::Json;
use sqlx::{Postgres, Sqlite};
use tokio::sync::watch;

use super::backend::{Both, Statement};
use super::*;

/// Claims a workspace's audit chain head, creating it at `seq` 0 on the first entry (SQLite, when its guess of the
/// head was wrong; SQLite's one writer serialises appends by itself). PostgreSQL claims the head in the trigger that
/// seals an entry at commit (migration 0010), under the event log's lock.
pub(super) const CLAIM_AUDIT_HEAD: &str = "INSERT INTO audit_heads (workspace_id, seq, hash) VALUES ($1, 0, $2) \
     ON CONFLICT (workspace_id) DO UPDATE SET seq = audit_heads.seq RETURNING seq, hash";

/// Appends an audit entry whose `seq` and `prev_hash` were taken from the claimed head; returns its `seq`.
pub(super) static APPEND_AUDIT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{} RETURNING seq", AuditRow::insert()));

/// A table whose rows are written whole. Its column list and the binding of a row's values to it come from one list
/// of the row's fields ([`table_row!`]), so the two cannot drift apart.
pub(super) trait TableRow {
    /// The columns, in the order [`TableRow::bind_to`] binds them.
    const COLUMNS: &'static str;

    /// `INSERT INTO` the table, one placeholder a column.
    fn insert() -> &'static str;

    /// Binds each column's value, in the order of [`TableRow::COLUMNS`], after what `query` has.
    fn bind_to<'q, B: Bind<'q>>(&'q self, query: B) -> B;
}

/// Makes `$row` a [`TableRow`] of `$table`, and names its column list `$columns` if given:
/// `table_row!(RUN_COLUMNS = RunRow in "runs": id, workspace_id, …)`. The list names every field of the row once
/// (the compiler refuses a missing or unknown field), in the order of the columns.
macro_rules! table_row {
    ($columns:ident = $row:ident in $table:literal: $($field:ident),+ $(,)?) => {
        pub(super) const $columns: &str = <$row as $crate::sql::TableRow>::COLUMNS;
        table_row!($row in $table: $($field),+);
    };
    ($row:ident in $table:literal: $first:ident $(, $field:ident)* $(,)?) => {
        impl $crate::sql::TableRow for $row {
            const COLUMNS: &'static str = concat!(stringify!($first) $(, ", ", stringify!($field))*);

            fn insert() -> &'static str {
                static INSERT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
                    $crate::sql::insert_into($table, <$row as $crate::sql::TableRow>::COLUMNS)
                });
                &INSERT
            }

            fn bind_to<'q, B: $crate::sql::Bind<'q>>(&'q self, query: B) -> B {
                let $row { $first $(, $field)* } = self;
                query.bind_arg($first) $(.bind_arg($field))*
            }
        }
    };
}
pub(super) use table_row;

table_row!(QUESTION_COLUMNS = QuestionRow in "questions": id, workspace_id, project, run_id, tool_call_id,
    parent_run_ids, kind, response_type, title, body, options, fields, action, allow_edit, context, urgency, timeout_at,
    default_response, status, response, answered_by, resolution, created_by, created_at, updated_at, resolved_at,
    assignee, escalation, next_escalation_at, callback_url, required_approvals, eligible, approvals, claimed_by,
    claim_expires_at, revision, claimed_by_id, field_rules, response_schema);

table_row!(AUDIT_COLUMNS = AuditRow in "audit_log": id, workspace_id, seq, prev_hash, hash, actor, actor_id,
    actor_kind, action, subject_type, subject_id, before, after, diff, created_at);

/// `INSERT INTO {table} ({columns}) VALUES ($1, …)`, one placeholder a column.
pub(super) fn insert_into(table: &str, columns: &str) -> String {
    let placeholders = (1..=columns.split(',').count()).map(|n| format!("${n}")).collect::<Vec<_>>();
    format!("INSERT INTO {table} ({columns}) VALUES ({})", placeholders.join(", "))
}

/// `bind`, which `sqlx::query`, `sqlx::query_as`, the SQLite direct connection's arguments and a [`Statement`]
/// each have, and the binding of whole rows with it, written once for both databases.
pub(super) trait Bind<'q>: Sized {
    fn bind_arg<T: Both<'q>>(self, value: T) -> Self;

    /// Binds a whole row, in the order of its table's columns, after what `query` has.
    fn bind_row<R: TableRow>(self, row: &'q R) -> Self {
        row.bind_to(self)
    }

    /// Binds an event's values, in the order of `INSERT_EVENT`'s placeholders, after what `query` has.
    fn bind_event(self, event: &'q NewEvent) -> Self {
        self.bind_arg(event.workspace_id)
            .bind_arg(event.event_type.as_str())
            .bind_arg(&event.project)
            .bind_arg(event.run_id)
            .bind_arg(event.question_id)
            .bind_arg(Json(&event.data))
            .bind_arg(event.created_at)
    }

    /// Binds what resolving a question writes and which question it is, `resolved` being the row as it
    /// leaves `pending`: `$1`..`$7` of the stores' one-query resolving writes.
    fn bind_resolved(self, resolved: &'q QuestionRow) -> Self {
        self.bind_arg(resolved.status)
            .bind_arg(&resolved.response)
            .bind_arg(&resolved.answered_by)
            .bind_arg(resolved.resolution)
            .bind_arg(resolved.updated_at)
            .bind_arg(resolved.workspace_id)
            .bind_arg(resolved.id)
    }

    /// Binds a pending question's change, `$1`..`$9` of [`CHANGE_PENDING_QUESTION`].
    fn bind_pending_change(self, q: &'q QuestionRow) -> Self {
        self.bind_arg(&q.assignee)
            .bind_arg(&q.approvals)
            .bind_arg(&q.claimed_by)
            .bind_arg(q.claim_expires_at)
            .bind_arg(q.revision)
            .bind_arg(q.updated_at)
            .bind_arg(q.workspace_id)
            .bind_arg(q.id)
            .bind_arg(q.claimed_by_id)
    }

    /// Binds a draft's columns, in the order of [`INSERT_AUDIT_DRAFT`], after what `query` has.
    fn bind_audit_draft(self, row: &'q AuditRow) -> Self {
        Bind::bind_audited(self.bind_arg(row.id).bind_arg(row.workspace_id), row)
    }

    /// Binds what an entry records, `actor` to `created_at`, the columns a draft and a sealed entry share.
    fn bind_audited(self, row: &'q AuditRow) -> Self {
        self.bind_arg(&row.actor)
            .bind_arg(&row.actor_id)
            .bind_arg(&row.actor_kind)
            .bind_arg(&row.action)
            .bind_arg(&row.subject_type)
            .bind_arg(&row.subject_id)
            .bind_arg(&row.before)
            .bind_arg(&row.after)
            .bind_arg(&row.diff)
            .bind_arg(row.created_at)
    }
}

impl<'q> Bind<'q> for sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>> {
    fn bind_arg<T: Both<'q>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, O> Bind<'q> for sqlx::query::QueryAs<'q, Sqlite, O, SqliteArguments<'q>> {
    fn bind_arg<T: Both<'q>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q> Bind<'q> for super::sqlite::DirectArguments<'q> {
    fn bind_arg<T: Both<'q>>(mut self, value: T) -> Self {
        self.add(value);
        self
    }
}

impl<'q> Bind<'q> for sqlx::query::Query<'q, Postgres, PgArguments> {
    fn bind_arg<T: Both<'q>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, O> Bind<'q> for sqlx::query::QueryAs<'q, Postgres, O, PgArguments> {
    fn bind_arg<T: Both<'q>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q> Bind<'q> for Statement<'q> {
    fn bind_arg<T: Both<'q>>(self, value: T) -> Self {
        self.bind(value)
    }
}

/// The test that a question named by its id is still pending, in an `UPDATE` that resolves it. Written plainly,
/// `workspace_id = .. AND id = .. AND status = 'pending'`, PostgreSQL's planner, on a table autovacuum has not
/// analyzed yet (a new database, or one that grew fast), rates `questions_status_deadline` (workspace, status,
/// deadline, id, ...) as good as the primary key and takes it, then walks the workspace's pending entries, the
/// dead ones of questions resolved since the last vacuum included, to find the id: 40 buffers and ~0.2 ms a resolve
/// in the HITL benchmark, against 3 through the key. A test on an expression cannot come from that index.
pub(super) const STILL_PENDING: &str = "status || '' = 'pending'";

/// A question leaving `pending`: what it becomes (`$1`..`$5`) and which question it is (`$6`, `$7`), as
/// [`Bind::bind_resolved`] binds them. Every way of resolving a question, on either database, writes with this;
/// each adds what it needs around it (its event, its audit entry, a lock on the question's run).
pub(super) static RESOLVE_PENDING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "UPDATE questions SET status = $1, response = $2, answered_by = $3, resolution = $4, resolved_at = $5, \
         updated_at = $5 WHERE workspace_id = $6 AND id = $7 AND {STILL_PENDING}"
    )
});

/// [`RESOLVE_PENDING`], returning the id of the question it resolved.
pub(super) static RESOLVE_PENDING_RETURNING: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{} RETURNING id", *RESOLVE_PENDING));

/// A pending question's change (see [`PendingQuestionChange`]): what it becomes (`$1`..`$6` and `$9`, the new
/// revision `$5`), which question it is (`$7`, `$8`), written only if it is still pending at the revision before `$5`.
pub(super) const CHANGE_PENDING_QUESTION: &str = "UPDATE questions SET assignee = $1, approvals = $2, claimed_by = $3, \
     claim_expires_at = $4, revision = $5, updated_at = $6, claimed_by_id = $9 \
     WHERE workspace_id = $7 AND id = $8 AND status = 'pending' AND revision = $5 - 1";

/// Writes an entry as a draft, without its place in the chain, for the commit to seal (PostgreSQL, migration 0010).
pub(super) const INSERT_AUDIT_DRAFT: &str = "INSERT INTO audit_drafts (id, workspace_id, actor, actor_id, actor_kind, action, \
     subject_type, subject_id, before, after, diff, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// Appends an audit entry only if the stored head is the one its `seq` (`$3`) and `prev_hash` (`$4`) follow; returns
/// its `seq` if it did.
pub(super) static APPEND_AUDIT_IF_HEAD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO audit_log ({AUDIT_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 \
         WHERE EXISTS (SELECT 1 FROM audit_heads WHERE workspace_id = $2 AND seq = $3 - 1 AND hash = $4) RETURNING seq"
    )
});

/// The highest `$N` placeholder of `sql`: how many arguments it takes.
pub(super) fn placeholder_count(sql: &str) -> usize {
    sql.split('$')
        .skip(1)
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// Principals of the tokens that authenticate: not revoked, and, for a person's token, while that person is a member of
/// its workspace whose account is enabled, with no more than the role they hold now (an admin made to approver has
/// tokens of approver at most; an `agent` token, which only asks, stays one). Callers add `AND` conditions.
pub(super) static LIVE_TOKEN_PRINCIPAL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let (token_rank, maker_rank) = (role_rank("t.role"), role_rank("m.role"));
    format!(
        "SELECT t.id, CAST('token' AS TEXT) AS kind, t.workspace_id, w.name AS workspace, t.name, \
         CASE WHEN t.maker_id IS NOT NULL AND {maker_rank} < {token_rank} THEN m.role ELSE t.role END AS role, \
         t.maker_id AS person FROM tokens t JOIN workspaces w ON w.id = t.workspace_id \
         LEFT JOIN memberships m ON m.workspace_id = t.workspace_id AND m.user_id = t.maker_id \
         LEFT JOIN users u ON u.id = t.maker_id \
         WHERE t.revoked_at IS NULL AND (t.maker_id IS NULL OR (m.user_id IS NOT NULL AND u.disabled_at IS NULL))"
    )
});

/// The rank of the role in `column` as [`holdpoint_types::Role::rank`] orders them, in SQL.
fn role_rank(column: &str) -> String {
    use holdpoint_types::Role;
    let ranks: String = std::iter::once(Role::Agent)
        .chain(Role::HUMAN)
        .map(|role| format!(" WHEN '{}' THEN {}", role.as_str(), role.rank()))
        .collect();
    format!("(CASE {column}{ranks} END)")
}

/// The id of the newest event, or 0.
pub(super) const LAST_EVENT_ID: &str = "SELECT COALESCE(MAX(id), 0) FROM events";

pub(super) async fn last_event_id<'e, E>(executor: E) -> StoreResult<i64>
where
    E: sqlx::Executor<'e>,
    i64: for<'r> sqlx::Decode<'r, E::Database> + sqlx::Type<E::Database>,
    for<'q> <E::Database as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, E::Database>,
    usize: sqlx::ColumnIndex<<E::Database as sqlx::Database>::Row>,
{
    let (id,): (i64,) = sqlx::query_as(LAST_EVENT_ID).fetch_one(executor).await?;
    Ok(id)
}

/// Tells the hub that the event with id `last` is committed, handing it over if given (then the hub is woken even
/// when a later event's commit was told first: it may be the one the hub waits for).
pub(super) fn announce(committed: &watch::Sender<Committed>, last: i64, event: Option<HubEvent>) {
    committed.send_if_modified(|current| {
        let mut changed = false;
        match event {
            Some(event) => {
                current.handed_over.insert(event);
                changed = true;
            }
            None if last > current.read_through => {
                current.read_through = last;
                changed = true;
            }
            None => {}
        }
        if last > current.last {
            current.last = last;
            changed = true;
        }
        changed
    });
}

/// `sql` with each `$N` placeholder raised by `by`, so it can follow a statement that takes `$1`..`$by`.
pub(super) fn shift_placeholders(sql: &str, by: usize) -> String {
    let mut shifted = String::with_capacity(sql.len() + 8);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        shifted.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => shifted.push_str(&(n + by).to_string()),
            Err(_) => shifted.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    shifted.push_str(rest);
    shifted
}

/// [`QuestionRow`]'s `INSERT` (`$1`..`$39`), followed by what `(open, close)` needs to make it and the event's insert
/// (`$40`..) one query.
pub(super) fn insert_question_then_event(open: &str, close: &str, insert_event: &str) -> String {
    let arguments = QUESTION_COLUMNS.split(',').count();
    format!("{open}{}{close}{}", QuestionRow::insert(), shift_placeholders(insert_event, arguments))
}

pub(super) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// Whether the database refused a statement for a unique constraint.
pub(super) fn is_unique_violation_of(err: &StoreError) -> bool {
    matches!(err, StoreError::Database(err) if is_unique_violation(err))
}

/// Inserts a server secret unless one of that name is stored (`name`, `value`, `created_at`).
pub(super) const INSERT_SERVER_SECRET: &str =
    "INSERT INTO server_secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING";
/// The stored value of a server secret (`name`).
pub(super) const SERVER_SECRET: &str = "SELECT value FROM server_secrets WHERE name = $1";

#[cfg(test)]
mod tests;
