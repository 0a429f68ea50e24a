package placeholder

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// A placeholder on a node whose clock is hours off the CLS's (no NTP)
// has its jobs' times recorded on the CLS's clock: they did not finish
// hours in the future, or before they were submitted. The time they ran
// stays theirs.
func TestAgentClockSkew(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{3 * time.Hour, -26 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			c := newCLS(t)
			before := time.Now()
			ids := c.submit(protocol.JobSpec{Target: "t", Command: "sleep 0.3", Cwd: t.TempDir()})
			cfg := agentConfig(t, 1)
			cfg.Dial = c.dial
			a := New(cfg)
			a.wall = func() time.Time { return time.Now().Add(skew) }
			runAgent(t, a)
			e := c.wait(ids...)[ids[0]]
			after := time.Now()
			if e.State != "D" {
				t.Fatalf("job ended %+v", e)
			}
			started, err1 := time.Parse(time.RFC3339Nano, e.Started)
			finished, err2 := time.Parse(time.RFC3339Nano, e.Finished)
			if err1 != nil || err2 != nil {
				t.Fatalf("times %q, %q: %v, %v", e.Started, e.Finished, err1, err2)
			}
			slack := protocol.MaxClockSkew
			if started.Before(before.Add(-slack)) || finished.After(after.Add(slack)) {
				t.Errorf("job recorded as run from %v to %v; the CLS saw it between %v and %v", started, finished, before, after)
			}
			if ran := finished.Sub(started); ran < 250*time.Millisecond || ran > 30*time.Second {
				t.Errorf("recorded span %v, want the 0.3 s it ran", ran)
			}
		})
	}
}
