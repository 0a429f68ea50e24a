package metaqueue

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestPartitionHoldsLeases: the lease of a job whose placeholder fell
// silent lapses only once its site was reached after the lapse, or once
// the partition grace since the placeholder was last heard has passed; a
// site the store is never told of (a local one) lapses at the lease.
func TestPartitionHoldsLeases(t *testing.T) {
	t.Parallel()
	const grace = 4 * testLease
	tests := []struct {
		name  string
		grace time.Duration
		// watched: the site manager tells the store when it reached the
		// placeholder's site; reachAfter: and it is reached again this
		// long past the lease's lapse (0: never).
		watched    bool
		lost       bool // and it stops answering at once
		reachAfter time.Duration
		// requeuedBy is how long past the last heartbeat the job is
		// requeued; heldUntil how long it is still executing.
		heldUntil, requeuedBy time.Duration
	}{
		{name: "a local site lapses at the lease", grace: grace, heldUntil: testLease / 2, requeuedBy: testLease + testLease/4},
		{name: "no grace lapses at the lease", grace: 0, watched: true, heldUntil: testLease / 2, requeuedBy: testLease + testLease/4},
		{name: "a cut site is held for the grace", grace: grace, watched: true, heldUntil: grace - testLease/4, requeuedBy: grace + testLease/4},
		{name: "a site reached after the lapse lapses then", grace: grace, watched: true, reachAfter: testLease, heldUntil: 2*testLease - testLease/4, requeuedBy: 2*testLease + testLease/4},
		{name: "a site back from a cut gives a lease to reconnect in", grace: grace, watched: true, lost: true, reachAfter: testLease,
			heldUntil: 3*testLease - testLease/4, requeuedBy: 3*testLease + testLease/2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, func(o *Options) { o.PartitionGrace = tc.grace })
			ph := e.register("far")
			id := e.submit1("t", "sleep 1000")
			if as := e.next(ph, 1); len(as) != 1 {
				t.Fatalf("dispatched %+v", as)
			}
			heard := e.clock.Now()
			if tc.watched {
				e.reached("far", heard)
			}
			if tc.lost {
				if err := e.s.SiteReached(context.Background(), "far", time.Time{}, false); err != nil {
					t.Fatal(err)
				}
			}
			for e.clock.Now().Sub(heard) < tc.requeuedBy {
				e.advance(testLease / 4)
				since := e.clock.Now().Sub(heard)
				if tc.reachAfter > 0 && since >= testLease+tc.reachAfter {
					e.reached("far", e.clock.Now()) // each listing from then on answers
				}
				if since <= tc.heldUntil {
					e.mustBe(id, job.Executing)
				}
			}
			e.mustBe(id, job.Queued)
			e.check()
		})
	}
}

// TestPartitionHeldJobReports: a job held behind a cut reports once the
// link is back and ends Done in its first attempt; its placeholder's
// heartbeat renews the lease as before.
func TestPartitionHeldJobReports(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *Options) { o.PartitionGrace = time.Hour })
	ph := e.register("far")
	id := e.submit1("t", "sleep 1000")
	e.next(ph, 1)
	e.reached("far", e.clock.Now())
	e.advance(5 * testLease)
	e.mustBe(id, job.Executing)
	if _, err := e.s.Heartbeat(context.Background(), protocol.Heartbeat{Placeholder: ph, Running: []protocol.JobRef{{ID: id, Attempt: 1}}}); err != nil {
		t.Fatal(err)
	}
	e.reached("far", e.clock.Now()) // the link is back
	e.advance(testLease / 2)
	e.mustBe(id, job.Executing) // renewed by the heartbeat
	e.report(ph, protocol.Report{ID: id, Attempt: 1, Exit: 0})
	e.mustBe(id, job.Done)
	if d := e.job(id); d.Attempts != 1 {
		t.Errorf("attempts %d, want 1", d.Attempts)
	}
	e.check()
}

// reached tells the store that site was reached at at, as the site
// manager does after it listed the site's batch system.
func (e *env) reached(site string, at time.Time) {
	e.t.Helper()
	if err := e.s.SiteReached(context.Background(), site, at, true); err != nil {
		e.t.Fatal(err)
	}
}
