-- Version 26: where each attempt's stdout and stderr lie when its
-- placeholder wrote them to a stream file (cls serve --output streams):
-- the file, named in the placeholder's output directory's streams/, and
-- the output's extent in it (package outstream). stream is 0 for stdout,
-- 1 for stderr. A row is written with the attempt's end, in its
-- transaction; an output that held no byte has none.
CREATE TABLE IF NOT EXISTS output_extents (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	stream         INTEGER NOT NULL CHECK (stream IN (0, 1)),
	placeholder_id INTEGER NOT NULL,
	file           TEXT NOT NULL,
	last           INTEGER NOT NULL CHECK (last >= 0),
	bytes          INTEGER NOT NULL CHECK (bytes > 0),
	cut            INTEGER NOT NULL DEFAULT 0 CHECK (cut IN (0, 1)),
	PRIMARY KEY (job_id, attempt, stream)
) WITHOUT ROWID;
