package policy

// CP runs first the ready job with the longest remaining chain of work
// behind it: its b-level (upward rank), its own expected runtime plus the
// largest b-level of the jobs that need it, carried in Ready.Prio by
// whoever keeps the DAG (the metaqueue, the simulator). Among equals the
// older job goes first. Jobs with no estimate count as UnknownRuntime.
// A job's own priority comes before all that.
type CP struct{}

func (CP) Name() string { return "cp" }
func (CP) Less(a, b Ready) bool {
	if differ, less := byPriority(a, b); differ {
		return less
	}
	if a.Prio != b.Prio {
		return a.Prio > b.Prio
	}
	return a.ID < b.ID
}

// UnknownRuntime is the runtime in seconds a b-level counts for a job with
// neither a declared nor a learned estimate.
const UnknownRuntime = 1

// Runtime is est, or UnknownRuntime if est is unknown (0).
func Runtime(est float64) float64 {
	if est > 0 {
		return est
	}
	return UnknownRuntime
}

// BLevels returns every job's b-level in a DAG of len(prereqs) jobs: job
// i needs the jobs prereqs[i] and is expected to run Runtime(est[i])
// seconds. It costs O(jobs + edges). ok is false if the jobs form a cycle.
func BLevels(est []float64, prereqs [][]int32) (b []float64, ok bool) {
	w := make([]float64, len(est))
	for i, e := range est {
		w[i] = Runtime(e)
	}
	return Levels(w, prereqs)
}

// Levels is BLevels with exact weights: node i weighs w[i] (0 counts as
// nothing) and its level is w[i] plus the largest level among the nodes
// that list i in their prereqs. Given the graph reversed (prereqs[i]
// naming the nodes that need i), a node's level is the longest chain of
// weights ending with it: the metaqueue's earliest ends (metaqueue/ledger/infeasible.go).
func Levels(w []float64, prereqs [][]int32) (b []float64, ok bool) {
	n := len(prereqs)
	users := make([]int32, n) // dependents not yet ranked
	for _, ps := range prereqs {
		for _, p := range ps {
			users[p]++
		}
	}
	down := make([]float64, n) // largest level among dependents
	b = make([]float64, n)
	stack := make([]int32, 0, n)
	for i, u := range users {
		if u == 0 {
			stack = append(stack, int32(i))
		}
	}
	ranked := 0
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ranked++
		b[j] = w[j] + down[j]
		for _, p := range prereqs[j] {
			down[p] = max(down[p], b[j])
			if users[p]--; users[p] == 0 {
				stack = append(stack, p)
			}
		}
	}
	return b, ranked == n
}
