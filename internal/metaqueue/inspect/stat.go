package inspect

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// statSelect is a listing's query, which Stat and Job complete.
var statSelect = base("Stat")

// base is query name without its final ";", for a builder to append
// clauses to (WHERE, AND ..., ORDER BY, LIMIT).
func base(name string) string {
	return strings.TrimSuffix(queries.Get(name), ";")
}

// JobQuery is the listing's query of one job, by id.
func JobQuery() string { return statSelect + " WHERE j.id = ?" }

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
	var st, prereqs, res, afterAny string
	var use Usage
	err := rows.Scan(&r.ID, &r.Queue, &r.Target, &st, &r.Attempts, &exit, &r.Site, &r.Host, &submitted, &started,
		&finished, &r.Command, &r.Cwd, &est, &r.Reason, &prereqs, &r.placeholder, &r.outDir, &r.attempt,
		&use.User, &use.Sys, &use.RSS, &use.Cost, &r.Priority, &res, &afterAny)
	if err != nil {
		return r, err
	}
	if res != "" {
		if err := json.Unmarshal([]byte(res), &r.Resources); err != nil {
			return r, fmt.Errorf("job %d: stored request: %w", r.ID, err)
		}
	}
	r.Accounting = use.Accounting(started, finished)
	r.State = st
	r.Command, r.CommandBytes = protocol.WireCommand(r.Command)
	if exit.Valid {
		e := int(exit.Int64)
		r.Exit = &e
	}
	r.Submitted, r.Started, r.Finished = Micros(submitted), Micros(started), Micros(finished)
	if st == string(job.Prefetched) {
		r.Started = "" // handed out, not started: the row's time is the hand-out's
	}
	r.Est = est.Float64
	r.Prereqs = []string{}
	if prereqs != "" {
		r.Prereqs = strings.Split(prereqs, "\n")
	}
	if afterAny != "" {
		r.AfterAny = strings.Split(afterAny, "\n")
	}
	return r, nil
}

// maxBatchBytes bounds the encoded size of one streamed stat frame.
const maxBatchBytes = 1 << 20

// maxStatIDs bounds the ids a listing names.
const maxStatIDs = 10000

// span is an array's ids, first..last, or a gap's between arrays.
type span struct{ first, last int64 }

// statQuery builds the listing of the jobs st selects with ids above
// after. A collapsed one leaves out the members of arrays: with ids
// named, each job's array is looked up (at most maxStatIDs lookups);
// else the query searches one gap between arrays, whose bounds are its
// arguments at gap and gap+1 (-1 when it has none), and Stat runs it once
// a gap, so a million members cost nothing.
func statQuery(st protocol.Stat, after int64) (q string, args []any, gap int, err error) {
	return buildStat(st, after, false)
}

// buildStat is statQuery; byTarget reads the jobs of a target prefix's
// targets by target (jobs_target), sorted, rather than every job in id
// order: for a prefix whose targets hold few of the jobs (fewByPrefix).
func buildStat(st protocol.Stat, after int64, byTarget bool) (q string, args []any, gap int, err error) {
	var where []string
	if after > 0 {
		where = append(where, "j.id > ?")
		args = append(args, after)
	}
	if st.Queue != "" {
		where = append(where, "q.name = ?")
		args = append(args, st.Queue)
	}
	if st.Target != "" {
		// Target names are unique but not indexed (migration 6): the
		// target's id first, then its jobs by jobs_target, already in id
		// order. "t.name = ?" made SQLite read every job, joining each to
		// its target's name, to list a target of a few jobs or none.
		where = append(where, "j.target_id = (SELECT id FROM targets WHERE name = ?)")
		args = append(args, st.Target)
	}
	if st.TargetPrefix != "" {
		// Names are valid UTF-8, which has no 0xff byte, so the names
		// starting with the prefix are those in [prefix, prefix+0xff).
		cond := "t.name >= ? AND t.name < ?"
		if byTarget {
			cond = "j.target_id IN (SELECT id FROM targets WHERE name >= ? AND name < ?)"
		}
		where = append(where, cond)
		args = append(args, st.TargetPrefix, st.TargetPrefix+"\xff")
	}
	states := st.States
	if states == "" {
		states = "WQHPEDFB"
	}
	parsed, err := job.ParseStates(states)
	if err != nil {
		return "", nil, -1, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if cond, sargs := stateCond(parsed); cond != "" {
		where = append(where, cond)
		args = append(args, sargs...)
	}
	if st.To > 0 {
		where = append(where, "j.id BETWEEN ? AND ?")
		args = append(args, st.From, st.To)
	}
	if len(st.IDs) > 0 {
		if len(st.IDs) > maxStatIDs {
			return "", nil, -1, protocol.Errorf(protocol.CodeBadRequest, "at most %d job ids per request", maxStatIDs)
		}
		where = append(where, "j.id IN ("+params(len(st.IDs))+")")
		for _, id := range st.IDs {
			args = append(args, id)
		}
	}
	gap = -1
	switch {
	case st.Collapse && (len(st.IDs) > 0 || byTarget):
		// Named jobs, or a prefix's few read by target: each looked up
		// in the arrays, in one query.
		where = append(where, "NOT EXISTS ("+base("InArray")+")")
	case st.Collapse:
		where = append(where, "j.id BETWEEN ? AND ?")
		gap, args = len(args), append(args, int64(math.MinInt64), int64(math.MaxInt64))
	}
	q = statSelect + whereClause(where)
	if st.Last < 0 || st.Limit < 0 {
		return "", nil, -1, protocol.Errorf(protocol.CodeBadRequest, "limit and last must be 0 or more")
	}
	if st.Last > 0 {
		// The latest Last, from the top of the id order down (cheap:
		// ended jobs are mostly recent), then in id order again.
		q = "SELECT * FROM (" + q + " ORDER BY j.id DESC LIMIT ?) ORDER BY 1"
		args = append(args, st.Last)
	} else {
		q += " ORDER BY j.id"
	}
	if st.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, st.Limit)
	}
	return q, args, gap, nil
}

func whereClause(where []string) string {
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

// gaps are the id ranges between arrays (by first id, apart), each
// first..last, the ids before the first array and after the last
// included.
func gaps(arrays []span) []span {
	var out []span
	lo := int64(math.MinInt64)
	for _, a := range arrays {
		if a.first > lo {
			out = append(out, span{lo, a.first - 1})
		}
		lo = a.last + 1
	}
	return append(out, span{lo, math.MaxInt64})
}

// stateCond is the condition of a listing by states ("" for every one).
// P is stored as E with the prefetched mark: E selects every job handed
// out, P among them (a client that predates P still lists them), and P
// alone only those.
func stateCond(states []job.State) (string, []any) {
	var stored []any
	e, p := false, false
	for _, s := range states {
		switch s {
		case job.Prefetched:
			p = true
			continue
		case job.Executing:
			e = true
		}
		if !slices.Contains(stored, any(string(s))) {
			stored = append(stored, string(s))
		}
	}
	if p && !e {
		stored = append(stored, string(job.Executing))
	}
	if len(stored) == len(job.States)-1 && (e || !p) {
		return "", nil // every stored state
	}
	cond := "j.state IN (" + params(len(stored)) + ")"
	if p && !e {
		cond = "(" + cond + " AND (j.state <> 'E' OR j.prefetched = 1))"
	}
	return cond, stored
}

// params is n comma-separated parameters.
func params(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// Stat lists the jobs st selects with ids above after, in id order,
// calling emit with batches of up to 1,000. It reads a consistent
// snapshot and never waits for the writer (by states few jobs are in, it
// asks the core which jobs they are, unless the core says it is busy).
func (r *Reader) Stat(ctx context.Context, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) error {
	if done, err := r.byState(ctx, st, after, emit); done || err != nil {
		return err
	}
	if done, err := r.byQueue(ctx, st, after, emit); done || err != nil {
		return err
	}
	return r.scan(ctx, st, after, emit)
}

// queueShare: byQueue reads a queue's runs of ids when they hold at
// most one id in queueShare of those above the listing's start.
const queueShare = 4

// byQueue lists the jobs of a listing by queue (the dashboard's
// /jobs?queue=, mqstat -q) from the runs of ids the core says hold every
// job of the queue (bystate.Spans), one query a run in id order, each
// keeping every condition: a queue of a few jobs among a million is
// found without reading the others (there is no index on the queue). It
// says false, having listed nothing, when the listing names a target or
// prefix, jobs or the latest ones, or collapses arrays, or the runs hold too
// many of the ids.
func (r *Reader) byQueue(ctx context.Context, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) (bool, error) {
	if st.Queue == "" || st.Target != "" || st.TargetPrefix != "" || len(st.IDs) > 0 || st.Last > 0 || st.Collapse || r.src == nil {
		return false, nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	// The snapshot is taken first: the core's runs, which only grow, then
	// hold every job of the queue it has.
	var qid int32
	var top int64
	if err := tx.QueryRowContext(ctx, queries.Get("TopID")).Scan(&top); err != nil {
		return false, err
	}
	if err := tx.QueryRowContext(ctx, queries.Get("QueueID"), st.Queue).Scan(&qid); errors.Is(err, sql.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	lo, hi := after+1, top
	if st.To > 0 {
		lo, hi = max(lo, st.From), min(hi, st.To)
	}
	var runs [][2]int64
	known := false
	err = r.src.States(ctx, func(s StateSets) error { runs, known = s.QueueRuns(qid); return nil })
	if errors.Is(err, ErrBusy) || (err == nil && !known) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	runs = clipRuns(runs, lo, hi)
	n := int64(0)
	for _, run := range runs {
		n += run[1] - run[0] + 1
	}
	if n*queueShare > hi-lo+1 {
		return false, nil
	}
	b := newBatcher(emit)
	for _, run := range runs {
		page := st
		page.From, page.To = run[0], run[1]
		n, err := r.listPage(ctx, tx, page, b)
		if err != nil {
			return true, err
		}
		if st.Limit > 0 {
			if st.Limit -= n; st.Limit <= 0 {
				break
			}
		}
	}
	return true, b.flush()
}

// clipRuns are the parts of runs (first, last) within lo..hi.
func clipRuns(runs [][2]int64, lo, hi int64) [][2]int64 {
	var out [][2]int64
	for _, run := range runs {
		if run[0], run[1] = max(run[0], lo), min(run[1], hi); run[0] <= run[1] {
			out = append(out, run)
		}
	}
	return out
}

// scan is Stat reading the jobs in id order.
func (r *Reader) scan(ctx context.Context, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) error {
	if !st.Earlier && !st.Collapse {
		return r.stat(ctx, r.db, st, after, emit)
	}
	// Earlier attempts, and the arrays a listing collapses, are read
	// beside the listing, on its connection and in its snapshot (a second
	// connection could wait for ever behind other listings holding the
	// rest).
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	few, err := fewByPrefix(ctx, tx, st)
	if err != nil {
		return err
	}
	if st.Collapse && len(st.IDs) == 0 && !few {
		return r.statGaps(ctx, tx, st, after, emit)
	}
	return r.statBy(ctx, tx, st, after, few, emit)
}

// byStatePage is how many jobs byState names a query.
const byStatePage = 1000

// byStateShare: byState lists by name the jobs of states holding at
// most one job in byStateShare, where the query would read every job to
// find few (there is no index on the state); past it, reading them all
// in id order costs less than looking each up.
const byStateShare = 8

// byState lists the jobs of a listing by states few jobs are in, naming
// them a page at a time as the core has them (Sources.States); the
// query keeps its other conditions and still checks each job's state in
// its snapshot. It says false, having listed nothing, when st names jobs
// or asks for the latest ones, or the states hold too many jobs.
func (r *Reader) byState(ctx context.Context, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) (bool, error) {
	if len(st.IDs) > 0 || st.Last > 0 || r.src == nil {
		return false, nil
	}
	states := st.States
	if states == "" {
		states = "WQHPEDFB"
	}
	parsed, err := job.ParseStates(states)
	if err != nil {
		return false, nil // statQuery says so
	}
	var stored []job.State
	for _, s := range parsed {
		if s == job.Prefetched {
			s = job.Executing
		}
		stored = append(stored, s)
	}
	if st.To > 0 {
		after = max(after, st.From-1)
	}
	ids, in, all, err := r.inStates(ctx, stored, after, byStatePage)
	if errors.Is(err, ErrBusy) || (err == nil && in*byStateShare > all) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	b := newBatcher(emit)
	if len(ids) == 0 || (st.To > 0 && ids[0] > st.To) {
		return true, b.flush() // none: no snapshot to read
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return true, err
	}
	defer tx.Rollback()
	for {
		more := len(ids) == byStatePage
		// The first id past st.To (st.To+1 would overflow for "all").
		if i := sort.Search(len(ids), func(k int) bool { return ids[k] > st.To }); st.To > 0 && i < len(ids) {
			ids, more = ids[:i], false
		}
		if len(ids) == 0 {
			break
		}
		page := st
		page.IDs, page.From, page.To = ids, 0, 0
		n, err := r.listPage(ctx, tx, page, b)
		if err != nil {
			return true, err
		}
		if st.Limit > 0 {
			if st.Limit -= n; st.Limit <= 0 {
				break
			}
		}
		if !more {
			break
		}
		last := ids[len(ids)-1]
		if ids, _, _, err = r.inStates(ctx, stored, last, byStatePage); errors.Is(err, ErrBusy) {
			if err := b.flush(); err != nil {
				return true, err
			}
			tx.Rollback() // the scan's own snapshot may need a connection of the pool
			return true, r.scan(ctx, st, last, emit)
		} else if err != nil {
			return true, err
		}
	}
	return true, b.flush()
}

// stat runs one query of a listing.
func (r *Reader) stat(ctx context.Context, db Querier, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) error {
	few, err := fewByPrefix(ctx, db, st)
	if err != nil {
		return err
	}
	return r.statBy(ctx, db, st, after, few, emit)
}

// statBy is stat, reading by target as fewByPrefix said (byTarget): a
// collapsed listing of a prefix's few jobs too, each looked up in the
// arrays, where reading each gap between arrays read every job of it.
func (r *Reader) statBy(ctx context.Context, db Querier, st protocol.Stat, after int64, byTarget bool, emit func([]protocol.JobInfo) error) error {
	q, args, _, err := buildStat(st, after, byTarget)
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	b := newBatcher(emit)
	if _, err := r.list(ctx, db, rows, st.Earlier, b); err != nil {
		return err
	}
	return b.flush()
}

// prefixShare: a listing by target prefix reads the jobs of the prefix's
// targets by target, then sorts them by id, when they are at most one in
// prefixShare of the ids given; past it, reading every job in id order
// costs less (at a million jobs: 0.8 s to find a Snakemake run's few
// jobs by a scan, 0.01 s by target; all of them, 6 s by a scan, 7-11 s
// by target and sorted).
const prefixShare = 4

// fewByPrefix says whether st lists by target prefix, and the prefix's
// targets hold few enough jobs to read them by target (prefixShare),
// counted up to the bound through the jobs_target index.
func fewByPrefix(ctx context.Context, db Querier, st protocol.Stat) (bool, error) {
	if st.TargetPrefix == "" || len(st.IDs) > 0 {
		return false, nil // named jobs are read by id
	}
	var top, n int64
	if err := db.QueryRowContext(ctx, queries.Get("TopID")).Scan(&top); err != nil {
		return false, err
	}
	bound := top/prefixShare + 1
	if err := db.QueryRowContext(ctx, queries.Get("PrefixJobs"), st.TargetPrefix, st.TargetPrefix+"\xff", bound).Scan(&n); err != nil {
		return false, err
	}
	return n < bound, nil
}

// statGaps runs a collapsed listing once for each gap between arrays
// (from its cut with --last), in id order, until its limit.
func (r *Reader) statGaps(ctx context.Context, tx *sql.Tx, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) error {
	arrays, err := collapsed(ctx, tx)
	if err != nil {
		return err
	}
	gs := gaps(arrays)
	if st.Last > 0 {
		cut, err := latest(ctx, tx, st, after, gs)
		if err != nil {
			return err
		}
		st.Last, after = 0, max(after, cut-1)
	}
	q, args, at, err := statQuery(st, after)
	if err != nil {
		return err
	}
	stmt, err := tx.PrepareContext(ctx, q)
	if err != nil {
		return err
	}
	defer stmt.Close()
	b := newBatcher(emit)
	for _, g := range gs {
		if !listed(g, st, after) {
			continue
		}
		args[at], args[at+1] = g.first, g.last
		rows, err := stmt.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		n, err := r.list(ctx, tx, rows, st.Earlier, b)
		if err != nil {
			return err
		}
		if st.Limit > 0 {
			if st.Limit -= n; st.Limit == 0 {
				break
			}
			args[len(args)-1] = st.Limit
		}
	}
	return b.flush()
}

// latest is the lowest id of the latest st.Last jobs of a collapsed
// listing over the gaps gs: they are searched from the top down, each for
// the latest it still needs.
func latest(ctx context.Context, tx *sql.Tx, st protocol.Stat, after int64, gs []span) (int64, error) {
	st.Limit, st.Earlier = 0, false
	q, args, at, err := statQuery(st, after)
	if err != nil {
		return 0, err
	}
	stmt, err := tx.PrepareContext(ctx, "SELECT min(id), count(*) FROM ("+q+")")
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	low, need := int64(math.MaxInt64), st.Last
	for i := len(gs) - 1; i >= 0 && need > 0 && gs[i].last > after; i-- {
		if !listed(gs[i], st, after) {
			continue
		}
		args[at], args[at+1], args[len(args)-1] = gs[i].first, gs[i].last, need
		var first sql.NullInt64
		var n int
		if err := stmt.QueryRowContext(ctx, args...).Scan(&first, &n); err != nil {
			return 0, err
		}
		if first.Valid {
			low = first.Int64
		}
		need -= n
	}
	return low, nil
}

// listed says whether gap g holds ids a listing of st above after may list.
func listed(g span, st protocol.Stat, after int64) bool {
	return g.last > after && (st.To == 0 || (g.last >= st.From && g.first <= st.To))
}

// batcher gathers a listing's jobs into batches bounded in jobs and in
// bytes, so a frame stays far below protocol.MaxFrame even with 128 KiB
// commands.
type batcher struct {
	emit func([]protocol.JobInfo) error
	jobs []protocol.JobInfo
	size int
}

func newBatcher(emit func([]protocol.JobInfo) error) *batcher {
	return &batcher{emit: emit, jobs: make([]protocol.JobInfo, 0, 1000)}
}

func (b *batcher) add(j protocol.JobInfo) error {
	b.jobs = append(b.jobs, j)
	b.size += 512 + 2*len(j.Command) + len(j.Cwd) + len(j.Reason) + 256*len(j.Earlier)
	if len(b.jobs) < cap(b.jobs) && b.size <= maxBatchBytes {
		return nil
	}
	return b.flush()
}

// flush emits what b holds (an empty batch ends a listing).
func (b *batcher) flush() error {
	err := b.emit(b.jobs)
	b.jobs, b.size = b.jobs[:0], 0
	return err
}

// listPage lists the jobs page selects (statQuery) in tx into b, and
// says how many.
func (r *Reader) listPage(ctx context.Context, tx *sql.Tx, page protocol.Stat, b *batcher) (int, error) {
	q, args, _, err := statQuery(page, 0)
	if err != nil {
		return 0, err
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return r.list(ctx, tx, rows, page.Earlier, b)
}

// list reads a listing's rows into b, with each job's earlier attempts
// if asked, and says how many jobs they held.
func (r *Reader) list(ctx context.Context, db Querier, rows *sql.Rows, earlier bool, b *batcher) (int, error) {
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		j, err := scanStat(rows)
		if err != nil {
			return n, err
		}
		if earlier && j.Attempts > 0 {
			if j.Earlier, err = r.history(ctx, db, j.ID, nil); err != nil {
				return n, err
			}
		}
		if err := b.add(j.JobInfo); err != nil {
			return n, err
		}
	}
	return n, rows.Err()
}

// collapsed reads the spans of the arrays a collapsed listing leaves out,
// in id order.
func collapsed(ctx context.Context, db Querier) ([]span, error) {
	rows, err := db.QueryContext(ctx, queries.Get("ArraySpans"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []span{}
	for rows.Next() {
		var a span
		if err := rows.Scan(&a.first, &a.last); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Page lists up to limit jobs matching st with ids above after, in id
// order: a page of a listing, read from a snapshot like Stat.
func (r *Reader) Page(ctx context.Context, st protocol.Stat, after int64, limit int) ([]protocol.JobInfo, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	st.Limit = limit
	var out []protocol.JobInfo
	err := r.Stat(ctx, st, after, func(b []protocol.JobInfo) error {
		out = append(out, b...)
		return nil
	})
	return out, err
}
