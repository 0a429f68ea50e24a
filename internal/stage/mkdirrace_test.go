package stage

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/stage/sftptest"
)

// rootMadeMeanwhile makes the data root /root, as a concurrent transfer
// would, just after the first mkdir of /root/data failed for want of it.
type rootMadeMeanwhile struct {
	sftp.FileCmder
	done atomic.Bool
}

func (m *rootMadeMeanwhile) Filecmd(r *sftp.Request) error {
	err := m.FileCmder.Filecmd(r)
	if r.Method == "Mkdir" && r.Filepath == "/root/data" && err != nil && m.done.CompareAndSwap(false, true) {
		if err := m.FileCmder.Filecmd(sftp.NewRequest("Mkdir", "/root")); err != nil {
			panic(err)
		}
	}
	return err
}

// Transfers into a data root not made yet, several at a time (the CLS's
// stage workers, a site's first files), each make it if it is missing:
// one that found the root made by another in the middle of its own
// making failed with "mkdir ROOT/data: file does not exist".
func TestSFTPCreateRootMadeMeanwhile(t *testing.T) {
	_, hs := sftptest.New()
	m := &rootMadeMeanwhile{FileCmder: hs.FileCmd}
	hs.FileCmd = m
	c, _ := sftptest.Serve(t, hs)
	s := SFTP{Client: c, Root: "/root"}
	tmp, err := s.Create(context.Background(), "/data/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !m.done.Load() {
		t.Fatal("the root was never made meanwhile: the test proves nothing")
	}
}
