-- A commit announces its events on the `holdpoint_events` channel, and NOTIFY channels belong to the database,
-- not to a schema: instances whose tables live in other schemas of the same database hear each other's ids, which
-- number other logs. The payload names the schema of the log the id is in (`schema:id`), and an instance follows
-- only its own.
CREATE OR REPLACE FUNCTION events_number_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    numbered BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(7262011);
    UPDATE events SET id = DEFAULT WHERE id = NEW.id RETURNING id INTO numbered;
    -- Tells every instance (this one too) to read the log; delivered when the transaction commits.
    PERFORM pg_notify('holdpoint_events', current_schema() || ':' || numbered::text);
    RETURN NULL;
END;
$$;
