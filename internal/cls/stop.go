package cls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/mqhome"
)

// ErrNotServing is Stop's error when no CLS serves the home.
var ErrNotServing = errors.New("no CLS is serving")

// KeepSignal stops a CLS as SIGTERM does, but leaves its local
// placeholders running their jobs (KeepRunning): cls serve stops so on
// it, and Stop sends it when asked to keep them. A Go program that does
// not catch it ignores it: a CLS older than this one goes on serving, and
// loses nothing.
const KeepSignal = syscall.SIGUSR1

// KeepRunning makes Run, when it stops, leave the local placeholders
// running instead of stopping them (cls stop --keep-running): they run
// their jobs to the end, take no new ones, and report them to the next
// CLS on this home, as after the CLS is killed. Called after Run began
// stopping them, it changes nothing.
func (c *CLS) KeepRunning() { c.keepRunning.Store(true) }

// Stop stops the CLS serving home as SIGTERM from its owner does (with
// keep, as KeepSignal does), and waits until it has stopped: until its
// lock on home (lockHome), which it holds to its last step, is free. It
// returns the CLS's process id. The lock file is the owner's and holds the
// pid of whoever holds its lock, so no other process is signalled; a CLS
// of another user cannot be (EPERM).
func Stop(ctx context.Context, home string, keep bool) (pid int, err error) {
	path := filepath.Join(home, "cls.lock")
	f, err := mqhome.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w %s", ErrNotServing, home)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if free(f) {
		return 0, fmt.Errorf("%w %s", ErrNotServing, home)
	}
	// A CLS writes its pid just after it takes the lock.
	for pid, err = lockPID(f); err != nil; pid, err = lockPID(f) {
		if free(f) {
			return 0, fmt.Errorf("%w %s", ErrNotServing, home)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
	}
	sig := syscall.SIGTERM
	if keep {
		sig = KeepSignal
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return pid, fmt.Errorf("signalling the CLS (pid %d): %w", pid, err)
	}
	for !free(f) {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return pid, fmt.Errorf("the CLS (pid %d) has not stopped: %w", pid, err)
		}
	}
	return pid, nil
}

// free reports whether no process holds the lock on f, taking it for a
// moment to see.
func free(f *os.File) bool {
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil {
		return false
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// lockPID reads the pid lockHome wrote in f.
func lockPID(f *os.File) (int, error) {
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, 32), 32))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s holds no process id", f.Name())
	}
	return pid, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
