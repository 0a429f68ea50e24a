package server

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestRoomForInodes: the room check keeps free inodes as it keeps free
// bytes, except on a filesystem that reports no inodes at all.
func TestRoomForInodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		files, ffree uint64
		reserve      int64
		want         string // in the error; "" for none
	}{
		{"plenty", 1 << 20, 1 << 19, 1, ""},
		{"a tenth free", 1 << 16, 6553, 1, ""},
		{"few free", 1 << 20, 1 << 15, 1, "nearly out of inodes (32768 files free; 65536 are kept"},
		{"small filesystem", 1000, 99, 1, "nearly out of inodes (99 files free; 100 are kept"},
		{"none free", 1000, 0, 1, "nearly out of inodes"},
		{"no inode count (btrfs)", 0, 0, 1, ""},
		{"no reserve", 1000, 0, 0, ""},
	} {
		srv := &Server{OutputDir: t.TempDir(), OutputReserve: tc.reserve}
		srv.statfs = func(_ string, st *syscall.Statfs_t) error {
			*st = syscall.Statfs_t{Bsize: 4096, Bavail: 1 << 30, Files: tc.files, Ffree: tc.ffree}
			return nil
		}
		err := srv.roomFor(10)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// TestShipStreamNoInodes: a stream piece of a new file on a filesystem
// short of inodes is refused for room and makes no file.
func TestShipStreamNoInodes(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	srv := &Server{Store: newStore(t), OutputDir: out, OutputReserve: 1}
	srv.statfs = func(_ string, st *syscall.Statfs_t) error {
		*st = syscall.Statfs_t{Bsize: 4096, Bavail: 1 << 30, Files: 1 << 20, Ffree: 10}
		return nil
	}
	a := connect(t, srv, protocol.RolePlaceholder)
	a.hello("")
	var ra protocol.RegisterReply
	a.do(protocol.OpRegister.Name, protocol.Register{Site: "s", Host: "h", Slots: 1, OutDir: "/scratch/out"}, &ra)
	name := protocol.StreamFileName(ra.ID, 0)
	e := a.fails(protocol.OpOutputShip.Name, protocol.StreamPiece{Placeholder: ra.ID, File: name, Data: []byte("MQSTRM01")}, protocol.CodeTooLarge)
	if !strings.Contains(e.Msg, "inodes") {
		t.Errorf("refusal %q does not say inodes", e.Msg)
	}
	if _, err := os.Stat(filepath.Join(out, protocol.StreamDir, name)); err == nil {
		t.Errorf("a piece refused for inodes made %s", name)
	}
}
