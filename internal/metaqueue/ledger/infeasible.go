package ledger

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

// checkState is what the check found, and when.
type checkState struct {
	// infeasible are the ready jobs no site can end by their queue's
	// deadline, with why; infeasibleN counts them per queue. at and
	// checkedGen are when they were last checked and gen what the check
	// depends on beyond the clock; took is the last check's own time.
	infeasible  map[int64]string
	infeasibleN map[int32]int
	// parked are ready jobs taken off their queue's heap while infeasible
	// (Park): left there, more than a window of them at its head hid the
	// jobs behind that could end in time. A check that finds one feasible
	// again gives it back.
	parked map[int64]Parked
	// overBudget counts per queue the jobs not started that its budget
	// left cannot pay for, with why.
	overBudget      map[int32]int
	overBudgetWhy   map[int32]string
	at              time.Time
	took            time.Duration
	checkedGen, gen uint64
}

func newCheckState() checkState {
	return checkState{infeasible: map[int64]string{}, infeasibleN: map[int32]int{}, parked: map[int64]Parked{},
		overBudget: map[int32]int{}, overBudgetWhy: map[int32]string{}, gen: 1}
}

// Parked is a ready job off its queue's heap, and the queue it goes back
// to.
type Parked struct {
	Queue int32
	Ready policy.Ready
}

// Park takes ready job r of queue q off the heap while it is infeasible:
// it reports whether it did.
func (l *Ledger) Park(q int32, r policy.Ready) bool {
	if len(l.check.infeasible) == 0 {
		return false
	}
	if _, no := l.check.infeasible[r.ID]; !no {
		return false
	}
	l.check.parked[r.ID] = Parked{q, r}
	return true
}

// Parks says whether Park may take any job off a heap: whether the last
// check found some job infeasible. When not, a pick need not ask it.
func (l *Ledger) Parks() bool { return len(l.check.infeasible) > 0 }

// Infeasible says why job id cannot end by its queue's deadline ("": it
// may), as the last check found.
func (l *Ledger) Infeasible(id int64) string { return l.check.infeasible[id] }

// OverBudget says why queue q's budget left cannot pay for all its jobs
// not started ("": it can), as the last check found.
func (l *Ledger) OverBudget(q int32) string { return l.check.overBudgetWhy[q] }

// econKey groups jobs the checks treat alike: one queue and declared
// runtime, and, for jobs that declared none, one target (whose learned
// runtime is theirs; estimateAt).
type econKey struct {
	queue  int32
	target dag.TargetID
	est    float32
}

func keyOf(q int32, j dag.Node) econKey {
	if j.Est > 0 {
		return econKey{q, 0, j.Est}
	}
	return econKey{q, j.Target, 0}
}

// QueueCounts is a queue's settings, how many of its jobs are in the
// states the ledger reads, and for the planners (Provision) its next ready
// job (nil: none) and the mean runtime its jobs declared (0: none).
type QueueCounts struct {
	Queue
	Counts
	Head     *dag.Node
	Declared float64
}

// Declared sums the runtimes a queue's jobs declared (submitted since the
// CLS started, or not ended when it did): provisioning's estimate for a
// queue none of whose jobs is ready or measured (QueueCounts.Declared).
type Declared struct {
	sum float64
	n   int
}

// Note counts a job that declared est seconds (0: none, not counted).
func (d *Declared) Note(est float64) {
	if est > 0 {
		d.sum += est
		d.n++
	}
}

// Mean is the mean declared runtime, 0 when none was.
func (d Declared) Mean() float64 {
	if d.n == 0 {
		return 0
	}
	return d.sum / float64(d.n)
}

// View is what the check reads of the core, read-only.
type View struct {
	Graph  *dag.Graph
	Queues []QueueCounts // every queue
	// Started is when running job id's earliest running attempt (itself
	// or a copy) started; zero: none.
	Started  func(id int64) time.Time
	Estimate Estimator
}

// Due says whether the check should run now: its inputs changed, or
// infeasibleEvery passed (or more, so it stays under 5% of the core's
// time however many jobs wait: about 25 ms for 100,000 ready jobs).
func (l *Ledger) Due(now time.Time) bool {
	c := &l.check
	return c.checkedGen != c.gen || now.Sub(c.at) >= max(infeasibleEvery, 20*c.took)
}

// Took is how long the last check took the core (its pace: Due).
func (l *Ledger) Took(d time.Duration) { l.check.took = d }

// Check reports early the jobs that cannot finish within their queue's
// deadline and budget (seed 002), without failing them, and returns the
// parked jobs found feasible again, for their queues' heaps:
//
//   - The deadline: jobs no known site can end by it (whyInfeasible),
//     ready ones and those still waiting on prerequisites, whose earliest
//     start is when their unfinished prerequisites can have ended at the
//     earliest (earliestEnds). They wait, so a later deadline (cls queue
//     set) lets them run; mqstat -j says why, --summary and cls queue
//     list count them, and it logs one line per queue and check for the
//     jobs newly found.
//   - The budget: how many of a queue's jobs not started its budget left
//     (less what running attempts reserve) cannot pay for even at their
//     cheapest site's expected cost (overBudget).
//
// It walks the live jobs once (twice when a deadline queue has waiting
// jobs); jobs of one queue, target and declared runtime are alike to it,
// so beyond a map lookup its work is per such group, not per job.
func (l *Ledger) Check(v View, now time.Time) []Parked {
	c := &l.check
	c.at, c.checkedGen = now, c.gen
	next := map[int64]string{}
	clear(c.infeasibleN)
	before := c.overBudget
	c.overBudget, c.overBudgetWhy = map[int32]int{}, map[int32]string{}
	queues := make(map[int32]Queue, len(v.Queues))
	checked, waiting := false, false
	for _, q := range v.Queues {
		queues[q.ID] = q.Queue
		if q.Costed() && q.Queued+q.Waiting > 0 {
			checked = true
			waiting = waiting || (q.Deadline > 0 && q.Waiting > 0)
		}
	}
	if !checked {
		c.infeasible = next
		return l.unpark()
	}
	var ends []float64
	if waiting {
		ends = l.earliestEnds(v, queues, now)
	}
	type whyKey struct {
		econKey
		wait float64
	}
	whys := map[whyKey]string{}
	unstarted := map[int32]map[econKey]int{} // budgeted queues' jobs not started
	fresh := map[int32][]int64{}
	v.Graph.Each(func(id int64, j dag.Node) {
		if j.State != job.Queued && j.State != job.Waiting {
			return
		}
		q, ok := queues[j.Queue]
		if !ok || !q.Costed() {
			return
		}
		k := keyOf(q.ID, j)
		if q.Budget > 0 {
			m := unstarted[q.ID]
			if m == nil {
				m = map[econKey]int{}
				unstarted[q.ID] = m
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
			// An after-any prerequisite orders the job as an after-ok one
			// does: it starts no earlier than the target's jobs end.
			for _, list := range [2][]dag.TargetID{j.Prereqs, j.AfterAny} {
				for _, p := range list {
					if int(p) < len(ends) {
						wait = max(wait, ends[p])
					}
				}
			}
		}
		wk := whyKey{k, wait}
		w, ok := whys[wk]
		if !ok {
			w = l.whyInfeasible(q, j, wait, q.deadline().Sub(now).Seconds(), v.Estimate)
			whys[wk] = w
		}
		if w == "" {
			return
		}
		next[id] = w
		c.infeasibleN[q.ID]++
		if _, was := c.infeasible[id]; !was {
			fresh[q.ID] = append(fresh[q.ID], id)
		}
	})
	for qid, ids := range fresh {
		l.log.Warn("jobs cannot end by their queue's deadline at any site; they wait (a later deadline, cls queue set, lets them run)",
			"queue", queues[qid].Name, "jobs", len(ids), "first", ids[:min(len(ids), 5)], "why", next[ids[0]])
	}
	c.infeasible = next
	back := l.unpark()
	for qid, groups := range unstarted {
		q := queues[qid]
		if n, why := l.overBudget(q, groups, v.Estimate); n > 0 {
			c.overBudget[qid], c.overBudgetWhy[qid] = n, why
			if before[qid] == 0 {
				l.log.Warn("the budget left cannot pay for every job not started; dispatch starts none it cannot pay for",
					"queue", q.Name, "jobs", n, "why", why)
			}
		}
	}
	return back
}

// unpark returns the parked jobs the last check did not find infeasible
// (a later deadline, a faster site): the core puts those still queued
// back on their heaps.
func (l *Ledger) unpark() []Parked {
	var back []Parked
	for id, p := range l.check.parked {
		if _, still := l.check.infeasible[id]; still {
			continue
		}
		delete(l.check.parked, id)
		back = append(back, p)
	}
	return back
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
func (l *Ledger) earliestEnds(v View, queues map[int32]Queue, now time.Time) []float64 {
	g := v.Graph
	nt := int(g.NextTargetID())
	tnode := make([]int32, nt)           // target -> its node + 1; 0: none yet
	w := make([]float64, 0, g.Live()+nt) // a node per job and target
	next := make([][]int32, 0, g.Live()+nt)
	own := make([]int32, 0, g.Live()) // each job's one next, its target
	node := func(t dag.TargetID) int32 {
		if tnode[t] == 0 {
			w, next = append(w, 0), append(next, nil)
			tnode[t] = int32(len(w))
		}
		return tnode[t] - 1
	}
	best := map[econKey]float64{}
	g.Each(func(id int64, j dag.Node) {
		if j.State != job.Waiting && j.State != job.Queued && j.State != job.Executing {
			return // Blocked: it and its dependents wait on a rerun
		}
		q, ok := queues[j.Queue]
		if !ok || int(j.Target) >= nt {
			return
		}
		k := keyOf(q.ID, j)
		b, ok := best[k]
		if !ok {
			b, _ = l.bestEstimate(q, j, v.Estimate)
			best[k] = b
		}
		if j.State == job.Executing {
			b = max(b-ranFor(v.Started(id), now), 0)
		}
		t := node(j.Target)
		x := int32(len(w))
		own = append(own, t)
		w, next = append(w, b), append(next, own[len(own)-1:])
		if j.State != job.Waiting {
			return
		}
		for _, p := range j.Prereqs {
			if int(p) < nt && !g.Complete(p) {
				tp := node(p)
				next[tp] = append(next[tp], x)
			}
		}
		// An after-any target orders the job until it has ended; its
		// failed jobs are no longer in the walk, so it waits on the rest.
		for _, p := range j.AfterAny {
			if int(p) < nt && !g.Ended(p) {
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

// ranFor is how long a job whose earliest running attempt started at
// first has run (zero: none).
func ranFor(first, now time.Time) float64 {
	if first.IsZero() {
		return 0
	}
	return max(now.Sub(first).Seconds(), 0)
}

// candidates are the sites a job of q could run at, as far as the
// checks can tell them apart: the stored ones and those placeholders
// registered from, or, with none known, the nameless one. A site with
// no price and no runtime of q's is like every other such site to them
// (the same estimate, no cost), so only the first of those by name is
// among them: registrations name sites as they like, and with each
// name a candidate, a placeholder key registering thousands of names
// made every check cost the jobs' groups times those names.
func (l *Ledger) candidates(q int32) []string {
	if len(l.sites) == 0 {
		return []string{""}
	}
	ran := l.ran[q]
	plain := func(site string) bool { return l.price[site] == 0 && (ran[site] == nil || ran[site].n == 0) }
	var out []string
	for site := range l.price {
		if l.sites[site] && !plain(site) {
			out = append(out, site)
		}
	}
	for site := range ran {
		if l.sites[site] && !plain(site) && l.price[site] == 0 {
			out = append(out, site)
		}
	}
	// Those skipped before the first plain one are priced or have run
	// q's jobs: as many as the loops above went through, at most.
	for _, site := range l.siteNames {
		if plain(site) {
			return append(out, site)
		}
	}
	return out
}

// bestEstimate is job j's shortest estimated runtime at any known site,
// and that site (the first by name among equals); 0: unknown.
func (l *Ledger) bestEstimate(q Queue, j dag.Node, est Estimator) (float64, string) {
	best, at := math.Inf(1), ""
	for _, site := range l.candidates(q.ID) {
		e := l.estimateAt(q, j, site, est)
		if e < best || (e == best && site < at) {
			best, at = e, site
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
func (l *Ledger) whyInfeasible(q Queue, j dag.Node, wait, left float64, est Estimator) string {
	if left <= 0 {
		return "its queue's deadline has passed"
	}
	if wait >= left {
		return fmt.Sprintf("its prerequisites end in %.4gs at the earliest, %.4gs left to its queue's deadline", wait, left)
	}
	best, at := l.bestEstimate(q, j, est)
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
func (l *Ledger) overBudget(q Queue, groups map[econKey]int, est Estimator) (int, string) {
	left := max(q.Budget-l.spentBy(q.ID)-l.reserved[q.ID], 0)
	type kind struct {
		cost float64
		n    int
	}
	kinds := make([]kind, 0, len(groups))
	total := 0
	for k, n := range groups {
		j := dag.Node{Target: k.target, Est: k.est, Queue: k.queue}
		cost := math.Inf(1)
		for _, site := range l.candidates(q.ID) {
			cost = min(cost, l.price[site]*l.estimateAt(q, j, site, est)/3600)
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
