-- Many hands (spec §14). An approval may need several people: `required_approvals` of them, from `eligible` (a role
-- or a list of usernames) when set; `approvals` (an array of {by, at, comment}) holds those given so far.
-- A claim (`claimed_by`, a username, until `claim_expires_at`) lets one person work a question undisturbed.
-- `revision` counts the changes a question takes while pending (an approval, a claim): each such write is conditional
-- on the revision its writer read, so two of them can never both build on the same state.
ALTER TABLE questions ADD COLUMN required_approvals INTEGER NOT NULL DEFAULT 1
    CHECK (required_approvals BETWEEN 1 AND 10);
ALTER TABLE questions ADD COLUMN eligible JSONB;
ALTER TABLE questions ADD COLUMN approvals JSONB NOT NULL DEFAULT '[]';
ALTER TABLE questions ADD COLUMN claimed_by TEXT;
ALTER TABLE questions ADD COLUMN claim_expires_at TIMESTAMPTZ;
ALTER TABLE questions ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;

-- Round-robin assignment gives a question to the member of a role who was given one least recently.
ALTER TABLE memberships ADD COLUMN last_assigned_at TIMESTAMPTZ;

-- Grants ("always allow"): made by an approver while approving a tool call; they let later calls of `tool_name`
-- whose arguments `matcher` allows through without asking, within their scope (`run`: `run_id`; `agent`: `agent`,
-- an agent's name or `token:<id>`; `workspace`), until `expires_at` or until revoked.
CREATE TABLE grants (
    id              UUID PRIMARY KEY,
    workspace_id    UUID NOT NULL REFERENCES workspaces (id),
    scope           TEXT NOT NULL CHECK (scope IN ('run', 'agent', 'workspace')),
    run_id          UUID,
    agent           TEXT,
    tool_name       TEXT NOT NULL,
    matcher         JSONB NOT NULL,
    created_by      TEXT NOT NULL,
    created_by_id   UUID,
    question_id     UUID,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    revoked_at      TIMESTAMPTZ,
    revoked_by      TEXT,
    uses            BIGINT NOT NULL DEFAULT 0,
    last_used_at    TIMESTAMPTZ
);
CREATE INDEX grants_live ON grants (workspace_id, tool_name) WHERE revoked_at IS NULL;
CREATE INDEX grants_listed ON grants (workspace_id, created_at);
