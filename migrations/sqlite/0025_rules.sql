-- Approval rules (spec §15): one document per workspace, replaced whole by each save. `version` counts the saves
-- (a save is conditional on the version it read, so two cannot both build on the same one), and is what each
-- instance reads to know whether the rules it compiled are still the workspace's. `document` is the JSON
-- `{"rules": [...], "default": ...}`; `updated_by` the username or token name that saved it.
CREATE TABLE rules_documents (
    workspace_id    BLOB PRIMARY KEY NOT NULL REFERENCES workspaces (id),
    version         INTEGER NOT NULL CHECK (version > 0),
    document        TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    updated_by      TEXT NOT NULL
);
