package metaqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TimeFormat is RFC 3339 with microseconds, the precision stored.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

func formatMicros(v sql.NullInt64) string {
	if !v.Valid {
		return ""
	}
	return time.UnixMicro(v.Int64).Format(TimeFormat)
}

// usageCols scans an attempt's accounting columns.
type usageCols struct {
	user, sys sql.NullFloat64
	rss       sql.NullInt64
	cost      sql.NullFloat64 // charges.cost: NULL when not charged
}

// accounting is an ended attempt's figures: elapsed from its times, the
// rest as measured (zero when not).
func (u usageCols) accounting(started, finished sql.NullInt64) protocol.Accounting {
	var a protocol.Accounting
	if started.Valid && finished.Valid && finished.Int64 >= started.Int64 {
		a.Elapsed = float64(finished.Int64-started.Int64) / 1e6
	}
	if u.cost.Valid {
		c := u.cost.Float64
		a.Cost = &c
	}
	if u.rss.Valid && u.rss.Int64 > 0 {
		a.CPUUser, a.CPUSys, a.MaxRSS = u.user.Float64, u.sys.Float64, u.rss.Int64
	}
	return a
}

// statSelect is a listing's query, which stat and Job complete.
var statSelect = baseQuery(jobsSQL, "Stat")

type statRow struct {
	protocol.JobInfo
	placeholder int64
	outDir      string
	attempt     int
}

func scanStat(rows *sql.Rows) (statRow, error) {
	var r statRow
	var exit, submitted, started, finished sql.NullInt64
	var est sql.NullFloat64
	var st, prereqs, res string
	var use usageCols
	err := rows.Scan(&r.ID, &r.Queue, &r.Target, &st, &r.Attempts, &exit, &r.Site, &r.Host, &submitted, &started,
		&finished, &r.Command, &r.Cwd, &est, &r.Reason, &prereqs, &r.placeholder, &r.outDir, &r.attempt,
		&use.user, &use.sys, &use.rss, &use.cost, &r.Priority, &res)
	if err != nil {
		return r, err
	}
	if res != "" {
		if err := json.Unmarshal([]byte(res), &r.Resources); err != nil {
			return r, fmt.Errorf("job %d: stored request: %w", r.ID, err)
		}
	}
	r.Accounting = use.accounting(started, finished)
	r.State = st
	r.Command, r.CommandBytes = protocol.WireCommand(r.Command)
	if exit.Valid {
		e := int(exit.Int64)
		r.Exit = &e
	}
	r.Submitted, r.Started, r.Finished = formatMicros(submitted), formatMicros(started), formatMicros(finished)
	r.Est = est.Float64
	r.Prereqs = []string{}
	if prereqs != "" {
		r.Prereqs = strings.Split(prereqs, "\n")
	}
	return r, nil
}

// maxBatchBytes bounds the encoded size of one streamed stat frame.
const maxBatchBytes = 1 << 20

// Stat lists jobs matching st in id order, calling emit with batches of up
// to 1,000. It reads a consistent snapshot and never waits for the writer.
func (s *Store) Stat(ctx context.Context, st protocol.Stat, emit func([]protocol.JobInfo) error) error {
	return s.stat(ctx, st, 0, emit)
}

// stat is Stat of the jobs with ids above after.
func (s *Store) stat(ctx context.Context, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) error {
	var where []string
	var args []any
	if after > 0 {
		where = append(where, "j.id > ?")
		args = append(args, after)
	}
	if st.Queue != "" {
		where = append(where, "q.name = ?")
		args = append(args, st.Queue)
	}
	if st.Target != "" {
		where = append(where, "t.name = ?")
		args = append(args, st.Target)
	}
	if st.TargetPrefix != "" {
		// Names are valid UTF-8, which has no 0xff byte, so the names
		// starting with the prefix are those in [prefix, prefix+0xff).
		where = append(where, "t.name >= ? AND t.name < ?")
		args = append(args, st.TargetPrefix, st.TargetPrefix+"\xff")
	}
	states := st.States
	if states == "" {
		states = "WQHEDFB"
	}
	parsed, err := job.ParseStates(states)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if len(parsed) < len(job.States) {
		ph := strings.TrimSuffix(strings.Repeat("?,", len(parsed)), ",")
		where = append(where, "j.state IN ("+ph+")")
		for _, p := range parsed {
			args = append(args, string(p))
		}
	}
	if st.To > 0 {
		where = append(where, "j.id BETWEEN ? AND ?")
		args = append(args, st.From, st.To)
	}
	if st.Collapse {
		where = append(where, "NOT EXISTS ("+baseQuery(arraysSQL, "InArray")+")")
	}
	if len(st.IDs) > 0 {
		if len(st.IDs) > 10000 {
			return protocol.Errorf(protocol.CodeBadRequest, "at most 10000 job ids per request")
		}
		ph := strings.TrimSuffix(strings.Repeat("?,", len(st.IDs)), ",")
		where = append(where, "j.id IN ("+ph+")")
		for _, id := range st.IDs {
			args = append(args, id)
		}
	}
	q := statSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY j.id"
	if st.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, st.Limit)
	}
	var db querier = s.rdb
	if st.Earlier {
		// Earlier attempts are read beside the listing, on its connection
		// and in its snapshot (a second connection could wait for ever
		// behind other listings holding the rest).
		tx, err := s.rdb.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		db = tx
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	// Batches are bounded in bytes as well as jobs so a frame stays far
	// below protocol.MaxFrame even with 128 KiB commands.
	batch := make([]protocol.JobInfo, 0, 1000)
	size := 0
	for rows.Next() {
		r, err := scanStat(rows)
		if err != nil {
			return err
		}
		if st.Earlier && r.Attempts > 0 {
			if r.Earlier, err = s.history(ctx, db, r.ID, nil); err != nil {
				return err
			}
			size += 256 * len(r.Earlier)
		}
		batch = append(batch, r.JobInfo)
		size += 512 + 2*len(r.Command) + len(r.Cwd) + len(r.Reason)
		if len(batch) == cap(batch) || size > maxBatchBytes {
			if err := emit(batch); err != nil {
				return err
			}
			batch, size = batch[:0], 0
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return emit(batch)
}

// copies names the CLS's copies of an attempt's output when the
// placeholder wrote it elsewhere (a remote placeholder stages it here).
func (s *Store) copies(outDir string, id int64, attempt int) (stdout, stderr string) {
	if s.opt.OutputDir == "" || filepath.Clean(outDir) == filepath.Clean(s.opt.OutputDir) {
		return "", ""
	}
	return job.OutputPaths(s.opt.OutputDir, id, attempt)
}

// Job returns everything known about one job.
func (s *Store) Job(ctx context.Context, id int64) (protocol.JobDetail, error) {
	var d protocol.JobDetail
	rows, err := s.rdb.QueryContext(ctx, statSelect+" WHERE j.id = ?", id)
	if err != nil {
		return d, err
	}
	if !rows.Next() {
		rows.Close()
		if err := rows.Err(); err != nil {
			return d, err
		}
		return d, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
	}
	r, err := scanStat(rows)
	rows.Close()
	if err != nil {
		return d, err
	}
	d.JobInfo, d.Placeholder = r.JobInfo, r.placeholder
	as, err := s.Arrays(ctx, protocol.ArrayQuery{Job: id})
	if err != nil {
		return d, err
	}
	if len(as) == 1 {
		d.Array = &as[0]
	}
	if r.outDir != "" && r.attempt > 0 {
		d.Stdout, d.Stderr = job.OutputPaths(r.outDir, id, r.attempt)
		d.StdoutCopy, d.StderrCopy = s.copies(r.outDir, id, r.attempt)
	}
	for _, name := range r.Prereqs {
		ts := protocol.TargetStatus{Target: name, Counts: map[string]int{}}
		// By the job's own prerequisite rows: target names have no index.
		crow, err := s.rdb.QueryContext(ctx, jobsSQL.Get("PrereqStates"), id, name)
		if err != nil {
			return d, err
		}
		total, done := 0, 0
		for crow.Next() {
			var st string
			var n int
			if err := crow.Scan(&st, &n); err != nil {
				crow.Close()
				return d, err
			}
			ts.Counts[st] = n
			total += n
			if st == string(job.Done) {
				done = n
			}
		}
		if err := closeRows(crow); err != nil {
			return d, err
		}
		ts.Complete = total > 0 && done == total
		d.WaitingOn = append(d.WaitingOn, ts)
	}
	if d.State == string(job.Blocked) {
		if d.BlockedBy, err = s.blockedBy(ctx, id); err != nil {
			return d, err
		}
	}
	lost, err := s.outputLost(ctx, id)
	if err != nil {
		return d, err
	}
	if r.attempt > 0 {
		d.OutputLost = lost[r.attempt]
	}
	if d.History, err = s.history(ctx, s.rdb, id, lost); err != nil {
		return d, err
	}
	if d.State == string(job.Executing) {
		if d.Copies, err = s.runningCopies(ctx, id); err != nil {
			return d, err
		}
	}
	if (d.State == string(job.Queued) || d.State == string(job.Waiting)) && s.costedQueue(ctx, d.Queue) {
		// Only a queue with a deadline or budget has marks to read, and
		// reading them waits for the core.
		if err := s.do(ctx, func() error {
			d.Infeasible = s.ledger.Infeasible(id)
			if j, ok := s.g.Node(id); ok {
				d.OverBudget = s.ledger.OverBudget(j.Queue)
			}
			return nil
		}); err != nil {
			return d, err
		}
	}
	if (d.State == string(job.Queued) || d.State == string(job.Waiting)) && d.Resources.Asks() {
		if err := s.do(ctx, func() error { d.Unfit = s.pack.Why(id); return nil }); err != nil {
			return d, err
		}
	}
	if d.Plan, err = plans.JobPlan(ctx, s.rdb, d.ID); err != nil {
		return d, err
	}
	return d, s.jobFiles(ctx, &d)
}

// costedQueue says whether the queue named has a deadline or a budget
// (as stored: a read that does not wait for the core).
func (s *Store) costedQueue(ctx context.Context, name string) bool {
	var costed bool
	err := s.rdb.QueryRowContext(ctx, queuesSQL.Get("Costed"), name).Scan(&costed)
	return err == nil && costed
}

// blockedBy finds the failed or deleted job that blocks job id, following
// blocked jobs of its prerequisite targets breadth first (nil if none is
// found within a bounded search).
func (s *Store) blockedBy(ctx context.Context, id int64) (*protocol.JobRefState, error) {
	seen := map[int64]bool{id: true}
	frontier := []int64{id}
	for len(frontier) > 0 && len(seen) < 10000 {
		cur := frontier[0]
		frontier = frontier[1:]
		rows, err := s.rdb.QueryContext(ctx, jobsSQL.Get("Blockers"), cur)
		if err != nil {
			return nil, err
		}
		var found *protocol.JobRefState
		for rows.Next() {
			var r protocol.JobRefState
			if err := rows.Scan(&r.Job, &r.Target, &r.State); err != nil {
				rows.Close()
				return nil, err
			}
			if r.State != string(job.Blocked) {
				found = &r
				break
			}
			if !seen[r.Job] {
				seen[r.Job] = true
				frontier = append(frontier, r.Job)
			}
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
		if found != nil {
			return found, nil
		}
	}
	return nil, nil
}

// querier is what reads need of a database or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// history returns a job's earlier attempts, oldest first; lost is the
// job's lost-output records by attempt.
func (s *Store) history(ctx context.Context, db querier, id int64, lost map[int]string) ([]protocol.AttemptInfo, error) {
	rows, err := db.QueryContext(ctx, attemptsSQL.Get("History"), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []protocol.AttemptInfo
	for rows.Next() {
		var a protocol.AttemptInfo
		var started, finished, exit sql.NullInt64
		var outDir string
		var use usageCols
		if err := rows.Scan(&a.Attempt, &a.Site, &a.Host, &started, &finished, &exit, &a.Reason, &outDir, &use.user, &use.sys, &use.rss, &use.cost, &a.Command); err != nil {
			return nil, err
		}
		a.Started, a.Finished = formatMicros(started), formatMicros(finished)
		a.Accounting = use.accounting(started, finished)
		if exit.Valid {
			e := int(exit.Int64)
			a.Exit = &e
		}
		if outDir != "" {
			a.Stdout, a.Stderr = job.OutputPaths(outDir, id, a.Attempt)
			a.StdoutCopy, a.StderrCopy = s.copies(outDir, id, a.Attempt)
		}
		a.OutputLost = lost[a.Attempt]
		out = append(out, a)
	}
	return out, closeRows(rows)
}

// jobFiles adds a job's declared files with the catalog's record of each
// (where it was produced, checksum, replicas) and the job's transfers.
func (s *Store) jobFiles(ctx context.Context, d *protocol.JobDetail) error {
	rows, err := s.rdb.QueryContext(ctx, filesSQL.Get("JobFiles"), d.ID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var kind string
		var f protocol.FileInfo
		var size sql.NullInt64
		var catSize int64
		if err := rows.Scan(&kind, &f.Path, &size, &catSize, &f.Site, &f.Host, &f.Job, &f.SHA256); err != nil {
			rows.Close()
			return err
		}
		if size.Valid {
			n := size.Int64
			f.Size = &n
		} else if catSize >= 0 {
			f.Size = &catSize
		}
		if kind == "i" {
			d.Inputs = append(d.Inputs, f)
		} else {
			d.Outputs = append(d.Outputs, f)
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	for _, fs := range [][]protocol.FileInfo{d.Inputs, d.Outputs} {
		for i := range fs {
			if fs[i].Replicas, err = catalog.Replicas(ctx, s.rdb, fs[i].Path); err != nil {
				return err
			}
		}
	}
	trows, err := s.rdb.QueryContext(ctx, filesSQL.Get("JobTransfers"), d.ID)
	if err != nil {
		return err
	}
	for trows.Next() {
		var t protocol.TransferInfo
		var from, to Place
		var started int64
		if err := trows.Scan(&t.Path, &from.Site, &from.Host, &to.Site, &to.Host, &t.Bytes, &t.Seconds, &started, &t.Error, &t.Via); err != nil {
			trows.Close()
			return err
		}
		t.Job, t.From, t.To = d.ID, from.String(), to.String()
		t.Started = time.UnixMicro(started).UTC().Format(time.RFC3339Nano)
		d.Transfers = append(d.Transfers, t)
	}
	return closeRows(trows)
}
