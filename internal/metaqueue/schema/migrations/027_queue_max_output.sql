-- Version 27: a queue's cap on what one attempt of its jobs may write to
-- stdout and stderr together (queues.max_output, bytes; 0: none but the
-- placeholder's own), carried in each assignment. The column is added
-- ahead of this SQL (see steps.go, addedColumns), only when missing.
SELECT 1;
