-- The head of a workspace's audit chain follows its newest entry by itself: the entry's INSERT moves it, in the
-- same transaction, so recording a decision takes one statement fewer (and the head can never lag the log).
CREATE TRIGGER audit_log_moves_head AFTER INSERT ON audit_log
BEGIN
    UPDATE audit_heads SET seq = NEW.seq, hash = NEW.hash WHERE workspace_id = NEW.workspace_id;
END;
