-- Version 23: attempts gains command, the command an attempt ran when a
-- rerun gave its job a new one (mqsub --rerun ID --command CMD, mending a
-- failed job in place); NULL: the job's command. The column is added ahead
-- of this SQL (see steps.go, addedColumns), only when missing.
SELECT 1;
