-- alter: the rows mqalter changes that no other module owns: a job's
-- estimate and its own environment (its time limit, MQ_TIME_LIMIT).

-- name: SetEst
UPDATE jobs SET est = ? WHERE id = ?;

-- name: JobEnv
SELECT env FROM job_env WHERE job_id = ?;

-- name: SetEnv
INSERT OR REPLACE INTO job_env (job_id, env) VALUES (?, ?);
