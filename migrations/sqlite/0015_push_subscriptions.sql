-- The browsers a member subscribed to web pushes (spec §11), as each browser's PushSubscription gives them: its push
-- service endpoint and its keys. Kept per membership, like the member's other addresses; a browser subscribed again
-- replaces its keys.
CREATE TABLE push_subscriptions (
    id            BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    user_id       BLOB NOT NULL REFERENCES users (id),
    endpoint      TEXT NOT NULL,
    p256dh        TEXT NOT NULL,
    auth          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (workspace_id, user_id, endpoint)
);
