package metaqueue

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// A job its placeholder's walltime stopped has learned that it needs more
// than it ran: that becomes its estimate (never lowered, and no more than
// the CLS saw pass), so placeholders with less time left no longer take
// it, also after a restart.
func TestWalltimeStopTeachesEstimate(t *testing.T) {
	stop := protocol.WalltimeReason(90 * time.Second)
	for _, c := range []struct {
		name    string
		est     float64 // given at submit
		reason  string
		claimed time.Duration // the report's span; the CLS sees 60 s pass
		want    float64
	}{
		{"learned", 0, stop, 60 * time.Second, 60},
		{"report claims more than the CLS saw", 0, stop, 10 * time.Minute, 60},
		{"a higher estimate is kept", 120, stop, 60 * time.Second, 120},
		{"a lower estimate is raised", 30, stop, 60 * time.Second, 60},
		{"no more than 9/10 of the placeholder's walltime", 0, protocol.WalltimeReason(60 * time.Second), 60 * time.Second, 54},
		{"stopped with its placeholder", 0, protocol.ReasonInterrupted, 60 * time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			sp := spec("t", "sleep 1000")
			sp.Est = c.est
			id := e.submit(sp)[0]
			ph := e.register("s")
			as := e.nextWalltime(ph, 1, 200)
			if len(as) != 1 || as[0].ID != id {
				t.Fatalf("first ask got %v, want job %d", ids(as), id)
			}
			began := e.clock.Now()
			e.clock.Advance(60 * time.Second)
			e.report(ph, protocol.Report{ID: id, Attempt: as[0].Attempt, Exit: -1, Reason: c.reason,
				Started: began, Finished: began.Add(c.claimed)})
			e.mustBe(id, job.Queued)
			for _, reopen := range []bool{false, true} {
				if reopen {
					e.reopen()
					ph = e.register("s")
				}
				if got := e.job(id).Est; got != c.want {
					t.Fatalf("reopened %v: estimate %g, want %g", reopen, got, c.want)
				}
				if c.want > 0 {
					if as := e.nextWalltime(ph, 1, c.want-1); len(as) != 0 {
						t.Fatalf("reopened %v: a placeholder with %gs left got %v", reopen, c.want-1, ids(as))
					}
				}
			}
			if as := e.nextWalltime(ph, 1, c.want+1); len(as) != 1 || as[0].ID != id {
				t.Fatalf("a placeholder with %gs left got %v, want job %d", c.want+1, ids(as), id)
			}
		})
	}
}

// In a cp queue the estimate a walltime stop teaches ranks the job as a
// submission with it would: it goes before a job with less work left.
func TestWalltimeStopRanksCP(t *testing.T) {
	e := newEnv(t)
	e.setPolicy("q", "cp")
	a := spec("a", "sleep 1000")
	a.Queue = "q"
	id := e.submit(a)[0]
	ph := e.register("s")
	as := e.nextWalltime(ph, 1, 200)
	if len(as) != 1 || as[0].ID != id {
		t.Fatalf("first ask got %v, want job %d", ids(as), id)
	}
	x := spec("x", "true")
	x.Queue, x.Est = "q", 30
	other := e.submit(x)[0]
	began := e.clock.Now()
	e.clock.Advance(60 * time.Second)
	e.report(ph, protocol.Report{ID: id, Attempt: as[0].Attempt, Exit: -1, Reason: protocol.WalltimeReason(200 * time.Second),
		Started: began, Finished: e.clock.Now()})
	if as := e.nextWalltime(ph, 1, 1000); len(as) != 1 || as[0].ID != id {
		t.Fatalf("after the stop the placeholder got %v; want job %d (60 s of work) before job %d (30 s)", ids(as), id, other)
	}
	e.check()
}
