-- Version 13: what each attempt cost (seed 002's economics). An attempt that
-- ran at a priced site, or of a queue with a deadline or budget, is charged
-- when it ends, in the same transaction: seconds from its start to its end
-- times its site's price per core-hour (one core per job slot). site is the
-- placeholder's site, price the price it was charged at, ok whether the
-- attempt succeeded (its seconds are then a measured runtime at the site,
-- which the deadline-and-budget planner learns rates from).
CREATE TABLE IF NOT EXISTS charges (
	job_id   INTEGER NOT NULL,
	attempt  INTEGER NOT NULL,
	queue_id INTEGER NOT NULL,
	site     TEXT NOT NULL,
	seconds  REAL NOT NULL CHECK (seconds >= 0),
	price    REAL NOT NULL CHECK (price >= 0),
	cost     REAL NOT NULL CHECK (cost >= 0),
	ok       INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (job_id, attempt)
);
CREATE INDEX IF NOT EXISTS charges_queue ON charges(queue_id);
