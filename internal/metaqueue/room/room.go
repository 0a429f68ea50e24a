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
package room

import (
	"syscall"
	"time"

	"github.com/mq-hpc/mq/internal/batchfail"
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

	answer error     // what refused calls get; nil while there is room
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

// Full notes that a batch failed for want of room; answer is what the
// calls that need room get until there is room again.
func (w *Watch) Full(answer error) {
	w.answer = answer
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
	if !w.freeEnough() || now.Before(w.next) {
		return w.answer, false
	}
	if w.Probed() != nil {
		w.next = now.Add(probeEvery)
		return w.answer, false
	}
	w.answer, w.next = nil, time.Time{}
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
