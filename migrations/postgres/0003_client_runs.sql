-- Runs executed by a client (`holdpoint run` against a server): the server keeps their state, the client runs the
-- agent loop, so the server's own workers never claim them.
ALTER TABLE runs ADD COLUMN executor TEXT NOT NULL DEFAULT 'server' CHECK (executor IN ('server', 'client'));
-- `holdpoint run --pause-on-approval`: a final answer that asks the user something pauses the run instead of
-- completing it, so a later `resume` with a prompt can answer it.
ALTER TABLE runs ADD COLUMN pause_on_input BOOLEAN NOT NULL DEFAULT FALSE;
