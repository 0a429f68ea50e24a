package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string // "" = valid
	}{
		{"zero is defaults", Config{}, ""},
		{"consumers low", Config{Consumers: 1}, "consumers must be 2..512, not 1"},
		{"consumers min", Config{Consumers: 2}, ""},
		{"consumers max", Config{Consumers: 512}, ""},
		{"consumers high", Config{Consumers: 513}, "consumers must be 2..512"},
		{"consumers negative", Config{Consumers: -3}, "consumers must be 2..512"},
		{"buffer low", Config{Buffer: 99}, "buffer size must be 100..10000, not 99"},
		{"buffer min", Config{Buffer: 100}, ""},
		{"buffer max", Config{Buffer: 10000}, ""},
		{"buffer high", Config{Buffer: 10001}, "buffer size must be 100..10000"},
		{"group timeout low", Config{GroupTimeout: time.Microsecond}, "group timeout must be 1ms..1h"},
		{"group timeout high", Config{GroupTimeout: 2 * time.Hour}, "group timeout"},
		{"reconnect negative", Config{Reconnect: -time.Second}, "reconnect"},
		{"bad queue", Config{Queue: "a b"}, "queue"},
		{"bad target", Config{Target: "x,y"}, "target"},
		{"relative dir", Config{Dir: "rel"}, "not absolute"},
		{"local with home", Config{Local: true, Home: "/h"}, "takes no Home"},
		{"local", Config{Local: true}, ""},
	} {
		err := tc.cfg.Validate()
		if tc.err == "" && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		}
		if _, nerr := New(tc.cfg); (nerr == nil) != (err == nil) {
			t.Errorf("%s: New says %v, Validate says %v", tc.name, nerr, err)
		}
	}
}

func TestGroupAndPipelineBounds(t *testing.T) {
	t.Parallel()
	d, err := New(Config{Buffer: 200, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pipeline bool
		name     string
		n        int
		ok       bool
	}{
		{false, "g0", 0, false},
		{false, "g1", 1, true},
		{false, "g200", 200, true},
		{false, "g201", 201, false},
		{false, "gneg", -1, false},
		{false, "", 2, false},
		{true, "p0", 0, false},
		{true, "p1", 1, true},
		{true, "p200", 200, true},
		{true, "p201", 201, false},
		{true, "g1", 2, false}, // already a group
	} {
		var err error
		if tc.pipeline {
			err = d.CreatePipeline(tc.name, tc.n)
		} else {
			err = d.SetGroup(tc.name, tc.n)
		}
		if (err == nil) != tc.ok {
			t.Errorf("pipeline=%v %q %d: error %v, want ok=%v", tc.pipeline, tc.name, tc.n, err, tc.ok)
		}
	}
	if err := d.CreatePipeline("p1", 3); err == nil {
		t.Error("creating an incomplete pipeline again: no error")
	}
}

func startLocal(t *testing.T, cfg Config) *Driver {
	t.Helper()
	cfg.Local = true
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Local() {
		t.Fatal("not local")
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

func TestLocalExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startLocal(t, Config{Dir: dir, OutDir: dir})
	for _, tc := range []struct {
		cmd  string
		exit int
	}{
		{"true", 0},
		{"exit 3", 3},
		{"exit 255", 255},
		{"kill -9 $$", 128 + 9},
		{"no-such-command-xyz", 127},
		{"pwd > where; test \"$(cat where)\" = " + dir, 0},
	} {
		code, err := d.ExecSync(context.Background(), tc.cmd)
		if err != nil || code != tc.exit {
			t.Errorf("%q: exit %d, err %v; want %d", tc.cmd, code, err, tc.exit)
		}
	}
	// Output goes to OutDir/run-.../KEY.out, and Result reads it.
	k, err := d.Exec(context.Background(), "echo hello")
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.WaitForOne(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(d.RunDir()) != dir {
		t.Errorf("run directory %s is not in OutDir %s", d.RunDir(), dir)
	}
	b, err := os.ReadFile(filepath.Join(d.RunDir(), fmt.Sprintf("%d.out", k)))
	if err != nil || string(b) != "hello\n" {
		t.Errorf("output %q, %v", b, err)
	}
	if b, err := res.Stdout(context.Background()); err != nil || string(b) != "hello\n" {
		t.Errorf("Result.Stdout = %q, %v", b, err)
	}
	if _, err := d.WaitForOne(context.Background(), k); err == nil {
		t.Error("a second wait on a collected key: no error")
	}
	if _, err := d.Exec(context.Background(), ""); err == nil {
		t.Error("empty command: no error")
	}
	if _, err := d.Exec(context.Background(), "true", Group("nope")); err == nil {
		t.Error("unknown group: no error")
	}
}

// TestLocalPrerequisites: local mode honours prerequisites as the metaqueue
// does. Dependents issued before their prerequisites (more of them than
// consumers) are parked, not run and not holding a consumer; a failed
// prerequisite blocks its dependents.
func TestLocalPrerequisites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := New(Config{Consumers: 2, Buffer: 100, Dir: dir, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	var deps []Key
	for i := range 3 {
		k, err := d.Exec(ctx, fmt.Sprintf("cat a1 a2 > b%d", i), Target("B"), Prereqs("A"))
		if err != nil {
			t.Fatal(err)
		}
		deps = append(deps, k)
	}
	for i := 1; i <= 2; i++ {
		if _, err := d.Exec(ctx, fmt.Sprintf("sleep 0.2; echo a%d > a%d", i, i), Target("A")); err != nil {
			t.Fatal(err)
		}
	}
	bad, _ := d.Exec(ctx, "exit 1", Target("F"))
	blocked, _ := d.Exec(ctx, "touch ran", Target("G"), Prereqs("F"))
	// After-any jobs wait for F (and G, blocked) to end, then run.
	cleanup, _ := d.Exec(ctx, "touch cleaned", Target("C"), AfterAny("F", "G"))
	for _, k := range deps {
		if r, err := d.WaitForOne(ctx, k); err != nil || r.Exit != 0 {
			t.Fatalf("dependent %d: %+v, %v", k, r, err)
		}
	}
	for i := range 3 {
		if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("b%d", i))); err != nil || string(b) != "a1\na2\n" {
			t.Errorf("b%d = %q, %v: ran before its prerequisites", i, b, err)
		}
	}
	if r, _ := d.WaitForOne(ctx, bad); r.Exit != 1 || r.State != "F" {
		t.Errorf("failing job: %+v", r)
	}
	if r, err := d.WaitForOne(ctx, cleanup); err != nil || r.State != "D" {
		t.Errorf("after-any job of a failed and a blocked target: %+v, %v; want it done", r, err)
	}
	var je *JobError
	if r, err := d.WaitForOne(ctx, blocked); !errors.As(err, &je) || je.State != "B" {
		t.Errorf("job after a failed prerequisite: %+v, %v; want a JobError in state B", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("a blocked job ran")
	}
}

// TestBackpressure: with every slot of the buffer taken by jobs that have
// not ended, Exec blocks until one ends.
func TestBackpressure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	d := startLocal(t, Config{Buffer: 100, Consumers: 2, Dir: dir})
	ctx := context.Background()
	wait := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.01; done", gate)
	for i := 0; i < 100; i++ {
		if _, err := d.Exec(ctx, wait); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.Pending(); n != 100 {
		t.Fatalf("pending %d, want 100", n)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := d.Exec(short, "true"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec into a full buffer: %v, want it to block until the deadline", err)
	}
	// Let them end: the blocked Exec gets a slot.
	done := make(chan error, 1)
	go func() {
		_, err := d.Exec(ctx, "true")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Exec returned (%v) while the buffer was full", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec still blocked after jobs ended")
	}
	rs, err := d.WaitForAll(ctx)
	if err != nil || len(rs) != 101 {
		t.Fatalf("WaitForAll: %d results, %v", len(rs), err)
	}
}

// TestProducerBarriers: many producers issue jobs at once; each producer's
// WaitForAll returns exactly its own jobs, in issue order, with their exit
// codes. Run with -race.
func TestProducerBarriers(t *testing.T) {
	t.Parallel()
	d := startLocal(t, Config{Buffer: 100, Consumers: 8})
	const producers, each = 12, 15
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := d.Producer()
			ctx := context.Background()
			var keys []Key
			for i := 0; i < each; i++ {
				k, err := pr.Exec(ctx, fmt.Sprintf("exit %d", (p*each+i)%200))
				if err != nil {
					errs <- err
					return
				}
				keys = append(keys, k)
			}
			rs, err := pr.WaitForAll(ctx)
			if err != nil {
				errs <- err
				return
			}
			if len(rs) != each {
				errs <- fmt.Errorf("producer %d: %d results, want %d", p, len(rs), each)
				return
			}
			for i, r := range rs {
				if r.Key != keys[i] || r.Exit != (p*each+i)%200 {
					errs <- fmt.Errorf("producer %d result %d: key %d exit %d, want key %d exit %d", p, i, r.Key, r.Exit, keys[i], (p*each+i)%200)
					return
				}
			}
			// Collected: a second barrier has nothing left to wait for.
			if rs, err := pr.WaitForAll(ctx); err != nil || len(rs) != 0 {
				errs <- fmt.Errorf("producer %d: second WaitForAll: %d results, %v", p, len(rs), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if rs, err := d.WaitForAll(context.Background()); err != nil || len(rs) != 0 {
		t.Errorf("driver WaitForAll after every producer collected: %d results, %v", len(rs), err)
	}
}

func TestWaitForAllAcrossProducers(t *testing.T) {
	t.Parallel()
	d := startLocal(t, Config{})
	ctx := context.Background()
	p1, p2 := d.Producer(), d.Producer()
	k1, _ := p1.Exec(ctx, "exit 1")
	k2, _ := p2.Exec(ctx, "exit 2")
	k0, _ := d.Exec(ctx, "exit 0")
	rs, err := d.WaitForAll(ctx)
	if err != nil || len(rs) != 3 {
		t.Fatalf("%v %v", rs, err)
	}
	want := map[Key]int{k1: 1, k2: 2, k0: 0}
	for _, r := range rs {
		if want[r.Key] != r.Exit {
			t.Errorf("key %d exit %d, want %d", r.Key, r.Exit, want[r.Key])
		}
	}
	if rs, _ := p1.WaitForAll(ctx); len(rs) != 0 {
		t.Errorf("producer still has %d results after the driver collected all", len(rs))
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	d, err := New(Config{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := d.Exec(ctx, "true"); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Exec before Start: %v", err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v", err)
	}
	k, err := d.Exec(ctx, "sleep 0.1; exit 4")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(ctx); err != nil { // waits for the job
		t.Fatal(err)
	}
	if _, err := d.Exec(ctx, "true"); !errors.Is(err, ErrStopped) {
		t.Errorf("Exec after Stop: %v", err)
	}
	if r, err := d.WaitForOne(ctx, k); err != nil || r.Exit != 4 {
		t.Errorf("result after Stop: %+v %v", r, err)
	}
}

func TestStopKillsLocalJobsAtDeadline(t *testing.T) {
	t.Parallel()
	d, _ := New(Config{Local: true})
	ctx := context.Background()
	d.Start(ctx)
	k, _ := d.Exec(ctx, "sleep 30")
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := d.Stop(sctx); err == nil {
		t.Error("Stop with a job still running at its deadline: no error")
	}
	if time.Since(start) > 5*time.Second {
		t.Error("Stop took too long")
	}
	r, err := d.WaitForOne(ctx, k)
	var je *JobError
	if !errors.As(err, &je) || r.Exit != -1 {
		t.Errorf("killed job: %+v %v", r, err)
	}
}

// recorder is a backend that records what consumers would submit, and
// ends each job at once with exit 0.
type recorder struct {
	d     *Driver
	mu    sync.Mutex
	units [][]Key
	when  []time.Time
	bund  []bool
}

func (r *recorder) consume(ctx context.Context) {
	for u := range r.d.ready {
		keys := make([]Key, len(u.jobs))
		for i, e := range u.jobs {
			keys[i] = e.rec.key
		}
		r.mu.Lock()
		r.units = append(r.units, keys)
		r.when = append(r.when, time.Now())
		r.bund = append(r.bund, u.bundle)
		r.mu.Unlock()
		for _, e := range u.jobs {
			r.d.finish(e.rec, Result{State: "D"})
		}
	}
}

func (r *recorder) close()       {}
func (r *recorder) kill(*record) {}

func (r *recorder) snapshot() ([][]Key, []time.Time, []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]Key(nil), r.units...), append([]time.Time(nil), r.when...), append([]bool(nil), r.bund...)
}

func startRecorder(t *testing.T, cfg Config) (*Driver, *recorder) {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{d: d}
	d.be = r
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d, r
}

// TestGroupBundleSizes: a group's full bundles go out as they fill, without
// waiting for the group timeout; an incomplete one waits for the timeout
// (or a barrier) and then goes out whole. No check depends on how fast this
// machine runs: the full bundles are awaited under a timeout of an hour, and
// the timeout's flush is only bounded from below.
func TestGroupBundleSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bf, jobs int
		want     []int // bundle sizes sent at once
		tail     int   // size of the incomplete bundle (0 = none)
	}{
		{1, 3, []int{1, 1, 1}, 0},
		{4, 8, []int{4, 4}, 0},
		{4, 10, []int{4, 4}, 2},
		{16, 15, nil, 15},
		{100, 100, []int{100}, 0},
	} {
		t.Run(fmt.Sprintf("bf%d_jobs%d", tc.bf, tc.jobs), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			issue := func(d *Driver) []Key {
				t.Helper()
				if err := d.SetGroup("blast", tc.bf); err != nil {
					t.Fatal(err)
				}
				var keys []Key
				for i := 0; i < tc.jobs; i++ {
					k, err := d.Exec(ctx, "true", Group("blast"))
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
				return keys
			}
			withTail := slices.Clone(tc.want)
			if tc.tail > 0 {
				withTail = append(withTail, tc.tail)
			}

			// Full bundles go out without the timeout: under one of an
			// hour, nothing else can.
			d, r := startRecorder(t, Config{Buffer: 100, Consumers: 2, GroupTimeout: time.Hour})
			keys := issue(d)
			waitUntil(t, func() bool {
				units, _, _ := r.snapshot()
				return len(units) >= len(tc.want)
			})
			units, _, bund := r.snapshot()
			if got := sizes(units); !equalInts(got, tc.want) {
				t.Fatalf("bundles before the timeout: %v, want %v", got, tc.want)
			}
			for i, b := range bund {
				if b != (len(units[i]) > 1) {
					t.Errorf("unit %d of %d jobs: bundle=%v", i, len(units[i]), b)
				}
			}
			// A barrier sends the incomplete bundle at once.
			if _, err := d.WaitForAll(ctx); err != nil {
				t.Fatal(err)
			}
			units, _, _ = r.snapshot()
			if got := sizes(units); !equalInts(got, withTail) {
				t.Fatalf("bundles after the barrier: %v, want %v", got, withTail)
			}
			// Two consumers record units in whatever order they take them;
			// within a bundle, and from one bundle to the next, the jobs
			// keep their issue order.
			sorted := slices.Clone(units)
			slices.SortFunc(sorted, func(a, b []Key) int { return cmp.Compare(a[0], b[0]) })
			var flat []Key
			for _, u := range sorted {
				flat = append(flat, u...)
			}
			if fmt.Sprint(flat) != fmt.Sprint(keys) {
				t.Errorf("jobs out of order: %v, want %v", flat, keys)
			}
			if tc.tail == 0 {
				return
			}

			// Without a barrier, the timeout sends the incomplete bundle,
			// never before it.
			const timeout = time.Second
			d, r = startRecorder(t, Config{Buffer: 100, Consumers: 2, GroupTimeout: timeout})
			start := time.Now()
			keys = issue(d)
			issued := time.Since(start)
			waitUntil(t, func() bool {
				units, _, _ := r.snapshot()
				n := 0
				for _, u := range units {
					n += len(u)
				}
				return n == tc.jobs
			})
			units, when, _ := r.snapshot()
			for i, u := range units {
				if slices.Contains(u, keys[len(keys)-1]) {
					if el := when[i].Sub(start); el < timeout {
						t.Errorf("incomplete bundle flushed after %v, before the timeout %v", el, timeout)
					}
				}
			}
			// The timer starts with the bundle's first job: only if issuing
			// took longer than the timeout may the tail have gone in parts.
			if got := sizes(units); issued < timeout && !equalInts(got, withTail) {
				t.Errorf("bundles with the timeout: %v, want %v", got, withTail)
			}
		})
	}
}

func TestPipelinesKeepOrder(t *testing.T) {
	t.Parallel()
	d, r := startRecorder(t, Config{GroupTimeout: time.Millisecond})
	ctx := context.Background()
	// Two pipelines of three, issued interleaved; then one completes
	// without a timeout even though it waits long.
	for _, p := range []string{"p1", "p2"} {
		if err := d.CreatePipeline(p, 3); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]Key{}
	for i := 0; i < 3; i++ {
		for _, p := range []string{"p2", "p1"} {
			k, err := d.Exec(ctx, "true", Group(p))
			if err != nil {
				t.Fatal(err)
			}
			want[p] = append(want[p], k)
		}
		if i == 1 {
			time.Sleep(50 * time.Millisecond) // no timeout for pipelines
			if units, _, _ := r.snapshot(); len(units) != 0 {
				t.Fatalf("incomplete pipelines were sent: %v", units)
			}
		}
	}
	if _, err := d.WaitForAll(ctx); err != nil {
		t.Fatal(err)
	}
	units, _, bund := r.snapshot()
	if len(units) != 2 || !bund[0] || !bund[1] {
		t.Fatalf("units %v (bundles %v), want two bundles", units, bund)
	}
	got := map[string]bool{fmt.Sprint(units[0]): true, fmt.Sprint(units[1]): true}
	if !got[fmt.Sprint(want["p1"])] || !got[fmt.Sprint(want["p2"])] {
		t.Errorf("bundles %v, want %v and %v in issue order", units, want["p1"], want["p2"])
	}
	// A completed pipeline's name is free again; jobs into a completed one are refused.
	if _, err := d.Exec(ctx, "true", Group("p1")); err == nil {
		t.Error("Exec into a completed pipeline: no error")
	}
	if err := d.CreatePipeline("p1", 2); err != nil {
		t.Errorf("reusing a completed pipeline's name: %v", err)
	}
}

func sizes(units [][]Key) []int {
	var out []int
	for _, u := range units {
		out = append(out, len(u))
	}
	return out
}

func equalInts(a, b []int) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestBarrierFlushesGroup: waiting for a job whose group bundle is
// incomplete sends the bundle at once rather than after the timeout.
func TestBarrierFlushesGroup(t *testing.T) {
	t.Parallel()
	d, r := startRecorder(t, Config{GroupTimeout: time.Hour})
	d.SetGroup("g", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var keys []Key
	for i := 0; i < 3; i++ {
		k, _ := d.Exec(ctx, "true", Group("g"))
		keys = append(keys, k)
	}
	if _, err := d.WaitForOne(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	if units, _, _ := r.snapshot(); fmt.Sprint(sizes(units)) != "[3]" {
		t.Fatalf("units %v, want one bundle of 3", units)
	}
	k, _ := d.Exec(ctx, "true", Group("g"))
	if rs, err := d.WaitForAll(ctx); err != nil || len(rs) != 3 || rs[2].Key != k {
		t.Fatalf("WaitForAll: %v %v", rs, err)
	}
}

// TestConfigHomeLikeCommands: an empty Home means what mqsub uses
// ($MQ_HOME, else ~/.mq), and a driver without a CLS there fails at Start
// instead of running the jobs here: local mode only when asked for.
func TestConfigHomeLikeCommands(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MQ_HOME", filepath.Join(dir, "home"))
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Config().Home; got != filepath.Join(dir, "home") || d.Local() {
		t.Fatalf("with MQ_HOME set: Home %q, local %v", got, d.Local())
	}
	if err := d.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot reach the CLS") {
		t.Fatalf("Start without a CLS: %v, want an error", err)
	}
	t.Setenv("MQ_HOME", "")
	t.Setenv("HOME", dir)
	if d, err = New(Config{}); err != nil {
		t.Fatal(err)
	}
	if got := d.Config().Home; got != filepath.Join(dir, ".mq") || d.Local() {
		t.Fatalf("without MQ_HOME: Home %q, local %v; want %s", got, d.Local(), filepath.Join(dir, ".mq"))
	}
	if d, err = New(Config{Local: true}); err != nil || !d.Local() || d.Config().Home != "" {
		t.Fatalf("Config{Local: true}: %v, %+v", err, d)
	}
}

// TestConfigLogDefault: without a Log the driver's warnings (a job no
// placeholder can hold waits) reach the default logger, and nothing less.
func TestConfigLogDefault(t *testing.T) {
	d, err := New(Config{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	log, ctx := d.Config().Log, context.Background()
	if !log.Enabled(ctx, slog.LevelWarn) || log.Enabled(ctx, slog.LevelInfo) {
		t.Errorf("nil Log: Warn enabled %v, Info enabled %v; want the default logger's warnings only",
			log.Enabled(ctx, slog.LevelWarn), log.Enabled(ctx, slog.LevelInfo))
	}
	if w := log.With("a", 1).WithGroup("g"); !w.Enabled(ctx, slog.LevelError) || w.Enabled(ctx, slog.LevelDebug) {
		t.Error("With and WithGroup lost the level")
	}
}

// TestLocalDeclaredFiles: local mode checks declared files as a
// placeholder sharing the machine's files does: a missing input keeps the
// command from running (F, exit 127, "input: ..."), an output the job
// did not write fails it (F, exit 1, "output: PATH was not created", and
// Cmd.Run returns an *ExitError, as through a CLS), and a job whose
// input a prerequisite writes, and which writes its output, is done.
func TestLocalDeclaredFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startLocal(t, Config{Dir: dir, OutDir: dir})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		cmd    string
		opts   []Option
		state  string
		exit   int
		reason string
		ran    bool // the command left ran-NAME in dir
	}{
		{"input missing", "touch ran-1", []Option{Input("nope.txt", -1)}, "F", 127, "/nope.txt missing", false},
		{"output not written", "touch ran-3", []Option{Output("out.txt", -1)}, "F", 1, "/out.txt was not created", true},
		{"output written", "touch ran-4 made.txt", []Option{Output("made.txt", -1)}, "D", 0, "", true},
	} {
		k, err := d.Exec(ctx, tc.cmd, tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		res, _ := d.WaitForOne(ctx, k)
		if res.State != tc.state || res.Exit != tc.exit || !strings.Contains(res.Reason, tc.reason) {
			t.Errorf("%s: state %s exit %d reason %q; want %s %d %q", tc.name, res.State, res.Exit, res.Reason, tc.state, tc.exit, tc.reason)
		}
		marker := strings.Fields(tc.cmd)[1]
		if _, err := os.Stat(filepath.Join(dir, marker)); (err == nil) != tc.ran {
			t.Errorf("%s: the command ran: %v, want %v", tc.name, err == nil, tc.ran)
		}
	}
	// What a program sees of it through Cmd.Run: an error, not success.
	c := d.Command("true")
	c.Options = []Option{Output("never.txt", -1)}
	var ee *ExitError
	if err := c.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("Cmd.Run of a job that did not write its output: %v, want an *ExitError of exit 1", err)
	}
	// A prerequisite writes the input of the job after it.
	if _, err := d.Exec(ctx, "echo data > staged.txt", Target("make"), Output("staged.txt", -1)); err != nil {
		t.Fatal(err)
	}
	k, err := d.Exec(ctx, "cat staged.txt", Prereqs("make"), Input("staged.txt", -1))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := d.WaitForOne(ctx, k); err != nil || res.State != "D" {
		t.Errorf("a job whose input its prerequisite wrote: %+v, %v", res, err)
	}
}
