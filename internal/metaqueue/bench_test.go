package metaqueue_test

// Benchmarks of the Store alone (no socket, no processes). They are small so
// that `go test -run '^$' -bench . -benchtime=1x ./metaqueue` takes seconds;
// raise -benchtime for steadier numbers. scripts/bench.sh measures the
// whole system (CLS, placeholders, mqsub); BENCHMARKS.md records both.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/web"
	"github.com/mq-hpc/mq/protocol"
)

func benchStore(b *testing.B, mode metaqueue.Sync, obs ...metaqueue.Observer) *metaqueue.Store {
	b.Helper()
	opt := metaqueue.Options{Path: filepath.Join(b.TempDir(), "mq.db"), Sync: mode, Lease: time.Minute}
	if len(obs) > 0 {
		opt.Observer = obs[0] // the dashboard's metrics (cls serve --http)
	}
	s, err := metaqueue.Open(context.Background(), opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchSpecs is the workload of scripts/bench.sh: targets*per jobs, per
// jobs a target; with prereqs every odd target depends on the even one
// before it, so half the jobs wait.
func benchSpecs(prefix string, targets, per int, prereqs bool) []protocol.JobSpec {
	specs := make([]protocol.JobSpec, 0, targets*per)
	for t := 0; t < targets; t++ {
		name := prefix + "t" + strconv.Itoa(t)
		var pre []string
		if prereqs && t%2 == 1 {
			pre = []string{prefix + "t" + strconv.Itoa(t-1)}
		}
		for k := 0; k < per; k++ {
			specs = append(specs, protocol.JobSpec{
				Target: name, Prereqs: pre, Cwd: "/tmp",
				Command: fmt.Sprintf("./simulate --case %d --rep %d > out/case%d.%d.txt", t, k, t, k),
			})
		}
	}
	return specs
}

// benchBulk submits specs the way the server does for `mqsub -f`: chunks of
// 2,000 spooled with Add, then one Commit. It returns the time Commit took.
func benchBulk(b *testing.B, s *metaqueue.Store, specs []protocol.JobSpec) time.Duration {
	b.Helper()
	bulk, err := s.NewBulk()
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(specs); i += 2000 {
		if err := bulk.Add(i+1, specs[i:min(i+2000, len(specs))]); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	if _, err := bulk.Commit(context.Background()); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// bulkEach submits specs in bulk into a new Store per op and reports jobs/s
// and the commit's share.
func bulkEach(b *testing.B, mode metaqueue.Sync, specs []protocol.JobSpec) {
	jobs := 0
	var commit time.Duration
	var heap, held uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := benchStore(b, mode)
		b.StartTimer()
		commit += benchBulk(b, s, specs)
		jobs += len(specs)
		b.StopTimer()
		// The Go heap with the jobs queued, the specs included: compare
		// shapes for what the Store keeps per target.
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap = ms.HeapAlloc
		// Heap memory the runtime still holds from the OS (peak garbage
		// included): nearer what the CLS's RSS shows right after a submit.
		held = ms.HeapSys - ms.HeapReleased
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(commit.Seconds()*1000/float64(b.N), "commit-ms/op")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
	b.ReportMetric(float64(held)/(1<<20), "held-MB")
}

// bigBenchmarks says whether to add the slow variants (1,000,000 jobs):
// MQ_BENCH_BIG=1 go test -run '^$' -bench . ./metaqueue
func bigBenchmarks() bool { return os.Getenv("MQ_BENCH_BIG") == "1" }

// BenchmarkSubmitBulk: one op is a bulk submission of N jobs (N/10 targets
// x 10 jobs, every odd target's jobs with a prerequisite on the even target
// before it) through NewBulk/Add/Commit into an empty Store.
func BenchmarkSubmitBulk(b *testing.B) {
	cases := []struct {
		jobs int
		mode metaqueue.Sync
	}{
		{10000, metaqueue.SyncFull},
		{100000, metaqueue.SyncFull},
		{100000, metaqueue.SyncNormal},
	}
	if bigBenchmarks() {
		cases = append(cases, struct {
			jobs int
			mode metaqueue.Sync
		}{1000000, metaqueue.SyncFull})
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("jobs=%d/sync=%s", c.jobs, c.mode), func(b *testing.B) {
			bulkEach(b, c.mode, benchSpecs("", c.jobs/10, 10, true))
		})
	}
}

// BenchmarkDispatchComplete: one op drains a batch of jobs through fake
// placeholders calling Next in-process the way the agent does (report the
// last job, ask for one more, per slot), with jobs "finishing" at once.
// The clock stops when the Store counts every job Done.
func BenchmarkDispatchComplete(b *testing.B) {
	cases := []struct {
		placeholders, slots int
		sync                metaqueue.Sync
		jobs, backlog       int // jobs drained per op; extra jobs queued behind them
	}{
		{2, 1, metaqueue.SyncFull, 2000, 0},
		{8, 8, metaqueue.SyncFull, 10000, 0},
		{8, 8, metaqueue.SyncNormal, 10000, 0},
		{8, 8, metaqueue.SyncFull, 10000, 100000},
	}
	if bigBenchmarks() {
		cases = append(cases, cases[len(cases)-1])
		cases[len(cases)-1].backlog = 1000000
	}
	for _, c := range cases {
		name := fmt.Sprintf("ph=%d/slots=%d/sync=%s/backlog=%d", c.placeholders, c.slots, c.sync, c.backlog)
		b.Run(name, func(b *testing.B) {
			benchDispatch(b, c.placeholders, c.slots, c.sync, c.jobs, c.backlog, nil)
		})
	}
	// The same with the dashboard's metrics observing the core.
	b.Run("ph=8/slots=8/sync=full/backlog=0/observed", func(b *testing.B) {
		benchDispatch(b, 8, 8, metaqueue.SyncFull, 10000, 0, web.NewMetrics())
	})
}

func benchDispatch(b *testing.B, placeholders, slots int, mode metaqueue.Sync, jobs, backlog int, obs metaqueue.Observer) {
	var s *metaqueue.Store
	if obs != nil {
		s = benchStore(b, mode, obs)
	} else {
		s = benchStore(b, mode)
	}
	ctx := context.Background()
	ids := make([]int64, placeholders)
	for i := range ids {
		r, err := s.Register(ctx, protocol.Register{Site: "bench", Host: "h" + strconv.Itoa(i), PID: 1, Slots: slots, OutDir: "/tmp"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	// The backlog waits in the same queue behind nothing in particular: each
	// op then starts with backlog+jobs pending and counts jobs completions,
	// whichever jobs they are (FCFS drains the backlog first).
	if backlog > 0 {
		benchBulk(b, s, benchSpecs("backlog.", backlog/10, 10, true))
	}
	done := func() int {
		qs, err := s.Summary(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, q := range qs {
			n += q.Counts["D"]
		}
		return n
	}
	var ran int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		specs := benchSpecs(fmt.Sprintf("d%d.", i), jobs/10, 10, true)
		benchBulk(b, s, specs)
		base := done()
		var stop atomic.Bool
		var wg sync.WaitGroup
		b.StartTimer()
		for _, id := range ids {
			for k := 0; k < slots; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					benchSlot(s, id, &stop)
				}()
			}
		}
		for done()-base < len(specs) {
			time.Sleep(200 * time.Microsecond)
		}
		b.StopTimer()
		ran += len(specs)
		stop.Store(true)
		wg.Wait()
		b.StartTimer()
	}
	b.ReportMetric(float64(ran)/b.Elapsed().Seconds(), "jobs/s")
}

// benchSlot is one placeholder slot: report the last job, ask for the next,
// until stop. It stops on a flag rather than by cancelling Next's context so
// that no cancelled call is left to the next op's clock. (Cancelling used to
// panic the core with a double close, fixed in 7449024.)
func benchSlot(s *metaqueue.Store, ph int64, stop *atomic.Bool) {
	ctx := context.Background()
	var reports []protocol.Report
	for !stop.Load() {
		reply, err := s.Next(ctx, protocol.Next{Placeholder: ph, Reports: reports, Free: 1, WaitMS: 20})
		if err != nil {
			return
		}
		reports = reports[:0]
		now := time.Now()
		for _, a := range reply.Jobs {
			reports = append(reports, protocol.Report{ID: a.ID, Attempt: a.Attempt, Started: now, Finished: now})
		}
	}
	if len(reports) > 0 {
		s.Report(ctx, ph, reports)
	}
}

// shapeSpecs is the workload of the million-job table: n jobs as one target
// ("flat"), each its own target ("targets"), n/2 two-stage pipelines whose
// second stages share one target ("pipes-shared", a{i} then b with
// prerequisite a{i}), per-pipeline targets ("pipes", a{i} then b{i}), or
// one target whose jobs each carry MQ_ARRAY_INDEX, as `mqsub --array`
// sends its members ("array").
func shapeSpecs(shape string, n int) []protocol.JobSpec {
	specs := make([]protocol.JobSpec, 0, n)
	job := func(target string, pre []string, i int) protocol.JobSpec {
		return protocol.JobSpec{Target: target, Prereqs: pre, Cwd: "/tmp",
			Command: fmt.Sprintf("./simulate --case %d > out/case%d.txt", i, i)}
	}
	for i := 0; len(specs) < n; i++ {
		s := strconv.Itoa(i)
		switch shape {
		case "flat":
			specs = append(specs, job("t", nil, i))
		case "array":
			j := job("t", nil, i)
			j.Env = map[string]string{"MQ_ARRAY_INDEX": s}
			specs = append(specs, j)
		case "targets":
			specs = append(specs, job("t"+s, nil, i))
		case "pipes-shared":
			specs = append(specs, job("a"+s, nil, i), job("b", []string{"a" + s}, i))
		case "pipes":
			specs = append(specs, job("a"+s, nil, i), job("b"+s, []string{"a" + s}, i))
		}
	}
	return specs
}

// BenchmarkSubmitShapes: one op is a bulk submission of 200,000 jobs
// (1,000,000 with MQ_BENCH_BIG=1) of one shape (shapeSpecs) into an empty Store (sync normal: the shape, not the
// fsync, is what differs).
func BenchmarkSubmitShapes(b *testing.B) {
	n := 200000
	if bigBenchmarks() {
		n = 1000000
	}
	for _, shape := range []string{"flat", "targets", "pipes-shared", "pipes", "array"} {
		b.Run(shape, func(b *testing.B) {
			bulkEach(b, metaqueue.SyncNormal, shapeSpecs(shape, n))
		})
	}
}

// BenchmarkHop: the core's share of a dependency hop. One placeholder runs
// a chain (each job's target needs the one before's); each op reports the
// running job Done and, in the same request, takes its dependent, which
// that report made ready: what an agent's report-with-next does. The time
// per op is the store's, commit included (sync as cls serve's default
// leaves placeholder traffic: normal).
func BenchmarkHop(b *testing.B) {
	s := benchStore(b, metaqueue.SyncSubmit)
	ctx := context.Background()
	r, err := s.Register(ctx, protocol.Register{Site: "bench", Host: "h", PID: 1, Slots: 1, OutDir: "/tmp"})
	if err != nil {
		b.Fatal(err)
	}
	const chain = 1000
	submitChain := func(round int) {
		specs := make([]protocol.JobSpec, chain)
		for i := range specs {
			specs[i] = protocol.JobSpec{Target: fmt.Sprintf("r%dc%d", round, i), Command: "./step", Cwd: "/tmp"}
			if i > 0 {
				specs[i].Prereqs = []string{fmt.Sprintf("r%dc%d", round, i-1)}
			}
		}
		if _, err := s.Submit(ctx, specs); err != nil {
			b.Fatal(err)
		}
	}
	var prev []protocol.Report
	take := func() {
		reply, err := s.Next(ctx, protocol.Next{Placeholder: r.ID, Free: 1, Reports: prev})
		if err != nil {
			b.Fatal(err)
		}
		if len(reply.Jobs) != 1 {
			b.Fatalf("got %d jobs, want the dependent", len(reply.Jobs))
		}
		now := time.Now()
		j := reply.Jobs[0]
		prev = []protocol.Report{{ID: j.ID, Attempt: j.Attempt, Started: now, Finished: now}}
	}
	round := 0
	submitChain(round)
	take()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if (i+1)%chain == 0 {
			b.StopTimer()
			// Report the chain's last job on its own, and start another.
			if err := s.Report(ctx, r.ID, prev); err != nil {
				b.Fatal(err)
			}
			prev = nil
			round++
			submitChain(round)
			b.StartTimer()
		}
		take()
	}
}

// BenchmarkCopyDispatch is an idle placeholder's request that gets a copy
// of one of 1,000 running jobs of a wqr queue (pickCopy looks at every
// running job of the queues that copy, then the Replicator picks).
func BenchmarkCopyDispatch(b *testing.B) {
	s := benchStore(b, metaqueue.SyncNormal)
	ctx := context.Background()
	pol := "wqr"
	if _, err := s.SetQueue(ctx, protocol.QueueSet{Name: "bot", Policy: &pol}); err != nil {
		b.Fatal(err)
	}
	const running = 1000
	specs := make([]protocol.JobSpec, running)
	for i := range specs {
		specs[i] = protocol.JobSpec{Queue: "bot", Target: "t" + strconv.Itoa(i), Command: "true", Cwd: "/w"}
	}
	if _, err := s.Submit(ctx, specs); err != nil {
		b.Fatal(err)
	}
	ph := func(site string) int64 {
		r, err := s.Register(ctx, protocol.Register{Site: site, Host: "h", Slots: 1})
		if err != nil {
			b.Fatal(err)
		}
		return r.ID
	}
	busy := ph("busy")
	if r, err := s.Next(ctx, protocol.Next{Placeholder: busy, Free: running}); err != nil || len(r.Jobs) != running {
		b.Fatalf("%d jobs, %v", len(r.Jobs), err)
	}
	idle := make([]int64, b.N)
	for i := range idle {
		idle[i] = ph("idle")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.Next(ctx, protocol.Next{Placeholder: idle[i], Free: 1})
		if err != nil || len(r.Jobs) != 1 {
			b.Fatalf("%d jobs, %v", len(r.Jobs), err)
		}
	}
}
