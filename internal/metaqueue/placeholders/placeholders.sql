-- placeholders: every placeholder that registered, while a job or an attempt
-- still names it.

-- name: InsertPlaceholder
-- A new id above any row's, above the first parameter (the highest this
-- run gave) and above meta('placeholder_last'), the highest any run gave
-- (schema version 33; its trigger raises it with this insert): SQLite's
-- own choice, the highest row's plus one, gives a swept placeholder's id
-- again.
INSERT INTO placeholders (id, site, host, pid, out_dir, slots, started, last_seen, identity)
SELECT max(coalesce(max(id), 0), ?,
	coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'placeholder_last'), 0)) + 1,
	?, ?, ?, ?, ?, ?, ?, ? FROM placeholders RETURNING id;

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

-- name: RaiseLast
-- Raises meta('placeholder_last') to the parameter, keeping the larger:
-- an id something outside the database still names (a stream copy of a
-- placeholder swept before schema version 33) is never given again.
INSERT INTO meta (key, value) VALUES ('placeholder_last', ?1)
ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER));
