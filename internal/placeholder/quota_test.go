package placeholder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// quota stands in for a home directory over its quota: while over, files
// are made (an empty file costs no block) but every write to them fails
// with EDQUOT, and statfs still shows the disk nearly empty.
type quota struct {
	over    atomic.Bool
	atClose bool         // refused at the close, as NFS does, not the write
	writes  atomic.Int64 // writes refused
}

func (q *quota) create(path string) (io.WriteCloser, error) {
	f, err := createOutput(path)
	if err != nil {
		return nil, err
	}
	return &quotaFile{f: f, q: q}, nil
}

type quotaFile struct {
	f io.WriteCloser
	q *quota
}

func (f *quotaFile) Write(p []byte) (int, error) {
	if f.q.over.Load() && !f.q.atClose {
		f.q.writes.Add(1)
		return 0, &os.PathError{Op: "write", Path: "out", Err: syscall.EDQUOT}
	}
	return f.f.Write(p)
}

func (f *quotaFile) Close() error {
	err := f.f.Close()
	if f.q.over.Load() && f.q.atClose {
		f.q.writes.Add(1)
		return &os.PathError{Op: "close", Path: "out", Err: syscall.EDQUOT}
	}
	return err
}

// TestAgentPausesForQuota: a home directory over its quota fails every
// write of jobs' output with EDQUOT while statfs shows petabytes free. A
// job whose output cannot be written is stopped and runs again (its
// attempt not counted), as for a full disk, rather than ending done with
// its output lost; the agent then takes no new jobs, saying why once,
// until a small write goes through again, and then runs them all with
// their output whole. Over NFS the quota shows only at the close (or the
// sync): the same.
func TestAgentPausesForQuota(t *testing.T) {
	t.Parallel()
	for _, atClose := range []bool{false, true} {
		t.Run(fmt.Sprintf("at close %v", atClose), func(t *testing.T) {
			t.Parallel()
			testAgentPausesForQuota(t, &quota{atClose: atClose})
		})
	}
}

func testAgentPausesForQuota(t *testing.T, q *quota) {
	c := newCLS(t)
	var logs logBuffer
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.OutputReserve = c.dial, 1<<20
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	a := New(cfg)
	a.create = q.create
	a.statfs = func(string) (diskroom.Free, error) { return diskroom.Free{Bytes: 1 << 50}, nil }
	runAgent(t, a)
	// Over the quota once the agent has started (checkPlace) and asks for
	// work: its jobs find it.
	waitUntil(t, 2*time.Minute, func() error {
		if c.count(protocol.OpNext.Name, false) == 0 {
			return errors.New("the agent asked for no work yet")
		}
		return nil
	})
	q.over.Store(true)

	var ids []int64
	for i := range 4 {
		ids = append(ids, c.submit(protocol.JobSpec{Target: "t", Cwd: t.TempDir(), Command: fmt.Sprintf("echo out%d", i)})...)
	}
	waitUntil(t, 2*time.Minute, func() error {
		if logs.count("taking no new jobs") == 0 {
			return fmt.Errorf("the agent did not pause; log:\n%s", logs.String())
		}
		return nil
	})
	nexts := c.count(protocol.OpNext.Name, false)
	// Paused: writes are tried again (the probe) but no job is asked for.
	refused := q.writes.Load()
	waitUntil(t, 2*time.Minute, func() error {
		if n := q.writes.Load() - refused; n < 2 {
			return fmt.Errorf("%d writes tried while paused, want 2 (the probe)", n)
		}
		return nil
	})
	if n := c.count(protocol.OpNext.Name, false); n != nexts {
		t.Errorf("the paused agent asked for work: %d next requests, %d when it paused", n, nexts)
	}
	for _, id := range ids {
		if s := stateOf(t, c, id); s == "D" || s == "F" {
			d, _ := c.store.Inspect().Job(context.Background(), id)
			t.Fatalf("job %d ended %s while the quota was exceeded, want it queued to run again: %+v", id, s, d)
		}
	}

	q.over.Store(false) // room under the quota again
	ends := c.wait(ids...)
	for i, id := range ids {
		if e := ends[id]; e.State != "D" {
			t.Errorf("job %d ended %+v, want done once there was room", id, e)
			continue
		}
		d, err := c.store.Inspect().Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range d.History {
			if !protocol.DiskFull(h.Reason) || !strings.Contains(h.Reason, "disk quota exceeded") {
				t.Errorf("job %d: an attempt ended %q, want one stopped for the quota", id, h.Reason)
			}
		}
		stdout, _ := job.OutputPaths(cfg.OutDir, id, d.Attempts)
		if b, err := os.ReadFile(stdout); err != nil || string(b) != fmt.Sprintf("out%d\n", i) {
			t.Errorf("job %d: stdout %q, %v; want its line", id, b, err)
		}
	}
	if p, r := logs.count("taking no new jobs"), logs.count("taking jobs"); p != 1 || r != 1 {
		t.Errorf("logged the pause %d times and the resumption %d times, want once each; log:\n%s", p, r, logs.String())
	}
}

// TestOutputLimitRefused: a write refused for want of room (ENOSPC,
// EDQUOT) stops the attempt and pauses the agent; the attempt runs again
// unless it wrote enough to be the cause itself; any other write error
// loses the output but leaves the job running.
func TestOutputLimitRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		written int64
		err     error
		stopped bool
		again   bool
	}{
		{"quota, a few lines written", 100, &os.PathError{Op: "write", Path: "o", Err: syscall.EDQUOT}, true, true},
		{"full disk, nothing written", 0, &os.PathError{Op: "close", Path: "o", Err: syscall.ENOSPC}, true, true},
		{"quota it filled itself", roomOwn, syscall.EDQUOT, true, false},
		{"a home remounted read-only", 100, &os.PathError{Op: "write", Path: "o", Err: syscall.EROFS}, true, true},
		{"a failing disk", 100, &os.PathError{Op: "write", Path: "o", Err: syscall.EIO}, false, false},
		{"a file-size limit", 100, &os.PathError{Op: "write", Path: "o", Err: syscall.EFBIG}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var paused error
			l := &outputLimit{max: -1, reserve: 4000, dir: "/out", over: make(chan struct{}), written: tc.written,
				noRoom: func(err error) { paused = err }}
			l.refused(tc.err)
			select {
			case <-l.over:
				if !tc.stopped {
					t.Errorf("stopped: %q", l.why())
				}
			default:
				if tc.stopped {
					t.Error("not stopped")
				}
			}
			if (paused != nil) != tc.stopped {
				t.Errorf("the agent was told %v, want it told: %v", paused, tc.stopped)
			}
			again := l.othersFilled()
			if (again != "") != tc.again || (again != "" && !protocol.DiskFull(again)) {
				t.Errorf("othersFilled = %q, want it to run again: %v", again, tc.again)
			}
		})
	}
}

// TestStartRefused: an attempt that cannot start because a file it needs
// (its -o file, its scratch directory) is refused for want of room runs
// again and pauses the agent; one refused for another reason fails.
func TestStartRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err   error
		again bool
	}{
		{&os.PathError{Op: "open", Path: "/home/u/out.txt", Err: syscall.EDQUOT}, true},
		{&os.PathError{Op: "mkdir", Path: "/scratch/x", Err: syscall.ENOSPC}, true},
		{&os.PathError{Op: "open", Path: "/home/u/out.txt", Err: syscall.EACCES}, false},
	} {
		a := New(Config{OutDir: t.TempDir()})
		at := &attempt{rep: protocol.Report{ID: 1, Attempt: 1}}
		if a.failPlace(at, tc.err) {
			t.Fatalf("%v: failPlace said the attempt started", tc.err)
		}
		if got := protocol.DiskFull(at.rep.Reason); got != tc.again {
			t.Errorf("%v: reason %q, want it to run again: %v", tc.err, at.rep.Reason, tc.again)
		}
		probed := ""
		if got := a.room.Short(time.Now().Add(time.Hour), func(refused error) error { probed = a.refusedDir(refused); return syscall.EDQUOT }) != nil; got != tc.again {
			t.Errorf("%v: agent paused %v, want %v", tc.err, got, tc.again)
		}
		// Tried again where the refused write was.
		if want := filepath.Dir(tc.err.(*os.PathError).Path); tc.again && probed != want {
			t.Errorf("%v: probed in %q, want %q", tc.err, probed, want)
		}
	}
}

// TestAgentStartsPausedOverQuota: an agent that starts on a home already
// over its quota (a placeholder the site started anew) finds it with a
// write as it starts and takes no job until a write goes through: no
// attempt is spent to find it out.
func TestAgentStartsPausedOverQuota(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	q := &quota{}
	q.over.Store(true)
	var logs logBuffer
	cfg := agentConfig(t, 1)
	cfg.Dial = c.dial
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	a := New(cfg)
	a.create = q.create
	id := c.submit(protocol.JobSpec{Target: "t", Cwd: t.TempDir(), Command: "echo hi"})[0]
	runAgent(t, a)
	waitUntil(t, 2*time.Minute, func() error {
		if logs.count("taking no new jobs") == 0 {
			return fmt.Errorf("the agent did not pause; log:\n%s", logs.String())
		}
		return nil
	})
	refused := q.writes.Load()
	waitUntil(t, 2*time.Minute, func() error {
		if n := q.writes.Load() - refused; n < 1 {
			return errors.New("no probe while paused")
		}
		return nil
	})
	if n := c.count(protocol.OpNext.Name, false); n != 0 {
		t.Errorf("the agent paused from its start asked for work %d times", n)
	}
	if s := stateOf(t, c, id); s != "Q" {
		t.Errorf("job %d is %s, want it queued, untouched", id, s)
	}
	q.over.Store(false)
	if e := c.wait(id)[id]; e.State != "D" {
		t.Fatalf("job ended %+v, want done once there was room", e)
	}
	if d, err := c.store.Inspect().Job(context.Background(), id); err != nil || len(d.History) != 0 {
		t.Errorf("history %+v (%v), want no attempt spent on the quota", d.History, err)
	}
}

// TestAgentStreamSyncRefused: a quota over NFS may show only at the sync
// of a stream file, as the reports of the jobs whose output it holds
// leave. Such a job ended done with its output lost; it now runs again
// once there is room (its attempt not counted), as one whose write was
// refused does, and the agent pauses meanwhile.
func TestAgentStreamSyncRefused(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.Streams = c.dial, true
	a := New(cfg)
	var refused atomic.Int64
	a.streams.sync = func(w *outstream.Writer) error {
		if refused.Add(1) == 1 {
			return &os.PathError{Op: "sync", Path: filepath.Join(cfg.OutDir, protocol.StreamDir, "f"), Err: syscall.EDQUOT}
		}
		return w.Sync()
	}
	runAgent(t, a)
	id := c.submit(protocol.JobSpec{Target: "t", Cwd: t.TempDir(), Command: "echo kept"})[0]
	if e := c.wait(id)[id]; e.State != "D" {
		t.Fatalf("job ended %+v, want done", e)
	}
	d, err := c.store.Inspect().Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Attempts != 2 || len(d.History) != 1 || !protocol.DiskFull(d.History[0].Reason) || !strings.Contains(d.History[0].Reason, "disk quota exceeded") {
		t.Fatalf("%d attempts, before the last %+v; want one stopped for the quota, then one done", d.Attempts, d.History)
	}
	e := d.StdoutStream
	if e == nil || d.OutputLost != "" {
		t.Fatalf("stdout stream %+v, output lost %q; want the second attempt's", e, d.OutputLost)
	}
	var b bytes.Buffer
	if _, err := outstream.ReadFile(&b, e.Path, outstream.Tag{Job: id, Attempt: e.Attempt}, outstream.Extent{Last: e.Last, Bytes: e.Bytes}); err != nil || b.String() != "kept\n" {
		t.Errorf("stdout %q, %v; want its line", b.String(), err)
	}
}

// TestStreamSyncLostStaysLost: a sync that failed may have dropped the
// pages it held (Linux marks them clean), so output written before it is
// not said synced by a later sync that succeeds; output written after is.
func TestStreamSyncLostStaysLost(t *testing.T) {
	t.Parallel()
	a, _ := streamAgent(t, 0)
	fail := true
	a.streams.sync = func(w *outstream.Writer) error {
		if fail {
			return syscall.EIO
		}
		return w.Sync()
	}
	before := a.run(context.Background(), protocol.Assignment{ID: 1, Attempt: 1, Command: "echo before", Target: "t"})
	first := []protocol.Report{before}
	a.syncReports(context.Background(), first)
	if len(first[0].Streamed) != 0 || !strings.Contains(first[0].OutputLost, "input/output error") {
		t.Fatalf("a failed sync: streamed %+v, lost %q; want the loss", first[0].Streamed, first[0].OutputLost)
	}
	fail = false
	after := a.run(context.Background(), protocol.Assignment{ID: 2, Attempt: 1, Command: "echo after", Target: "t"})
	again := []protocol.Report{before, after}
	a.syncReports(context.Background(), again)
	if len(again[0].Streamed) != 0 || again[0].OutputLost == "" {
		t.Errorf("output written before the failed sync, synced again: streamed %+v, lost %q; want it lost", again[0].Streamed, again[0].OutputLost)
	}
	if len(again[1].Streamed) != 1 || again[1].OutputLost != "" {
		t.Errorf("output written after it: streamed %+v, lost %q; want it synced", again[1].Streamed, again[1].OutputLost)
	}
}
