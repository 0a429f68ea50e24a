// Package policy decides which ready job a placeholder gets. A policy is a
// pure function of what it is shown, so the live CLS and the simulator run
// the same code.
package policy

// Window is how many of a queue's ready jobs, in the policy's order, one
// live decision examines for one that fits the asking placeholder (its
// walltime, its data, its plan): the CLS and the simulator's model of it
// look as far.
const Window = 128

// Ready is a job that may run now, as a policy sees it.
type Ready struct {
	ID  int64   // submission order: lower is older
	Est float32 // expected runtime in seconds; 0 = unknown
	// Prio is a rank the keeper of the DAG computes for orderings that
	// need one (CP: the job's b-level in seconds); 0 otherwise.
	Prio float32
	// Priority is the job's own (mqsub --priority): every ordering runs a higher
	// one first, whatever its own keys say (byPriority).
	Priority int16
}

// byPriority is every ordering's first key: it reports whether a's
// priority differs from b's and, if so, whether a goes first.
func byPriority(a, b Ready) (differ, less bool) {
	return a.Priority != b.Priority, a.Priority > b.Priority
}

// Ordering is a policy that ranks ready jobs by a fixed order, so the
// metaqueue can keep them in a heap and pick in O(log n).
type Ordering interface {
	Name() string
	// Less reports whether a should run before b.
	Less(a, b Ready) bool
}

// FCFS runs the oldest ready job first (of the highest priority).
type FCFS struct{}

func (FCFS) Name() string { return "fcfs" }

// byArrival marks FCFS and the orders that are FCFS under another name
// (dc, sa, wqr, xsufferage): a Heap of any of them compares packed keys
// alone instead of calling Less.
func (FCFS) byArrival() {}

func (FCFS) Less(a, b Ready) bool {
	if differ, less := byPriority(a, b); differ {
		return less
	}
	return a.ID < b.ID
}

// SJF runs the shortest expected job first (of the highest priority);
// jobs with no estimate go last, oldest first among equals.
type SJF struct{}

func (SJF) Name() string { return "sjf" }
func (SJF) Less(a, b Ready) bool {
	if differ, less := byPriority(a, b); differ {
		return less
	}
	switch {
	case a.Est == b.Est:
		return a.ID < b.ID
	case a.Est == 0:
		return false
	case b.Est == 0:
		return true
	}
	return a.Est < b.Est
}
