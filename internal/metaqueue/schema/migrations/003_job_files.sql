-- Version 3: files jobs declare, and where outputs were produced (DC).

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
