package dispatch

import (
	"cmp"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
)

// Placement is what a world answers about where a job's inputs are,
// seen from the asking placeholder's place. A job id stands for what goes
// with it (its bundle) as the world sees it.
type Placement interface {
	// InputsPresent says, asking for nothing, whether job id's inputs
	// are all at the asking placeholder's place.
	InputsPresent(id int64) bool
	// InputsAt says the same; when not, it asks for the missing ones and
	// marks the job as staging to that place. A job marked to another
	// place is not ready here.
	InputsAt(id int64) (bool, error)
}

// MayStage is the InputsHere rule's bound: whether a pick may ask for a
// job's missing inputs at the asking placeholder's place, given whether
// some place is bringing them already (marked: its transfers keep going)
// and how many jobs' inputs are being brought there (markedHere). It asks
// for no more jobs than the placeholder has free slots, at least one:
// staging every job examined (up to the window) moved files for jobs that
// other places, holding their data, then ran (BENCHMARKS.md, "FCFS vs
// DC, live and simulated"). A job it may not stage is still ready if its
// inputs are all here; one it may is asked for (Placement.InputsAt).
func MayStage(marked bool, markedHere, free int) bool {
	return marked || markedHere < max(free, 1)
}

// ChoosePatience is how long a ready job of a queue whose chooser has no
// queue-time term of its own (xsufferage) may be held by "wait" decisions
// before a placeholder that asks gets it anyway.
const ChoosePatience = 10 * time.Second

// Patience is how long, in seconds, Choose lets policy p's chooser keep a
// job waiting: ChoosePatience for a chooser without a queue-time term
// (DC has one, and needs none), else 0.
func Patience(p policy.Info) float64 {
	if p.NewDC != nil {
		return 0
	}
	return ChoosePatience.Seconds()
}

// Choice is what Choose decided.
type Choice struct {
	policy.Decision
	// Staging is the chooser's first choice when its inputs were not at
	// the asking placeholder's place and were asked for there (Staged):
	// the Decision is then another candidate, or Wait.
	Staging policy.Decision
	Staged  bool
}

// Choose asks ch for one of cands (at least one) for the asking
// placeholder, snap saying where it is and who else will ask. A choice
// whose inputs are not at the placeholder's place is staged there
// (pl.InputsAt asks for them) and the placeholder meanwhile gets ch's
// choice among the other candidates whose inputs are there already, or
// waits. With patience > 0 (see Patience) a wait gives the placeholder
// the oldest candidate (lowest id) anyway once it has waited patience
// seconds, if its inputs are here: a predicted placeholder that does not
// come must not hold a job forever.
func Choose(ch policy.Chooser, snap policy.Snapshot, cands []policy.Candidate, pl Placement, patience float64) (Choice, error) {
	snap.Ready = slices.Values(cands)
	c := Choice{Decision: ch.Choose(snap)}
	if !c.Wait {
		here, err := pl.InputsAt(c.Job.ID)
		if err != nil {
			return Choice{}, err
		}
		if !here {
			c.Staging, c.Staged = c.Decision, true
			chosen := c.Job.ID
			rest := slices.DeleteFunc(slices.Clone(cands), func(cd policy.Candidate) bool {
				return cd.ID == chosen || !pl.InputsPresent(cd.ID)
			})
			c.Decision = policy.Decision{Wait: true}
			if len(rest) > 0 {
				snap.Ready = slices.Values(rest)
				c.Decision = ch.Choose(snap)
			}
		}
	}
	if c.Wait && patience > 0 {
		oldest := slices.MinFunc(cands, func(a, b policy.Candidate) int { return cmp.Compare(a.ID, b.ID) })
		if oldest.QueueTime >= patience && pl.InputsPresent(oldest.ID) {
			c.Decision = policy.Decision{Job: oldest}
		}
	}
	return c, nil
}

// Shapes says which placeholders could hold which jobs (the packing
// module's classes, packing.Packing.Class): the choosers price a job only
// at the arrivals of placeholders that could hold it (policy.Snapshot.Holds).
type Shapes interface {
	// AnyAsks says whether any job asks for resources; when none does,
	// every placeholder holds every job and no class is asked.
	AnyAsks() bool
	Class(ph int64) int32
	HoldsClass(class int32, id int64) bool
}

// Shaped gives snap's arrivals their classes (from their Placeholder) and
// snap.Holds from sh, when any job asks for resources; a candidate's id is
// the job sh knows. The CLS and mqsim both price through it.
func Shaped(snap policy.Snapshot, sh Shapes) policy.Snapshot {
	if sh == nil || !sh.AnyAsks() {
		return snap
	}
	for i := range snap.Future {
		snap.Future[i].Class = sh.Class(snap.Future[i].Placeholder)
	}
	snap.Holds = func(class int32, c policy.Candidate) bool { return sh.HoldsClass(class, c.ID) }
	return snap
}
