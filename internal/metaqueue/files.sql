-- files: the data-staging catalog as the core writes and shows it: where each
-- file was produced (files), its copies (replicas), and the transfers of a
-- job's files (transfers, job_files).

-- name: UserFile
-- A user's file on the CLS host; a changed one forgets its checksum.
INSERT INTO files (path, size, site, host, cls_mtime_ns, cls_size) VALUES (?1, ?2, 'local', '', ?3, ?2)
ON CONFLICT (path) DO UPDATE SET size = excluded.size, cls_mtime_ns = excluded.cls_mtime_ns, cls_size = excluded.cls_size,
	sha256 = CASE WHEN cls_mtime_ns IS excluded.cls_mtime_ns AND cls_size IS excluded.cls_size THEN sha256 ELSE '' END
WHERE producer = 0;

-- name: UserReplica
INSERT INTO replicas (path, site, host, size, made) VALUES (?, 'local', '', ?, ?)
ON CONFLICT DO UPDATE SET size = excluded.size;

-- name: Produced
INSERT OR REPLACE INTO files (path, size, sha256, producer, site, host) VALUES (?, ?, ?, ?, ?, ?);

-- name: DropReplicas
DELETE FROM replicas WHERE path = ?;

-- name: PutReplica
INSERT OR REPLACE INTO replicas (path, site, host, size, sha256, made) VALUES (?, ?, ?, ?, ?, ?);

-- name: InsertTransfer
INSERT INTO transfers (job_id, path, from_site, from_host, to_site, to_host, bytes, seconds, started, error, via)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: JobFiles
-- A job's declared files with the catalog's record of each.
SELECT f.kind, f.path, f.size, coalesce(c.size, -1), coalesce(c.site, ''), coalesce(c.host, ''),
	coalesce(c.producer, 0), coalesce(c.sha256, '')
FROM job_files f LEFT JOIN files c ON c.path = f.path
WHERE f.job_id = ? ORDER BY f.kind, f.seq;

-- name: JobTransfers
SELECT path, from_site, from_host, to_site, to_host, bytes, seconds, started, error, via
FROM transfers WHERE job_id = ? ORDER BY id;
