package placeholder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// killGrace is how long a job's process group has between SIGTERM and
// SIGKILL.
const killGrace = time.Second

type proc struct {
	ref     protocol.JobRef
	pgid    int
	started time.Time
	once    sync.Once

	mu     sync.Mutex
	reason string // why it was killed; set by whichever kill came first
}

func (a *Agent) runningRefs() []protocol.JobRef {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	refs := make([]protocol.JobRef, 0, len(a.running)+len(a.held))
	for _, p := range a.running {
		refs = append(refs, p.ref)
	}
	for _, r := range a.held {
		refs = append(refs, r)
	}
	return refs
}

// longestRunning is how long the oldest running job has run.
func (a *Agent) longestRunning() time.Duration {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	var d time.Duration
	for _, p := range a.running {
		d = max(d, time.Since(p.started))
	}
	return d
}

// killAll stops every running job as interrupted.
func (a *Agent) killAll() {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	for _, p := range a.running {
		p.kill(protocol.ReasonInterrupted)
	}
}

// kill ends a running job's whole process group: SIGTERM, then SIGKILL.
func (a *Agent) kill(ref protocol.JobRef, reason string) {
	a.runMu.Lock()
	p := a.running[ref.ID]
	if h, ok := a.held[ref.ID]; ok && h.Attempt == ref.Attempt {
		delete(a.held, ref.ID) // never started: just forget it
	}
	a.runMu.Unlock()
	if p == nil || p.ref.Attempt != ref.Attempt {
		return
	}
	p.kill(reason)
}

func (p *proc) kill(reason string) {
	p.once.Do(func() {
		p.mu.Lock()
		p.reason = reason
		p.mu.Unlock()
		syscall.Kill(-p.pgid, syscall.SIGTERM)
		time.AfterFunc(killGrace, func() { syscall.Kill(-p.pgid, syscall.SIGKILL) })
	})
}

func (a *Agent) outputFiles(asg protocol.Assignment) (stdout, stderr *os.File, err error) {
	outPath, errPath := job.OutputPaths(a.cfg.OutDir, asg.ID, asg.Attempt)
	dir := filepath.Dir(outPath)
	if _, ok := a.dirs.Load(dir); !ok {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, err
		}
		a.dirs.Store(dir, true)
	}
	stdout, err = os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, err
	}
	stderr, err = os.OpenFile(errPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// run runs one job to its end and says how it ended. Exit status is the
// shell's convention: 128+N for a job killed by signal N.
func (a *Agent) run(ctx context.Context, asg protocol.Assignment) protocol.Report {
	rep := protocol.Report{ID: asg.ID, Attempt: asg.Attempt, Started: time.Now()}
	if a.cfg.NoOp {
		rep.Finished = rep.Started
		return rep
	}
	fail := func(err error) protocol.Report {
		rep.Exit, rep.Finished, rep.Reason = 127, time.Now(), "could not start: "+err.Error()
		return rep
	}
	stdout, stderr, err := a.outputFiles(asg)
	if err != nil {
		return fail(err)
	}
	defer stdout.Close()
	defer stderr.Close()
	cmd := exec.Command("/bin/sh", "-c", asg.Command)
	cmd.Dir = asg.Cwd
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = append(os.Environ(),
		"MQ_JOB_ID="+strconv.FormatInt(asg.ID, 10),
		"MQ_ATTEMPT="+strconv.Itoa(asg.Attempt),
		"MQ_TARGET="+asg.Target,
		"MQ_QUEUE="+asg.Queue,
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		// A chdir failing in the child is reported as fork/exec of /bin/sh;
		// name the directory instead when it is the culprit.
		if asg.Cwd != "" {
			if fi, serr := os.Stat(asg.Cwd); serr != nil {
				return fail(fmt.Errorf("working directory %s: %w", asg.Cwd, errors.Unwrap(serr)))
			} else if !fi.IsDir() {
				return fail(fmt.Errorf("working directory %s is not a directory", asg.Cwd))
			}
		}
		return fail(err)
	}
	rep.Started = time.Now()
	p := &proc{ref: protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}, pgid: cmd.Process.Pid, started: rep.Started}
	a.runMu.Lock()
	a.running[asg.ID] = p
	a.runMu.Unlock()
	defer func() {
		a.runMu.Lock()
		delete(a.running, asg.ID)
		a.runMu.Unlock()
	}()

	var ceiling <-chan time.Time
	if asg.Ceiling > 0 {
		t := time.NewTimer(time.Duration(asg.Ceiling * float64(time.Second)))
		defer t.Stop()
		ceiling = t.C
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ceiling:
		p.kill(protocol.ReasonCeiling)
		werr = <-waited
	case <-ctx.Done():
		p.kill(protocol.ReasonInterrupted)
		werr = <-waited
	}
	rep.Finished = time.Now()
	rep.Exit = exitStatus(cmd.ProcessState, werr)
	p.mu.Lock()
	rep.Reason = p.reason
	p.mu.Unlock()
	// Leave no stragglers: the job's background children die with it.
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	if a.cfg.StageOutput {
		// Still listed as running, so heartbeats keep the lease while the
		// output travels.
		a.stage(ctx, asg)
	}
	return rep
}

// stageChunk is the most output sent in one request (well under the 4 MiB
// frame limit once base64 grows it by a third).
const stageChunk = 1 << 20

// stage copies the attempt's stdout and stderr to the CLS. A failure is
// logged, not fatal: the files stay on this host, where mqstat -j says they
// are.
func (a *Agent) stage(ctx context.Context, asg protocol.Assignment) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	outPath, errPath := job.OutputPaths(a.cfg.OutDir, asg.ID, asg.Attempt)
	for _, s := range []struct{ stream, path string }{{"stdout", outPath}, {"stderr", errPath}} {
		if err := a.stageFile(ctx, asg, s.stream, s.path); err != nil {
			a.log.Warn("could not copy output to the CLS; it stays on this host", "job", asg.ID, "file", s.path, "err", err)
		}
	}
}

func (a *Agent) stageFile(ctx context.Context, asg protocol.Assignment, stream, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err // nothing to copy: no file on the CLS means no output
	}
	buf := make([]byte, min(fi.Size(), stageChunk))
	var off int64
	send := func(data []byte) error {
		err := a.call(ctx, protocol.OpOutput, func(id int64) any {
			return protocol.OutputChunk{Placeholder: id, ID: asg.ID, Attempt: asg.Attempt, Stream: stream, Offset: off, Data: data}
		}, nil)
		off += int64(len(data))
		return err
	}
	for off < protocol.MaxStaged {
		n, err := io.ReadFull(f, buf[:min(int64(len(buf)), protocol.MaxStaged-off)])
		if n > 0 {
			if err := send(buf[:n]); err != nil {
				return err
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > off {
		note := fmt.Sprintf("\n[mq: output cut at %d bytes; the whole %d bytes are in %s on %s]\n", off, fi.Size(), path, a.cfg.Host)
		return send([]byte(note))
	}
	return nil
}

func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return 127
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
