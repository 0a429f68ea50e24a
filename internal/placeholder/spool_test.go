package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/protocol"
)

// lockedLog is a log an agent writes while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// unreachableCLS is a CLS that goes away for good once down is set: each
// dial fails, moving the agent's clock 4 minutes on.
func unreachableCLS(c *cls, clock *fakeClock, down *atomic.Bool) func(ctx context.Context) (io.ReadWriteCloser, error) {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		if down.Load() {
			clock.advance(4 * time.Minute)
			return nil, fmt.Errorf("dial unix /nowhere: %w", syscall.ECONNREFUSED)
		}
		return c.dial(ctx)
	}
}

// deliverOnce applies what the agent spooled in out as its CLS would
// when it next serves the site, and checks it held one report.
func deliverOnce(t *testing.T, c *cls, a *Agent, out string) {
	t.Helper()
	n, err := spool.Deliver(spool.OS{}, filepath.Join(out, spool.Dir), os.Getuid(), func(f spool.File) error {
		if f.Placeholder != a.ID() {
			t.Errorf("spooled for placeholder %d, not %d", f.Placeholder, a.ID())
		}
		return c.store.ReportBatch(context.Background(), protocol.ReportBatch{Placeholder: f.Placeholder, Reports: f.Reports})
	}, slog.New(slog.DiscardHandler))
	if err != nil || n != 1 {
		t.Fatalf("Deliver: %d reports, %v; want the job's one", n, err)
	}
}

// TestAgentDrainsUnreachable: an agent with a slot free, whose poll
// waits at the CLS, gives up on it when it stays unreachable past
// Reconnect, but not on its running job: it takes no more, lets the job
// run to its end and spools its report, which ends it Done in its first
// attempt.
func TestAgentDrainsUnreachable(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Hour)
	clock := &fakeClock{now: time.Now()}
	var down atomic.Bool
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt", Cwd: dir})
	var log lockedLog
	cfg := agentConfig(t, 2)
	cfg.Dial, cfg.Now, cfg.Reconnect = unreachableCLS(c, clock, &down), clock.Now, 10*time.Minute
	cfg.Log = slog.New(slog.NewTextHandler(&log, nil))
	a := New(cfg)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	waitUntil(t, 20*time.Second, func() error {
		if !exists(filepath.Join(dir, "started")) {
			return errors.New("job never started")
		}
		return nil
	})
	down.Store(true)
	c.cut()
	waitUntil(t, time.Minute, func() error {
		if !strings.Contains(log.String(), "taking no more jobs; the running ones go on") {
			return fmt.Errorf("the agent did not give up on its CLS and drain:\n%s", log.String())
		}
		return nil
	})
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unreachable for 10m0s") {
			t.Fatalf("Run: %v, want the CLS unreachable for 10m0s", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not end once its job did")
	}
	deliverOnce(t, c, a, cfg.OutDir)
	ranOnce(t, c, ids[0], dir)
}

// TestAgentSpoolsReports: the CLS goes away while a job runs and stays
// away past Reconnect (by the agent's clock, moved 4 minutes a failed
// dial); the job ends meanwhile, and the agent, giving up, writes its
// report to the spool under its output directory. Applied as that
// placeholder's report (what the CLS does when it next serves the site),
// it ends the job Done in its first attempt; applied again, it changes
// nothing.
func TestAgentSpoolsReports(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Hour)
	clock := &fakeClock{now: time.Now()}
	var down atomic.Bool
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		if down.Load() {
			clock.advance(4 * time.Minute)
			return nil, fmt.Errorf("dial unix /nowhere: %w", syscall.ECONNREFUSED)
		}
		return c.dial(ctx)
	}
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt", Cwd: dir})
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.Now, cfg.Reconnect = dial, clock.Now, 10*time.Minute
	a := New(cfg)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	waitUntil(t, 20*time.Second, func() error {
		if !exists(filepath.Join(dir, "started")) {
			return errors.New("job never started")
		}
		return nil
	})
	down.Store(true)
	c.cut()
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unreachable for 10m0s") {
			t.Fatalf("Run: %v, want the CLS unreachable for 10m0s", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not give up on its CLS")
	}
	spooled := filepath.Join(cfg.OutDir, spool.Dir)
	apply := func(f spool.File) error {
		if f.Placeholder != a.ID() {
			t.Errorf("spooled for placeholder %d, not %d", f.Placeholder, a.ID())
		}
		return c.store.ReportBatch(context.Background(), protocol.ReportBatch{Placeholder: f.Placeholder, Reports: f.Reports})
	}
	for range 2 {
		// A second time: as the CLS may after a crash between its commit
		// and the file's removal.
		files, _ := filepath.Glob(filepath.Join(spooled, "*"+spool.Suffix))
		for _, f := range files {
			if err := os.Link(f, f+".again"); err != nil {
				t.Fatal(err)
			}
		}
		n, err := spool.Deliver(spool.OS{}, spooled, os.Getuid(), apply, slog.New(slog.DiscardHandler))
		if err != nil || n != 1 {
			t.Fatalf("Deliver: %d reports, %v; want the job's one", n, err)
		}
		for _, f := range files {
			if err := os.Rename(f+".again", f); err != nil {
				t.Fatal(err)
			}
		}
		ranOnce(t, c, ids[0], dir)
	}
}

// TestAgentOutputWhileDialHangs: the connection drops while a job runs,
// and the agent's next dial hangs (a network that drops packets: it
// holds a.mu up to its 30 s timeout). The job ends meanwhile: its output
// reaches the stream file at once, not after the dial, and once the CLS
// is reached again the job is Done in one attempt with its output whole.
// (Its output took the placeholder's id under a.mu and waited out the
// dial: reported "output: not written in time", and lost.)
func TestAgentOutputWhileDialHangs(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Hour)
	var hang atomic.Bool
	release, dialing := make(chan struct{}), make(chan struct{}, 1)
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		if hang.Load() {
			select {
			case dialing <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return c.dial(ctx)
	}
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt; echo finished", Cwd: dir})
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.Streams = dial, true
	startAgentCfg(t, c, cfg)
	waitUntil(t, 20*time.Second, func() error {
		if !exists(filepath.Join(dir, "started")) {
			return errors.New("job never started")
		}
		return nil
	})
	hang.Store(true)
	c.cut()
	select {
	case <-dialing:
	case <-time.After(time.Minute):
		t.Fatal("the agent did not dial again after the cut")
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Well within the dial's 30 s: the output is in a stream file while
	// the dial still hangs.
	waitUntil(t, 20*time.Second, func() error {
		files, _ := filepath.Glob(filepath.Join(cfg.OutDir, "streams", "*.mqs"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), "finished") {
				return nil
			}
		}
		return errors.New("the job's output is not in a stream file")
	})
	hang.Store(false)
	close(release)
	ranOnce(t, c, ids[0], dir)
	d, err := c.store.Inspect().Job(context.Background(), ids[0])
	if err != nil || d.OutputLost != "" {
		t.Fatalf("job %+v, %v: output lost", d, err)
	}
}
