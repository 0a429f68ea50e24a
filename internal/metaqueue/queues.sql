-- queues: a queue's row made and loaded; the settings' writes are the
-- queues module's (queues/queues.sql).

-- name: InsertQueue
INSERT INTO queues (name, created) VALUES (?, ?)
RETURNING id, ceiling_s, max_attempts, retry_failed, policy;

-- name: LoadQueues
SELECT q.id, q.name, q.ceiling_s, q.max_attempts, q.retry_failed, q.policy,
	COALESCE(e.deadline, 0), COALESCE(e.budget, 0), q.max_copies, q.max_output, q.output
FROM queues q LEFT JOIN queue_economics e ON e.queue_id = q.id;
