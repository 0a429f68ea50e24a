package placeholder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/protocol"
)

// A placeholder whose node cannot run jobs: its data root cannot be
// written (a home mounted read-only on compute nodes, a quota, a stale
// mount), or it has no process, descriptor or memory left to start one.
// Each job it took failed at once, "could not start", as the job's
// fault, and the placeholder, free again, took the next: one bad node
// failed a whole queue in a second. Such an attempt is interrupted (run
// again elsewhere); the placeholder takes no more jobs and exits saying
// why, for the site to replace it.

// placeFault is an error of the placeholder's place, not of the job.
type placeFault struct{ error }

// outOfRoom is err, a placeFault if it says the node is out of processes,
// descriptors or memory (fork, pipe).
func outOfRoom(err error) error {
	for _, e := range []error{syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return placeFault{err}
		}
	}
	return err
}

func (e placeFault) Unwrap() error { return e.error }

// writable checks that files can be made in dir (one that exists may be
// read-only, or full).
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".mq-probe-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkPlace checks, as the agent starts, that it can make its output
// directory, and write in its data root, where jobs run.
func (a *Agent) checkPlace() error {
	if err := os.MkdirAll(a.cfg.OutDir, 0o700); err != nil {
		return fmt.Errorf("placeholder output directory: %w", err)
	}
	if a.cfg.NoOp {
		return nil
	}
	// A write, not only a file made: over a block quota an empty file is
	// still made. Refused for want of room, the agent starts paused
	// (room.go) rather than stopping a job to find it out.
	if err := diskroom.Probe(a.cfg.OutDir, a.create); diskroom.Refused(err) {
		a.noteNoRoom(err)
	} else if err != nil { // jobs still run; each says its output was lost
		a.log.Warn("the placeholder output directory cannot be written: jobs' output will be lost", "dir", a.cfg.OutDir, "err", err)
	}
	if a.cfg.DataRoot == "" {
		return nil
	}
	// Both run: the first error is the one said.
	if err := cmp.Or(os.MkdirAll(a.cfg.DataRoot, 0o700), writable(a.cfg.DataRoot)); err != nil {
		return fmt.Errorf("data root %s cannot be written on this node: %w", a.cfg.DataRoot, err)
	}
	return nil
}

// failPlace ends an attempt that could not start: as the job's failure
// (attempt.fail), unless err is a placeFault: then the attempt is
// interrupted and the agent marked broken; or a write refused for want of
// room: then it runs again and the agent pauses (startRefused).
func (a *Agent) failPlace(t *attempt, err error) bool {
	if diskroom.Refused(err) {
		return a.startRefused(t, err)
	}
	var pf placeFault
	if !errors.As(err, &pf) {
		return t.fail(err)
	}
	a.markBroken(pf.error)
	t.rep.Exit, t.rep.Finished = 127, t.ended()
	t.rep.Reason = protocol.ClipText(protocol.ReasonInterrupted+": its placeholder's node cannot run jobs: "+err.Error(), protocol.MaxReasonBytes)
	return false
}

// markBroken notes, once, that this node cannot run jobs: the work loop
// drains and Run returns why.
func (a *Agent) markBroken(err error) {
	if a.broken.CompareAndSwap(nil, &err) {
		a.log.Warn("this node cannot run jobs: taking no more, and exiting once the running ones end", "err", err)
	}
}

// brokenWhy is why the node cannot run jobs, for the CLS (Heartbeat.Broken;
// cls site list shows it), or "".
func (a *Agent) brokenWhy() string {
	if p := a.broken.Load(); p != nil {
		return protocol.ClipText((*p).Error(), protocol.MaxReasonBytes)
	}
	return ""
}

// sayBroken tells the CLS, as the agent exits, that its node cannot run
// jobs, unless a heartbeat did: one that broke with no other job running
// exits before the next heartbeat.
func (a *Agent) sayBroken(ctx context.Context) {
	why := a.brokenWhy()
	if why == "" || a.saidBroken.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushWait)
	defer cancel()
	err := call(ctx, a, protocol.OpHeartbeat, func(id int64) protocol.Heartbeat {
		return protocol.Heartbeat{Placeholder: id, Running: a.holding.AppendTo(a.runningRefs()), Broken: why}
	}, nil)
	if err != nil {
		a.log.Warn("could not tell the CLS that this node cannot run jobs", "err", err)
	}
}

// brokenErr is why the agent stopped taking jobs for its node, or nil.
func (a *Agent) brokenErr() error {
	if p := a.broken.Load(); p != nil {
		return fmt.Errorf("stopped taking jobs: this node cannot run them: %w", *p)
	}
	return nil
}
