package placeholder

import (
	"errors"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/diskroom"
	"github.com/mq-hpc/mq/internal/placeholder/hung"
	"github.com/mq-hpc/mq/internal/placeholder/userstdio"
	"github.com/mq-hpc/mq/protocol"
)

// A job's output, its -o and -e files, its scratch copy and the agent's
// stream files may lie on a filesystem whose server is gone: every stat,
// read, write, fsync or close there blocks for ever, and nothing
// cancels it. Between a job's end and its report each such call has a
// deadline (hung.Within): past it the job is reported all the same, its
// output said lost, as for any other output failure, and the call is left
// blocked in a goroutine of its own. Heartbeats touch no file, and go on
// meanwhile.

// defaultFSWait is Agent.fsWait's default: a sync or close on a slow but
// live filesystem takes seconds, not this.
const defaultFSWait = 30 * time.Second

// statWait bounds a statfs of the output directory: the work loop makes
// one at each turn, and the output limit at each write.
const statWait = 2 * time.Second

// statfsWithin is a.statfs with a deadline; a statfs that did not return
// is an error (the free space unknown: as if there were room), and makes
// the next ones fail at once until it returns (Agent.statGate).
func (a *Agent) statfsWithin(dir string) (diskroom.Free, error) {
	var free diskroom.Free
	err := a.statGate.Within(min(a.fsWait, statWait), "statfs "+dir, func() error {
		var err error
		free, err = a.statfs(dir)
		return err
	})
	if err != nil {
		return diskroom.Free{}, err
	}
	return free, nil
}

// closeUser closes the attempt's -o and -e files (a close on NFS writes
// back what the job wrote), and says what was lost.
func (a *Agent) closeUser(t *attempt) (lost string) {
	if t.user.Out == nil && t.user.Err == nil {
		return "" // most jobs: no goroutine for nothing
	}
	lost, err := hung.Value(a.fsWait, "close", func() (string, error) { return t.user.Close(), nil })
	if err != nil {
		t.userHung = true // release does not wait for it again
		a.log.Warn("closing a job's -o or -e file does not return; reporting the job without it", "job", t.asg.ID, "err", err)
		return fmt.Sprintf("stdout and stderr files (mqsub -o, -e): %v", err)
	}
	return lost
}

// releaseWithin is t.release with a deadline: removing a scratch copy or
// closing a -o file on a hung filesystem must not hold the report.
func (a *Agent) releaseWithin(t *attempt) {
	if t.mem == nil && t.sc == nil && (t.userHung || t.user.Out == nil && t.user.Err == nil) {
		return // most jobs: nothing held
	}
	if err := hung.Within(a.fsWait, "releasing the attempt's files", func() error { t.release(); return nil }); err != nil {
		a.log.Warn("what a job held on this host is not released: a call does not return", "job", t.asg.ID, "err", err)
	}
}

// killEscapedWithin is killEscaped for attempt id with a deadline: a read
// of /proc/PID/environ waits for the memory of a process in
// uninterruptible sleep. None killed if it did not return.
func (a *Agent) killEscapedWithin(id string) int {
	n, err := hung.Value(sinkWait, "reading /proc", func() (int, error) { return killEscaped(a.proc, id), nil })
	if err != nil {
		a.log.Warn("looking for what a job left running does not return", "err", err)
	}
	return n
}

// workDirWithin is the job's working directory (workDir), which must
// answer a stat within a.fsWait. Launched in a directory on a hung
// filesystem, the job's child would block in its chdir, and with it the
// launch for ever: a vfork holds the launching thread, and the fork lock
// every other launch takes. A call that does not return is the node's
// fault (placeFault): the attempt is interrupted and the agent takes no
// more jobs. Any other error of the stat is left to the launch to say.
func (a *Agent) workDirWithin(cwd string) (string, error) {
	dir, err := hung.Value(a.fsWait, "the working directory "+cwd, func() (string, error) {
		dir, err := a.workDir(cwd)
		if err == nil && dir != "" {
			a.statDir(dir)
		}
		return dir, err
	})
	if errors.Is(err, hung.ErrHung) {
		return "", placeFault{err}
	}
	return dir, err
}

// openUserStdioWithin is userstdio.Open with a deadline (a.fsWait). One
// that does not return fails the attempt, as the job's: it may be a hung
// filesystem, or a FIFO of the user's that no one reads. Files it opens
// too late are closed.
func (a *Agent) openUserStdioWithin(asg protocol.Assignment, dir string) (userstdio.Files, error) {
	if !userstdio.Named(asg) {
		return userstdio.Files{}, nil // most jobs: no goroutine for nothing
	}
	u, err := hung.Releasing(a.fsWait, "opening the -o or -e file", func() (userstdio.Files, error) { return userstdio.Open(asg, dir, a.fence) },
		func(u userstdio.Files) { u.Close() })
	if errors.Is(err, hung.ErrHung) {
		err = fmt.Errorf("opening the -o or -e file did not return in %v (a FIFO no one reads, or a hung filesystem?)", a.fsWait)
	}
	return u, err
}

// keepWithin moves a won scratch attempt's files into the job's
// directory (a.keep), giving up once a.fsWait passes without one of its
// calls returning (hung.Progressing): moving thousands of files on a
// slow filesystem may rightly take long, one rename does not. A move
// that hangs is the node's fault, as a hung working directory is
// (workDirWithin): the attempt is interrupted, to run again elsewhere,
// and the agent takes no more jobs. Any other error fails the attempt,
// its output not kept.
func (a *Agent) keepWithin(t *attempt) {
	err := hung.Progressing(a.fsWait, "moving the attempt's files into place", func(step func()) error { return a.keep(t.sc, step) })
	switch {
	case errors.Is(err, hung.ErrHung):
		a.markBroken(err)
		t.rep.Reason = protocol.ClipText(protocol.ReasonInterrupted+": its placeholder's node cannot run jobs: "+err.Error(), protocol.MaxReasonBytes)
	case err != nil:
		t.rep.Exit, t.rep.Reason = 1, protocol.ClipText(reasonOutput+err.Error(), protocol.MaxReasonBytes)
	}
}
