-- Version 30: the environment a bulk submission's jobs share (mqsub -V or
-- --export with --array or -f), stored once for the submission's ids
-- first_job..last_job (a commit's ids are contiguous) rather than with
-- each job: a million-job array with -V stores one environment. A job's
-- own environment (job_env: -v, a job file's "env") is laid over it when
-- the job is handed out. env is a JSON object, like job_env's.
CREATE TABLE IF NOT EXISTS submit_env (
	first_job INTEGER PRIMARY KEY,
	last_job  INTEGER NOT NULL CHECK (last_job >= first_job),
	env       TEXT NOT NULL
);
