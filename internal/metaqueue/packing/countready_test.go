package packing

import (
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/job"
)

// TestCountReady: a site's demand counts the ready jobs a placeholder of
// its shape and walltime could take (estimate, else the queue's ceiling),
// up to the limit, each at most once, and only live Queued ones; jobs are
// measured one by one only when some job asks for more than a slot.
func TestCountReady(t *testing.T) {
	t.Parallel()
	type ready struct {
		id  int64
		est float32
		req resource.Request
	}
	cores16 := resource.Capacity{CPUs: 16}
	for _, tc := range []struct {
		name    string
		jobs    []ready
		extra   []int64 // heap entries of jobs also pushed: again, or not live
		ceiling float64
		d       Demand
		want    int     // jobs counted
		cores   float64 // Need.Cores.Sum
	}{
		{"slots by count", []ready{{1, 0, resource.Request{}}, {2, 0, resource.Request{}}, {3, 0, resource.Request{}}}, nil, 0,
			Demand{Shape: cores16, Limit: 100}, 3, 3.0 / 16},
		{"the limit", []ready{{1, 0, resource.Request{}}, {2, 0, resource.Request{}}, {3, 0, resource.Request{}}}, nil, 0,
			Demand{Limit: 2}, 2, 0},
		{"walltime: estimate, else ceiling", []ready{{1, 10, resource.Request{}}, {2, 100, resource.Request{}}, {3, 0, resource.Request{}}}, nil, 50,
			Demand{Walltime: 60, Limit: 100}, 2, 0},
		{"walltime below the ceiling", []ready{{1, 10, resource.Request{}}, {2, 0, resource.Request{}}}, nil, 120,
			Demand{Walltime: 60, Limit: 100}, 1, 0},
		{"no estimate nor ceiling fits", []ready{{1, 0, resource.Request{}}}, nil, 0,
			Demand{Walltime: 60, Limit: 100}, 1, 0},
		{"a job pushed twice counts once", []ready{{1, 10, resource.Request{}}, {2, 10, resource.Request{}}}, []int64{1, 1}, 0,
			Demand{Walltime: 60, Limit: 100}, 2, 0},
		{"entries of jobs not live are skipped", []ready{{1, 10, resource.Request{}}}, []int64{7}, 0,
			Demand{Walltime: 60, Limit: 100}, 1, 0},
		{"requests against the shape", []ready{{1, 0, resource.Request{CPUs: 8}}, {2, 0, resource.Request{CPUs: 32}}, {3, 0, resource.Request{}}}, nil, 0,
			Demand{Shape: cores16, Limit: 100}, 2, 9.0 / 16},
		{"no shape: requests are slots", []ready{{1, 0, resource.Request{CPUs: 8}}, {2, 0, resource.Request{CPUs: 32}}}, nil, 0,
			Demand{Limit: 100}, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, p := dag.New(), New()
			h := policy.NewHeap(policy.Baseline().Order)
			tg := g.AddTarget("t")
			for _, r := range tc.jobs {
				g.AddJob(r.id, dag.Node{Target: tg, Queue: 1, Est: r.est})
				if st := g.State(r.id); st != job.Queued {
					t.Fatalf("job %d is %c", r.id, st)
				}
				p.Job(r.id, r.req, resource.Category{Queue: "q", Target: "t"})
				h.Push(policy.Ready{ID: r.id, Est: r.est})
			}
			for _, id := range tc.extra {
				h.Push(policy.Ready{ID: id})
			}
			var n Need
			p.CountReady(&n, tc.d, g, ReadyQueue{Queued: len(tc.jobs), Heap: h, Ceiling: tc.ceiling})
			if n.Jobs != tc.want {
				t.Errorf("counted %d, want %d", n.Jobs, tc.want)
			}
			if d := n.Cores.Sum - tc.cores; d > 1e-9 || d < -1e-9 {
				t.Errorf("cores %g, want %g", n.Cores.Sum, tc.cores)
			}
			// Full already: nothing more is counted.
			before := n.Jobs
			p.CountReady(&n, Demand{Shape: tc.d.Shape, Walltime: tc.d.Walltime, Limit: n.Jobs}, g, ReadyQueue{Queued: len(tc.jobs), Heap: h, Ceiling: tc.ceiling})
			if n.Jobs != before {
				t.Errorf("a full count went on to %d", n.Jobs)
			}
		})
	}
}
