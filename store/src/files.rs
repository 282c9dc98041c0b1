//! Uploaded files as stored: their rows (the bytes live in an object store, apart), the SQL both
//! backends use, and the [`FileStore`] trait with its one implementation for both. A file is taken by the question
//! whose answer references it inside the answer's own write ([`attach_files_in`]), so an answer is never stored
//! referencing a file the worker may still remove.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::table_row;
use super::{StoreError, StoreResult};

table_row!(FILE_COLUMNS = FileRow in "files": id, workspace_id, uploaded_by, name, media_type, size, sha256, created_at,
    question_id);
/// Gives file `$3` of workspace `$2`, uploaded by `$4`, to question `$1`, if no question has it yet.
const ATTACH_FILE: &str = "UPDATE files SET question_id = $1 \
     WHERE workspace_id = $2 AND id = $3 AND uploaded_by = $4 AND question_id IS NULL";
/// Removes file `$2` of workspace `$1` if it is still unreferenced and was uploaded before `$3`.
const DELETE_UNREFERENCED_FILE: &str =
    "DELETE FROM files WHERE workspace_id = $1 AND id = $2 AND question_id IS NULL AND created_at < $3";

/// An uploaded file.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FileRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    /// The token or person that uploaded it: the only one whose answer may reference it.
    pub uploaded_by: Uuid,
    pub name: String,
    pub media_type: String,
    /// Its length in bytes.
    pub size: i64,
    /// The SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
    pub created_at: DateTime<Utc>,
    /// The question whose answer references it; `None` until an answer does.
    pub question_id: Option<Uuid>,
}

/// A file an answer references, to be taken by its question in the answer's write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileClaim {
    pub file_id: Uuid,
    /// Who must have uploaded it: the answerer.
    pub uploaded_by: Uuid,
}

/// Uploaded files. Implemented by both stores.
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Stores a new file's row (its bytes are stored first).
    async fn insert_file(&self, row: &FileRow) -> StoreResult<()>;
    /// The file with this id in the workspace.
    async fn file(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<FileRow>>;
    /// Up to `limit` files of any workspace that no answer references and that were uploaded before `before`,
    /// oldest first.
    async fn unreferenced_files(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<Vec<FileRow>>;
    /// Removes a file's row if it is still unreferenced and was uploaded before `before`: `false` (nothing removed)
    /// if an answer took it meanwhile, or it is gone.
    async fn delete_unreferenced_file(&self, workspace_id: Uuid, id: Uuid, before: DateTime<Utc>) -> StoreResult<bool>;
}

#[async_trait]
impl<B: SqlBackend> FileStore for B {
    async fn insert_file(&self, row: &FileRow) -> StoreResult<()> {
        let insert = Statement::insert(row);
        self.write_audited(insert, None).await?;
        Ok(())
    }

    async fn file(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<FileRow>> {
        self.read().fetch_optional(Statement::by_id(FILE_COLUMNS, "files", workspace_id, id)).await
    }

    async fn unreferenced_files(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<Vec<FileRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {FILE_COLUMNS} FROM files WHERE question_id IS NULL AND created_at < $1 \
                     ORDER BY created_at LIMIT $2"
                ))
                .bind(before)
                .bind(limit),
            )
            .await
    }

    async fn delete_unreferenced_file(&self, workspace_id: Uuid, id: Uuid, before: DateTime<Utc>) -> StoreResult<bool> {
        self.write_audited(Statement::new(DELETE_UNREFERENCED_FILE).bind(workspace_id).bind(id).bind(before), None)
            .await
    }
}

/// Gives each of `claims` to question `question_id` of `workspace_id` inside `write` (the answer's): `Err` naming
/// the first file that is gone, was uploaded by someone else or that another question has already taken. The
/// caller then rolls the whole write back.
pub(crate) async fn attach_files_in<W: Sql>(
    write: &mut W,
    workspace_id: Uuid,
    question_id: Uuid,
    claims: &[FileClaim],
) -> StoreResult<()> {
    for claim in claims {
        let attached = write
            .execute(
                Statement::new(ATTACH_FILE)
                    .bind(question_id)
                    .bind(workspace_id)
                    .bind(claim.file_id)
                    .bind(claim.uploaded_by),
            )
            .await?;
        if attached != 1 {
            return Err(StoreError::FileUnavailable(claim.file_id));
        }
    }
    Ok(())
}
