-- queues: a queue's settings as `cls queue set` changes them and as they
-- load, its deadline and budget (queue_economics) and its resource
-- defaults (queue_defaults).

-- name: UpdateQueue
UPDATE queues SET ceiling_s = ?, max_attempts = ?, retry_failed = ?, policy = ?, max_copies = ?, max_output = ?, output = ? WHERE id = ?;

-- name: StartChoosing
-- Queue ?2 switches to a choosing policy at ?1: kept unless its policy
-- chose already (?3 lists the choosing names, ",dc,sa,"), as the core's
-- switch counts its ready jobs' queue time (migration 032).
UPDATE queues SET choosing_since = ?1 WHERE id = ?2 AND instr(?3, ',' || policy || ',') = 0;

-- name: SetEconomics
INSERT INTO queue_economics (queue_id, deadline, budget) VALUES (?, ?, ?)
ON CONFLICT (queue_id) DO UPDATE SET deadline = excluded.deadline, budget = excluded.budget;

-- name: DeleteDefaults
DELETE FROM queue_defaults WHERE queue_id = ?;

-- name: SetDefaults
INSERT INTO queue_defaults (queue_id, resources) VALUES (?, ?)
ON CONFLICT (queue_id) DO UPDATE SET resources = excluded.resources;

-- name: LoadQueues
SELECT q.id, q.name, q.ceiling_s, q.max_attempts, q.retry_failed, q.policy,
	COALESCE(e.deadline, 0), COALESCE(e.budget, 0), q.max_copies, q.max_output, q.output, d.resources
FROM queues q LEFT JOIN queue_economics e ON e.queue_id = q.id LEFT JOIN queue_defaults d ON d.queue_id = q.id;
