-- attempts: each earlier attempt of a job (the current one is on its jobs
-- row), what it cost (charges) and why its output was lost (output_lost).

-- name: InsertAttempt
INSERT OR REPLACE INTO attempts (job_id, attempt, placeholder_id, started, finished, exit, reason,
	cpu_user, cpu_sys, max_rss)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: InsertUnstarted
-- An attempt handed back before it started: listed, never run.
INSERT OR REPLACE INTO attempts (job_id, attempt, placeholder_id, finished, reason, unstarted)
VALUES (?, ?, ?, ?, ?, 1);

-- name: KeepAttempt
-- A rerun keeps the job's last attempt, as its row has it, in attempts.
INSERT OR REPLACE INTO attempts (job_id, attempt, placeholder_id, started, finished, exit, reason,
	cpu_user, cpu_sys, max_rss)
SELECT id, coalesce(row_attempt, attempts), placeholder_id, started, finished, exit,
	coalesce(reason, CASE state WHEN 'D' THEN 'done' WHEN 'X' THEN 'deleted by user' ELSE 'ended' END) || '; rerun by user',
	cpu_user, cpu_sys, max_rss
FROM jobs WHERE id = ? AND attempts > 0;

-- name: KeepCommand
-- A rerun with a new command keeps the old one with the attempt it ran
-- (after KeepAttempt, before the row is reset).
UPDATE attempts SET command = (SELECT command FROM jobs WHERE id = ?1), reason = reason || ' with a new command'
WHERE job_id = ?1 AND attempt = (SELECT coalesce(row_attempt, attempts) FROM jobs WHERE id = ?1);

