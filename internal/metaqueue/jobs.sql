-- jobs: a job's row and the rows only it owns (prerequisites, environment,
-- declared files, opting out of copies). Every statement that writes
-- jobs.state is named in lifecycle.go alone (TestStateQueriesOnlyInLifecycle).

-- name: InsertJob
-- One new job. The bulk path inserts bulkRows at once: its statement repeats
-- this one's row of values (multiRow).
INSERT INTO jobs (id, queue_id, target_id, state, command, cwd, est, submitted)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: SetState
UPDATE jobs SET state = ? WHERE id = ?;

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

-- name: Unclaim
-- Returned unstarted: the attempt does not count.
UPDATE jobs SET state = ?, attempt_base = attempt_base + 1, row_attempt = NULL, placeholder_id = NULL, started = NULL,
	finished = NULL, exit = NULL, reason = NULL, cpu_user = NULL, cpu_sys = NULL, max_rss = NULL
WHERE id = ?;

-- name: Rerun
UPDATE jobs SET state = ?, attempt_base = attempts, row_attempt = NULL, placeholder_id = NULL, started = NULL,
	finished = NULL, exit = NULL, reason = NULL, cpu_user = NULL, cpu_sys = NULL, max_rss = NULL
WHERE id = ?;

-- name: Delete
UPDATE jobs SET state = 'X', finished = ?, reason = ? WHERE id = ?;

-- name: Claim
-- Marks jobs Executing for one placeholder (?1) from ?2 on and returns what
-- their assignments need. A request claims any number of jobs: claimSQL
-- expands the id list to that many parameters.
UPDATE jobs SET state = 'E', attempts = attempts + 1, row_attempt = NULL, placeholder_id = ?1, started = ?2,
	finished = NULL, exit = NULL, reason = NULL
WHERE id IN (/*SLICE:ids*/?)
RETURNING id, attempts, attempt_base, command, cwd, submitted,
	coalesce((SELECT env FROM job_env WHERE job_id = jobs.id), '');

-- name: InsertPrereq
-- One prerequisite pair; the bulk path repeats its row of values (multiRow).
INSERT OR IGNORE INTO job_prereqs (job_id, target_id) VALUES (?, ?);

-- name: InsertEnv
INSERT INTO job_env (job_id, env) VALUES (?, ?);

-- name: InsertFile
INSERT INTO job_files (job_id, kind, seq, path, size, rel) VALUES (?, ?, ?, ?, ?, ?);

-- name: SetBundle
-- Jobs ?1..?2 dispatch together: the bundle is named by its first job.
UPDATE jobs SET bundle = ?1 WHERE id BETWEEN ?1 AND ?2;

-- name: LiveBundles
SELECT id, bundle FROM jobs WHERE bundle <> 0 AND state IN ('W','Q','H','E','B') ORDER BY id;

-- name: JobRow
SELECT state, queue_id, target_id, est, attempts, attempt_base FROM jobs WHERE id = ?;

-- name: JobPrereqs
SELECT target_id FROM job_prereqs WHERE job_id = ?;

-- name: JobEnd
SELECT j.state, j.exit, j.reason, coalesce(j.row_attempt, j.attempts), coalesce(p.site, ''), coalesce(p.host, ''),
	j.started, j.finished, j.cpu_user, j.cpu_sys, j.max_rss
FROM jobs j LEFT JOIN placeholders p ON p.id = j.placeholder_id
WHERE j.id = ?;

-- name: LoadJobs
-- Every job, in one pass at load.
SELECT id, queue_id, target_id, state, est, coalesce(row_attempt, attempts), attempt_base, placeholder_id, started, finished
FROM jobs ORDER BY id;

-- name: LoadEdges
-- Every target-to-prerequisite edge any job, live or ended, ever named.
SELECT DISTINCT j.target_id, p.target_id FROM job_prereqs p JOIN jobs j ON j.id = p.job_id;

-- name: LivePrereqs
SELECT p.job_id, p.target_id FROM job_prereqs p JOIN jobs j ON j.id = p.job_id
WHERE j.state IN ('W','Q','H','E','B');

-- name: SelectIDs
-- The jobs a selector names, in the states given as one string (e.g.
-- 'WQ'). The selector's builder appends its other conditions with AND.
SELECT id FROM jobs WHERE instr(?, state) > 0;

-- name: EndedStates
-- Ended jobs of an id range by state: they are not in memory.
SELECT state, count(*) FROM jobs WHERE id BETWEEN ? AND ? AND state IN ('D','F','X') GROUP BY state;

-- name: TargetStates
-- A target's jobs by state; the watch's builder may add AND queue_id = ?
-- before its GROUP BY state.
SELECT state, count(*) FROM jobs WHERE target_id = ?;

-- name: NotDone
-- The jobs of a watch that ended otherwise than done; its builder appends
-- WHERE, ORDER BY id and LIMIT.
SELECT id, state, exit, reason FROM jobs;

-- name: Stat
-- A listing's columns (scanStat reads them); the listing's builder appends
-- WHERE, ORDER BY and LIMIT.
SELECT j.id, q.name, t.name, j.state, j.attempts, j.exit, coalesce(p.site, ''),
	coalesce(p.host, ''), j.submitted, j.started, j.finished, j.command, j.cwd, j.est, coalesce(j.reason, ''),
	coalesce((SELECT group_concat(t2.name, char(10)) FROM job_prereqs jp JOIN targets t2 ON t2.id = jp.target_id WHERE jp.job_id = j.id), ''),
	coalesce(j.placeholder_id, 0), coalesce(p.out_dir, ''), coalesce(j.row_attempt, j.attempts), j.cpu_user, j.cpu_sys, j.max_rss,
	(SELECT c.cost FROM charges c WHERE c.job_id = j.id AND c.attempt = coalesce(j.row_attempt, j.attempts)),
	coalesce((SELECT pr.priority FROM job_priority pr WHERE pr.job_id = j.id), 0),
	coalesce((SELECT r.resources FROM job_resources r WHERE r.job_id = j.id), '')
FROM jobs j JOIN queues q ON q.id = j.queue_id JOIN targets t ON t.id = j.target_id
LEFT JOIN placeholders p ON p.id = j.placeholder_id;

-- name: PrereqStates
-- The jobs of one of job ?1's prerequisite targets (named ?2) by state, found
-- through the job's own prerequisite rows: target names have no index.
SELECT j.state, count(*) FROM jobs j
WHERE j.target_id = (SELECT jp.target_id FROM job_prereqs jp JOIN targets t ON t.id = jp.target_id WHERE jp.job_id = ? AND t.name = ?)
GROUP BY j.state;

-- name: Blockers
-- The failed, deleted or blocked jobs of job ?'s prerequisite targets, the
-- blocked ones last.
SELECT j.id, t.name, j.state FROM job_prereqs jp
JOIN jobs j ON j.target_id = jp.target_id JOIN targets t ON t.id = j.target_id
WHERE jp.job_id = ? AND j.state IN ('F', 'X', 'B')
ORDER BY j.state = 'B', j.id LIMIT 1000;

-- name: SetRowAttempt
-- The attempt the job's row shows (a copy that won, or took the lead).
UPDATE jobs SET row_attempt = ?, placeholder_id = ?, started = ? WHERE id = ?;

-- name: NewCopyAttempt
-- A copy of a running job takes the next attempt number; the row keeps
-- showing the attempt it showed.
UPDATE jobs SET row_attempt = coalesce(row_attempt, attempts), attempts = attempts + 1,
	attempt_base = attempt_base + 1 WHERE id = ? AND state = 'E'
RETURNING attempts, command, cwd, submitted, coalesce((SELECT env FROM job_env WHERE job_id = jobs.id), '');

-- name: InsertPriority
-- A job's priority, kept only when it is not 0 (mqsub -p).
INSERT INTO job_priority (job_id, priority) VALUES (?, ?);

-- name: LivePriorities
SELECT p.job_id, p.priority FROM job_priority p JOIN jobs j ON j.id = p.job_id
WHERE j.state IN ('W','Q','H','E','B');

-- name: JobPriority
SELECT priority FROM job_priority WHERE job_id = ?;
