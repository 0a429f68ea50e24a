package outstream

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/mq-hpc/mq/internal/filelock"
)

// RecoverUnheld cuts the torn tail of every stream file (*.mqs) in dir
// that no process holds an flock on: its writer was killed while it
// wrote (a live writer holds its files). What lay in the tail was never
// reported. warn is told of each file cut (err nil) or that cannot be
// read.
func RecoverUnheld(dir string, warn func(path string, err error)) {
	names, err := filepath.Glob(filepath.Join(dir, "*.mqs"))
	if err != nil {
		return
	}
	for _, path := range names {
		lock, err := os.Open(path)
		if err != nil {
			continue
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			w, torn, err := Append(path)
			if err != nil || torn {
				warn(path, err)
			}
			if w != nil {
				w.Close()
			}
		}
		filelock.Close(lock)
	}
}
