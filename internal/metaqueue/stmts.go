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
	insEnv, insJob, insJobs, insPrereq, insPrereqs, insTargets, insQueue *sql.Stmt
	setState, finish, history, requeue, unclaim, rerun                   *sql.Stmt
	insPlaceholder, touchPlaceholder, jobRow, jobPrereqs                 *sql.Stmt
	jobEnd, keepAttempt, insFile                                         *sql.Stmt
	all                                                                  []*sql.Stmt
	dispatchBy                                                           map[int]*sql.Stmt
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
