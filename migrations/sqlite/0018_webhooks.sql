-- Webhooks (spec §12). A workspace's subscriptions: where its events of the listed types are sent, signed with the
-- endpoint's own secret (Standard Webhooks: `whsec_` + base64, kept to sign with, shown once). An endpoint that
-- answered `410 Gone` is disabled (`disabled_at`, with why) until an admin enables it again.
CREATE TABLE webhooks (
    id               BLOB PRIMARY KEY NOT NULL,
    workspace_id     BLOB NOT NULL REFERENCES workspaces (id),
    url              TEXT NOT NULL,
    events           TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    secret           TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    disabled_at      TEXT,
    disabled_reason  TEXT
);
CREATE INDEX webhooks_of_a_workspace ON webhooks (workspace_id, created_at);

-- The secret a workspace signs the events it sends to questions' own `callback_url`s with.
CREATE TABLE callback_secrets (
    workspace_id  BLOB PRIMARY KEY NOT NULL REFERENCES workspaces (id),
    secret        TEXT NOT NULL,
    created_at    TEXT NOT NULL
);

-- A question may name a URL its own events are sent to.
ALTER TABLE questions ADD COLUMN callback_url TEXT;

-- One event (or test message) to one endpoint: a subscription (`webhook_id`, and `endpoint` its id) or a question's
-- callback URL (`endpoint` the URL). Sent in `sequence` order per endpoint (the event's id), at least once: each is
-- claimed by one worker at a time and retried with backoff until its endpoint takes it or three days have passed.
-- `message_id` is the `webhook-id` header, the same on every attempt; `body` is fixed when the event is queued.
CREATE TABLE webhook_deliveries (
    id               BLOB PRIMARY KEY NOT NULL,
    workspace_id     BLOB NOT NULL REFERENCES workspaces (id),
    webhook_id       BLOB REFERENCES webhooks (id) ON DELETE CASCADE,
    endpoint         TEXT NOT NULL,
    url              TEXT NOT NULL,
    sequence         INTEGER NOT NULL,
    message_id       TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    body             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status = 'queued' OR status = 'retrying' OR status = 'sent' OR status = 'failed'),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT NOT NULL,
    claimed_until    TEXT,
    last_error       TEXT,
    response_status  INTEGER,
    sent_at          TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    -- When it is given up if its endpoint has not taken it: three days after it was queued (or queued again).
    give_up_at       TEXT NOT NULL,
    UNIQUE (endpoint, message_id)
);
-- Each endpoint's queue, oldest first: its head is the one to send.
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (endpoint, sequence)
    WHERE status = 'queued' OR status = 'retrying';
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'queued' OR status = 'retrying';
CREATE INDEX webhook_deliveries_of_a_webhook ON webhook_deliveries (webhook_id, created_at);

-- How far the event log has been queued for the endpoints: events after it are read again after a restart.
CREATE TABLE webhook_cursor (
    id        INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    event_id  INTEGER NOT NULL
);
