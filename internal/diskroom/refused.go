package diskroom

import (
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Refused says whether err is a write refused for want of room: a full
// disk (ENOSPC) or a used-up quota (EDQUOT), which the free space does
// not show (a home directory over its quota on a filesystem with
// petabytes free). A filesystem remounted read-only (EROFS: a network
// filesystem's client after errors) counts too: like room, writability
// comes back, and a probe sees when.
func Refused(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}

// Why is why a write was refused, without the path and op around it
// ("disk quota exceeded").
func Why(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en.Error()
	}
	return err.Error()
}

// Probe writes, syncs and removes a small file in dir, made by create
// (nil: os.Create), and returns the error: a quota may show only at the
// sync or the close (NFS).
func Probe(dir string, create func(path string) (io.WriteCloser, error)) error {
	if create == nil {
		create = func(path string) (io.WriteCloser, error) { return os.Create(path) }
	}
	path := filepath.Join(dir, ".mq-room-"+rand.Text()[:12])
	w, err := create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	_, err = w.Write(make([]byte, 8<<10))
	if s, ok := w.(interface{ Sync() error }); ok && err == nil {
		err = s.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// ProbeEvery is the least time between two probes of a Watch: a probe
// writes and syncs a file, which on a filesystem over its quota (often
// NFS) is not free.
const ProbeEvery = 2 * time.Second

// A Watch is whether writes in a directory are refused for want of room,
// as a write there found. Its zero value has room; it is safe for
// concurrent use.
type Watch struct {
	mu   sync.Mutex
	err  error     // the refused write; nil: room
	next time.Time // no probe before then
}

// Lost notes err at now if it is a write refused for want of room.
func (w *Watch) Lost(err error, now time.Time) {
	if !Refused(err) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err, w.next = err, now.Add(ProbeEvery)
	}
}

// Short is the refused write while writes are still refused for want of
// room: probe tries one again (where the refused one was), at most once
// every ProbeEvery; nil once one goes through (or fails for another
// reason, which the next write will say).
func (w *Watch) Short(now time.Time, probe func(refused error) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil || now.Before(w.next) {
		return w.err
	}
	if err := probe(w.err); Refused(err) {
		w.err, w.next = err, now.Add(ProbeEvery)
		return err
	}
	w.err = nil
	return nil
}
