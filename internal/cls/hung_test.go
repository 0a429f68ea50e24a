package cls

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/internal/stage/sftptest"
	"github.com/mq-hpc/mq/protocol"
)

const hungStall = 200 * time.Millisecond

// hungSite is site b's data root over SFTP, /in/x in it, and the Hang
// that makes its server stop answering (only reads and writes of files
// when filesOnly). cut says the place was cut.
func hungSite(t *testing.T, filesOnly bool) (stage.SFTP, *sftptest.Hang, chan struct{}) {
	t.Helper()
	hang := sftptest.NewHang()
	_, hs := sftptest.New()
	served := hang.Handlers(hs)
	if filesOnly {
		served.FileCmd, served.FileList = hs.FileCmd, hs.FileList
	}
	c, conn := sftptest.Serve(t, served)
	t.Cleanup(hang.Release)
	cut := make(chan struct{})
	var once sync.Once
	pl := stage.SFTP{Client: c, Root: "/data", Writer: "b", Stall: hungStall,
		Drop: func() bool { once.Do(func() { close(cut); conn.Close() }); return true }}
	tmp, err := pl.Create(context.Background(), "/in/x")
	if err == nil {
		_, err = tmp.Write([]byte("xyz"))
	}
	if err == nil {
		err = tmp.Commit(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	return pl, hang, cut
}

// within runs f and fails the test if it has not returned after 30 s.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still waiting on a hung SFTP server after 30 s", what)
	}
}

func wasCut(t *testing.T, cut chan struct{}) {
	t.Helper()
	select {
	case <-cut:
	default:
		t.Error("the place was not cut")
	}
}

// cls files add and rm on a site whose sftp-server hangs (its connection
// up, so keepalive never cuts it) fail, or finish, within the place's
// stall limit, the add with a one-line error saying what and where, and
// the place cut so that its next use dials anew; they waited for ever,
// holding the CLS's request handler.
func TestFilesHungSFTP(t *testing.T) {
	for _, tc := range []struct {
		name      string
		filesOnly bool // stat answered, the file's reads not
		want      string
	}{
		{"stat", false, "stat /in/x: stalled: the SFTP server of b left it unanswered"},
		{"hash", true, "at b: hashing /in/x: stalled: no byte read"},
	} {
		t.Run("add "+tc.name, func(t *testing.T) {
			pl, hang, cut := hungSite(t, tc.filesOnly)
			f := &files{store: &fakeCatalog{}, log: slog.New(slog.DiscardHandler), now: time.Now,
				places: func(context.Context, catalog.Place) (stage.Place, bool, error) { return pl, false, nil }}
			hang.Set(true)
			var err error
			within(t, "files add", func() { _, err = f.add(context.Background(), protocol.FilesAdd{Path: "/in/x", Site: "b"}) })
			if !errors.Is(err, stage.ErrStalled) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("files add: %v; want one line with %q", err, tc.want)
			}
			wasCut(t, cut)
		})
	}
	t.Run("rm", func(t *testing.T) {
		pl, hang, cut := hungSite(t, false)
		f := &files{store: &fakeCatalog{dropped: []catalog.Place{at("b")}}, log: slog.New(slog.DiscardHandler), now: time.Now,
			places: func(context.Context, catalog.Place) (stage.Place, bool, error) { return pl, false, nil }}
		hang.Set(true)
		var err error
		within(t, "files rm", func() { _, err = f.remove(context.Background(), protocol.FilesRemove{Path: "/in/x", Site: "b"}) })
		if err != nil {
			t.Errorf("files rm: %v (the catalog dropped the replica; the file's removal is only logged)", err)
		}
		wasCut(t, cut)
	})
}

// The data root's check and the sweep of leftovers, before a site's
// first transfer in a run, on a hung sftp-server: the sweep held every
// caller for the site (stage workers, cls files requests) on its
// sync.Once for ever. Now each returns within the stall limit, the
// caller that ran the sweep with the stall as the site's error, and the
// check as the site unreachable.
func TestSitesHungSFTP(t *testing.T) {
	pl, hang, cut := hungSite(t, false)
	s := &sites{log: slog.New(slog.DiscardHandler)}
	hang.Set(true)
	errs := make([]error, 3)
	within(t, "sweeps", func() {
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = s.sweepOnce(context.Background(), "b", pl) })
		}
		wg.Wait()
	})
	stalled := 0
	for _, err := range errs {
		if errors.Is(err, stage.ErrStalled) {
			stalled++
		} else if err != nil {
			t.Errorf("a sweep: %v", err)
		}
	}
	if stalled != 1 {
		t.Errorf("%d sweeps said the stall (%v); want the one that ran", stalled, errs)
	}
	wasCut(t, cut)

	pl, hang, _ = hungSite(t, false)
	hang.Set(true)
	var err error
	within(t, "checkRoot", func() { err = s.checkRoot(context.Background(), "b", pl) })
	if !isUnreachable(err) || !errors.Is(err, stage.ErrStalled) || !strings.Contains(err.Error(), "site b cannot be reached: checking the data root /data: stalled") {
		t.Errorf("checkRoot: %v; want b unreachable, stalled", err)
	}
}
