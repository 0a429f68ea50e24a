PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO meta VALUES('schema','21');
CREATE TABLE queues (
	id           INTEGER PRIMARY KEY,
	name         TEXT NOT NULL UNIQUE,
	ceiling_s    REAL NOT NULL DEFAULT 0 CHECK (ceiling_s >= 0),
	max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	retry_failed INTEGER NOT NULL DEFAULT 0 CHECK (retry_failed IN (0, 1)),
	policy       TEXT NOT NULL DEFAULT 'fcfs',
	created      INTEGER NOT NULL
, max_copies INTEGER NOT NULL DEFAULT 0 CHECK (max_copies >= 0));
INSERT INTO queues VALUES(1,'default',0.0,3,0,'fcfs',1795971026265312,0);
INSERT INTO queues VALUES(2,'other',0.0,3,0,'fcfs',1795971026324201,0);
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
INSERT INTO placeholders VALUES(1,'local','vm',12748,'/tmp/h-upgrade-old/home21/output',1,1795971022213829,1795971022213829,'socket');
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
	reason         TEXT, bundle INTEGER NOT NULL DEFAULT 0, cpu_user REAL, cpu_sys REAL, max_rss INTEGER, row_attempt INTEGER,
	CHECK (state <> 'E' OR placeholder_id IS NOT NULL)
);
INSERT INTO jobs VALUES(1,1,1,'D','true','/tmp',NULL,1795971026265257,1,0,1,1795971026266779,1795971026269726,0,NULL,0,0.00079500000000000002522,0.0,18993152,NULL);
INSERT INTO jobs VALUES(2,1,2,'F','false','/tmp',NULL,1795971026274395,1,0,1,1795971026275411,1795971026276854,1,'exit status 1',0,0.00073399999999999995196,0.0,19124224,NULL);
INSERT INTO jobs VALUES(3,1,3,'E','sleep 1000','/tmp',NULL,1795971026286074,1,0,1,1795971026286206,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(4,1,4,'Q','sleep 1','/tmp',NULL,1795971026293460,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(5,1,5,'W','echo hi','/tmp',NULL,1795971026311929,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(6,2,6,'Q','echo x','/tmp',5.0,1795971026324142,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
CREATE TABLE job_prereqs (
	job_id    INTEGER NOT NULL,
	target_id INTEGER NOT NULL,
	PRIMARY KEY (job_id, target_id)
) WITHOUT ROWID;
INSERT INTO job_prereqs VALUES(5,3);
CREATE TABLE attempts (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	placeholder_id INTEGER,
	started        INTEGER,
	finished       INTEGER,
	exit           INTEGER,
	reason         TEXT NOT NULL, cpu_user REAL, cpu_sys REAL, max_rss INTEGER, killed_copy INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE submits (
	token   TEXT PRIMARY KEY,
	first   INTEGER NOT NULL,
	count   INTEGER NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE job_files (
	job_id INTEGER NOT NULL,
	kind   TEXT NOT NULL CHECK (kind IN ('i', 'o')),
	seq    INTEGER NOT NULL,
	path   TEXT NOT NULL,
	size   INTEGER, rel INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (job_id, kind, seq)
) WITHOUT ROWID;
CREATE TABLE output_lost (
	job_id  INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	error   TEXT NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE sites (
	name    TEXT PRIMARY KEY,
	spec    TEXT NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS "targets" (
	id   INTEGER PRIMARY KEY,
	name TEXT NOT NULL
);
INSERT INTO targets VALUES(1,'ok');
INSERT INTO targets VALUES(2,'bad');
INSERT INTO targets VALUES(3,'run');
INSERT INTO targets VALUES(4,'q1');
INSERT INTO targets VALUES(5,'w1');
INSERT INTO targets VALUES(6,'q2');
CREATE TABLE files (
	path         TEXT PRIMARY KEY,
	size         INTEGER,
	sha256       TEXT NOT NULL DEFAULT '',
	producer     INTEGER NOT NULL DEFAULT 0,
	site         TEXT NOT NULL DEFAULT '',
	host         TEXT NOT NULL DEFAULT '',
	cls_mtime_ns INTEGER,
	cls_size     INTEGER
) WITHOUT ROWID;
CREATE TABLE replicas (
	path   TEXT NOT NULL,
	site   TEXT NOT NULL,
	host   TEXT NOT NULL,
	size   INTEGER,
	sha256 TEXT NOT NULL DEFAULT '',
	made   INTEGER NOT NULL,
	PRIMARY KEY (path, site, host)
) WITHOUT ROWID;
CREATE TABLE transfers (
	id        INTEGER PRIMARY KEY,
	job_id    INTEGER NOT NULL DEFAULT 0,
	path      TEXT NOT NULL,
	from_site TEXT NOT NULL,
	from_host TEXT NOT NULL,
	to_site   TEXT NOT NULL,
	to_host   TEXT NOT NULL,
	bytes     INTEGER NOT NULL,
	seconds   REAL NOT NULL,
	started   INTEGER NOT NULL,
	error     TEXT NOT NULL DEFAULT ''
, via TEXT NOT NULL DEFAULT '');
CREATE TABLE job_plans (
	job_id  INTEGER PRIMARY KEY,
	site    TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	planner TEXT NOT NULL
, plan_id INTEGER, start_s REAL, end_s REAL, ready_s REAL, slot INTEGER);
CREATE TABLE job_env (
	job_id INTEGER PRIMARY KEY,
	env    TEXT NOT NULL
);
CREATE TABLE queue_economics (
	queue_id INTEGER PRIMARY KEY,
	deadline REAL NOT NULL DEFAULT 0 CHECK (deadline >= 0),
	budget   REAL NOT NULL DEFAULT 0 CHECK (budget >= 0)
);
CREATE TABLE arrays (
	id          INTEGER PRIMARY KEY,
	first_job   INTEGER NOT NULL,
	last_job    INTEGER NOT NULL CHECK (last_job >= first_job),
	max_running INTEGER NOT NULL DEFAULT 0 CHECK (max_running >= 0),
	spec        TEXT NOT NULL DEFAULT ''
);
CREATE TABLE charges (
	job_id   INTEGER NOT NULL,
	attempt  INTEGER NOT NULL,
	queue_id INTEGER NOT NULL,
	site     TEXT NOT NULL,
	seconds  REAL NOT NULL CHECK (seconds >= 0),
	price    REAL NOT NULL CHECK (price >= 0),
	cost     REAL NOT NULL CHECK (cost >= 0),
	ok       INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (job_id, attempt)
);
CREATE TABLE job_no_replicate (
	job_id INTEGER PRIMARY KEY
);
CREATE TABLE job_copies (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	placeholder_id INTEGER NOT NULL,
	started        INTEGER NOT NULL,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE plan_files (
	path TEXT PRIMARY KEY,
	site TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE plans (
	id          INTEGER PRIMARY KEY,
	target      TEXT NOT NULL,
	planner     TEXT NOT NULL,
	made        INTEGER NOT NULL,
	makespan_s  REAL NOT NULL,
	moved_bytes INTEGER NOT NULL
);
CREATE TABLE plan_sites (
	plan_id INTEGER NOT NULL,
	site    TEXT NOT NULL,
	slots   INTEGER NOT NULL,
	PRIMARY KEY (plan_id, site)
) WITHOUT ROWID;
CREATE TABLE job_apart (
	job_id  INTEGER PRIMARY KEY,
	attempt INTEGER NOT NULL
);
CREATE TABLE stage_runtimes (
	queue_id INTEGER NOT NULL,
	site     TEXT NOT NULL,
	seconds  REAL NOT NULL CHECK (seconds >= 0),
	runs     INTEGER NOT NULL CHECK (runs >= 0),
	PRIMARY KEY (queue_id, site)
) WITHOUT ROWID;
CREATE TABLE stage_output (
	queue_id INTEGER PRIMARY KEY,
	bytes    REAL NOT NULL CHECK (bytes >= 0),
	jobs     INTEGER NOT NULL CHECK (jobs >= 0)
);
CREATE TABLE queue_defaults (
	queue_id  INTEGER PRIMARY KEY,
	resources TEXT NOT NULL
);
CREATE TABLE job_resources (
	job_id    INTEGER PRIMARY KEY,
	resources TEXT NOT NULL
);
INSERT INTO job_resources VALUES(3,'{"cpus":1}');
INSERT INTO job_resources VALUES(4,'{"cpus":1}');
CREATE INDEX jobs_target ON jobs (target_id);
CREATE INDEX transfers_job ON transfers (job_id);
CREATE INDEX arrays_first ON arrays(first_job);
CREATE INDEX charges_queue ON charges(queue_id);
CREATE INDEX job_plans_plan ON job_plans (plan_id, site, start_s);
COMMIT;
