-- schema: the statements migrating the database uses: its version in
-- meta('schema'), what an older database already has, and the
-- transaction each step runs in (the core keeps its own in conn.sql).

-- name: SchemaVersion
SELECT value FROM meta WHERE key = 'schema';

-- name: SetSchemaVersion
INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?);

-- name: HasColumn
-- Whether table ?1 has column ?2: a migration adds a column only where an
-- older database lacks it.
SELECT count(*) FROM pragma_table_info(?) WHERE name = ?;

-- name: HasTable
-- Whether table ? exists: a step some builds skipped left none.
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?;

-- name: TableSQL
-- The CREATE statement of table ?: a migration that changes a constraint
-- rebuilds the table from it.
SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?;

-- name: Begin
-- IMMEDIATE: the write lock is taken here, not at the step's first write.
BEGIN IMMEDIATE;

-- name: Commit
COMMIT;

-- name: Rollback
ROLLBACK;
