-- An audit entry joins its workspace's chain when its transaction commits, not when it is written.
--
-- An entry's `seq`, `prev_hash` and `hash` depend on the entry before it, so appends to one chain take turns. They
-- took them by claiming the chain's head row (an upsert that locks it) in the middle of the transaction, and held
-- it over every later statement, each round trip between the server and the database, the event log's lock and the
-- commit's flush: with many answers at once in one workspace, they queued on that row (docs/benchmarks.md,
-- "Audit chain sealed at commit"). Now the transaction writes a draft of the entry, without its place in the chain,
-- and a deferred trigger seals it inside COMMIT, as migration 0008 numbers events: the head is held over that
-- trigger and the flush only.
--
-- The trigger takes the event log's advisory lock before the head row, so every committing transaction takes the
-- two in that order, and whoever holds the lock waits for nothing a transaction without it holds: nothing else
-- locks the head row any more. No reader can see a draft: it is sealed and removed before its transaction becomes
-- visible.

CREATE TABLE audit_drafts (
    id            UUID PRIMARY KEY NOT NULL,
    workspace_id  UUID NOT NULL REFERENCES workspaces (id),
    actor         TEXT NOT NULL,
    actor_id      TEXT,
    actor_kind    TEXT NOT NULL,
    action        TEXT NOT NULL,
    subject_type  TEXT NOT NULL,
    subject_id    TEXT,
    before        TEXT,
    after         TEXT,
    diff          TEXT,
    created_at    TIMESTAMPTZ NOT NULL
);

-- One field of an entry's hashed preimage, as `holdpoint::audit::preimage` writes it: a netstring of the field's
-- UTF-8 bytes (`<length>:<bytes>,`), or `~,` for NULL.
CREATE FUNCTION audit_netstring(field TEXT) RETURNS TEXT IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE WHEN field IS NULL THEN '~,' ELSE octet_length(convert_to(field, 'UTF8')) || ':' || field || ',' END
$$;

CREATE FUNCTION audit_seal_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head_seq BIGINT;
    head_hash TEXT;
    preimage TEXT;
BEGIN
    PERFORM pg_advisory_xact_lock(7262011);
    INSERT INTO audit_heads (workspace_id, seq, hash)
        VALUES (NEW.workspace_id, 0, '0000000000000000000000000000000000000000000000000000000000000000')
        ON CONFLICT (workspace_id) DO UPDATE SET seq = audit_heads.seq
        RETURNING seq, hash INTO head_seq, head_hash;
    -- The fields and their order are `holdpoint::audit::preimage`'s (format `holdpoint-audit-v1`); the server
    -- checks every stored hash against its own computation (`holdpoint audit verify`, and the tests).
    preimage := audit_netstring('holdpoint-audit-v1')
        || audit_netstring(NEW.workspace_id::text)
        || audit_netstring((head_seq + 1)::text)
        || audit_netstring(NEW.id::text)
        || audit_netstring(to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
        || audit_netstring(NEW.actor_kind)
        || audit_netstring(NEW.actor)
        || audit_netstring(NEW.actor_id)
        || audit_netstring(NEW.action)
        || audit_netstring(NEW.subject_type)
        || audit_netstring(NEW.subject_id)
        || audit_netstring(NEW.before)
        || audit_netstring(NEW.after)
        || audit_netstring(NEW.diff)
        || audit_netstring(head_hash);
    -- The entry's insert moves the head (migration 0007).
    INSERT INTO audit_log (id, workspace_id, seq, prev_hash, hash, actor, actor_id, actor_kind, action, subject_type,
                           subject_id, before, after, diff, created_at)
        VALUES (NEW.id, NEW.workspace_id, head_seq + 1, head_hash, encode(sha256(convert_to(preimage, 'UTF8')), 'hex'),
                NEW.actor, NEW.actor_id, NEW.actor_kind, NEW.action, NEW.subject_type, NEW.subject_id, NEW.before,
                NEW.after, NEW.diff, NEW.created_at);
    DELETE FROM audit_drafts WHERE id = NEW.id;
    RETURN NULL;
END;
$$;

-- Deferred row triggers fire at COMMIT in the order the rows were inserted, so a transaction's entries keep their
-- order in the chain.
CREATE CONSTRAINT TRIGGER audit_sealed_at_commit AFTER INSERT ON audit_drafts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION audit_seal_at_commit();
