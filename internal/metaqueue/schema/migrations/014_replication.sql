-- Version 14: job replication (seed 000's WQR and Storage
-- Affinity). A job may run as several attempts at once; the first to
-- finish wins and the others are killed.

-- Columns added ahead of this SQL (see steps.go, addedColumns), each
-- only when missing:
-- jobs.row_attempt: the attempt the job row describes when it is not the
--   last one numbered (attempts): the original while copies with later
--   numbers run beside it, or the copy that won. NULL: attempts.
-- queues.max_copies: a queue's bound on the attempts of one job running
--   at once (0: the policy's default; 1: never copy).
-- attempts.killed_copy: 1 for an attempt killed because another attempt
--   of its job won (seed 000's CPU and network waste add these up).

-- Jobs that must never run as more than one attempt at once
-- (mqsub --no-replicate).
CREATE TABLE IF NOT EXISTS job_no_replicate (
	job_id INTEGER PRIMARY KEY
);

-- The copies running now beside the attempt the job row describes.
CREATE TABLE IF NOT EXISTS job_copies (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	placeholder_id INTEGER NOT NULL,
	started        INTEGER NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
