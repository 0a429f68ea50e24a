-- Version 17: plans' predicted timelines (cls plan show). Each plan made
-- is a row of plans: its target, planner, when it was made, the makespan
-- and bytes moved it predicts; plan_sites keeps the slots it assumed per
-- site (for utilisation). Columns added ahead of this SQL (see
-- steps.go, addedColumns), only when missing: job_plans.plan_id (the
-- plan the row belongs to; NULL for rows older than this version),
-- start_s and end_s (the job's predicted start and end, seconds from the
-- plan's start), slot (which of its site's slots) and ready_s (when its
-- prerequisites are predicted to end: from ready_s to start_s the plan
-- itself has the job wait for its site, and the CLS waits that much
-- longer before another site may take it). A plan no job_plans
-- row refers to any more (planned again) is dropped; all are cleared with
-- the plans.
CREATE TABLE IF NOT EXISTS plans (
	id          INTEGER PRIMARY KEY,
	target      TEXT NOT NULL,
	planner     TEXT NOT NULL,
	made        INTEGER NOT NULL,
	makespan_s  REAL NOT NULL,
	moved_bytes INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS plan_sites (
	plan_id INTEGER NOT NULL,
	site    TEXT NOT NULL,
	slots   INTEGER NOT NULL,
	PRIMARY KEY (plan_id, site)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_plans_plan ON job_plans (plan_id, site, start_s);
