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
	"github.com/mq-hpc/mq/job"
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
	e.untilUnlocked(func() error { _, err := e.s.Submit(ctx, []protocol.JobSpec{spec("b", "true")}); return err })
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
	e.untilUnlocked(func() error { _, err := e.s.Hold(ctx, protocol.Select{IDs: []int64{id}}); return err })
	e.check()
}

// TestLockedAgents: while another process is known to hold the write
// lock, placeholders go on heartbeating (with start marks), reporting and
// asking for work, the CLS notes a lost output, and the core's tick runs, for half a minute: none of it
// reloads the state (each reload costs seconds on a big database); the
// start marks are kept and recorded once the lock goes. The first start
// mark to meet the lock waits the busy timeout, but reloads nothing either.
func TestLockedAgents(t *testing.T) {
	var logs syncBuf
	e := newEnvWith(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ctx := context.Background()
	e.submit(spec("t", "true"), spec("t", "true"), spec("t", "true"), spec("t", "true"))
	ph := e.register("s")
	r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 4, Ahead: 2})
	if err != nil || len(r.Jobs) != 4 || !r.Jobs[3].Ahead {
		t.Fatalf("Next = %+v, %v; want 4 jobs, the last ahead", r, err)
	}
	var running []protocol.JobRef
	for _, a := range r.Jobs {
		running = append(running, protocol.JobRef{ID: a.ID, Attempt: a.Attempt})
	}
	shell := sqlitetest.Shell(t, e.opt.Path)
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const why = "another process holds the write lock of the database"
	const reload = "reloading state"
	reloads := strings.Count(logs.String(), reload)
	// The first write to meet the lock waits the busy timeout: a start mark.
	if _, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: running, Started: running[2:3]}); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("the first heartbeat under the lock: %v, want %q", err, why)
	}
	if got := strings.Count(logs.String(), why); got != 1 {
		t.Errorf("%d log lines say why, want 1:\n%s", got, logs.String())
	}
	for i := 0; i < 30; i++ {
		var started []protocol.JobRef
		switch i {
		case 0:
			started = running[2:3]
		case 1:
			started = running[3:4]
		}
		if hb, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: running, Started: started}); err != nil || len(hb.Kill) != 0 {
			t.Fatalf("heartbeat under the lock = %+v, %v", hb, err)
		}
		if err := e.s.ReportBatch(ctx, protocol.ReportBatch{Placeholder: ph, Started: running[2:3]}); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("report under the lock: %v, want %q", err, why)
		}
		if _, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1, Started: running[3:4]}); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("next under the lock: %v, want %q", err, why)
		}
		if err := e.s.OutputLost(ctx, ph, running[0].ID, running[0].Attempt, "staging failed"); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("lost output under the lock: %v, want %q", err, why)
		}
		e.advance(time.Second)
	}
	if got := strings.Count(logs.String(), reload); got != reloads {
		t.Errorf("placeholders' calls under the lock reloaded the state %d times, want none:\n%s", got-reloads, logs.String())
	}
	if _, err := shell.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		e.clock.Advance(time.Second) // the core looks at the lock again when due
		if _, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: running}); err != nil {
			t.Fatal(err)
		}
		if e.state(running[2].ID) == job.Executing && e.state(running[3].ID) == job.Executing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the lock went, the starts kept are not recorded: %s %s", e.state(running[2].ID), e.state(running[3].ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.check()
}

// untilUnlocked calls change, with the clock a second on each time (the
// core looks at the lock again when due), until it goes through, for up
// to a minute after the lock went.
func (e *env) untilUnlocked(change func() error) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		e.clock.Advance(time.Second)
		err := change()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("a minute after the lock went: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
