-- A person's notification of a question (spec §11): one per question and member, written in the question's
-- transaction. Its action status is the question's own (`pending` while the question is, `done` once anyone resolved
-- it), so it is read from the question, never kept twice. It takes the place of the foundation's placeholder table,
-- which nothing ever wrote.
DROP INDEX notifications_recipient;
DROP TABLE notifications;
CREATE TABLE notifications (
    id            BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    question_id   BLOB NOT NULL REFERENCES questions (id),
    user_id       BLOB NOT NULL REFERENCES users (id),
    created_at    TEXT NOT NULL,
    read_at       TEXT,
    UNIQUE (question_id, user_id)
);
-- A person's list, newest first; the unread count reads the same index.
CREATE INDEX notifications_of_a_person ON notifications (workspace_id, user_id, created_at);

-- The outbox (spec §11, §12): one message to one channel, written in the transaction of the change that causes it,
-- claimed by one worker at a time (`claimed_until`), retried with backoff until sent or given up.
CREATE TABLE deliveries (
    id               BLOB PRIMARY KEY NOT NULL,
    workspace_id     BLOB NOT NULL REFERENCES workspaces (id),
    question_id      BLOB NOT NULL REFERENCES questions (id),
    user_id          BLOB NOT NULL REFERENCES users (id),
    channel          TEXT NOT NULL CHECK (channel = 'email' OR channel = 'slack' OR channel = 'push'),
    -- Where it goes, as the recipient's membership said when the question was asked.
    address          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status = 'queued' OR status = 'retrying' OR status = 'sent' OR status = 'failed'),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT NOT NULL,
    claimed_until    TEXT,
    last_error       TEXT,
    sent_at          TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    UNIQUE (question_id, user_id, channel)
);
-- What the outbox's worker looks for: deliveries still to send, soonest first.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'queued' OR status = 'retrying';
