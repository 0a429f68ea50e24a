-- Version 10: accounting. jobs and attempts gain cpu_user, cpu_sys (REAL,
-- seconds) and max_rss (INTEGER, bytes): each attempt's figures as its
-- placeholder measured them from the process's rusage; NULL when not
-- measured (a lost attempt, a job that did not start, a no-op agent, rows
-- older than this version). The columns are added ahead of this SQL (see
-- steps.go, addedColumns), each only when missing. Elapsed time is
-- finished - started; the host is the placeholder's.
SELECT 1;
