-- Version 8: plans (cls plan make). A job's planned site, its place in
-- the plan's order and the planner that chose it. The CLS gives a
-- placeholder at that site the job first; elsewhere it waits a while for
-- it (see metaqueue/plan.go). A row outlives its job's end: mqstat -j
-- shows where it was planned and where it ran.
CREATE TABLE IF NOT EXISTS job_plans (
	job_id  INTEGER PRIMARY KEY,
	site    TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	planner TEXT NOT NULL
);
