package placeholder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// A process in uninterruptible sleep (D state: blocked on a hung NFS,
// Lustre or GPFS mount) does not die of SIGKILL, and the agent would wait
// for its job's leader for ever: the slot held, the job executing at the
// CLS whatever mqdel, its time limit or the CLS's stop said. As Slurm's
// UnkillableStepTimeout does, the agent gives the leader Agent.unkillable
// after SIGKILL, then reports the attempt ended as its kill would have
// ended it (abandon), and marks the node broken: it takes no more jobs,
// the stuck job's resources stay counted as in use, and the agent exits
// once its other jobs end, for the site to drain the node. The processes
// may end later: that changes nothing but the release of what they held.

// defaultUnkillable is Agent.unkillable's default: Slurm's
// UnkillableStepTimeout.
const defaultUnkillable = 60 * time.Second

// unkillableStopping bounds the wait after SIGKILL once the agent is
// told to stop: its last reports have reportGrace, and a stuck job's
// must fit in it.
const unkillableStopping = reportGrace / 2

// flushWait is how long a stopping agent waits for its last sweep of
// what its jobs left running (sweep.Sweeper.Flush).
const flushWait = 5 * time.Second

// await waits for the attempt's leader to be reaped (t.waited), killing
// its group at its ceiling or time limit (why), at its output limit or
// when ctx ends, and returns Wait's error and how its memory watch ended,
// if it did (memDone). ended is false if the leader was not reaped
// a.unkillable after the group was sent SIGKILL (by a kill or its memory
// watch), or soon after ctx ended (unkillableStopping); t.stuckAfter then
// says how long it was given.
func (a *Agent) await(ctx context.Context, t *attempt, ceiling <-chan time.Time, why string, memDone <-chan memEnd) (werr error, mem *memEnd, ended bool) {
	p := t.p
	over, stop, sigkilled := t.lim.over, ctx.Done(), p.sigkilled
	var stuck, stopping <-chan time.Time
	var timers []*time.Timer
	giveUp := func(d time.Duration) <-chan time.Time {
		tm := time.NewTimer(d)
		timers = append(timers, tm)
		return tm.C
	}
	defer func() {
		for _, tm := range timers {
			tm.Stop()
		}
	}()
	for {
		select {
		case werr = <-t.waited:
			return werr, mem, true
		case <-ceiling:
			ceiling = nil
			p.kill(why)
		case <-over:
			over = nil
			p.kill(t.lim.why())
		case <-stop:
			stop = nil
			p.kill(stopReason(ctx))
			stopping = giveUp(killGrace + min(a.unkillable, unkillableStopping))
		case m := <-memDone:
			memDone, mem = nil, &m
			if m.killed && sigkilled != nil {
				// The watch sent SIGKILL (or the kernel killed the
				// cgroup's processes, memory.oom.group).
				sigkilled, stuck = nil, giveUp(a.unkillable)
			}
		case <-sigkilled:
			sigkilled, stuck = nil, giveUp(a.unkillable)
		case <-stuck:
			t.stuckAfter = a.unkillable
			return nil, mem, false
		case <-stopping:
			t.stuckAfter = min(a.unkillable, unkillableStopping)
			return nil, mem, false
		}
	}
}

// abandon reports an attempt whose processes did not end after SIGKILL
// as its kill would have ended it (stuckReason), marks the agent broken,
// and releases what the attempt held on this host if they end at last.
// Nothing else is reported of it: its report is the only one.
func (a *Agent) abandon(t *attempt) {
	p, asg := t.p, t.asg
	note := "its processes did not end " + strconv.FormatFloat(t.stuckAfter.Seconds(), 'f', -1, 64) +
		"s after SIGKILL (uninterruptible sleep: a hung filesystem?)"
	p.mu.Lock()
	reason := p.reason
	p.mu.Unlock()
	if why := t.lim.why(); why != "" && reason == why {
		// As finish says it: stopped for a disk others filled, it runs again.
		reason = cmp.Or(t.lim.othersFilled(), why)
	}
	a.markBroken(fmt.Errorf("job %d (attempt %d): %s", asg.ID, asg.Attempt, note))
	a.log.Warn("a job's processes did not end after SIGKILL: reported ended; its resources stay in use", "job", asg.ID, "attempt", asg.Attempt, "reason", reason, "after", t.stuckAfter)
	t.rep.Exit, t.rep.Finished = 128+int(syscall.SIGKILL), t.ended()
	t.rep.Reason = protocol.ClipText(stuckReason(reason, note), protocol.MaxReasonBytes)
	lost := a.cutSinks(t)
	if lost != "" || reason == protocol.ReasonCeiling {
		// The CLS words a ceiling's end its own way: here it says why.
		lost = joinLost(lost, note)
	}
	if a.streams != nil {
		t.rep.Streamed = a.streams.streamed(t.outSink, t.errSink)
	} else if a.cfg.StageOutput {
		// Copying it could hang on the same filesystem; it stays here.
		lost = joinLost(lost, fmt.Sprintf("stdout and stderr not copied to the CLS (in %s on %s)", a.cfg.OutDir, a.cfg.Host))
	}
	t.rep.OutputLost = protocol.ClipText(lost, protocol.MaxReasonBytes)
	go func() {
		<-t.waited // perhaps never
		p.reaped()
		a.sweep.Add(p.attemptID, asg.ID)
		a.waitSinks(asg, t.outSink, t.errSink)
		t.release()
		a.log.Warn("the processes of a job reported as not ending after SIGKILL ended", "job", asg.ID, "attempt", asg.Attempt)
	}()
}

// stuckReason is the reason of an attempt killed for reason whose
// processes did not end (note): the CLS gives it the end reason gives
// (runs.OutcomeOf: a ceiling, a time or output limit, a memory kill fail
// it; mqdel's "killed" comes after the job was deleted; an interruption,
// the placeholder's walltime or a disk others filled among them, requeues
// it), and it says why.
func stuckReason(reason, note string) string {
	switch reason {
	case "":
		return note
	case protocol.ReasonCeiling:
		return reason // the CLS says it in its own words; output_lost says why
	case protocol.ReasonInterrupted:
		return reason + ": " + note
	}
	return reason + "; " + note
}

// cutSinks ends the attempt's output where it is: its processes still
// hold the pipes. It waits sinkWait at most for what was read to be
// written, and says what was lost.
func (a *Agent) cutSinks(t *attempt) (lost string) {
	sinks := []*sink{t.outSink, t.errSink}
	for _, s := range sinks {
		s.cut()
	}
	deadline := time.NewTimer(sinkWait)
	defer deadline.Stop()
	for i, s := range sinks {
		select {
		case <-s.done:
		case <-deadline.C:
			// A write that does not return: the same hung filesystem?
			return joinLost(lost, "output: not written in time")
		}
		switch {
		case errors.Is(s.err, errHeldOpen):
			lost = joinLost(lost, [...]string{"stdout", "stderr"}[i]+": cut")
		case s.err != nil:
			lost = joinLost(lost, fmt.Sprintf("%s: %v", [...]string{"stdout", "stderr"}[i], s.err))
		}
	}
	return lost
}
