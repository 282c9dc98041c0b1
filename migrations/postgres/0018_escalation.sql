-- Escalation (spec §11): a workspace's policy per kind and urgency says when the people a question reached are
-- reminded and when it is handed to someone else (`escalate_to`, an assignee). A question takes its plan when it is
-- asked (`questions.escalation`, with each step's time and when it was taken), so a later change of policy never
-- rewrites what people were told; `next_escalation_at` is when its next step is due, for the worker.
CREATE TABLE escalation_policies (
    workspace_id            UUID NOT NULL REFERENCES workspaces (id),
    kind                    TEXT NOT NULL CHECK (kind IN ('blocking', 'non_blocking', 'approval', 'error_recovery')),
    urgency                 TEXT NOT NULL CHECK (urgency IN ('low', 'normal', 'high', 'critical')),
    remind_after_seconds    BIGINT,
    escalate_after_seconds  BIGINT,
    escalate_to             JSONB,
    updated_at              TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, kind, urgency)
);
ALTER TABLE questions ADD COLUMN escalation JSONB;
ALTER TABLE questions ADD COLUMN next_escalation_at TIMESTAMPTZ;
CREATE INDEX questions_escalation_due ON questions (next_escalation_at)
    WHERE status = 'pending' AND next_escalation_at IS NOT NULL;

-- A question reaches a person on a channel once per cause (`asked`, `reminded`, `escalated`): the outbox's key gains
-- the cause.
ALTER TABLE deliveries ADD COLUMN cause TEXT NOT NULL DEFAULT 'asked' CHECK (cause IN ('asked', 'reminded', 'escalated'));
ALTER TABLE deliveries DROP CONSTRAINT deliveries_question_id_user_id_channel_key;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_one_per_cause UNIQUE (question_id, user_id, channel, cause);
