-- The head of a workspace's audit chain follows its newest entry by itself: the entry's INSERT moves it, in the
-- same transaction, so recording a decision takes one round trip fewer (and the head can never lag the log).
CREATE FUNCTION audit_log_move_head() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_heads SET seq = NEW.seq, hash = NEW.hash WHERE workspace_id = NEW.workspace_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER audit_log_moves_head AFTER INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_move_head();
