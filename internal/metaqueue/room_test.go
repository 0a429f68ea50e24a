package metaqueue

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestNoRoom: once a batch failed for want of room, and while a probe
// still finds none, placeholders' polls, reports and registrations and
// users' submits are answered with that failure at once, without
// running: none reaches a commit (each failed one costs a reload of the
// whole state). Reads and heartbeats are answered; no lease lapses
// meanwhile. When there is room again every lease is renewed, and the
// same calls go through.
func TestNoRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.submit(spec("t", "true"), spec("t", "true"))
	ph := e.register("s")
	got := e.next(ph, 2)
	if len(got) != 2 {
		t.Fatalf("got %d jobs", len(got))
	}
	full, commits := true, 0
	onCore := diskFull(t, e, &full, &commits)
	noRoom := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "free space on the filesystem of") {
			t.Errorf("%s on a full disk: %v, want the full disk's answer", what, err)
		}
	}
	_, err := e.s.Submit(ctx, []protocol.JobSpec{spec("u", "true")})
	noRoom("the first submit", err)
	var before int
	onCore(func() { before = commits })

	_, err = e.s.Submit(ctx, []protocol.JobSpec{spec("u", "true")})
	noRoom("a submit", err)
	noRoom("a report", e.s.Report(ctx, ph, []protocol.Report{ok(got[0])}))
	_, err = e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 1})
	noRoom("a poll", err)
	_, err = e.s.Register(ctx, protocol.Register{ID: ph, Site: "s", Host: "h-s", Slots: 4, Holding: []protocol.JobRef{}})
	noRoom("a registration", err)
	refs := []protocol.JobRef{{ID: got[0].ID, Attempt: got[0].Attempt}, {ID: got[1].ID, Attempt: got[1].Attempt}}
	if r, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: refs}); err != nil || len(r.Kill) != 0 {
		t.Errorf("a heartbeat on a full disk = %+v, %v; want the leases renewed", r, err)
	}
	e.advance(3 * testLease) // no heartbeat meanwhile
	if sum := e.summary(); sum["default"]["E"] != 2 {
		t.Errorf("summary on a full disk: %v, want the 2 jobs executing", sum)
	}
	onCore(func() {
		if commits != before {
			t.Errorf("%d commits were tried while there was no room; want none", commits-before)
		}
		full = false
	})

	e.advance(time.Second) // a probe finds room: every lease is renewed
	e.mustBe(got[0].ID, job.Executing)
	e.mustBe(got[1].ID, job.Executing)
	e.report(ph, ok(got[0]))
	e.mustBe(got[0].ID, job.Done)
	e.submit(spec("u", "true"))
	e.advance(testLease + testLease/2) // the renewed lease lapses in its time
	e.mustBe(got[1].ID, job.Queued)
	e.check()
}

// diskFull makes e's disk full while *full holds: every commit fails for
// want of room, and the probe finds none; commits counts the commits
// tried. *full and *commits are the core's: read and set them in onCore,
// which it returns.
func diskFull(t *testing.T, e *env, full *bool, commits *int) (onCore func(func())) {
	onCore = func(f func()) {
		t.Helper()
		if err := e.s.do(context.Background(), func() error { f(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	onCore(func() {
		e.s.commitFault = func() error {
			*commits++
			if *full {
				return sqliteFull
			}
			return nil
		}
		e.s.room.Probe = func() error {
			if *full {
				return syscall.ENOSPC
			}
			return nil
		}
	})
	return onCore
}

// TestStartsKeptWithoutRoom: a prefetched job (P) that its placeholder
// says it started while the disk has no room becomes E with the first
// heartbeat after room is back, though that heartbeat (the agent sent
// the start once, and was answered) no longer names it; the summary
// then counts both jobs E.
func TestStartsKeptWithoutRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.submit(spec("t", "true"), spec("t", "true"))
	ph := e.register("s")
	r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 2, Ahead: 1})
	if err != nil || len(r.Jobs) != 2 || !r.Jobs[1].Ahead {
		t.Fatalf("Next = %+v, %v; want 2 jobs, the second ahead", r, err)
	}
	held := r.Jobs[1]
	running := []protocol.JobRef{{ID: r.Jobs[0].ID, Attempt: r.Jobs[0].Attempt}, {ID: held.ID, Attempt: held.Attempt}}
	heartbeat := func(started ...protocol.JobRef) {
		t.Helper()
		if hb, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph, Running: running, Started: started}); err != nil || len(hb.Kill) != 0 {
			t.Fatalf("Heartbeat = %+v, %v", hb, err)
		}
	}
	full, commits := true, 0
	onCore := diskFull(t, e, &full, &commits)
	if _, err := e.s.Submit(ctx, []protocol.JobSpec{spec("u", "true")}); err == nil {
		t.Fatal("a submit on a full disk went through")
	}
	heartbeat(running[1])
	e.mustBe(held.ID, job.Prefetched) // not recorded: no room
	heartbeat()
	e.mustBe(held.ID, job.Prefetched)

	onCore(func() { full = false })
	e.advance(time.Second) // a probe finds room
	heartbeat()
	e.mustBe(held.ID, job.Executing)
	if c := e.summary()[protocol.DefaultQueue]; c["E"] != 2 || c["P"] != 0 {
		t.Fatalf("summary %v, want both jobs E", c)
	}
	e.check()
}
