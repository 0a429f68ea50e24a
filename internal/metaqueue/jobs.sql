-- jobs: a job's row and the rows only it owns (prerequisites, environment,
-- declared files, opting out of copies). Every statement that writes
-- jobs.state is named in lifecycle.go alone (TestStateQueriesOnlyInLifecycle).

-- name: InsertJob
-- One new job. The bulk path inserts bulkRows at once: its statement repeats
-- this one's row of values (multiRow).
INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, est, submitted)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: SetState
-- Job ?3 moves to state ?1. Its ready time (jobs.ready, migration 032;
-- NULL: since submitted) follows in the same UPDATE, where the job's own
-- columns are its old values; ?2 is the move's time when the job becomes
-- Queued, else NULL (dc.State.Stored). Ready at ?2 when its prerequisites make
-- it ready; released from a hold, ready since the time it had (a hold
-- taken while ready, mqalter's too, keeps it), else since ?2; leaving
-- Queued, its NULL becomes the submission time it meant, so that a hold
-- and its release keep it; any other move keeps it. Requeue and Unclaim
-- leave it: a requeued attempt keeps the job's ready time.
-- dc.State.BecameReady keeps the same in memory. Each parameter is
-- anonymous and used once: the driver allocates a numbered one's name on
-- every run.
UPDATE jobs SET state = ?, ready = coalesce(iif(state = 'H', ready, NULL), ?,
		iif(state = 'Q', coalesce(ready, submitted), ready))
WHERE id = ?;

-- name: Finish
UPDATE jobs SET state = ?, exit = ?, started = ?, finished = ?, reason = ?,
	cpu_user = ?, cpu_sys = ?, max_rss = ?
WHERE id = ?;

-- name: Requeue
-- Every way back to W/Q forgets the last attempt's figures (kept in attempts
-- first, where that attempt counts).
UPDATE jobs SET state = ?, row_attempt = NULL, placeholder_id = NULL, started = NULL, finished = NULL,
	exit = NULL, reason = NULL, cpu_user = NULL, cpu_sys = NULL, max_rss = NULL
WHERE id = ?;

-- name: RaiseEst
-- What an attempt stopped at its placeholder's walltime ran: the job needs more.
UPDATE jobs SET est = ?1 WHERE id = ?2 AND (est IS NULL OR est < ?1);

-- name: Unclaim
-- Returned unstarted: the attempt does not count.
UPDATE jobs SET state = ?, attempt_base = attempt_base + 1, row_attempt = NULL, placeholder_id = NULL, started = NULL,
	finished = NULL, exit = NULL, reason = NULL, cpu_user = NULL, cpu_sys = NULL, max_rss = NULL
WHERE id = ?;

-- name: Rerun
-- A rerun job ready (Queued) is ready since ?3, the rerun; one waiting gets
-- its ready time when it becomes ready (SetState).
UPDATE jobs SET state = ?1, ready = CASE WHEN ?1 = 'Q' THEN ?3 END, attempt_base = attempts, row_attempt = NULL, placeholder_id = NULL, started = NULL,
	finished = NULL, exit = NULL, reason = NULL, cpu_user = NULL, cpu_sys = NULL, max_rss = NULL
WHERE id = ?2;

-- name: SetCommand
UPDATE jobs SET command = ? WHERE id = ?;

-- name: Delete
-- The third parameter true: the job was prefetched and never started, so
-- it keeps no start time (mqstat -j shows no run, no elapsed time).
UPDATE jobs SET state = 'X', finished = ?, reason = ?, started = iif(?, NULL, started) WHERE id = ?;

-- name: Claim
-- Marks jobs Executing for one placeholder (?1) from ?2 on and returns what
-- their assignments need. A request claims any number of jobs: claimSQL
-- expands the id list to that many parameters.
-- Jobs handed out ahead of the placeholder's free slots are claimed with
-- prefetched = 1 instead (claimAheadSQL): P until it says it started
-- them (Started).
UPDATE jobs SET state = 'E', attempts = attempts + 1, row_attempt = NULL, placeholder_id = ?1, started = ?2,
	finished = NULL, exit = NULL, reason = NULL, prefetched = NULL
WHERE id IN (/*SLICE:ids*/?)
RETURNING id, attempts, attempt_base, command, cwd, submitted,
	coalesce((SELECT env FROM job_env WHERE job_id = jobs.id), ''),
	coalesce((SELECT e.env FROM submit_env e WHERE e.first_job = (SELECT max(first_job) FROM submit_env WHERE first_job <= jobs.id)
		AND e.last_job >= jobs.id), '');

-- name: Started
-- Executing jobs whose placeholders said they started them: P to E.
UPDATE jobs SET prefetched = NULL WHERE id IN (/*SLICE:ids*/?) AND state = 'E';

-- name: InsertPrereq
-- One prerequisite: kind 0 after-ok, 1 after-any. The bulk path repeats
-- its row of values (multiRow).
INSERT OR IGNORE INTO job_prereqs (job_id, target_id, kind) VALUES (?, ?, ?);

-- name: InsertEnv
INSERT INTO job_env (job_id, env) VALUES (?, ?);

-- name: InsertFile
INSERT INTO job_files (job_id, kind, seq, path, size, rel) VALUES (?, ?, ?, ?, ?, ?);

-- name: JobRow
SELECT state, queue_id, target_id, est, attempts, attempt_base FROM jobs WHERE id = ?;

-- name: JobPrereqs
SELECT target_id, kind FROM job_prereqs WHERE job_id = ?;

-- name: JobEnd
SELECT j.state, j.exit, j.reason, coalesce(j.row_attempt, j.attempts), coalesce(p.site, ''), coalesce(p.host, ''),
	j.started, j.finished, j.cpu_user, j.cpu_sys, j.max_rss
FROM jobs j LEFT JOIN placeholders p ON p.id = j.placeholder_id
WHERE j.id = ?;

-- name: LoadJobs
-- Every job, in one pass at load, in seven columns (each costs every row):
-- the state as its letter's code point (an integer: no string per job); a
-- Done job's runtime, where known, a Queued job's ready time (SetState),
-- else the start; an Executing job's
-- attempt, attempt base, placeholder and prefetched flag as one text.
SELECT id, queue_id, target_id, unicode(state), est,
	CASE WHEN state = 'D' THEN CASE WHEN finished > started THEN finished - started END
		WHEN state = 'Q' THEN coalesce(ready, submitted)
		ELSE started END,
	CASE WHEN state = 'E' THEN coalesce(row_attempt, attempts) || ' ' || attempt_base || ' ' || coalesce(placeholder_id, 0) || ' ' || (prefetched IS NOT NULL) END
FROM jobs ORDER BY id;

-- name: LoadPrereqs
-- Every prerequisite any job, live or ended, ever named, with its job's
-- target and whether the job is live, in job id order: the target edges
-- (after-ok and after-any alike: both order jobs, so both close cycles)
-- and the live jobs' prerequisites in one pass, driven from this table
-- (CROSS JOIN keeps that order; the planner otherwise scanned every job).
SELECT p.job_id, p.target_id, p.kind, j.target_id, j.state IN ('W','Q','H','E','B')
FROM job_prereqs p CROSS JOIN jobs j ON j.id = p.job_id ORDER BY p.job_id;

-- name: SetRowAttempt
-- The attempt the job's row shows (a copy that won, or took the lead).
UPDATE jobs SET row_attempt = ?, placeholder_id = ?, started = ? WHERE id = ?;

-- name: NewCopyAttempt
-- A copy of a running job takes the next attempt number; the row keeps
-- showing the attempt it showed.
UPDATE jobs SET row_attempt = coalesce(row_attempt, attempts), attempts = attempts + 1,
	attempt_base = attempt_base + 1 WHERE id = ? AND state = 'E'
RETURNING attempts, command, cwd, submitted, coalesce((SELECT env FROM job_env WHERE job_id = jobs.id), ''),
	coalesce((SELECT e.env FROM submit_env e WHERE e.first_job = (SELECT max(first_job) FROM submit_env WHERE first_job <= jobs.id)
		AND e.last_job >= jobs.id), '');
