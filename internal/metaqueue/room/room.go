// Package room keeps whether the database's filesystem has room for the
// metaqueue's next commit, after one failed for want of it (a full disk,
// a used-up quota: batchfail.NoRoom).
//
// A failed batch costs the core a reload of its whole state (about a
// second at a million jobs). While there is no room, the placeholders'
// polls, reports and registrations and users' submits would each fail
// again and cost another, so the core answers them with the failure's answer without
// running them, and lets everything else run (reads, deletes, waits). It
// asks Check before each batch. Room is back when the filesystem has
// MinFree free (statfs, cheap) and a small write beside the database goes
// through (batchfail.Probe, which sees a quota too); a probe that found
// no room is not made again for probeEvery. MinFree keeps what frees
// the disk reserve for deletes from counting as room.
//
// A database another process holds the write lock of (batchfail.IsLocked:
// an sqlite3 shell left in a transaction) has no room either, the same
// way, except that every try would first wait out the busy timeout with
// the whole core stopped: room is back when the lock can be taken
// (sqlitedb.WriteLockFree).
package room

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
	"github.com/mq-hpc/mq/internal/sqlitedb"
)

// probeEvery is the least time between two probes that found no room: a
// probe writes and syncs a file, which on a filesystem over its quota
// (often NFS) is not free.
const probeEvery = 100 * time.Millisecond

// Watch is the room of one database's filesystem. Its zero value, with
// Dir set, has room. The core goroutine owns it.
type Watch struct {
	// Dir is the database's directory.
	Dir string
	// MinFree is the free space (statfs) below which there is no room;
	// 0 looks only with the probe.
	MinFree int64
	// Probe is the small write that says whether a write fails for want
	// of room; nil is batchfail.Probe(Dir).
	Probe func() error
	// DB is the database; ProbeLock says whether its write lock is free
	// (nil: sqlitedb.WriteLockFree(DB)).
	DB        string
	ProbeLock func() error

	answer error     // what refused calls get; nil while there is room
	locked bool      // the answer is for a lock another process holds
	next   time.Time // no probe before then
}

// Probed is the probe's answer: the error if a small write beside the
// database fails for want of room, nil otherwise.
func (w *Watch) Probed() error {
	if w.Probe != nil {
		return w.Probe()
	}
	return batchfail.Probe(w.Dir)
}

// Full notes that a batch failed for want of room, or, locked, because
// another process holds the database's write lock; answer is what the
// calls that need room get until there is room again.
func (w *Watch) Full(answer error, locked bool) {
	w.answer, w.locked = answer, locked
}

// lockFree is ProbeLock's answer.
func (w *Watch) lockFree() error {
	if w.ProbeLock != nil {
		return w.ProbeLock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return sqlitedb.WriteLockFree(ctx, w.DB)
}

// LookForLock notes, as the store opens, a write lock another process
// holds already, so that changes are answered at once from the first,
// not after the busy timeout; log says so.
func (w *Watch) LookForLock(log *slog.Logger) {
	if err := w.lockFree(); batchfail.IsLocked(err) {
		w.Full(batchfail.Answer(err, w.Dir, nil), true)
		log.Warn("another process holds the database's write lock as the CLS starts: changes are refused until it lets go", "err", w.answer)
	}
}

// Locked says whether the answer is for a lock another process holds:
// then every change, not only the calls that need room, is answered so
// at once (a delete frees no lock).
func (w *Watch) Locked() bool { return w.locked }

// Begin runs begin, which takes the database's write lock, unless
// another process is known to hold it: then it fails at once with the
// answer, instead of after the busy timeout with the core stopped.
func (w *Watch) Begin(begin func() error) error {
	if w.locked {
		return w.answer
	}
	return begin()
}

// BeginFresh is Begin for a call that has changed nothing in memory yet:
// a lock found held (after the busy timeout) is noted, and log says so,
// as by LookForLock, and is the call's answer, so that its batch goes on
// and reloads nothing; later changes are answered at once.
func (w *Watch) BeginFresh(begin func() error, log *slog.Logger) error {
	err := w.Begin(begin)
	if err == nil || w.locked || !batchfail.IsLocked(err) {
		return err
	}
	w.Full(batchfail.Answer(err, w.Dir, nil), true)
	log.Warn("another process holds the database's write lock: changes are refused until it lets go", "err", w.answer)
	return w.answer
}

// Short says whether there is no room (as last looked).
func (w *Watch) Short() bool { return w.answer != nil }

// Check is what a batch at now gets: the answer for the calls that need
// room while there is none (nil: there is room), and back, true once when
// room has come back (the core then renews every lease, which no lapse
// was taken on meanwhile).
func (w *Watch) Check(now time.Time) (answer error, back bool) {
	if w.answer == nil {
		return nil, false
	}
	if now.Before(w.next) || !w.locked && !w.freeEnough() {
		return w.answer, false
	}
	probe := w.Probed
	if w.locked {
		probe = w.lockFree
	}
	if probe() != nil {
		w.next = now.Add(probeEvery)
		return w.answer, false
	}
	w.answer, w.locked, w.next = nil, false, time.Time{}
	return nil, true
}

// freeEnough says whether the filesystem has MinFree free (statfs).
func (w *Watch) freeEnough() bool {
	if w.MinFree <= 0 {
		return true
	}
	var st syscall.Statfs_t
	return syscall.Statfs(w.Dir, &st) != nil || int64(st.Bavail)*st.Bsize >= w.MinFree
}
