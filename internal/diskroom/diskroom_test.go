package diskroom

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		files, ffree uint64
		short        bool
	}{
		{"plenty", 1000, 500, false},
		{"a tenth left", 1000, 100, false},
		{"under a tenth", 1000, 99, true},
		{"large: 65536 kept", 10 << 20, 1 << 16, false},
		{"large, under 65536", 10 << 20, 1<<16 - 1, true},
		{"no total (btrfs)", 0, 0, false},
	} {
		f := Of(&syscall.Statfs_t{Bavail: 3, Bsize: 4096, Files: tc.files, Ffree: tc.ffree})
		if f.Bytes != 3*4096 || f.InodesShort() != tc.short {
			t.Errorf("%s: %+v short %v, want %d bytes, short %v", tc.name, f, f.InodesShort(), 3*4096, tc.short)
		}
	}
}

func TestDir(t *testing.T) {
	t.Parallel()
	if f, err := Dir(t.TempDir()); err != nil || f.Bytes <= 0 {
		t.Fatalf("%+v, %v", f, err)
	}
}

// TestWatch: a write refused for want of room (ENOSPC, EDQUOT, wrapped)
// is kept until a probe, tried at most once every ProbeEvery, goes
// through; other errors are not want of room.
func TestWatch(t *testing.T) {
	var w Watch
	now := time.Now()
	w.Lost(&os.PathError{Op: "write", Path: "o", Err: syscall.EIO}, now)
	probes := 0
	refuse := func(error) error { probes++; return &os.PathError{Op: "write", Path: "p", Err: syscall.EDQUOT} }
	if err := w.Short(now, refuse); err != nil || probes != 0 {
		t.Fatalf("after EIO: Short = %v after %d probes, want room, no probe", err, probes)
	}
	w.Lost(&os.PathError{Op: "write", Path: "o", Err: syscall.EDQUOT}, now)
	if err := w.Short(now.Add(ProbeEvery/2), refuse); !Refused(err) || probes != 0 || Why(err) != "disk quota exceeded" {
		t.Fatalf("before ProbeEvery: Short = %v after %d probes, want the refusal and no probe", err, probes)
	}
	if err := w.Short(now.Add(ProbeEvery), refuse); !Refused(err) || probes != 1 {
		t.Fatalf("probe refused: Short = %v after %d probes", err, probes)
	}
	if err := w.Short(now.Add(2*ProbeEvery), func(error) error { probes++; return nil }); err != nil || probes != 2 {
		t.Fatalf("probe through: Short = %v after %d probes, want room", err, probes)
	}
	if !Refused(syscall.ENOSPC) || !Refused(syscall.EROFS) || Refused(syscall.EIO) || Refused(syscall.EFBIG) || Refused(nil) {
		t.Error("Refused: wrong")
	}
}

// TestProbe: a probe in a directory with room goes through and leaves
// nothing; one whose file refuses writes says so.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	if err := Probe(dir, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("Probe left %v", left)
	}
	full := func(string) (io.WriteCloser, error) { return os.OpenFile("/dev/full", os.O_WRONLY, 0) }
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	if err := Probe(dir, full); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Probe to /dev/full: %v, want ENOSPC", err)
	}
}
