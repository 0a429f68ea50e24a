// Package batchfail says what a failed metaqueue batch means: whether a
// module's error is the database's (Store), whether the disk is full, and
// the answer the batch's calls get. The core rolls the batch back and
// reloads; this is only the classification, so it holds no state.
package batchfail

import (
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/mq-hpc/mq/protocol"
)

// A Store error is a failure of the database, not of the request: the
// core rolls its batch back. A module returns its refusals as
// *protocol.Error and the database's failures wrapped in Store.
type Store struct{ Err error }

func (e Store) Error() string { return e.Err.Error() }
func (e Store) Unwrap() error { return e.Err }

// IsStore says whether err is the database's failure.
func IsStore(err error) bool {
	var se Store
	return errors.As(err, &se)
}

// IsFull says whether err is SQLite's "database or disk is full".
func IsFull(err error) bool {
	var ce interface{ Code() int }
	return errors.As(err, &ce) && ce.Code()&0xff == 13 // SQLITE_FULL
}

// IsIOErr says whether err is SQLite's I/O error (SQLITE_IOERR, any
// extended code).
func IsIOErr(err error) bool {
	var ce interface{ Code() int }
	return errors.As(err, &ce) && ce.Code()&0xff == 10 // SQLITE_IOERR
}

// IsLocked says whether err is SQLite's "database is locked"
// (SQLITE_BUSY, any extended code): another process holds the
// database's write lock past the busy timeout (an sqlite3 shell left in
// BEGIN IMMEDIATE or in the middle of a write).
func IsLocked(err error) bool {
	var ce interface{ Code() int }
	return errors.As(err, &ce) && ce.Code()&0xff == 5 // SQLITE_BUSY
}

// NoRoom says whether a batch that failed with cause failed for want of
// room, and why: SQLite reports a full disk (ENOSPC on write) as
// SQLITE_FULL, but a quota (EDQUOT), and a full disk found only at fsync
// or close (NFS), as an I/O error. For those probe says: a small write
// beside the database (Probe) that fails for want of room. A filesystem
// remounted read-only (EROFS, also an I/O error) counts too: every write
// would fail the same way until it is writable again, and each failure
// would cost the core a reload (ReadOnly tells it apart). Nil: not for
// want of room.
func NoRoom(cause error, probe func() error) error {
	switch {
	case IsFull(cause):
		return cause
	case IsIOErr(cause) && probe != nil:
		return probe()
	}
	return nil
}

// Probe writes, syncs and removes a small file in dir, and returns the
// error if that fails for want of room (ENOSPC, EDQUOT); nil otherwise,
// including when it fails for another reason.
func Probe(dir string) error {
	f, err := os.CreateTemp(dir, ".room-")
	if err != nil {
		return roomErr(err)
	}
	defer os.Remove(f.Name())
	return roomErr(writeProbe(f))
}

// writeProbe writes 8 KiB to f, syncs and closes it: a quota or a full
// disk may show only at the sync or the close (NFS).
func writeProbe(f *os.File) error {
	_, err := f.Write(make([]byte, 8<<10))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// roomErr is err if it is for want of room (or a read-only filesystem),
// else nil.
func roomErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) {
		return err
	}
	return nil
}

// ReadOnly says whether NoRoom's answer is a read-only filesystem: no
// space freed lets a write through.
func ReadOnly(noRoom error) bool { return errors.Is(noRoom, syscall.EROFS) }

const storagePrefix = "metaqueue storage failure: "

// Answer is the error every call of a batch that failed with cause is
// answered with; noRoom is NoRoom's answer. Want of room says what to
// do: free space on the filesystem of dir (the database's), or under the
// quota there, and try again; nothing was changed.
func Answer(cause error, dir string, noRoom error) error {
	// A cause from the core's own work (its tick) may carry the prefix
	// already.
	msg := strings.TrimPrefix(cause.Error(), storagePrefix)
	switch {
	case ReadOnly(noRoom):
		return protocol.Errorf(protocol.CodeInternal, storagePrefix+"%s: the filesystem of %s is read-only (remounted so after errors?): nothing was changed; try again once it can be written", msg, dir)
	case errors.Is(noRoom, syscall.EDQUOT):
		return protocol.Errorf(protocol.CodeInternal, storagePrefix+"%s: disk quota exceeded: nothing was changed; free space under your quota on the filesystem of %s and try again", msg, dir)
	case noRoom != nil && !IsFull(cause):
		return protocol.Errorf(protocol.CodeInternal, storagePrefix+"%s: the disk is full: nothing was changed; free space on the filesystem of %s and try again", msg, dir)
	case noRoom != nil:
		return protocol.Errorf(protocol.CodeInternal, storagePrefix+"%s: nothing was changed; free space on the filesystem of %s and try again", msg, dir)
	}
	if IsLocked(cause) {
		return protocol.Errorf(protocol.CodeInternal, storagePrefix+"%s: another process holds the write lock of the database in %s (an sqlite3 shell left in a transaction? fuser -v %s/mq.db* names it): nothing was changed; end its transaction and try again", msg, dir, dir)
	}
	return protocol.Errorf(protocol.CodeInternal, storagePrefix+"%s", msg)
}
