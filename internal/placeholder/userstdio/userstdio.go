// Package userstdio writes a job's stdout and stderr to the files mqsub
// -o and -e named, besides the attempt's own output: opened where other
// users may have been first (pathguard), and passed through the agent's
// fence while it is frozen.
package userstdio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mq-hpc/mq/internal/pathguard"
	"github.com/mq-hpc/mq/internal/placeholder/fence"
	"github.com/mq-hpc/mq/protocol"
)

// File is a file mqsub -o or -e named: the job's stream is written to
// it as well as to the attempt's own output. A write error there loses
// that copy, never the job or mq's copy: it is remembered and reported as
// output lost.
type File struct {
	name string // as the job asked, for the report
	// held passes the writes through the agent's fence: kept after a
	// freeze until the CLS says whose job it is.
	held *fence.Held

	mu  sync.Mutex
	f   *os.File
	err error
}

func (u *File) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.held.Write(p)
	return len(p), nil
}

func (u *File) write(p []byte) {
	if u.err == nil {
		if _, err := u.f.Write(p); err != nil {
			u.err = err
		}
	}
}

// Files is an attempt's -o and -e files (nil where none was asked;
// both the same when they name one file).
type Files struct{ Out, Err *File }

// Named says whether the job names a stdout or stderr file of its
// own (mqsub -o, -e).
func Named(asg protocol.Assignment) bool {
	for _, kv := range asg.Env {
		if strings.HasPrefix(kv, protocol.EnvStdout+"=") || strings.HasPrefix(kv, protocol.EnvStderr+"=") {
			return true
		}
	}
	return false
}

// Open creates the files the job's environment names for its
// stdout and stderr (protocol.EnvStdout, EnvStderr), relative to its
// working directory dir, truncated, before the job starts: a directory
// that does not exist fails the attempt now, with that reason. Without
// an -e, stderr goes with stdout (sbatch's rule). Their writes pass w
// (nil: none); an attempt w says was lost while the agent was frozen
// opens none (opening truncates another attempt's).
func Open(asg protocol.Assignment, dir string, w *fence.Watch) (Files, error) {
	if !w.Pass(protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}) {
		return Files{}, fence.ErrLost
	}
	var out, errp string
	for _, kv := range asg.Env {
		if v, ok := strings.CutPrefix(kv, protocol.EnvStdout+"="); ok {
			out = v
		} else if v, ok := strings.CutPrefix(kv, protocol.EnvStderr+"="); ok {
			errp = v
		}
	}
	var u Files
	open := func(flag, pattern string) (*File, error) {
		p := protocol.ExpandStdio(pattern, asg.ID, asg.Target, asg.Env)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if u.Out != nil && u.Out.f.Name() == p {
			return u.Out, nil
		}
		f, err := pathguard.OpenOutput(p)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("%s %s: %v", flag, p, err)
		}
		uf := &File{name: p, f: f}
		uf.held = w.Held(protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}, uf.write)
		return uf, nil
	}
	var err error
	if out != "" {
		if u.Out, err = open("-o", out); err != nil {
			return u, err
		}
	}
	switch {
	case errp != "":
		u.Err, err = open("-e", errp)
	default:
		u.Err = u.Out
	}
	if err != nil {
		u.Close()
	}
	return u, err
}

// Close closes the files; lost says what could not be written to them.
// Closing again does nothing.
func (u Files) Close() string {
	var causes []string
	for i, f := range []*File{u.Out, u.Err} {
		if f == nil || (i == 1 && f == u.Out) {
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
			causes = append(causes, fmt.Sprintf("%s: %v", f.name, f.err))
		}
		f.err = os.ErrClosed // a straggling write after this is dropped
		f.mu.Unlock()
	}
	for _, f := range []*File{u.Out, u.Err} {
		if f != nil {
			f.held.Forget()
		}
	}
	return strings.Join(causes, "; ")
}

// Writer is f as an io.Writer for a sink: nil when there is no file.
func (f *File) Writer() io.Writer {
	if f == nil {
		return nil
	}
	return f
}
