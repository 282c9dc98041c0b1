-- The audit log (issue 7): every decision and every security-relevant action, appended to a hash chain of its
-- workspace. Entry `seq` N stores the hash of entry N-1 (`prev_hash`; 64 zeros for the first) and its own `hash`,
-- SHA-256 over `prev_hash` and the entry's fields as docs/decisions.md ("Audit log") defines, so an altered, removed
-- or reordered entry breaks the chain where it is. `before`, `after` and `diff` are JSON kept as TEXT, not jsonb:
-- jsonb would reorder keys and renormalise numbers, and the hash covers the exact text.

CREATE TABLE audit_log (
    id            UUID PRIMARY KEY NOT NULL,
    workspace_id  UUID NOT NULL REFERENCES workspaces (id),
    seq           BIGINT NOT NULL CHECK (seq >= 1),
    prev_hash     TEXT NOT NULL,
    hash          TEXT NOT NULL,
    actor         TEXT NOT NULL,
    actor_id      TEXT,
    actor_kind    TEXT NOT NULL CHECK (actor_kind IN ('human', 'token', 'policy', 'timeout')),
    action        TEXT NOT NULL,
    subject_type  TEXT NOT NULL,
    subject_id    TEXT,
    before        TEXT,
    after         TEXT,
    diff          TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    UNIQUE (workspace_id, seq)
);
CREATE INDEX audit_log_created ON audit_log (workspace_id, created_at);

-- The newest entry of each workspace's chain. Appends lock this row (`FOR UPDATE`) in their transaction, so two
-- instances can never both append seq N and fork the chain; `holdpoint audit verify` also checks that the log still
-- ends where the head says.
CREATE TABLE audit_heads (
    workspace_id  UUID PRIMARY KEY NOT NULL REFERENCES workspaces (id),
    seq           BIGINT NOT NULL,
    hash          TEXT NOT NULL
);

-- Append-only: the server never changes or removes an entry; this stops anyone doing it by mistake. (Someone who
-- drops it on purpose is what the hash chain is for.)
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$;
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
