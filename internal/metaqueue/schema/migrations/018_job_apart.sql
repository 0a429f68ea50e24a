-- Version 18: which attempt of an executing job runs in a scratch
-- directory of its own (job replication). Only such an attempt
-- may have copies beside it: one run in the job's working directory would
-- write its outputs over a winning copy's. A job's row is kept while the
-- attempt its row describes runs apart and has not won its race; the
-- copies (job_copies) always run apart. A row whose attempt is not the
-- one the job row describes is stale and means nothing.
CREATE TABLE IF NOT EXISTS job_apart (
	job_id  INTEGER PRIMARY KEY,
	attempt INTEGER NOT NULL
);
