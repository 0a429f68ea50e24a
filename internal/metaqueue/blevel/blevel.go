// Package blevel keeps, while some queue's policy needs them (cp), what
// ranks a ready job by the chain of work behind it: its b-level is its
// expected runtime plus the largest b-level among the jobs that need it.
// Jobs need whole targets, so the ranking is kept per target: est[t] is
// the largest expected runtime among t's jobs (declared, else the
// target's learned mean, else policy.UnknownRuntime) and down[t] the
// largest est+down of the targets that list t as a prerequisite; a job of
// t ranks at its own expected runtime plus down[t]. An after-any
// prerequisite is a prerequisite here too (dag's Prereqs lists both
// kinds): its jobs still run before the job that names it.
//
// Submissions only add jobs and edges, so b-levels only grow: a submit
// raises down along the prerequisites of the targets it added jobs to
// (Settle), and ready jobs of targets whose down grew are pushed again at
// their new rank; the entry left behind is skipped as stale once the job
// is dispatched. Jobs the submission itself makes ready wait (Defer) and
// enter their heap after Settle, ranked once. Jobs that end or are deleted
// lower nothing until the CLS restarts or the first cp queue appears, when
// every live job is ranked afresh (Start).
//
// Levels is the cp policy's per-job state, owned by the metaqueue's core
// goroutine; the core passes the job graph and the learned runtimes, both
// read-only, and pushes onto its queues' heaps what Levels hands it.
package blevel

import (
	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// Levels is the b-levels of the live jobs' targets. The zero value is off.
type Levels struct {
	on    bool
	est   []float32
	down  []float32
	ready [][]int64 // per target: jobs pushed into a cp heap (pruned as it grows)
	flags []uint8   // per target: seeded in this submission, has jobs with no estimate
	seen  []uint32  // per target: Settle's visit stamp
	stamp uint32
	seeds []dag.TargetID
	order []dag.TargetID
	stack []dag.TargetID
	deg   []int32
	grown []dag.TargetID
	fresh []int64 // jobs of cp queues that became ready in this submission
	stale bool    // an estimate fell (Alter): some b-level may be too high
}

const (
	seeded  uint8 = 1 << iota // in seeds
	unknown                   // a job of it declared no estimate
	raised                    // in grown
)

// Push enters ready job r into the heap of the queue numbered queue if
// that queue ranks by b-level, and reports whether it did.
type Push func(queue int32, r policy.Ready) bool

// On says whether b-levels are kept.
func (l *Levels) On() bool { return l.on }

// Off stops keeping b-levels and frees them.
func (l *Levels) Off() { *l = Levels{} }

// grow makes the per-target slices cover n targets, doubling so that a
// submission of many new targets grows them a few times only.
func (l *Levels) grow(n int) {
	if len(l.down) >= n {
		return
	}
	more := max(n, 2*len(l.down), 64) - len(l.down)
	l.est = append(l.est, make([]float32, more)...)
	l.down = append(l.down, make([]float32, more)...)
	l.ready = append(l.ready, make([][]int64, more)...)
	l.flags = append(l.flags, make([]uint8, more)...)
	l.seen = append(l.seen, make([]uint32, more)...)
	l.deg = append(l.deg, make([]int32, more)...)
}

// downOf is down[t], 0 for a target newer than the slices.
func (l *Levels) downOf(t dag.TargetID) float32 {
	if int(t) < len(l.down) {
		return l.down[t]
	}
	return 0
}

// Start turns b-levels on and computes every target's afresh from the
// live jobs of g (ids below next) and its target graph:
// O(jobs + targets + edges).
func (l *Levels) Start(g *dag.Graph, next int64, ex *policy.Expect, push Push) {
	n := int(g.NextTargetID())
	*l = Levels{on: true}
	l.grow(n)
	for id := int64(1); id < next; id++ {
		if j, ok := g.Node(id); ok {
			l.Note(j.Target, j.Est)
		}
	}
	for t := 1; t < n; t++ {
		if l.flags[t]&seeded == 0 {
			l.flags[t] |= seeded
			l.seeds = append(l.seeds, dag.TargetID(t))
		}
	}
	l.Settle(g, ex, push) // nothing was deferred: no job to enter
}

// Note records a job added to target t, declaring est seconds (0 = none),
// for the next Settle.
func (l *Levels) Note(t dag.TargetID, est float32) {
	l.grow(int(t) + 1)
	if est > 0 {
		l.est[t] = max(l.est[t], est)
	} else {
		l.flags[t] |= unknown
	}
	if l.flags[t]&seeded == 0 {
		l.flags[t] |= seeded
		l.seeds = append(l.seeds, t)
	}
}

// Alter records that live job id of g is about to declare est seconds in
// place of its own (mqalter; 0: none). A rise is noted as a job added is,
// for the next Settle. A fall may lower b-levels, which Settle never does,
// and the heaps' entries at the old ranks would go first: Stale then says
// so, and the core ranks every job afresh (Start) and refills its cp
// queues' heaps, as a restart does.
func (l *Levels) Alter(g *dag.Graph, ex *policy.Expect, id int64, est float32) {
	j, ok := g.Node(id)
	switch {
	case !l.on || !ok || est == j.Est:
	case expected(g, ex, j.Target, est) < expected(g, ex, j.Target, j.Est):
		l.stale = true
	default:
		l.Note(j.Target, est)
	}
}

// Stale says whether an estimate fell since Start (Alter).
func (l *Levels) Stale() bool { return l.stale }

// Defer holds back job id, of a cp queue, that became ready while a
// submission inserts, when b-levels are on, and says whether it did:
// Settle hands it back to enter its heap ranked once, with the chains
// the whole submission adds.
func (l *Levels) Defer(id int64) bool {
	if !l.on {
		return false
	}
	l.fresh = append(l.fresh, id)
	return true
}

// expected is how long a job of t declaring est seconds counts for in a
// b-level.
func expected(g *dag.Graph, ex *policy.Expect, t dag.TargetID, est float32) float32 {
	if est > 0 {
		return est
	}
	return float32(policy.Runtime(ex.Estimate(g.Name(t), 0)))
}

// Rank is the priority of ready job id of target t, declaring (or
// expected to run) est seconds, in a cp queue's heap, which the core is
// about to push it into; Levels notes it there for a later re-rank.
func (l *Levels) Rank(g *dag.Graph, ex *policy.Expect, t dag.TargetID, id int64, est float32) float32 {
	prio := expected(g, ex, t, est) + l.downOf(t)
	l.track(g, t, id)
	return prio
}

// Settle raises down along the prerequisites of the targets noted since
// the last Settle, in reverse topological order over them and their
// ancestors (each visited once: O(targets + edges) of that part of the
// graph), and re-ranks through push the ready jobs of targets whose down
// grew. It returns the jobs Defer held back, for the core to enter into
// their heaps now (the slice is Levels' own: valid until the next Defer).
func (l *Levels) Settle(g *dag.Graph, ex *policy.Expect, push Push) []int64 {
	if len(l.seeds) == 0 {
		return nil
	}
	l.grow(int(g.NextTargetID()))
	l.stamp++
	l.order, l.stack = l.order[:0], l.stack[:0]
	for _, t := range l.seeds {
		if l.flags[t]&unknown != 0 {
			l.est[t] = max(l.est[t], expected(g, ex, t, 0))
		}
		l.flags[t] &^= seeded | unknown
		l.seen[t] = l.stamp
		l.stack = append(l.stack, t)
	}
	l.seeds = l.seeds[:0]
	for len(l.stack) > 0 {
		t := l.stack[len(l.stack)-1]
		l.stack = l.stack[:len(l.stack)-1]
		l.order = append(l.order, t)
		l.deg[t] = 0
		for _, p := range g.Prereqs(t) {
			if l.seen[p] != l.stamp {
				l.seen[p] = l.stamp
				l.stack = append(l.stack, p)
			}
		}
	}
	// Dependents within the visited part; those outside did not change
	// and are already in down.
	for _, t := range l.order {
		for _, p := range g.Prereqs(t) {
			l.deg[p]++
		}
	}
	for _, t := range l.order {
		if l.deg[t] == 0 {
			l.stack = append(l.stack, t)
		}
	}
	l.grown = l.grown[:0]
	for len(l.stack) > 0 {
		t := l.stack[len(l.stack)-1]
		l.stack = l.stack[:len(l.stack)-1]
		up := l.est[t] + l.down[t]
		for _, p := range g.Prereqs(t) {
			if up > l.down[p] {
				l.down[p] = up
				if l.flags[p]&raised == 0 {
					l.flags[p] |= raised
					l.grown = append(l.grown, p)
				}
			}
			if l.deg[p]--; l.deg[p] == 0 {
				l.stack = append(l.stack, p)
			}
		}
	}
	for _, t := range l.grown {
		l.flags[t] &^= raised
		l.rerank(g, ex, t, push)
	}
	fresh := l.fresh
	l.fresh = l.fresh[:0]
	return fresh
}

// rerank pushes the ready jobs of t's in cp queues again at their new
// rank, dropping from t's list those no longer ready there.
func (l *Levels) rerank(g *dag.Graph, ex *policy.Expect, t dag.TargetID, push Push) {
	list := l.ready[t]
	kept := list[:0]
	for _, id := range list {
		j, ok := g.Node(id)
		if !ok || j.State != job.Queued {
			continue
		}
		if !push(j.Queue, policy.Ready{ID: id, Est: j.Est, Prio: expected(g, ex, t, j.Est) + l.down[t]}) {
			continue
		}
		kept = append(kept, id)
	}
	clear(list[len(kept):])
	l.ready[t] = kept
}

// track lists a job pushed into a cp heap under its target, so that rerank
// finds it; a full list drops jobs no longer ready first, which keeps it
// within twice the target's ready jobs at O(1) amortized.
func (l *Levels) track(g *dag.Graph, t dag.TargetID, id int64) {
	l.grow(int(t) + 1)
	list := l.ready[t]
	if len(list) == cap(list) && len(list) >= 8 {
		kept := list[:0]
		for _, x := range list {
			if j, ok := g.Node(x); ok && j.State == job.Queued {
				kept = append(kept, x)
			}
		}
		clear(list[len(kept):])
		list = kept
	}
	l.ready[t] = append(list, id)
}
