-- queues: a queue's row, made on first use; its settings' writes and the
-- load are the queues module's (queues/queues.sql).

-- name: InsertQueue
INSERT INTO queues (name, created) VALUES (?, ?)
RETURNING id, ceiling_s, max_attempts, retry_failed, policy;
