PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO meta VALUES('schema','27');
CREATE TABLE queues (
	id           INTEGER PRIMARY KEY,
	name         TEXT NOT NULL UNIQUE,
	ceiling_s    REAL NOT NULL DEFAULT 0 CHECK (ceiling_s >= 0),
	max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	retry_failed INTEGER NOT NULL DEFAULT 0 CHECK (retry_failed IN (0, 1)),
	policy       TEXT NOT NULL DEFAULT 'fcfs',
	created      INTEGER NOT NULL
, max_copies INTEGER NOT NULL DEFAULT 0 CHECK (max_copies >= 0));
INSERT INTO queues VALUES(1,'default',0.0,3,0,'fcfs',1795971043760522,0);
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
INSERT INTO placeholders VALUES(1,'local','vm',17487,'/tmp/h-upgrade-old/home27/output',1,1795971041984438,1795971041984438,'socket');
CREATE TABLE job_prereqs (
	job_id    INTEGER NOT NULL,
	target_id INTEGER NOT NULL, kind INTEGER NOT NULL DEFAULT 0 CHECK (kind IN (0, 1)),
	PRIMARY KEY (job_id, target_id)
) WITHOUT ROWID;
INSERT INTO job_prereqs VALUES(5,3,0);
INSERT INTO job_prereqs VALUES(12,2,1);
CREATE TABLE attempts (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	placeholder_id INTEGER,
	started        INTEGER,
	finished       INTEGER,
	exit           INTEGER,
	reason         TEXT NOT NULL, cpu_user REAL, cpu_sys REAL, max_rss INTEGER, killed_copy INTEGER NOT NULL DEFAULT 0, command TEXT,
	PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE submits (
	token   TEXT PRIMARY KEY,
	first   INTEGER NOT NULL,
	count   INTEGER NOT NULL,
	created INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO submits VALUES('mqsub-6abd6dfc655a95990918789724f4cc53',7,5,1795971043833122);
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
, purged_done INTEGER NOT NULL DEFAULT 0, purged_bad INTEGER NOT NULL DEFAULT 0);
INSERT INTO targets VALUES(1,'ok',0,0);
INSERT INTO targets VALUES(2,'bad',0,0);
INSERT INTO targets VALUES(3,'run',0,0);
INSERT INTO targets VALUES(4,'q1',0,0);
INSERT INTO targets VALUES(5,'w1',0,0);
INSERT INTO targets VALUES(6,'held',0,0);
INSERT INTO targets VALUES(7,'arr',0,0);
INSERT INTO targets VALUES(8,'aa',0,0);
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
INSERT INTO job_env VALUES(7,'{"MQ_ARRAY_INDEX":"1"}');
INSERT INTO job_env VALUES(8,'{"MQ_ARRAY_INDEX":"2"}');
INSERT INTO job_env VALUES(9,'{"MQ_ARRAY_INDEX":"3"}');
INSERT INTO job_env VALUES(10,'{"MQ_ARRAY_INDEX":"4"}');
INSERT INTO job_env VALUES(11,'{"MQ_ARRAY_INDEX":"5"}');
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
INSERT INTO arrays VALUES(1,7,11,2,'1-5%2');
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
CREATE TABLE IF NOT EXISTS "jobs" (
	id             INTEGER PRIMARY KEY,
	queue_id       INTEGER NOT NULL,
	target_id      INTEGER NOT NULL,
	state          TEXT NOT NULL CHECK (state IN ('W','Q','H','E','D','F','B','X')),
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
INSERT INTO jobs VALUES(1,1,1,'D','true','/tmp',NULL,1795971043760470,1,0,1,1795971043762446,1795971043764091,0,NULL,0,0.00071000000000000001911,0.0,19337216,NULL);
INSERT INTO jobs VALUES(2,1,2,'F','false','/tmp',NULL,1795971043770408,1,0,1,1795971043776139,1795971043777617,1,'exit status 1',0,0.00067299999999999998712,0.0,19468288,NULL);
INSERT INTO jobs VALUES(3,1,3,'E','sleep 1000','/tmp',NULL,1795971043783970,1,0,1,1795971043784067,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(4,1,4,'Q','sleep 1','/tmp',NULL,1795971043798278,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(5,1,5,'W','echo hi','/tmp',NULL,1795971043806951,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(6,1,6,'H','echo h','/tmp',NULL,1795971043815320,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(7,1,7,'Q','sleep 300','/tmp',NULL,1795971043832453,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(8,1,7,'Q','sleep 300','/tmp',NULL,1795971043832453,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(9,1,7,'Q','sleep 300','/tmp',NULL,1795971043832453,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(10,1,7,'Q','sleep 300','/tmp',NULL,1795971043832453,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(11,1,7,'Q','sleep 300','/tmp',NULL,1795971043832453,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
INSERT INTO jobs VALUES(12,1,8,'Q','echo after','/tmp',NULL,1795971043845246,0,0,NULL,NULL,NULL,NULL,NULL,0,NULL,NULL,NULL,NULL);
CREATE TABLE job_priority (
	job_id   INTEGER PRIMARY KEY,
	priority INTEGER NOT NULL CHECK (priority BETWEEN -1024 AND 1023 AND priority <> 0)
);
CREATE TABLE job_resources (
	job_id    INTEGER PRIMARY KEY,
	resources TEXT NOT NULL
);
CREATE TABLE output_extents (
	job_id         INTEGER NOT NULL,
	attempt        INTEGER NOT NULL,
	stream         INTEGER NOT NULL CHECK (stream IN (0, 1)),
	placeholder_id INTEGER NOT NULL,
	file           TEXT NOT NULL,
	last           INTEGER NOT NULL CHECK (last >= 0),
	bytes          INTEGER NOT NULL CHECK (bytes > 0),
	cut            INTEGER NOT NULL DEFAULT 0 CHECK (cut IN (0, 1)),
	PRIMARY KEY (job_id, attempt, stream)
) WITHOUT ROWID;
CREATE INDEX transfers_job ON transfers (job_id);
CREATE INDEX arrays_first ON arrays(first_job);
CREATE INDEX charges_queue ON charges(queue_id);
CREATE INDEX job_plans_plan ON job_plans (plan_id, site, start_s);
CREATE INDEX jobs_target ON jobs (target_id);
CREATE INDEX jobs_bundled ON jobs (id) WHERE bundle <> 0;
CREATE INDEX targets_purged ON targets (id) WHERE purged_done > 0 OR purged_bad > 0;
COMMIT;
