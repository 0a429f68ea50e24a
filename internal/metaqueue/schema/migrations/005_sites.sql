-- Version 5: sites, where placeholders run (cls site add). spec is the
-- site's settings as JSON (protocol.SiteSpec), so new settings need no
-- migration. Databases of versions 3 and 4 may have the table already
-- (it was made on first use then).
CREATE TABLE IF NOT EXISTS sites (
	name    TEXT PRIMARY KEY,
	spec    TEXT NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
