-- Version 31: a queue's output mode (queues.output): 'files' keeps a
-- file per stdout and stderr of its jobs wherever they run (cls queue set
-- --output files), carried in each assignment; '': as the placeholder
-- does. The column is added ahead of this SQL (see steps.go,
-- addedColumns), only when missing.
SELECT 1;
