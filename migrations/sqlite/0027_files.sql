-- Files uploaded for answers (spec §17): what `POST /api/v1/files` stored (the bytes live in the object store under
-- `<workspace_id>/<id>`), by whom, and the question whose answer references it. `question_id` is NULL until an
-- answer takes the file, in the same write as the answer; files still unreferenced a day after their upload are
-- removed, bytes and row, by the files worker.
CREATE TABLE files (
    id            BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    uploaded_by   BLOB NOT NULL,
    name          TEXT NOT NULL,
    media_type    TEXT NOT NULL,
    size          INTEGER NOT NULL CHECK (size >= 0),
    sha256        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    question_id   BLOB
);
-- What the worker looks for: unreferenced files, oldest first.
CREATE INDEX files_unreferenced ON files (created_at) WHERE question_id IS NULL;
