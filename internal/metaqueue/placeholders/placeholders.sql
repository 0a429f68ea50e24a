-- placeholders: every placeholder that registered, while a job or an attempt
-- still names it.

-- name: InsertPlaceholder
INSERT INTO placeholders (site, host, pid, out_dir, slots, started, last_seen, identity)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id;

-- name: TouchPlaceholder
UPDATE placeholders SET pid = ?, slots = ?, last_seen = ?
WHERE id = ? AND site = ? AND host = ? AND identity = ?;

-- name: DeletePlaceholder
DELETE FROM placeholders WHERE id = ?;

-- name: Unreferenced
-- Placeholders no job, attempt or copy names.
SELECT id FROM placeholders
WHERE id NOT IN (SELECT placeholder_id FROM jobs WHERE placeholder_id IS NOT NULL)
	AND id NOT IN (SELECT placeholder_id FROM attempts WHERE placeholder_id IS NOT NULL)
	AND id NOT IN (SELECT placeholder_id FROM job_copies);
