-- Version 33: a placeholder id is never given twice, across restarts too.
-- meta('placeholder_last') is the highest placeholder id ever given; a new
-- placeholder's id is above it (placeholders.sql: InsertPlaceholder) and
-- the trigger raises it with every insert, in the insert's own statement.
-- Without it a restarted CLS gave the highest remaining row's id plus one:
-- a swept placeholder's id again, with its stream copies (PH-<id>-*.mqs).
-- An older database starts from the highest id it still names anywhere;
-- the step reruns over what it made (the upsert keeps the larger value).
INSERT INTO meta (key, value)
SELECT 'placeholder_last', max(
	coalesce((SELECT max(id) FROM placeholders), 0),
	coalesce((SELECT max(placeholder_id) FROM jobs), 0),
	coalesce((SELECT max(placeholder_id) FROM attempts), 0),
	coalesce((SELECT max(placeholder_id) FROM job_copies), 0),
	coalesce((SELECT max(placeholder_id) FROM output_extents), 0))
WHERE true
ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER));

CREATE TRIGGER IF NOT EXISTS placeholder_last AFTER INSERT ON placeholders
BEGIN
	UPDATE meta SET value = NEW.id
	WHERE key = 'placeholder_last' AND CAST(value AS INTEGER) < NEW.id;
END;
