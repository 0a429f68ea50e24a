-- Version 19: what LP provisioning measures of a queue's jobs beyond what
-- charges holds, so a restarted CLS plans from it and not from declared
-- estimates. stage_runtimes is each queue's succeeded attempts
-- at a site that were not charged (an uncosted queue the LP caps, at an
-- unpriced site): their seconds and count; charged ones are in charges.
-- stage_output is the bytes each queue's Done jobs wrote (their outputs'
-- reported sizes, else declared ones) and how many jobs that counts.
-- Both are running totals the core writes in the transaction of the jobs'
-- ends, a row per queue (and site) changed, once per commit.
CREATE TABLE IF NOT EXISTS stage_runtimes (
	queue_id INTEGER NOT NULL,
	site     TEXT NOT NULL,
	seconds  REAL NOT NULL CHECK (seconds >= 0),
	runs     INTEGER NOT NULL CHECK (runs >= 0),
	PRIMARY KEY (queue_id, site)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stage_output (
	queue_id INTEGER PRIMARY KEY,
	bytes    REAL NOT NULL CHECK (bytes >= 0),
	jobs     INTEGER NOT NULL CHECK (jobs >= 0)
);
