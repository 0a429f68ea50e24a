package netfs

import (
	"errors"
	"testing"
)

// TestNetwork: the network and cluster filesystems are named by their
// f_type; local ones (and unknown ones) are not.
func TestNetwork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind Kind
		want string
	}{
		{0x6969, "NFS"},
		{0xFF534D42, "CIFS"},
		{0xFE534D42, "SMB2"},
		{0x517B, "SMB"},
		{0x0BD00BD0, "Lustre"},
		{0x47504653, "GPFS"},
		{0x19830326, "BeeGFS"},
		{0x00C36400, "CephFS"},
		{0x65735546, "FUSE (sshfs or another user-space filesystem)"},
		{0xEF53, ""},     // ext4
		{0x58465342, ""}, // XFS
		{0x9123683E, ""}, // Btrfs
		{0x01021994, ""}, // tmpfs
		{0x794C7630, ""}, // overlayfs
		{0x2FC12FC1, ""}, // ZFS
		{0xFFFFFFFF, ""}, // unknown
		{0, ""},
	} {
		if got := Network(tc.kind); got != tc.want {
			t.Errorf("Network(%#x) = %q, want %q", uint32(tc.kind), got, tc.want)
		}
	}
}

// TestOn: On asks the function given, and passes its error on.
func TestOn(t *testing.T) {
	t.Parallel()
	nfs := func(string) (Kind, error) { return 0x6969, nil }
	if got, err := On("/home/u/.mq", nfs); got != "NFS" || err != nil {
		t.Errorf("On NFS = %q, %v", got, err)
	}
	boom := errors.New("boom")
	if _, err := On("/x", func(string) (Kind, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	if got, err := On(t.TempDir(), nil); err != nil {
		t.Errorf("On a temporary directory: %v", err)
	} else if got != "" {
		t.Logf("the temporary directory is on %s", got)
	}
}
