// Package dispatch is the dispatch decision: which of a queue's ready jobs
// a placeholder asking for work gets. The policy orders the jobs (a
// policy.Heap) or chooses among them (a policy.Chooser); a chain of
// feasibility checks says which of them may go to this placeholder now,
// the way nomad's scheduler runs its feasibility checkers over a snapshot
// before ranking. The decision is pure: no SQL, no clock, no goroutines.
// The live CLS (internal/metaqueue) and the simulator (internal/sim) each
// call it through their own view of the world, a World, so both decide by
// one rule; a test Harness drives it over a hand-built world.
package dispatch

import (
	"math/bits"
	"strconv"

	"github.com/mq-hpc/mq/internal/policy"
)

// Check is one feasibility check: whether a ready job may go to the
// placeholder asking now. The checks are a closed set the World switches
// on, not func values: a call through a func value costs the picks, which
// run the chain for every job examined, 5-10 % (BenchmarkDCDecision).
// Adding a constraint is adding a Check here (in the order it runs, with
// whether it holds) and the case that answers it in each World.
type Check uint8

const (
	// HeldByArray holds a job while its array has its limit of members
	// executing, until one stops.
	HeldByArray Check = iota
	// ParkedInfeasible holds a job no site can end by its queue's
	// deadline: off the heap until one can.
	ParkedInfeasible
	// FitsWalltime sets aside a job expected to outlast the placeholder.
	FitsWalltime
	// FitsResources sets aside a job whose cores, memory, GPUs and named
	// amounts are not free on the placeholder now, or that would delay a
	// starving job the placeholder is reserved for (the fit rule is
	// package resource's, which the World applies).
	FitsResources
	// KeptForPlan sets aside a job a plan leaves to another site.
	KeptForPlan
	// WithinBudget sets aside a job the placeholder's site may not start
	// now: past the deadline there, at the planner's cap, or over budget.
	WithinBudget
	// InputsHere sets aside a job whose inputs are not yet at the
	// placeholder's place (asking for them within MayStage's bound), so
	// the placeholder gets other ready work meanwhile.
	InputsHere

	numChecks
)

var checkNames = [numChecks]string{"heldByArray", "parkedInfeasible", "fitsWalltime", "fitsResources", "keptForPlan", "withinBudget", "inputsHere"}

// holds lists the checks whose "no" takes a job off the heap (Held);
// every other check's "no" sets it aside.
var holds = [numChecks]bool{HeldByArray: true, ParkedInfeasible: true}

func (c Check) String() string {
	if c < numChecks {
		return checkNames[c]
	}
	return "check(" + strconv.Itoa(int(c)) + ")"
}

// Holds says whether a job this check refuses leaves the heap (Held)
// rather than waiting aside.
func (c Check) Holds() bool { return c < numChecks && holds[c] }

// Chain is a set of checks. They run in the order the Checks are
// declared, which puts every check that holds a job before any that sets
// one aside: a held job is not examined.
type Chain uint32

// The chains of the two kinds of pick.
const (
	// Ordered is the chain of an ordered queue's pick (First).
	Ordered Chain = 1<<HeldByArray | 1<<ParkedInfeasible | 1<<FitsWalltime | 1<<FitsResources | 1<<KeptForPlan | 1<<WithinBudget | 1<<InputsHere
	// Choosing is the chain of a choosing queue's pick (Examine): the
	// chooser weighs where the inputs are itself, and choosing queues
	// are not planned.
	Choosing Chain = 1<<HeldByArray | 1<<FitsWalltime | 1<<FitsResources | 1<<WithinBudget
	// All is every check: a World's tests ask it each one.
	All Chain = 1<<numChecks - 1
)

// Has says whether c is in the chain.
func (ch Chain) Has(c Check) bool { return ch&(1<<c) != 0 }

// Skip is the chain of the checks c whose idle[c] is true: those a world
// knows cannot refuse any job of one pick (no limit, budget or plan is
// set, no job asks for resources), so that the pick does not ask them of
// each job it examines (chain &^ Skip(idle)). A check the world does not
// answer for is asked.
func Skip(idle [numChecks]bool) Chain {
	var ch Chain
	for c, no := range idle {
		if no {
			ch |= 1 << c
		}
	}
	return ch
}

// Checks lists the chain's checks in the order they run.
func (ch Chain) Checks() []Check {
	var out []Check
	for c := range numChecks {
		if ch.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Verdict is the chain's answer for one job.
type Verdict uint8

const (
	// Feasible: the job may go to the asking placeholder.
	Feasible Verdict = iota
	// Held: the job leaves the heap and something else gives it back (its
	// array when a member stops, the deadline check when it becomes
	// feasible). A held job does not count against policy.Window.
	Held
	// Aside: not for this placeholder now; back on the heap once the
	// request is served. It counts as examined.
	Aside
)

var verdictNames = [...]string{"feasible", "held", "aside"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// World is a caller's view of the world for one asking placeholder.
type World interface {
	// Current says whether heap entry r still stands for a ready job: a
	// heap keeps entries that went stale (the job was dispatched or
	// re-waited through another path). Allows is then asked about r.
	Current(r policy.Ready) bool
	// Allows answers check c for ready job r: whether c lets it go to
	// the asking placeholder. An error refuses it (then set aside) and
	// ends the decision. A world that does not model a check allows it.
	Allows(c Check, r policy.Ready) (bool, error)
}

// Ready is a queue's ready jobs in its policy's order: a *policy.Heap, or
// a world's own list (Push then puts back what Pop gave).
type Ready interface {
	Pop() (policy.Ready, bool)
	Push(policy.Ready)
}

var _ Ready = (*policy.Heap)(nil)

// Need is how long a job is expected to take: its estimate est, else its
// queue's ceiling (0: unknown).
func Need(est float32, ceiling float64) float64 {
	if est > 0 {
		return float64(est)
	}
	return ceiling
}

// Fits is the FitsWalltime check's rule: a job needing Need(est, ceiling)
// ends within a placeholder's remaining walltime (0: no limit).
func Fits(est float32, ceiling, walltime float64) bool {
	return walltime <= 0 || Need(est, ceiling) <= walltime
}

// Run runs chain over ready job r and returns the first verdict
// other than Feasible (with the error of a check that failed: then Aside).
func Run(w World, chain Chain, r policy.Ready) (Verdict, error) {
	for rest := chain & All; rest != 0; rest &= rest - 1 {
		c := Check(bits.TrailingZeros32(uint32(rest)))
		if ok, err := w.Allows(c, r); !ok || err != nil {
			return refused(c, err), err
		}
	}
	return Feasible, nil
}

// refused is the verdict on a job check c refused (with err: it failed).
func refused(c Check, err error) Verdict {
	if err == nil && holds[c] {
		return Held
	}
	return Aside
}

// Scratch is memory a caller keeps from one pick to the next, so that a
// pick allocates nothing; the zero value is ready to use.
type Scratch struct {
	aside []policy.Ready
}

// First is an ordered queue's pick: it pops q in the policy's order and
// returns the first job chain lets go to the asking placeholder, looking
// at no more than policy.Window jobs (held and stale ones not counted).
// Jobs set aside go back on q before it returns; held ones stay off. sc
// is the caller's scratch (not nil).
func First(w World, q *policy.Heap, chain Chain, sc *Scratch) (r policy.Ready, ok bool, err error) {
	later := sc.aside[:0]
	defer func() {
		for _, r := range later {
			q.Push(r)
		}
		sc.aside = later[:0]
	}()
	for examined := 0; examined < policy.Window; {
		r, ok := q.Pop()
		if !ok {
			return policy.Ready{}, false, nil
		}
		if !w.Current(r) {
			continue // stale entry
		}
		v, err := Run(w, chain, r)
		if v == Held {
			continue
		}
		examined++
		if v == Aside {
			later = append(later, r)
			if err != nil {
				return policy.Ready{}, false, err
			}
			continue
		}
		return r, true, nil
	}
	return policy.Ready{}, false, nil
}

// Examine is a choosing queue's look at its jobs: it pops q in order, at
// most policy.Window examined (held and stale ones not counted), and
// offers each that chain lets go to take, which makes it a candidate or
// not and says whether it goes back on q after the decision (a job take
// drops is given back by whoever dropped it). It returns popped with the
// jobs to put back appended: those set aside and those take kept. The
// caller puts them back (Restore) once it has decided. An error ends the
// look; the jobs popped are then returned as far as they go.
func Examine(w World, q Ready, chain Chain, popped []policy.Ready, take func(policy.Ready) (back bool, err error)) ([]policy.Ready, error) {
	// A chooser chooses among the highest priority present (mqsub
	// --priority): the heap gives it first, and the first job of a lower
	// one ends the look.
	var top int16
	some := false
	for examined := 0; examined < policy.Window; {
		r, ok := q.Pop()
		if !ok {
			break
		}
		if !w.Current(r) {
			continue // stale entry
		}
		v, err := Run(w, chain, r)
		if err != nil {
			return popped, err
		}
		if v == Held {
			continue
		}
		if some && r.Priority < top {
			popped = append(popped, r)
			break
		}
		examined++
		if v == Aside {
			popped = append(popped, r)
			continue
		}
		top, some = r.Priority, true
		back, err := take(r)
		if err != nil {
			return popped, err
		}
		if back {
			popped = append(popped, r)
		}
	}
	return popped, nil
}

// Restore puts the jobs Examine popped back on q, all but chosen (0:
// none was chosen).
func Restore(q Ready, popped []policy.Ready, chosen int64) {
	for _, r := range popped {
		if r.ID != chosen || chosen == 0 {
			q.Push(r)
		}
	}
}
