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

-- name: DeleteJobs
-- The job rows of ids ?1 (a JSON array), only those still ended before ?2
-- (a rerun between the read and the batch keeps a job); RETURNING says
-- what went.
DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))
	AND state IN ('D', 'F', 'X') AND COALESCE(finished, submitted) < ?2
RETURNING id, state, queue_id;

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

-- name: DeleteExtents
-- Where the jobs' streamed outputs lay (a stream file goes at the end of
-- the purge once no extent names it: RemoveStreams).
DELETE FROM output_extents WHERE job_id IN (SELECT value FROM json_each(?));

-- name: ArraysIn
-- The arrays holding any id in ?1..?2: the one that begins last at or
-- before ?1, and those that begin after it up to ?2 (arrays never overlap).
SELECT * FROM (SELECT id, first_job, last_job FROM arrays WHERE first_job <= ?1
	ORDER BY first_job DESC LIMIT 1)
UNION ALL
SELECT id, first_job, last_job FROM arrays WHERE first_job > ?1 AND first_job <= ?2;

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

-- name: StreamFilesNamed
-- The stream files some extent still names, and how many name each (one
-- scan; a CLS has a few such files per placeholder).
SELECT file, COUNT(*) FROM output_extents GROUP BY file;

-- name: StreamFilesOf
-- StreamFilesNamed for the extents of jobs ?1 (a JSON array): a dry
-- run's batch.
SELECT file, COUNT(*) FROM output_extents WHERE job_id IN (SELECT value FROM json_each(?1)) GROUP BY file;
