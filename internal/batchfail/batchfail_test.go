package batchfail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// codeErr stands in for the SQLite driver's errors, which carry a code.
type codeErr int

func (c codeErr) Error() string { return fmt.Sprintf("sqlite code %d", int(c)) }
func (c codeErr) Code() int     { return int(c) }

func TestIsFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
		{"full", codeErr(13), true},
		{"full extended", codeErr(13 | 3<<8), true},
		{"busy", codeErr(5), false},
		{"wrapped full", fmt.Errorf("commit: %w", codeErr(13)), true},
		{"joined full", errors.Join(errors.New("rollback"), codeErr(13)), true},
	} {
		if got := IsFull(tc.err); got != tc.want {
			t.Errorf("%s: IsFull = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cause  error
		noRoom error
		has    []string
		hasnt  string
	}{
		{"other", errors.New("disk I/O error"), nil, []string{"metaqueue storage failure: disk I/O error"}, "free space"},
		{"full", codeErr(13), codeErr(13), []string{"nothing was changed", "free space on the filesystem of /var/mq"}, "quota"},
		{"quota", codeErr(10 | 3<<8), syscall.EDQUOT, []string{"sqlite code 778: disk quota exceeded: nothing was changed", "free space under your quota on the filesystem of /var/mq"}, ""},
		{"full at fsync", codeErr(10 | 4<<8), syscall.ENOSPC, []string{"sqlite code 1034: the disk is full: nothing was changed", "free space on the filesystem of /var/mq"}, "quota"},
		{"read-only", codeErr(10 | 3<<8), syscall.EROFS, []string{"sqlite code 778: the filesystem of /var/mq is read-only", "nothing was changed; try again once it can be written"}, "free space"},
	} {
		err := Answer(tc.cause, "/var/mq", tc.noRoom)
		if !protocol.IsCode(err, protocol.CodeInternal) {
			t.Errorf("%s: %v is not CodeInternal", tc.name, err)
		}
		for _, s := range tc.has {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q lacks %q", tc.name, err, s)
			}
		}
		if tc.hasnt != "" && strings.Contains(err.Error(), tc.hasnt) {
			t.Errorf("%s: %q has %q", tc.name, err, tc.hasnt)
		}
	}
}

// TestNoRoom: SQLITE_FULL is want of room; an I/O error is when the
// probe says so (a quota, a full disk found at fsync); nothing else is.
func TestNoRoom(t *testing.T) {
	probed := 0
	probe := func(err error) func() error {
		return func() error { probed++; return err }
	}
	for _, tc := range []struct {
		name   string
		cause  error
		probe  error
		want   error
		probes int
	}{
		{"full", codeErr(13), nil, codeErr(13), 0},
		{"quota", codeErr(10 | 3<<8), syscall.EDQUOT, syscall.EDQUOT, 1},
		{"I/O error with room", codeErr(10 | 3<<8), nil, nil, 1},
		{"read-only", codeErr(10 | 3<<8), &os.PathError{Op: "open", Path: "/var/mq/.room-1", Err: syscall.EROFS}, syscall.EROFS, 1},
		{"busy", codeErr(5), syscall.ENOSPC, nil, 0},
		{"not SQLite's", errors.New("boom"), syscall.ENOSPC, nil, 0},
	} {
		probed = 0
		if got := NoRoom(tc.cause, probe(tc.probe)); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) || probed != tc.probes {
			t.Errorf("%s: NoRoom = %v after %d probes, want %v after %d", tc.name, got, probed, tc.want, tc.probes)
		}
	}
	if !IsIOErr(codeErr(10|4<<8)) || IsIOErr(codeErr(13)) || IsIOErr(nil) {
		t.Error("IsIOErr: wrong")
	}
}

// TestProbe: a directory with room passes and keeps nothing; a write
// that finds no room (/dev/full) is one; other failures are not.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	if err := Probe(dir); err != nil {
		t.Fatalf("Probe of a directory with room: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("Probe left %v", left)
	}
	if err := Probe(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("Probe of a missing directory: %v, want nil (not for want of room)", err)
	}
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	if err := roomErr(writeProbe(f)); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a write to /dev/full: %v, want ENOSPC", err)
	}
	// A filesystem remounted read-only refuses the probe's file as it
	// refuses the database's writes.
	if err := roomErr(&os.PathError{Op: "open", Path: dir, Err: syscall.EROFS}); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a read-only filesystem: %v, want EROFS", err)
	}
}

// TestIsStore: a module's wrapped database failure is told from its
// refusals, wrapped again or not.
func TestIsStore(t *testing.T) {
	broken := errors.New("disk I/O error")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{Store{Err: broken}, true},
		{fmt.Errorf("site a: %w", Store{Err: broken}), true},
		{protocol.Errorf(protocol.CodeBadRequest, "no such site"), false},
		{broken, false},
		{nil, false},
	} {
		if got := IsStore(tc.err); got != tc.want {
			t.Errorf("IsStore(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !errors.Is(Store{Err: broken}, broken) || (Store{Err: broken}).Error() != broken.Error() {
		t.Error("Store does not wrap its error")
	}
}

// TestLocked: SQLite's "database is locked" is told apart, and its
// answer says another process holds the lock and what to do, with the
// core's prefix once.
func TestLocked(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{codeErr(5), true},
		{codeErr(5 | 2<<8), true}, // SQLITE_BUSY_SNAPSHOT
		{fmt.Errorf("begin: %w", codeErr(5)), true},
		{codeErr(6), false}, // SQLITE_LOCKED: within one connection
		{codeErr(13), false},
	} {
		if got := IsLocked(tc.err); got != tc.want {
			t.Errorf("IsLocked(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	err := Answer(fmt.Errorf("metaqueue storage failure: %w", codeErr(5)), "/var/mq", nil)
	for _, s := range []string{"metaqueue storage failure: sqlite code 5: another process holds the write lock of the database in /var/mq", "nothing was changed"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q lacks %q", err, s)
		}
	}
	if strings.Count(err.Error(), "storage failure") != 1 {
		t.Errorf("%q: the prefix twice", err)
	}
}
