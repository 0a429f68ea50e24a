-- sites: where placeholders run (cls site add), each a JSON spec.

-- name: CountByName
SELECT count(*) FROM sites WHERE name = ?;

-- name: InsertSite
INSERT INTO sites (name, spec, created) VALUES (?, ?, ?);

-- name: UpdateSpec
UPDATE sites SET spec = ? WHERE name = ?;

-- name: DeleteSite
DELETE FROM sites WHERE name = ?;

-- name: List
SELECT name, spec FROM sites ORDER BY name;

-- name: Specs
SELECT name, spec FROM sites;
