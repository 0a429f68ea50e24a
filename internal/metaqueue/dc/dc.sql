-- Data-conscious scheduling's queries: the files live jobs declared
-- (job_files, written at submit by the core), read at load and when a job
-- is rerun. The schema is the core's (internal/metaqueue/schema/migrations).

-- name: PlaceholderPlace
SELECT site, host FROM placeholders WHERE id = ?;

-- name: LoadLive
-- CROSS JOIN: driven from the few rows here, not a scan of every job.
SELECT f.job_id, f.kind, f.path, f.size, f.rel, j.cwd FROM job_files f CROSS JOIN jobs j ON j.id = f.job_id
WHERE j.state IN ('W','Q','H','E','B') ORDER BY f.job_id, f.kind, f.seq;

-- name: LoadJob
SELECT f.job_id, f.kind, f.path, f.size, f.rel, j.cwd FROM job_files f JOIN jobs j ON j.id = f.job_id
WHERE f.job_id = ? ORDER BY f.kind, f.seq;

-- name: LoadChoosingSince
-- When each queue last began to choose (migration 32): its ready jobs'
-- queue time counts from no earlier (State.LoadReady).
SELECT id, choosing_since FROM queues WHERE choosing_since IS NOT NULL;
