-- arrays: job arrays, each a range of job ids submitted together (one bulk
-- commit, mqsub --array).

-- name: LoadLimited
-- The arrays whose members run at most max_running at once.
SELECT a.id, a.first_job, a.last_job, a.max_running FROM arrays a
WHERE a.max_running > 0 ORDER BY a.first_job;

-- name: InsertArray
INSERT INTO arrays (first_job, last_job, max_running, spec) VALUES (?, ?, ?, ?) RETURNING id;

-- name: List
-- Every array with its queue and target; the builder appends WHERE (a queue,
-- a target) and ORDER BY.
SELECT a.first_job, a.last_job, a.spec, a.max_running, qu.name, t.name FROM arrays a
JOIN jobs j ON j.id = a.first_job JOIN queues qu ON qu.id = j.queue_id JOIN targets t ON t.id = j.target_id;

-- name: ListOfJob
-- List's columns for the array holding job ?1 (passed twice); the builder
-- appends ORDER BY.
SELECT a.first_job, a.last_job, a.spec, a.max_running, qu.name, t.name FROM arrays a
JOIN jobs j ON j.id = a.first_job JOIN queues qu ON qu.id = j.queue_id JOIN targets t ON t.id = j.target_id
WHERE a.first_job = (SELECT max(first_job) FROM arrays WHERE first_job <= ?) AND a.last_job >= ?;

-- name: MemberStates
-- An array's members (ids ?..?) by state, P for an Executing one not
-- started yet (the prefetched mark, as the listing shows it).
SELECT CASE WHEN state = 'E' AND prefetched = 1 THEN 'P' ELSE state END AS st, count(*)
FROM jobs WHERE id BETWEEN ? AND ? GROUP BY st;
