package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestCLSHoldAndPriority: a job issued with Hold is held at the CLS with
// its priority until released, then runs; local mode refuses Hold, and a
// priority out of range is refused at Exec.
func TestCLSHoldAndPriority(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 1, 1)
	d := startCLSDriver(t, c, Config{Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := d.Exec(ctx, "true", Target("held"), Hold(), Priority(5))
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	waitUntil(t, func() bool {
		var got []protocol.JobInfo
		err := c.store.Inspect().Stat(ctx, protocol.Stat{States: "H", Target: "held"}, 0, func(js []protocol.JobInfo) error {
			got = append(got, js...)
			return nil
		})
		if err != nil || len(got) != 1 {
			return false
		}
		if got[0].Priority != 5 {
			t.Fatalf("held job's priority %d, want 5", got[0].Priority)
		}
		id = got[0].ID
		return true
	})
	if r, err := c.store.Release(ctx, protocol.Select{IDs: []int64{id}, Atomic: true}); err != nil || len(r.IDs) != 1 {
		t.Fatalf("Release = %+v, %v", r, err)
	}
	if r, err := d.WaitForOne(ctx, k); err != nil || r.Exit != 0 {
		t.Fatalf("released job: %+v, %v", r, err)
	}
	if _, err := d.Exec(ctx, "true", Priority(5000)); err == nil || !strings.Contains(err.Error(), "priority must be -1024..1023") {
		t.Fatalf("priority 5000: %v", err)
	}

	l := startLocal(t, Config{})
	if _, err := l.Exec(ctx, "true", Hold()); err == nil || !strings.Contains(err.Error(), "Hold needs a CLS") {
		t.Fatalf("local Hold: %v", err)
	}
}
