-- Who may link which identity (docs/security.md, "Identities and workspaces").
--
-- An existing account joins another workspace only by an invitation its owner accepts: until then the invitation
-- is all there is, and it gives no access.
CREATE TABLE invitations (
    id            BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    user_id       BLOB NOT NULL REFERENCES users (id),
    role          TEXT NOT NULL CHECK (role = 'viewer' OR role = 'responder' OR role = 'approver' OR role = 'admin'),
    -- Who invited them (a username or a token's name), as the invited person is shown it.
    invited_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (workspace_id, user_id)
);
CREATE INDEX invitations_user ON invitations (user_id);

-- The addresses an account proved it receives mail at (a link sent there, confirmed by the account's own session):
-- the only addresses single sign-on matches. Lower-cased; one account per address.
CREATE TABLE verified_emails (
    email        TEXT PRIMARY KEY NOT NULL,
    user_id      BLOB NOT NULL REFERENCES users (id),
    verified_at  TEXT NOT NULL
);
CREATE INDEX verified_emails_user ON verified_emails (user_id);

-- Verification links sent and not yet confirmed; only the code's SHA-256 is kept.
CREATE TABLE email_verifications (
    code_hash   BLOB PRIMARY KEY NOT NULL,
    user_id     BLOB NOT NULL REFERENCES users (id),
    email       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE INDEX email_verifications_user ON email_verifications (user_id);

-- People an admin removed from a workspace (with the membership's address, lower-cased): single sign-on does not
-- provision them into it again. Adding them again drops the row.
CREATE TABLE member_removals (
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    user_id       BLOB NOT NULL REFERENCES users (id),
    email         TEXT,
    removed_at    TEXT NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX member_removals_email ON member_removals (workspace_id, email);

-- Whether a member's Slack id is proven (set by an admin, or found by a verified address): only proven ids map
-- Slack clicks to the member and receive their messages, and a workspace holds each proven id once. Ids stored
-- before this column existed were set without proof: they start unproven, and an admin confirms them.
ALTER TABLE memberships ADD COLUMN slack_user_id_proven INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX memberships_proven_slack_id ON memberships (workspace_id, slack_user_id)
    WHERE slack_user_id_proven = 1;
