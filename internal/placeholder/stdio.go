package placeholder

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/pathguard"
	"github.com/mq-hpc/mq/internal/placeholder/fence"
	"github.com/mq-hpc/mq/protocol"
)

// userFile is a file mqsub -o or -e named: the job's stream is written to
// it as well as to the attempt's own output. A write error there loses
// that copy, never the job or mq's copy: it is remembered and reported as
// output lost.
type userFile struct {
	name string // as the job asked, for the report
	// held passes the writes through the agent's fence: kept after a
	// freeze until the CLS says whose job it is.
	held *fence.Held

	mu  sync.Mutex
	f   *os.File
	err error
}

func (u *userFile) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.held.Write(p)
	return len(p), nil
}

func (u *userFile) write(p []byte) {
	if u.err == nil {
		if _, err := u.f.Write(p); err != nil {
			u.err = err
		}
	}
}

// userStdio is an attempt's -o and -e files (nil where none was asked;
// both the same when they name one file).
type userStdio struct{ out, err *userFile }

// namesStdio says whether the job names a stdout or stderr file of its
// own (mqsub -o, -e).
func namesStdio(asg protocol.Assignment) bool {
	for _, kv := range asg.Env {
		if strings.HasPrefix(kv, protocol.EnvStdout+"=") || strings.HasPrefix(kv, protocol.EnvStderr+"=") {
			return true
		}
	}
	return false
}

// openUserStdio creates the files the job's environment names for its
// stdout and stderr (protocol.EnvStdout, EnvStderr), relative to its
// working directory dir, truncated, before the job starts: a directory
// that does not exist fails the attempt now, with that reason. Without
// an -e, stderr goes with stdout (sbatch's rule). Their writes pass w
// (nil: none); an attempt w says was lost while the agent was frozen
// opens none (opening truncates another attempt's).
func openUserStdio(asg protocol.Assignment, dir string, w *fence.Watch) (userStdio, error) {
	if !w.Pass(protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}) {
		return userStdio{}, fence.ErrLost
	}
	var out, errp string
	for _, kv := range asg.Env {
		if v, ok := strings.CutPrefix(kv, protocol.EnvStdout+"="); ok {
			out = v
		} else if v, ok := strings.CutPrefix(kv, protocol.EnvStderr+"="); ok {
			errp = v
		}
	}
	var u userStdio
	open := func(flag, pattern string) (*userFile, error) {
		p := protocol.ExpandStdio(pattern, asg.ID, asg.Target, asg.Env)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if u.out != nil && u.out.f.Name() == p {
			return u.out, nil
		}
		f, err := pathguard.OpenOutput(p)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("%s %s: %v", flag, p, err)
		}
		uf := &userFile{name: p, f: f}
		uf.held = w.Held(protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}, uf.write)
		return uf, nil
	}
	var err error
	if out != "" {
		if u.out, err = open("-o", out); err != nil {
			return u, err
		}
	}
	switch {
	case errp != "":
		u.err, err = open("-e", errp)
	default:
		u.err = u.out
	}
	if err != nil {
		u.close()
	}
	return u, err
}

// ownerOf is the uid that owns fi's file.
func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// close closes the files; lost says what could not be written to them.
// Closing again does nothing.
func (u userStdio) close() (lost string) {
	for i, f := range []*userFile{u.out, u.err} {
		if f == nil || (i == 1 && f == u.out) {
			continue
		}
		f.mu.Lock()
		if f.err == os.ErrClosed {
			f.mu.Unlock()
			continue
		}
		f.held.Flush()
		if err := f.f.Close(); err != nil && f.err == nil {
			f.err = err
		}
		if f.err != nil {
			lost = joinLost(lost, fmt.Sprintf("%s: %v", f.name, f.err))
		}
		f.err = os.ErrClosed // a straggling write after this is dropped
		f.mu.Unlock()
	}
	for _, f := range []*userFile{u.out, u.err} {
		if f != nil {
			f.held.Forget()
		}
	}
	return lost
}

// writer is f as an io.Writer for a sink: nil when there is no file.
func (f *userFile) writer() io.Writer {
	if f == nil {
		return nil
	}
	return f
}

// teeCloser writes to the attempt's own output and to a user file.
type teeCloser struct {
	io.WriteCloser
	also io.Writer
}

func (t teeCloser) Write(p []byte) (int, error) {
	n, err := t.WriteCloser.Write(p)
	t.also.Write(p[:n]) // never fails: userFile keeps its error
	return n, err
}

// onlyReader hides a reader's WriterTo, so io.CopyBuffer goes through
// the limited writer's Write.
type onlyReader struct{ io.Reader }

// createOutput creates a job's output file.
func createOutput(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600) // never write through a link
}

// joinLost adds one cause of lost output to the others.
func joinLost(lost, why string) string {
	switch {
	case lost == "":
		return why
	case why == "":
		return lost
	}
	return lost + "; " + why
}

// runLimit is how long the attempt may run and the reason it is killed
// with after that: its queue's ceiling or its own --time, whichever is
// sooner (0: no limit).
func runLimit(asg protocol.Assignment) (time.Duration, string) {
	c, lim := asg.Ceiling, protocol.TimeLimit(asg.Env)
	if lim > 0 && (c <= 0 || lim < c) {
		return protocol.Duration(lim), protocol.TimeLimitReason(lim)
	}
	return protocol.Duration(c), protocol.ReasonCeiling
}
