//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/driver"
)

// startDriver starts a driver on the harness's CLS, stopped in cleanup.
func (h *harness) startDriver(cfg driver.Config) *driver.Driver {
	h.t.Helper()
	cfg.Home = h.home
	cfg.Dir = h.dir
	d, err := driver.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

// TestDriverManyExecs: 10,000 Exec calls from 8 goroutines with a buffer of
// 100 all complete, each with its own job's result; the driver never holds
// more than 100 unfinished jobs and its heap stays small. The placeholders
// are no-op ones: what is tested is the driver, and 10,000 real shells on
// a loaded 2-core machine took ~100 s of a 120 s deadline (real exit codes
// through the CLS: TestDriverCLSRestart). Each result is matched to its
// Exec by the command its metaqueue job holds.
func TestDriverManyExecs(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "2", "--slots", "4", "--sync", "normal", "--noop")
	d := h.startDriver(driver.Config{Buffer: 100, Consumers: 4})
	const goroutines, each = 8, 1250
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var maxPending, maxHeap atomic.Int64
	// The live heap metric is what the last GC marked: without a GC here,
	// the first samples were an earlier test's (48.7 MB once in CI, the
	// driver's own peak being under 8).
	runtime.GC()
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if p := int64(d.Pending()); p > maxPending.Load() {
				maxPending.Store(p)
			}
			if i%20 == 0 {
				metrics.Read(live)
				if v := int64(live[0].Value.Uint64()); v > maxHeap.Load() {
					maxHeap.Store(v)
				}
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	command := func(g, i int) string { return "exit " + strconv.Itoa((g*each+i)%256) }
	var idsMu sync.Mutex
	want := map[int64]string{} // job id -> the command its Exec gave
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := d.Producer()
			for i := 0; i < each; i++ {
				if _, err := p.Exec(ctx, command(g, i)); err != nil {
					errs <- err
					return
				}
			}
			rs, err := p.WaitForAll(ctx)
			if err != nil {
				errs <- err
				return
			}
			if len(rs) != each {
				errs <- fmt.Errorf("producer %d: %d results", g, len(rs))
				return
			}
			idsMu.Lock()
			defer idsMu.Unlock()
			for i, r := range rs {
				if r.Exit != 0 || r.State != "D" || r.ID == 0 {
					errs <- fmt.Errorf("producer %d job %d: %+v, want done", g, i, r)
					return
				}
				if c, ok := want[r.ID]; ok {
					errs <- fmt.Errorf("producer %d job %d: job %d is also the result of %q", g, i, r.ID, c)
					return
				}
				want[r.ID] = command(g, i)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	el := time.Since(start)
	t.Logf("10,000 jobs in %v (%.0f jobs/s); most pending %d; live heap at most %.1f MB",
		el, 10000/el.Seconds(), maxPending.Load(), float64(maxHeap.Load())/1e6)
	if maxPending.Load() > 100 {
		t.Errorf("%d jobs pending at once with a buffer of 100", maxPending.Load())
	}
	// The live heap (marked at each GC), not heap in use: in use counts
	// garbage the collector has not reached yet, which grew to 94 MB on a
	// loaded machine while the live heap stayed near 6 MB.
	if maxHeap.Load() > 16<<20 {
		t.Errorf("live heap reached %d bytes", maxHeap.Load())
	}
	if s := h.summary()["default"]; s["D"] != 10000 {
		t.Errorf("the metaqueue has %v, want 10,000 done jobs", s)
	}
	js := h.jobs()
	if len(js) != 10000 {
		t.Errorf("mqstat lists %d jobs, want 10,000", len(js))
	}
	wrong := 0
	for _, j := range js {
		if c, ok := want[j.ID]; !ok || c != j.Command {
			if wrong++; wrong <= 5 {
				t.Errorf("job %d runs %q; its Exec's result says %q", j.ID, j.Command, c)
			}
		}
	}
}

// TestDriverDeletedJob: a job deleted with mqdel makes its waiter return
// an error instead of hanging.
func TestDriverDeletedJob(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "1")
	d := h.startDriver(driver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // past both waits below
	defer cancel()
	k, err := d.Exec(ctx, "sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	waitFor(t, time.Minute, func() error {
		js := h.jobs("-s", "E")
		if len(js) == 1 {
			id = js[0].ID
			return nil
		}
		return fmt.Errorf("executing: %v", js)
	})
	done := make(chan error, 1)
	var res driver.Result
	go func() {
		var err error
		res, err = d.WaitForOne(ctx, k)
		done <- err
	}()
	h.ok("mqdel", strconv.FormatInt(id, 10))
	select {
	case err := <-done:
		var je *driver.JobError
		if !errors.As(err, &je) || je.State != "X" || res.Exit != -1 || res.ID != id {
			t.Fatalf("waiter returned %+v, %v; want a deleted-job error", res, err)
		}
		t.Logf("waiter: %v", err)
	case <-time.After(30 * time.Second): // half the job's sleep 60: it did not just end
		t.Fatal("waiter still blocked 30 s after mqdel")
	}
}

// TestDriverCLSRestart: the CLS is SIGKILLed and restarted while the driver
// submits and waits; every job still gets its own exit code, none runs
// twice (the resent submits carry their token).
func TestDriverCLSRestart(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "4", "--lease", "3s")
	d := h.startDriver(driver.Config{Buffer: 100})
	const n = 600
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	issued := make(chan error, 1)
	var keys []driver.Key
	go func() {
		for i := 0; i < n; i++ {
			k, err := d.Exec(ctx, fmt.Sprintf("sleep 0.02; exit %d", i%7))
			if err != nil {
				issued <- err
				return
			}
			keys = append(keys, k)
		}
		issued <- nil
	}()
	waitFor(t, 30*time.Second, func() error {
		if s := h.summary()["default"]; s["D"]+s["F"] >= n/4 {
			return nil
		}
		return errors.New("not enough progress yet")
	})
	h.stopCLS(syscall.SIGKILL, time.Minute)
	time.Sleep(300 * time.Millisecond) // the driver notices and retries meanwhile
	h.startCLS("--local", "4", "--lease", "3s")
	if err := <-issued; err != nil {
		t.Fatal(err)
	}
	rs, err := d.WaitForAll(ctx)
	if err != nil || len(rs) != n {
		t.Fatalf("%d results, %v", len(rs), err)
	}
	for i, r := range rs {
		if r.Key != keys[i] || r.Exit != i%7 {
			t.Errorf("job %d: %+v, want exit %d", i, r, i%7)
		}
	}
	js := h.jobs()
	if len(js) != n {
		t.Errorf("the metaqueue holds %d jobs for %d Exec calls", len(js), n)
	}
	for _, j := range js {
		if j.Attempts > 1 {
			t.Logf("job %d ran %d times (lost with the CLS and requeued): allowed", j.ID, j.Attempts)
		}
	}
}
