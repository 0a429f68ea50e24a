package metaqueue

import (
	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// blevels keeps, while some queue's policy needs them (cp), what ranks a
// ready job by the chain of work behind it: its b-level is its expected
// runtime plus the largest b-level among the jobs that need it. Jobs need
// whole targets, so the ranking is kept per target: est[t] is the largest
// expected runtime among t's jobs (declared, else the target's learned
// mean, else policy.UnknownRuntime) and down[t] the largest est+down of
// the targets that list t as a prerequisite; a job of t ranks at its own
// expected runtime plus down[t].
//
// Submissions only add jobs and edges, so b-levels only grow: a submit
// raises down along the prerequisites of the targets it added jobs to
// (settle), and ready jobs of targets whose down grew are pushed again at
// their new rank; the entry left behind is skipped as stale once the job
// is dispatched. Jobs the submission itself makes ready enter their heap
// at settle, ranked once. Jobs that end or are deleted lower nothing until
// the CLS restarts or the first cp queue appears, when every live job is
// ranked afresh.
type blevels struct {
	on    bool
	est   []float32
	down  []float32
	ready [][]int64 // per target: jobs pushed into a cp heap (pruned as it grows)
	flags []uint8   // per target: seeded in this submission, has jobs with no estimate
	seen  []uint32  // per target: settle's visit stamp
	stamp uint32
	seeds []dag.TargetID
	order []dag.TargetID
	stack []dag.TargetID
	deg   []int32
	grown []dag.TargetID
	fresh []int64 // jobs of cp queues that became ready in this submission
}

const (
	seeded  uint8 = 1 << iota // in seeds
	unknown                   // a job of it declared no estimate
	raised                    // in grown
)

func (q *queue) needsBLevels() bool { return q.pol.Needs&policy.NeedsBLevels != 0 }

// grow makes the per-target slices cover n targets, doubling so that a
// submission of many new targets grows them a few times only.
func (b *blevels) grow(n int) {
	if len(b.down) >= n {
		return
	}
	more := max(n, 2*len(b.down), 64) - len(b.down)
	b.est = append(b.est, make([]float32, more)...)
	b.down = append(b.down, make([]float32, more)...)
	b.ready = append(b.ready, make([][]int64, more)...)
	b.flags = append(b.flags, make([]uint8, more)...)
	b.seen = append(b.seen, make([]uint32, more)...)
	b.deg = append(b.deg, make([]int32, more)...)
}

// downOf is down[t], 0 for a target newer than the slices.
func (b *blevels) downOf(t dag.TargetID) float32 {
	if int(t) < len(b.down) {
		return b.down[t]
	}
	return 0
}

// setCP turns b-levels on when a queue needs them and off (freeing them)
// when none does. Turning on ranks every live job.
func (s *Store) setCP() {
	on := false
	for _, q := range s.qlist {
		on = on || q.needsBLevels()
	}
	switch {
	case on && !s.bl.on:
		s.bl.on = true
		s.rankAll()
	case !on && s.bl.on:
		s.bl = blevels{}
	}
}

// rankAll computes every target's b-level afresh from the live jobs and
// the target graph: O(jobs + targets + edges).
func (s *Store) rankAll() {
	n := int(s.g.NextTargetID())
	s.bl = blevels{on: true}
	s.bl.grow(n)
	for id := int64(1); id < s.nextID; id++ {
		if j, ok := s.g.Node(id); ok {
			s.noteJob(j.Target, j.Est)
		}
	}
	for t := 1; t < n; t++ {
		if s.bl.flags[t]&seeded == 0 {
			s.bl.flags[t] |= seeded
			s.bl.seeds = append(s.bl.seeds, dag.TargetID(t))
		}
	}
	s.settle()
}

// noteJob records a job added to target t, declaring est seconds (0 =
// none), for the next settle.
func (s *Store) noteJob(t dag.TargetID, est float32) {
	b := &s.bl
	b.grow(int(t) + 1)
	if est > 0 {
		b.est[t] = max(b.est[t], est)
	} else {
		b.flags[t] |= unknown
	}
	if b.flags[t]&seeded == 0 {
		b.flags[t] |= seeded
		b.seeds = append(b.seeds, t)
	}
}

// expected is how long a job of t declaring est seconds counts for in a
// b-level.
func (s *Store) expected(t dag.TargetID, est float32) float32 {
	if est > 0 {
		return est
	}
	return float32(policy.Runtime(s.data.expect.Estimate(s.g.Name(t), 0)))
}

// settle raises down along the prerequisites of the targets noted since
// the last settle, in reverse topological order over them and their
// ancestors (each visited once: O(targets + edges) of that part of the
// graph), and re-ranks the ready jobs of targets whose down grew.
func (s *Store) settle() {
	b := &s.bl
	if len(b.seeds) == 0 {
		return
	}
	b.grow(int(s.g.NextTargetID()))
	b.stamp++
	b.order, b.stack = b.order[:0], b.stack[:0]
	for _, t := range b.seeds {
		if b.flags[t]&unknown != 0 {
			b.est[t] = max(b.est[t], s.expected(t, 0))
		}
		b.flags[t] &^= seeded | unknown
		b.seen[t] = b.stamp
		b.stack = append(b.stack, t)
	}
	b.seeds = b.seeds[:0]
	for len(b.stack) > 0 {
		t := b.stack[len(b.stack)-1]
		b.stack = b.stack[:len(b.stack)-1]
		b.order = append(b.order, t)
		b.deg[t] = 0
		for _, p := range s.g.Prereqs(t) {
			if b.seen[p] != b.stamp {
				b.seen[p] = b.stamp
				b.stack = append(b.stack, p)
			}
		}
	}
	// Dependents within the visited part; those outside did not change
	// and are already in down.
	for _, t := range b.order {
		for _, p := range s.g.Prereqs(t) {
			b.deg[p]++
		}
	}
	for _, t := range b.order {
		if b.deg[t] == 0 {
			b.stack = append(b.stack, t)
		}
	}
	b.grown = b.grown[:0]
	for len(b.stack) > 0 {
		t := b.stack[len(b.stack)-1]
		b.stack = b.stack[:len(b.stack)-1]
		up := b.est[t] + b.down[t]
		for _, p := range s.g.Prereqs(t) {
			if up > b.down[p] {
				b.down[p] = up
				if b.flags[p]&raised == 0 {
					b.flags[p] |= raised
					b.grown = append(b.grown, p)
				}
			}
			if b.deg[p]--; b.deg[p] == 0 {
				b.stack = append(b.stack, p)
			}
		}
	}
	for _, t := range b.grown {
		b.flags[t] &^= raised
		s.rerank(t)
	}
	for _, id := range b.fresh {
		if j, ok := s.g.Node(id); ok && j.State == job.Queued {
			if q := s.queueIDs[j.Queue]; q != nil {
				q.ready.Push(s.readyEntry(q, id, j.Est, j.Target))
			}
		}
	}
	clear(b.fresh)
	b.fresh = b.fresh[:0]
}

// deferRank reports whether a job of q that became ready while a
// submission inserts (in) waits for the submission's settle to enter q's
// heap, ranked once with the chains the whole submission adds.
func (s *Store) deferRank(q *queue, id int64, in *inserter) bool {
	if in == nil || !s.bl.on || !q.needsBLevels() {
		return false
	}
	s.bl.fresh = append(s.bl.fresh, id)
	return true
}

// rerank pushes the ready jobs of t's in cp queues again at their new
// rank, dropping from t's list those no longer ready there.
func (s *Store) rerank(t dag.TargetID) {
	l := s.bl.ready[t]
	kept := l[:0]
	for _, id := range l {
		j, ok := s.g.Node(id)
		if !ok || j.State != job.Queued {
			continue
		}
		q := s.queueIDs[j.Queue]
		if q == nil || !q.needsBLevels() {
			continue
		}
		kept = append(kept, id)
		q.ready.Push(policy.Ready{ID: id, Est: j.Est, Prio: s.expected(t, j.Est) + s.bl.down[t]})
	}
	clear(l[len(kept):])
	s.bl.ready[t] = kept
}

// track lists a job pushed into a cp heap under its target, so that rerank
// finds it; a full list drops jobs no longer ready first, which keeps it
// within twice the target's ready jobs at O(1) amortized.
func (s *Store) track(t dag.TargetID, id int64) {
	b := &s.bl
	b.grow(int(t) + 1)
	l := b.ready[t]
	if len(l) == cap(l) && len(l) >= 8 {
		kept := l[:0]
		for _, x := range l {
			if j, ok := s.g.Node(x); ok && j.State == job.Queued {
				kept = append(kept, x)
			}
		}
		clear(l[len(kept):])
		l = kept
	}
	b.ready[t] = append(l, id)
}
