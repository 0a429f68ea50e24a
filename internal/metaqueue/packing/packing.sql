-- Packing's table (schema in internal/metaqueue/migrations): job_resources,
-- the request of each job that asks for more than one core, as
-- protocol.Resources in JSON; and the Done attempts' usage it learns from.

-- name: InsertResources
-- A job's request, for a job that asks.
INSERT INTO job_resources (job_id, resources) VALUES (?, ?);

-- name: LoadResources
-- The requests of the jobs not ended, at load.
-- CROSS JOIN: driven from the few rows here, not a scan of every job.
SELECT r.job_id, r.resources FROM job_resources r CROSS JOIN jobs j ON j.id = r.job_id
WHERE j.state NOT IN ('D', 'F', 'X');

-- name: SetResources
-- A job's request raised (a memory retry) or changed (mqalter).
INSERT OR REPLACE INTO job_resources (job_id, resources) VALUES (?, ?);

-- name: JobResources
SELECT resources FROM job_resources WHERE job_id = ?;

-- name: LoadUsage
-- The measured usage of Done attempts of the categories (queue, target) of
-- jobs not ended that ask for an auto size, newest first, for the learner.
SELECT q.name, t.name, j.max_rss, j.cpu_user + j.cpu_sys, j.finished - j.started
FROM jobs j JOIN queues q ON q.id = j.queue_id JOIN targets t ON t.id = j.target_id
WHERE j.state = 'D' AND j.max_rss > 0 AND j.finished > j.started
	AND (j.queue_id, j.target_id) IN (SELECT j2.queue_id, j2.target_id FROM jobs j2
		JOIN job_resources r2 ON r2.job_id = j2.id WHERE j2.state NOT IN ('D', 'F', 'X'))
ORDER BY j.id DESC LIMIT ?;
