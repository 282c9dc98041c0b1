-- An event's id is drawn when its transaction commits, not when the event is inserted.
--
-- Readers follow the log by id, so ids must become visible in id order: the transaction that draws an id must be
-- visible before the next id is drawn. Drawing the id under the event log's advisory lock, and holding the lock to
-- the end of the transaction, does that. Taken at the INSERT, the lock was held over every later statement of the
-- transaction and over each of their round trips between the server and the database, so all instances' writes
-- queued behind the slowest one. Taken here, in a deferred trigger that runs inside COMMIT, it is held over this
-- function and the commit's WAL flush only.
--
-- The INSERT writes a draft id (negative, from its own sequence, so concurrent drafts never collide); no reader
-- can see a draft, because the row is numbered before its transaction becomes visible. PostgreSQL makes a
-- transaction visible (ProcArrayEndTransaction) before it releases its locks, so the next id is drawn only once
-- this one can be read.
CREATE SEQUENCE events_draft_id_seq;

-- Nothing may refer to an event before its id is final; the table that did is not written by the server.
ALTER TABLE notifications DROP CONSTRAINT IF EXISTS notifications_event_id_fkey;

CREATE FUNCTION events_number_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    numbered BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(7262011);
    UPDATE events SET id = DEFAULT WHERE id = NEW.id RETURNING id INTO numbered;
    -- Tells every instance (this one too) to read the log; delivered when the transaction commits.
    PERFORM pg_notify('holdpoint_events', numbered::text);
    RETURN NULL;
END;
$$;

-- Deferred row triggers fire at COMMIT in the order the rows were inserted, so a transaction's events keep their
-- order.
CREATE CONSTRAINT TRIGGER events_numbered_at_commit AFTER INSERT ON events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION events_number_at_commit();
