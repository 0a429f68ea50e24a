package stage

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/stage/sftptest"
)

// TestSFTPCallsHungServer: the calls an SFTP place serves outside a
// transfer (the data root's check and sweep, stat and remove, a file's
// hash) fail with ErrStalled once the server, hung with its connection
// up, leaves them unanswered for the place's Stall, saying what was
// being done and where, and the place is cut; before, they waited for
// ever, holding their caller (a stage worker, a request of cls files).
func TestSFTPCallsHungServer(t *testing.T) {
	for _, tc := range []struct {
		name, what string
		call       func(ctx context.Context, s SFTP) error
	}{
		{"check root", "checking the data root /data", func(ctx context.Context, s SFTP) error { return s.CheckRoot(ctx) }},
		{"sweep", "sweeping the data root /data", func(ctx context.Context, s SFTP) error { _, err := s.Sweep(ctx); return err }},
		{"stat", "stat /in/x", func(ctx context.Context, s SFTP) error { _, err := s.Stat(ctx, "/in/x"); return err }},
		{"remove", "remove /in/x", func(ctx context.Context, s SFTP) error { return s.Remove(ctx, "/in/x") }},
		{"hash", "hashing /in/x", func(ctx context.Context, s SFTP) error { _, _, err := HashFile(ctx, s, "/in/x"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hang := sftptest.NewHang()
			_, hs := sftptest.New()
			c, conn := sftptest.Serve(t, hang.Handlers(hs))
			t.Cleanup(hang.Release)
			var cut atomic.Bool
			s := SFTP{Client: c, Root: "/data", Writer: "b", Stall: 200 * time.Millisecond,
				Drop: func() bool { cut.Store(true); conn.Close(); return true }}
			tmp, err := s.Create(context.Background(), "/in/x")
			if err == nil {
				_, err = tmp.Write([]byte("xyz"))
			}
			if err == nil {
				err = tmp.Commit(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			hang.Set(true)
			done := make(chan error, 1)
			go func() { done <- tc.call(context.Background(), s) }()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("still waiting on a hung SFTP server after 30 s")
			}
			if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), tc.what) || !strings.Contains(err.Error(), "its connection was cut") {
				t.Errorf("err %v; want ErrStalled, saying %q and the cut", err, tc.what)
			}
			if tc.name != "hash" && !strings.Contains(err.Error(), "SFTP server of b") {
				t.Errorf("err %v does not name the site", err)
			}
			if !cut.Load() {
				t.Error("the place was not cut")
			}
			if _, err := c.Getwd(); err == nil {
				t.Errorf("the client still answers after the cut")
			}
		})
	}
}
