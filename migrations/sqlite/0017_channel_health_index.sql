-- Each channel's health in a workspace (`GET /api/v1/channels`): its last delivery sent, its last failure and how many
-- wait, read from this index instead of every delivery of every workspace.
CREATE INDEX deliveries_by_channel ON deliveries (workspace_id, channel, updated_at);
