-- purge: removing ended jobs for good (cls purge). Everything the core
-- keeps of a job goes with it, one job at a time, inside the batch's
-- transaction. charges stay: a queue's spending is their sum.

-- name: Candidates
-- The next ended jobs after id ?2 that ended before ?3 (Unix µs), in the
-- states ?1 names; the builder appends the selector's conditions, ORDER
-- BY and LIMIT. A job deleted before it ran has no finished time before
-- 2.0 databases: its submission time stands in.
SELECT id, target_id, attempts, bundle FROM jobs
WHERE instr(?, state) > 0 AND id > ? AND COALESCE(finished, submitted) < ?;

-- name: DeleteJob
-- The job row, only while it is still ended and old enough (a rerun
-- between the read and the batch keeps it); RETURNING says what went.
DELETE FROM jobs WHERE id = ? AND state IN ('D', 'F', 'X') AND COALESCE(finished, submitted) < ?
RETURNING state, queue_id, target_id;

-- name: DeleteAttempts
-- The other rows of the batch's purged jobs, whose ids are a JSON array.
DELETE FROM attempts WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeletePrereqs
DELETE FROM job_prereqs WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeleteEnv
DELETE FROM job_env WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeleteResources
DELETE FROM job_resources WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeletePriority
DELETE FROM job_priority WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeleteOutputLost
DELETE FROM output_lost WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeleteFiles
DELETE FROM job_files WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeletePlan
DELETE FROM job_plans WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeleteNoReplicate
DELETE FROM job_no_replicate WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeleteCopies
DELETE FROM job_copies WHERE job_id IN (SELECT value FROM json_each(?));

-- name: DeleteApart
DELETE FROM job_apart WHERE job_id IN (SELECT value FROM json_each(?));

-- name: ArrayOf
-- The array job ? belongs to, with its range.
SELECT id, first_job, last_job FROM arrays WHERE first_job <= ?1 AND last_job >= ?1
ORDER BY first_job DESC LIMIT 1;

-- name: DropEmptyArray
-- An array whose every member was purged.
DELETE FROM arrays WHERE id = ? AND NOT EXISTS (
	SELECT 1 FROM jobs WHERE id BETWEEN arrays.first_job AND arrays.last_job);

-- name: AddPurged
-- Counts ?2 purged Done and ?3 purged bad jobs to target ?1.
UPDATE targets SET purged_done = purged_done + ?2, purged_bad = purged_bad + ?3 WHERE id = ?1;

-- name: LoadPurged
SELECT id, purged_done, purged_bad FROM targets WHERE purged_done > 0 OR purged_bad > 0;

-- name: NextID
SELECT value FROM meta WHERE key = 'next_job_id';

-- name: SetNextID
INSERT OR REPLACE INTO meta (key, value) VALUES ('next_job_id', ?);
