package metaqueue

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A job array is the contiguous ids of one bulk commit (mqsub --array). One
// with a limit (%LIMIT) has at most that many members Executing at once.
// The core keeps, for each limited array, how many of its members execute;
// dispatch skips a member of an array at its cap by setting it aside on the
// array (held), off its queue's heap, and a member that stops executing
// puts as many held members back as there are free places. Jobs in no limited array cost one length check.
type array struct {
	id, first, last int64
	limit, running  int
	held            []int64 // ready members taken off their heaps while at the cap, in pick order
}

// arrays is the core's limited arrays, by first id (arrays never overlap:
// each is one commit's ids).
type arrays struct {
	limited []*array
}

// of returns the limited array holding job id, or nil.
func (a *arrays) of(id int64) *array {
	l := a.limited
	if len(l) == 0 || id < l[0].first || id > l[len(l)-1].last {
		return nil
	}
	i := sort.Search(len(l), func(i int) bool { return l[i].last >= id })
	if i < len(l) && l[i].first <= id {
		return l[i]
	}
	return nil
}

// add records a limited array (ids above every earlier array's).
func (a *arrays) add(ar *array) {
	if ar.limit <= 0 {
		return
	}
	a.limited = append(a.limited, ar)
	if n := len(a.limited); n > 1 && a.limited[n-2].first > ar.first {
		sort.Slice(a.limited, func(i, j int) bool { return a.limited[i].first < a.limited[j].first })
	}
}

// capped reports whether job id must wait: its array has limit members
// executing. It then holds the job aside until one stops.
func (s *Store) capped(id int64) bool {
	ar := s.arrays.of(id)
	if ar == nil || ar.running < ar.limit {
		return false
	}
	ar.held = append(ar.held, id)
	return true
}

// runStarted counts job id as executing in its array.
func (s *Store) runStarted(id int64) {
	s.repl.Changed()
	if ar := s.arrays.of(id); ar != nil {
		ar.running++
	}
}

// stopRun forgets job id's attempt (it no longer executes) and, below its
// array's cap, gives held members back to their queues: as many as there
// are free places, first held first, so a member's end costs O(1) however
// many wait.
func (s *Store) stopRun(id int64) {
	ru, ok := s.running[id]
	if !ok {
		return
	}
	s.ledger.Stop(protocol.JobRef{ID: id, Attempt: ru.attempt})
	s.packStop(id, ru)
	delete(s.running, id)
	s.syncCopy(id)
	s.repl.Changed()
	ar := s.arrays.of(id)
	if ar == nil {
		return
	}
	ar.running--
	free := ar.limit - ar.running
	for free > 0 && len(ar.held) > 0 {
		h := ar.held[0]
		ar.held = ar.held[1:]
		j, ok := s.g.Node(h)
		if !ok || j.State != job.Queued {
			continue // ended, deleted or already back: its entry is stale
		}
		if q := s.queueIDs[j.Queue]; q != nil {
			q.ready.Push(s.readyEntry(q, h, j.Est, j.Target))
			free--
		}
	}
	if len(ar.held) == 0 {
		ar.held = nil // let the backing array go
	}
}

// loadArrays loads the limited arrays (before the jobs, which count in them).
func (s *Store) loadArrays(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, arraysSQL.Get("LoadLimited"))
	if err != nil {
		return err
	}
	for rows.Next() {
		ar := &array{}
		if err := rows.Scan(&ar.id, &ar.first, &ar.last, &ar.limit); err != nil {
			rows.Close()
			return err
		}
		s.arrays.add(ar)
	}
	return closeRows(rows)
}

// Array makes the bulk submission a job array described by spec (the
// --array text, at most 100 bytes) whose members execute at most limit at
// once (0 = no cap).
func (b *Bulk) Array(spec string, limit int) error {
	if limit < 0 || limit > 1<<30 {
		return protocol.Errorf(protocol.CodeBadRequest, "array limit must be 0..%d, not %d", 1<<30, limit)
	}
	if len(spec) > 100 {
		return protocol.Errorf(protocol.CodeBadRequest, "array spec is %d bytes; the limit is 100", len(spec))
	}
	b.array, b.arraySpec, b.arrayLimit = true, spec, limit
	return nil
}

// saveArray records the array of a bulk commit's ids first..last.
func (s *Store) saveArray(first, last int64, spec string, limit int) error {
	var id int64
	if err := s.w.QueryRowContext(context.Background(), arraysSQL.Get("InsertArray"),
		first, last, limit, spec).Scan(&id); err != nil {
		return fatalError{fmt.Errorf("array: %w", err)}
	}
	s.arrays.add(&array{id: id, first: first, last: last, limit: limit})
	return nil
}

// Arrays lists the job arrays q selects, each with its members counted by
// state. Counting reads each array's members by id range; an array whose
// queue or target does not match is not counted.
func (s *Store) Arrays(ctx context.Context, q protocol.ArrayQuery) ([]protocol.ArrayInfo, error) {
	states := q.States
	if states == "" {
		states = "WQHEDFB"
	}
	parsed, err := job.ParseStates(states)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	sel := baseQuery(arraysSQL, "List")
	var args []any
	if q.Job > 0 {
		sel = baseQuery(arraysSQL, "ListOfJob")
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
	tx, err := s.rdb.BeginTx(ctx, nil) // one snapshot for the list and its counts
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, sel, args...)
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
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, a := range out {
		a.Counts = map[string]int{}
		rows, err := tx.QueryContext(ctx, arraysSQL.Get("MemberStates"), a.First, a.Last)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				rows.Close()
				return nil, err
			}
			a.Counts[st] = n
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
		if q.Job > 0 || slices.ContainsFunc(parsed, func(st job.State) bool { return a.Counts[string(st)] > 0 }) {
			kept = append(kept, a)
		}
	}
	return kept, nil
}
