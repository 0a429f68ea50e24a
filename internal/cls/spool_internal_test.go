package cls

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/protocol"
)

// A spool file's site check runs on the store's core, and a cls site add
// holds the site manager's lock while it waits for that core
// (Store.AddSite): the check must not wait for the manager's lock, or
// both wait for ever. Here the add takes the lock while the check runs
// and holds it until the check has returned; a check that waited for the
// lock would not return, and the add gives up after a minute, failing
// the test (and letting the check go on) rather than hanging it.
func TestSpoolCheckBesideSiteAdd(t *testing.T) {
	dir, err := os.MkdirTemp("", "mqcls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := New(ctx, Config{Home: filepath.Join(dir, "home"), Lease: time.Hour, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// A report of a placeholder the store never knew: its site is "", and
	// the report changes nothing; what matters is the check.
	now := time.Now()
	if _, err := spool.Write(filepath.Join(c.outputDir(), spool.Dir), 7, 0, []protocol.Report{{ID: 1, Attempt: 1, Started: now, Finished: now}}); err != nil {
		t.Fatal(err)
	}

	locked, checked := make(chan struct{}), make(chan struct{})
	added := make(chan error, 1)
	prepare := c.sites.mgr.Prepare
	c.sites.mgr.Prepare = func(spec protocol.SiteSpec) error {
		// Manager.Add holds its lock here, before it calls the store.
		close(locked)
		select {
		case <-checked:
		case <-time.After(time.Minute):
			return errors.New("the spool's site check did not return while cls site add held the site manager's lock")
		}
		return prepare(spec)
	}
	var once sync.Once
	c.spoolCheck = func(check func(string) bool) func(string) bool {
		return func(name string) bool {
			first := false
			once.Do(func() {
				first = true
				go func() {
					_, err := c.sites.mgr.Add(ctx, protocol.SiteSpec{Name: "added", Type: "local", Max: 0})
					added <- err
				}()
				select {
				case <-locked:
				case <-time.After(time.Minute):
					t.Error("cls site add did not take the site manager's lock in a minute")
				}
			})
			ok := check(name)
			if first {
				close(checked)
			}
			return ok
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		c.Close()
	}()
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("cls site add beside the spool's look: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("cls site add beside the spool's look has not returned in 2 minutes")
	}
	if left, _ := os.ReadDir(filepath.Join(c.outputDir(), spool.Dir)); len(left) != 0 {
		t.Errorf("left in the spool: %v", left)
	}
}
