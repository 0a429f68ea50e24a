-- Output streams: where attempts' outputs lie in their placeholders'
-- stream files (migration 026); the core writes them through Save.

-- name: InsertStreamed
-- A resent report changes nothing: the first extent recorded stays.
INSERT OR IGNORE INTO output_extents (job_id, attempt, stream, placeholder_id, file, last, bytes, cut)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: InsertOutputLost
-- The first cause recorded stays.
INSERT OR IGNORE INTO output_lost (job_id, attempt, error) VALUES (?, ?, ?);

-- name: InsertStreamedDeleted
-- InsertStreamed for a report that came after its job was deleted while
-- executing: kept only if the job's row says placeholder ?4 ran attempt ?2.
INSERT OR IGNORE INTO output_extents (job_id, attempt, stream, placeholder_id, file, last, bytes, cut)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8 WHERE EXISTS (SELECT 1 FROM jobs
	WHERE id = ?1 AND state = 'X' AND coalesce(row_attempt, attempts) = ?2 AND placeholder_id = ?4);
