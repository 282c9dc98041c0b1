-- Holdpoint schema, SQLite dialect. Append-only: never edit a migration once it has shipped; add a new one.
-- UUIDs are 16-byte BLOBs (UUIDv7, so they sort by creation time); timestamps are RFC 3339 UTC text;
-- JSON is text.

CREATE TABLE workspaces (
    id          BLOB PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL
);

CREATE TABLE tokens (
    id            BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    name          TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('viewer', 'responder', 'approver', 'admin', 'agent')),
    -- SHA-256 of the secret; the secret itself is shown once and never stored.
    secret_hash   BLOB NOT NULL UNIQUE,
    created_at    TEXT NOT NULL,
    revoked_at    TEXT
);
CREATE INDEX tokens_workspace ON tokens (workspace_id);

CREATE TABLE sessions (
    id_hash       BLOB PRIMARY KEY NOT NULL,
    token_id      BLOB NOT NULL REFERENCES tokens (id),
    csrf_token    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id);

CREATE TABLE questions (
    id                BLOB PRIMARY KEY NOT NULL,
    workspace_id      BLOB NOT NULL REFERENCES workspaces (id),
    project           TEXT,
    run_id            BLOB,
    tool_call_id      TEXT,
    parent_run_ids    TEXT NOT NULL DEFAULT '[]',
    kind              TEXT NOT NULL CHECK (kind IN ('blocking', 'non_blocking', 'approval', 'error_recovery')),
    response_type     TEXT NOT NULL,
    title             TEXT NOT NULL,
    body              TEXT NOT NULL DEFAULT '',
    options           TEXT NOT NULL DEFAULT '[]',
    fields            TEXT NOT NULL DEFAULT '[]',
    action            TEXT,
    allow_edit        BOOLEAN NOT NULL DEFAULT FALSE,
    context           TEXT NOT NULL DEFAULT '{}',
    urgency           TEXT NOT NULL CHECK (urgency IN ('low', 'normal', 'high', 'critical')),
    timeout_at        TEXT,
    default_response  TEXT,
    status            TEXT NOT NULL CHECK (status IN ('pending', 'answered', 'defaulted', 'expired', 'cancelled')),
    response          TEXT,
    answered_by       TEXT,
    resolution        TEXT CHECK (resolution IN ('human', 'default_on_timeout', 'policy', 'cancelled')),
    created_by        BLOB,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    resolved_at       TEXT
);
CREATE INDEX questions_workspace_status ON questions (workspace_id, status, id);
CREATE INDEX questions_workspace_created ON questions (workspace_id, id);
CREATE INDEX questions_run ON questions (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX questions_deadline ON questions (timeout_at) WHERE status = 'pending' AND timeout_at IS NOT NULL;

-- A retry of a creation request with the same key returns the first result.
CREATE TABLE idempotency_keys (
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    key           TEXT NOT NULL,
    scope         TEXT NOT NULL,
    -- Hash of the request body, so a reuse of a key with a different body is refused.
    request_hash  BLOB NOT NULL,
    resource_id   BLOB NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (workspace_id, scope, key)
);

-- The append-only log of every state change (spec §2). Its id is the SSE `id:`; it only ever grows.
CREATE TABLE events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    event_type    TEXT NOT NULL,
    project       TEXT,
    run_id        BLOB,
    question_id   BLOB,
    data          TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX events_workspace ON events (workspace_id, id);

CREATE TABLE notifications (
    id            BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    -- The person (later: user id) or token the entry is for.
    recipient     TEXT NOT NULL,
    event_id      INTEGER NOT NULL REFERENCES events (id),
    question_id   BLOB,
    title         TEXT NOT NULL,
    read_at       TEXT,
    action_status TEXT,
    created_at    TEXT NOT NULL
);
CREATE INDEX notifications_recipient ON notifications (workspace_id, recipient, read_at, id);
