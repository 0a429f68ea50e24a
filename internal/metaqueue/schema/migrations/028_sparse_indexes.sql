-- Version 28: partial indexes over the few rows two load-time queries
-- want, so a restart does not scan every job and target for them: the
-- live jobs of bundles (LiveBundles: most jobs have bundle 0) and the
-- targets that purged jobs (LoadPurged). A row outside an index's
-- condition costs nothing to insert.
CREATE INDEX IF NOT EXISTS jobs_bundled ON jobs (id) WHERE bundle <> 0;
CREATE INDEX IF NOT EXISTS targets_purged ON targets (id) WHERE purged_done > 0 OR purged_bad > 0;
