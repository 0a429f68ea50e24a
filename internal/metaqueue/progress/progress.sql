-- progress: what a progress watch counts that is not in the core's memory
-- (ended jobs, a target's jobs), what its jobs cost, and those that ended
-- otherwise than done. The schema is in the core's migrations.

-- name: EndedStates
-- Ended jobs of an id range by state: they are not in memory.
SELECT state, count(*) FROM jobs WHERE id BETWEEN ? AND ? AND state IN ('D','F','X') GROUP BY state;

-- name: States
-- A watch's jobs by state; its builder appends WHERE (its selection) and
-- GROUP BY state.
SELECT state, count(*) FROM jobs;

-- name: JobStates
-- Some of a watch's jobs' states; its builder appends WHERE (its
-- selection) AND id IN (...) with the jobs.
SELECT id, state FROM jobs;

-- name: NotDone
-- The jobs of a watch that ended otherwise than done; its builder appends
-- WHERE, ORDER BY id and LIMIT.
SELECT id, state, exit, reason FROM jobs;

-- name: SpentByTarget
-- What the attempts of a target's jobs cost, per site. SQLite walks the
-- target's jobs, looking each one's charges up: the EXISTS, which it
-- evaluates once before the walk, saves reading a million jobs where
-- nothing was ever charged (no site has a price).
SELECT c.site, sum(c.cost) FROM charges c JOIN jobs j ON j.id = c.job_id
WHERE j.target_id = ? AND EXISTS (SELECT 1 FROM charges) GROUP BY c.site;

-- name: SpentByTargetQueue
-- What the attempts of a target's jobs in one queue cost, per site (an
-- attempt's charge names its job's queue: the job's row is not read; the
-- + keeps SQLite from reading the queue's charges for every job).
SELECT c.site, sum(c.cost) FROM charges c JOIN jobs j ON j.id = c.job_id
WHERE j.target_id = ? AND +c.queue_id = ? AND EXISTS (SELECT 1 FROM charges) GROUP BY c.site;

-- name: ChargesUpTo
-- How many attempts were charged, counted up to a bound.
SELECT count(*) FROM (SELECT 1 FROM charges LIMIT ?);

-- name: SpentByTargetCharges
-- SpentByTarget reading every charge rather than every job of the target
-- (for a target of more jobs than there are charges), in the order
-- SpentByTarget sums them (by job, then attempt: the sums are the same to
-- the bit).
SELECT site, sum(cost) FROM (SELECT c.site, c.cost FROM charges c CROSS JOIN jobs j ON j.id = c.job_id
	WHERE j.target_id = ? ORDER BY c.job_id, c.attempt) GROUP BY site;

-- name: SpentByTargetQueueCharges
-- SpentByTargetQueue reading every charge of the queue.
SELECT site, sum(cost) FROM (SELECT c.site, c.cost FROM charges c CROSS JOIN jobs j ON j.id = c.job_id
	WHERE j.target_id = ? AND +c.queue_id = ? ORDER BY c.job_id, c.attempt) GROUP BY site;

-- name: SpentByRange
-- What the attempts of an id range's jobs cost, per site.
SELECT c.site, sum(c.cost) FROM charges c JOIN jobs j ON j.id = c.job_id
WHERE j.id BETWEEN ? AND ? AND EXISTS (SELECT 1 FROM charges) GROUP BY c.site;

