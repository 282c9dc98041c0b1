-- Indexes for the inbox over many questions (docs/benchmarks.md, "Inbox over 1 000 000 questions"). Each filter the
-- inbox offers, alone or with a status, can then walk an index in the list's order and stop after one page, where
-- it used to scan (and, for the deadline order, sort) every question of the status or the workspace.
CREATE INDEX questions_status_kind ON questions (workspace_id, status, kind, id);
CREATE INDEX questions_status_project ON questions (workspace_id, status, project, id);
CREATE INDEX questions_status_deadline ON questions (workspace_id, status, timeout_at, id);
CREATE INDEX questions_kind ON questions (workspace_id, kind, id);
CREATE INDEX questions_project ON questions (workspace_id, project, id);
