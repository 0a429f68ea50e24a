package jobscript

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// ReadFile opens only a regular file: a job's first word naming anything
// else (a FIFO here; a device such as /dev/ttyS0, whose open may act on
// it, alike) is not opened at all, directly or through a link. Opens are
// seen by inotify, whose events are queued as the open happens.
func TestReadFileOpensOnlyRegular(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte("#!/bin/sh\n#MQ -c 2\necho\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, l := range [][2]string{{"fifo", "to-fifo"}, {"job.sh", "to-job.sh"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, dir, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	opened := func() []string {
		var names []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(in, buf)
			if errors.Is(err, unix.EAGAIN) {
				return names
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
				name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				names = append(names, string(bytes.TrimRight(name, "\x00")))
				off += unix.SizeofInotifyEvent + nameLen
			}
		}
	}
	for _, tc := range []struct {
		name   string
		ok     bool
		opened string // the entry opened, "" for none
	}{
		{"job.sh", true, "job.sh"},
		{"to-job.sh", true, "job.sh"},
		{"fifo", false, ""},
		{"to-fifo", false, ""},
		{"sub", false, ""},
		{"missing", false, ""},
	} {
		opened() // drop what came before
		h, ok, err := ReadFile(filepath.Join(dir, tc.name))
		got := opened()
		if err != nil || ok != tc.ok || ok && len(h.Lines) != 1 {
			t.Errorf("ReadFile(%s) = %+v, %v, %v; want ok %v", tc.name, h, ok, err, tc.ok)
		}
		switch {
		case tc.opened == "" && len(got) > 0:
			t.Errorf("ReadFile(%s) opened %q: only a regular file may be opened", tc.name, got)
		case tc.opened != "" && (len(got) == 0 || got[0] != tc.opened):
			t.Errorf("ReadFile(%s) opened %q, want %s", tc.name, got, tc.opened)
		}
	}
}
