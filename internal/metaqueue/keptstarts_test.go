package metaqueue

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestKeptStartsOwnOnly: while the database's disk has no room, the
// starts heartbeats name are kept (placeholders.Registry.Started) up to
// a bound shared by every placeholder: only those naming an attempt the
// heartbeating placeholder holds unstarted are kept, so one placeholder
// naming jobs it does not run (256 heartbeats of 4,096 refs) cannot fill
// the bound and have another's real start dropped.
func TestKeptStartsOwnOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.submit(spec("t", "true"), spec("t", "true"), spec("t", "true"))
	victim := e.register("s")
	hostile := e.register("s")
	if r, err := e.s.Next(ctx, protocol.Next{Placeholder: hostile, Free: 1}); err != nil || len(r.Jobs) != 1 {
		t.Fatalf("hostile Next = %+v, %v", r, err)
	}
	r, err := e.s.Next(ctx, protocol.Next{Placeholder: victim, Free: 2, Ahead: 1})
	if err != nil || len(r.Jobs) != 2 || !r.Jobs[1].Ahead {
		t.Fatalf("Next = %+v, %v; want 2 jobs, the second ahead", r, err)
	}
	held := r.Jobs[1]
	running := []protocol.JobRef{{ID: r.Jobs[0].ID, Attempt: r.Jobs[0].Attempt}, {ID: held.ID, Attempt: held.Attempt}}
	full, commits := true, 0
	onCore := diskFull(t, e, &full, &commits)
	if _, err := e.s.Submit(ctx, []protocol.JobSpec{spec("u", "true")}); err == nil {
		t.Fatal("a submit on a full disk went through")
	}
	bogus := make([]protocol.JobRef, protocol.MaxStarted)
	for i := range bogus {
		bogus[i] = protocol.JobRef{ID: int64(1_000_000 + i), Attempt: 1}
	}
	for range placeholders.MaxKeptStarts / protocol.MaxStarted {
		if _, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: hostile, Started: bogus}); err != nil {
			t.Fatalf("hostile heartbeat: %v", err)
		}
	}
	if _, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: victim, Running: running, Started: running[1:]}); err != nil {
		t.Fatalf("victim heartbeat: %v", err)
	}
	onCore(func() { full = false })
	e.advance(time.Second)
	if _, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: victim, Running: running}); err != nil {
		t.Fatalf("victim heartbeat: %v", err)
	}
	e.mustBe(held.ID, job.Executing)
}
