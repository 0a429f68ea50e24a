package metaqueue

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestSummaryDuringSlowBatch: while the core runs a slow call (a bulk
// commit, an action's batch), Summary answers at once with the counts as
// committed before it; once the call is answered, Summary has its
// changes.
func TestSummaryDuringSlowBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := e.submit(spec("t", "true"), spec("t", "true"))
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.s.doSlow(context.Background(), func() error {
			if err := e.s.begin(); err != nil {
				return err
			}
			if err := e.s.hold(ids[0]); err != nil { // the slow batch's own change
				return err
			}
			close(entered)
			<-release // the core is held here
			return nil
		})
	}()
	<-entered
	// Not answered by the core, which is held: a wait for it would end
	// in the deadline's error.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := e.s.Summary(ctx)
	if err != nil {
		t.Fatalf("Summary during a slow batch: %v", err)
	}
	if got := countsOf(sum, protocol.DefaultQueue); got["Q"] != 2 || got["H"] != 0 {
		t.Errorf("during the slow batch: %v, want the 2 jobs queued as committed", got)
	}
	sum[0].Counts["Q"] = 99 // the caller's copy: the next caller's is whole
	again, err := e.s.Summary(ctx)
	if err != nil || countsOf(again, protocol.DefaultQueue)["Q"] != 2 {
		t.Errorf("a second summary during the slow batch: %v, %v; want 2 queued", again, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sum, err = e.s.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := countsOf(sum, protocol.DefaultQueue); got["Q"] != 1 || got["H"] != 1 {
		t.Errorf("after the slow batch: %v, want 1 queued and 1 held", got)
	}
}

func countsOf(sum []protocol.QueueCounts, queue string) map[string]int {
	for _, q := range sum {
		if q.Queue == queue {
			return q.Counts
		}
	}
	return nil
}

// TestStatByStateDuringSlowBatch: a listing by a state few jobs are in,
// which names them from the core's sets (bystate) when the core is free,
// reads its snapshot alone while a slow call holds the core, so it
// answers at once as committed; after the call, by name again, with the
// call's changes.
func TestStatByStateDuringSlowBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var specs []protocol.JobSpec
	for range 40 {
		specs = append(specs, spec("t", "true"))
	}
	ids := e.submit(specs...)
	e.mustDelete(ids[3])
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.s.doSlow(context.Background(), func() error {
			if err := e.s.begin(); err != nil {
				return err
			}
			if err := e.s.hold(ids[7]); err != nil {
				return err
			}
			close(entered)
			<-release
			return nil
		})
	}()
	<-entered
	listed := func(states string) []int64 {
		var out []int64
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := e.s.Inspect().Stat(ctx, protocol.Stat{States: states}, 0, func(js []protocol.JobInfo) error {
			for _, j := range js {
				out = append(out, j.ID)
			}
			return nil
		})
		if err != nil {
			t.Errorf("Stat(-s %s): %v", states, err)
		}
		return out
	}
	during := make(chan []int64, 1)
	go func() { during <- listed("XH") }()
	select {
	case got := <-during:
		if len(got) != 1 || got[0] != ids[3] {
			t.Errorf("-s XH during the slow batch: %v, want job %d as committed", got, ids[3])
		}
	case <-time.After(time.Minute):
		t.Error("-s XH during the slow batch waited for the core")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := listed("XH"); len(got) != 2 || got[0] != ids[3] || got[1] != ids[7] {
		t.Errorf("-s XH after the slow batch: %v, want jobs %d and %d", got, ids[3], ids[7])
	}
}
