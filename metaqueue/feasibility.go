package metaqueue

import (
	"github.com/mq-hpc/mq/dag"
	"github.com/mq-hpc/mq/policy"
)

// A feasibility check says whether a ready job may go to the placeholder
// asking now. Both picks (pickFrom for ordered queues, pickDC for dc
// queues) run a chain of them in order, the first that says no deciding,
// so a new constraint on where a job can run is one more check in the
// chains below.

// verdict is a feasibility check's answer.
type verdict uint8

const (
	feasible verdict = iota
	// held: the job leaves the heap and something else gives it back (its
	// array when a member stops, the deadline check when it becomes
	// feasible). A held job does not count against policy.Window.
	held
	// aside: not for this placeholder now; back on the heap once the
	// request is served. It counts as examined.
	aside
)

// asking is ready job r (j in the graph) of queue q, examined for the
// placeholder of p. Passed by value: a pointer through a func value would
// put one on the heap per job examined.
type asking struct {
	q *queue
	r policy.Ready
	j dag.Node
	p *parkedNext
}

// feasibility is one check. A check that holds a job comes before any
// that sets one aside: a held job is not examined.
type feasibility func(s *Store, a asking) (verdict, error)

var (
	// orderedChecks are the checks of an ordered queue's pick.
	orderedChecks = []feasibility{heldByArray, parkedInfeasible, fitsWalltime, keptForPlan, withinBudget, inputsHere}
	// dcChecks are the checks of a dc queue's pick: DC weighs where the
	// inputs are itself, and DC queues are not planned.
	dcChecks = []feasibility{heldByArray, fitsWalltime, withinBudget}
)

// feasible runs checks over a in order and returns the first verdict
// other than feasible (with the error of a check that failed: then aside).
func (s *Store) feasible(checks []feasibility, a asking) (verdict, error) {
	for _, check := range checks {
		if v, err := check(s, a); v != feasible || err != nil {
			return v, err
		}
	}
	return feasible, nil
}

// heldByArray holds a job while its array has its limit of members
// executing, until one stops.
func heldByArray(s *Store, a asking) (verdict, error) {
	if len(s.arrays.limited) > 0 && s.capped(a.r.ID) {
		return held, nil
	}
	return feasible, nil
}

// parkedInfeasible holds a job no site can end by its queue's deadline:
// off the heap until one can.
func parkedInfeasible(s *Store, a asking) (verdict, error) {
	if s.park(a.q, a.r) {
		return held, nil
	}
	return feasible, nil
}

// fitsWalltime sets aside a job expected to outlast the placeholder.
func fitsWalltime(s *Store, a asking) (verdict, error) {
	if !fits(a.j.Est, a.q, a.p.req.WalltimeLeft) {
		return aside, nil
	}
	return feasible, nil
}

// keptForPlan sets aside a job a plan leaves to another site.
func keptForPlan(s *Store, a asking) (verdict, error) {
	if len(s.plans.job) > 0 && s.keepForPlan(a.r.ID, a.p.site) {
		return aside, nil
	}
	return feasible, nil
}

// withinBudget sets aside a job the placeholder's site may not start now:
// past the deadline there, at the planner's cap, or over budget.
func withinBudget(s *Store, a asking) (verdict, error) {
	if !s.affordable(a.q, a.j, a.p.site) {
		return aside, nil
	}
	return feasible, nil
}

// inputsHere sets aside a job whose inputs are not yet at the
// placeholder's place (asking for them), so the placeholder gets other
// ready work meanwhile.
func inputsHere(s *Store, a asking) (verdict, error) {
	here, err := s.dataReady(a.r.ID, a.p)
	if err != nil || !here {
		return aside, err
	}
	return feasible, nil
}
