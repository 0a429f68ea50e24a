-- targets: the names jobs are grouped under and depend on.

-- name: InsertTargets
-- New targets have consecutive ids: ?1 is the first, ?2 a JSON array of their
-- names (one bound value, not two per row).
INSERT INTO targets (id, name) SELECT ?1 + key, value FROM json_each(?2);

-- name: LoadTargets
SELECT id, name FROM targets ORDER BY id;
