-- The MCP gateway's upstreams (spec §16): the MCP servers a workspace's agents reach through `/mcp/gateway`, with
-- the headers sent to each (secrets, never shown again) and how the gateway last found it.
CREATE TABLE upstreams (
    id               BLOB PRIMARY KEY NOT NULL,
    workspace_id     BLOB NOT NULL REFERENCES workspaces (id),
    name             TEXT NOT NULL,
    url              TEXT NOT NULL,
    headers          TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    last_success_at  TEXT,
    last_error_at    TEXT,
    last_error       TEXT,
    UNIQUE (workspace_id, name)
);
