-- The running instances, and which of them holds each MCP gateway call waiting on a question (spec §16).
--
-- An instance renews `alive_until` while it runs, and sets it to the moment it stops; one past it is gone. A gateway
-- call lives in the memory of the instance that took it (the upstream's connection, the arguments as they are to be
-- sent), so no other instance makes it: `released` is NULL while its instance holds it, `ended` once the call ended
-- there, and `lapsed` once another instance found its holder gone with the call still held. That instance cancels
-- the question the call waited on, as nobody may approve a call that will not be made.
CREATE TABLE instances (
    id           BLOB PRIMARY KEY NOT NULL,
    alive_until  TEXT NOT NULL
);
CREATE TABLE gateway_holds (
    question_id   BLOB PRIMARY KEY NOT NULL,
    workspace_id  BLOB NOT NULL REFERENCES workspaces (id),
    instance_id   BLOB NOT NULL,
    released      TEXT CHECK (released = 'ended' OR released = 'lapsed')
);
-- What the instances look through for calls left by one that is gone: the calls still held.
CREATE INDEX gateway_holds_held ON gateway_holds (instance_id) WHERE released IS NULL;
