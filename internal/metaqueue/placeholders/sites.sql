-- sites: where placeholders run (cls site add), each a JSON spec.

-- name: CountSites
SELECT count(*) FROM sites WHERE name = ?;

-- name: InsertSite
INSERT INTO sites (name, spec, created) VALUES (?, ?, ?);

-- name: UpdateSite
UPDATE sites SET spec = ? WHERE name = ?;

-- name: DeleteSite
DELETE FROM sites WHERE name = ?;

-- name: ListSites
SELECT name, spec FROM sites ORDER BY name;

-- name: SiteSpecs
SELECT name, spec FROM sites;
