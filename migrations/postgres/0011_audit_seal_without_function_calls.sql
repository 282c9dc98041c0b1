-- Sealing an audit entry at commit (migration 0010) spends less, inside the event log's lock.
--
-- `perf` over the 16-agent HITL benchmark put 43 % of PostgreSQL's CPU in the deferred triggers that run inside
-- COMMIT, and half of that in `audit_netstring`: a SQL function called fifteen times a seal, which the planner
-- could not inline (its argument is used three times) and which PostgreSQL parsed and planned again on every call.
-- All of it ran while the committing transaction held the event log's lock, so every other commit waited on it.
-- The netstrings are now written inline (`||` with a NULL is NULL, so a missing field falls through `COALESCE` to
-- `~,`), and the head is read and locked with a plain `SELECT ... FOR UPDATE` instead of an upsert that wrote a new
-- version of its row on every seal only to lock it. The preimage is unchanged (`holdpoint::audit::preimage`,
-- format `holdpoint-audit-v1`), so every stored hash still verifies.

CREATE OR REPLACE FUNCTION audit_seal_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head_seq BIGINT;
    head_hash TEXT;
    seq_text TEXT;
    time_text TEXT;
BEGIN
    PERFORM pg_advisory_xact_lock(7262011);
    SELECT seq, hash INTO head_seq, head_hash FROM audit_heads WHERE workspace_id = NEW.workspace_id FOR UPDATE;
    IF NOT FOUND THEN
        head_seq := 0;
        head_hash := '0000000000000000000000000000000000000000000000000000000000000000';
        INSERT INTO audit_heads (workspace_id, seq, hash) VALUES (NEW.workspace_id, head_seq, head_hash);
    END IF;
    seq_text := (head_seq + 1)::text;
    time_text := to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    -- The entry's insert moves the head (migration 0007).
    INSERT INTO audit_log (id, workspace_id, seq, prev_hash, hash, actor, actor_id, actor_kind, action, subject_type,
                           subject_id, before, after, diff, created_at)
        VALUES (NEW.id, NEW.workspace_id, head_seq + 1, head_hash, encode(sha256(convert_to(
                    '18:holdpoint-audit-v1,'
                    || octet_length(NEW.workspace_id::text) || ':' || NEW.workspace_id::text || ','
                    || octet_length(seq_text) || ':' || seq_text || ','
                    || octet_length(NEW.id::text) || ':' || NEW.id::text || ','
                    || octet_length(time_text) || ':' || time_text || ','
                    || octet_length(convert_to(NEW.actor_kind, 'UTF8')) || ':' || NEW.actor_kind || ','
                    || octet_length(convert_to(NEW.actor, 'UTF8')) || ':' || NEW.actor || ','
                    || COALESCE(octet_length(convert_to(NEW.actor_id, 'UTF8')) || ':' || NEW.actor_id || ',', '~,')
                    || octet_length(convert_to(NEW.action, 'UTF8')) || ':' || NEW.action || ','
                    || octet_length(convert_to(NEW.subject_type, 'UTF8')) || ':' || NEW.subject_type || ','
                    || COALESCE(octet_length(convert_to(NEW.subject_id, 'UTF8')) || ':' || NEW.subject_id || ',', '~,')
                    || COALESCE(octet_length(convert_to(NEW.before, 'UTF8')) || ':' || NEW.before || ',', '~,')
                    || COALESCE(octet_length(convert_to(NEW.after, 'UTF8')) || ':' || NEW.after || ',', '~,')
                    || COALESCE(octet_length(convert_to(NEW.diff, 'UTF8')) || ':' || NEW.diff || ',', '~,')
                    || octet_length(head_hash) || ':' || head_hash || ',',
                'UTF8')), 'hex'),
                NEW.actor, NEW.actor_id, NEW.actor_kind, NEW.action, NEW.subject_type, NEW.subject_id, NEW.before,
                NEW.after, NEW.diff, NEW.created_at);
    DELETE FROM audit_drafts WHERE id = NEW.id;
    RETURN NULL;
END;
$$;

DROP FUNCTION audit_netstring(TEXT);
