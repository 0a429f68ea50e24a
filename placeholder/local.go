package placeholder

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// LocalSite keeps N placeholder processes running on this machine: the
// embedded default site. Each is this same agent, started as a child
// process that reaches the CLS over its Unix socket.
type LocalSite struct {
	// Command returns the command line of placeholder i.
	Command func(i int) *exec.Cmd
	N       int
	Log     *slog.Logger
	// Exited, if set, is told the pid of a placeholder process that ended,
	// so the CLS can requeue its jobs at once instead of after their lease.
	Exited func(pid int)

	mu    sync.Mutex
	procs map[int]*exec.Cmd
	wg    sync.WaitGroup
	stop  chan struct{}
}

// Start launches the placeholders and keeps them running until Stop.
func (l *LocalSite) Start() {
	l.procs = map[int]*exec.Cmd{}
	l.stop = make(chan struct{})
	for i := 0; i < l.N; i++ {
		l.wg.Add(1)
		go l.keep(i)
	}
}

func (l *LocalSite) keep(i int) {
	defer l.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		cmd := l.Command(i)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's ^C reaches the CLS, which stops us in order
		started := time.Now()
		if err := cmd.Start(); err != nil {
			l.Log.Error("cannot start a local placeholder", "err", err)
		} else {
			l.mu.Lock()
			l.procs[i] = cmd
			l.mu.Unlock()
			err := cmd.Wait()
			l.mu.Lock()
			delete(l.procs, i)
			l.mu.Unlock()
			if l.Exited != nil {
				l.Exited(cmd.Process.Pid)
			}
			select {
			case <-l.stop:
				return
			default:
			}
			l.Log.Warn("local placeholder exited; restarting it", "slot", i, "err", err)
			if time.Since(started) > time.Minute {
				backoff = 100 * time.Millisecond
			}
		}
		select {
		case <-l.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// Stop asks every placeholder to stop (SIGTERM: they kill and report their
// jobs as interrupted) and waits for them, killing any still alive when ctx
// ends.
func (l *LocalSite) Stop(ctx context.Context) {
	if l.stop == nil {
		return
	}
	close(l.stop)
	l.mu.Lock()
	for _, c := range l.procs {
		c.Process.Signal(syscall.SIGTERM)
	}
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		l.mu.Lock()
		for _, c := range l.procs {
			c.Process.Signal(os.Kill)
		}
		l.mu.Unlock()
		<-done
	}
}
