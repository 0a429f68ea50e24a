-- meta: facts about the database itself (the schema version migrate keeps).

-- name: SchemaVersion
SELECT value FROM meta WHERE key = 'schema';

-- name: SetSchemaVersion
INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?);

-- name: HasColumn
-- Whether table ?1 has column ?2: a migration adds a column only where an
-- older database lacks it.
SELECT count(*) FROM pragma_table_info(?) WHERE name = ?;

-- name: TableSQL
-- The CREATE statement of table ?: a migration that changes a constraint
-- rebuilds the table from it.
SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?;
