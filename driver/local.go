package driver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// localBackend runs jobs on this machine with os/exec: each consumer is a
// worker that runs one unit at a time, a bundle's jobs one after another in
// order. Jobs run as the metaqueue's placeholders run them: /bin/sh -c in
// their own process group, stdin from /dev/null, exit status 128+N when
// killed by signal N.
//
// Prerequisites mean what they mean in the metaqueue, over the jobs this
// driver issued: a job runs once every job of each prerequisite target has
// succeeded (a target with no jobs yet means wait), and a failed or blocked
// one blocks it (state B). A unit that must wait is parked, not held by a
// consumer, so jobs issued after it (its prerequisites among them) still
// run; running units, parked ones released included, never exceed the
// consumers.
type localBackend struct {
	d   *Driver
	run func(context.Context, *entry) Result // b.exec; tests may replace it
	sem chan struct{}

	mu      sync.Mutex
	targets map[string]*targetCount
	parked  []*unit
	running sync.WaitGroup // released parked units
}

type targetCount struct{ total, done, bad int }

func newLocal(d *Driver) *localBackend {
	b := &localBackend{d: d, sem: make(chan struct{}, d.cfg.Consumers), targets: map[string]*targetCount{}}
	b.run = b.exec
	return b
}

// issue counts a job of target as soon as it is issued, so its dependents
// wait for it even while it sits in the buffer.
func (b *localBackend) issue(target string) {
	b.mu.Lock()
	b.count(target).total++
	b.mu.Unlock()
}

// unissue takes back an issue whose job was never accepted.
func (b *localBackend) unissue(target string) {
	b.mu.Lock()
	b.count(target).total--
	b.mu.Unlock()
	b.release(b.d.ctx)
}

func (b *localBackend) count(target string) *targetCount {
	t := b.targets[target]
	if t == nil {
		t = &targetCount{}
		b.targets[target] = t
	}
	return t
}

// readiness says whether a unit may run now: every prerequisite of its jobs
// complete (ready), one bad (blocked), else wait. Call with b.mu held.
func (b *localBackend) readiness(u *unit) (ready, blocked bool) {
	ready = true
	for _, e := range u.jobs {
		for _, p := range e.spec.Prereqs {
			t := b.targets[p]
			switch {
			case t != nil && t.bad > 0:
				return false, true
			case t == nil || t.total == 0 || t.done < t.total:
				ready = false
			}
		}
	}
	return ready, false
}

func (b *localBackend) close() {
	b.running.Wait()
	b.mu.Lock()
	parked := b.parked
	b.parked = nil
	b.mu.Unlock()
	for _, u := range parked {
		for _, e := range u.jobs {
			b.d.finish(e.rec, Result{Err: &JobError{Key: e.rec.key, Reason: "driver stopped while it waited for its prerequisites"}})
		}
	}
}

func (b *localBackend) consume(ctx context.Context) {
	for u := range b.d.ready {
		b.mu.Lock()
		ready, blocked := b.readiness(u)
		if !ready && !blocked {
			b.parked = append(b.parked, u)
			b.mu.Unlock()
			continue
		}
		b.mu.Unlock()
		b.runUnit(ctx, u, blocked)
	}
}

// runUnit runs a unit (or reports it blocked), then releases parked units
// its end made ready.
func (b *localBackend) runUnit(ctx context.Context, u *unit, blocked bool) {
	for _, e := range u.jobs {
		var res Result
		switch {
		case blocked:
			res = Result{State: "B", Err: &JobError{Key: e.rec.key, State: "B"}}
		case ctx.Err() != nil:
			res = Result{Err: &JobError{Key: e.rec.key, Reason: "driver stopped before it ran"}}
		default:
			b.sem <- struct{}{}
			res = b.run(ctx, e)
			<-b.sem
		}
		b.mu.Lock()
		t := b.count(e.spec.Target)
		if res.State == "D" {
			t.done++
		} else {
			t.bad++ // failed, blocked or never run: its dependents cannot run
		}
		b.mu.Unlock()
		b.d.finish(e.rec, res)
	}
	b.release(ctx)
}

// release runs the parked units that are now ready or blocked.
func (b *localBackend) release(ctx context.Context) {
	b.mu.Lock()
	var keep []*unit
	type pending struct {
		u       *unit
		blocked bool
	}
	var start []pending
	for _, u := range b.parked {
		ready, blocked := b.readiness(u)
		if ready || blocked {
			start = append(start, pending{u, blocked})
		} else {
			keep = append(keep, u)
		}
	}
	b.parked = keep
	b.running.Add(len(start))
	b.mu.Unlock()
	for _, s := range start {
		go func() {
			defer b.running.Done()
			b.runUnit(ctx, s.u, s.blocked)
		}()
	}
}

func (b *localBackend) exec(ctx context.Context, e *entry) Result {
	k := e.rec.key
	fail := func(err error) Result {
		return Result{State: "F", Err: &JobError{Key: k, State: "F", Reason: "could not start: " + err.Error()}}
	}
	cmd := exec.Command("/bin/sh", "-c", e.spec.Command)
	cmd.Dir = e.spec.Cwd
	cmd.Env = append(os.Environ(), "MQ_TARGET="+e.spec.Target, "MQ_QUEUE="+e.spec.Queue, "MQ_DRIVER_KEY="+strconv.FormatUint(uint64(k), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if dir := b.d.cfg.OutDir; dir != "" {
		name := filepath.Join(dir, strconv.FormatUint(uint64(k), 10))
		out, err := os.Create(name + ".out")
		if err != nil {
			return fail(err)
		}
		defer out.Close()
		errf, err := os.Create(name + ".err")
		if err != nil {
			return fail(err)
		}
		defer errf.Close()
		cmd.Stdout, cmd.Stderr = out, errf
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-waited:
	case <-ctx.Done():
		pg := cmd.Process.Pid
		syscall.Kill(-pg, syscall.SIGTERM)
		t := time.AfterFunc(time.Second, func() { syscall.Kill(-pg, syscall.SIGKILL) })
		<-waited
		t.Stop()
		return Result{Err: &JobError{Key: k, Reason: fmt.Sprintf("killed: driver stopped (%v)", ctx.Err())}}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leave no stragglers, like a placeholder
	exit := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exit = 128 + int(ws.Signal())
	}
	st := "D"
	if exit != 0 {
		st = "F"
	}
	return Result{State: st, Exit: exit}
}
