-- Version 16: which path each transfer took (DESIGN.md, "Data staging"):
-- transfers gains via, the source's and the target's path, "SRC>DST",
-- each "fs" (the CLS host's filesystem), "sftp" (the site's login host) or
-- "agent" (a placeholder's own connection); '' for rows older than this
-- version. The column is added ahead of this SQL (see steps.go,
-- addedColumns), only when missing.
SELECT 1;
