-- Version 6: target names lose their UNIQUE index. The CLS is the only
-- writer and looks every name up in memory before adding a target, so the
-- index only cost a random B-tree insert per new target (a pipeline submit
-- adds one or two targets per job); nothing reads targets by name (a job's
-- prerequisites are found by id). Store.load refuses duplicate names.
CREATE TABLE targets_new (
	id   INTEGER PRIMARY KEY,
	name TEXT NOT NULL
);
INSERT INTO targets_new (id, name) SELECT id, name FROM targets ORDER BY id;
DROP TABLE targets;
ALTER TABLE targets_new RENAME TO targets;
