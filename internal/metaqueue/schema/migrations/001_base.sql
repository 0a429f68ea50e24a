-- Version 1: the metaqueue as it began. The CLS is the only writer.
-- Times are Unix microseconds.
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS queues (
	id           INTEGER PRIMARY KEY,
	name         TEXT NOT NULL UNIQUE,
	ceiling_s    REAL NOT NULL DEFAULT 0 CHECK (ceiling_s >= 0),
	max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	retry_failed INTEGER NOT NULL DEFAULT 0 CHECK (retry_failed IN (0, 1)),
	policy       TEXT NOT NULL DEFAULT 'fcfs',
	created      INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS targets (
	id   INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE
);

CREATE TABLE IF NOT EXISTS placeholders (
	id        INTEGER PRIMARY KEY,
	site      TEXT NOT NULL,
	host      TEXT NOT NULL,
	pid       INTEGER NOT NULL,
	out_dir   TEXT NOT NULL,
	slots     INTEGER NOT NULL,
	started   INTEGER NOT NULL,
	last_seen INTEGER NOT NULL,
	identity  TEXT NOT NULL DEFAULT '' -- the credential that registered it: "socket", "ssh-key:SHA256:..."
);

-- One row per job. The current (or last) attempt lives in the row; earlier
-- attempts that did not end the job are in attempts.
CREATE TABLE IF NOT EXISTS jobs (
	id             INTEGER PRIMARY KEY,
	queue_id       INTEGER NOT NULL,
	target_id      INTEGER NOT NULL,
	state          TEXT NOT NULL CHECK (state IN ('W','Q','E','D','F','B','X')),
	command        TEXT NOT NULL,
	cwd            TEXT NOT NULL,
	est            REAL,
	submitted      INTEGER NOT NULL,
	attempts       INTEGER NOT NULL DEFAULT 0,
	attempt_base   INTEGER NOT NULL DEFAULT 0, -- attempts when last rerun
	placeholder_id INTEGER,
	started        INTEGER,
	finished       INTEGER,
	exit           INTEGER,
	reason         TEXT,
	CHECK (state <> 'E' OR placeholder_id IS NOT NULL)
);
-- No index on state: bulk inserts would pay for it on every row, and
-- listings filtered by state are better served by a scan in id order (the
-- order they are shown in) than by an index that forces a sort.
CREATE INDEX IF NOT EXISTS jobs_target ON jobs (target_id);

CREATE TABLE IF NOT EXISTS job_prereqs (
	job_id    INTEGER NOT NULL,
	target_id INTEGER NOT NULL,
	PRIMARY KEY (job_id, target_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS attempts (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	placeholder_id INTEGER,
	started        INTEGER,
	finished       INTEGER,
	exit           INTEGER,
	reason         TEXT NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
