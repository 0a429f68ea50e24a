-- Version 4: attempts whose output could not be written (a full disk, an
-- I/O error) where the placeholder writes it or where the CLS keeps its
-- copy: the first error says why. Rows only for such attempts, so the hot
-- paths (dispatch, report) write nothing here.
CREATE TABLE IF NOT EXISTS output_lost (
	job_id  INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	error   TEXT NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
