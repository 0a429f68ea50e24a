-- Version 25: what cls purge removed still counts. A target keeps how many
-- of its jobs were purged Done and purged bad (failed or deleted), so a
-- target whose jobs are gone stays complete (or failed) for dependents
-- submitted later; load adds them to the graph's counts. The highest job
-- id ever given is kept in meta('next_job_id') by purge, so a purged id
-- is never given again. The columns are added ahead of this SQL (see
-- steps.go, addedColumns), only when missing.
SELECT 1;
