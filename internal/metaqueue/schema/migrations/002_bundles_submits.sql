-- Version 2: bundles (jobs dispatched together) and submit idempotency
-- tokens. (placeholders.identity, which the first version 1 databases
-- lacked, is added by this step's Go part where missing.)
ALTER TABLE jobs ADD COLUMN bundle INTEGER NOT NULL DEFAULT 0; -- id of the bundle's first job; 0 = none

-- Submit requests that carried an idempotency token: a resent request
-- (its reply was lost) returns these ids instead of adding the jobs again.
CREATE TABLE IF NOT EXISTS submits (
	token   TEXT PRIMARY KEY,
	first   INTEGER NOT NULL,
	count   INTEGER NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
