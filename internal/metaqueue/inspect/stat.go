package inspect

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
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

// maxCollapsed is the most arrays a collapsed listing leaves out by their
// ids; beyond it a job's array is looked up (two index searches a job: a
// second a million jobs).
const maxCollapsed = 64

// span is an array's ids, first..last.
type span struct{ first, last int64 }

// statQuery builds the listing of the jobs st selects with ids above
// after; a collapsed one leaves out the members of arrays (their spans,
// nil when there are more than maxCollapsed): it searches the ids between
// them, one arm of a UNION ALL a gap, merged in id order, so a million
// members cost nothing (with ids named, each job's id is compared with
// the spans instead: the arms would repeat the ids).
func statQuery(st protocol.Stat, after int64, arrays []span) (string, []any, error) {
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
		states = "WQHPEDFB"
	}
	parsed, err := job.ParseStates(states)
	if err != nil {
		return "", nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if cond, sargs := stateCond(parsed); cond != "" {
		where = append(where, cond)
		args = append(args, sargs...)
	}
	if st.To > 0 {
		where = append(where, "j.id BETWEEN ? AND ?")
		args = append(args, st.From, st.To)
	}
	switch {
	case st.Collapse && arrays == nil:
		where = append(where, "NOT EXISTS ("+base("InArray")+")")
	case st.Collapse && len(st.IDs) > 0:
		for _, a := range arrays {
			where = append(where, "j.id NOT BETWEEN ? AND ?")
			args = append(args, a.first, a.last)
		}
	}
	if len(st.IDs) > 0 {
		if len(st.IDs) > maxStatIDs {
			return "", nil, protocol.Errorf(protocol.CodeBadRequest, "at most %d job ids per request", maxStatIDs)
		}
		where = append(where, "j.id IN ("+params(len(st.IDs))+")")
		for _, id := range st.IDs {
			args = append(args, id)
		}
	}
	q, order := statSelect+whereClause(where), "j.id"
	if st.Collapse && len(arrays) > 0 && len(st.IDs) == 0 {
		q, args, order = outside(where, args, arrays), gapArgs(args, arrays), "1"
	}
	if st.Last < 0 || st.Limit < 0 {
		return "", nil, protocol.Errorf(protocol.CodeBadRequest, "limit and last must be 0 or more")
	}
	if st.Last > 0 {
		// The latest Last, from the top of the id order down (cheap:
		// ended jobs are mostly recent), then in id order again.
		q = "SELECT * FROM (" + q + " ORDER BY " + order + " DESC LIMIT ?) ORDER BY 1"
		args = append(args, st.Last)
	} else {
		q += " ORDER BY " + order
	}
	if st.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, st.Limit)
	}
	return q, args, nil
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

// outside is the listing of the jobs where selects outside arrays: one
// search of each gap's ids, their union merged by id (column 1).
func outside(where []string, args []any, arrays []span) string {
	arm := statSelect + whereClause(append(slices.Clip(where), "j.id BETWEEN ? AND ?"))
	return strings.Repeat(arm+" UNION ALL ", len(gaps(arrays))-1) + arm
}

// gapArgs are outside's arguments: each arm's, then its gap.
func gapArgs(args []any, arrays []span) []any {
	var out []any
	for _, g := range gaps(arrays) {
		out = append(append(out, args...), g.first, g.last)
	}
	return out
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
// snapshot and never waits for the writer.
func (r *Reader) Stat(ctx context.Context, st protocol.Stat, after int64, emit func([]protocol.JobInfo) error) error {
	var db Querier = r.db
	if st.Earlier || st.Collapse {
		// Earlier attempts, and the arrays a listing collapses, are read
		// beside the listing, on its connection and in its snapshot (a
		// second connection could wait for ever behind other listings
		// holding the rest).
		tx, err := r.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		db = tx
	}
	var arrays []span
	if st.Collapse {
		var err error
		if arrays, err = collapsed(ctx, db); err != nil {
			return err
		}
	}
	q, args, err := statQuery(st, after, arrays)
	if err != nil {
		return err
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
		j, err := scanStat(rows)
		if err != nil {
			return err
		}
		if st.Earlier && j.Attempts > 0 {
			if j.Earlier, err = r.history(ctx, db, j.ID, nil); err != nil {
				return err
			}
			size += 256 * len(j.Earlier)
		}
		batch = append(batch, j.JobInfo)
		size += 512 + 2*len(j.Command) + len(j.Cwd) + len(j.Reason)
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

// collapsed reads the spans of the arrays a collapsed listing leaves out,
// nil if there are more than maxCollapsed.
func collapsed(ctx context.Context, db Querier) ([]span, error) {
	rows, err := db.QueryContext(ctx, queries.Get("ArraySpans"), maxCollapsed+1)
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
	if len(out) > maxCollapsed {
		return nil, rows.Err()
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
