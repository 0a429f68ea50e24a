// Package diskroom says how much room a filesystem has left for output:
// free bytes, and whether its free inodes fell below what is kept for the
// CLS. The server (stream pieces, staged chunks) and the agents (their own
// output) keep the same inodes free.
package diskroom

import "syscall"

// Free is a filesystem's room as an unprivileged process sees it.
type Free struct {
	Bytes  int64  // may still be written
	Inodes uint64 // free inodes
	Keep   uint64 // inodes kept free (InodeReserve of the total); 0: none
}

// InodesShort says whether fewer inodes are free than are kept: every new
// file takes one, and tiny files run out of inodes long before bytes,
// after which nothing (the database's WAL included) can be made there.
func (f Free) InodesShort() bool { return f.Inodes < f.Keep }

// InodeReserve is how many of a filesystem's total inodes are kept free:
// a tenth, at most 65,536. A filesystem that reports no total (btrfs,
// some network ones) makes inodes as it needs them: none.
func InodeReserve(total uint64) uint64 { return min(total/10, 1<<16) }

// Of is the room st reports.
func Of(st *syscall.Statfs_t) Free {
	return Free{Bytes: int64(st.Bavail) * st.Bsize, Inodes: st.Ffree, Keep: InodeReserve(st.Files)}
}

// Dir is the room on dir's filesystem.
func Dir(dir string) (Free, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Free{}, err
	}
	return Of(&st), nil
}
