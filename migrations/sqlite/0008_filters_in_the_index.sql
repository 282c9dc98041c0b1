-- The inbox's filter indexes carry each question's kind and urgency after the columns they are walked by.
--
-- A page filtered on a column its index does not lead with walks the index in the list's order and tests the
-- other filters on each entry until it has a page. When they were not in the index, each entry cost a read of the
-- question's row: "critical error recoveries, any status" read about 1 000 rows for a page of 50, since 1 error
-- recovery in 20 is critical. With kind and urgency in every filter index, SQLite tests them on the index entry and
-- reads only the rows that match (docs/benchmarks.md, "Inbox over 1 000 000 questions").
--
-- Kind and urgency never change once a question is asked, so no update touches these indexes for them, and a
-- write still maintains the same number of index entries; only each entry is a few bytes longer.
DROP INDEX questions_workspace_status;
CREATE INDEX questions_workspace_status ON questions (workspace_id, status, id, kind, urgency);
DROP INDEX questions_workspace_created;
CREATE INDEX questions_workspace_created ON questions (workspace_id, id, kind, urgency);
DROP INDEX questions_status_kind;
CREATE INDEX questions_status_kind ON questions (workspace_id, status, kind, id, urgency);
DROP INDEX questions_status_project;
CREATE INDEX questions_status_project ON questions (workspace_id, status, project, id, kind, urgency);
DROP INDEX questions_status_deadline;
CREATE INDEX questions_status_deadline ON questions (workspace_id, status, timeout_at, id, kind, urgency);
DROP INDEX questions_kind;
CREATE INDEX questions_kind ON questions (workspace_id, kind, id, urgency);
DROP INDEX questions_project;
CREATE INDEX questions_project ON questions (workspace_id, project, id, kind, urgency);
