-- A person's notification of a question (spec §11): one per question and member, written in the question's
-- transaction. Its action status is the question's own (`pending` while the question is, `done` once anyone resolved
-- it), so it is read from the question, never kept twice. It takes the place of the foundation's placeholder table,
-- which nothing ever wrote.
DROP INDEX notifications_recipient;
DROP TABLE notifications;
CREATE TABLE notifications (
    id            UUID PRIMARY KEY NOT NULL,
    workspace_id  UUID NOT NULL REFERENCES workspaces (id),
    question_id   UUID NOT NULL REFERENCES questions (id),
    user_id       UUID NOT NULL REFERENCES users (id),
    created_at    TIMESTAMPTZ NOT NULL,
    read_at       TIMESTAMPTZ,
    UNIQUE (question_id, user_id)
);
-- A person's list, newest first; the unread count reads the same index.
CREATE INDEX notifications_of_a_person ON notifications (workspace_id, user_id, created_at);

-- The outbox (spec §11, §12): one message to one channel, written in the transaction of the change that causes it,
-- claimed by one worker at a time (`FOR UPDATE SKIP LOCKED`, then `claimed_until`), retried with backoff until sent or
-- given up.
CREATE TABLE deliveries (
    id               UUID PRIMARY KEY NOT NULL,
    workspace_id     UUID NOT NULL REFERENCES workspaces (id),
    question_id      UUID NOT NULL REFERENCES questions (id),
    user_id          UUID NOT NULL REFERENCES users (id),
    channel          TEXT NOT NULL CHECK (channel IN ('email', 'slack', 'push')),
    -- Where it goes, as the recipient's membership said when the question was asked.
    address          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('queued', 'retrying', 'sent', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    claimed_until    TIMESTAMPTZ,
    last_error       TEXT,
    sent_at          TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (question_id, user_id, channel)
);
-- What the outbox's worker looks for: deliveries still to send, soonest first.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status IN ('queued', 'retrying');
