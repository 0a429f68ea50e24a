package placeholder

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// An agent whose node cannot write its data root (a home mounted
// read-only on compute nodes, a quota reached) takes no job: it exits as
// it starts, saying why, before it registers.
func TestAgentRefusesUnwritablePlace(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"data root", func(c *Config) { c.DataRoot = filepath.Join(file, "root") }, "data root"},
		{"output directory", func(c *Config) { c.OutDir = filepath.Join(file, "out") }, "output directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLS(t)
			c.submit(protocol.JobSpec{Target: "t", Command: "true", Cwd: "/w"})
			cfg := agentConfig(t, 1)
			cfg.DataRoot = t.TempDir()
			tc.set(&cfg)
			cfg.Dial = c.dial
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := New(cfg).Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("agent on a node that cannot write its %s: %v", tc.name, err)
			}
			if n := c.count(protocol.OpRegister.Name, false); n != 0 {
				t.Errorf("it registered %d times", n)
			}
		})
	}
}

// A data root that goes bad under a running agent fails no job: the
// attempts it could not start are interrupted, run again elsewhere, and
// the agent takes no more jobs and exits saying why. (Each job it took
// failed at once, "could not start", as the job's own fault, and the
// agent took the next: one bad node failed the whole queue in a second.)
func TestAgentStopsWhenDataRootBreaks(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	root := filepath.Join(t.TempDir(), "root")
	cfg := agentConfig(t, 2)
	cfg.DataRoot, cfg.Dial = root, c.dial
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- New(cfg).Run(ctx) }()
	warm := c.submit(protocol.JobSpec{Target: "t", Command: "true", Cwd: "/w"})
	if e := c.wait(warm...)[warm[0]]; e.State != "D" {
		t.Fatalf("first job: %+v", e)
	}
	// The root goes: a file stands in its place, so nothing can be made there.
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ids := c.submit(slices.Repeat([]protocol.JobSpec{{Target: "t", Command: "true", Cwd: "/w/more"}}, 10)...)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "data root") {
			t.Fatalf("the agent ended with %v; want why its node cannot run jobs", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent whose data root broke runs on")
	}
	for _, id := range ids {
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == "F" {
			t.Fatalf("job %d failed for its placeholder's node: %+v", id, d.History)
		}
	}
	// Elsewhere (here, the root back), they all run.
	os.Remove(root)
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}
	startAgentCfg(t, c, cfg)
	ends := c.wait(ids...)
	interrupted := 0
	for _, id := range ids {
		if ends[id].State != "D" {
			t.Errorf("job %d: %+v", id, ends[id])
		}
		d, _ := c.store.Inspect().Job(context.Background(), id)
		for _, h := range d.History {
			if !strings.Contains(h.Reason, "node cannot run jobs") {
				t.Errorf("job %d attempt %d ended %q", id, h.Attempt, h.Reason)
			}
			interrupted++
		}
	}
	if interrupted == 0 || interrupted > cfg.Slots {
		t.Errorf("%d attempts interrupted; want between 1 and the agent's %d slots", interrupted, cfg.Slots)
	}
}
