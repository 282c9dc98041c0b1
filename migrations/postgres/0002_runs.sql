-- Agents and runs (spec §2, §5): definitions, runs with their segments, messages and tool calls.

CREATE TABLE agents (
    id              UUID PRIMARY KEY NOT NULL,
    workspace_id    UUID NOT NULL REFERENCES workspaces (id),
    name            TEXT NOT NULL,
    -- The whole definition as the API returns it (system prompt, model, tools, policy, max_steps, settings).
    spec            JSONB NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE runs (
    id               UUID PRIMARY KEY NOT NULL,
    workspace_id     UUID NOT NULL REFERENCES workspaces (id),
    agent_id         UUID REFERENCES agents (id),
    -- The definition the run executes, copied when it starts: editing an agent never changes a run under way.
    agent            JSONB NOT NULL,
    project          TEXT,
    input            TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('queued', 'running', 'waiting_for_input', 'waiting_for_approval',
                         'waiting_for_children', 'paused', 'completed', 'failed', 'cancelled')),
    step_count       INTEGER NOT NULL DEFAULT 0,
    max_steps        INTEGER NOT NULL,
    max_total_steps  INTEGER NOT NULL,
    parent_run_id    UUID REFERENCES runs (id),
    parent_run_ids   JSONB NOT NULL DEFAULT '[]',
    result           TEXT,
    error_message    TEXT,
    -- A user message to add when the run next continues (`resume` with a prompt).
    resume_prompt    TEXT,
    -- Which worker executes the run, until when: another may take it over once the lease has run out.
    lease_owner      UUID,
    lease_until      TIMESTAMPTZ,
    created_by       UUID,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    completed_at     TIMESTAMPTZ
);
CREATE INDEX runs_workspace ON runs (workspace_id, id);
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX runs_claimable ON runs (status, updated_at) WHERE status IN ('queued', 'running');

CREATE TABLE run_segments (
    id            UUID PRIMARY KEY NOT NULL,
    run_id        UUID NOT NULL REFERENCES runs (id),
    idx           INTEGER NOT NULL,
    resumed_from  UUID REFERENCES run_segments (id),
    start_step    INTEGER NOT NULL,
    steps         INTEGER NOT NULL DEFAULT 0,
    max_steps     INTEGER NOT NULL,
    started_at    TIMESTAMPTZ NOT NULL,
    ended_at      TIMESTAMPTZ,
    end_status    TEXT,
    UNIQUE (run_id, idx)
);

CREATE TABLE run_messages (
    id          UUID PRIMARY KEY NOT NULL,
    run_id      UUID NOT NULL REFERENCES runs (id),
    seq         INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content     JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    -- Two writers can never both append message n of a run.
    UNIQUE (run_id, seq)
);

CREATE TABLE tool_calls (
    id                UUID PRIMARY KEY NOT NULL,
    run_id            UUID NOT NULL REFERENCES runs (id),
    message_id        UUID NOT NULL REFERENCES run_messages (id),
    call_id           TEXT NOT NULL,
    tool_name         TEXT NOT NULL,
    input             JSONB NOT NULL,
    edited_input      JSONB,
    output            JSONB,
    status            TEXT NOT NULL CHECK (status IN ('pending_approval', 'approved', 'rejected', 'running',
                          'completed', 'error')),
    duration_ms       BIGINT,
    step              INTEGER NOT NULL,
    decided_by        TEXT,
    decision_comment  TEXT,
    question_id       UUID,
    -- Child runs a `spawn_agents` call waits on.
    child_run_ids     JSONB NOT NULL DEFAULT '[]',
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    UNIQUE (run_id, call_id)
);
CREATE INDEX tool_calls_run ON tool_calls (run_id, step, id);
