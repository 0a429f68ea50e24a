-- priorities: jobs' priorities (mqsub -p), kept only when not 0.

-- name: InsertPriority
-- A job's priority, kept only when it is not 0 (mqsub -p).
INSERT INTO job_priority (job_id, priority) VALUES (?, ?);

-- name: LivePriorities
-- CROSS JOIN: driven from the few rows here, not a scan of every job.
SELECT p.job_id, p.priority FROM job_priority p CROSS JOIN jobs j ON j.id = p.job_id
WHERE j.state IN ('W','Q','H','E','B');

-- name: JobPriority
SELECT priority FROM job_priority WHERE job_id = ?;

-- name: DeletePriority
-- A job's priority dropped before another is given (mqalter).
DELETE FROM job_priority WHERE job_id = ?;
