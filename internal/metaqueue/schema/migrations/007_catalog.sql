-- Version 7: the data-staging catalog (DESIGN.md, "Data staging").

-- job_files gains rel (added ahead of this SQL, see steps.go): 1 = the
-- job declared the path relative to its working directory, so the file
-- may be moved between sites; 0 = absolute, site-local.

-- Every file the catalog knows: size and SHA-256 (NULL / '' = unknown),
-- the job that produced it (0 = a user's file) and where (site, host),
-- and for a user's file on the CLS host its mtime (ns) and size at
-- submit, so a change after submission is noticed.
CREATE TABLE IF NOT EXISTS files (
	path         TEXT PRIMARY KEY,
	size         INTEGER,
	sha256       TEXT NOT NULL DEFAULT '',
	producer     INTEGER NOT NULL DEFAULT 0,
	site         TEXT NOT NULL DEFAULT '',
	host         TEXT NOT NULL DEFAULT '',
	cls_mtime_ns INTEGER,
	cls_size     INTEGER
) WITHOUT ROWID;

-- The places holding a copy of each file: a site, and a host at the
-- local site ('' for the CLS host's own files).
CREATE TABLE IF NOT EXISTS replicas (
	path   TEXT NOT NULL,
	site   TEXT NOT NULL,
	host   TEXT NOT NULL,
	size   INTEGER,
	sha256 TEXT NOT NULL DEFAULT '',
	made   INTEGER NOT NULL,
	PRIMARY KEY (path, site, host)
) WITHOUT ROWID;

-- Every copy made between places, for accounting (job 0 = a user's
-- files.get).
CREATE TABLE IF NOT EXISTS transfers (
	id        INTEGER PRIMARY KEY,
	job_id    INTEGER NOT NULL DEFAULT 0,
	path      TEXT NOT NULL,
	from_site TEXT NOT NULL,
	from_host TEXT NOT NULL,
	to_site   TEXT NOT NULL,
	to_host   TEXT NOT NULL,
	bytes     INTEGER NOT NULL,
	seconds   REAL NOT NULL,
	started   INTEGER NOT NULL,
	error     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS transfers_job ON transfers (job_id);

-- file_locations (version 3: where each output was last produced) folds
-- into the catalog: the producer's place becomes the file's one replica.
-- (Made here if a database re-running this step no longer has it.)
CREATE TABLE IF NOT EXISTS file_locations (
	path     TEXT PRIMARY KEY,
	site     TEXT NOT NULL,
	host     TEXT NOT NULL,
	size     INTEGER,
	job_id   INTEGER NOT NULL,
	produced INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO files (path, size, producer, site, host)
	SELECT path, size, job_id, site, host FROM file_locations;
INSERT OR IGNORE INTO replicas (path, site, host, size, made)
	SELECT path, site, host, size, produced FROM file_locations;
DROP TABLE file_locations;
