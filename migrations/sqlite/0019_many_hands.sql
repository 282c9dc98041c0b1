-- Many hands (spec §14). An approval may need several people: `required_approvals` of them, from `eligible` (a role
-- or a list of usernames, as JSON) when set; `approvals` (a JSON array of {by, at, comment}) holds those given so far.
-- A claim (`claimed_by`, a username, until `claim_expires_at`) lets one person work a question undisturbed.
-- `revision` counts the changes a question takes while pending (an approval, a claim): each such write is conditional
-- on the revision its writer read, so two of them can never both build on the same state.
ALTER TABLE questions ADD COLUMN required_approvals INTEGER NOT NULL DEFAULT 1
    CHECK (required_approvals BETWEEN 1 AND 10);
ALTER TABLE questions ADD COLUMN eligible TEXT;
ALTER TABLE questions ADD COLUMN approvals TEXT NOT NULL DEFAULT '[]';
ALTER TABLE questions ADD COLUMN claimed_by TEXT;
ALTER TABLE questions ADD COLUMN claim_expires_at TEXT;
ALTER TABLE questions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;

-- Round-robin assignment gives a question to the member of a role who was given one least recently.
ALTER TABLE memberships ADD COLUMN last_assigned_at TEXT;

-- Grants ("always allow"): made by an approver while approving a tool call; they let later calls of `tool_name`
-- whose arguments `matcher` (JSON) allows through without asking, within their scope (`run`: `run_id`; `agent`:
-- `agent`, an agent's name or `token:<id>`; `workspace`), until `expires_at` or until revoked.
CREATE TABLE grants (
    id              BLOB PRIMARY KEY NOT NULL,
    workspace_id    BLOB NOT NULL REFERENCES workspaces (id),
    scope           TEXT NOT NULL CHECK (scope = 'run' OR scope = 'agent' OR scope = 'workspace'),
    run_id          BLOB,
    agent           TEXT,
    tool_name       TEXT NOT NULL,
    matcher         TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_by_id   BLOB,
    question_id     BLOB,
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    revoked_at      TEXT,
    revoked_by      TEXT,
    uses            INTEGER NOT NULL DEFAULT 0,
    last_used_at    TEXT
);
CREATE INDEX grants_live ON grants (workspace_id, tool_name) WHERE revoked_at IS NULL;
CREATE INDEX grants_listed ON grants (workspace_id, created_at);
