package metaqueue_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// BenchmarkTargetCounts: one target holding 100,000 jobs (1,000,000 with
// MQ_BENCH_BIG=1; a pipeline stage, an array), some of them done and
// some executing, beside a target of one job. One op is a question a user
// asks of the target: mqstat --summary -t (a progress count once, with
// what was spent), mqwait -t's first frame (the watch opened and
// counted), and the same two of the target in its queue (mqstat
// --summary -q -t, mqwait -q -t: from the counts kept by target and
// queue).
func BenchmarkTargetCounts(b *testing.B) {
	s, n := targetBench(b, "")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  protocol.Progress
	}{
		{"summary", protocol.Progress{Target: "t0", Once: true, Spending: true}},
		{"wait-open", protocol.Progress{Target: "t0"}},
		{"summary-queue", protocol.Progress{Queue: protocol.DefaultQueue, Target: "t0", Once: true, Spending: true}},
		{"wait-open-queue", protocol.Progress{Queue: protocol.DefaultQueue, Target: "t0"}},
	} {
		b.Run(tc.name+"/jobs="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				sctx, cancel := context.WithCancel(ctx)
				var got protocol.ProgressReply
				err := s.Progress().Stream(sctx, tc.req, func(r protocol.ProgressReply) error {
					got = r
					cancel() // the first frame is the answer
					return nil
				})
				cancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					b.Fatal(err)
				}
				if got.Total != n || got.Counts["D"] != 1000 || got.Counts["E"]+got.Counts["P"] != 1000 {
					b.Fatalf("counts %v, total %d", got.Counts, got.Total)
				}
			}
		})
	}
}

// BenchmarkTargetSpending: BenchmarkTargetCounts's target in a costed
// queue (a budget: every attempt is charged, 1,000 done), asked what it
// spent, alone and in its queue (mqstat --summary -t, -q -t).
func BenchmarkTargetSpending(b *testing.B) {
	s, n := targetBench(b, "paid")
	for _, tc := range []struct {
		name string
		req  protocol.Progress
	}{
		{"summary", protocol.Progress{Target: "t0", Once: true, Spending: true}},
		{"summary-queue", protocol.Progress{Queue: "paid", Target: "t0", Once: true, Spending: true}},
	} {
		b.Run(tc.name+"/jobs="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				var got protocol.ProgressReply
				err := s.Progress().Stream(context.Background(), tc.req, func(r protocol.ProgressReply) error {
					got = r
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if got.Total != n || got.Counts["D"] == 0 || len(got.SpentBySite) != 1 {
					b.Fatalf("counts %v, total %d, spent %v", got.Counts, got.Total, got.SpentBySite)
				}
			}
		})
	}
}

// targetBench is a store with one target of 100,000 jobs (1,000,000 with
// MQ_BENCH_BIG=1) in queue (a costed one, with a budget; "": the
// default), 1,000 of them done and 1,000 executing, and a target of one
// job beside it.
func targetBench(b *testing.B, queue string) (*metaqueue.Store, int) {
	n := 100_000
	if bigBenchmarks() {
		n = 1_000_000
	}
	s := benchStore(b, metaqueue.SyncNormal)
	ctx := context.Background()
	if queue != "" {
		budget := 1e12
		if _, err := s.SetQueue(ctx, protocol.QueueSet{Name: queue, Budget: &budget}); err != nil {
			b.Fatal(err)
		}
	}
	specs := benchSpecs("", 1, n, false) // target t0
	for i := range specs {
		specs[i].Queue = queue
	}
	benchBulk(b, s, specs)
	benchBulk(b, s, benchSpecs("solo.", 1, 1, false))
	r, err := s.Register(ctx, protocol.Register{Site: "bench", Host: "h", PID: 1, Slots: 1000, OutDir: "/tmp"})
	if err != nil {
		b.Fatal(err)
	}
	var reports []protocol.Report
	for range 2 { // 1,000 jobs done, 1,000 executing
		reply, err := s.Next(ctx, protocol.Next{Placeholder: r.ID, Reports: reports, Free: 1000})
		if err != nil {
			b.Fatal(err)
		}
		reports = reports[:0]
		now := time.Now()
		for _, a := range reply.Jobs {
			reports = append(reports, protocol.Report{ID: a.ID, Attempt: a.Attempt, Started: now, Finished: now})
		}
	}
	return s, n
}
