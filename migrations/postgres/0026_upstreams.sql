-- The MCP gateway's upstreams (spec §16): the MCP servers a workspace's agents reach through `/mcp/gateway`, with
-- the headers sent to each (secrets, never shown again) and how the gateway last found it.
CREATE TABLE upstreams (
    id               UUID PRIMARY KEY NOT NULL,
    workspace_id     UUID NOT NULL REFERENCES workspaces (id),
    name             TEXT NOT NULL,
    url              TEXT NOT NULL,
    headers          JSONB NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    last_success_at  TIMESTAMPTZ,
    last_error_at    TIMESTAMPTZ,
    last_error       TEXT,
    UNIQUE (workspace_id, name)
);
