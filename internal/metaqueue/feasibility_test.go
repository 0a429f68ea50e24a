package metaqueue

import (
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A job that does not fit the placeholder's walltime is set aside by
// either chain; one that fits passes every check of a store with no
// arrays, deadlines, plans or staging.
func TestFeasibleWalltime(t *testing.T) {
	s := &Store{}
	q := &queue{}
	for _, c := range []struct {
		est, walltime float64
		want          verdict
	}{
		{10, 0, feasible}, // unlimited
		{10, 20, feasible},
		{10, 5, aside},
	} {
		a := &asking{q: q, j: dag.Node{Est: float32(c.est), State: job.Queued},
			p: &parkedNext{req: protocol.Next{WalltimeLeft: c.walltime}}}
		for _, chain := range [][]feasibility{orderedChecks, dcChecks} {
			if v, err := s.feasible(chain, a); v != c.want || err != nil {
				t.Errorf("est %g, walltime %g, %v: got %v, %v; want %v", c.est, c.walltime, chain, v, err, c.want)
			}
		}
	}
}

// The two picks run their checks in one order: the dc chain is the ordered
// chain less the checks DC does without, and the checks that hold a job
// come before those that set one aside.
func TestFeasibilityChainsAgree(t *testing.T) {
	i := 0
	for _, f := range dcChecks {
		for i < len(orderedChecks) && orderedChecks[i] != f {
			i++
		}
		if i == len(orderedChecks) {
			t.Fatalf("dc check %v is not in the ordered chain, or out of its order", f)
		}
	}
	var names []string
	for _, f := range orderedChecks {
		names = append(names, f.String())
	}
	if got := strings.Join(names, " "); got != "heldByArray parkedInfeasible fitsWalltime fitsResources keptForPlan withinBudget inputsHere" {
		t.Errorf("ordered chain %s", got)
	}
}
