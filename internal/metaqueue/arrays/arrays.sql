-- arrays: job arrays, each a range of job ids submitted together (one bulk
-- commit, mqsub --array).

-- name: Load
-- Every array, with the cap on its members executing at once (0: none).
SELECT a.id, a.first_job, a.last_job, a.max_running FROM arrays a ORDER BY a.first_job;

-- name: InsertArray
INSERT INTO arrays (first_job, last_job, max_running, spec) VALUES (?, ?, ?, ?) RETURNING id;

-- name: List
-- Every array with its queue and target, those of its first member still
-- kept (a purge may have taken the first ones); the builder appends WHERE
-- (a queue, a target) and ORDER BY.
SELECT a.first_job, a.last_job, a.spec, a.max_running, qu.name, t.name FROM arrays a
JOIN jobs j ON j.id = (SELECT min(id) FROM jobs WHERE id BETWEEN a.first_job AND a.last_job)
JOIN queues qu ON qu.id = j.queue_id JOIN targets t ON t.id = j.target_id;

-- name: ListOfJob
-- List's columns for the array holding job ?1 (passed twice); the builder
-- appends ORDER BY.
SELECT a.first_job, a.last_job, a.spec, a.max_running, qu.name, t.name FROM arrays a
JOIN jobs j ON j.id = (SELECT min(id) FROM jobs WHERE id BETWEEN a.first_job AND a.last_job)
JOIN queues qu ON qu.id = j.queue_id JOIN targets t ON t.id = j.target_id
WHERE a.first_job = (SELECT max(first_job) FROM arrays WHERE first_job <= ?) AND a.last_job >= ?;
