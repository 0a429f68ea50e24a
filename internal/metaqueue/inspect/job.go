package inspect

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// EmptyPrereqs lists the prerequisite targets of jobs first..last that
// have no job and had none purged (at most 8): their jobs wait until some
// are submitted, forever if a name was typed for something else (Slurm's
// -p PARTITION).
func (r *Reader) EmptyPrereqs(ctx context.Context, first, last int64) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, queries.Get("EmptyPrereqs"), first, last)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	return names, closeRows(rows)
}

// Job returns everything known about one job.
func (r *Reader) Job(ctx context.Context, id int64) (protocol.JobDetail, error) {
	d, row, err := r.jobOutput(ctx, id)
	if err != nil {
		return d, err
	}
	if d.Array, err = r.src.Array(ctx, id); err != nil {
		return d, err
	}
	if d.WaitingOn, err = r.waitingOn(ctx, id, row.Prereqs, row.AfterAny); err != nil {
		return d, err
	}
	if d.State == string(job.Blocked) {
		if d.BlockedBy, err = r.blockedBy(ctx, id); err != nil {
			return d, err
		}
	}
	if d.State == string(job.Executing) {
		if d.Copies, err = r.src.RunningCopies(ctx, id); err != nil {
			return d, err
		}
	}
	if err := r.marks(ctx, &d); err != nil {
		return d, err
	}
	if d.TimeLimit, err = r.timeLimit(ctx, id); err != nil {
		return d, err
	}
	if d.Plan, err = r.src.Plan(ctx, d.ID); err != nil {
		return d, err
	}
	return d, r.files(ctx, &d)
}

// JobOutput is the part of job id's detail that reading its output needs:
// its row, where each attempt's outputs lie and what was lost of them,
// its attempts. Not its array's counts (a scan of every member: most of
// a second in an array of a million), prerequisites, copies, plan or
// files: mqstat --cat, an export and a follower's polls ask this.
func (r *Reader) JobOutput(ctx context.Context, id int64) (protocol.JobDetail, error) {
	d, _, err := r.jobOutput(ctx, id)
	return d, err
}

func (r *Reader) jobOutput(ctx context.Context, id int64) (protocol.JobDetail, statRow, error) {
	var d protocol.JobDetail
	row, err := r.jobRow(ctx, id)
	if err != nil {
		return d, row, err
	}
	d.JobInfo, d.Placeholder = row.JobInfo, row.placeholder
	if row.outDir != "" && row.attempt > 0 {
		d.Stdout, d.Stderr = job.OutputPaths(row.outDir, id, row.attempt)
		d.StdoutCopy, d.StderrCopy = r.copies(row.outDir, id, row.attempt)
	}
	lost, err := r.outputLost(ctx, id)
	if err != nil {
		return d, row, err
	}
	if row.attempt > 0 {
		d.OutputLost = lost[row.attempt]
	}
	if d.History, err = r.history(ctx, r.db, id, lost); err != nil {
		return d, row, err
	}
	if d.Unstarted, err = r.attempts(ctx, r.db, id, nil, true); err != nil {
		return d, row, err
	}
	return d, row, r.addStreamed(ctx, &d, row.attempt)
}

// jobRow reads job id's listing row.
func (r *Reader) jobRow(ctx context.Context, id int64) (statRow, error) {
	rows, err := r.db.QueryContext(ctx, JobQuery(), id)
	if err != nil {
		return statRow{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return statRow{}, err
		}
		return statRow{}, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
	}
	return scanStat(rows)
}

// marks adds, for a job not started, why it cannot run now: its costed
// queue's marks and why no placeholder fits its request or its time;
// for one handed out, what it was granted. Both are read from the core's memory.
func (r *Reader) marks(ctx context.Context, d *protocol.JobDetail) error {
	if d.Resources.Asks() && (d.State == string(job.Executing) || d.State == string(job.Prefetched)) {
		var err error
		_, d.Granted, err = r.src.Fit(ctx, d.ID)
		return err
	}
	if d.State != string(job.Queued) && d.State != string(job.Waiting) {
		return nil
	}
	// Only a queue with a deadline or budget has marks to read, and
	// reading them waits for the core.
	if r.costedQueue(ctx, d.Queue) {
		var err error
		if d.Infeasible, d.OverBudget, err = r.src.CostMarks(ctx, d.ID); err != nil {
			return err
		}
	}
	var err error
	d.Unfit, _, err = r.src.Fit(ctx, d.ID)
	return err
}

// copies names the CLS's copies of an attempt's output when the
// placeholder wrote it elsewhere (a remote placeholder stages it here).
func (r *Reader) copies(outDir string, id int64, attempt int) (stdout, stderr string) {
	if r.outputDir == "" || filepath.Clean(outDir) == filepath.Clean(r.outputDir) {
		return "", ""
	}
	return job.OutputPaths(r.outputDir, id, attempt)
}

// waitingOn counts the jobs of each of job id's prerequisite targets by
// state, by the job's own prerequisite rows (target names have no index).
// The after-any targets come last.
func (r *Reader) waitingOn(ctx context.Context, id int64, prereqs, afterAny []string) ([]protocol.TargetStatus, error) {
	if len(prereqs)+len(afterAny) == 0 {
		return nil, nil
	}
	counts, purged, err := r.prereqCounts(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []protocol.TargetStatus
	for i, name := range slices.Concat(prereqs, afterAny) {
		ts := protocol.TargetStatus{Target: name, AfterAny: i >= len(prereqs), Counts: map[string]int{}}
		ts.PurgedDone, ts.PurgedBad = purged[name][0], purged[name][1]
		// Purged jobs count as they ended, as the core counts them.
		total, done := ts.PurgedDone+ts.PurgedBad, ts.PurgedDone
		ended := total
		for st, n := range counts[name] {
			ts.Counts[st] = n
			total += n
			if st == string(job.Done) {
				done = n
			}
			if s := job.State(st[0]); s == job.Done || s.Bad() {
				ended += n
			}
		}
		ts.Complete = total > 0 && done == total
		ts.Ended = total > 0 && ended == total
		out = append(out, ts)
	}
	return out, nil
}

// prereqCounts counts the jobs of each of job id's prerequisite targets
// by state letter. A target whose jobs are every id from its lowest to
// its highest (an array of a million, gathered) is counted from the
// core's sets of jobs by state, its rows unread; PrereqStates counts the
// others, all in one query (it read every job of every target: seconds
// for a million). purged is, for each target that had jobs purged, how
// many of them were done and how many failed or deleted.
func (r *Reader) prereqCounts(ctx context.Context, id int64) (counts map[string]map[string]int, purged map[string][2]int, err error) {
	type run struct {
		name        string
		first, last int64
	}
	var runs []run
	purged = map[string][2]int{}
	scattered := r.src == nil
	if !scattered {
		rows, err := r.db.QueryContext(ctx, queries.Get("PrereqSpans"), id)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var t run
			var n int64
			var p [2]int
			if err := rows.Scan(&t.name, &t.first, &t.last, &n, &p[0], &p[1]); err != nil {
				rows.Close()
				return nil, nil, err
			}
			if p != [2]int{} {
				purged[t.name] = p
			}
			if n > 0 && n == t.last-t.first+1 {
				runs = append(runs, t)
			} else if n > 0 {
				scattered = true
			}
		}
		if err := closeRows(rows); err != nil {
			return nil, nil, err
		}
	}
	counts = map[string]map[string]int{}
	if len(runs) > 0 {
		err := r.src.States(ctx, func(s StateSets) error {
			for _, t := range runs {
				c, m := s.Span(t.first, t.last), map[string]int{}
				for _, st := range job.States {
					if c[st] > 0 {
						m[string(st)] = c[st]
					}
				}
				counts[t.name] = m
			}
			return nil
		})
		if errors.Is(err, ErrBusy) {
			scattered, counts = true, map[string]map[string]int{}
		} else if err != nil {
			return nil, nil, err
		}
	}
	if !scattered {
		return counts, purged, nil
	}
	rows, err := r.db.QueryContext(ctx, queries.Get("PrereqStates"), id)
	if err != nil {
		return nil, nil, err
	}
	counted := maps.Clone(counts)
	for rows.Next() {
		var name string
		var st sql.NullString
		var n int
		var p [2]int
		if err := rows.Scan(&name, &st, &n, &p[0], &p[1]); err != nil {
			rows.Close()
			return nil, nil, err
		}
		if p != [2]int{} {
			purged[name] = p
		}
		if _, run := counted[name]; run {
			continue // counted from the core's sets
		}
		if counts[name] == nil {
			counts[name] = map[string]int{}
		}
		if st.Valid && n > 0 {
			counts[name][st.String] = n
		}
	}
	return counts, purged, closeRows(rows)
}

// costedQueue says whether the queue named has a deadline or a budget
// (as stored: a read that does not wait for the core).
func (r *Reader) costedQueue(ctx context.Context, name string) bool {
	var costed bool
	err := r.db.QueryRowContext(ctx, queries.Get("Costed"), name).Scan(&costed)
	return err == nil && costed
}

// maxBlockerSearch bounds the jobs blockedBy visits.
const maxBlockerSearch = 10000

// blockedBy finds the failed or deleted job that blocks job id, following
// blocked jobs of its prerequisite targets breadth first (nil if none is
// found within a bounded search), or the target whose failed or deleted
// jobs were purged (Job 0).
func (r *Reader) blockedBy(ctx context.Context, id int64) (*protocol.JobRefState, error) {
	seen := map[int64]bool{id: true}
	frontier := []int64{id}
	for len(frontier) > 0 && len(seen) < maxBlockerSearch {
		cur := frontier[0]
		frontier = frontier[1:]
		var b protocol.JobRefState
		err := r.db.QueryRowContext(ctx, queries.Get("FailedPrereq"), cur).Scan(&b.Job, &b.Target, &b.State)
		if err == nil {
			return &b, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		// A target whose failed jobs were purged blocks with none left.
		err = r.db.QueryRowContext(ctx, queries.Get("PurgedBadPrereq"), cur).Scan(&b.Target)
		if err == nil {
			return &protocol.JobRefState{Target: b.Target}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		rows, err := r.db.QueryContext(ctx, queries.Get("BlockedPrereqs"), cur)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			if err := rows.Scan(&b.Job, &b.Target, &b.State); err != nil {
				rows.Close()
				return nil, err
			}
			if !seen[b.Job] {
				seen[b.Job] = true
				frontier = append(frontier, b.Job)
			}
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// outputLost reads why each attempt of a job lost its output, by attempt.
func (r *Reader) outputLost(ctx context.Context, id int64) (map[int]string, error) {
	rows, err := r.db.QueryContext(ctx, queries.Get("OutputLost"), id)
	if err != nil {
		return nil, err
	}
	var m map[int]string
	for rows.Next() {
		var attempt int
		var why string
		if err := rows.Scan(&attempt, &why); err != nil {
			rows.Close()
			return nil, err
		}
		if m == nil {
			m = map[int]string{}
		}
		m[attempt] = why
	}
	return m, closeRows(rows)
}

// history returns a job's earlier attempts, oldest first; lost is the
// job's lost-output records by attempt.
func (r *Reader) history(ctx context.Context, db Querier, id int64, lost map[int]string) ([]protocol.AttemptInfo, error) {
	return r.attempts(ctx, db, id, lost, false)
}

// attempts returns a job's earlier attempts that ran, or those handed
// back unstarted, oldest first.
func (r *Reader) attempts(ctx context.Context, db Querier, id int64, lost map[int]string, unstarted bool) ([]protocol.AttemptInfo, error) {
	var un int
	if unstarted {
		un = 1
	}
	rows, err := db.QueryContext(ctx, queries.Get("History"), id, un)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []protocol.AttemptInfo
	for rows.Next() {
		var a protocol.AttemptInfo
		var started, finished, exit sql.NullInt64
		var outDir string
		var use Usage
		if err := rows.Scan(&a.Attempt, &a.Site, &a.Host, &started, &finished, &exit, &a.Reason, &outDir, &use.User, &use.Sys, &use.RSS, &use.Cost, &a.Command); err != nil {
			return nil, err
		}
		a.Started, a.Finished = Micros(started), Micros(finished)
		a.Accounting = use.Accounting(started, finished)
		if exit.Valid {
			e := int(exit.Int64)
			a.Exit = &e
		}
		if outDir != "" {
			a.Stdout, a.Stderr = job.OutputPaths(outDir, id, a.Attempt)
			a.StdoutCopy, a.StderrCopy = r.copies(outDir, id, a.Attempt)
		}
		a.OutputLost = lost[a.Attempt]
		out = append(out, a)
	}
	return out, closeRows(rows)
}

// files adds a job's declared files with the catalog's record of each
// (where it was produced, checksum, replicas) and the job's transfers.
func (r *Reader) files(ctx context.Context, d *protocol.JobDetail) error {
	rows, err := r.db.QueryContext(ctx, queries.Get("JobFiles"), d.ID)
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
			if fs[i].Replicas, err = r.src.Replicas(ctx, fs[i].Path); err != nil {
				return err
			}
		}
	}
	d.Transfers, err = r.transfers(ctx, d.ID)
	return err
}

// transfers lists the copies made of job id's files.
func (r *Reader) transfers(ctx context.Context, id int64) ([]protocol.TransferInfo, error) {
	rows, err := r.db.QueryContext(ctx, queries.Get("JobTransfers"), id)
	if err != nil {
		return nil, err
	}
	var out []protocol.TransferInfo
	for rows.Next() {
		var t protocol.TransferInfo
		var from, to place
		var started int64
		if err := rows.Scan(&t.Path, &from.site, &from.host, &to.site, &to.host, &t.Bytes, &t.Seconds, &started, &t.Error, &t.Via); err != nil {
			rows.Close()
			return nil, err
		}
		t.Job, t.From, t.To = id, from.String(), to.String()
		t.Started = time.UnixMicro(started).UTC().Format(time.RFC3339Nano)
		out = append(out, t)
	}
	return out, closeRows(rows)
}

// place is a site and host as a transfer's row keeps them.
type place struct{ site, host string }

// String is "site" or "site:host", as the catalog names places.
func (p place) String() string {
	if p.host == "" {
		return p.site
	}
	return p.site + ":" + p.host
}

// timeLimit is job id's time limit (mqsub --time), from its own
// environment; 0 for none, or when the environment does not decode.
func (r *Reader) timeLimit(ctx context.Context, id int64) (float64, error) {
	var text string
	err := r.db.QueryRowContext(ctx, queries.Get("JobEnv"), id).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var env map[string]string
	if json.Unmarshal([]byte(text), &env) != nil {
		return 0, nil // shown as none: the rest of the detail still is
	}
	return protocol.TimeLimit([]string{protocol.EnvTimeLimit + "=" + env[protocol.EnvTimeLimit]}), nil
}
