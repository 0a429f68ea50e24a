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

	"github.com/mq-hpc/mq/internal/jobexec"
	"github.com/mq-hpc/mq/internal/outstream"
	"github.com/mq-hpc/mq/internal/placeholder/bind"
	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/internal/placeholder/memlimit"
	"github.com/mq-hpc/mq/internal/placeholder/scratch"
	"github.com/mq-hpc/mq/internal/placeholder/userstdio"
	"github.com/mq-hpc/mq/internal/resource"
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
	// attemptID is its processes' attemptVar: a kill reaches those that
	// left the group too (killEscaped).
	attemptID string

	mu     sync.Mutex
	reason string // why it was killed; set by whichever kill came first
	// gone: the group's leader is reaped, so pgid may name another
	// process group now: no signal goes to it any more.
	gone bool

	live liveOut // output shipped while it runs (live.go)

	// sigkilled is closed once the group was sent SIGKILL (kill): from
	// then on its leader has Agent.unkillable to be reaped (unkillable.go).
	sigkilled chan struct{}
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

// announceRunning names every running attempt as started again, on the
// messages after a reconnect: a CLS that restarted may have lost starts
// it answered (those that came while it had no room to write live in its
// memory until then). The CLS records only what it does not have, so a
// start it knows costs it a lookup, and it writes nothing for it.
func (a *Agent) announceRunning() {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	for _, p := range a.running {
		a.started.Again(p.ref, p.started)
	}
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

// ErrCLSStopped is the cause of an agent's stop (context.Cause of the
// context Run was given) when the CLS that started it stops it
// (protocol.CLSStopSignal): its jobs are reported
// protocol.ReasonCLSStopped, run again without counting the attempt.
var ErrCLSStopped = errors.New("the CLS stopped its placeholder")

// stopReason is the reason of a job stopped because ctx, the agent's,
// ended: protocol.ReasonCLSStopped when the CLS stopped it
// (ErrCLSStopped), else protocol.ReasonInterrupted.
func stopReason(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), ErrCLSStopped) {
		return protocol.ReasonCLSStopped
	}
	return protocol.ReasonInterrupted
}

// killAll stops every running job for reason (an interruption:
// protocol.IsInterrupted).
func (a *Agent) killAll(reason string) {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	for _, p := range a.running {
		p.kill(reason)
	}
}

// kill ends a running job's whole process group: SIGTERM, then SIGKILL.
func (a *Agent) kill(ref protocol.JobRef, reason string) {
	a.runMu.Lock()
	p := a.running[ref.ID]
	if h, ok := a.held[ref.ID]; ok && h.Attempt == ref.Attempt {
		delete(a.held, ref.ID) // never started: just forget it
		a.holding.Done([]protocol.Report{{ID: ref.ID, Attempt: ref.Attempt}})
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
		p.signal(syscall.SIGTERM)
		time.AfterFunc(killGrace, func() {
			p.signal(syscall.SIGKILL)
			close(p.sigkilled)
			if p.attemptID != "" {
				killEscaped("/proc", p.attemptID)
			}
		})
	})
}

// signal sends sig to the job's process group unless its leader is gone.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.gone {
		syscall.Kill(-p.pgid, sig)
	}
}

// reaped kills what is left of the job's process group (its background
// children die with it) and marks the group gone. Called while the leader
// is a zombie, not reaped yet, the group id cannot have been reused.
func (p *proc) reaped() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.gone {
		syscall.Kill(-p.pgid, syscall.SIGKILL)
		p.gone = true
	}
}

// attempt is one job's run as it goes: what prepare made for it (its
// directory and output) and the process startProcess launched.
type attempt struct {
	asg protocol.Assignment
	rep protocol.Report
	// begun is when rep.Started was stamped, by the monotonic clock:
	// ended measures the attempt's time from it (stamp).
	begun time.Time

	dir    string       // the working directory asked for ("" = the agent's)
	runDir string       // where the command runs: dir, or its scratch copy
	sc     *scratch.Dir // nil unless the attempt runs in a scratch copy
	lim    *outputLimit

	outSink, errSink *sink
	stdout, stderr   *os.File        // the write ends the job's process gets
	user             userstdio.Files // mqsub -o, -e: where the streams also go
	userHung         bool            // closing user did not return (closeUser)

	cmd   *exec.Cmd
	pidfd int // -1: none to wait on
	p     *proc
	// waited gets cmd.Wait's error once the leader is reaped (wait);
	// stuckAfter is how long after SIGKILL it was given when it was not
	// (await).
	waited     chan error
	stuckAfter time.Duration

	// grant is what the job holds (nil: a caller that does not count,
	// such as a test); mem enforces its memory grant (nil: none).
	grant *resource.Grant
	mem   memlimit.Watch
	cgFD  int // a cgroup to start in, from mem (-1: none)
}

// stamp notes that the attempt starts now: rep.Started as the wall clock
// reads it (Agent.wall), and the monotonic reading ended measures from.
func (a *Agent) stamp(t *attempt) {
	t.rep.Started, t.begun = a.wall(), time.Now()
}

// ended is when the attempt ends, now: its start plus the time it has
// run by the monotonic clock, so that the span the CLS counts (elapsed,
// runtime estimates, accounting) is the time it ran even when NTP steps
// the wall clock meanwhile, by an hour back (not a negative runtime) or
// forth.
func (t *attempt) ended() time.Time { return t.rep.Started.Add(time.Since(t.begun)) }

// fail ends the attempt before its command ran, and returns false.
func (t *attempt) fail(err error) bool {
	// The error may name a path with any bytes in it; the CLS takes
	// reasons only printable and bounded.
	t.rep.Exit, t.rep.Finished, t.rep.Reason = 127, t.ended(), protocol.ClipText("could not start: "+err.Error(), protocol.MaxReasonBytes)
	return false
}

// run runs one job to its end and says how it ended. Exit status is the
// shell's convention: 128+N for a job killed by signal N.
func (a *Agent) run(ctx context.Context, asg protocol.Assignment) protocol.Report {
	rep, _ := a.runGranted(ctx, asg, nil)
	return rep
}

// runGranted is run for a job holding g: it sees what g holds (bind.Env),
// runs on g's cores (bind.Pin) and within its memory (memlimit). stuck:
// its processes did not end after SIGKILL, and still hold what it was
// granted (abandon).
func (a *Agent) runGranted(ctx context.Context, asg protocol.Assignment, g *resource.Grant) (rep protocol.Report, stuck bool) {
	t := &attempt{asg: asg, rep: protocol.Report{ID: asg.ID, Attempt: asg.Attempt}, pidfd: -1, grant: g, cgFD: -1}
	a.stamp(t)
	if a.cfg.NoOp {
		t.rep.Finished = t.rep.Started
		return t.rep, false
	}
	ok := a.prepare(ctx, t)
	defer func() {
		if !stuck { // else once its processes end (abandon)
			a.releaseWithin(t)
		}
	}()
	if ok && asg.Grant != nil && asg.Grant.Mem > 0 {
		var attr syscall.SysProcAttr
		mw, err := a.memLimiter().Prepare(&attr, asg.Grant.Mem)
		if err != nil {
			t.stdout.Close()
			t.stderr.Close()
			a.waitSinks(asg, t.outSink, t.errSink)
			t.fail(fmt.Errorf("memory limit: %w", err))
			return t.rep, false
		}
		t.mem = mw
		if attr.UseCgroupFD {
			t.cgFD = attr.CgroupFD
		}
	}
	if !ok || !a.startProcess(t) {
		return t.rep, false
	}
	a.runMu.Lock()
	a.running[asg.ID] = t.p
	a.runMu.Unlock()
	defer func() {
		a.runMu.Lock()
		delete(a.running, asg.ID)
		a.runMu.Unlock()
	}()
	if stuck = !a.wait(ctx, t); stuck {
		a.abandon(t)
		return t.rep, true
	}
	a.finish(ctx, t)
	return t.rep, false
}

// release gives back what the attempt held on this host once its
// processes are gone: its memory cgroup, its scratch copy, the user's
// output files (closed in finish, unless the job did not start).
func (t *attempt) release() {
	if t.mem != nil {
		t.mem.Close()
	}
	if t.sc != nil {
		t.sc.Remove()
	}
	if !t.userHung {
		t.user.Close()
	}
}

// prepare checks the attempt's directory and inputs and opens its output;
// false if the job cannot run (t.rep says why).
func (a *Agent) prepare(ctx context.Context, t *attempt) bool {
	asg := t.asg
	dir, err := a.workDirWithin(asg.Cwd)
	if err != nil {
		return a.failPlace(t, err)
	}
	if why, missing := a.checkInputs(ctx, asg); why != "" {
		// The command would read a missing or partial file: it does not
		// run, and the attempt fails with the reason; the movable inputs
		// not found whole are named, for the CLS to stage them again.
		t.rep.Exit, t.rep.Finished, t.rep.Reason = exitInput, t.ended(), protocol.ClipText(why, protocol.MaxReasonBytes)
		t.rep.Missing = missing
		return false
	}
	t.dir, t.runDir = dir, dir
	if asg.Scratch && dir != "" {
		// Other attempts of the job may run at once: this one makes its
		// files apart, and keeps them only if it wins (scratch.go).
		if t.sc, err = a.newScratch(dir, asg); err != nil {
			return a.failPlace(t, err)
		}
		t.runDir = t.sc.Path()
	}
	if t.user, err = a.openUserStdioWithin(asg, dir); err != nil {
		return a.failPlace(t, err)
	}
	outPath, errPath := job.OutputPaths(a.cfg.OutDir, asg.ID, asg.Attempt)
	limDir := filepath.Dir(outPath)
	streamed := a.streamed(asg)
	if streamed {
		// No shard directory is made for streamed output: the reserve is
		// measured where the stream files are.
		limDir = a.cfg.OutDir
	}
	t.lim = a.newOutputLimit(limDir, asg)
	tag := outstream.Tag{Job: asg.ID, Attempt: asg.Attempt, Stream: outstream.Stdout}
	if t.outSink, t.stdout, err = a.newSink(outPath, tag, streamed, t.lim, t.user.Out.Writer()); err != nil {
		return a.failPlace(t, outOfRoom(err))
	}
	tag.Stream = outstream.Stderr
	if t.errSink, t.stderr, err = a.newSink(errPath, tag, streamed, t.lim, t.user.Err.Writer()); err != nil {
		t.stdout.Close()
		<-t.outSink.done
		return a.failPlace(t, outOfRoom(err))
	}
	return true
}

// startProcess launches the attempt's command; false if it did not start
// (t.rep says why).
func (a *Agent) startProcess(t *attempt) bool {
	asg := t.asg
	line := protocol.CommandOf(asg.Command, asg.CommandBytes)
	var env []string
	if g := t.grant; g != nil && (asg.Grant != nil || g.PoolHasGPUs()) {
		// A job granted resources sees them; on a placeholder with GPUs
		// even one granted none (it must not see the others').
		env = bind.Environ(*g, asg.Env)
	} else {
		env = append(os.Environ(), asg.Env...)
	}
	env = append(env,
		"MQ_JOB_ID="+strconv.FormatInt(asg.ID, 10),
		"MQ_ATTEMPT="+strconv.Itoa(asg.Attempt),
		"MQ_TARGET="+asg.Target,
		"MQ_QUEUE="+asg.Queue,
		attemptVar+"="+a.attemptID(asg.ID, asg.Attempt),
	)
	cmd, direct := jobexec.Command(line, env, t.runDir)
	// Started is stamped at the launch, as time(1) starts its clock, and
	// Finished once the process is reaped: the job's time includes its
	// fork and exec, and a dependency hop is the time its slot held no
	// process.
	a.stamp(t)
	id := a.attemptID(asg.ID, asg.Attempt)
	a.sweep.Start(id) // no sweep for an earlier run of the id kills this one
	err := a.launch(t, cmd)
	if err != nil && direct {
		// Nothing ran: let the shell try, and say why it cannot.
		cmd = jobexec.Shell(line, env)
		err = a.launch(t, cmd)
	}
	if err != nil {
		a.sweep.Forget(id)
	}
	// The child has its own copies of the write ends; ours must close so the
	// sinks see EOF when the job's processes are gone.
	t.stdout.Close()
	t.stderr.Close()
	if err != nil {
		a.waitSinks(asg, t.outSink, t.errSink)
		// A chdir failing in the child is reported as fork/exec of /bin/sh;
		// name the directory instead when it is the culprit.
		if t.dir != "" {
			if fi, serr := os.Stat(t.dir); serr != nil {
				return t.fail(fmt.Errorf("working directory %s: %w", t.dir, errors.Unwrap(serr)))
			} else if !fi.IsDir() {
				return t.fail(fmt.Errorf("working directory %s is not a directory", t.dir))
			}
		}
		return a.failPlace(t, outOfRoom(err))
	}
	t.cmd = cmd
	t.p = &proc{ref: protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}, pgid: cmd.Process.Pid, started: t.rep.Started, attemptID: id, sigkilled: make(chan struct{})}
	if asg.Grant != nil && t.grant != nil {
		// Straight after the start, before the job has had time to
		// start threads or children of its own (they inherit the set).
		if cores := t.grant.Cores(); cores != nil {
			if err := bind.Pin(cmd.Process.Pid, cores); err != nil {
				a.log.Warn("could not pin a job to its cores; it runs unpinned", "job", asg.ID, "err", err)
			}
		}
	}
	return true
}

// launch starts cmd in its own process group, in the attempt's directory
// and with its output.
func (a *Agent) launch(t *attempt, cmd *exec.Cmd) error {
	cmd.Dir = t.runDir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.devNull, t.stdout, t.stderr
	// Pdeathsig: a job whose placeholder is killed dies with it
	// instead of running on unseen while its lease expires and it
	// reruns elsewhere (its own children die through the group kill
	// when the placeholder can still do it).
	t.pidfd = -1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: &t.pidfd}
	if t.cgFD >= 0 {
		// Born in its memory cgroup: nothing it allocates escapes the limit.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, t.cgFD
	}
	err := cmd.Start()
	if err != nil {
		t.pidfd = -1 // nothing to wait for
	}
	return err
}

// wait waits for the attempt's process to end, killing it at its ceiling
// or time limit, at its output limit or when ctx ends, and notes how it
// ended; false if it did not end after SIGKILL (await).
func (a *Agent) wait(ctx context.Context, t *attempt) bool {
	p, cmd := t.p, t.cmd
	var ceiling <-chan time.Time
	limit, why := runLimit(t.asg)
	if limit > 0 {
		tm := time.NewTimer(limit)
		defer tm.Stop()
		ceiling = tm.C
	}
	t.waited = make(chan error, 1)
	go func() {
		if a.awaitExit(p.ref, t.pidfd) {
			p.reaped() // before Wait reaps the leader
		}
		t.waited <- cmd.Wait()
	}()
	var memDone chan memEnd
	stopMem := func() {}
	if t.mem != nil {
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		memDone, stopMem = make(chan memEnd, 1), cancel
		go func() {
			why, killed := t.mem.Watch(mctx, p.pgid)
			memDone <- memEnd{why, killed}
		}()
	}
	defer stopMem()
	werr, m, ended := a.await(ctx, t, ceiling, why, memDone)
	if !ended {
		if m != nil && m.killed {
			p.killedFor(protocol.MemoryReason(m.why))
		}
		return false
	}
	t.rep.Finished = t.ended()
	t.rep.Exit = exitStatus(cmd.ProcessState, werr)
	t.rep.Usage = jobexec.UsageOf(cmd.ProcessState)
	if memDone != nil {
		// The watch killed the job, or sees now that the kernel did:
		// that is why it ended, unless it was being killed already.
		stopMem()
		if m == nil {
			got := <-memDone
			m = &got
		}
		t.rep.Usage.MaxRSS = max(t.rep.Usage.MaxRSS, t.mem.Peak())
		if m.killed {
			p.killedFor(protocol.MemoryReason(m.why))
		}
	}
	p.mu.Lock()
	t.rep.Reason = p.reason
	p.mu.Unlock()
	return true
}

// memEnd is how a memory watch ended: why, and whether it (or the
// kernel) killed the job's processes.
type memEnd struct {
	why    string
	killed bool
}

// killedFor notes why the job was killed, unless a kill said so first.
func (p *proc) killedFor(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason == "" {
		p.reason = reason
	}
}

// finish completes the report of an attempt whose process has ended: why
// it ended, its output, and, for a scratch attempt or one with declared
// outputs, whether what it made is kept.
func (a *Agent) finish(ctx context.Context, t *attempt) {
	asg, rep, p := t.asg, &t.rep, t.p
	if rep.Reason == "" && killedByStop(t.cmd.ProcessState) {
		// A batch system stopping the placeholder (scancel, qdel, the end of
		// its walltime) signals every process of the batch job at once, the
		// job's too: that is the placeholder being stopped, not the job
		// failing. The agent hears of it a moment later, if at all.
		select {
		case <-ctx.Done():
		case <-time.After(stopGrace):
		}
	}
	if rep.Reason == "" && rep.Exit != 0 && ctx.Err() != nil {
		rep.Reason = stopReason(ctx) // requeued, not failed
	}
	// Leave no stragglers: the job's background children die with it (done
	// already where the kernel gave a pidfd; else racing pid reuse, as
	// before pidfds), and what it left outside its group dies soon after
	// (sweep.Sweeper).
	p.reaped()
	a.sweep.Add(p.attemptID, asg.ID)
	lost := joinLost(a.waitSinks(asg, t.outSink, t.errSink), a.closeUser(t))
	if a.streams != nil {
		rep.Streamed = a.streams.streamed(t.outSink, t.errSink) // synced as the report leaves (syncReports)
	}
	if why := t.lim.why(); why != "" && (rep.Reason == "" || rep.Reason == why) {
		// Stopped for its output, or it ended on its own as the limit was
		// reached: either way its output is not whole, and it fails,
		// unless others filled the disk: then it runs again.
		if others := t.lim.othersFilled(); others != "" {
			why = others
		}
		rep.Reason = protocol.ClipText(why, protocol.MaxReasonBytes)
		if rep.Exit == 0 {
			rep.Exit = 1
		}
	}
	if t.sc != nil && rep.Exit == 0 && rep.Reason == "" {
		// Still listed as running, so the claim renews the lease too.
		won, err := a.claim(ctx, asg)
		switch {
		case err != nil:
			rep.Reason = protocol.ReasonInterrupted // nothing kept: run again
			return
		case !won:
			// Another attempt finished first: the CLS has killed this one
			// already. Its files go with the scratch directory.
			rep.Reason = protocol.ReasonKilled
			return
		}
		a.keepWithin(t)
	}
	if rep.Exit == 0 && rep.Reason == "" && len(asg.Outputs) > 0 {
		// Still listed as running, so heartbeats keep the lease while the
		// outputs are read.
		sums, why := a.sumOutputs(ctx, asg)
		switch {
		case why != "" && ctx.Err() != nil:
			rep.Reason = stopReason(ctx) // stopped while hashing: rerun
		case why != "":
			rep.Exit, rep.Reason = 1, protocol.ClipText(why, protocol.MaxReasonBytes)
		default:
			rep.Outputs = sums
		}
	}
	if a.cfg.StageOutput && t.outSink.out == nil && t.errSink.out == nil {
		// Still listed as running, so heartbeats keep the lease while the
		// output travels. Streamed output travels with the report instead,
		// many jobs' at once (syncReports).
		lost = joinLost(lost, a.stage(ctx, asg, p.live.finish()))
	}
	rep.OutputLost = protocol.ClipText(lost, protocol.MaxReasonBytes)
}

// stageChunk is the most output sent in one request (well under the 4 MiB
// frame limit once base64 grows it by a third).
const stageChunk = 1 << 20

// stage copies the attempt's stdout and stderr to the CLS. A failure is
// not fatal: the files stay on this host, where mqstat -j says they are;
// what was not copied is returned, to be reported with the job. from is
// how much of each stream the CLS has already (shipped live).
func (a *Agent) stage(ctx context.Context, asg protocol.Assignment, from [2]int64) (lost string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	outPath, errPath := job.OutputPaths(a.cfg.OutDir, asg.ID, asg.Attempt)
	for i, s := range []struct{ stream, path string }{{"stdout", outPath}, {"stderr", errPath}} {
		if err := a.stageFile(ctx, asg, s.stream, s.path, from[i]); err != nil {
			a.log.Warn("could not copy output to the CLS; it stays on this host", "job", asg.ID, "file", s.path, "err", err)
			lost = joinLost(lost, fmt.Sprintf("%s not copied to the CLS (whole in %s on %s): %v", s.stream, s.path, a.cfg.Host, err))
		}
	}
	return lost
}

// Each call on the file has a deadline (hangs.go): the report waits for it.
func (a *Agent) stageFile(ctx context.Context, asg protocol.Assignment, stream, path string, from int64) error {
	f, err := hung.Open(a.fsWait, "open", func() (*os.File, error) { return os.Open(path) })
	if errors.Is(err, os.ErrNotExist) {
		return nil // the job wrote nothing
	}
	if err != nil {
		return err
	}
	defer func() { go f.Close() }() // read-only: nothing to wait for
	stat := func() (os.FileInfo, error) { return hung.Value(a.fsWait, "stat", f.Stat) }
	fi, err := stat()
	if err != nil || fi.Size() == 0 {
		return err // nothing to copy: no file on the CLS means no output
	}
	off := from
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	buf := make([]byte, max(1, min(fi.Size()-off, stageChunk)))
	send := func(data []byte) error {
		err := call(ctx, a, protocol.OpOutput, func(id int64) protocol.OutputChunk {
			return protocol.OutputChunk{Placeholder: id, ID: asg.ID, Attempt: asg.Attempt, Stream: stream, Offset: off, Data: data}
		}, nil)
		off += int64(len(data))
		return err
	}
	for off < protocol.MaxStaged {
		part := buf[:min(int64(len(buf)), protocol.MaxStaged-off)]
		// One that does not return may fill buf later: nothing reads it then.
		n, err := hung.Value(a.fsWait, "read", func() (int, error) { return io.ReadFull(f, part) })
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
	if fi, err := stat(); err == nil && fi.Size() > off {
		note := fmt.Sprintf("\n[mq: output cut at %d bytes; the whole %d bytes are in %s on %s]\n", off, fi.Size(), path, a.cfg.Host)
		return send([]byte(note))
	}
	return nil
}

// stopGrace is how long a job killed by a stopping signal waits for the
// agent to be told to stop too.
const stopGrace = 300 * time.Millisecond

// killedByStop reports whether a process died of a signal batch systems
// use to stop jobs, or exited 128+that signal: a shell reporting that its
// child did. PBS signals a job's process tree child first, so the job's
// shell can see its child die and exit before its own signal lands.
func killedByStop(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return false
	}
	var sig syscall.Signal
	switch {
	case ws.Signaled():
		sig = ws.Signal()
	case ws.Exited() && ws.ExitStatus() > 128:
		sig = syscall.Signal(ws.ExitStatus() - 128)
	default:
		return false
	}
	switch sig {
	case syscall.SIGTERM, syscall.SIGKILL, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2:
		return true
	}
	return false
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
