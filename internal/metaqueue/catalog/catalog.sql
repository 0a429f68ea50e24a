-- The data-staging catalog's tables: files (one row a declared file),
-- replicas (the places holding a copy) and transfers (the copies made).
-- The schema is internal/metaqueue/schema/migrations'.

-- name: UserFile
-- A user's file on the CLS host; a changed one forgets its checksum.
INSERT INTO files (path, size, site, host, cls_mtime_ns, cls_size) VALUES (?1, ?2, 'local', '', ?3, ?2)
ON CONFLICT (path) DO UPDATE SET size = excluded.size, cls_mtime_ns = excluded.cls_mtime_ns, cls_size = excluded.cls_size,
	sha256 = CASE WHEN cls_mtime_ns IS excluded.cls_mtime_ns AND cls_size IS excluded.cls_size THEN sha256 ELSE '' END
WHERE producer = 0;

-- name: DropCopies
-- A user's file edited on the CLS host: its copies elsewhere are of the old content.
DELETE FROM replicas WHERE path = ? AND NOT (site = 'local' AND host = '');

-- name: UserReplica
INSERT INTO replicas (path, site, host, size, made) VALUES (?, 'local', '', ?, ?)
ON CONFLICT DO UPDATE SET size = excluded.size;

-- name: Produced
INSERT OR REPLACE INTO files (path, size, sha256, producer, site, host) VALUES (?, ?, ?, ?, ?, ?);

-- name: DropReplicas
DELETE FROM replicas WHERE path = ?;

-- name: PutReplica
INSERT OR REPLACE INTO replicas (path, site, host, size, sha256, made) VALUES (?, ?, ?, ?, ?, ?);

-- name: InsTransfer
INSERT INTO transfers (job_id, path, from_site, from_host, to_site, to_host, bytes, seconds, started, error, via)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: NewFile
-- A file first known by a replica added (files.add, a transfer).
INSERT INTO files (path, site, host) VALUES (?, ?, ?);

-- name: SetFileSum
UPDATE files SET size = ?, sha256 = ? WHERE path = ?;

-- name: DeleteReplica
DELETE FROM replicas WHERE path = ? AND site = ? AND host = ?;

-- name: DeleteSiteReplicas
DELETE FROM replicas WHERE site = ?;

-- name: LoadFiles
-- The last column is the size the producer declared for the file, DC's
-- hint where nobody measured it (Located.Size); not a size to check.
SELECT f.path, f.size, f.sha256, f.producer, f.site, f.host, f.cls_mtime_ns,
	(SELECT d.size FROM job_files d WHERE d.job_id = f.producer AND d.kind = 'o' AND d.path = f.path LIMIT 1)
FROM files f;

-- name: LoadReplicas
SELECT path, site, host FROM replicas ORDER BY path, made;

-- name: LoadMoved
SELECT count(*), coalesce(sum(error <> ''), 0), coalesce(sum(bytes), 0), coalesce(sum(seconds), 0) FROM transfers;

-- name: FilesPage
-- ?1 is where the page starts (after, or the prefix), ?2 the last path of
-- the previous page, ?3 the prefix's length and ?4 the prefix.
SELECT path, size, sha256, producer FROM files
WHERE path >= ? AND path > ? AND substr(path, 1, ?) = ? ORDER BY path LIMIT ?;

-- name: ReplicasBetween
SELECT path, site, host, size, sha256, made FROM replicas
WHERE path >= ? AND path <= ? ORDER BY path, site = 'local' DESC, made;

-- name: ReplicasOf
-- Best first: the CLS host's, then by age.
SELECT path, site, host, size, sha256, made FROM replicas
WHERE path = ? ORDER BY site = 'local' DESC, made, site, host;

-- name: FileRecord
SELECT size, sha256, producer FROM files WHERE path = ?;
