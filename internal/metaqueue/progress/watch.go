// Package progress keeps the metaqueue's progress watches (mqsub -w,
// mqwait --progress, the dashboard's bars): each counts the jobs of a
// selection by state and the core feeds it the graph's changes, so
// following a million jobs costs a few comparisons per change and nothing
// per frame. It reads the database only to count what is not in the core's
// memory (ended jobs) and to name the jobs that did not end done.
package progress

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"strings"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

//go:embed progress.sql
var progressSQL string

var queries = sqlfile.MustParse("progress.sql", progressSQL)

// base is query name without its final ";", for a builder to append
// clauses to.
func base(name string) string {
	return strings.TrimSuffix(queries.Get(name), ";")
}

// A Watch keeps the counts by state of a set of jobs up to date as the
// core applies state changes. The set is a range of ids, a list of ids,
// or every job of a queue and/or target.
type Watch struct {
	req    protocol.Progress
	ids    map[int64]bool
	queue  int32 // 0: any
	target dag.TargetID
	hasQ   bool
	hasT   bool
	// name is the core's name of a target (State.TargetName), set where a
	// watch of a target prefix is looked up, for has.
	name   func(dag.TargetID) string
	counts [128]int
	// since, while the watch is counted off the core (openOffCore), is
	// each of its jobs' latest state (0: gone) since it joined the set.
	since map[int64]job.State
	// ended is signalled (without blocking) when no job is W, Q or E.
	ended chan struct{}
}

// maxIDs bounds a listed selection (a range has no bound).
const maxIDs = 100000

// check validates a request before the core sees it.
func check(req protocol.Progress) error {
	named := 0
	if req.First != 0 || req.Last != 0 {
		named++
		if req.First <= 0 || req.Last < req.First {
			return protocol.Errorf(protocol.CodeBadRequest, "bad id range %d..%d", req.First, req.Last)
		}
	}
	if len(req.IDs) > 0 {
		named++
		if len(req.IDs) > maxIDs {
			return protocol.Errorf(protocol.CodeBadRequest, "at most %d listed jobs (give a range)", maxIDs)
		}
	}
	if named > 1 || (named == 1 && (req.Queue != "" || req.Target != "" || req.TargetPrefix != "")) {
		return protocol.Errorf(protocol.CodeBadRequest, "select jobs by a range, by ids, or by queue and target: one of them")
	}
	if req.TargetPrefix != "" {
		if req.Target != "" {
			return protocol.Errorf(protocol.CodeBadRequest, "select a target or a target prefix, not both")
		}
		if err := job.ValidName("target prefix", req.TargetPrefix); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		if req.Spending {
			return protocol.Errorf(protocol.CodeBadRequest, "spending is counted by queue, target or range, not by a target prefix")
		}
	}
	if err := protocol.CheckMillis("interval_ms", int64(req.IntervalMS)); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	return nil
}

// New checks req and makes its watch, not yet counted.
func New(req protocol.Progress) (*Watch, error) {
	if err := check(req); err != nil {
		return nil, err
	}
	w := &Watch{req: req, ended: make(chan struct{}, 1)}
	if len(req.IDs) > 0 {
		w.ids = make(map[int64]bool, len(req.IDs))
		for _, id := range req.IDs {
			if id <= 0 {
				return nil, protocol.Errorf(protocol.CodeBadRequest, "%d is not a job id", id)
			}
			w.ids[id] = true
		}
	}
	return w, nil
}

func (w *Watch) has(c dag.Change) bool {
	switch {
	case w.req.First > 0:
		return c.ID >= w.req.First && c.ID <= w.req.Last
	case w.ids != nil:
		return w.ids[c.ID]
	}
	return (!w.hasQ || c.Queue == w.queue) && (!w.hasT || c.Target == w.target) &&
		(w.req.TargetPrefix == "" || strings.HasPrefix(w.name(c.Target), w.req.TargetPrefix))
}

func (w *Watch) apply(c dag.Change) {
	if c.From != 0 {
		w.counts[c.From]--
	}
	w.counts[c.To]++
	if w.pending() == 0 {
		select {
		case w.ended <- struct{}{}:
		default:
		}
	}
}

func (w *Watch) pending() int {
	return w.counts[job.Waiting] + w.counts[job.Queued] + w.counts[job.Held] + w.counts[job.Executing]
}

// named reports whether the watch is over named jobs (a range or list),
// which count when deleted, rather than a queue, target or everything.
func (w *Watch) named() bool { return w.req.First > 0 || w.ids != nil }

// reply is the watch's counts by state, its Executing jobs not started
// yet shown P (as the summary shows them; every other state from the
// watch's counts).
func (w *Watch) reply(core State) protocol.ProgressReply {
	r := protocol.ProgressReply{Counts: map[string]int{}}
	p := 0
	if w.counts[job.Executing] > 0 {
		for id := range core.Unstarted() {
			if n, ok := core.Node(id); ok && w.has(dag.Change{ID: id, Queue: n.Queue, Target: n.Target}) {
				p++
			}
		}
	}
	for _, st := range job.States {
		n := w.counts[st]
		switch st {
		case job.Prefetched:
			n = p
		case job.Executing:
			n -= p
		}
		if n != 0 {
			r.Counts[st.String()] = n
		}
		if st != job.Deleted || w.named() {
			r.Total += n // deleted jobs count only when named
		}
	}
	return r
}

// Set is the core's watches. It is the core's: use it on the core.
type Set map[*Watch]struct{}

// Changes updates the watches with a batch of state changes.
func (s Set) Changes(ch []dag.Change) {
	for w := range s {
		for _, c := range ch {
			switch {
			case !w.has(c):
			case w.since != nil:
				w.since[c.ID] = c.To
			default:
				w.apply(c)
			}
		}
	}
}

// Recount counts every watch again after the core's state was reloaded,
// dropping those it cannot count, with why.
func (s Set) Recount(st State) (dropped []error) {
	for w := range s {
		w.since = nil // counted here, exactly
		if err := w.count(st); err != nil {
			dropped = append(dropped, err)
			delete(s, w)
		}
	}
	return dropped
}

// StorageError is a failure of the core's database met while counting on
// the core: the core rolls its batch back.
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }

func storage(err error) error {
	if err == nil {
		return nil
	}
	return &StorageError{err}
}

// Querier is what reads need of a database or a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var _ Querier = (*sql.DB)(nil)

// closeRows closes rows and reports any error iteration met.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}
