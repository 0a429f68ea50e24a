package metaqueue

import (
	"context"
	"fmt"
	"testing"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// TestSiteNeed: the Store measures ready jobs against a site's shape,
// leaving out those it cannot hold and those too long for its walltime,
// and running attempts by their grants; without a shape it counts jobs as
// SiteDemand does.
func TestSiteNeed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 6 {
		js := asks(fmt.Sprint("eight", i), protocol.Resources{CPUs: 8})
		js.Est = 10
		e.submit(js)
	}
	long := asks("long", protocol.Resources{CPUs: 8})
	long.Est = 500
	e.submit(long)
	e.submit(asks("wide", protocol.Resources{CPUs: 32}))
	e.submit(asks("gpu", protocol.Resources{GPUs: 1}))
	for i := range 4 {
		e.submit1(fmt.Sprint("one", i), "true")
	}
	cores16 := resource.Capacity{CPUs: 16}
	for _, tc := range []struct {
		name     string
		shape    resource.Capacity
		walltime float64
		limit    int
		jobs     int
		whole    int
	}{
		// 7 eight-core jobs and 4 one-core ones: 60 cores over 16.
		{"16 cores, any walltime", cores16, 0, 100, 11, 4},
		{"16 cores, walltime 100: the long one left out", cores16, 100, 100, 10, 4},
		{"2 cores: only the one-core jobs", resource.Capacity{CPUs: 2}, 0, 100, 4, 2},
		{"32 cores and GPUs: all", resource.Capacity{CPUs: 32, GPUIDs: []string{"0"}}, 0, 100, 13, 3},
		{"the limit", cores16, 0, 3, 3, 2},
		{"no shape: jobs", resource.Capacity{}, 0, 100, 13, 0},
	} {
		ready, exec, err := e.s.SiteNeed(ctx, tc.shape, tc.walltime, nil, tc.limit)
		if err != nil || ready.Jobs != tc.jobs || ready.Whole() != tc.whole || exec.Jobs != 0 {
			t.Errorf("%s: ready %d jobs, %d placeholders, executing %d (%v); want %d jobs, %d placeholders",
				tc.name, ready.Jobs, ready.Whole(), exec.Jobs, err, tc.jobs, tc.whole)
		}
	}
	if ready, _, _ := e.s.SiteDemand(ctx, 0, nil, 100); ready != 13 {
		t.Errorf("SiteDemand counts %d ready, want every one of the 13", ready)
	}

	ph := e.registerSized("s", protocol.Capacity{CPUs: 16})
	got := e.next(ph, 16)
	if len(got) != 2 {
		t.Fatalf("dispatched %v, want two 8-core jobs", ids(got))
	}
	ready, exec, err := e.s.SiteNeed(ctx, cores16, 0, []int64{ph}, 100)
	if err != nil || exec.Jobs != 2 || exec.Whole() != 1 || !exec.Asks || ready.Jobs != 9 {
		t.Errorf("after dispatch: executing %d jobs, %d placeholders (%v); ready %d; want 2 jobs filling 1, 9 ready", exec.Jobs, exec.Whole(), err, ready.Jobs)
	}
	if _, exec, _ := e.s.SiteNeed(ctx, cores16, 0, []int64{ph + 100}, 100); exec.Jobs != 0 {
		t.Errorf("another site's placeholders run %d of these jobs", exec.Jobs)
	}
}
