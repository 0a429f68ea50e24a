-- bundles: jobs of one submit dispatched together, named by the bundle's
-- first job (jobs.bundle; 0 = none).

-- name: SetBundle
-- Jobs ?1..?2 dispatch together: the bundle is named by its first job.
UPDATE jobs SET bundle = ?1 WHERE id BETWEEN ?1 AND ?2;

-- name: LiveBundles
SELECT id, bundle FROM jobs WHERE bundle <> 0 AND state IN ('W','Q','H','E','B') ORDER BY id;
