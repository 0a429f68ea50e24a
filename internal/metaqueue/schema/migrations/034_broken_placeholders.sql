-- Version 34: the placeholders that said their node cannot run jobs
-- (Heartbeat.Broken), so a restarted CLS still lists them under their
-- site (cls site list, mqstat's warning, the dashboard) until a day after
-- it first heard them (protocol.BrokenKept): the node stays broken after
-- a restart too. The site manager writes a row when it first hears one
-- (site/broken.go) and keeps the latest protocol.MaxBroken of each site,
-- deleting those of any site heard over a day before it (a restarted CLS
-- reads none older); removing the site deletes its rows. why is clipped
-- as the manager keeps it; at is when the CLS first heard it. A
-- placeholder id is never given twice (version 33), so it alone keys the
-- row.
CREATE TABLE IF NOT EXISTS broken_placeholders (
	placeholder_id INTEGER PRIMARY KEY,
	site           TEXT NOT NULL,
	host           TEXT NOT NULL,
	why            TEXT NOT NULL,
	at             INTEGER NOT NULL
);
