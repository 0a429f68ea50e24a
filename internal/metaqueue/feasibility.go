package metaqueue

import (
	"strconv"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
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
// placeholder of p.
type asking struct {
	q *queue
	r policy.Ready
	j dag.Node
	p *parkedNext
}

// feasibility names one check. The checks are a closed set switched on in
// check, not func values: a call through a func value costs the picks,
// which run the chain for every job examined, 5-10 % (measured on
// BenchmarkDCDecision), and would put each job examined on the heap.
type feasibility uint8

const (
	// heldByArray holds a job while its array has its limit of members
	// executing, until one stops.
	heldByArray feasibility = iota
	// parkedInfeasible holds a job no site can end by its queue's
	// deadline: off the heap until one can.
	parkedInfeasible
	// fitsWalltime sets aside a job expected to outlast the placeholder.
	fitsWalltime
	// fitsResources sets aside a job whose cores, memory, GPUs and named
	// amounts are not free on the placeholder now (or that a starving job
	// reserved it against).
	fitsResources
	// keptForPlan sets aside a job a plan leaves to another site.
	keptForPlan
	// withinBudget sets aside a job the placeholder's site may not start
	// now: past the deadline there, at the planner's cap, or over budget.
	withinBudget
	// inputsHere sets aside a job whose inputs are not yet at the
	// placeholder's place (asking for them), so the placeholder gets other
	// ready work meanwhile.
	inputsHere
)

var feasibilityNames = [...]string{"heldByArray", "parkedInfeasible", "fitsWalltime", "fitsResources", "keptForPlan", "withinBudget", "inputsHere"}

func (f feasibility) String() string {
	if int(f) < len(feasibilityNames) {
		return feasibilityNames[f]
	}
	return "feasibility(" + strconv.Itoa(int(f)) + ")"
}

// The chains, in the order they run. A check that holds a job comes
// before any that sets one aside: a held job is not examined.
var (
	// orderedChecks are the checks of an ordered queue's pick.
	orderedChecks = []feasibility{heldByArray, parkedInfeasible, fitsWalltime, fitsResources, keptForPlan, withinBudget, inputsHere}
	// dcChecks are the checks of a dc queue's pick: DC weighs where the
	// inputs are itself, and DC queues are not planned.
	dcChecks = []feasibility{heldByArray, fitsWalltime, fitsResources, withinBudget}
)

// feasible runs checks over a in order and returns the first verdict
// other than feasible (with the error of a check that failed: then aside).
func (s *Store) feasible(checks []feasibility, a *asking) (verdict, error) {
	for _, f := range checks {
		if v, err := s.check(f, a); v != feasible || err != nil {
			return v, err
		}
	}
	return feasible, nil
}

// check runs feasibility check f over a.
func (s *Store) check(f feasibility, a *asking) (verdict, error) {
	switch f {
	case heldByArray:
		if len(s.arrays.limited) > 0 && s.capped(a.r.ID) {
			return held, nil
		}
	case parkedInfeasible:
		if s.ledger.Park(a.q.id, a.r) {
			return held, nil
		}
	case fitsWalltime:
		if !fits(a.j.Est, a.q, a.p.req.WalltimeLeft) {
			return aside, nil
		}
	case fitsResources:
		if !s.packFits(a.r.ID, a.p) {
			return aside, nil
		}
	case keptForPlan:
		if s.plans.Active() && s.plans.Keep(a.r.ID, a.p.site, s.now()) {
			return aside, nil
		}
	case withinBudget:
		if !s.ledger.Affordable(a.q.account(), a.j, a.p.site, s.now, s.guess) {
			return aside, nil
		}
	case inputsHere:
		here, err := s.dataReady(a.r.ID, a.p)
		if err != nil || !here {
			return aside, err
		}
	default:
		panic("metaqueue: unknown feasibility check " + f.String())
	}
	return feasible, nil
}
