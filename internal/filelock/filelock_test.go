package filelock_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mq-hpc/mq/internal/filelock"
)

// A lock is free once its file is closed, even while a copy of the
// descriptor lives on (made with dup here, which shares the lock as a
// fork does); and a file never locked closes as any other.
func TestCloseFreesDespiteACopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	copied, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(copied)
	if err := filelock.Close(f); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("locked after Close: %v", err)
	}
	if err := filelock.Close(g); err != nil {
		t.Fatal(err)
	}
}
