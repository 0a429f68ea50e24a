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
-- What the attempts of a target's jobs in one queue cost, per site.
SELECT c.site, sum(c.cost) FROM charges c JOIN jobs j ON j.id = c.job_id
WHERE j.target_id = ? AND j.queue_id = ? AND EXISTS (SELECT 1 FROM charges) GROUP BY c.site;

-- name: SpentByRange
-- What the attempts of an id range's jobs cost, per site.
SELECT c.site, sum(c.cost) FROM charges c JOIN jobs j ON j.id = c.job_id
WHERE j.id BETWEEN ? AND ? AND EXISTS (SELECT 1 FROM charges) GROUP BY c.site;

