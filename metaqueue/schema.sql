-- The metaqueue schema, version 4 (version 1 lacked jobs.bundle and submits; 2 lacked job_files and file_locations; 3 lacked output_lost). The CLS is the only writer.
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
	bundle         INTEGER NOT NULL DEFAULT 0, -- id of the bundle's first job; 0 = none
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

-- Files jobs declared (mqsub -i/-o), in the order given: kind 'i' is an
-- input, 'o' an output; size NULL = unknown. Paths are absolute and clean.
CREATE TABLE IF NOT EXISTS job_files (
	job_id INTEGER NOT NULL,
	kind   TEXT NOT NULL CHECK (kind IN ('i', 'o')),
	seq    INTEGER NOT NULL,
	path   TEXT NOT NULL,
	size   INTEGER,
	PRIMARY KEY (job_id, kind, seq)
) WITHOUT ROWID;

-- Where each declared output was last produced: the site (and host, for
-- the local site; '' otherwise) of the placeholder that ran job_id, which
-- ended Done. The last producer wins.
CREATE TABLE IF NOT EXISTS file_locations (
	path     TEXT PRIMARY KEY,
	site     TEXT NOT NULL,
	host     TEXT NOT NULL,
	size     INTEGER,
	job_id   INTEGER NOT NULL,
	produced INTEGER NOT NULL
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

-- Attempts whose output could not be written (a full disk, an I/O error)
-- where the placeholder writes it or where the CLS keeps its copy: the
-- first error says why. Rows only for such attempts, so the hot paths
-- (dispatch, report) write nothing here.
CREATE TABLE IF NOT EXISTS output_lost (
	job_id  INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	error   TEXT NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;

-- Submit requests that carried an idempotency token: a resent request
-- (its reply was lost) returns these ids instead of adding the jobs again.
CREATE TABLE IF NOT EXISTS submits (
	token   TEXT PRIMARY KEY,
	first   INTEGER NOT NULL,
	count   INTEGER NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;

-- Sites: where placeholders run (cls site add). spec is the site's
-- settings as JSON (protocol.SiteSpec), so new settings need no migration.
CREATE TABLE IF NOT EXISTS sites (
	name    TEXT PRIMARY KEY,
	spec    TEXT NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
