package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/protocol"
)

// Something other than the CLS answering at its address once the agent
// has been connected (another user's server on the CLS's port while the
// CLS restarts, which anyone on that host may bind) does not stop the
// agent: it retries as it does while the CLS is unreachable, its job runs
// on, and the job is reported once the CLS answers again. It used to stop
// at the first mismatch, its job's report and output lost. Before any
// connection a mismatch still stops it at once (a wrong pin:
// TestAgentRefusesWrongHostKey in package sshserver).
func TestAgentOutlivesImpostor(t *testing.T) {
	t.Parallel()
	c := newCLSLease(t, time.Minute)
	var impostor atomic.Bool
	var tried atomic.Int32
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		if impostor.Load() {
			tried.Add(1)
			return nil, fmt.Errorf("ssh to the CLS at 127.0.0.1:2222: ssh: handshake failed: %w: 127.0.0.1:2222 offered SHA256:other, pinned SHA256:cls", sshkey.ErrHostKeyMismatch)
		}
		return c.dial(ctx)
	}
	dir := t.TempDir()
	ids := c.submit(protocol.JobSpec{Target: "t", Command: "touch started; while [ ! -e release ]; do sleep 0.02; done; echo ran >> ran.txt", Cwd: dir})
	cfg := agentConfig(t, 1)
	cfg.Dial, cfg.Reconnect = dial, 2*time.Minute
	a := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	alive := func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("the agent stopped: %v", err)
		default:
			return nil
		}
	}
	waitUntil(t, 20*time.Second, func() error {
		if err := alive(); err != nil {
			return err
		}
		if !exists(filepath.Join(dir, "started")) {
			return errors.New("job never started")
		}
		return nil
	})
	impostor.Store(true)
	c.cut()
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The job ends while the impostor answers: its report waits.
	waitUntil(t, 60*time.Second, func() error {
		if err := alive(); err != nil {
			t.Fatal(err)
		}
		if !exists(filepath.Join(dir, "ran.txt")) || tried.Load() < 3 {
			return fmt.Errorf("tried the impostor %d times", tried.Load())
		}
		return nil
	})
	impostor.Store(false)
	ranOnce(t, c, ids[0], dir)
	if err := alive(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("agent: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("agent did not stop")
	}
}
