-- broken_placeholders: the placeholders that said their node cannot run
-- jobs, the latest protocol.MaxBroken of each site (site/broken.go).

-- name: InsertBroken
-- A site no longer stored (removed while the word was on its way) gets
-- no row, unless it is the CLS's own (never stored): the last argument.
INSERT INTO broken_placeholders (placeholder_id, site, host, why, at)
SELECT ?1, ?2, ?3, ?4, ?5
WHERE ?6 OR EXISTS (SELECT 1 FROM sites WHERE name = ?2)
ON CONFLICT (placeholder_id) DO UPDATE SET site = excluded.site, host = excluded.host, why = excluded.why, at = excluded.at;

-- name: TrimBroken
-- Those heard before ?1, and the site's beyond its latest ?3.
DELETE FROM broken_placeholders
WHERE at < ?1 OR site = ?2 AND placeholder_id NOT IN (
	SELECT placeholder_id FROM broken_placeholders WHERE site = ?2
	ORDER BY at DESC, placeholder_id DESC LIMIT ?3);

-- name: ListBroken
SELECT site, placeholder_id, host, why, at FROM broken_placeholders
WHERE at >= ?
ORDER BY site, at DESC, placeholder_id DESC;

-- name: DeleteSiteBroken
DELETE FROM broken_placeholders WHERE site = ?;
