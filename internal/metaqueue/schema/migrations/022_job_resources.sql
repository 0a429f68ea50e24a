-- Version 22: what a job asks of a placeholder (mqsub --cpus, --mem,
-- --gpus, --resource, or its queue's defaults applied at submit):
-- protocol.Resources as JSON. Only jobs that ask get a row, as in job_env.
CREATE TABLE IF NOT EXISTS job_resources (
	job_id    INTEGER PRIMARY KEY,
	resources TEXT NOT NULL
);
