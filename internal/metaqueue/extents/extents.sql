-- Output streams: where attempts' outputs lie in their placeholders'
-- stream files (migration 026); the core writes them through Save.

-- name: InsertStreamed
-- A resent report changes nothing: the first extent recorded stays.
INSERT OR IGNORE INTO output_extents (job_id, attempt, stream, placeholder_id, file, last, bytes, cut)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: InsertOutputLost
-- The first cause recorded stays.
INSERT OR IGNORE INTO output_lost (job_id, attempt, error) VALUES (?, ?, ?);
