package metaqueue

import (
	"context"
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

// readyOf is q's heap entries, left on the heap.
func readyOf(q *queue) []policy.Ready {
	var out []policy.Ready
	for r, ok := q.ready.Pop(); ok; r, ok = q.ready.Pop() {
		out = append(out, r)
	}
	for _, r := range out {
		q.ready.Push(r)
	}
	return out
}

// A pick does not ask the checks its store says cannot refuse any of its
// jobs (asking.idle): for every setting that makes one check able to
// refuse, the chain without the idle checks gives every ready job the
// verdict the whole chain gives, the check that can refuse is not idle,
// and where refuse says so it does refuse some job. With nothing set,
// every check is idle.
func TestIdleChecksAgree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		set      func(e *env) int64 // submits and registers; returns the asking placeholder
		walltime float64
		live     dispatch.Check // the check set to refuse (255: none)
		refuse   bool
		staging  bool // a store with a stager (newStagingEnv)
	}{
		{"nothing set", func(e *env) int64 { e.submit(spec("t", "a"), spec("t", "b")); return e.register("s") }, 0, dispatch.Check(255), false, false},
		{"walltime", func(e *env) int64 {
			js := spec("t", "long")
			js.Est = 100
			e.submit(js, spec("t", "short"))
			return e.register("s")
		}, 50, dispatch.FitsWalltime, true, false},
		{"array limit", func(e *env) int64 {
			e.submitArray("arr", 4, 1)
			e.next(e.register("s"), 1) // one member executes: the others are held
			return e.register("s")
		}, 0, dispatch.HeldByArray, true, false},
		{"resources asked", func(e *env) int64 {
			e.submit(asks("big", protocol.Resources{CPUs: 4}), spec("t", "small"))
			return e.registerSized("s", protocol.Capacity{CPUs: 2})
		}, 0, dispatch.FitsResources, true, false},
		{"placeholder pool", func(e *env) int64 {
			e.submit(spec("t", "a"))
			return e.registerSized("s", protocol.Capacity{CPUs: 2})
		}, 0, dispatch.FitsResources, false, false},
		{"deadline passed", func(e *env) int64 {
			if _, err := e.s.SetQueue(context.Background(), protocol.QueueSet{Name: "late", Deadline: new(1.0)}); err != nil {
				e.t.Fatal(err)
			}
			js := spec("t", "a")
			js.Queue = "late"
			e.submit(js)
			return e.register("s")
		}, 0, dispatch.WithinBudget, true, false},
		{"plan", func(e *env) int64 {
			id := e.submit(spec("t", "a"), spec("t", "b"))
			if _, err := e.s.Plans().Set(context.Background(), "heft", policy.Plan{Site: map[int64]string{id[0]: "b"}, Order: id[:1]}); err != nil {
				e.t.Fatal(err)
			}
			return e.register("a")
		}, 0, dispatch.KeptForPlan, false, false},
		{"inputs elsewhere", func(e *env) int64 {
			e.submit(withFiles("a", "blast", []protocol.File{userIn("/w/seqs/p1.fa", 10)}, nil), spec("t", "none"))
			return e.registerAt("siteB", "b1")
		}, 0, dispatch.InputsHere, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e *env
			if e = newEnv(t); c.staging {
				e, _ = newStagingEnv(t)
			}
			ph := c.set(e)
			p := &parkedNext{req: protocol.Next{Placeholder: ph, Free: 1, WalltimeLeft: c.walltime}, reply: &protocol.NextReply{}}
			refused := false
			err := e.s.do(context.Background(), func() error {
				s := e.s
				s.pack.Begin(s.now(), ph, 1)
				for _, q := range s.qlist {
					a := s.asking(q, p)
					idle := a.idle()
					if c.live == dispatch.Check(255) && idle != dispatch.All {
						t.Errorf("queue %s: idle %v; want every check", q.Name, idle.Checks())
					}
					if idle.Has(c.live) {
						t.Errorf("queue %s: %v idle; want it asked", q.Name, c.live)
					}
					for _, r := range readyOf(q) {
						if !a.Current(r) {
							continue
						}
						for _, chain := range []dispatch.Chain{dispatch.Ordered, dispatch.Choosing} {
							whole, err1 := dispatch.Run(a, chain, r)
							fast, err2 := dispatch.Run(a, chain&^idle, r)
							if whole != fast || err1 != nil || err2 != nil {
								t.Errorf("queue %s, job %d, %v: whole chain %v (%v), idle skipped %v (%v)", q.Name, r.ID, chain.Checks(), whole, err1, fast, err2)
							}
							refused = refused || whole != dispatch.Feasible
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.refuse && !refused {
				t.Errorf("no job refused; want %v to refuse one", c.live)
			}
		})
	}
}
