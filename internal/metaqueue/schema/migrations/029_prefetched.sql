-- Version 29: jobs gains prefetched, 1 while an Executing job's placeholder
-- holds it fetched ahead of a free slot and has not said it started it
-- (mqstat shows P); NULL otherwise. Dispatch sets it, the placeholder's
-- next message clears it; it means nothing outside state E. Rows of older
-- versions are NULL: shown E, as they were. attempts gains unstarted, 1
-- for an attempt its placeholder handed back before starting it: its
-- number is taken, it ran nothing, and mqstat -j lists it apart from the
-- history. The columns are added ahead of this SQL (see steps.go,
-- addedColumns), only when missing.
SELECT 1;
