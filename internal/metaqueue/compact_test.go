package metaqueue

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// TestReadyHeapStaysBounded: holding and releasing jobs (mqhold, mqrls,
// and mqalter, which holds and releases each job it changes) leaves their
// old ready-heap entries behind as stale ones; without placeholders
// draining the queue nothing popped them, so every cycle over an array
// added an entry per member for good. The heap must stay within a bound of
// the queued jobs, and dispatch must still give each job exactly once, in
// order.
func TestReadyHeapStaysBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const n = 1000
	specs := make([]protocol.JobSpec, n)
	for i := range specs {
		specs[i] = spec("t", "true")
	}
	jobIDs := e.submit(specs...)
	all := protocol.Select{First: jobIDs[0], Last: jobIDs[n-1]}
	heapLen := func() (l int) {
		if err := e.s.do(ctx, func() error { l = e.s.queues["default"].ready.Len(); return nil }); err != nil {
			t.Fatal(err)
		}
		return l
	}
	cycles := 20
	if testing.Short() {
		cycles = 8 // the race run: without Compact the heap passes the bound after 6
	}
	for range cycles {
		if r, err := e.s.Hold(ctx, all); err != nil || len(r.IDs) != n {
			t.Fatalf("Hold: %d jobs, %v", len(r.IDs), err)
		}
		if r, err := e.s.Release(ctx, all); err != nil || len(r.IDs) != n {
			t.Fatalf("Release: %d jobs, %v", len(r.IDs), err)
		}
	}
	if l, most := heapLen(), 2*n+policy.StaleSlack; l > most {
		t.Fatalf("ready heap holds %d entries for %d queued jobs after %d holds and releases; want at most %d", l, n, cycles, most)
	}
	e.check()
	ph := e.register("s")
	var got []int64
	for {
		as := e.next(ph, 64)
		if len(as) == 0 {
			break
		}
		got = append(got, ids(as)...)
		var rs []protocol.Report
		for _, a := range as {
			rs = append(rs, ok(a))
		}
		e.report(ph, rs...)
	}
	if !slices.Equal(got, jobIDs) {
		t.Fatalf("dispatched %d jobs (first %v); want each of the %d once, in order", len(got), got[:min(len(got), 5)], n)
	}
}

// BenchmarkHoldRelease: one op holds and releases a queue of 100,000 jobs
// (mqhold, mqrls of an array) with nothing running; it reports the ready
// heap's entries per queued job after the ops, which stale entries grew by
// one an op before Compact.
func BenchmarkHoldRelease(b *testing.B) {
	opt := Options{Path: b.TempDir() + "/mq.db", Sync: SyncNormal, Lease: time.Minute}
	s, err := Open(context.Background(), opt)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const n = 100000
	specs := make([]protocol.JobSpec, n)
	for i := range specs {
		specs[i] = spec("t", "true")
	}
	ids, err := s.Submit(ctx, specs)
	if err != nil {
		b.Fatal(err)
	}
	all := protocol.Select{First: ids[0], Last: ids[n-1]}
	b.ResetTimer()
	for range b.N {
		if _, err := s.Hold(ctx, all); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(ctx, all); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var l int
	s.do(ctx, func() error { l = s.queues["default"].ready.Len(); return nil })
	b.ReportMetric(float64(l)/n, "entries/job")
}
