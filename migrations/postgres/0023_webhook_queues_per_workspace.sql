-- A webhook delivery's queue is its workspace's endpoint (`workspace_id`, `endpoint`): two workspaces whose questions
-- name the same callback URL have a queue each, so one workspace's refused callbacks hold up no other's. The index
-- finds a queue's head by both.
DROP INDEX webhook_deliveries_queue;
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (workspace_id, endpoint, sequence)
    WHERE status IN ('queued', 'retrying');
