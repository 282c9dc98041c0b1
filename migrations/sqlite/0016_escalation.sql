-- Escalation (spec §11): a workspace's policy per kind and urgency says when the people a question reached are
-- reminded and when it is handed to someone else (`escalate_to`, an assignee as JSON). A question takes its plan when
-- it is asked (`questions.escalation`, JSON, with each step's time and when it was taken), so a later change of policy
-- never rewrites what people were told; `next_escalation_at` is when its next step is due, for the worker.
CREATE TABLE escalation_policies (
    workspace_id            BLOB NOT NULL REFERENCES workspaces (id),
    kind                    TEXT NOT NULL CHECK (kind = 'blocking' OR kind = 'non_blocking' OR kind = 'approval' OR kind = 'error_recovery'),
    urgency                 TEXT NOT NULL CHECK (urgency = 'low' OR urgency = 'normal' OR urgency = 'high' OR urgency = 'critical'),
    remind_after_seconds    INTEGER,
    escalate_after_seconds  INTEGER,
    escalate_to             TEXT,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (workspace_id, kind, urgency)
);
ALTER TABLE questions ADD COLUMN escalation TEXT;
ALTER TABLE questions ADD COLUMN next_escalation_at TEXT;
CREATE INDEX questions_escalation_due ON questions (next_escalation_at)
    WHERE status = 'pending' AND next_escalation_at IS NOT NULL;

-- A question reaches a person on a channel once per cause (`asked`, `reminded`, `escalated`): the outbox's key gains
-- the cause. SQLite cannot change a table's UNIQUE constraint, so the table is rebuilt with its rows and indexes.
CREATE TABLE deliveries_by_cause (
    id               BLOB PRIMARY KEY NOT NULL,
    workspace_id     BLOB NOT NULL REFERENCES workspaces (id),
    question_id      BLOB NOT NULL REFERENCES questions (id),
    user_id          BLOB NOT NULL REFERENCES users (id),
    channel          TEXT NOT NULL CHECK (channel = 'email' OR channel = 'slack' OR channel = 'push'),
    address          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status = 'queued' OR status = 'retrying' OR status = 'sent' OR status = 'failed'),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT NOT NULL,
    claimed_until    TEXT,
    last_error       TEXT,
    sent_at          TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    reference        TEXT,
    followed_up_at   TEXT,
    cause            TEXT NOT NULL DEFAULT 'asked' CHECK (cause = 'asked' OR cause = 'reminded' OR cause = 'escalated'),
    UNIQUE (question_id, user_id, channel, cause)
);
INSERT INTO deliveries_by_cause (id, workspace_id, question_id, user_id, channel, address, status, attempts,
    next_attempt_at, claimed_until, last_error, sent_at, created_at, updated_at, reference, followed_up_at, cause)
    SELECT id, workspace_id, question_id, user_id, channel, address, status, attempts, next_attempt_at, claimed_until,
        last_error, sent_at, created_at, updated_at, reference, followed_up_at, 'asked' FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_by_cause RENAME TO deliveries;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'queued' OR status = 'retrying';
CREATE INDEX deliveries_to_follow_up ON deliveries (next_attempt_at)
    WHERE status = 'sent' AND followed_up_at IS NULL AND channel <> 'email';
