-- Version 15: where plans keep files (cls plan make). A planner places
-- each file a planned job writes at a site (AEH-ETAA chooses; HEFT and
-- MinMin keep it where its producer is planned). When the producer ends
-- Done somewhere else, the CLS copies the file to the planned site with
-- the data stager, so the jobs planned there find it (metaqueue/plan.go,
-- planKeep). Cleared with the plans.
CREATE TABLE IF NOT EXISTS plan_files (
	path TEXT PRIMARY KEY,
	site TEXT NOT NULL
) WITHOUT ROWID;
