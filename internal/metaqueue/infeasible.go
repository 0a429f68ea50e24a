package metaqueue

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// The periodic check that parks the jobs of costed queues that can no
// longer finish in time or be paid for, and says why.

// infeasibleEvery is how often, at most, the jobs of queues with a
// deadline or a budget are checked for being infeasible (besides at once
// after a change of deadline, budget or of the known sites): measured
// rates and spending change with every job's end, and are picked up at
// this pace.
const infeasibleEvery = time.Second

// econKey groups jobs the checks treat alike: one queue and declared
// runtime, and, for jobs that declared none, one target (whose learned
// runtime is theirs; estimateAt).
type econKey struct {
	queue  int32
	target dag.TargetID
	est    float32
}

func keyOf(q *queue, j dag.Node) econKey {
	if j.Est > 0 {
		return econKey{q.id, 0, j.Est}
	}
	return econKey{q.id, j.Target, 0}
}

// checkInfeasible reports early the jobs that cannot finish within their
// queue's deadline and budget (seed 002), without failing them:
//
//   - The deadline: jobs no known site can end by it (whyInfeasible),
//     ready ones and those still waiting on prerequisites, whose earliest
//     start is when their unfinished prerequisites can have ended at the
//     earliest (earliestEnds). They wait, so a later deadline (cls queue
//     set) lets them run; mqstat -j says why, --summary and cls queue
//     list count them, and the CLS logs one line per queue and check for
//     the jobs newly found.
//   - The budget: how many of a queue's jobs not started its budget left
//     (less what running attempts reserve) cannot pay for even at their
//     cheapest site's expected cost (overBudget).
//
// It walks the live jobs once (twice when a deadline queue has waiting
// jobs); jobs of one queue, target and declared runtime are alike to it,
// so beyond a map lookup its work is per such group, not per job.
func (s *Store) checkInfeasible(now time.Time) {
	e := &s.econ
	if e.checkedGen == e.infeasibleGen && now.Sub(e.checkedAt) < max(infeasibleEvery, 20*e.checkTook) {
		return
	}
	e.checkedAt, e.checkedGen = now, e.infeasibleGen
	// Its pace keeps it under 5% of the core's time however many jobs
	// wait (about 25 ms for 100,000 ready jobs).
	t0 := time.Now()
	defer func() { e.checkTook = time.Since(t0) }()
	next := map[int64]string{}
	clear(e.infeasibleN)
	before := e.overBudget
	e.overBudget, e.overBudgetWhy = map[int32]int{}, map[int32]string{}
	checked, waiting := false, false
	for _, q := range s.qlist {
		c := s.countsFor(q.id)
		if q.costed() && c[job.Queued]+c[job.Waiting] > 0 {
			checked = true
			waiting = waiting || (q.Deadline > 0 && c[job.Waiting] > 0)
		}
	}
	if !checked {
		e.infeasible = next
		s.unpark()
		return
	}
	var ends []float64
	if waiting {
		ends = s.earliestEnds(now)
	}
	type whyKey struct {
		econKey
		wait float64
	}
	whys := map[whyKey]string{}
	unstarted := map[int32]map[econKey]int{} // budgeted queues' jobs not started
	fresh := map[*queue][]int64{}
	s.g.Each(func(id int64, j dag.Node) {
		if j.State != job.Queued && j.State != job.Waiting {
			return
		}
		q := s.queueIDs[j.Queue]
		if q == nil || !q.costed() {
			return
		}
		k := keyOf(q, j)
		if q.Budget > 0 {
			m := unstarted[q.id]
			if m == nil {
				m = map[econKey]int{}
				unstarted[q.id] = m
			}
			m[k]++
		}
		if q.Deadline <= 0 {
			return
		}
		wait := 0.0
		if j.State == job.Waiting {
			if ends == nil {
				return
			}
			for _, p := range j.Prereqs {
				if int(p) < len(ends) {
					wait = max(wait, ends[p])
				}
			}
		}
		wk := whyKey{k, wait}
		w, ok := whys[wk]
		if !ok {
			w = s.whyInfeasible(q, j, wait, q.deadlineOf().Sub(now).Seconds())
			whys[wk] = w
		}
		if w == "" {
			return
		}
		next[id] = w
		e.infeasibleN[q.id]++
		if _, was := e.infeasible[id]; !was {
			fresh[q] = append(fresh[q], id)
		}
	})
	for q, ids := range fresh {
		s.log.Warn("jobs cannot end by their queue's deadline at any site; they wait (a later deadline, cls queue set, lets them run)",
			"queue", q.Name, "jobs", len(ids), "first", ids[:min(len(ids), 5)], "why", next[ids[0]])
	}
	e.infeasible = next
	s.unpark()
	for qid, groups := range unstarted {
		q := s.queueIDs[qid]
		if n, why := s.overBudget(q, groups); n > 0 {
			e.overBudget[qid], e.overBudgetWhy[qid] = n, why
			if before[qid] == 0 {
				s.log.Warn("the budget left cannot pay for every job not started; dispatch starts none it cannot pay for",
					"queue", q.Name, "jobs", n, "why", why)
			}
		}
	}
}

// parkedReady is a ready job off its queue's heap, and where it goes back.
type parkedReady struct {
	q *queue
	r policy.Ready
}

// park takes ready job r of q off the heap while it is infeasible: it
// reports whether it did.
func (s *Store) park(q *queue, r policy.Ready) bool {
	if len(s.econ.infeasible) == 0 {
		return false
	}
	if _, no := s.econ.infeasible[r.ID]; !no {
		return false
	}
	s.econ.parked[r.ID] = parkedReady{q, r}
	return true
}

// unpark puts back on their heaps the parked jobs the last check did not
// find infeasible (a later deadline, a faster site), if still queued.
func (s *Store) unpark() {
	for id, p := range s.econ.parked {
		if _, still := s.econ.infeasible[id]; still {
			continue
		}
		delete(s.econ.parked, id)
		if j, ok := s.g.Node(id); ok && j.State == job.Queued {
			p.q.ready.Push(p.r)
		}
	}
}

// earliestEnds is, per target, how soon (seconds from now) its
// unfinished jobs can all have ended at the earliest: each job's chain
// of unfinished prerequisites run back to back at their fastest sites'
// estimates (a running job for what is left of its estimate), the
// longest chain counting. A job of unknown runtime counts as nothing, so
// it is a lower bound: the earliest start of a job waiting on these
// targets. policy.Levels (the cp policy's b-level walk) does the walk,
// over the live jobs and their targets with the edges reversed: a job
// leads to its target, a target to the jobs that need it. O(live jobs +
// their prerequisite lists); nil if the graph has a cycle.
func (s *Store) earliestEnds(now time.Time) []float64 {
	nt := int(s.g.NextTargetID())
	tnode := make([]int32, nt)             // target -> its node + 1; 0: none yet
	w := make([]float64, 0, s.g.Live()+nt) // a node per job and target
	next := make([][]int32, 0, s.g.Live()+nt)
	own := make([]int32, 0, s.g.Live()) // each job's one next, its target
	node := func(t dag.TargetID) int32 {
		if tnode[t] == 0 {
			w, next = append(w, 0), append(next, nil)
			tnode[t] = int32(len(w))
		}
		return tnode[t] - 1
	}
	best := map[econKey]float64{}
	s.g.Each(func(id int64, j dag.Node) {
		if j.State != job.Waiting && j.State != job.Queued && j.State != job.Executing {
			return // Blocked: it and its dependents wait on a rerun
		}
		q := s.queueIDs[j.Queue]
		if q == nil || int(j.Target) >= nt {
			return
		}
		k := keyOf(q, j)
		b, ok := best[k]
		if !ok {
			b, _ = s.bestEstimate(q, j)
			best[k] = b
		}
		if j.State == job.Executing {
			b = max(b-s.ranFor(id, now), 0)
		}
		t := node(j.Target)
		x := int32(len(w))
		own = append(own, t)
		w, next = append(w, b), append(next, own[len(own)-1:])
		if j.State != job.Waiting {
			return
		}
		for _, p := range j.Prereqs {
			if int(p) < nt && !s.g.Complete(p) {
				tp := node(p)
				next[tp] = append(next[tp], x)
			}
		}
	})
	lv, ok := policy.Levels(w, next)
	if !ok {
		return nil
	}
	ends := make([]float64, nt)
	for t, n := range tnode {
		if n > 0 {
			ends[t] = lv[n-1]
		}
	}
	return ends
}

// ranFor is how long running job id has run: since its earliest running
// attempt (itself or a copy) started.
func (s *Store) ranFor(id int64, now time.Time) float64 {
	var first time.Time
	if ru := s.running[id]; ru != nil {
		first = ru.started
	}
	for _, c := range s.copyRuns[id] {
		if first.IsZero() || c.started.Before(first) {
			first = c.started
		}
	}
	if first.IsZero() {
		return 0
	}
	return max(now.Sub(first).Seconds(), 0)
}

// econSites are the sites a job could run at (the checks' candidates):
// the stored ones and those placeholders registered from, or, with none
// known, the nameless one.
func (s *Store) econSites() map[string]bool {
	if len(s.econ.sites) == 0 {
		return map[string]bool{"": true}
	}
	return s.econ.sites
}

// bestEstimate is job j's shortest estimated runtime at any known site,
// and that site (the first by name among equals); 0: unknown.
func (s *Store) bestEstimate(q *queue, j dag.Node) (float64, string) {
	best, at := math.Inf(1), ""
	for site := range s.econSites() {
		est := s.estimateAt(q, j, site)
		if est < best || (est == best && site < at) {
			best, at = est, site
		}
	}
	if math.IsInf(best, 1) {
		return 0, ""
	}
	return best, at
}

// whyInfeasible says why job j of q, which can start wait seconds from
// now at the earliest (0: ready), with left seconds to q's deadline,
// cannot end by it at any known site ("" when some site can, or when
// neither its prerequisites nor its own runtime rule it out: it may).
func (s *Store) whyInfeasible(q *queue, j dag.Node, wait, left float64) string {
	if left <= 0 {
		return "its queue's deadline has passed"
	}
	if wait >= left {
		return fmt.Sprintf("its prerequisites end in %.4gs at the earliest, %.4gs left to its queue's deadline", wait, left)
	}
	best, at := s.bestEstimate(q, j)
	if wait+best <= left {
		return ""
	}
	run := fmt.Sprintf("expected to run %.4gs", best)
	if at != "" {
		run += fmt.Sprintf(" at best (site %s)", at)
	}
	if wait > 0 {
		return fmt.Sprintf("its prerequisites end in %.4gs at the earliest, then it is %s, %.4gs left to its queue's deadline", wait, run, left)
	}
	return fmt.Sprintf("%s, %.4gs left to its queue's deadline", run, left)
}

// overBudget is how many of q's jobs not started (groups: how many of
// each kind) its budget left, less what running attempts reserve, cannot
// pay for even at each job's cheapest known site's expected cost (price x
// estimateAt), the cheapest jobs paid first, and why. A free site, or a
// job of unknown runtime, costs nothing: no job is counted then.
func (s *Store) overBudget(q *queue, groups map[econKey]int) (int, string) {
	left := max(q.Budget-s.econ.spentBy(q.id)-s.econ.reserved[q.id], 0)
	type kind struct {
		cost float64
		n    int
	}
	kinds := make([]kind, 0, len(groups))
	total := 0
	for k, n := range groups {
		j := dag.Node{Target: k.target, Est: k.est, Queue: k.queue}
		cost := math.Inf(1)
		for site := range s.econSites() {
			cost = min(cost, s.econ.price[site]*s.estimateAt(q, j, site)/3600)
		}
		kinds = append(kinds, kind{cost, n})
		total += n
	}
	slices.SortFunc(kinds, func(a, b kind) int { return cmp.Compare(a.cost, b.cost) })
	paid, rest := 0, left*(1+1e-9)
	for _, k := range kinds {
		if k.cost <= 0 {
			paid += k.n
			continue
		}
		n := min(k.n, int(rest/k.cost))
		paid += n
		rest -= float64(n) * k.cost
		if n < k.n {
			break // the dearer kinds fit even less
		}
	}
	if paid >= total {
		return 0, ""
	}
	return total - paid, fmt.Sprintf("its queue's budget left (%.4g, less what running jobs reserve) pays for %d of its %d jobs not started, at their cheapest sites' expected cost",
		left, paid, total)
}
