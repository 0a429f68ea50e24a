package placeholder

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/internal/placeholder/scratch"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A server gone (NFS, Lustre) is simulated two ways: a hook that blocks
// until the test ends, or a FIFO nobody opens the other end of, whose
// open blocks as a call on a hung mount does.

// hangUntilEnd returns a channel closed when the test ends: a call that
// waits on it does not return before.
func hangUntilEnd(t *testing.T) <-chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}

// fifo makes a FIFO at path; the test's end opens and closes its other
// end, so an open blocked on it returns.
func fifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, flag := range []int{os.O_WRONLY, os.O_RDONLY} {
			if f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})
}

// within runs f, failing the test if it has not returned in a minute.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return in a minute: a call on a hung filesystem held it", what)
	}
}

// A job whose processes do not die of SIGKILL (stuck on a hung
// filesystem) has its output in a stream file on that filesystem too: the
// sync before its report does not return. The report goes all the same,
// its output said not synced, and heartbeats go on meanwhile. The report
// waited for ever, and the CLS learnt of the job only when its lease ran
// out (never: the heartbeats renewed it).
func TestAgentUnkillableJobHungSync(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	ctx := context.Background()
	c.ceiling("short", 0.5)
	dir := t.TempDir()
	other := c.submit(protocol.JobSpec{Target: "b", Command: "exec sleep 600", Cwd: dir})[0]
	cfg := agentConfig(t, 2)
	cfg.Dial, cfg.Streams = c.dial, true
	a := New(cfg)
	a.unkillable, a.fsWait = 300*time.Millisecond, 500*time.Millisecond
	holdReaps(t, a, func(r protocol.JobRef) bool { return r.ID != other })
	hang := hangUntilEnd(t)
	var syncs atomic.Int64
	a.streams.sync = func(*outstream.Writer) error {
		syncs.Add(1)
		<-hang
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("the agent did not stop")
		}
	})
	waitFor(t, "the other job to run", func() bool { return stateOf(t, c, other) == "E" })
	stuck := c.submit(protocol.JobSpec{Queue: "short", Target: "a", Command: "echo out; exec sleep 600", Cwd: dir})[0]
	waitFor(t, "the stuck job to be reported", func() bool { return stateOf(t, c, stuck) == "F" })
	d, err := c.store.Inspect().Job(ctx, stuck)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.OutputLost, "fsync did not return") || d.StdoutStream != nil {
		t.Errorf("output lost %q, stdout stream %+v; want it said not synced, and not named", d.OutputLost, d.StdoutStream)
	}
	if syncs.Load() == 0 {
		t.Fatal("no sync was tried")
	}
	hb := c.count(protocol.OpHeartbeat.Name, false)
	waitFor(t, "heartbeats while the sync hangs", func() bool { return c.count(protocol.OpHeartbeat.Name, false) >= hb+2 })
}

// The work loop and each write of a job's output look at the output
// disk's free space (statfs); on a hung filesystem that does not return.
// Jobs still run and are reported: a statfs that does not return is free
// space unknown. The work loop stalled for ever before its first poll.
func TestAgentHungStatfs(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.OutputReserve = c.dial, 1<<20
	a := New(cfg)
	a.fsWait = 500 * time.Millisecond
	hang := hangUntilEnd(t)
	a.statfs = func(string) (diskroom.Free, error) {
		<-hang
		return diskroom.Free{}, nil
	}
	runAgent(t, a)
	id := c.submit(protocol.JobSpec{Target: "t", Command: "echo hi", Cwd: t.TempDir()})[0]
	waitFor(t, "the job to be reported", func() bool { return stateOf(t, c, id) == "D" })
}

// A job's -o file is on a filesystem that hangs: the job's write to it
// never returns (here a FIFO nobody reads), and nor does its close, which
// waits for that write. The report goes, saying so; it waited for ever.
func TestRunHungUserFileClose(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	a.fsWait = 500 * time.Millisecond
	path := filepath.Join(t.TempDir(), "out")
	fifo(t, path)
	rd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // never read
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var rep protocol.Report
	within(t, "the job's run", func() {
		// More than the FIFO holds, less than it, the pipe and the sink's
		// buffer hold together: the job ends, its output's copy does not.
		rep = a.run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Target: "t", Command: "head -c 100000 /dev/zero",
			Env: []string{protocol.EnvStdout + "=" + path}})
	})
	if !strings.Contains(rep.OutputLost, "close did not return") {
		t.Fatalf("output lost %q; want the -o file's close said not to return", rep.OutputLost)
	}
}

// Staging a job's output to the CLS reads its files; an open on a hung
// filesystem does not return (here a FIFO). The output is said not
// copied; the report waited for ever.
func TestStageHungOpen(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	a.fsWait = 500 * time.Millisecond
	asg := protocol.Assignment{ID: 3, Attempt: 1}
	out, _ := job.OutputPaths(a.cfg.OutDir, asg.ID, asg.Attempt)
	fifo(t, out)
	var lost string
	within(t, "staging", func() { lost = a.stage(context.Background(), asg, [2]int64{}) })
	if !strings.Contains(lost, "stdout not copied to the CLS") || !strings.Contains(lost, "open did not return") {
		t.Fatalf("lost %q; want stdout said not copied, its open not returning", lost)
	}
}

// Shipping a followed job's output reads its file while holding what the
// job's report waits for (liveOut.finish); a read that does not return
// held the report for ever.
func TestLiveHungRead(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	a.fsWait = 500 * time.Millisecond
	p := &proc{ref: protocol.JobRef{ID: 4, Attempt: 1}}
	out, _ := job.OutputPaths(a.cfg.OutDir, 4, 1)
	fifo(t, out)
	within(t, "a live read and the job's end", func() {
		if n := a.shipSome(context.Background(), p, make([]byte, 1024)); n != 0 {
			t.Errorf("shipped %d bytes of nothing", n)
		}
		p.live.finish()
	})
}

// Shipping a stream file to the CLS before the reports naming it leave
// reads it; an open that does not return (here a FIFO) fails the ship,
// and the reports go saying the output was not copied.
func TestShipHungOpen(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	a := New(Config{Site: "test", Host: "h", OutDir: out, Streams: true, StageOutput: true})
	a.fsWait = 500 * time.Millisecond
	w, err := outstream.Create(filepath.Join(t.TempDir(), "real.mqs"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	name := protocol.StreamFileName(7, 0)
	fifo(t, filepath.Join(a.streams.dir, name))
	f := &streamFile{w: w, name: name, owner: 7}
	within(t, "shipping", func() {
		if err := a.shipTo(context.Background(), f, w.Size()); err == nil || !strings.Contains(err.Error(), "open did not return") {
			t.Errorf("ship: %v; want its open said not to return", err)
		}
	})
}

// When a job's output is held open past its end, the agent looks in /proc
// for what the job left running; a read of /proc/PID/environ waits for a
// process in uninterruptible sleep (here a FIFO in a fake /proc). The
// output is cut and reported; it waited for ever.
func TestWaitSinksHungProc(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	child := exec.Command("sleep", "600")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
	})
	a.proc = t.TempDir()
	fifo(t, filepath.Join(a.proc, strconv.Itoa(child.Process.Pid), "environ"))
	asg := protocol.Assignment{ID: 5, Attempt: 1}
	s, w, err := a.newSink(filepath.Join(t.TempDir(), "out"), outstream.Tag{Job: 5, Attempt: 1}, false, a.newOutputLimit(t.TempDir(), asg), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close() // held open, as by a process the job left
	var lost string
	within(t, "waiting for the output", func() { lost = a.waitSinks(asg, s) })
	if !strings.Contains(lost, "cut") {
		t.Fatalf("lost %q; want the output said cut", lost)
	}
}

// An agent that marks itself broken (a job's processes did not die of
// SIGKILL) tells the CLS why in its heartbeats, and as it exits when no
// heartbeat did: one whose only job stuck exits before the next. The CLS
// shows it (cls site list, mqstat, the dashboard); it heard nothing but
// the job's reason before.
func TestAgentSaysBroken(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	var mu sync.Mutex
	var said []string
	c.srv.OnBroken = func(id int64, why string) {
		mu.Lock()
		said = append(said, why)
		mu.Unlock()
	}
	cfg := agentConfig(t, 1)
	cfg.Dial = c.dial
	a := New(cfg)
	a.unkillable = 300 * time.Millisecond
	holdReaps(t, a, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	id := c.submit(protocol.JobSpec{Target: "t", Command: "exec sleep 600", Cwd: t.TempDir()})[0]
	// Its process started: a kill before that finds nothing to kill (the
	// CLS asks again at the next heartbeat; this test asks once).
	waitFor(t, "the job's process to start", func() bool {
		a.runMu.Lock()
		defer a.runMu.Unlock()
		return a.running[id] != nil
	})
	a.kill(protocol.JobRef{ID: id, Attempt: 1}, protocol.ReasonKilled)
	runEnds(t, done, time.Minute, "cannot run them")
	mu.Lock()
	defer mu.Unlock()
	if len(said) == 0 || !strings.Contains(said[0], stuckNote("0.3")) || !strings.Contains(said[0], fmt.Sprintf("job %d (attempt 1)", id)) {
		t.Fatalf("the CLS heard %q; want the node said broken, with the stuck job and why", said)
	}
}

// A job's working directory is on a filesystem that hangs: its child's
// chdir would block, and with it the launch (and every later one) for
// ever. A stat of it first, with a deadline, finds that: the attempt is
// interrupted, the node said unable to run jobs, and nothing runs.
func TestRunHungWorkingDirectory(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	a.fsWait = 300 * time.Millisecond
	dir := t.TempDir()
	hang := hangUntilEnd(t)
	a.statDir = func(p string) (os.FileInfo, error) {
		if p == dir {
			<-hang
		}
		return os.Stat(p)
	}
	var rep protocol.Report
	within(t, "the job's run", func() {
		rep = a.run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Target: "t", Command: "touch ran", Cwd: dir})
	})
	if !strings.HasPrefix(rep.Reason, protocol.ReasonInterrupted+": its placeholder's node cannot run jobs") || !strings.Contains(rep.Reason, "did not return") {
		t.Errorf("reason %q; want the attempt interrupted, the node unable to run jobs, the stat not returning", rep.Reason)
	}
	if a.brokenWhy() == "" {
		t.Error("the agent is not marked broken")
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the job ran")
	}
}

// A job's -o file is a FIFO no one reads (or on a hung filesystem): its
// open does not return. The attempt fails saying so, not waiting for
// ever, and the agent stays able to run jobs.
func TestRunHungUserFileOpen(t *testing.T) {
	t.Parallel()
	a := runner(t, "")
	a.fsWait = 300 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	fifo(t, path)
	var rep protocol.Report
	within(t, "the job's run", func() {
		rep = a.run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Target: "t", Command: "touch ran", Cwd: dir,
			Env: []string{protocol.EnvStdout + "=" + path}})
	})
	if rep.Exit == 0 || !strings.Contains(rep.Reason, "did not return") || !strings.Contains(rep.Reason, "FIFO") {
		t.Errorf("exit %d, reason %q; want it failed, the open said not to return", rep.Exit, rep.Reason)
	}
	if a.brokenWhy() != "" {
		t.Errorf("the agent is marked broken (%s) for a job's own -o", a.brokenWhy())
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the job ran")
	}
}

// A won copy's files are moved from its scratch directory into the job's
// on a filesystem that hangs: the move does not hold the job's report,
// and its slot, for ever. The attempt is interrupted, to run again
// elsewhere (here its queue allows one attempt: it fails saying why),
// and the node is said unable to run jobs.
func TestAgentHungScratchKeep(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	c.edit = func(a *protocol.Assignment) { a.Scratch = true } // as for a job with copies
	one := 1
	if _, err := c.store.SetQueue(context.Background(), protocol.QueueSet{Name: "one", MaxAttempts: &one}); err != nil {
		t.Fatal(err)
	}
	cfg := agentConfig(t, 1)
	cfg.Dial = c.dial
	a := New(cfg)
	a.fsWait = 300 * time.Millisecond
	hang := hangUntilEnd(t)
	a.keep = func(*scratch.Dir, func()) error { <-hang; return nil }
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	id := c.submit(protocol.JobSpec{Target: "t", Queue: "one", Command: "echo made > out", Cwd: t.TempDir()})[0]
	e := c.wait(id)[id]
	if e.State != "F" || !strings.Contains(e.Reason, "cannot run jobs") || !strings.Contains(e.Reason, "moving the attempt's files into place did not return") {
		t.Errorf("job %s (%q); want it interrupted, the node unable to run jobs, the move not returning", e.State, e.Reason)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cannot run them") {
			t.Errorf("the agent ended with %v; want why its node cannot run jobs", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not exit")
	}
}

// A won copy's files are many, on a slow filesystem: moving them takes
// longer than the deadline of one call (twice), each call well within it. The
// move is not cut: the job is done, its file in place.
func TestAgentSlowScratchKeep(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	c.edit = func(a *protocol.Assignment) { a.Scratch = true }
	cfg := agentConfig(t, 1)
	cfg.Dial = c.dial
	a := New(cfg)
	a.fsWait = 2 * time.Second // a stall of the test itself this long would cut it
	a.keep = func(s *scratch.Dir, step func()) error {
		for end := time.Now().Add(2 * a.fsWait); time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond) // one more slow rename
			step()
		}
		return s.Commit(step)
	}
	runAgent(t, a)
	dir := t.TempDir()
	id := c.submit(protocol.JobSpec{Target: "t", Command: "echo made > out", Cwd: dir})[0]
	if e := c.wait(id)[id]; e.State != "D" {
		t.Fatalf("job %s (%q); want it done", e.State, e.Reason)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(b) != "made\n" {
		t.Errorf("out: %q, %v; want the job's file moved into place", b, err)
	}
}
