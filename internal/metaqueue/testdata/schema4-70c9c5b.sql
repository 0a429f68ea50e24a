PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO meta VALUES('schema','4');
CREATE TABLE queues (
	id           INTEGER PRIMARY KEY,
	name         TEXT NOT NULL UNIQUE,
	ceiling_s    REAL NOT NULL DEFAULT 0 CHECK (ceiling_s >= 0),
	max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	retry_failed INTEGER NOT NULL DEFAULT 0 CHECK (retry_failed IN (0, 1)),
	policy       TEXT NOT NULL DEFAULT 'fcfs',
	created      INTEGER NOT NULL
);
INSERT INTO queues VALUES(1,'default',0.0,3,0,'fcfs',1795972002219924);
INSERT INTO queues VALUES(2,'other',0.0,3,0,'fcfs',1795972002288407);
CREATE TABLE targets (
	id   INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE
);
INSERT INTO targets VALUES(1,'ok');
INSERT INTO targets VALUES(2,'bad');
INSERT INTO targets VALUES(3,'run');
INSERT INTO targets VALUES(4,'q1');
INSERT INTO targets VALUES(5,'w1');
INSERT INTO targets VALUES(6,'q2');
CREATE TABLE placeholders (
	id        INTEGER PRIMARY KEY,
	site      TEXT NOT NULL,
	host      TEXT NOT NULL,
	pid       INTEGER NOT NULL,
	out_dir   TEXT NOT NULL,
	slots     INTEGER NOT NULL,
	started   INTEGER NOT NULL,
	last_seen INTEGER NOT NULL,
	identity  TEXT NOT NULL DEFAULT '' -- the credential that registered it: "socket", "ssh-key:SHA256:..."
);
INSERT INTO placeholders VALUES(1,'local','vm',20934,'/tmp/h-upgrade-old/home4/output',1,1795972000294144,1795972000294144,'socket');
CREATE TABLE jobs (
	id             INTEGER PRIMARY KEY,
	queue_id       INTEGER NOT NULL,
	target_id      INTEGER NOT NULL,
	state          TEXT NOT NULL CHECK (state IN ('W','Q','E','D','F','B','X')),
	command        TEXT NOT NULL,
	cwd            TEXT NOT NULL,
	est            REAL,
	submitted      INTEGER NOT NULL,
	attempts       INTEGER NOT NULL DEFAULT 0,
	attempt_base   INTEGER NOT NULL DEFAULT 0, -- attempts when last rerun
	placeholder_id INTEGER,
	started        INTEGER,
	finished       INTEGER,
	exit           INTEGER,
	reason         TEXT,
	bundle         INTEGER NOT NULL DEFAULT 0, -- id of the bundle's first job; 0 = none
	CHECK (state <> 'E' OR placeholder_id IS NOT NULL)
);
INSERT INTO jobs VALUES(1,1,1,'D','true','/tmp',NULL,1795972002219849,1,0,1,1795972002224760,1795972002224798,0,NULL,0);
INSERT INTO jobs VALUES(2,1,2,'F','false','/tmp',NULL,1795972002230275,1,0,1,1795972002234299,1795972002236015,1,'exit status 1',0);
INSERT INTO jobs VALUES(3,1,3,'E','sleep 1000','/tmp',NULL,1795972002241284,1,0,1,1795972002241389,NULL,NULL,NULL,0);
INSERT INTO jobs VALUES(4,1,4,'Q','sleep 1','/tmp',NULL,1795972002251424,0,0,NULL,NULL,NULL,NULL,NULL,0);
INSERT INTO jobs VALUES(5,1,5,'W','echo hi','/tmp',NULL,1795972002271242,0,0,NULL,NULL,NULL,NULL,NULL,0);
INSERT INTO jobs VALUES(6,2,6,'Q','echo x','/tmp',NULL,1795972002288309,0,0,NULL,NULL,NULL,NULL,NULL,0);
CREATE TABLE job_prereqs (
	job_id    INTEGER NOT NULL,
	target_id INTEGER NOT NULL,
	PRIMARY KEY (job_id, target_id)
) WITHOUT ROWID;
INSERT INTO job_prereqs VALUES(5,3);
CREATE TABLE job_files (
	job_id INTEGER NOT NULL,
	kind   TEXT NOT NULL CHECK (kind IN ('i', 'o')),
	seq    INTEGER NOT NULL,
	path   TEXT NOT NULL,
	size   INTEGER,
	PRIMARY KEY (job_id, kind, seq)
) WITHOUT ROWID;
CREATE TABLE file_locations (
	path     TEXT PRIMARY KEY,
	site     TEXT NOT NULL,
	host     TEXT NOT NULL,
	size     INTEGER,
	job_id   INTEGER NOT NULL,
	produced INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE attempts (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	placeholder_id INTEGER,
	started        INTEGER,
	finished       INTEGER,
	exit           INTEGER,
	reason         TEXT NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE output_lost (
	job_id  INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	error   TEXT NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE submits (
	token   TEXT PRIMARY KEY,
	first   INTEGER NOT NULL,
	count   INTEGER NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE sites (
	name    TEXT PRIMARY KEY,
	spec    TEXT NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX jobs_target ON jobs (target_id);
COMMIT;
