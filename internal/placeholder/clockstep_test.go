package placeholder

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestJobTimesSurviveClockStep: the wall clock stepped an hour back or
// forth while a job runs (NTP) leaves its reported span the time it ran,
// not a negative runtime or an hour more.
func TestJobTimesSurviveClockStep(t *testing.T) {
	t.Parallel()
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			a := runner(t, "")
			var offset atomic.Int64
			a.wall = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			go func() {
				// Once the job runs, the clock steps.
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					a.runMu.Lock()
					n := len(a.running)
					a.runMu.Unlock()
					if n > 0 {
						offset.Store(int64(step))
						return
					}
				}
			}()
			rep := a.run(context.Background(), protocol.Assignment{ID: 50, Attempt: 1, Command: "sleep 0.5", Target: "t"})
			if rep.Exit != 0 {
				t.Fatalf("exit %d: %s", rep.Exit, rep.Reason)
			}
			if offset.Load() == 0 {
				t.Fatal("the clock never stepped")
			}
			if d := rep.Finished.Sub(rep.Started); d < 400*time.Millisecond || d > 30*time.Second {
				t.Errorf("reported span %v, want the half second it ran", d)
			}
		})
	}
}
