package placeholder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/protocol"
)

// waitState polls until cond holds of the jobs' states (by id), failing
// after a generous deadline with what it saw last.
func waitState(t *testing.T, c *cls, what string, cond func(map[int64]string) bool, ids ...int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := map[int64]string{}
		for _, id := range ids {
			st[id] = stateOf(t, c, id)
		}
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: states %v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAgentPrefetchedShownP: a job an agent fetched ahead of its one slot
// is P while the job before it runs, and E once it has started (the
// agent says so on its next message), before it ends.
func TestAgentPrefetchedShownP(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	// A wide window: jobs of seconds count as short, so the agent
	// fetches ahead, and holds a job far longer than this test takes.
	startWarmAgent(t, c, Config{Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir(), prefetchWindow: 5 * time.Second}, dir)
	both := c.submit(protocol.JobSpec{Target: "first", Command: "sleep 2", Cwd: dir}, protocol.JobSpec{Target: "second", Command: "sleep 5", Cwd: dir})
	first, second := both[0], both[1]
	waitState(t, c, "the first job running, the second held", func(st map[int64]string) bool {
		if st[second] == "E" || st[second] == "D" {
			t.Fatalf("the held job was shown %s while the first job ran", st[second])
		}
		return st[first] == "E" && st[second] == "P"
	}, first, second)
	if s, err := c.store.Summary(context.Background()); err != nil || s[0].Counts["E"] != 1 || s[0].Counts["P"] != 1 {
		t.Fatalf("summary %+v, %v; want 1 E, 1 P", s, err)
	}
	waitState(t, c, "the second job shown E while it runs", func(st map[int64]string) bool {
		if st[second] == "D" {
			t.Fatalf("the second job ended without being shown E")
		}
		return st[second] == "E"
	}, first, second)
	if e := c.wait(second)[second]; e.State != "D" {
		t.Fatalf("second job ended %+v", e)
	}
}

// TestAgentAnnouncesStartsAgain: a CLS that answered the message naming
// a held job's start and then lost it (a restart while it kept the start
// in memory, having no room to write) hears of it again when the agent
// reconnects: the job leaves P while it still runs, not at its end.
func TestAgentAnnouncesStartsAgain(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, 30*time.Second)
	dir := t.TempDir()
	startWarmAgent(t, c, Config{Site: "test", Host: "h", Slots: 1, OutDir: t.TempDir(), prefetchWindow: 5 * time.Second}, dir)
	c.mu.Lock()
	c.dropStarted = true
	c.mu.Unlock()
	both := c.submit(protocol.JobSpec{Target: "first", Command: "sleep 1", Cwd: dir},
		protocol.JobSpec{Target: "second", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done", Cwd: dir})
	first, second := both[0], both[1]
	waitState(t, c, "the second job held", func(st map[int64]string) bool { return st[second] == "P" }, first, second)
	waitUntil(t, time.Minute, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !exists(filepath.Join(dir, "started")) || c.dropped == 0 {
			return errors.New("the second job's start was not named yet")
		}
		return nil
	})
	if st := stateOf(t, c, second); st != "P" {
		t.Fatalf("the second job is %s with its start dropped; the test wants P", st)
	}
	c.mu.Lock()
	c.dropStarted = false
	c.mu.Unlock()
	c.cut()
	waitState(t, c, "the second job shown E after the reconnect, while it runs", func(st map[int64]string) bool {
		if st[second] == "D" {
			t.Fatal("the second job ended before it was shown E")
		}
		return st[second] == "E"
	}, first, second)
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if e := c.wait(second)[second]; e.State != "D" {
		t.Fatalf("second job ended %+v", e)
	}
}

// TestAgentHandBackListed: a held job an agent hands back (the job it
// runs turned out long) is run elsewhere on attempt 2, and mqstat -j
// lists attempt 1 as handed back unstarted, apart from the history.
func TestAgentHandBackListed(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	startWarmAgent(t, c, agentConfig(t, 1), dir)
	both := c.submit(protocol.JobSpec{Target: "long", Command: "sleep 8", Cwd: dir}, protocol.JobSpec{Target: "short", Command: "true", Cwd: dir})
	long, short := both[0], both[1]
	waitState(t, c, "the long job running, the short one held", func(st map[int64]string) bool {
		return st[long] == "E" && st[short] == "P"
	}, long, short)
	startAgent(t, c, 1)
	if e := c.wait(short)[short]; e.State != "D" {
		t.Fatalf("short job ended %+v", e)
	}
	d, err := c.store.Inspect().Job(context.Background(), short)
	if err != nil {
		t.Fatal(err)
	}
	if d.Attempts != 2 || len(d.History) != 0 || len(d.Unstarted) != 1 || d.Unstarted[0].Attempt != 1 ||
		d.Unstarted[0].Reason != metaqueue.ReasonHandedBack || d.Unstarted[0].Host != "h" {
		t.Fatalf("short job: attempts %d, history %+v, unstarted %+v; want attempt 1 handed back at h, run on attempt 2", d.Attempts, d.History, d.Unstarted)
	}
}
