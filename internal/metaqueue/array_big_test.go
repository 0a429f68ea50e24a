package metaqueue

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/arrays"
	"github.com/mq-hpc/mq/protocol"
)

// TestArrayMillionCost (MQ_BENCH_BIG=1): listing a 1,000,000-member capped
// array's line, the collapsed listing, and dispatch past it.
func TestArrayMillionCost(t *testing.T) {
	if os.Getenv("MQ_BENCH_BIG") != "1" {
		t.Skip("MQ_BENCH_BIG=1 runs it")
	}
	e := newEnv(t)
	n := 1_000_000
	b := bulkOf(t, e, n, func(int) string { return "arr" })
	b.Array("1-1000000%10", 10)
	t0 := time.Now()
	if _, err := b.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("commit: %v", time.Since(t0))
	other := e.submit1("solo", "x")
	ph := e.register("s")
	t0 = time.Now()
	got := e.next(ph, 20)
	t.Logf("first next (passes the million once): %v, %d jobs", time.Since(t0), len(got))
	if len(got) != 11 || got[len(got)-1].ID != other {
		t.Fatalf("got %d jobs", len(got))
	}
	t0 = time.Now()
	e.next(ph, 20, ok(got[0]))
	t.Logf("next after one ended: %v", time.Since(t0))
	t0 = time.Now()
	as, err := arrays.List(context.Background(), e.s.ReadDB(), e.s, protocol.ArrayQuery{})
	t.Logf("arrays: %v %+v %v", time.Since(t0), as[0].Counts, err)
	t0 = time.Now()
	l := e.stat(protocol.Stat{Collapse: true})
	t.Logf("collapsed stat: %v, %d jobs", time.Since(t0), len(l))
	t0 = time.Now()
	if _, err := e.s.Delete(context.Background(), protocol.Select{First: int64(n / 2), Last: int64(n)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted half: %v", time.Since(t0))
	// 100,000 listed jobs (the most a request may list), half of them
	// deleted, beside the ones that run on.
	listed := make([]int64, 0, 100_000)
	for id := int64(n/2) - 100_000; id < int64(n/2)+100_000; id += 2 {
		listed = append(listed, id)
	}
	for _, req := range []protocol.Progress{{First: 1, Last: int64(n), Once: true}, {First: 2, Last: int64(n), Once: true}, {First: 2, Last: int64(n)}, {Target: "arr", Once: true}, {Target: "arr"},
		{IDs: listed, Once: true}, {IDs: listed}} {
		// The core's answer to --summary while the watch counts: how long
		// counting holds it.
		held := timed(20*time.Millisecond, func() { e.s.Summary(context.Background()) })
		t0 = time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		err := e.s.Progress().Stream(ctx, req, func(r protocol.ProgressReply) error {
			t.Logf("progress %+v: %v, %v", showReq(req), time.Since(t0), r.Counts)
			cancel() // a stream's first frame is enough
			return nil
		})
		if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		t.Logf("a summary meanwhile waited %v", <-held)
	}
}

// TestArraysManyCost (MQ_BENCH_BIG=1): the collapsed listing with 1,000
// arrays of 1,000 members, a job between each two, and its --last 20.
func TestArraysManyCost(t *testing.T) {
	if os.Getenv("MQ_BENCH_BIG") != "1" {
		t.Skip("MQ_BENCH_BIG=1 runs it")
	}
	e := newEnv(t)
	for i := 0; i < 1000; i++ {
		e.submit1("solo", "x"+strconv.Itoa(i))
		e.submitArray("arr", 1000, 10)
	}
	for _, st := range []protocol.Stat{{Collapse: true}, {Collapse: true, Last: 20}} {
		t0 := time.Now()
		l := e.stat(st)
		t.Logf("collapsed stat %+v: %v, %d jobs", st, time.Since(t0), len(l))
		want := 1000
		if st.Last > 0 {
			want = st.Last
		}
		if len(l) != want {
			t.Fatalf("listed %d jobs, want %d", len(l), want)
		}
	}
}

// showReq is req as a log line shows it: listed ids by their number.
func showReq(req protocol.Progress) string {
	ids := req.IDs
	req.IDs = nil
	if len(ids) > 0 {
		return fmt.Sprintf("%+v and %d listed ids", req, len(ids))
	}
	return fmt.Sprintf("%+v", req)
}

// TestActionsMillionCost (MQ_BENCH_BIG=1): each selection action over
// half a million members of a million-member array, one batch each, and
// how long a summary asked meanwhile waits for the core.
func TestActionsMillionCost(t *testing.T) {
	if os.Getenv("MQ_BENCH_BIG") != "1" {
		t.Skip("MQ_BENCH_BIG=1 runs it")
	}
	e := newEnv(t)
	n := 1_000_000
	first := e.submitArray("arr", n, 0)
	half := protocol.Select{First: first + int64(n/2), Last: first + int64(n) - 1}
	for _, a := range []struct {
		name string
		act  func(context.Context, protocol.Select) (protocol.ActionReply, error)
	}{{"hold", e.s.Hold}, {"release", e.s.Release}, {"delete", e.s.Delete}, {"rerun", e.s.Rerun}} {
		// What a summary and a call on the core (as a placeholder's) wait,
		// asked 100 ms into the action.
		summary := timed(100*time.Millisecond, func() { e.s.Summary(context.Background()) })
		core := timed(100*time.Millisecond, func() { e.s.do(context.Background(), func() error { return nil }) })
		t0 := time.Now()
		r, err := a.act(context.Background(), half)
		if err != nil || r.Acted() != n/2 {
			t.Fatalf("%s: %d acted on, %v", a.name, r.Acted(), err)
		}
		t.Logf("%s of %d: %v; meanwhile a summary waited %v, a call on the core %v", a.name, n/2, time.Since(t0), <-summary, <-core)
	}
}

// timed runs f after delay, in a goroutine, and sends how long it took.
func timed(delay time.Duration, f func()) <-chan time.Duration {
	took := make(chan time.Duration, 1)
	go func() {
		time.Sleep(delay)
		t0 := time.Now()
		f()
		took <- time.Since(t0)
	}()
	return took
}

// TestFullDiskMillionCost measures a full disk at a million jobs: the
// first failed batch reloads the whole state; while there is no room,
// submits and placeholders' reports are answered without a try, and a
// summary asked meanwhile waits for neither.
func TestFullDiskMillionCost(t *testing.T) {
	if os.Getenv("MQ_BENCH_BIG") != "1" {
		t.Skip("MQ_BENCH_BIG=1 runs it")
	}
	e := newEnv(t)
	b := bulkOf(t, e, 1_000_000, func(i int) string { return "t" + strconv.Itoa(i%100) })
	if _, err := b.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	ph := e.register("s")
	got := e.next(ph, 100)
	if err := e.s.do(context.Background(), func() error {
		e.s.commitFault = func() error { return sqliteFull }
		e.s.room.Probe = func() error { return syscall.ENOSPC }
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		held := timed(20*time.Millisecond, func() { e.s.Summary(context.Background()) })
		t0 := time.Now()
		_, err := e.s.Submit(context.Background(), []protocol.JobSpec{spec("a", "true")})
		took := time.Since(t0)
		rerr := e.s.Report(context.Background(), ph, []protocol.Report{ok(got[i])})
		t.Logf("failed submit %d: %v (%v, report refused: %v); summary waited %v", i+1, took, err != nil, rerr != nil, <-held)
	}
}

// bulkOf is a bulk submission of n jobs, job i (from 0) of target
// target(i), not yet committed.
func bulkOf(t *testing.T, e *env, n int, target func(i int) string) *Bulk {
	t.Helper()
	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 10000 {
		specs := make([]protocol.JobSpec, min(10000, n-i))
		for k := range specs {
			specs[k] = spec(target(i+k), "m "+strconv.Itoa(i+k))
		}
		if err := b.Add(i+1, specs); err != nil {
			t.Fatal(err)
		}
	}
	return b
}
