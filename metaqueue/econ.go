package metaqueue

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/mq-hpc/mq/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/protocol"
)

// Economics (seed 002, docs/seed002.md): what attempts cost, what each
// queue has spent and reserved, and the caps the deadline-and-budget
// planner (econ.Provisioner, followed by the site manager) puts on how
// many of a queue's jobs each site runs at once.
//
// A queue is costed when it has a deadline or a budget; any attempt at a
// priced site is charged. Spending is committed with the attempt's end, in
// the same transaction (table charges), so it survives a crash exactly.
type econState struct {
	price map[string]float64 // stored site -> per core-hour
	spent map[int32]map[string]float64
	// reserved is what a queue's executing attempts may cost: each
	// reserves its site's price times its bound (the queue's ceiling, which
	// kills a job that runs longer, else its expected runtime), released
	// when it ends and the real cost is charged.
	reserved map[int32]float64
	// priced counts a queue's executing attempts at priced sites.
	priced map[int32]int
	// ran is each queue's succeeded attempts' runtimes per site: the
	// planner's measured rates.
	ran map[int32]map[string]*runtimes
	// free is the part of ran not in charges (succeeded attempts of a
	// queue the LP caps, uncosted, at an unpriced site): kept in
	// stage_runtimes, so a restarted CLS plans from it too.
	free map[int32]map[string]*runtimes
	// wrote is the bytes each queue's Done jobs wrote (their outputs'
	// reported sizes, else declared ones), kept in stage_output: what a
	// stage sends the next (LP provisioning).
	wrote map[int32]*wrote
	// dirtyFree and dirtyWrote are the rows of free and wrote changed in
	// the batch's transaction, written before it commits (flushMeasures).
	dirtyFree  map[ranKey]bool
	dirtyWrote map[int32]bool
	// caps and execAt: a queue's jobs each site may run at once, as the
	// planner last said (a site absent: no cap), and runs now.
	caps         map[int32]map[string]int
	execAt       map[int32]map[string]int
	unfinishable map[int32]int
	// sites are the sites a job could run at: stored ones and those
	// placeholders registered from (the deadline check's candidates).
	sites map[string]bool
	// infeasible are the ready jobs no site can end by their queue's
	// deadline, with why (checkInfeasible); infeasibleN counts them per
	// queue. checkedAt and checkedGen are when they were last checked
	// and infeasibleGen what the check depends on beyond the clock.
	// dying are killed copies whose placeholder has not said they
	// stopped: each keeps its reservation until it does (or until, a
	// lease after the kill), since it runs on until the placeholder's
	// next heartbeat and that time is charged too (extendCharge).
	dying       map[protocol.JobRef]dyingRun
	infeasible  map[int64]string
	infeasibleN map[int32]int
	// parked are ready jobs taken off their queue's heap while infeasible
	// (pickFrom): left there, more than a window of them at its head hid
	// the jobs behind that could end in time. A check that finds one
	// feasible again puts it back (unpark).
	parked map[int64]parkedReady
	// overBudget counts per queue the jobs not started that its budget
	// left cannot pay for, with why (checkInfeasible).
	overBudget                map[int32]int
	overBudgetWhy             map[int32]string
	checkedAt                 time.Time
	checkTook                 time.Duration // the last check's own time
	checkedGen, infeasibleGen uint64
}

func (e *econState) reset() {
	*e = econState{price: map[string]float64{}, spent: map[int32]map[string]float64{}, reserved: map[int32]float64{},
		priced: map[int32]int{}, ran: map[int32]map[string]*runtimes{}, free: map[int32]map[string]*runtimes{}, wrote: map[int32]*wrote{},
		dirtyFree: map[ranKey]bool{}, dirtyWrote: map[int32]bool{}, caps: map[int32]map[string]int{},
		execAt: map[int32]map[string]int{}, unfinishable: map[int32]int{}, sites: map[string]bool{},
		infeasible: map[int64]string{}, parked: map[int64]parkedReady{}, infeasibleN: map[int32]int{}, overBudget: map[int32]int{}, overBudgetWhy: map[int32]string{}, infeasibleGen: 1, dying: map[protocol.JobRef]dyingRun{}}
}

// costed says whether a queue's attempts are charged wherever they run.
func (q *queue) costed() bool { return q.Budget > 0 || q.Deadline > 0 }

func (e *econState) spentBy(q int32) float64 {
	t := 0.0
	for _, v := range e.spent[q] {
		t += v
	}
	return t
}

// loadEcon reads the stored sites' prices and what every queue spent.
func (s *Store) loadEcon(ctx context.Context) error {
	s.econ.reset()
	if err := s.eachSiteSpec(ctx, func(name string, spec protocol.SiteSpec) {
		s.econ.sites[name] = true
		if spec.Price > 0 {
			s.econ.price[name] = spec.Price
		}
	}); err != nil {
		return err
	}
	rows, err := s.w.QueryContext(ctx, `SELECT queue_id, site, sum(cost), coalesce(sum(CASE WHEN ok THEN seconds END), 0), sum(ok)
		FROM charges GROUP BY queue_id, site`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var q int32
		var site string
		var cost, secs float64
		var n int
		if err := rows.Scan(&q, &site, &cost, &secs, &n); err != nil {
			rows.Close()
			return err
		}
		s.addSpent(q, site, cost)
		if n > 0 {
			s.ranAt(q, site).secs += secs
			s.ranAt(q, site).n += n
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	return s.loadMeasures(ctx)
}

// ranKey is a queue at a site.
type ranKey struct {
	queue int32
	site  string
}

// loadMeasures reads what LP provisioning measured beyond charges: the
// uncharged runtimes (stage_runtimes) and the bytes written per queue
// (stage_output). A row per queue and site: nothing to speak of at load.
func (s *Store) loadMeasures(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, "SELECT queue_id, site, seconds, runs FROM stage_runtimes")
	if err != nil {
		return err
	}
	for rows.Next() {
		var q int32
		var site string
		var r runtimes
		if err := rows.Scan(&q, &site, &r.secs, &r.n); err != nil {
			rows.Close()
			return err
		}
		*s.freeAt(q, site) = r
		s.ranAt(q, site).secs += r.secs
		s.ranAt(q, site).n += r.n
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	rows, err = s.w.QueryContext(ctx, "SELECT queue_id, bytes, jobs FROM stage_output")
	if err != nil {
		return err
	}
	for rows.Next() {
		var q int32
		w := &wrote{}
		if err := rows.Scan(&q, &w.bytes, &w.n); err != nil {
			rows.Close()
			return err
		}
		s.econ.wrote[q] = w
	}
	return closeRows(rows)
}

// flushMeasures writes the rows of stage_runtimes and stage_output the
// batch changed, in its transaction (before it commits): a row per queue
// (and site) however many of its jobs ended.
func (s *Store) flushMeasures() error {
	e := &s.econ
	if len(e.dirtyFree) == 0 && len(e.dirtyWrote) == 0 {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	for k := range e.dirtyFree {
		r := s.freeAt(k.queue, k.site)
		if _, err := s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO stage_runtimes (queue_id, site, seconds, runs) VALUES (?, ?, ?, ?)",
			k.queue, k.site, r.secs, r.n); err != nil {
			return fatalError{err}
		}
	}
	for q := range e.dirtyWrote {
		w := e.wrote[q]
		if _, err := s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO stage_output (queue_id, bytes, jobs) VALUES (?, ?, ?)",
			q, w.bytes, w.n); err != nil {
			return fatalError{err}
		}
	}
	clear(e.dirtyFree)
	clear(e.dirtyWrote)
	return nil
}

func (s *Store) addSpent(q int32, site string, cost float64) {
	m := s.econ.spent[q]
	if m == nil {
		m = map[string]float64{}
		s.econ.spent[q] = m
	}
	m[site] += cost
}

func (s *Store) ranAt(q int32, site string) *runtimes { return runtimesAt(s.econ.ran, q, site) }

func (s *Store) freeAt(q int32, site string) *runtimes { return runtimesAt(s.econ.free, q, site) }

func runtimesAt(all map[int32]map[string]*runtimes, q int32, site string) *runtimes {
	m := all[q]
	if m == nil {
		m = map[string]*runtimes{}
		all[q] = m
	}
	r := m[site]
	if r == nil {
		r = &runtimes{}
		m[site] = r
	}
	return r
}

// econCosting says whether any queue is costed or any site priced: only
// then does dispatch need the asking placeholder's site.
func (s *Store) econCosting() bool {
	if len(s.econ.price) > 0 || len(s.econ.caps) > 0 {
		return true
	}
	for _, q := range s.qlist {
		if q.costed() {
			return true
		}
	}
	return false
}

// siteName is placeholder ph's site.
func (s *Store) siteName(ph int64) (string, error) {
	at, err := s.phSite(ph)
	if err != nil {
		return "", err
	}
	return s.data.places[at].site, nil
}

// expectAt is how long job j of queue q is expected to run at site
// (estimateAt), else the queue's ceiling; 0: unknown.
func (s *Store) expectAt(q *queue, j dag.Node, site string) float64 {
	if e := s.estimateAt(q, j, site); e > 0 {
		return e
	}
	return q.Ceiling
}

// estimateAt is how long job j of queue q is expected to run at site: the
// queue's mean there, else the job's declared or learned (per target)
// runtime, else the queue's mean anywhere; 0: unknown. Not the ceiling,
// which bounds a runtime but does not estimate it.
func (s *Store) estimateAt(q *queue, j dag.Node, site string) float64 {
	if r := s.econ.ran[q.id][site]; r != nil && r.n > 0 {
		return r.secs / float64(r.n)
	}
	if e := s.data.expect.Estimate(s.g.Name(j.Target), float64(j.Est)); e > 0 {
		return e
	}
	var all runtimes
	for _, r := range s.econ.ran[q.id] {
		all.secs += r.secs
		all.n += r.n
	}
	if all.n > 0 {
		return all.secs / float64(all.n)
	}
	return 0
}

// reserveFor is what an attempt of j at site reserves of q's budget: the
// site's price times the queue's ceiling (a job is killed past it), else
// times its expected runtime; unknown (0) when neither is known.
func (s *Store) reserveFor(q *queue, j dag.Node, site string) float64 {
	price := s.econ.price[site]
	bound := q.Ceiling
	if bound <= 0 {
		bound = s.expectAt(q, j, site)
	}
	return price * bound / 3600
}

// affordable says whether a placeholder at site may start an attempt of
// job j of q now (a first run, a retry or a copy alike): it can end by
// the queue's deadline there (inTime), the planner's cap for the site is
// not reached, and the budget left (less what running attempts reserve)
// covers what it would reserve. A job whose cost cannot be foreseen (no
// runtime known anywhere) starts at a priced site only while no other of
// its queue runs at one, so its runtime is measured before more are
// risked.
func (s *Store) affordable(q *queue, j dag.Node, site string) bool {
	if !q.costed() {
		return len(s.econ.caps) == 0 || !s.atCap(q, site)
	}
	if q.Deadline > 0 && !s.inTime(q, j, site) {
		return false
	}
	if s.atCap(q, site) {
		return false
	}
	if q.Budget <= 0 || s.econ.price[site] == 0 {
		return true
	}
	need := s.reserveFor(q, j, site)
	if need == 0 {
		return s.econ.priced[q.id] == 0 && s.econ.spentBy(q.id) < q.Budget
	}
	return s.econ.spentBy(q.id)+s.econ.reserved[q.id]+need <= q.Budget*(1+1e-9)
}

// atCap says whether site runs as many of q's jobs as the provisioning
// plan lets it (deadline-and-budget or LP stage caps).
func (s *Store) atCap(q *queue, site string) bool {
	caps, ok := s.econ.caps[q.id]
	if !ok {
		return false
	}
	c, ok := caps[site]
	return ok && s.econ.execAt[q.id][site] >= c
}

// deadlineOf is q's deadline as a time (zero: none).
func (q *queue) deadlineOf() time.Time {
	if q.Deadline <= 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(q.Deadline*1e9))
}

// inTime is the deadline rule at dispatch (seed 002's DBC schedulers
// assign a job only to a resource that can complete it by the deadline):
// an attempt of j starts at site only if now plus its estimated runtime
// there (estimateAt) is no later than q's deadline. With no estimate at
// all, it starts while the deadline is ahead: its runtime is learned
// from it.
func (s *Store) inTime(q *queue, j dag.Node, site string) bool {
	left := q.deadlineOf().Sub(s.now()).Seconds()
	if left <= 0 {
		return false
	}
	return s.estimateAt(q, j, site) <= left
}

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
	for _, c := range s.repl.copies[id] {
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

// knowSite adds a site jobs may run at to the deadline check's candidates.
func (s *Store) knowSite(site string) {
	if site != "" && !s.econ.sites[site] {
		s.econ.sites[site] = true
		s.econ.infeasibleGen++
	}
}

// econStart records that ru (job j of q) started at site.
func (s *Store) econStart(q *queue, j dag.Node, ru *run, site string) {
	s.knowSite(site)
	_, capped := s.econ.caps[q.id] // an LP stage's caps hold uncosted queues too
	if !q.costed() && !capped && s.econ.price[site] == 0 {
		return
	}
	ru.site, ru.queue, ru.costed = site, q.id, true
	if q.costed() || capped {
		s.count(ru)
	}
	if q.costed() {
		if s.econ.price[site] > 0 {
			ru.reserve = s.reserveFor(q, j, site)
			s.econ.reserved[q.id] += ru.reserve
			s.econ.priced[q.id]++
		}
	}
}

// count adds ru to what its queue runs at its site.
func (s *Store) count(ru *run) {
	m := s.econ.execAt[ru.queue]
	if m == nil {
		m = map[string]int{}
		s.econ.execAt[ru.queue] = m
	}
	m[ru.site]++
	ru.counted = true
}

// countRunning counts the attempts of queue q running now that are not
// counted yet (the queue is capped for the first time: they started
// while nothing held it, or before a restart), so its caps hold from the
// first plan on.
func (s *Store) countRunning(q *queue) error {
	add := func(id int64, ru *run) error {
		if ru.counted {
			return nil
		}
		if j, ok := s.g.Node(id); !ok || j.Queue != q.id {
			return nil
		}
		if ru.site == "" {
			site, err := s.siteName(ru.placeholder)
			if err != nil {
				return err
			}
			ru.site = site
		}
		ru.queue = q.id
		s.count(ru)
		return nil
	}
	for id, ru := range s.running {
		if err := add(id, ru); err != nil {
			return err
		}
	}
	for id, cs := range s.repl.copies {
		for _, ru := range cs {
			if err := add(id, ru); err != nil {
				return err
			}
		}
	}
	return nil
}

// econStop releases what ru reserved.
func (s *Store) econStop(ru *run) {
	if ru.counted {
		if m := s.econ.execAt[ru.queue]; m[ru.site] > 0 {
			m[ru.site]--
		}
		ru.counted = false
	}
	if !ru.costed {
		return
	}
	if s.econ.price[ru.site] > 0 || ru.reserve > 0 {
		s.econ.reserved[ru.queue] = max(s.econ.reserved[ru.queue]-ru.reserve, 0)
		if s.econ.priced[ru.queue] > 0 {
			s.econ.priced[ru.queue]--
		}
	}
	ru.costed = false
}

// charge records what an attempt of job id that ran from started to
// finished cost, in the batch's transaction. Called before stopRun.
func (s *Store) charge(id int64, q *queue, ru *run, started, finished time.Time, ok bool) error {
	site := ru.site
	if site == "" {
		var err error
		if site, err = s.siteName(ru.placeholder); err != nil {
			return err
		}
	}
	price := s.econ.price[site]
	secs := max(finished.Sub(started).Seconds(), 0)
	if price == 0 && !q.costed() {
		if ok && ru.counted {
			// Nothing to charge, but a queue the LP caps (an uncosted
			// stage) is planned from its measured rates all the same,
			// kept in stage_runtimes (charges has none of them).
			r := s.ranAt(q.id, site)
			r.secs += secs
			r.n++
			f := s.freeAt(q.id, site)
			f.secs += secs
			f.n++
			s.econ.dirtyFree[ranKey{q.id, site}] = true
		}
		return nil
	}
	cost := price * secs / 3600
	if _, err := s.w.ExecContext(context.Background(), `INSERT OR REPLACE INTO charges (job_id, attempt, queue_id, site, seconds, price, cost, ok)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, ru.attempt, q.id, site, secs, price, cost, ok); err != nil {
		return fatalError{err}
	}
	s.addSpent(q.id, site, cost)
	if ok {
		r := s.ranAt(q.id, site)
		r.secs += secs
		r.n++
	}
	return nil
}

type dyingRun struct {
	ru    *run
	until time.Time
}

// econDying keeps killed copy ru's reservation until its placeholder
// reports it stopped (econDied), or a lease from now.
func (s *Store) econDying(ref protocol.JobRef, ru *run) {
	if !ru.costed {
		s.econStop(ru) // counted only (a capped queue): nothing to charge
		return
	}
	s.econ.dying[ref] = dyingRun{ru, s.now().Add(s.opt.Lease)}
	// What it was charged at the kill is spent: no longer reserved.
	s.unreserve(ru, s.econ.price[ru.site]*max(s.now().Sub(ru.started).Seconds(), 0)/3600)
}

// unreserve moves cost of ru's reservation to spent (charged meanwhile).
func (s *Store) unreserve(ru *run, cost float64) {
	d := min(max(cost, 0), ru.reserve)
	ru.reserve -= d
	s.econ.reserved[ru.queue] = max(s.econ.reserved[ru.queue]-d, 0)
}

// econDied releases a killed copy's reservation.
func (s *Store) econDied(ref protocol.JobRef) {
	if d, ok := s.econ.dying[ref]; ok {
		s.econStop(d.ru)
		delete(s.econ.dying, ref)
	}
}

// expireDying releases the reservations of killed copies never reported.
func (s *Store) expireDying(now time.Time) {
	for ref, d := range s.econ.dying {
		if now.After(d.until) {
			s.econStop(d.ru)
			delete(s.econ.dying, ref)
		}
	}
}

// extendCharge charges a killed copy up to when its placeholder says it
// ended (never past now, nor past a lease after the kill): it was
// charged up to the kill, and ran on until the placeholder's next
// heartbeat killed it. Its reservation covered that meanwhile.
func (s *Store) extendCharge(id int64, attempt int, finished time.Time) error {
	if finished.IsZero() {
		return nil
	}
	finished = minTime(finished, s.now())
	if d, ok := s.econ.dying[protocol.JobRef{ID: id, Attempt: attempt}]; ok {
		finished = minTime(finished, d.until)
	}
	var started int64
	var secs, price float64
	var q int32
	var site string
	err := s.w.QueryRowContext(context.Background(), `SELECT a.started, c.seconds, c.price, c.queue_id, c.site FROM charges c
		JOIN attempts a ON a.job_id = c.job_id AND a.attempt = c.attempt WHERE c.job_id = ? AND c.attempt = ?`, id, attempt).
		Scan(&started, &secs, &price, &q, &site)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // not charged: neither priced nor costed
	}
	if err != nil {
		return fatalError{err}
	}
	// Charged up to the kill (secs from its start): a lease past it is the
	// most it ran on, also when the report comes after its dying entry
	// expired.
	more := min(finished.Sub(time.UnixMicro(started)).Seconds(), secs+s.opt.Lease.Seconds())
	if more <= secs {
		return nil
	}
	if _, err := s.w.ExecContext(context.Background(), "UPDATE charges SET seconds = ?, cost = ? WHERE job_id = ? AND attempt = ?",
		more, price*more/3600, id, attempt); err != nil {
		return fatalError{err}
	}
	s.addSpent(q, site, price*(more-secs)/3600)
	if d, ok := s.econ.dying[protocol.JobRef{ID: id, Attempt: attempt}]; ok {
		s.unreserve(d.ru, price*(more-secs)/3600)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// setPrice is what a stored site's price became (0: free or gone).
func (s *Store) setPrice(site string, price float64) {
	s.knowSite(site)
	if price > 0 {
		s.econ.price[site] = price
	} else {
		delete(s.econ.price, site)
	}
}

// EconQueues returns what the deadline-and-budget planner needs of every
// queue with a deadline or a budget.
func (s *Store) EconQueues(ctx context.Context) ([]policy.EconQueue, error) {
	var out []policy.EconQueue
	err := s.do(ctx, func() error {
		for _, q := range s.qlist {
			if q.costed() {
				out = append(out, s.econQueue(q))
			}
		}
		return nil
	})
	return out, err
}

// StageQueues is what LP provisioning plans: every queue with jobs not
// ended, as the stages of one pipeline in the order its jobs feed each
// other (stageOrder), and each named site's link in bytes per second
// (measured by staging, else configured).
func (s *Store) StageQueues(ctx context.Context, sites []string) ([]policy.EconQueue, map[string]float64, error) {
	var out []policy.EconQueue
	links := make(map[string]float64, len(sites))
	err := s.do(ctx, func() error {
		var ids []int32
		for _, q := range s.stageOrder() {
			c := s.countsFor(q.id)
			if c[job.Queued]+c[job.Waiting]+c[job.Executing] > 0 {
				out = append(out, s.econQueue(q))
				ids = append(ids, q.id)
			}
		}
		for i := 1; i < len(ids); i++ {
			out[i-1].FeedsNext = s.stages.feeds[[2]int32{ids[i-1], ids[i]}]
		}
		for _, name := range sites {
			links[name] = s.linkOf(name).Bandwidth
		}
		return nil
	})
	return out, links, err
}

// econQueue is queue q as provisioning sees it.
func (s *Store) econQueue(q *queue) policy.EconQueue {
	c := s.countsFor(q.id)
	e := policy.EconQueue{Queue: q.Name, Ready: c[job.Queued], Running: c[job.Executing], Waiting: c[job.Waiting],
		PerJob: map[string]float64{}, Busy: maps.Clone(s.econ.execAt[q.id])}
	if w := s.econ.wrote[q.id]; w != nil && w.n > 0 {
		e.Out = w.bytes / float64(w.n)
	}
	if q.Deadline > 0 {
		e.Deadline = time.Unix(0, int64(q.Deadline*1e9))
	}
	if q.Budget > 0 {
		e.Budget = max(q.Budget-s.econ.spentBy(q.id)-s.econ.reserved[q.id]-s.lastJobSlack(q), 0)
		e.Budgeted = true
	}
	var all runtimes
	for site, r := range s.econ.ran[q.id] {
		if r.n > 0 {
			e.PerJob[site] = r.secs / float64(r.n)
			all.secs += r.secs
			all.n += r.n
		}
	}
	if all.n > 0 {
		e.Est = all.secs / float64(all.n)
	} else if r, ok := q.ready.Peek(); ok {
		if j, ok := s.g.Node(r.ID); ok {
			e.Est = s.data.expect.Estimate(s.g.Name(j.Target), float64(j.Est))
		}
	}
	if e.Est == 0 && q.estN > 0 {
		e.Est = q.estSum / float64(q.estN) // all waiting: what they declared
	}
	if e.Est == 0 {
		e.Est = q.Ceiling
	}
	return e
}

// stageOrder lists the queues so that a queue whose jobs name targets of
// another queue's jobs as prerequisites comes after it (BLAST, then
// Parse); queues unordered by that, or in a cycle of feeds, by creation.
// A target belongs to the queue of its first job. It walks every target
// (a million: tens of milliseconds of the core), so the order is kept
// until a job is added, and then for stageOrderAge while jobs keep coming.
func (s *Store) stageOrder() []*queue {
	key := [2]int64{s.nextID, int64(s.g.NextTargetID())}
	if len(s.stages.order) == len(s.qlist) && (s.stages.key == key || s.now().Sub(s.stages.at) < stageOrderAge) {
		return s.stages.order
	}
	s.stages.at = s.now()
	ids := make(map[int32]int, len(s.qlist)) // queue id -> index in qlist
	for i, q := range s.qlist {
		ids[q.id] = i
	}
	feeds := make([]map[int]bool, len(s.qlist)) // i -> the queues i feeds
	s.stages.feeds = map[[2]int32]bool{}
	in := make([]int, len(s.qlist))
	for t := dag.TargetID(1); t < s.g.NextTargetID(); t++ {
		qt, ok := s.g.TargetQueue(t)
		if !ok {
			continue
		}
		to, ok := ids[qt]
		if !ok {
			continue
		}
		for _, p := range s.g.Prereqs(t) {
			qp, ok := s.g.TargetQueue(p)
			from, known := ids[qp]
			if !ok || !known || from == to {
				continue
			}
			if feeds[from] == nil {
				feeds[from] = map[int]bool{}
			}
			if !feeds[from][to] {
				feeds[from][to] = true
				in[to]++
				s.stages.feeds[[2]int32{qp, qt}] = true
			}
		}
	}
	// Kahn's, the lowest index first; what a cycle leaves, by index.
	order := make([]*queue, 0, len(s.qlist))
	done := make([]bool, len(s.qlist))
	for len(order) < len(s.qlist) {
		next := -1
		for i := range s.qlist {
			if !done[i] && in[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			for i := range s.qlist {
				if !done[i] {
					next = i
					break
				}
			}
		}
		done[next] = true
		order = append(order, s.qlist[next])
		for to := range feeds[next] {
			in[to]--
		}
	}
	s.stages.key, s.stages.order = key, order
	return order
}

// stageOrderAge is how long stageOrder keeps an order while jobs are
// added.
const stageOrderAge = 30 * time.Second

// lastJobSlack is what dispatch asks of the budget beyond a job's
// expected cost: it reserves the queue's ceiling, so the last job to
// start needs price x ceiling left, not price x its runtime. The planner
// prices jobs at their expected cost, so it is given the budget less this
// (at the priced site where it is least), or it would plan jobs dispatch
// will not start.
func (s *Store) lastJobSlack(q *queue) float64 {
	if q.Ceiling <= 0 {
		return 0
	}
	r, ok := q.ready.Peek()
	if !ok {
		return 0 // nothing to plan
	}
	j, ok := s.g.Node(r.ID)
	if !ok {
		return 0
	}
	slack := -1.0
	for site, price := range s.econ.price {
		v := price * max(q.Ceiling-s.expectAt(q, j, site), 0) / 3600
		if slack < 0 || v < slack {
			slack = v
		}
	}
	return max(slack, 0)
}

// SetEconPlan sets how many of a queue's jobs each site may run at once
// (nil: no caps) and how many of its ready jobs the planner found cannot
// end within its deadline and budget.
func (s *Store) SetEconPlan(ctx context.Context, queue string, caps map[string]int, unfinishable int) error {
	return s.do(ctx, func() error {
		q, ok := s.queues[queue]
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "no queue %s", queue)
		}
		if caps == nil {
			delete(s.econ.caps, q.id)
		} else {
			if _, had := s.econ.caps[q.id]; !had {
				if err := s.countRunning(q); err != nil {
					return err
				}
			}
			s.econ.caps[q.id] = caps
		}
		s.econ.unfinishable[q.id] = unfinishable
		return nil
	})
}

// econInfo fills a queue's spending for listings.
func (s *Store) econInfo(q *queue) protocol.QueueInfo {
	info := q.QueueInfo
	if m := s.econ.spent[q.id]; len(m) > 0 {
		info.SpentBySite = make(map[string]float64, len(m))
		for site, v := range m {
			info.SpentBySite[site] = v
			info.Spent += v
		}
	}
	info.Reserved = s.econ.reserved[q.id]
	info.Unfinishable = s.econ.unfinishable[q.id]
	info.Infeasible = s.econ.infeasibleN[q.id]
	info.OverBudget = s.econ.overBudget[q.id]
	return info
}

// runtimes adds up attempts' seconds.
type runtimes struct {
	secs float64
	n    int
}

type wrote struct {
	bytes float64
	n     int
}

// noteWrote counts bytes a Done job of queue q wrote (jobDone: the
// sizes its placeholder reported, else those it declared).
func (s *Store) noteWrote(q int32, bytes float64) {
	w := s.econ.wrote[q]
	if w == nil {
		w = &wrote{}
		s.econ.wrote[q] = w
	}
	w.bytes += bytes
	w.n++
	s.econ.dirtyWrote[q] = true
}
