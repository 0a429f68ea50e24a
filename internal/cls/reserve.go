package cls

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/mqhome"
)

// Disk space kept for the database. Jobs' output is written beside it
// (MQ_HOME/output), and anything else on the filesystem may fill it.
//
//   - Output stops where it would leave less than OutputReserve free
//     (local placeholders, and the CLS's copies of remote output).
//   - A reserve file, MQ_HOME/reserve, holds reserveSize bytes. When a
//     commit fails because the disk is full (or the user's quota on it is
//     used up: batchfail.NoRoom), the store releases it and commits
//     again, so a delete (or the report of a job's end) goes through; it
//     is made again once there is room.

// reserveSize is the reserve file's size: 1 MiB, or a 16th of a smaller
// filesystem. A delete of one job, or of an array of thousands, takes
// a few pages of the WAL; 1 MiB is some 250 of them.
func reserveSize(fsSize int64) int64 { return min(1<<20, fsSize/16) }

// DefaultOutputReserve is the free space output leaves on MQ_HOME's
// filesystem by default: a tenth of it, at most 64 MiB.
func DefaultOutputReserve(home string) (int64, error) {
	size, _, err := fsSpace(home)
	if err != nil {
		return 0, err
	}
	return min(64<<20, size/10), nil
}

// fsSpace is the size of dir's filesystem and the space still free on it
// for an unprivileged process.
func fsSpace(dir string) (size, free int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// diskReserve is the reserve file.
type diskReserve struct {
	path string
	log  *slog.Logger
	size int64

	mu   sync.Mutex
	held bool
}

func newDiskReserve(path string, log *slog.Logger) (*diskReserve, error) {
	size, _, err := fsSpace(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	r := &diskReserve{path: path, log: log, size: reserveSize(size)}
	r.make()
	return r, nil
}

// make writes the reserve file if it is not there and the disk has room
// for it and as much again.
func (r *diskReserve) make() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		return
	}
	if _, free, err := fsSpace(filepath.Dir(r.path)); err != nil || free < 2*r.size {
		return
	}
	f, err := mqhome.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		r.log.Warn("cannot make the disk reserve", "err", err)
		return
	}
	// Written, not truncated to size: a sparse file would hold no blocks.
	_, err = f.Write(make([]byte, r.size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(r.path)
		if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
			r.log.Warn("cannot make the disk reserve", "err", err)
		}
		return
	}
	r.held = true
}

// release removes the reserve file, for the store to commit on a full
// disk; it says whether it freed anything.
func (r *diskReserve) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		return false
	}
	r.held = false
	if err := os.Remove(r.path); err != nil {
		r.log.Error("cannot release the disk reserve", "err", err)
		return false
	}
	r.log.Warn("the disk is full (or its quota used up): released the reserve of the database; free space in MQ_HOME's filesystem", "bytes", r.size)
	return true
}

// tend calls each of fns every period until done is closed: the CLS's
// housekeeping of its disk (the reserve made again, the WAL's growth).
func tend(done <-chan struct{}, every time.Duration, fns ...func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			for _, fn := range fns {
				fn()
			}
		}
	}
}
