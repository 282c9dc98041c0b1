-- Runs executed by a client (`holdpoint run` against a server): the server keeps their state, the client runs the
-- agent loop, so the server's own workers never claim them.
ALTER TABLE runs ADD COLUMN executor TEXT NOT NULL DEFAULT 'server' CHECK (executor IN ('server', 'client'));
