package diskroom

import (
	"syscall"
	"testing"
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
