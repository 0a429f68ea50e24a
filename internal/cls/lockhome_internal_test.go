package cls

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// A CLS's lock on its home is free once it is closed, even while a child
// forked meanwhile still holds a copy of the descriptor (it does until it
// execs). The copy is made here with dup, which shares the lock as fork
// does.
func TestLockHomeFreedDespiteACopy(t *testing.T) {
	home := t.TempDir()
	unlock, err := lockHome(home)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, "cls.lock")
	fd := -1
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	for _, e := range ents {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); l == path {
			fd, _ = strconv.Atoi(e.Name())
		}
	}
	if fd < 0 {
		t.Fatal("the lock's descriptor is not open")
	}
	copied, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(copied)
	unlock()
	again, err := lockHome(home)
	if err != nil {
		t.Fatalf("after the CLS closed: %v", err)
	}
	again()
}
