package metaqueue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/sqlitedb/sqlitetest"
	"github.com/mq-hpc/mq/protocol"
)

// syncBuf is a log the core writes while the test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLockedByAnotherProcess: another connection holding the database's
// write lock (an sqlite3 shell left in BEGIN IMMEDIATE) fails the write
// that meets it with an answer and a log line that say so; the writes
// after it are answered so at once, not after the busy timeout each with
// the core stopped; reads go on; once the lock is let go, writes go
// through again without a restart.
func TestLockedByAnotherProcess(t *testing.T) {
	var logs syncBuf
	e := newEnvWith(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	e.submit1("a", "true")
	ctx := context.Background()
	shell := sqlitetest.Shell(t, e.opt.Path)
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const why = "another process holds the write lock of the database"
	if _, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")}); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("submit under the lock: %v, want %q", err, why)
	}
	if got := strings.Count(logs.String(), why); got != 1 {
		t.Errorf("%d log lines say why, want 1:\n%s", got, logs.String())
	}
	start := time.Now()
	_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")})
	if err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("second submit under the lock: %v, want %q", err, why)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second submit answered after %v: it waited for the lock again; log:\n%s", d, logs.String())
	}
	if jobs := e.stat(protocol.Stat{}); len(jobs) != 1 {
		t.Errorf("mqstat under the lock: %d jobs, want 1", len(jobs))
	}
	if _, err := shell.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		e.clock.Advance(time.Second) // the core looks at the lock again when due
		_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the lock went: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.check()
}

// TestLockedChanges: while another process is known to hold the write
// lock, every change a user makes (mqdel, mqhold, mqrls, mqalter, mqsub
// --rerun, cls queue set, cls purge, cls site add) is answered at once
// with the same answer as a submit, without the state reloaded; mqstat
// and cls site list answer meanwhile; once the lock goes, each goes through.
func TestLockedChanges(t *testing.T) {
	var logs syncBuf
	e := newEnvWith(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	gone := e.submit1("c", "true") // done: for cls purge to remove
	e.runAll(e.register("s"))
	e.advance(time.Hour) // ended before now
	id := e.submit1("a", "true")
	ctx := context.Background()
	one := protocol.Select{IDs: []int64{id}}
	prio := 5
	ceiling := 3600.0
	changes := []struct {
		name string
		do   func() error
	}{
		{"mqhold", func() error { _, err := e.s.Hold(ctx, one); return err }},
		{"mqrls", func() error { _, err := e.s.Release(ctx, one); return err }},
		{"mqalter", func() error { _, err := e.s.Alter(ctx, protocol.Alter{Select: one, Priority: &prio}); return err }},
		{"cls queue set", func() error {
			_, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "default", Ceiling: &ceiling})
			return err
		}},
		{"cls site add", func() error { return e.s.AddSite(ctx, protocol.SiteSpec{Name: "far"}) }},
		{"cls purge", func() error {
			r, err := e.s.Purger().Run(ctx, protocol.Purge{Select: protocol.Select{IDs: []int64{gone}}})
			if err == nil && r.Purged != 1 {
				err = fmt.Errorf("purged %d, want 1: %v", r.Purged, r.Errors)
			}
			return err
		}},
		{"mqsub --rerun", func() error { _, err := e.s.Rerun(ctx, one); return err }},
		{"mqdel", func() error { _, err := e.s.Delete(ctx, one); return err }},
	}
	shell := sqlitetest.Shell(t, e.opt.Path)
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const why = "another process holds the write lock of the database"
	if _, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")}); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("submit under the lock: %v, want %q", err, why)
	}
	const reload = "reloading state"
	listed := len(e.stat(protocol.Stat{}))
	reloads := strings.Count(logs.String(), reload)
	for _, c := range changes {
		start := time.Now()
		err := c.do()
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s under the lock: %v, want %q", c.name, err, why)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s under the lock answered after %v, want at once", c.name, d)
		}
		if jobs := e.stat(protocol.Stat{}); len(jobs) != listed {
			t.Errorf("mqstat after %s under the lock: %d jobs, want %d", c.name, len(jobs), listed)
		}
		if _, err := e.s.Sites(ctx); err != nil {
			t.Errorf("cls site list after %s under the lock: %v", c.name, err)
		}
	}
	if got := strings.Count(logs.String(), reload); got != reloads {
		t.Errorf("the changes refused under the lock reloaded the state %d times, want none:\n%s", got-reloads, logs.String())
	}
	if _, err := shell.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for _, c := range changes {
		for {
			e.clock.Advance(time.Second) // the core looks at the lock again when due
			err := c.do()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s a minute after the lock went: %v", c.name, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	e.check()
}

// TestOpenLocked: the store opens while another process holds the write
// lock; its log says so once, and the first change is answered at once,
// not after the busy timeout; once the lock goes, changes go through.
func TestOpenLocked(t *testing.T) {
	var logs syncBuf
	e := newEnvWith(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	id := e.submit1("a", "true")
	ctx := context.Background()
	shell := sqlitetest.Shell(t, e.opt.Path)
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	const why = "another process holds the write lock of the database"
	if got := strings.Count(logs.String(), why); got != 1 {
		t.Errorf("%d log lines say why as the store opens, want 1:\n%s", got, logs.String())
	}
	start := time.Now()
	if _, err := e.s.Hold(ctx, protocol.Select{IDs: []int64{id}}); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("mqhold under the lock: %v, want %q", err, why)
	}
	if _, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")}); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("submit under the lock: %v, want %q", err, why)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the first changes under the lock answered after %v, want at once", d)
	}
	if jobs := e.stat(protocol.Stat{}); len(jobs) != 1 {
		t.Errorf("mqstat under the lock: %d jobs, want 1", len(jobs))
	}
	if _, err := shell.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		e.clock.Advance(time.Second) // the core looks at the lock again when due
		_, err := e.s.Hold(ctx, protocol.Select{IDs: []int64{id}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the lock went: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.check()
}
