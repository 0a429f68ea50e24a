package ledger

import (
	"time"

	"github.com/mq-hpc/mq/internal/dag"
)

// The ledger's rules at dispatch: whether a costed queue's job may start
// at a site now (its budget, its deadline, the planner's cap there).

// expectAt is how long job j of queue q is expected to run at site
// (estimateAt), else the queue's ceiling; 0: unknown.
func (l *Ledger) expectAt(q Queue, j dag.Node, site string, est Estimator) float64 {
	if e := l.estimateAt(q, j, site, est); e > 0 {
		return e
	}
	return q.Ceiling
}

// estimateAt is how long job j of queue q is expected to run at site: the
// queue's mean there, else the job's declared or learned (per target)
// runtime (est), else the queue's mean anywhere; 0: unknown. Not the
// ceiling, which bounds a runtime but does not estimate it.
func (l *Ledger) estimateAt(q Queue, j dag.Node, site string, est Estimator) float64 {
	if r := l.ran[q.ID][site]; r != nil && r.n > 0 {
		return r.mean()
	}
	if e := est(j); e > 0 {
		return e
	}
	var all runtimes
	for _, r := range l.ran[q.ID] {
		all.secs += r.secs
		all.n += r.n
	}
	if all.n > 0 {
		return all.mean()
	}
	return 0
}

// reserveFor is what an attempt of j at site reserves of q's budget: the
// site's price times the queue's ceiling (a job is killed past it), else
// times its expected runtime; unknown (0) when neither is known.
func (l *Ledger) reserveFor(q Queue, j dag.Node, site string, est Estimator) float64 {
	price := l.price[site]
	bound := q.Ceiling
	if bound <= 0 {
		bound = l.expectAt(q, j, site, est)
	}
	return price * bound / 3600
}

// Affordable says whether a placeholder at site may start an attempt of
// job j of q now (the core's clock says when: a first run, a retry or a
// copy alike): it can end by
// the queue's deadline there (inTime), the planner's cap for the site is
// not reached, and the budget left (less what running attempts reserve)
// covers what it would reserve (for cores: a price is per core-hour). A job whose cost cannot be foreseen (no
// runtime known anywhere) starts at a priced site only while no other of
// its queue runs at one, so its runtime is measured before more are
// risked.
func (l *Ledger) Affordable(q Queue, j dag.Node, site string, now func() time.Time, est Estimator, cores int) bool {
	if !q.Costed() {
		return len(l.caps) == 0 || !l.atCap(q.ID, site)
	}
	if q.Deadline > 0 && !l.inTime(q, j, site, now(), est) {
		return false
	}
	if l.atCap(q.ID, site) {
		return false
	}
	if q.Budget <= 0 || l.price[site] == 0 {
		return true
	}
	need := l.reserveFor(q, j, site, est) * float64(max(cores, 1))
	if need == 0 {
		return l.priced[q.ID] == 0 && l.spentBy(q.ID) < q.Budget
	}
	return l.spentBy(q.ID)+l.reserved[q.ID]+need <= q.Budget*(1+1e-9)
}

// Unbounded says whether Affordable allows every job of q at every site
// now: q has no budget nor deadline and no planner caps it. A pick of q
// need not ask it then.
func (l *Ledger) Unbounded(q Queue) bool { return !q.Costed() && len(l.caps[q.ID]) == 0 }

// atCap says whether site runs as many of queue q's jobs as the
// provisioning plan lets it (deadline-and-budget or LP stage caps).
func (l *Ledger) atCap(q int32, site string) bool {
	caps, ok := l.caps[q]
	if !ok {
		return false
	}
	c, ok := caps[site]
	return ok && l.execAt[q][site] >= c
}

// inTime is the deadline rule at dispatch (seed 002's DBC schedulers
// assign a job only to a resource that can complete it by the deadline):
// an attempt of j starts at site only if now plus its estimated runtime
// there (estimateAt) is no later than q's deadline. With no estimate at
// all, it starts while the deadline is ahead: its runtime is learned
// from it.
func (l *Ledger) inTime(q Queue, j dag.Node, site string, now time.Time, est Estimator) bool {
	left := q.deadline().Sub(now).Seconds()
	if left <= 0 {
		return false
	}
	return l.estimateAt(q, j, site, est) <= left
}

// lastJobSlack is what dispatch asks of the budget beyond a job's
// expected cost: it reserves the queue's ceiling, so the last job to
// start needs price x ceiling left, not price x its runtime. The planner
// prices jobs at their expected cost, so it is given the budget less this
// (at the priced site where it is least), or it would plan jobs dispatch
// will not start. head is the queue's next ready job (nil: none).
func (l *Ledger) lastJobSlack(q Queue, head *dag.Node, est Estimator) float64 {
	if q.Ceiling <= 0 || head == nil {
		return 0 // nothing to plan
	}
	slack := -1.0
	for site, price := range l.price {
		v := price * max(q.Ceiling-l.expectAt(q, *head, site, est), 0) / 3600
		if slack < 0 || v < slack {
			slack = v
		}
	}
	return max(slack, 0)
}
