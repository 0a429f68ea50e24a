-- The ledger's tables (schema in internal/metaqueue/schema/migrations): charges,
-- one row per charged attempt; stage_runtimes and stage_output, what LP
-- provisioning measured beyond charges.

-- name: SpentByQueueSite
SELECT queue_id, site, sum(cost), coalesce(sum(CASE WHEN ok THEN seconds END), 0), sum(ok)
FROM charges GROUP BY queue_id, site;

-- name: StageRuntimes
SELECT queue_id, site, seconds, runs FROM stage_runtimes;

-- name: StageOutput
SELECT queue_id, bytes, jobs FROM stage_output;

-- name: SaveStageRuntimes
INSERT OR REPLACE INTO stage_runtimes (queue_id, site, seconds, runs) VALUES (?, ?, ?, ?);

-- name: SaveStageOutput
INSERT OR REPLACE INTO stage_output (queue_id, bytes, jobs) VALUES (?, ?, ?);

-- name: Charge
INSERT OR REPLACE INTO charges (job_id, attempt, queue_id, site, seconds, price, cost, ok)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: ChargeOf
SELECT a.started, c.seconds, c.price, c.queue_id, c.site FROM charges c
JOIN attempts a ON a.job_id = c.job_id AND a.attempt = c.attempt
WHERE c.job_id = ? AND c.attempt = ?;

-- name: ExtendCharge
UPDATE charges SET seconds = ?, cost = ? WHERE job_id = ? AND attempt = ?;
