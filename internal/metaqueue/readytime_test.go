package metaqueue

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// queueTime is DC's queue time of ready job id now (dc.State.QueueTime).
func (e *env) queueTime(id int64) float64 {
	e.t.Helper()
	var q float64
	if err := e.s.do(context.Background(), func() error { q = e.s.data.QueueTime(id, e.s.now()); return nil }); err != nil {
		e.t.Fatal(err)
	}
	return q
}

// inDQ is a job of queue dq after prereqs.
func inDQ(prereqs ...string) protocol.JobSpec {
	js := spec("c", "c", prereqs...)
	js.Queue = "dq"
	return js
}

func (e *env) hold(id int64, release bool) {
	e.t.Helper()
	act := e.s.Hold
	if release {
		act = e.s.Release
	}
	if r, err := act(context.Background(), protocol.Select{IDs: []int64{id}, Atomic: true}); err != nil || len(r.IDs) != 1 {
		e.t.Fatalf("hold (release %v) job %d: %+v, %v", release, id, r, err)
	}
}

// TestDCQueueTimeSurvivesRestart: a job DC holds for a placeholder at its
// data has waited 250 s of the 275 s its bound allows when the CLS
// restarts; it goes to the placeholder elsewhere 275 s after it became
// ready, not 275 s after the restart (which started every wait at zero).
func TestDCQueueTimeSurvivesRestart(t *testing.T) {
	t.Parallel()
	e, a, b := dcTwoSites(t, "dc", linkedAt(1e6))
	e.produceAt(a, "/d/x", 1e6)
	e.next(a, 1) // A has now asked twice: it has an interval
	// The input's size declared: a location loaded at a restart knows only
	// a reported size (the test's reports have none).
	id := e.submit(withFiles("c", "needs x", []protocol.File{file("/d/x", 1e6)}, nil))[0]
	// Priority = -25 x 1.1 s / 0.01 + queue_time / 0.1 s: held for A until
	// 275 s in the queue.
	e.siteGetsNothing(b, "B, at once")
	e.clock.Advance(250 * time.Second)
	e.siteGetsNothing(b, "B, after 250 s")
	e.reopen()
	a, b = e.registerAt("A", "ha"), e.registerAt("B", "hb")
	e.hold(id, false) // while A asks twice, to be predicted again (a hold keeps the ready time)
	e.siteGetsNothing(a, "A, the job held")
	e.siteGetsNothing(a, "A, the job held")
	e.hold(id, true)
	e.siteGetsNothing(b, "B, 250 s after the job became ready")
	e.clock.Advance(30 * time.Second)
	e.siteGets(b, id, "B, 280 s after the job became ready and 30 s after the restart")
	e.check()
}

// TestReadyTimeKept: DC's queue time of a job in each way it becomes ready
// again, the same before and after a restart: a requeued attempt and a
// hold taken while ready keep the job's ready time; a dependent is ready
// from its prerequisite's end, one sent back to waiting by its
// prerequisite's rerun from that rerun's end, one held before it was ready
// from its release, a rerun job from its rerun; a queue switched to DC
// counts from the switch.
func TestReadyTimeKept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// run makes job id and moves the clock on; the job's queue time
		// is then want seconds.
		run  func(e *env) (id int64)
		want float64
	}{
		{"submitted", func(e *env) int64 {
			id := e.submit(inDQ())[0]
			e.clock.Advance(100 * time.Second)
			return id
		}, 100},
		{"requeued", func(e *env) int64 {
			id := e.submit(inDQ())[0]
			e.advance(20 * time.Second) // ticks: a jump would be a stall, which renews leases
			if got := e.next(e.register("A"), 1); len(got) != 1 {
				t.Fatalf("got %v", ids(got))
			}
			e.expireLeases(id) // 11 s
			e.mustBe(id, job.Queued)
			e.clock.Advance(69 * time.Second)
			return id
		}, 100},
		{"held while ready", func(e *env) int64 {
			id := e.submit(inDQ())[0]
			e.clock.Advance(20 * time.Second)
			e.hold(id, false)
			e.clock.Advance(30 * time.Second)
			e.hold(id, true)
			e.clock.Advance(50 * time.Second)
			return id
		}, 100},
		{"dependent", func(e *env) int64 {
			p := e.submit1("p", "p")
			id := e.submit(inDQ("p"))[0]
			e.clock.Advance(30 * time.Second)
			ph := e.register("A")
			e.report(ph, ok(e.next(ph, 1)[0]))
			e.mustBe(p, job.Done)
			e.clock.Advance(70 * time.Second)
			return id
		}, 70},
		{"prerequisite rerun", func(e *env) int64 {
			p := e.submit1("p", "p")
			id := e.submit(inDQ("p"))[0]
			ph := e.register("A")
			e.report(ph, ok(e.next(ph, 1)[0]))
			e.clock.Advance(30 * time.Second)
			if _, err := e.s.Rerun(context.Background(), protocol.Select{IDs: []int64{p}}); err != nil {
				t.Fatal(err)
			}
			e.mustBe(id, job.Waiting)
			e.clock.Advance(5 * time.Second)
			e.report(ph, ok(e.next(ph, 1)[0]))
			e.mustBe(id, job.Queued)
			e.clock.Advance(40 * time.Second)
			return id
		}, 40},
		{"held while waiting", func(e *env) int64 {
			p := e.submit1("p", "p")
			id := e.submit(inDQ("p"))[0]
			e.hold(id, false)
			ph := e.register("A")
			e.report(ph, ok(e.next(ph, 1)[0]))
			e.mustBe(p, job.Done)
			e.clock.Advance(30 * time.Second)
			e.hold(id, true)
			e.clock.Advance(60 * time.Second)
			return id
		}, 60},
		{"rerun", func(e *env) int64 {
			id := e.submit(inDQ())[0]
			ph := e.register("A")
			e.report(ph, ok(e.next(ph, 1)[0]))
			e.clock.Advance(30 * time.Second)
			if _, err := e.s.Rerun(context.Background(), protocol.Select{IDs: []int64{id}}); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(45 * time.Second)
			return id
		}, 45},
		{"switched to dc", func(e *env) int64 {
			e.setPolicy("dq", "fcfs")
			id := e.submit(inDQ())[0]
			e.clock.Advance(60 * time.Second)
			e.setPolicy("dq", "dc")
			e.clock.Advance(40 * time.Second)
			e.setPolicy("dq", "xsufferage") // still choosing: keeps it
			e.clock.Advance(10 * time.Second)
			return id
		}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.setPolicy("dq", "dc")
			id := tc.run(e)
			e.mustBe(id, job.Queued)
			// Stored to the microsecond: the clock has nanoseconds.
			if got := e.queueTime(id); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("queue time %g s, want %g", got, tc.want)
			}
			e.reopen()
			if got := e.queueTime(id); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("after a restart: queue time %g s, want %g", got, tc.want)
			}
			e.check()
		})
	}
}

// TestPlanPatienceSurvivesRestart: a job kept for its planned site has
// waited 25 s of plans.Patience when the CLS restarts; another site gets
// it once the patience has passed counting from when it became ready
// (and, requeued, from its attempt's end), not from the restart.
func TestPlanPatienceSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, requeued := range []bool{false, true} {
		t.Run(fmt.Sprint("requeued=", requeued), func(t *testing.T) {
			e := newEnv(t)
			id := e.submit1("t", "true")
			if _, err := e.s.Plans().Set(context.Background(), "heft", policy.Plan{Site: map[int64]string{id: "b"}, Order: []int64{id}}); err != nil {
				t.Fatal(err)
			}
			a, b := e.register("a"), e.register("b")
			if requeued {
				if got := ids(e.next(b, 1)); !slices.Equal(got, []int64{id}) {
					t.Fatalf("b got %v", got)
				}
				e.expireLeases(id)
				e.mustBe(id, job.Queued)
			}
			e.heartbeat(b, nil)
			e.siteGetsNothing(a, "a, while b is alive")
			e.clock.Advance(plans.Patience - 5*time.Second)
			e.heartbeat(b, nil)
			e.siteGetsNothing(a, "a, 5 s before the patience ends")
			e.reopen()
			a, b = e.register("a"), e.register("b")
			e.heartbeat(b, nil)
			e.siteGetsNothing(a, "a after the restart, 5 s before the patience ends")
			e.clock.Advance(10 * time.Second)
			e.heartbeat(b, nil)
			e.siteGets(a, id, "a, 5 s past the patience and 10 s after the restart")
			e.check()
		})
	}
}

// TestReadySinceMigration: version 32 adds jobs.ready and
// queues.choosing_since to a database without them; a job ready there
// counts from its submission, and one that becomes ready after the
// upgrade from then.
func TestReadySinceMigration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("dq", "dc")
	ready := e.submit(inDQ())[0]
	p := e.submit1("p", "p")
	dep := e.submit(inDQ("p"))[0]
	e.clock.Advance(40 * time.Second)
	e.downgrade(
		"ALTER TABLE jobs DROP COLUMN ready",
		"ALTER TABLE queues DROP COLUMN choosing_since",
		"UPDATE meta SET value = '31' WHERE key = 'schema'",
	)
	if got := e.queueTime(ready); math.Abs(got-40) > 1e-6 {
		t.Errorf("a job ready before the upgrade: queue time %g s, want 40 (since its submission)", got)
	}
	ph := e.register("A")
	as := e.next(ph, 2) // ready and p
	if len(as) != 2 {
		t.Fatalf("got %v", ids(as))
	}
	e.report(ph, ok(as[0]), ok(as[1]))
	e.mustBe(p, job.Done)
	e.mustBe(dep, job.Queued)
	e.clock.Advance(10 * time.Second)
	e.reopen()
	if got := e.queueTime(dep); math.Abs(got-10) > 1e-6 {
		t.Errorf("a job ready after the upgrade: queue time %g s, want 10", got)
	}
	e.check()
}
