package metaqueue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// bulkRows is how many jobs one multi-row INSERT carries.
const bulkRows = 64

// stmts are the writer's prepared statements.
type stmts struct {
	insEnv, insJob, insJobs, insPrereq, insPrereqs, insTargets, insQueue                    *sql.Stmt
	setState, finish, history, requeue, unclaim, rerun                                      *sql.Stmt
	insPlaceholder, touchPlaceholder, jobRow, jobPrereqs                                    *sql.Stmt
	jobEnd, keepAttempt, insFile, userFile, userReplica, produced, dropReplicas, putReplica *sql.Stmt
	insTransfer                                                                             *sql.Stmt
	all                                                                                     []*sql.Stmt
	dispatchBy                                                                              map[int]*sql.Stmt
}

// dispatchN returns the statement that marks n jobs Executing for one
// placeholder (prepared on first use for each n).
func (st *stmts) dispatchN(ctx context.Context, c *sql.Conn, n int) (*sql.Stmt, error) {
	if s := st.dispatchBy[n]; s != nil {
		return s, nil
	}
	s, err := c.PrepareContext(ctx, claimSQL(n))
	if err != nil {
		return nil, err
	}
	if st.dispatchBy == nil {
		st.dispatchBy = map[int]*sql.Stmt{}
	}
	st.dispatchBy[n] = s
	st.all = append(st.all, s)
	return s, nil
}

func (st *stmts) prepare(ctx context.Context, c *sql.Conn) error {
	for _, p := range []struct {
		s   **sql.Stmt
		sql string
	}{
		{&st.insJob, insJobSQL},
		{&st.insJobs, insJobsSQL},
		{&st.insPrereq, "INSERT OR IGNORE INTO job_prereqs (job_id, target_id) VALUES (?, ?)"},
		{&st.insPrereqs, "INSERT OR IGNORE INTO job_prereqs (job_id, target_id) VALUES " + strings.TrimSuffix(strings.Repeat("(?,?),", bulkRows), ",")},
		// New targets have consecutive ids: ?1 is the first, ?2 a JSON
		// array of their names (one bound value, not two per row).
		{&st.insTargets, "INSERT INTO targets (id, name) SELECT ?1 + key, value FROM json_each(?2)"},
		{&st.insQueue, "INSERT INTO queues (name, created) VALUES (?, ?) RETURNING id, ceiling_s, max_attempts, retry_failed, policy"},
		{&st.setState, setStateSQL},
		{&st.finish, finishSQL},
		{&st.history, `INSERT OR REPLACE INTO attempts (job_id, attempt, placeholder_id, started, finished, exit, reason,
			cpu_user, cpu_sys, max_rss) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.requeue, requeueSQL},
		{&st.unclaim, unclaimSQL},
		{&st.rerun, rerunSQL},
		{&st.insPlaceholder, `INSERT INTO placeholders (site, host, pid, out_dir, slots, started, last_seen, identity)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`},
		{&st.touchPlaceholder, "UPDATE placeholders SET pid = ?, slots = ?, last_seen = ? WHERE id = ? AND site = ? AND host = ? AND identity = ?"},
		{&st.jobRow, "SELECT state, queue_id, target_id, est, attempts, attempt_base FROM jobs WHERE id = ?"},
		{&st.jobPrereqs, "SELECT target_id FROM job_prereqs WHERE job_id = ?"},
		{&st.jobEnd, `SELECT j.state, j.exit, j.reason, coalesce(j.row_attempt, j.attempts), coalesce(p.site, ''), coalesce(p.host, ''),
			j.started, j.finished, j.cpu_user, j.cpu_sys, j.max_rss FROM jobs j LEFT JOIN placeholders p ON p.id = j.placeholder_id WHERE j.id = ?`},
		{&st.insEnv, "INSERT INTO job_env (job_id, env) VALUES (?, ?)"},
		{&st.insFile, "INSERT INTO job_files (job_id, kind, seq, path, size, rel) VALUES (?, ?, ?, ?, ?, ?)"},
		// A user's file on the CLS host; a changed one forgets its checksum.
		{&st.userFile, `INSERT INTO files (path, size, site, host, cls_mtime_ns, cls_size) VALUES (?1, ?2, 'local', '', ?3, ?2)
			ON CONFLICT (path) DO UPDATE SET size = excluded.size, cls_mtime_ns = excluded.cls_mtime_ns, cls_size = excluded.cls_size,
				sha256 = CASE WHEN cls_mtime_ns IS excluded.cls_mtime_ns AND cls_size IS excluded.cls_size THEN sha256 ELSE '' END
			WHERE producer = 0`},
		{&st.userReplica, `INSERT INTO replicas (path, site, host, size, made) VALUES (?, 'local', '', ?, ?)
			ON CONFLICT DO UPDATE SET size = excluded.size`},
		{&st.produced, `INSERT OR REPLACE INTO files (path, size, sha256, producer, site, host) VALUES (?, ?, ?, ?, ?, ?)`},
		{&st.dropReplicas, "DELETE FROM replicas WHERE path = ?"},
		{&st.putReplica, "INSERT OR REPLACE INTO replicas (path, site, host, size, sha256, made) VALUES (?, ?, ?, ?, ?, ?)"},
		{&st.insTransfer, `INSERT INTO transfers (job_id, path, from_site, from_host, to_site, to_host, bytes, seconds, started, error, via)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.keepAttempt, `INSERT OR REPLACE INTO attempts (job_id, attempt, placeholder_id, started, finished, exit, reason,
				cpu_user, cpu_sys, max_rss)
			SELECT id, coalesce(row_attempt, attempts), placeholder_id, started, finished, exit,
				coalesce(reason, CASE state WHEN 'D' THEN 'done' WHEN 'X' THEN 'deleted by user' ELSE 'ended' END) || '; rerun by user',
				cpu_user, cpu_sys, max_rss
			FROM jobs WHERE id = ? AND attempts > 0`},
	} {
		s, err := c.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %q: %w", strings.Fields(p.sql)[0:3], err)
		}
		*p.s = s
		st.all = append(st.all, s)
	}
	return nil
}

func (st *stmts) close() {
	for _, s := range st.all {
		s.Close()
	}
	st.all, st.dispatchBy = nil, nil
}
