-- conn: the writer connection's own statements: its transactions (one per
-- batch of calls) and its settings.

-- name: Begin
-- IMMEDIATE: the write lock is taken here, not at the batch's first write.
BEGIN IMMEDIATE;

-- name: Commit
COMMIT;

-- name: Rollback
ROLLBACK;

-- name: SynchronousFull
-- How hard a commit goes to disk is chosen batch by batch (syncFor);
-- SQLite takes it only between transactions.
PRAGMA synchronous = full;

-- name: SynchronousNormal
PRAGMA synchronous = normal;

-- name: ShrinkMemory
-- After a large bulk commit: give the page cache's memory back.
PRAGMA shrink_memory;
