-- The browsers a member subscribed to web pushes (spec §11), as each browser's PushSubscription gives them: its push
-- service endpoint and its keys. Kept per membership, like the member's other addresses; a browser subscribed again
-- replaces its keys.
CREATE TABLE push_subscriptions (
    id            UUID PRIMARY KEY NOT NULL,
    workspace_id  UUID NOT NULL REFERENCES workspaces (id),
    user_id       UUID NOT NULL REFERENCES users (id),
    endpoint      TEXT NOT NULL,
    p256dh        TEXT NOT NULL,
    auth          TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    UNIQUE (workspace_id, user_id, endpoint)
);
