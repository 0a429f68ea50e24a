package placeholder

import (
	"context"
	"errors"
	"maps"
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

// TestStartedSet: only jobs handed out ahead enter the set; a message
// carries those that have run announceAfter; a report or an answered
// message takes them out, for their own attempt only.
func TestStartedSet(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	var s startedSet
	s.add([]protocol.Assignment{{ID: 1, Attempt: 1, Ahead: true}, {ID: 2, Attempt: 1}}, t0)
	s.add([]protocol.Assignment{{ID: 3, Attempt: 2, Ahead: true}}, t0.Add(announceAfter))
	refs := func(now time.Time) map[int64]int {
		m := map[int64]int{}
		for _, r := range s.list(now) {
			m[r.ID] = r.Attempt
		}
		return m
	}
	for _, tc := range []struct {
		name string
		step func()
		now  time.Time
		want map[int64]int
	}{
		{"too soon", func() {}, t0.Add(announceAfter - time.Millisecond), map[int64]int{}},
		{"the first has run long enough", func() {}, t0.Add(announceAfter), map[int64]int{1: 1}},
		{"both", func() {}, t0.Add(2 * announceAfter), map[int64]int{1: 1, 3: 2}},
		{"sent for another attempt: kept", func() { s.sent([]protocol.JobRef{{ID: 1, Attempt: 2}}) }, t0.Add(2 * announceAfter), map[int64]int{1: 1, 3: 2}},
		{"sent", func() { s.sent([]protocol.JobRef{{ID: 1, Attempt: 1}}) }, t0.Add(2 * announceAfter), map[int64]int{3: 2}},
		{"ended (its report says it)", func() { s.ended(3, 2) }, t0.Add(2 * announceAfter), map[int64]int{}},
	} {
		tc.step()
		if got := refs(tc.now); !maps.Equal(got, tc.want) {
			t.Fatalf("%s: list %v, want %v", tc.name, got, tc.want)
		}
	}
	var many []protocol.Assignment
	for i := range protocol.MaxStarted + 10 {
		many = append(many, protocol.Assignment{ID: int64(i + 1), Attempt: 1, Ahead: true})
	}
	s.add(many, t0)
	if n := len(s.list(t0.Add(announceAfter))); n != protocol.MaxStarted {
		t.Fatalf("a message carries %d, want at most %d", n, protocol.MaxStarted)
	}
}
