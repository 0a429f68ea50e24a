package metaqueue

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestPartitionHoldsLeases: the lease of a job whose placeholder fell
// silent lapses only once its site answered for a whole lease since the
// placeholder was last heard or the site came back, or once the partition
// grace since it was last heard has passed; a site the store is never
// told of (a local one) lapses at the lease. The site manager lists a
// watched site at every step (a quarter lease) but while it is cut off.
func TestPartitionHoldsLeases(t *testing.T) {
	t.Parallel()
	const grace, step = 6 * testLease, testLease / 4
	const forever = time.Duration(1 << 62)
	tests := []struct {
		name    string
		grace   time.Duration
		watched bool
		// cutFor is how long past the last heartbeat the site does not
		// answer (0: it answers throughout).
		cutFor time.Duration
		// heldUntil is how long past the last heartbeat the job is still
		// executing, requeuedBy by when it is queued again.
		heldUntil, requeuedBy time.Duration
	}{
		{name: "a local site lapses at the lease", grace: grace, heldUntil: testLease - step, requeuedBy: testLease + step},
		{name: "no grace lapses at the lease", grace: 0, watched: true, cutFor: forever, heldUntil: testLease - step, requeuedBy: testLease + step},
		{name: "a site that answers lapses at the lease", grace: grace, watched: true, heldUntil: testLease - step, requeuedBy: testLease + 2*step},
		{name: "a cut site is held for the grace", grace: grace, watched: true, cutFor: forever, heldUntil: grace - step, requeuedBy: grace + step},
		{name: "a site back from a cut gives a lease to reconnect in", grace: grace, watched: true, cutFor: 2 * testLease,
			heldUntil: 3*testLease - step, requeuedBy: 3*testLease + 2*step},
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
				e.reached("far", heard, true)
			}
			for e.clock.Now().Sub(heard) < tc.requeuedBy {
				e.clock.Advance(step)
				since := e.clock.Now().Sub(heard)
				if tc.watched {
					e.reached("far", e.clock.Now(), since >= tc.cutFor)
				}
				e.tick()
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
	e.reached("far", e.clock.Now(), true)
	e.reached("far", e.clock.Now(), false) // cut off
	e.advance(5 * testLease)
	e.mustBe(id, job.Executing)
	if _, err := e.s.Heartbeat(context.Background(), protocol.Heartbeat{Placeholder: ph, Running: []protocol.JobRef{{ID: id, Attempt: 1}}}); err != nil {
		t.Fatal(err)
	}
	e.reached("far", e.clock.Now(), true) // the link is back
	e.advance(testLease / 2)
	e.mustBe(id, job.Executing) // renewed by the heartbeat
	e.report(ph, protocol.Report{ID: id, Attempt: 1, Exit: 0})
	e.mustBe(id, job.Done)
	if d := e.job(id); d.Attempts != 1 {
		t.Errorf("attempts %d, want 1", d.Attempts)
	}
	e.check()
}

// reached tells the store whether site answered at at, as the site
// manager does after each listing of its batch system.
func (e *env) reached(site string, at time.Time, ok bool) {
	e.t.Helper()
	if err := e.s.SiteReached(context.Background(), site, at, at, ok); err != nil {
		e.t.Fatal(err)
	}
}

// TestPartitionAcrossRestart: a CLS restarted while a site is cut off
// (its first listing fails) holds the leases of the jobs it loaded there,
// as the one before it did.
func TestPartitionAcrossRestart(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *Options) { o.PartitionGrace = time.Hour })
	ph := e.register("far")
	id := e.submit1("t", "sleep 1000")
	e.next(ph, 1)
	e.reopen()
	e.reached("far", time.Time{}, false)
	e.advance(5 * testLease)
	e.mustBe(id, job.Executing)
	e.check()
}

// TestPartitionPendingAfterRestart: a CLS restarted holds the leases it
// loaded of a site it has not listed yet (a slow login host; a tunnel
// site's placeholders cannot even reach it before its forward is made
// again), and once the site answers gives them a lease from then: the
// job lapses then, not at the lease after the restart.
func TestPartitionPendingAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *Options) { o.PartitionGrace = time.Hour })
	ph := e.register("far")
	id := e.submit1("t", "sleep 1000")
	e.next(ph, 1)
	e.reopen()
	if err := e.s.SitePending(context.Background(), "far"); err != nil {
		t.Fatal(err)
	}
	e.advance(5 * testLease)
	e.mustBe(id, job.Executing)
	answered := e.clock.Now()
	e.reached("far", answered, true)
	for e.clock.Now().Sub(answered) < testLease-testLease/4 {
		e.advance(testLease / 4)
		e.reached("far", e.clock.Now(), true)
		e.mustBe(id, job.Executing)
	}
	for range 3 {
		e.advance(testLease / 4)
		e.reached("far", e.clock.Now(), true)
	}
	e.mustBe(id, job.Queued)
	e.check()
}

// TestPartitionSiteCuts: SiteCuts says which site is cut off, since when
// it last answered, and how many of its placeholders' leases are held
// until when; a site that answers is left out, and so is one back from
// its cut once its placeholders heartbeat again.
func TestPartitionSiteCuts(t *testing.T) {
	t.Parallel()
	const grace = 6 * testLease
	e := newEnvWith(t, func(o *Options) { o.PartitionGrace = grace })
	far1, far2, near := e.register("far"), e.register("far"), e.register("near")
	e.submit1("a", "sleep 1000")
	e.submit1("b", "sleep 1000")
	e.submit1("c", "sleep 1000")
	heard := e.clock.Now()
	var refs [3][]protocol.JobRef
	for i, ph := range []int64{far1, far2, near} {
		as := e.next(ph, 1)
		if len(as) != 1 {
			t.Fatalf("placeholder %d got %+v", ph, as)
		}
		refs[i] = []protocol.JobRef{refOf(as[0])}
	}
	cuts := func() map[string]placeholders.Cut {
		t.Helper()
		m := map[string]placeholders.Cut{}
		if err := e.s.SiteCuts(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	e.reached("far", heard, true)
	e.reached("near", heard, true)
	e.advance(testLease / 2)
	if m := cuts(); len(m) != 0 {
		t.Fatalf("sites that answer: %+v", m)
	}

	// far is cut off; near answers and its placeholder heartbeats.
	for range 8 {
		e.reached("far", e.clock.Now(), false)
		e.reached("near", e.clock.Now(), true)
		e.heartbeat(near, refs[2])
		e.advance(testLease / 4)
	}
	want := placeholders.Cut{Down: true, Answered: heard, Placeholders: 2, Leases: 2, Until: heard.Add(grace)}
	if m := cuts(); len(m) != 1 || !m["far"].Until.Equal(want.Until) || !m["far"].Answered.Equal(heard) {
		t.Errorf("far cut off: %+v, want far: %+v", m, want)
	} else if c := m["far"]; c.Down != want.Down || c.Placeholders != want.Placeholders || c.Leases != want.Leases {
		t.Errorf("far cut off: %+v, want %+v", c, want)
	}

	// The link is back: far answers and its placeholders heartbeat.
	e.reached("far", e.clock.Now(), true)
	e.heartbeat(far1, refs[0])
	e.heartbeat(far2, refs[1])
	e.tick()
	if m := cuts(); len(m) != 0 {
		t.Errorf("far back: %+v", m)
	}
	e.check()
}
