-- Every `CHECK (column IN ('a', 'b', 'c', ...))` of a table becomes `CHECK (column = 'a' OR column = 'b' OR ...)`:
-- the same condition (a NULL passes both), and the same values stored.
--
-- Why: SQLite evaluates an IN list of three or more constants by building a temporary b-tree of the list, once for
-- every statement run, and a statement checks every CHECK whose columns it writes. Asking a question built four
-- (kind, urgency, status, resolution), answering it three (status, resolution, the audit entry's actor kind): about a
-- seventh of the server's instructions per HITL cycle (docs/benchmarks.md, "2026-11-26, tenth session"). A chain of
-- comparisons costs a few instructions.
--
-- How: SQLite has no ALTER for a constraint. Its documented way to change one that does not touch what is stored
-- ("Making Other Kinds Of Table Schema Changes", sqlite.org/lang_altertable.html) is to edit the table's text in
-- `sqlite_schema`; the table's rows, pages and indexes stay as they are, so a database of any size migrates at once.
-- Each text below is exactly as the earlier migrations wrote it; `replace` leaves a table whose text differs as it was
-- (a test checks that no table keeps an IN list in a CHECK).
PRAGMA writable_schema = ON;

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (role IN (''viewer'', ''responder'', ''approver'', ''admin'', ''agent''))',
    'CHECK (role = ''viewer'' OR role = ''responder'' OR role = ''approver'' OR role = ''admin'' OR role = ''agent'')')
WHERE type = 'table' AND name = 'tokens';

UPDATE sqlite_schema SET sql = replace(replace(replace(replace(sql,
    'CHECK (kind IN (''blocking'', ''non_blocking'', ''approval'', ''error_recovery''))',
    'CHECK (kind = ''blocking'' OR kind = ''non_blocking'' OR kind = ''approval'' OR kind = ''error_recovery'')'),
    'CHECK (urgency IN (''low'', ''normal'', ''high'', ''critical''))',
    'CHECK (urgency = ''low'' OR urgency = ''normal'' OR urgency = ''high'' OR urgency = ''critical'')'),
    'CHECK (status IN (''pending'', ''answered'', ''defaulted'', ''expired'', ''cancelled''))',
    'CHECK (status = ''pending'' OR status = ''answered'' OR status = ''defaulted'' OR status = ''expired'' OR status = ''cancelled'')'),
    'CHECK (resolution IN (''human'', ''default_on_timeout'', ''policy'', ''cancelled''))',
    'CHECK (resolution = ''human'' OR resolution = ''default_on_timeout'' OR resolution = ''policy'' OR resolution = ''cancelled'')')
WHERE type = 'table' AND name = 'questions';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''queued'', ''running'', ''waiting_for_input'', ''waiting_for_approval'',
                         ''waiting_for_children'', ''paused'', ''completed'', ''failed'', ''cancelled''))',
    'CHECK (status = ''queued'' OR status = ''running'' OR status = ''waiting_for_input''
                         OR status = ''waiting_for_approval'' OR status = ''waiting_for_children'' OR status = ''paused''
                         OR status = ''completed'' OR status = ''failed'' OR status = ''cancelled'')')
WHERE type = 'table' AND name = 'runs';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (role IN (''system'', ''user'', ''assistant'', ''tool''))',
    'CHECK (role = ''system'' OR role = ''user'' OR role = ''assistant'' OR role = ''tool'')')
WHERE type = 'table' AND name = 'run_messages';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''pending_approval'', ''approved'', ''rejected'', ''running'',
                          ''completed'', ''error''))',
    'CHECK (status = ''pending_approval'' OR status = ''approved'' OR status = ''rejected'' OR status = ''running''
                          OR status = ''completed'' OR status = ''error'')')
WHERE type = 'table' AND name = 'tool_calls';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (role IN (''viewer'', ''responder'', ''approver'', ''admin''))',
    'CHECK (role = ''viewer'' OR role = ''responder'' OR role = ''approver'' OR role = ''admin'')')
WHERE type = 'table' AND name = 'memberships';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (actor_kind IN (''human'', ''token'', ''policy'', ''timeout''))',
    'CHECK (actor_kind = ''human'' OR actor_kind = ''token'' OR actor_kind = ''policy'' OR actor_kind = ''timeout'')')
WHERE type = 'table' AND name = 'audit_log';

-- Off, and this connection reads the schema again.
PRAGMA writable_schema = RESET;

-- Other connections to the file read the schema again when its version changes, which any schema statement does.
CREATE TABLE schema_version_step (unused INTEGER);
DROP TABLE schema_version_step;
