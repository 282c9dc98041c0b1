//! Changes of a pending question that leave it pending or complete it — an approval of a quorum, a claim, a hand-over
//! to a stand-in. Each is decided whole (the row as it leaves the change, its event and its audit entry, or the
//! transition out of `pending` the last approval completes) and handed to the store, which writes it only if no other
//! change of the question was written since it was read. A change that finds itself second reads the question again
//! and decides again: another approver's approval may have made this one the last, or the question may have left
//! `pending`.

use chrono::{DateTime, SubsecRound, Utc};
use holdpoint_types::{EventType, QuestionStatus};
use uuid::Uuid;

use crate::error::AppError;
use crate::store::{NewEvent, QuestionCursor, QuestionFilter, QuestionRow, Store};

/// How many times a change is decided again after another change of the same question was written first. Each
/// retry means another person's change was stored, so with at most ten approvals needed, a retry budget this size
/// is only spent by a question changing faster than anyone could act on it.
pub(super) const ATTEMPTS: usize = 64;

/// The event of a change that leaves `after` (of workspace `workspace`) pending.
pub(super) fn pending_event(after: &QuestionRow, event_type: EventType, workspace: &str) -> Result<NewEvent, AppError> {
    let question = crate::store::event_data(&after.to_question(workspace)?)?;
    Ok(NewEvent {
        workspace_id: after.workspace_id,
        event_type,
        project: after.project.clone(),
        run_id: after.run_id,
        question_id: Some(after.id),
        data: crate::store::question_event_data_around(&question)?,
        created_at: after.updated_at,
    })
}

/// The time a change of `row` is stamped with: now, at the databases' precision, never before its last change.
pub(super) fn change_time(row: &QuestionRow) -> DateTime<Utc> {
    crate::store::now().max(row.updated_at).trunc_subsecs(6)
}

pub(super) async fn reread(store: &dyn Store, row: &QuestionRow) -> Result<QuestionRow, AppError> {
    store.question(row.workspace_id, row.id).await?.ok_or(AppError::NotFound("question"))
}

pub(super) fn still_changing() -> AppError {
    AppError::Conflict {
        message: "the question kept changing while this change was being recorded; try again".into(),
        details: None,
    }
}

/// A workspace's pending questions, read a page at a time (newest first) so that a change made to each of them — a
/// member leaving, going away, losing a role — never holds them all at once.
pub(super) struct PendingPages {
    workspace_id: Uuid,
    filter: QuestionFilter,
    read_all: bool,
}

impl PendingPages {
    /// How many pending questions one page holds.
    const PAGE: u32 = 500;

    pub(super) fn of(workspace_id: Uuid) -> Self {
        let filter = QuestionFilter { status: Some(QuestionStatus::Pending), limit: Self::PAGE, ..Default::default() };
        Self { workspace_id, filter, read_all: false }
    }

    /// The next page; `None` once every pending question has been read.
    pub(super) async fn next(&mut self, store: &dyn Store) -> Result<Option<Vec<QuestionRow>>, AppError> {
        if self.read_all {
            return Ok(None);
        }
        let page = store.list_questions(self.workspace_id, &self.filter).await?;
        self.read_all = page.len() < self.filter.limit as usize;
        let Some(last) = page.last() else { return Ok(None) };
        self.filter.after = Some(QuestionCursor::Created { id: last.id });
        Ok(Some(page))
    }
}
