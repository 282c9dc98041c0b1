-- An audit entry goes in only as the successor of its chain's stored head: the seq after the head's and the head's
-- hash as its `prev_hash`. Every append already claims or guesses the head that way; this makes the database refuse
-- the one that did not, as an error, so a write can put an entry sealed on a guessed head in the same query as the
-- change it records and its savepoint's release: a wrong guess stops that query before the release, and the write
-- is undone and retried on the claimed head instead of committing a broken link.
CREATE TRIGGER audit_log_follows_its_head BEFORE INSERT ON audit_log
WHEN NOT EXISTS (
    SELECT 1 FROM audit_heads WHERE workspace_id = NEW.workspace_id AND seq = NEW.seq - 1 AND hash = NEW.prev_hash
)
BEGIN
    SELECT RAISE(ABORT, 'holdpoint: the audit entry does not follow its chain''s head');
END;
