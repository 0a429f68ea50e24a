-- Version 20: what a queue's jobs ask of a placeholder when they ask for
-- nothing themselves (cls queue set --cpus, --mem, --gpus, --resource):
-- protocol.Resources as JSON, a row only for a queue that has defaults.
CREATE TABLE IF NOT EXISTS queue_defaults (
	queue_id  INTEGER PRIMARY KEY,
	resources TEXT NOT NULL
);
