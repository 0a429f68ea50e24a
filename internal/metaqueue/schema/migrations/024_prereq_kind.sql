-- Version 24: job_prereqs gains kind, what the job needs of the target: 0
-- after-ok (every job Done), 1 after-any (every job ended, in any state;
-- mqsub --after-any). The column is added ahead of this SQL (see
-- steps.go, addedColumns), only when missing.
SELECT 1;
