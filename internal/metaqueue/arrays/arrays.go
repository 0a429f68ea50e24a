// Package arrays keeps job arrays: the contiguous ids of one bulk commit
// (mqsub --array). One with a limit (%LIMIT) has at most that many members
// Executing at once. Arrays counts, for each limited array, how many of its
// members execute; dispatch asks Capped, which sets a member of an array at
// its cap aside on the array (held), off its queue's heap, and a member that
// stops executing gives back as many held members as there are free places
// (Leave), for the core to push again. Jobs in no limited array cost one
// length check.
//
// It also counts every array's members by state (Count), as the core
// counts its queues': the core moves a member at each change of its state,
// so listing an array (List) costs the arrays listed, not their members.
//
// The metaqueue's core calls Arrays where attempts start and stop, where
// a job's state changes, at dispatch and at load; it writes the arrays
// table inside the core's write transaction, through an Execer, and lists
// arrays (List) on the reader pool's snapshot, with their counts from the
// core (Counter).
package arrays

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"

	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed arrays.sql
var arraysSQL string

var queries = sqlfile.MustParse("arrays.sql", arraysSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx) or its reader pool (*sql.DB).
type Execer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Snapshot begins a read transaction: the core's reader pool.
type Snapshot interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Jobs is what Leave asks the core about a held member.
type Jobs interface {
	// Queued says whether job id is Queued in a queue the core knows, so
	// that, given back, it goes on that queue's heap.
	Queued(id int64) bool
}

// MaxSpec is the longest --array text kept, in bytes.
const MaxSpec = 100

// MaxLimit is the largest %LIMIT.
const MaxLimit = 1 << 30

// counted are the states an array's members are counted in (Count); P,
// an Executing member not started yet, is told apart when listed (Counts).
const counted = "WQHEDFBX"

// array is one job array.
type array struct {
	id, first, last int64
	limit, running  int
	held            []int64 // ready members taken off their heaps while at the cap, in pick order
	n               [len(counted)]int
}

// Arrays is the job arrays, by first id (arrays never overlap: each is
// one commit's ids), owned by the core goroutine. The zero value has none.
type Arrays struct {
	all     []*array
	limited []*array // those with a limit
	last    *array   // the array Count found last: a commit's or a load's changes come in id order
	out     []int64  // Leave's answer, reused
}

// Reset forgets every array (before a load).
func (a *Arrays) Reset() { *a = Arrays{} }

// of returns the limited array holding job id, or nil.
func (a *Arrays) of(id int64) *array { return holding(a.limited, id) }

// holding returns the array of l (by first id) holding job id, or nil.
func holding(l []*array, id int64) *array {
	if len(l) == 0 || id < l[0].first || id > l[len(l)-1].last {
		return nil
	}
	i := sort.Search(len(l), func(i int) bool { return l[i].last >= id })
	if i < len(l) && l[i].first <= id {
		return l[i]
	}
	return nil
}

// add records an array (ids above every earlier array's).
func (a *Arrays) add(ar *array) {
	a.all = insert(a.all, ar)
	if ar.limit > 0 {
		a.limited = insert(a.limited, ar)
	}
}

// insert appends ar to l, kept by first id.
func insert(l []*array, ar *array) []*array {
	l = append(l, ar)
	if n := len(l); n > 1 && l[n-2].first > ar.first {
		sort.Slice(l, func(i, j int) bool { return l[i].first < l[j].first })
	}
	return l
}

// Count moves job id from state from to state to in its array's counts:
// from is 0 for a job not counted yet, to is 0 for one gone (purged). A
// job in no array costs a bounds check or a search.
func (a *Arrays) Count(id int64, from, to job.State) {
	ar := a.last
	if ar == nil || id < ar.first || id > ar.last {
		if ar = holding(a.all, id); ar == nil {
			return
		}
		a.last = ar
	}
	if i := strings.IndexByte(counted, byte(from)); i >= 0 {
		ar.n[i]--
	}
	if i := strings.IndexByte(counted, byte(to)); i >= 0 {
		ar.n[i]++
	}
}

// Counts is, for each array beginning at an id of firsts, its members by
// state as listed (states with none left out; an array not kept has none):
// the Executing members unstarted yields count as P, not E.
func (a *Arrays) Counts(firsts []int64, unstarted iter.Seq[int64]) []map[string]int {
	pre := map[*array]int{}
	for id := range unstarted {
		if ar := holding(a.all, id); ar != nil {
			pre[ar]++
		}
	}
	out := make([]map[string]int, len(firsts))
	for i, first := range firsts {
		out[i] = map[string]int{}
		ar := holding(a.all, first)
		if ar == nil || ar.first != first {
			continue
		}
		for k, n := range ar.n {
			st := counted[k : k+1]
			if st == string(job.Executing) && pre[ar] > 0 {
				n -= pre[ar]
				out[i][string(job.Prefetched)] = pre[ar]
			}
			if n > 0 {
				out[i][st] = n
			}
		}
	}
	return out
}

// Span is the members by state (indexed by state letter, E with P) of the
// array whose ids are exactly first..last, if one is kept: a watch of its
// range counts without reading its members.
func (a *Arrays) Span(first, last int64) (n [128]int, ok bool) {
	ar := holding(a.all, first)
	if ar == nil || ar.first != first || ar.last != last {
		return n, false
	}
	for k, c := range ar.n {
		n[counted[k]] = c
	}
	return n, true
}

// Capped reports whether job id must wait: its array has limit members
// executing. It then holds the job aside until one stops.
func (a *Arrays) Capped(id int64) bool {
	ar := a.of(id)
	if ar == nil || ar.running < ar.limit {
		return false
	}
	ar.held = append(ar.held, id)
	return true
}

// Limits says whether any array has a limit: when none has, Capped and
// Full hold no job, and a pick need not ask them.
func (a *Arrays) Limits() bool { return len(a.limited) > 0 }

// Full says whether job id's array has limit members executing, without
// holding the job (a look ahead of the pick, as a plan's).
func (a *Arrays) Full(id int64) bool {
	ar := a.of(id)
	return ar != nil && ar.running >= ar.limit
}

// Running is how many members of the limited array holding job id
// execute, and whether there is one.
func (a *Arrays) Running(id int64) (n int, ok bool) {
	if ar := a.of(id); ar != nil {
		return ar.running, true
	}
	return 0, false
}

// Enter counts job id, entering Executing, in its array.
func (a *Arrays) Enter(id int64) {
	if ar := a.of(id); ar != nil {
		ar.running++
	}
}

// Leave counts job id, leaving Executing, out of its array and, below its array's cap,
// returns the held members to put back on their queues: as many as there
// are free places, first held first, so a member's end costs O(1) however
// many wait. Held members no longer ready (ended, deleted or already back)
// are dropped without taking a place. The slice is valid until the next
// call.
func (a *Arrays) Leave(id int64, jobs Jobs) []int64 {
	ar := a.of(id)
	if ar == nil {
		return nil
	}
	ar.running--
	a.out = a.out[:0]
	free := ar.limit - ar.running
	for free > 0 && len(ar.held) > 0 {
		h := ar.held[0]
		ar.held = ar.held[1:]
		if !jobs.Queued(h) {
			continue // its entry is stale
		}
		a.out = append(a.out, h)
		free--
	}
	if len(ar.held) == 0 {
		ar.held = nil // let the backing array go
	}
	return a.out
}

// Load reads the arrays (before the jobs, which count in them).
func (a *Arrays) Load(ctx context.Context, ex Execer) error {
	a.Reset()
	rows, err := ex.QueryContext(ctx, queries.Get("Load"))
	if err != nil {
		return err
	}
	for rows.Next() {
		ar := &array{}
		if err := rows.Scan(&ar.id, &ar.first, &ar.last, &ar.limit); err != nil {
			rows.Close()
			return err
		}
		a.add(ar)
	}
	return closeRows(rows)
}

// Check validates an array's --array text and limit (0 = no cap).
func Check(spec string, limit int) error {
	if limit < 0 || limit > MaxLimit {
		return protocol.Errorf(protocol.CodeBadRequest, "array limit must be 0..%d, not %d", MaxLimit, limit)
	}
	if len(spec) > MaxSpec {
		return protocol.Errorf(protocol.CodeBadRequest, "array spec is %d bytes; the limit is %d", len(spec), MaxSpec)
	}
	return nil
}

// Save records the array of a bulk commit's ids first..last, in the
// commit's transaction, before its jobs enter the graph (their changes
// count in it).
func (a *Arrays) Save(ctx context.Context, ex Execer, first, last int64, spec string, limit int) error {
	var id int64
	if err := ex.QueryRowContext(ctx, queries.Get("InsertArray"), first, last, limit, spec).Scan(&id); err != nil {
		return fmt.Errorf("array: %w", err)
	}
	a.add(&array{id: id, first: first, last: last, limit: limit})
	return nil
}

// Counter counts arrays' members by state on the core (Arrays.Counts).
type Counter interface {
	ArrayCounts(ctx context.Context, firsts []int64) ([]map[string]int, error)
}

// List lists the job arrays q selects, from one snapshot of db, each with
// its members counted by state (c): an array whose queue or target does
// not match is not counted.
func List(ctx context.Context, db Snapshot, c Counter, q protocol.ArrayQuery) ([]protocol.ArrayInfo, error) {
	states := q.States
	if states == "" {
		states = "WQHEDFB"
	}
	parsed, err := job.ParseStates(states)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	tx, err := db.BeginTx(ctx, nil) // one snapshot for the list and its counts
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	out, err := list(ctx, tx, q)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	firsts := make([]int64, len(out))
	for i, a := range out {
		firsts[i] = a.First
	}
	counts, err := c.ArrayCounts(ctx, firsts)
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for i, a := range out {
		a.Counts = counts[i]
		// E selects the prefetched (P) too, as in the listing.
		if q.Job > 0 || slices.ContainsFunc(parsed, func(st job.State) bool {
			return a.Counts[string(st)] > 0 || (st == job.Executing && a.Counts[string(job.Prefetched)] > 0)
		}) {
			kept = append(kept, a)
		}
	}
	return kept, nil
}

// list reads the arrays q names, without their counts.
func list(ctx context.Context, ex Execer, q protocol.ArrayQuery) ([]protocol.ArrayInfo, error) {
	sel := baseQuery("List")
	var args []any
	if q.Job > 0 {
		sel = baseQuery("ListOfJob")
		args = append(args, q.Job, q.Job)
	} else {
		var where []string
		if q.Queue != "" {
			where = append(where, "qu.name = ?")
			args = append(args, q.Queue)
		}
		if q.Target != "" {
			where = append(where, "t.name = ?")
			args = append(args, q.Target)
		}
		if len(where) > 0 {
			sel += " WHERE " + strings.Join(where, " AND ")
		}
	}
	sel += " ORDER BY a.first_job"
	rows, err := ex.QueryContext(ctx, sel, args...)
	if err != nil {
		return nil, err
	}
	var out []protocol.ArrayInfo
	for rows.Next() {
		var a protocol.ArrayInfo
		if err := rows.Scan(&a.First, &a.Last, &a.Spec, &a.Limit, &a.Queue, &a.Target); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, a)
	}
	return out, closeRows(rows)
}

// baseQuery is query name without its final ";", for appending clauses.
func baseQuery(name string) string { return strings.TrimSuffix(queries.Get(name), ";") }

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}
