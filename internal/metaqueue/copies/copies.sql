-- The copies module's queries: copies running beside a job's own attempt
-- (job_copies), the row's attempt kept apart in scratch (job_apart), the
-- jobs that opted out (job_no_replicate) and the attempts that ended while
-- another ran on (attempts.killed_copy). The schema is the core's
-- (internal/metaqueue/schema/migrations).

-- name: InsertCopy
INSERT INTO job_copies (job_id, attempt, placeholder_id, started) VALUES (?, ?, ?, ?);

-- name: DeleteCopy
DELETE FROM job_copies WHERE job_id = ? AND attempt = ?;

-- name: DeleteCopies
DELETE FROM job_copies WHERE job_id = ?;

-- name: SetApart
INSERT OR REPLACE INTO job_apart (job_id, attempt) VALUES (?, ?);

-- name: ClearApart
DELETE FROM job_apart WHERE job_id = ?;

-- name: OptOut
INSERT OR IGNORE INTO job_no_replicate (job_id) VALUES (?);

-- name: EndAttempt
INSERT OR REPLACE INTO attempts (job_id, attempt, placeholder_id, started, finished,
	exit, reason, cpu_user, cpu_sys, max_rss, killed_copy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: LateUsage
UPDATE attempts SET cpu_user = ?, cpu_sys = ?, max_rss = ?
	WHERE job_id = ? AND attempt = ? AND killed_copy = 1;

-- name: LoadCopies
-- CROSS JOIN: driven from the few rows here, not a scan of every job.
SELECT c.job_id, c.attempt, c.placeholder_id, c.started FROM job_copies c CROSS JOIN jobs j ON j.id = c.job_id
	WHERE j.state = 'E' ORDER BY c.job_id, c.attempt;

-- name: LoadApart
-- CROSS JOIN: driven from the few rows here, not a scan of every job.
SELECT a.job_id, a.attempt FROM job_apart a CROSS JOIN jobs j ON j.id = a.job_id WHERE j.state = 'E';

-- name: LoadOptedOut
SELECT job_id FROM job_no_replicate;

-- name: RunningCopies
SELECT c.attempt, coalesce(p.site, ''), coalesce(p.host, ''), c.started, coalesce(p.out_dir, '')
	FROM job_copies c LEFT JOIN placeholders p ON p.id = c.placeholder_id WHERE c.job_id = ? ORDER BY c.attempt;

-- name: Waste
SELECT count(*), coalesce(sum(coalesce(cpu_user, 0) + coalesce(cpu_sys, 0)), 0),
	coalesce(sum(max(finished - started, 0)), 0) / 1e6 FROM attempts WHERE killed_copy = 1;

-- name: WasteBytes
-- Bytes staged for a job to a site where only a killed copy of it ran.
SELECT coalesce(sum(t.bytes), 0) FROM transfers t
	WHERE t.error = '' AND t.job_id IN (SELECT job_id FROM attempts WHERE killed_copy = 1)
	AND t.to_site IN (SELECT p.site FROM attempts a JOIN placeholders p ON p.id = a.placeholder_id WHERE a.job_id = t.job_id AND a.killed_copy = 1)
	AND t.to_site NOT IN (SELECT p.site FROM jobs j JOIN placeholders p ON p.id = j.placeholder_id WHERE j.id = t.job_id);
