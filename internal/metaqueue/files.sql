-- files: what the core shows of the data-staging catalog: a job's declared
-- files with the catalog's record of each, and the transfers of its files
-- (the catalog module writes them: catalog/catalog.sql).

-- name: JobFiles
-- A job's declared files with the catalog's record of each.
SELECT f.kind, f.path, f.size, coalesce(c.size, -1), coalesce(c.site, ''), coalesce(c.host, ''),
	coalesce(c.producer, 0), coalesce(c.sha256, '')
FROM job_files f LEFT JOIN files c ON c.path = f.path
WHERE f.job_id = ? ORDER BY f.kind, f.seq;

-- name: JobTransfers
SELECT path, from_site, from_host, to_site, to_host, bytes, seconds, started, error, via
FROM transfers WHERE job_id = ? ORDER BY id;
