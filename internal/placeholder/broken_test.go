package placeholder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
	runEnds(t, done, time.Minute, "data root")
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

// A node out of descriptors (or processes, or memory: pipe and fork
// fail) fails no job: the attempt is interrupted and the agent stops
// taking jobs. Not parallel: the test lowers the process's descriptor
// limit to what is open, so the job's first pipe fails with EMFILE.
func TestAgentOutOfDescriptors(t *testing.T) {
	a := runner(t, "")
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	low := syscall.Rlimit{Cur: uint64(len(fds) - 1), Max: old.Max} // less the one ReadDir had open
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower the descriptor limit:", err)
	}
	rep := a.run(context.Background(), protocol.Assignment{ID: 7, Attempt: 1, Command: "true", Target: "t"})
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if !protocol.IsInterrupted(rep.Reason) || !strings.Contains(rep.Reason, "too many open files") {
		t.Fatalf("a job on a node out of descriptors ended exit %d %q; want interrupted, saying why", rep.Exit, rep.Reason)
	}
	if err := a.brokenErr(); err == nil {
		t.Error("the agent takes jobs on")
	}
}

// outOfRoom tells a node out of room from a job's own failure.
func TestOutOfRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		node bool
	}{
		{&os.PathError{Op: "fork/exec", Path: "/bin/sh", Err: syscall.EAGAIN}, true},
		{os.NewSyscallError("pipe2", syscall.EMFILE), true},
		{os.NewSyscallError("pipe2", syscall.ENFILE), true},
		{&os.PathError{Op: "fork/exec", Path: "/bin/sh", Err: syscall.ENOMEM}, true},
		{&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ENOENT}, false},
		{&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.E2BIG}, false},
		{&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.EACCES}, false},
	} {
		var pf placeFault
		if got := errors.As(outOfRoom(tc.err), &pf); got != tc.node {
			t.Errorf("outOfRoom(%v) is the node's: %v, want %v", tc.err, got, tc.node)
		}
	}
}
