package placeholder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/protocol"
)

// TestOutputLimitOthersFilled: an attempt stopped for the reserve is one
// others filled the disk for (protocol.ReasonDiskFull) only when it wrote
// less than the reserve; stopped at its cap, or past the cap and the
// reserve at once (the cap's reason, the job's own), it is not.
func TestOutputLimitOthersFilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		max, free   int64
		takes       []int
		others      bool
		reasonSays  string
		wantWritten int64
	}{
		{"a line as the disk is full", -1, 4010, []int{100}, true, "nearly full", 10},
		{"nothing written", -1, 3000, []int{5}, true, "nearly full", 0},
		{"wrote the reserve itself", -1, 9000, []int{4000, 4000, 4000}, false, "nearly full", 5000},
		{"its cap", 100, 1 << 40, []int{500}, false, "cap of 100 bytes", 100},
		{"its cap and the reserve at once", 100, 4050, []int{500}, false, "cap of 100 bytes", 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &outputLimit{max: tc.max, reserve: 4000, dir: "/out", over: make(chan struct{})}
			written := int64(0)
			l.statfs = func(string) (diskroom.Free, error) { return diskroom.Free{Bytes: tc.free - written}, nil } // the attempt's own writes fill it
			for _, n := range tc.takes {
				written += int64(l.take(n))
			}
			if written != tc.wantWritten {
				t.Errorf("wrote %d, want %d", written, tc.wantWritten)
			}
			if !strings.Contains(l.why(), tc.reasonSays) {
				t.Errorf("reason %q, want it to say %q", l.why(), tc.reasonSays)
			}
			others := l.othersFilled()
			if (others != "") != tc.others || (others != "" && !protocol.DiskFull(others)) || (others != "" && !protocol.IsInterrupted(others)) {
				t.Errorf("othersFilled = %q, want one (an interruption, protocol.DiskFull): %v", others, tc.others)
			}
		})
	}
}

// TestDecideDiskFull: an agent whose output disk is below the reserve
// asks for no work, hands back the jobs it holds, and still sends its
// reports.
func TestDecideDiskFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		s    loopState
		want move
	}{
		{"idle: no poll", loopState{Free: 4, DiskFull: true}, move{}},
		{"short jobs: no prefetch", loopState{Running: 4, Depth: 8, DiskFull: true}, move{}},
		{"held jobs go back", loopState{Free: 1, Running: 1, Held: 2, Depth: 2, DiskFull: true}, move{GiveBack: true}},
		{"reports due: alone", loopState{Free: 2, Running: 2, ReportsDue: true, DiskFull: true}, move{ReportAlone: true}},
		{"exiting: as ever", loopState{Cancelled: true, DiskFull: true}, move{Exiting: true, Finish: true}},
	} {
		if got := decide(tc.s); got != tc.want {
			t.Errorf("%s: decide(%+v) =\n\t%+v, want\n\t%+v", tc.name, tc.s, got, tc.want)
		}
	}
}

// disk is a free-space function a test sets: what Agent.statfs returns,
// and how often it was asked.
type disk struct {
	free  atomic.Int64
	short atomic.Bool // fewer inodes free than are kept
	looks atomic.Int64
}

func (d *disk) statfs(string) (diskroom.Free, error) {
	d.looks.Add(1)
	f := diskroom.Free{Bytes: d.free.Load(), Inodes: 1 << 20, Keep: 1 << 16}
	if d.short.Load() {
		f.Inodes = f.Keep - 1
	}
	return f, nil
}

// logBuffer is a log a test reads while the agent writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// TestAgentPausesForDisk: a job stopped because the disk filled under it,
// having written less than the reserve, is handed back (requeued, its
// attempt not counted), not failed; the agent then asks for no work
// while the disk stays below the reserve (looking again at each turn,
// without spinning), heartbeats meanwhile, logs the pause once, and when
// there is room again logs that once and runs the job to its end.
func TestAgentPausesForDisk(t *testing.T) {
	t.Parallel()
	c := newCLS(t)
	dir := t.TempDir()
	const reserve = 1 << 20
	d := &disk{}
	d.free.Store(reserve * 4)
	var logs logBuffer
	cfg := agentConfig(t, 2)
	cfg.Dial, cfg.OutputReserve = c.dial, reserve
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	a := New(cfg)
	a.statfs = d.statfs
	// What the heartbeats say of the pause (Heartbeat.Paused), last first.
	var saidPaused, saidResumed atomic.Bool
	c.srv.OnPaused = func(_ int64, paused bool) {
		if paused {
			saidPaused.Store(true)
		} else if saidPaused.Load() {
			saidResumed.Store(true)
		}
	}
	runAgent(t, a)

	// The job writes a line, says it runs, and waits for go to write more.
	id := c.submit(protocol.JobSpec{Target: "t", Cwd: dir,
		Command: `echo start; touch started-$MQ_ATTEMPT; while [ ! -e go ]; do sleep 0.02; done; echo more`})[0]
	waitUntil(t, 2*time.Minute, func() error {
		if _, err := os.Stat(filepath.Join(dir, "started-1")); err != nil {
			return err
		}
		return nil
	})
	d.free.Store(reserve / 2) // something else filled the disk
	nexts := -1
	waitUntil(t, 2*time.Minute, func() error {
		if logs.count("taking no new jobs") == 0 {
			return fmt.Errorf("the agent did not pause; log:\n%s", logs.String())
		}
		if nexts < 0 {
			nexts = c.count(protocol.OpNext.Name, false)
		}
		return nil
	})
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Minute, func() error {
		switch s := stateOf(t, c, id); s {
		case "Q":
			return nil
		case "F", "D":
			t.Fatalf("job %d ended %s, want it queued again", id, s)
		}
		return fmt.Errorf("job %d is %s, want it queued again", id, stateOf(t, c, id))
	})
	info, err := c.store.Inspect().Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.History) != 1 || !protocol.DiskFull(info.History[0].Reason) {
		t.Fatalf("history %+v, want the attempt stopped for the disk", info.History)
	}
	t.Logf("attempt 1: %s", info.History[0].Reason)

	// Paused: several looks at the disk (at least each second), several
	// heartbeats, and no request for work meanwhile.
	looks, beats := d.looks.Load(), c.count(protocol.OpHeartbeat.Name, false)
	waitUntil(t, 2*time.Minute, func() error {
		if n := d.looks.Load() - looks; n < 3 {
			return fmt.Errorf("the agent looked at the disk %d times since the job was requeued, want 3", n)
		}
		if n := c.count(protocol.OpHeartbeat.Name, false) - beats; n < 2 {
			return fmt.Errorf("%d heartbeats while paused, want 2", n)
		}
		if !saidPaused.Load() {
			return errors.New("no heartbeat said the agent was paused")
		}
		return nil
	})
	if n := c.count(protocol.OpNext.Name, false); n != nexts {
		t.Errorf("the paused agent asked for work: %d next requests, %d when it paused", n, nexts)
	}
	if s := stateOf(t, c, id); s != "Q" {
		t.Errorf("the paused agent took the job again: %s", s)
	}
	if n := d.looks.Load() - looks; n > 1000 {
		t.Errorf("the paused agent looked at the disk %d times: a busy loop", n)
	}

	d.free.Store(reserve * 4) // room again
	e := c.wait(id)[id]
	if e.State != "D" {
		t.Fatalf("job ended %+v, want done once there was room", e)
	}
	if info, err := c.store.Inspect().Job(context.Background(), id); err != nil || len(info.History) != 1 || !protocol.DiskFull(info.History[0].Reason) {
		t.Errorf("history %+v (%v), want the one attempt stopped for the disk before the one that ran", info.History, err)
	} else {
		t.Logf("attempt %d ran; handed back unstarted: %+v", info.Attempts, info.Unstarted)
	}
	waitUntil(t, 2*time.Minute, func() error {
		if !saidResumed.Load() {
			return errors.New("no heartbeat said the pause ended")
		}
		return nil
	})
	if p, r := logs.count("taking no new jobs"), logs.count("room on the output disk again"); p != 1 || r != 1 {
		t.Errorf("logged the pause %d times and the resumption %d times, want once each", p, r)
	}
}

// filling is a free-space function for a disk of size bytes that the
// files under dir fill: an attempt's own output fills it as it writes.
func filling(dir string, size int64) func(string) (diskroom.Free, error) {
	return func(string) (diskroom.Free, error) {
		var used int64
		err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if fi, err := e.Info(); err == nil {
				used += fi.Size()
			}
			return nil
		})
		return diskroom.Free{Bytes: size - used}, err
	}
}

// TestOutputLimitInodes: the limit keeps the filesystem's inodes as the
// server does: with fewer free than are kept it writes nothing, says so,
// and the attempt, having written less than the reserve, runs again; a
// filesystem that reports no inode count (btrfs) is never short.
func TestOutputLimitInodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		free  diskroom.Free
		wrote int
	}{
		{"short", diskroom.Free{Bytes: 1 << 40, Inodes: 99, Keep: 100}, 0},
		{"at the reserve", diskroom.Free{Bytes: 1 << 40, Inodes: 100, Keep: 100}, 10},
		{"no inode count", diskroom.Free{Bytes: 1 << 40}, 10},
	} {
		l := &outputLimit{reserve: 4000, dir: "/out", over: make(chan struct{})}
		l.statfs = func(string) (diskroom.Free, error) { return tc.free, nil }
		if n := l.take(10); n != tc.wrote {
			t.Errorf("%s: take(10) = %d, want %d", tc.name, n, tc.wrote)
		}
		if tc.wrote > 0 {
			if l.why() != "" {
				t.Errorf("%s: stopped: %s", tc.name, l.why())
			}
			continue
		}
		if !strings.Contains(l.why(), "nearly out of inodes") {
			t.Errorf("%s: reason %q, want it to say the inodes ran short", tc.name, l.why())
		}
		if o := l.othersFilled(); !protocol.DiskFull(o) || !strings.Contains(o, "inodes") {
			t.Errorf("%s: othersFilled = %q, want protocol.DiskFull, for the inodes", tc.name, o)
		}
	}
}

// TestDiskFullInodes: an agent whose output disk has fewer free inodes
// than are kept pauses as for bytes, and logs it once.
func TestDiskFullInodes(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	cfg := agentConfig(t, 1)
	cfg.OutputReserve = 1 << 20
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	a := New(cfg)
	d := &disk{}
	d.free.Store(1 << 30)
	a.statfs = d.statfs
	w := &workLoop{a: a}
	if w.diskFull() {
		t.Fatal("paused with room")
	}
	d.short.Store(true)
	if !w.diskFull() || !w.diskFull() {
		t.Fatal("not paused with the inodes short")
	}
	d.short.Store(false)
	if w.diskFull() {
		t.Fatal("still paused with inodes again")
	}
	if p, r := logs.count("taking no new jobs"), logs.count("room on the output disk again"); p != 1 || r != 1 {
		t.Errorf("logged the pause %d times and the resumption %d times, want once each", p, r)
	}
}
