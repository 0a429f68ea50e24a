package metaqueue

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestDeletePrefetched: mqdel of a job its placeholder holds prefetched
// (P, never started) deletes it without saying it executed: no start
// time, no elapsed time, nothing charged to its queue's budget; an
// executing job deleted beside it is charged what it ran and keeps its
// start. mqhold and mqalter refuse the prefetched job naming its state
// as mqstat shows it.
func TestDeletePrefetched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// One unit a second.
	e.addSites(pricedSite("dear", 1, 2, 3600))
	e.setLimits(protocol.QueueSet{Name: "q", Budget: new(1000.0), Ceiling: new(60.0)})
	e.submit(ledgerSpecs("t", 2, 0)...)
	ph := e.register("dear")
	r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: 2, Ahead: 1})
	if err != nil || len(r.Jobs) != 2 {
		t.Fatalf("Next = %+v, %v", r, err)
	}
	run, held := r.Jobs[0], r.Jobs[1]
	e.mustBe(run.ID, job.Executing)
	e.mustBe(held.ID, job.Prefetched)
	// mqhold and mqalter refuse it as what mqstat shows: prefetched.
	sel := protocol.Select{IDs: []int64{held.ID}, Atomic: true}
	if r, err := e.s.Hold(ctx, sel); err != nil || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "is prefetched") {
		t.Errorf("Hold of the prefetched job: %+v, %v; want it said prefetched", r, err)
	}
	if r, err := e.s.Alter(ctx, protocol.Alter{Select: sel, Priority: new(5)}); err != nil || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "is prefetched") {
		t.Errorf("Alter of the prefetched job: %+v, %v; want it said prefetched", r, err)
	}
	e.mustBe(held.ID, job.Prefetched)
	e.clock.Advance(3 * time.Second)
	e.del(run.ID, held.ID)

	for _, tc := range []struct {
		name        string
		id          int64
		attempt     int
		reason      string
		started     bool
		charge      float64 // -1: none
		wantElapsed bool
	}{
		{"executing", run.ID, run.Attempt, "deleted by user while executing", true, 3, true},
		{"prefetched", held.ID, held.Attempt, "deleted by user before it started (prefetched)", false, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.mustBe(tc.id, job.Deleted)
			d := e.job(tc.id)
			if d.Reason != tc.reason {
				t.Errorf("reason %q, want %q", d.Reason, tc.reason)
			}
			if (d.Started != "") != tc.started {
				t.Errorf("started %q, want started: %v", d.Started, tc.started)
			}
			if (d.Elapsed > 0) != tc.wantElapsed {
				t.Errorf("elapsed %v, want some: %v", d.Elapsed, tc.wantElapsed)
			}
			if c := e.chargeOf(tc.id, tc.attempt); math.Abs(c-tc.charge) > 1e-6 {
				t.Errorf("charged %v, want %v", c, tc.charge)
			}
		})
	}
	if spent, _ := e.spentOf("q", "dear"); math.Abs(spent-3) > 1e-6 {
		t.Errorf("queue q spent %v, want 3 (the executing job's 3 s)", spent)
	}
	// The placeholder is told to drop both at its next heartbeat.
	hb, err := e.s.Heartbeat(ctx, protocol.Heartbeat{Placeholder: ph,
		Running: []protocol.JobRef{{ID: run.ID, Attempt: run.Attempt}, {ID: held.ID, Attempt: held.Attempt}}})
	if err != nil || len(hb.Kill) != 2 {
		t.Fatalf("Heartbeat = %+v, %v; want both killed", hb, err)
	}
	e.reopen()
	if d := e.job(held.ID); d.Started != "" || !strings.Contains(d.Reason, "before it started") {
		t.Errorf("after a restart: started %q, reason %q", d.Started, d.Reason)
	}
	e.check()
}
