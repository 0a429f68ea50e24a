package placeholder

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/spool"
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
			started, finished := recordedBetween(t, e, before, after)
			if ran := finished.Sub(started); ran < 250*time.Millisecond || ran > 30*time.Second {
				t.Errorf("recorded span %v, want the 0.3 s it ran", ran)
			}
		})
	}
}

// TestAgentSpoolsClockOffset: an agent on a node whose clock is hours
// off the CLS's keeps how far off it is from the CLS's replies, and
// writes it beside the reports it spools when it gives up on its CLS:
// applied later, they are recorded on the CLS's clock too, though
// nothing is left then to compare the node's clock with.
func TestAgentSpoolsClockOffset(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-3 * time.Hour, 26 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			c := newCLSLease(t, time.Hour)
			before := time.Now()
			d := newSpoolingAgent(t, c, 1)
			d.a.wall = func() time.Time { return time.Now().Add(skew) }
			d.drain(t, c)
			files, _ := filepath.Glob(filepath.Join(d.cfg.OutDir, spool.Dir, "*"+spool.Suffix))
			if len(files) != 1 {
				t.Fatalf("spooled %v, want one file", files)
			}
			data, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			f, err := spool.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if off := time.Duration(f.ClockOffsetMS) * time.Millisecond; off < -skew-protocol.MaxClockSkew || off > -skew+protocol.MaxClockSkew {
				t.Fatalf("spooled a clock offset of %v, want about %v", off, -skew)
			}
			deliverOnce(t, c, d.a, d.cfg.OutDir)
			after := time.Now()
			ranOnce(t, c, d.id, d.dir)
			recordedBetween(t, c.wait(d.id)[d.id], before, after)
		})
	}
}

// recordedBetween checks that job end e was recorded as run between
// before and after, when the CLS saw it, give or take the clock skew the
// protocol allows, and returns its recorded start and finish.
func recordedBetween(t *testing.T, e protocol.JobEnd, before, after time.Time) (started, finished time.Time) {
	t.Helper()
	started, err1 := time.Parse(time.RFC3339Nano, e.Started)
	finished, err2 := time.Parse(time.RFC3339Nano, e.Finished)
	if err1 != nil || err2 != nil {
		t.Fatalf("times %q, %q: %v, %v", e.Started, e.Finished, err1, err2)
	}
	slack := protocol.MaxClockSkew
	if started.Before(before.Add(-slack)) || finished.After(after.Add(slack)) {
		t.Errorf("job recorded as run from %v to %v; the CLS saw it between %v and %v", started, finished, before, after)
	}
	return started, finished
}

// TestNoteCLSClock: the agent keeps how far the CLS's clock is ahead of
// its own from each reply that says it, and keeps the last when a reply
// does not (an older CLS, a reply without it).
func TestNoteCLSClock(t *testing.T) {
	t.Parallel()
	a := New(agentConfig(t, 1))
	wall := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a.wall = func() time.Time { return wall }
	for _, tc := range []struct {
		name  string
		reply any
		want  time.Duration
	}{
		{"none yet", &protocol.Empty{}, 0},
		{"next, hours ahead", &protocol.NextReply{Clock: wall.Add(3 * time.Hour)}, 3 * time.Hour},
		{"next, not said", &protocol.NextReply{}, 3 * time.Hour},
		{"heartbeat, a day behind", &protocol.HeartbeatReply{Clock: wall.Add(-26 * time.Hour)}, -26 * time.Hour},
		{"heartbeat, not said", &protocol.HeartbeatReply{}, -26 * time.Hour},
		{"other reply", &protocol.Empty{}, -26 * time.Hour},
	} {
		a.noteCLSClock(replyClock(tc.reply))
		if got := time.Duration(a.clsAhead.Load()); got != tc.want {
			t.Errorf("%s: CLS ahead by %v, want %v", tc.name, got, tc.want)
		}
	}
	a.noteCLSClock(protocol.RegisterReply{Clock: wall.Add(time.Minute)}.Clock)
	if got := time.Duration(a.clsAhead.Load()); got != time.Minute {
		t.Errorf("register: CLS ahead by %v, want 1m", got)
	}
}
