// Package filelock releases flock(2) locks so that no process started
// meanwhile keeps them.
package filelock

import (
	"os"
	"syscall"
)

// Close unlocks f's flock lock, then closes f. A lock belongs to the open
// file description, not to the descriptor: a child that another goroutine
// is forking holds a copy of every descriptor until it execs, and closing
// f alone would leave the lock held through that window (a CLS started
// next in the same process would find its home taken). Unlocking through
// any copy releases it. Unlocking a file not locked does nothing.
func Close(f *os.File) error {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}
