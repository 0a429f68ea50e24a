-- inspect: what mqstat, mqstat -j and the dashboard read of jobs, through
-- the read pool (a WAL snapshot): the listing, one job's prerequisites,
-- blockers, attempts, lost output, declared files and transfers. The
-- schema is in the core's migrations.

-- name: Stat
-- A listing's columns (scanStat reads them); the listing's builder appends
-- WHERE, ORDER BY and LIMIT. An Executing job not known started shows P.
SELECT j.id, q.name, t.name, CASE WHEN j.state = 'E' AND j.prefetched = 1 THEN 'P' ELSE j.state END, j.attempts, j.exit, coalesce(p.site, ''),
	coalesce(p.host, ''), j.submitted, j.started, j.finished, j.command, j.cwd, j.est, coalesce(j.reason, ''),
	coalesce((SELECT group_concat(t2.name, char(10)) FROM job_prereqs jp JOIN targets t2 ON t2.id = jp.target_id WHERE jp.job_id = j.id AND jp.kind = 0), ''),
	coalesce(j.placeholder_id, 0), coalesce(p.out_dir, ''), coalesce(j.row_attempt, j.attempts), j.cpu_user, j.cpu_sys, j.max_rss,
	(SELECT c.cost FROM charges c WHERE c.job_id = j.id AND c.attempt = coalesce(j.row_attempt, j.attempts)),
	coalesce((SELECT pr.priority FROM job_priority pr WHERE pr.job_id = j.id), 0),
	coalesce((SELECT r.resources FROM job_resources r WHERE r.job_id = j.id), ''),
	coalesce((SELECT group_concat(t2.name, char(10)) FROM job_prereqs jp JOIN targets t2 ON t2.id = jp.target_id WHERE jp.job_id = j.id AND jp.kind = 1), '')
FROM jobs j JOIN queues q ON q.id = j.queue_id JOIN targets t ON t.id = j.target_id
LEFT JOIN placeholders p ON p.id = j.placeholder_id;

-- name: PrereqStates
-- The jobs of each of job ?'s prerequisite targets by state (NULL and 0
-- for a target with no jobs), in one pass over the job's own prerequisite
-- rows: target names have no index, and a query per target made a job
-- with thousands of them cost seconds. Then the target's purged jobs,
-- done and failed or deleted, which count for it still.
SELECT t.name, j.state, count(j.id), t.purged_done, t.purged_bad FROM job_prereqs jp JOIN targets t ON t.id = jp.target_id
LEFT JOIN jobs j ON j.target_id = jp.target_id
WHERE jp.job_id = ?
GROUP BY jp.target_id, j.state;

-- name: PurgedBadPrereq
-- An after-ok prerequisite target of job ? whose failed or deleted jobs
-- were purged: it blocks the job with no job left to name.
SELECT t.name FROM job_prereqs jp JOIN targets t ON t.id = jp.target_id
WHERE jp.job_id = ? AND jp.kind = 0 AND t.purged_bad > 0
ORDER BY t.name LIMIT 1;

-- name: PrereqSpans
-- Each of job ?'s prerequisite targets' lowest and highest job id and
-- its jobs, from jobs_target alone (no job's row is read): a target whose
-- jobs are every id between (an array, a job file's) is counted by state
-- from the core's sets of jobs by state, not by PrereqStates. Then its
-- purged jobs, as in PrereqStates.
SELECT t.name, coalesce((SELECT min(id) FROM jobs WHERE target_id = jp.target_id), 0),
	coalesce((SELECT max(id) FROM jobs WHERE target_id = jp.target_id), 0),
	(SELECT count(*) FROM jobs WHERE target_id = jp.target_id), t.purged_done, t.purged_bad
FROM job_prereqs jp JOIN targets t ON t.id = jp.target_id
WHERE jp.job_id = ?;

-- name: FailedPrereq
-- The first failed or deleted job of job ?'s after-ok prerequisite
-- targets (an after-any one never blocks): each target's first by its
-- jobs in id order (jobs_target), which stops there, where one query
-- over all their jobs read and sorted every one (a million-job target:
-- most of a second).
SELECT j.id, t.name, j.state FROM job_prereqs jp JOIN targets t ON t.id = jp.target_id
JOIN jobs j ON j.id = (SELECT f.id FROM jobs f WHERE f.target_id = jp.target_id AND f.state IN ('F', 'X') ORDER BY f.id LIMIT 1)
WHERE jp.job_id = ? AND jp.kind = 0
ORDER BY j.id LIMIT 1;

-- name: BlockedPrereqs
-- The blocked jobs of job ?'s after-ok prerequisite targets, when none
-- failed or was deleted: what blocks them blocks it.
SELECT j.id, t.name, j.state FROM job_prereqs jp
JOIN jobs j ON j.target_id = jp.target_id JOIN targets t ON t.id = j.target_id
WHERE jp.job_id = ? AND jp.kind = 0 AND j.state = 'B'
ORDER BY j.id LIMIT 1000;

-- name: History
-- A job's earlier attempts, oldest first, with what each cost: ?2 0 for
-- those that ran, 1 for those handed back unstarted.
SELECT a.attempt, coalesce(p.site, ''), coalesce(p.host, ''), a.started, a.finished, a.exit, a.reason,
	coalesce(p.out_dir, ''), a.cpu_user, a.cpu_sys, a.max_rss,
	(SELECT c.cost FROM charges c WHERE c.job_id = a.job_id AND c.attempt = a.attempt), coalesce(a.command, '')
FROM attempts a LEFT JOIN placeholders p ON p.id = a.placeholder_id
WHERE a.job_id = ?1 AND a.unstarted = ?2 ORDER BY a.attempt;

-- name: OutputLost
SELECT attempt, error FROM output_lost WHERE job_id = ?;

-- name: JobFiles
-- A job's declared files with the catalog's record of each.
SELECT f.kind, f.path, f.size, coalesce(c.size, -1), coalesce(c.site, ''), coalesce(c.host, ''),
	coalesce(c.producer, 0), coalesce(c.sha256, '')
FROM job_files f LEFT JOIN files c ON c.path = f.path
WHERE f.job_id = ? ORDER BY f.kind, f.seq;

-- name: JobTransfers
SELECT path, from_site, from_host, to_site, to_host, bytes, seconds, started, error, via
FROM transfers WHERE job_id = ? ORDER BY id;

-- name: Costed
-- Whether the queue named has a deadline or a budget.
SELECT e.deadline > 0 OR e.budget > 0 FROM queue_economics e
JOIN queues q ON q.id = e.queue_id WHERE q.name = ?;

-- name: ArraySpans
-- The arrays' ids, which a collapsed listing leaves out.
SELECT first_job, last_job FROM arrays ORDER BY first_job;

-- name: InArray
-- A condition's subquery on a listed job j: the array holding j.id is the one
-- with the greatest first id at or below it (an index lookup), if its last id
-- reaches it. The listing's builder puts it in NOT EXISTS (...) to collapse
-- arrays; it names j, so it is prepared only inside a query over jobs j.
SELECT 1 FROM arrays a
WHERE a.first_job = (SELECT max(first_job) FROM arrays WHERE first_job <= j.id) AND a.last_job >= j.id;

-- name: Streamed
-- Where a job's attempts' outputs lie in stream files, and the output
-- directory of the placeholder that wrote each.
SELECT e.attempt, e.stream, coalesce(p.out_dir, ''), e.file, e.last, e.bytes, e.cut
FROM output_extents e LEFT JOIN placeholders p ON p.id = e.placeholder_id
WHERE e.job_id = ?;

-- name: EmptyPrereqs
-- The prerequisite targets (after-ok or after-any) of jobs ?1..?2 that
-- have no job and had none purged, at most 9 (8 are named, a ninth says
-- there are more): their jobs wait until one is submitted.
SELECT DISTINCT t.name FROM job_prereqs jp JOIN targets t ON t.id = jp.target_id
WHERE jp.job_id BETWEEN ?1 AND ?2 AND t.purged_done = 0 AND t.purged_bad = 0
	AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.target_id = t.id)
ORDER BY t.name LIMIT 9;

-- name: JobEnv
-- A job's own environment, where its time limit is (MQ_TIME_LIMIT).
SELECT env FROM job_env WHERE job_id = ?;

-- name: QueueID
SELECT id FROM queues WHERE name = ?;

-- name: TopID
-- The highest job id given (0: none): a bound on how many jobs there are.
SELECT coalesce(max(id), 0) FROM jobs;

-- name: PrefixJobs
-- How many jobs, up to a bound, the targets whose names lie in [?, ?)
-- hold (a target prefix's): counted through jobs_target, not reading rows.
SELECT count(*) FROM (SELECT 1 FROM jobs WHERE target_id IN (SELECT id FROM targets WHERE name >= ? AND name < ?) LIMIT ?);
