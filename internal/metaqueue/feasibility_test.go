package metaqueue

import (
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
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
		want          dispatch.Verdict
	}{
		{10, 0, dispatch.Feasible}, // unlimited
		{10, 20, dispatch.Feasible},
		{10, 5, dispatch.Aside},
	} {
		a := &asking{s: s, q: q, j: dag.Node{Est: float32(c.est), State: job.Queued},
			p: &parkedNext{req: protocol.Next{WalltimeLeft: c.walltime}}}
		for _, chain := range []dispatch.Chain{dispatch.Ordered, dispatch.Choosing} {
			if v, err := dispatch.Run(a, chain, policy.Ready{ID: 1}); v != c.want || err != nil {
				t.Errorf("est %g, walltime %g, %v: got %v, %v; want %v", c.est, c.walltime, chain.Checks(), v, err, c.want)
			}
		}
	}
}

// The store answers every check dispatch knows (it panics on one it does
// not): a new check is answered here before it can be put in a chain.
func TestStoreAnswersEveryCheck(t *testing.T) {
	s := &Store{}
	a := &asking{s: s, q: &queue{}, j: dag.Node{State: job.Queued}, p: &parkedNext{}}
	for _, c := range dispatch.All.Checks() {
		if ok, err := a.Allows(c, policy.Ready{ID: 1}); !ok || err != nil {
			t.Errorf("%v of an empty store: %v, %v; want allowed", c, ok, err)
		}
	}
}
