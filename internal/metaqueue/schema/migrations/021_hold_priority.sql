-- Version 21: held jobs and job priorities. jobs.state takes 'H' (held:
-- never dispatched until released). SQLite cannot alter a CHECK, so jobs
-- is rebuilt: the step's Go half (allowHeld) creates jobs_rebuilt from
-- jobs' stored definition with the check widened; this copies every row,
-- swaps the tables and makes jobs' index again. It costs one copy of the
-- table, once.
INSERT INTO jobs_rebuilt SELECT * FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_rebuilt RENAME TO jobs;
CREATE INDEX IF NOT EXISTS jobs_target ON jobs (target_id);
-- A job's priority (mqsub -p, higher first within its queue) is kept only
-- when it is not 0: the bulk insert of jobs is unchanged, and a metaqueue
-- that never uses priorities stores nothing more.
CREATE TABLE IF NOT EXISTS job_priority (
	job_id   INTEGER PRIMARY KEY,
	priority INTEGER NOT NULL CHECK (priority BETWEEN -1024 AND 1023 AND priority <> 0)
);
