-- The plans' queries (cls plan make, plan show, plan clear, mqstat -j).
-- The tables are job_plans, plans, plan_sites and plan_files
-- (internal/metaqueue/schema/migrations); the planning problem and the runtime
-- samples read the core's and the catalog's tables, never write them.

-- name: LoadLive
-- CROSS JOIN: driven from the few rows here, not a scan of every job. The
-- last column is when a ready job's patience counts from (Plans.Load): the
-- latest of its ready time (jobs.ready; NULL: its submission), its last
-- attempt's end (a requeue gave it a fresh patience) and its plan's making.
SELECT p.job_id, p.site, p.seq, coalesce(p.start_s - p.ready_s, 0),
	max(coalesce(j.ready, j.submitted), coalesce((SELECT max(a.finished) FROM attempts a WHERE a.job_id = p.job_id), 0),
		coalesce((SELECT made FROM plans WHERE plans.id = p.plan_id), 0))
FROM job_plans p CROSS JOIN jobs j ON j.id = p.job_id
WHERE j.state NOT IN ('D', 'F', 'X');

-- name: LoadFiles
SELECT path, site FROM plan_files;

-- name: InsertPlan
INSERT INTO plans (target, planner, made, makespan_s, moved_bytes) VALUES (?, ?, ?, ?, ?);

-- name: InsertSite
INSERT OR REPLACE INTO plan_sites (plan_id, site, slots) VALUES (?, ?, ?);

-- name: InsertJob
INSERT OR REPLACE INTO job_plans (job_id, site, seq, planner, plan_id, start_s, end_s, ready_s, slot)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: DropEmptyPlans
DELETE FROM plans WHERE id NOT IN (SELECT plan_id FROM job_plans WHERE plan_id IS NOT NULL);

-- name: DropOrphanSites
DELETE FROM plan_sites WHERE plan_id NOT IN (SELECT id FROM plans);

-- name: InsertFile
INSERT OR REPLACE INTO plan_files (path, site) VALUES (?, ?);

-- name: ClearJobs
DELETE FROM job_plans;

-- name: ClearFiles
DELETE FROM plan_files;

-- name: ClearPlans
DELETE FROM plans;

-- name: ClearSites
DELETE FROM plan_sites;

-- name: JobPlan
SELECT site, seq, planner FROM job_plans WHERE job_id = ?;

-- name: TargetID
SELECT id FROM targets WHERE name = ?;

-- name: TargetJobs
-- With each job's request (packing's job_resources, the row of a job that
-- asks): its cores are the slots it holds in the planners' model.
SELECT j.id, j.state, coalesce(j.est, 0), j.command,
	coalesce((SELECT r.resources FROM job_resources r WHERE r.job_id = j.id), '')
FROM jobs j WHERE j.target_id = ? ORDER BY j.id;

-- name: TargetPrereqs
SELECT jp.job_id, jp.target_id FROM job_prereqs jp JOIN jobs j ON j.id = jp.job_id
WHERE j.target_id = ?;

-- name: JobFiles
SELECT job_id, kind, path, coalesce(size, 0) FROM job_files ORDER BY job_id, kind, seq;

-- name: ReplicaSites
SELECT DISTINCT site FROM replicas WHERE path = ? UNION SELECT site FROM files WHERE path = ? AND site <> '';

-- name: RuntimeSamples
SELECT j.command, p.site, j.finished - j.started FROM jobs j
JOIN placeholders p ON p.id = j.placeholder_id
WHERE j.state = 'D' AND j.started IS NOT NULL AND j.finished >= j.started
ORDER BY j.id DESC LIMIT ?;

-- name: ShowSites
SELECT p.planner, p.site, count(*),
	sum(CASE WHEN j.state IN ('D', 'F', 'X') THEN 1 ELSE 0 END),
	sum(CASE WHEN ph.site = p.site THEN 1 ELSE 0 END),
	sum(CASE WHEN ph.site IS NOT NULL AND ph.site <> p.site THEN 1 ELSE 0 END)
FROM job_plans p JOIN jobs j ON j.id = p.job_id
LEFT JOIN placeholders ph ON ph.id = j.placeholder_id
GROUP BY p.planner, p.site ORDER BY p.planner, p.site;

-- name: ShowUntimed
SELECT count(*) FROM job_plans WHERE plan_id IS NULL;

-- name: ShowOlder
SELECT max(count(*) - ?, 0) FROM plans;

-- name: ShowPlans
SELECT * FROM (SELECT id, target, planner, made, makespan_s, moved_bytes
	FROM plans ORDER BY id DESC LIMIT ?) ORDER BY id;

-- name: PlanSites
SELECT site, slots FROM plan_sites WHERE plan_id = ? ORDER BY site;

-- name: PlanJobs
SELECT p.job_id, p.site, coalesce(p.slot, 0), coalesce(p.start_s, 0), coalesce(p.end_s, 0),
	t.name, j.state, coalesce(ph.site, '')
FROM job_plans p JOIN jobs j ON j.id = p.job_id JOIN targets t ON t.id = j.target_id
LEFT JOIN placeholders ph ON ph.id = j.placeholder_id
WHERE p.plan_id = ? ORDER BY p.seq;
