-- People: user accounts (argon2id passwords), their membership of workspaces with a role, sessions that belong to a
-- user or to a token, the one-time sign-in link of a first start, and a question's optional assignee.

CREATE TABLE users (
    id             BLOB PRIMARY KEY NOT NULL,
    -- Lower-case, validated by the server; the name shown as `answered_by`.
    username       TEXT NOT NULL UNIQUE,
    display_name   TEXT NOT NULL,
    -- argon2id in PHC string form; NULL until the person sets one (the first-start admin signs in by link).
    password_hash  TEXT,
    created_at     TEXT NOT NULL,
    disabled_at    TEXT
);

CREATE TABLE memberships (
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    user_id       BLOB NOT NULL REFERENCES users (id),
    -- People hold human roles only; `agent` is for tokens.
    role          TEXT NOT NULL CHECK (role IN ('viewer', 'responder', 'approver', 'admin')),
    created_at    TEXT NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- A session now belongs to a user (in one workspace) or to a token. Sessions are short-lived, so the old table is
-- dropped rather than converted: people signed in before this migration sign in once more.
DROP TABLE sessions;
CREATE TABLE sessions (
    id_hash       BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    token_id      BLOB REFERENCES tokens (id),
    user_id       BLOB REFERENCES users (id),
    csrf_token    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    CHECK ((token_id IS NULL) <> (user_id IS NULL))
);
CREATE INDEX sessions_token ON sessions (token_id) WHERE token_id IS NOT NULL;
CREATE INDEX sessions_user ON sessions (user_id) WHERE user_id IS NOT NULL;

-- One-time sign-in links (`holdpoint serve` prints one on first start). Only the code's SHA-256 is kept.
CREATE TABLE signin_links (
    code_hash     BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    user_id       BLOB NOT NULL REFERENCES users (id),
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    used_at       TEXT
);

-- Who may answer a question besides the role rules: {"user": "alice"} or {"role": "approver"} (JSON), or NULL.
ALTER TABLE questions ADD COLUMN assignee TEXT;
-- Who created a token (a user or a token id), for the token list.
ALTER TABLE tokens ADD COLUMN created_by TEXT;
