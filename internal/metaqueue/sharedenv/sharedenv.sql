-- sharedenv: the environment a bulk commit's jobs share (submit_env).

-- name: Insert
-- The environment a bulk commit's jobs first..last share (Bulk.SharedEnv).
INSERT INTO submit_env (first_job, last_job, env) VALUES (?, ?, ?);
