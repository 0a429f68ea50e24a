package driver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestResultsAfterCancelledWaitForAll: a WaitForAll whose context ends
// deletes the jobs it waited for and forgets them; a Results loop after it
// ends at once (nothing is pending), it does not wait for ever.
func TestResultsAfterCancelledWaitForAll(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cls", "local", "producer"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var d *Driver
			if mode == "cls" {
				d = startCLSDriver(t, newTestCLS(t, 1, 3), Config{Dir: t.TempDir()})
			} else {
				d = startLocal(t, Config{Dir: t.TempDir()})
			}
			p := d.Producer()
			// A job of another producer, collected by nobody, must not keep
			// the producer's Results loop waiting.
			if mode == "producer" {
				if _, err := d.Exec(context.Background(), "true"); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				if _, err := p.Exec(context.Background(), "sleep 30"); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			var err error
			if mode == "producer" {
				_, err = p.WaitForAll(ctx)
			} else {
				_, err = d.WaitForAll(ctx)
			}
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitForAll: %v, want the deadline", err)
			}
			done := make(chan int)
			go func() {
				results := d.Results
				if mode == "producer" {
					results = p.Results
				}
				n := 0
				for range results(context.Background()) {
					n++
				}
				done <- n
			}()
			select {
			case n := <-done:
				if n != 0 {
					t.Errorf("Results yielded %d results of abandoned jobs", n)
				}
			case <-time.After(time.Minute):
				t.Fatalf("Results still running a minute after a cancelled WaitForAll (pending %d)", d.Pending())
			}
			// Nor does a WaitForAll wait for them again.
			wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
			rs, err := p.WaitForAll(wctx)
			wcancel()
			if err != nil || len(rs) != 0 {
				t.Errorf("WaitForAll after: %d results, %v; want none", len(rs), err)
			}
			// The driver still works.
			if code, err := d.ExecSync(context.Background(), "exit 3"); err != nil || code != 3 {
				t.Fatalf("ExecSync after: %d, %v", code, err)
			}
		})
	}
}

// TestCLSResultUsage: through a CLS a Result carries what the placeholder
// measured (mqstat --acct's figures), as local mode does.
func TestCLSResultUsage(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 1, 1)
	d := startCLSDriver(t, c, Config{Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := d.Exec(ctx, "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.WaitForOne(ctx, k)
	if err != nil || res.Exit != 0 {
		t.Fatalf("job: %+v, %v", res, err)
	}
	if res.Usage.MaxRSS <= 0 {
		t.Fatalf("Usage %+v: zero through the CLS", res.Usage)
	}
	j, err := c.store.Inspect().Job(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Usage{CPU: time.Duration((j.CPUUser + j.CPUSys) * float64(time.Second)), MaxRSS: j.MaxRSS}); res.Usage != want {
		t.Errorf("Usage %+v, the metaqueue's accounting says %+v", res.Usage, want)
	}
}
