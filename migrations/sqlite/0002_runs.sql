-- Agents and runs, SQLite dialect (spec §2, §5): definitions, runs with their segments, messages and tool calls.

CREATE TABLE agents (
    id              BLOB PRIMARY KEY NOT NULL,
    workspace_id    BLOB NOT NULL REFERENCES workspaces (id),
    name            TEXT NOT NULL,
    -- The whole definition as the API returns it (system prompt, model, tools, policy, max_steps, settings).
    spec            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE runs (
    id               BLOB PRIMARY KEY NOT NULL,
    workspace_id     BLOB NOT NULL REFERENCES workspaces (id),
    agent_id         BLOB REFERENCES agents (id),
    -- The definition the run executes, copied when it starts: editing an agent never changes a run under way.
    agent            TEXT NOT NULL,
    project          TEXT,
    input            TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('queued', 'running', 'waiting_for_input', 'waiting_for_approval',
                         'waiting_for_children', 'paused', 'completed', 'failed', 'cancelled')),
    step_count       INTEGER NOT NULL DEFAULT 0,
    max_steps        INTEGER NOT NULL,
    max_total_steps  INTEGER NOT NULL,
    parent_run_id    BLOB REFERENCES runs (id),
    parent_run_ids   TEXT NOT NULL DEFAULT '[]',
    result           TEXT,
    error_message    TEXT,
    -- A user message to add when the run next continues (`resume` with a prompt).
    resume_prompt    TEXT,
    -- Which worker executes the run, until when: another may take it over once the lease has run out.
    lease_owner      BLOB,
    lease_until      TEXT,
    created_by       BLOB,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    completed_at     TEXT
);
CREATE INDEX runs_workspace ON runs (workspace_id, id);
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX runs_claimable ON runs (status, updated_at) WHERE status IN ('queued', 'running');

CREATE TABLE run_segments (
    id            BLOB PRIMARY KEY NOT NULL,
    run_id        BLOB NOT NULL REFERENCES runs (id),
    idx           INTEGER NOT NULL,
    resumed_from  BLOB REFERENCES run_segments (id),
    start_step    INTEGER NOT NULL,
    steps         INTEGER NOT NULL DEFAULT 0,
    max_steps     INTEGER NOT NULL,
    started_at    TEXT NOT NULL,
    ended_at      TEXT,
    end_status    TEXT,
    UNIQUE (run_id, idx)
);

CREATE TABLE run_messages (
    id          BLOB PRIMARY KEY NOT NULL,
    run_id      BLOB NOT NULL REFERENCES runs (id),
    seq         INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    -- Two writers can never both append message n of a run.
    UNIQUE (run_id, seq)
);

CREATE TABLE tool_calls (
    id                BLOB PRIMARY KEY NOT NULL,
    run_id            BLOB NOT NULL REFERENCES runs (id),
    message_id        BLOB NOT NULL REFERENCES run_messages (id),
    call_id           TEXT NOT NULL,
    tool_name         TEXT NOT NULL,
    input             TEXT NOT NULL,
    edited_input      TEXT,
    output            TEXT,
    status            TEXT NOT NULL CHECK (status IN ('pending_approval', 'approved', 'rejected', 'running',
                          'completed', 'error')),
    duration_ms       INTEGER,
    step              INTEGER NOT NULL,
    decided_by        TEXT,
    decision_comment  TEXT,
    question_id       BLOB,
    -- Child runs a `spawn_agents` call waits on.
    child_run_ids     TEXT NOT NULL DEFAULT '[]',
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    UNIQUE (run_id, call_id)
);
CREATE INDEX tool_calls_run ON tool_calls (run_id, step, id);
