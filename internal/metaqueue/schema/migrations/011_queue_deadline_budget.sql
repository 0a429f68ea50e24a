-- Version 11: a queue's deadline and budget (seed 002's economics; cls queue
-- set --deadline --budget). deadline is Unix seconds, budget is in the unit
-- sites are priced in; 0 = none, and a queue without a row has neither.
-- Stored now; planners that follow them are docs/seed002.md's "What is left".
CREATE TABLE IF NOT EXISTS queue_economics (
	queue_id INTEGER PRIMARY KEY,
	deadline REAL NOT NULL DEFAULT 0 CHECK (deadline >= 0),
	budget   REAL NOT NULL DEFAULT 0 CHECK (budget >= 0)
);
