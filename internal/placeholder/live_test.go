package placeholder

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestAgentLiveOutputBounded: jobs someone follows have their output
// shipped while they run, but never faster than liveBudget a liveEvery
// tick for the whole agent (1 MiB/s), however much they have written: four
// jobs that each write 512 KiB to stdout and to stderr at once, then wait,
// reach the CLS over at least 4 MiB / liveBudget ticks. Checked at every
// chunk the CLS stages: the bytes it has are within the ticks the agent's
// ticker can have fired since the agent started (a busy machine only makes
// the agent slower). Without a follower nothing is shipped before the end.
func TestAgentLiveOutputBounded(t *testing.T) {
	t.Parallel()
	c, staged, follow := newFollowedCLS(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	const jobs, each = 4, 512 << 10
	ids := c.submit(slices.Repeat([]protocol.JobSpec{{Target: "t", Cwd: dir, Command: fmt.Sprintf(
		"head -c %d /dev/zero; head -c %d /dev/zero >&2; while [ ! -e %s ]; do sleep 0.02; done", each, each, gate)}}, jobs)...)
	size := func() int64 { return outputBytes(staged, ids) }
	var mu sync.Mutex
	var start time.Time
	var over []string
	chunks := 0
	c.srv.OnOutput = func(int64) {
		mu.Lock()
		defer mu.Unlock()
		chunks++
		// The ticker fires at most once a liveEvery after the agent
		// started; each tick ships at most liveBudget, plus one job's
		// share (the budget is checked before each job).
		ticks := int64(time.Since(start)/liveEvery) + 1
		if n, most := size(), ticks*liveBudget+2*liveChunk; n > most {
			over = append(over, fmt.Sprintf("%d bytes after %v (at most %d)", n, time.Since(start), most))
		}
	}

	mu.Lock()
	start = time.Now()
	mu.Unlock()
	out := t.TempDir()
	startAgentCfg(t, c, Config{Site: "test", Host: "h", Slots: jobs, OutDir: out, StageOutput: true})

	// Every job has written all it will before the gate, and is running.
	waitUntil(t, 2*time.Minute, func() error {
		if n := outputBytes(out, ids); n < jobs*2*each {
			return fmt.Errorf("the jobs have written %d bytes of %d", n, jobs*2*each)
		}
		return nil
	})
	// Nobody follows: two heartbeats later (each answered with no one to
	// follow, and many ticks of the shipper between them), nothing has
	// reached the CLS.
	twoHeartbeats(t, c, "the jobs wrote their output")
	if n := size(); n != 0 {
		t.Fatalf("%d bytes shipped with nobody following", n)
	}
	mu.Lock()
	start = time.Now() // the bound counts from here: before, nothing went
	mu.Unlock()
	follow()
	waitUntil(t, 2*time.Minute, func() error {
		if n := size(); n < jobs*2*each {
			return fmt.Errorf("%d bytes staged live of %d", n, jobs*2*each)
		}
		return nil
	})
	mu.Lock()
	took, n := time.Since(start), chunks
	mu.Unlock()
	// The agent learns of the followers at a heartbeat: the time counts
	// from before that, so it can only be longer than the ticks needed.
	if least := time.Duration(jobs*2*each/liveBudget-1) * liveEvery; took < least {
		t.Errorf("%d bytes shipped live in %v; at most %d a %v means at least %v", jobs*2*each, took, liveBudget, liveEvery, least)
	}
	mu.Lock()
	for _, o := range over {
		t.Errorf("faster than the bound: %s", o)
	}
	mu.Unlock()
	t.Logf("%d bytes in %d chunks over %v", jobs*2*each, n, took)

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for id, e := range c.wait(ids...) {
		if e.State != "D" {
			t.Errorf("job %d ended %+v, want D", id, e)
		}
	}
	if n := size(); n != jobs*2*each {
		t.Errorf("the CLS has %d bytes of the jobs' output, want %d (nothing twice, nothing lost)", n, jobs*2*each)
	}
}

// newFollowedCLS is a CLS that stages remote output in staged and has
// nobody follow a job until follow is called; from then on every running
// job is followed.
func newFollowedCLS(t *testing.T) (c *cls, staged string, follow func()) {
	t.Helper()
	c = newCLS(t)
	staged = t.TempDir()
	c.srv.OutputDir = staged
	var mu sync.Mutex
	following := false
	c.srv.Followed = func(running []protocol.JobRef) []protocol.JobRef {
		mu.Lock()
		defer mu.Unlock()
		if !following {
			return nil
		}
		return running
	}
	return c, staged, func() {
		mu.Lock()
		following = true
		mu.Unlock()
	}
}

// outputBytes is the size of the jobs' stdout and stderr files (of their
// first attempt) under dir.
func outputBytes(dir string, ids []int64) int64 {
	var n int64
	for _, id := range ids {
		out, errp := job.OutputPaths(dir, id, 1)
		for _, p := range []string{out, errp} {
			if fi, err := os.Stat(p); err == nil {
				n += fi.Size()
			}
		}
	}
	return n
}

// twoHeartbeats waits until the CLS has read two more heartbeats from
// now: many ticks of an agent's shipper lie between them.
func twoHeartbeats(t *testing.T, c *cls, since string) {
	t.Helper()
	hb := c.count(protocol.OpHeartbeat.Name, false)
	waitUntil(t, 2*time.Minute, func() error {
		if n := c.count(protocol.OpHeartbeat.Name, false); n < hb+2 {
			return fmt.Errorf("%d heartbeats since %s, want 2", n-hb, since)
		}
		return nil
	})
}

// waitUntil polls cond until it returns nil or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAgentShipsFollowedStreams: a remote agent writing stream files
// ships nothing between its reports while nobody follows its jobs; once
// one is followed, the stream file's growth reaches the CLS's copy while
// the job runs (a line it wrote before waiting on a gate), and nothing
// more goes while the file does not grow.
func TestAgentShipsFollowedStreams(t *testing.T) {
	t.Parallel()
	c, staged, follow := newFollowedCLS(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	ids := c.submit(protocol.JobSpec{Target: "t", Cwd: dir, Command: fmt.Sprintf(
		"echo first-line; while [ ! -e %s ]; do sleep 0.02; done; echo second-line", gate)})
	out := t.TempDir()
	startAgentCfg(t, c, Config{Site: "test", Host: "h", Slots: 1, OutDir: out, Streams: true, StageOutput: true})
	holds := func(dir, what string) error {
		names, _ := filepath.Glob(filepath.Join(dir, protocol.StreamDir, "*.mqs"))
		for _, n := range names {
			if b, err := os.ReadFile(n); err == nil && bytes.Contains(b, []byte(what)) {
				return nil
			}
		}
		return fmt.Errorf("no stream file in %s holds %q (files %v)", dir, what, names)
	}
	ships := func() int { return c.count(protocol.OpOutputShip.Name, false) }

	// The job wrote its line to the agent's stream file and waits.
	waitUntil(t, 2*time.Minute, func() error { return holds(out, "first-line") })
	// Nobody follows: two heartbeats later (many shipper ticks between
	// them), not a piece has gone.
	twoHeartbeats(t, c, "the job wrote")
	if n := ships(); n != 0 {
		t.Fatalf("%d output.ship requests with nobody following; want none", n)
	}

	follow()
	waitUntil(t, 2*time.Minute, func() error { return holds(staged, "first-line") })
	// The file does not grow while the job waits: however many turns of
	// the shipper pass (two heartbeats' worth), no more pieces go.
	n := ships()
	twoHeartbeats(t, c, "the line was shipped")
	if m := ships(); m != n {
		t.Errorf("%d output.ship requests while the followed file did not grow; want none", m-n)
	}
	if err := holds(staged, "second-line"); err == nil {
		t.Fatal("the CLS has the line written after the gate before the gate")
	}

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for id, e := range c.wait(ids...) {
		if e.State != "D" {
			t.Errorf("job %d ended %+v, want D", id, e)
		}
	}
	if err := holds(staged, "second-line"); err != nil {
		t.Error(err)
	}
}
