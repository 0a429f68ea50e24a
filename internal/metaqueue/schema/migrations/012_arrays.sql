-- Version 12: job arrays (mqsub --array FIRST-LAST[:STEP][%LIMIT]). An
-- array's members are the contiguous job ids first_job..last_job of one bulk
-- commit; max_running caps how many of them execute at once (0 = no cap).
-- spec is the --array text, for display.
CREATE TABLE IF NOT EXISTS arrays (
	id          INTEGER PRIMARY KEY,
	first_job   INTEGER NOT NULL,
	last_job    INTEGER NOT NULL CHECK (last_job >= first_job),
	max_running INTEGER NOT NULL DEFAULT 0 CHECK (max_running >= 0),
	spec        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS arrays_first ON arrays(first_job);
