package driver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// localBackend runs jobs on this machine with os/exec: each consumer is a
// worker that runs one unit at a time, a bundle's jobs one after another in
// order. Jobs run as the metaqueue's placeholders run them: /bin/sh -c in
// their own process group, stdin from /dev/null, exit status 128+N when
// killed by signal N.
type localBackend struct{ d *Driver }

func newLocal(d *Driver) *localBackend { return &localBackend{d: d} }

func (b *localBackend) close() {}

func (b *localBackend) consume(ctx context.Context) {
	for u := range b.d.ready {
		for _, e := range u.jobs {
			if ctx.Err() != nil {
				b.d.finish(e.rec, Result{Err: &JobError{Key: e.rec.key, Reason: "driver stopped before it ran"}})
				continue
			}
			b.d.finish(e.rec, b.run(ctx, e))
		}
	}
}

func (b *localBackend) run(ctx context.Context, e *entry) Result {
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
