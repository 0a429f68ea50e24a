-- Version 9: per-job environment (mqsub -v NAME=VALUE, a job file's "env",
-- a job array's MQ_ARRAY_INDEX). Only jobs that have one get a row, so bulk
-- submissions without it pay nothing. env is a JSON object of strings.
CREATE TABLE IF NOT EXISTS job_env (
	job_id INTEGER PRIMARY KEY,
	env    TEXT NOT NULL
);
