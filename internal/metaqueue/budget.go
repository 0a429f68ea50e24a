package metaqueue

import (
	"time"

	"github.com/mq-hpc/mq/internal/dag"
)

// The ledger's rules at dispatch: whether a costed queue's job may start
// at a site now (its budget, its deadline, the planner's cap there).

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
