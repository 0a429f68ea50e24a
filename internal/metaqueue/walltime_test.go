package metaqueue

import (
	"context"
	"strings"
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

// A job that ran a whole placeholder's walltime twice (the second time
// with the nine tenths it learned the first) needs a longer placeholder:
// with one known it waits for that one alone; with none, it fails at once
// saying what to do, rather than spend its last attempt the same way.
func TestWalltimeOutgrown(t *testing.T) {
	for _, longer := range []bool{false, true} {
		t.Run(map[bool]string{false: "none longer", true: "a longer placeholder"}[longer], func(t *testing.T) {
			e := newEnv(t)
			reg := func(walltime float64) int64 {
				r, err := e.s.Register(context.Background(), protocol.Register{Site: "s", Host: "h", PID: 42, Slots: 1, OutDir: "/out", Walltime: walltime})
				if err != nil {
					t.Fatal(err)
				}
				return r.ID
			}
			var long int64
			if longer {
				long = reg(600)
			}
			id := e.submit(spec("t", "sleep 1000"))[0]
			for attempt := 1; attempt <= 2; attempt++ {
				ph := reg(60)
				as := e.nextWalltime(ph, 1, 60)
				if len(as) != 1 || as[0].ID != id {
					t.Fatalf("attempt %d: a fresh 60 s placeholder got %v, want job %d", attempt, ids(as), id)
				}
				began := e.clock.Now()
				e.clock.Advance(60 * time.Second)
				e.report(ph, protocol.Report{ID: id, Attempt: as[0].Attempt, Exit: -1, Reason: protocol.WalltimeReason(60 * time.Second),
					Started: began, Finished: e.clock.Now()})
			}
			d := e.job(id)
			if !longer {
				e.mustBe(id, job.Failed)
				for _, want := range []string{"needs more than a whole placeholder's walltime", "1m0s", "give a site a longer --walltime"} {
					if !strings.Contains(d.Reason, want) {
						t.Errorf("reason %q lacks %q", d.Reason, want)
					}
				}
				if d.Attempts != 2 {
					t.Errorf("%d attempts, want 2 of the queue's 3", d.Attempts)
				}
				return
			}
			e.mustBe(id, job.Queued)
			if d.Est != 61 {
				t.Errorf("estimate %g, want 61: more than a whole 60 s placeholder", d.Est)
			}
			if as := e.nextWalltime(reg(60), 1, 60); len(as) != 0 {
				t.Fatalf("a fresh 60 s placeholder got %v again", ids(as))
			}
			if as := e.nextWalltime(long, 1, 600); len(as) != 1 || as[0].ID != id {
				t.Fatalf("the 600 s placeholder got %v, want job %d", ids(as), id)
			}
		})
	}
}
