package metaqueue

import (
	"context"
	"testing"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// TestAccounting: each attempt's usage is kept where the attempt is shown:
// the job's row for the last, the history for earlier ones (lost, retried,
// rerun), and listings with Earlier; an attempt without figures has none.
func TestAccounting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	yes, two := true, 2
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "r", RetryFailed: &yes, MaxAttempts: &two}); err != nil {
		t.Fatal(err)
	}
	id := e.submit(protocol.JobSpec{Target: "t", Command: "c", Queue: "r"})[0]
	ph := e.register("s")
	use1 := protocol.Usage{CPUUser: 1.5, CPUSys: 0.25, MaxRSS: 10 << 20}
	a := e.next(ph, 1)[0]
	start := e.clock.Now()
	e.report(ph, protocol.Report{ID: a.ID, Attempt: a.Attempt, Exit: 3, Started: start, Finished: start.Add(2 * time.Second), Usage: use1})
	e.mustBe(id, job.Queued) // retried
	if got := e.job(id); got.MaxRSS != 0 || got.Elapsed != 0 {
		t.Fatalf("a requeued job keeps its last attempt's figures: %+v", got.Accounting)
	}
	use2 := protocol.Usage{CPUUser: 3, CPUSys: 1, MaxRSS: 20 << 20}
	a = e.next(ph, 1)[0]
	e.report(ph, protocol.Report{ID: a.ID, Attempt: a.Attempt, Started: start, Finished: start.Add(4500 * time.Millisecond), Usage: use2})
	e.mustBe(id, job.Done)
	d := e.job(id)
	if d.Usage != use2 || d.Elapsed != 4.5 || d.Host != "h-s" {
		t.Fatalf("job: %+v on %q, want %+v over 4.5s on h-s", d.Accounting, d.Host, use2)
	}
	if len(d.History) != 1 || d.History[0].Usage != use1 || d.History[0].Elapsed != 2 || d.History[0].Host != "h-s" {
		t.Fatalf("history: %+v", d.History)
	}
	// A rerun keeps the done attempt's figures in the history; a lost
	// attempt has none.
	if _, err := e.s.Rerun(ctx, protocol.Select{IDs: []int64{id}}); err != nil {
		t.Fatal(err)
	}
	e.next(ph, 1)
	e.expireLeases(id)
	d = e.job(id)
	if len(d.History) != 3 || d.History[1].Usage != use2 || d.History[2].Usage.Measured() {
		t.Fatalf("history after rerun and a lost attempt: %+v", d.History)
	}
	js := e.stat(protocol.Stat{Earlier: true})
	if len(js) != 1 || len(js[0].Earlier) != 3 || js[0].Earlier[1].Usage != use2 {
		t.Fatalf("stat with earlier attempts: %+v", js)
	}
	if js := e.stat(protocol.Stat{}); len(js[0].Earlier) != 0 {
		t.Fatalf("stat lists earlier attempts unasked: %+v", js[0].Earlier)
	}
	// Figures no process has are not kept (the server refuses them).
	a = e.next(ph, 1)[0]
	e.report(ph, protocol.Report{ID: a.ID, Attempt: a.Attempt, Usage: protocol.Usage{CPUUser: -1, MaxRSS: 5}})
	if d := e.job(id); d.Usage.Measured() {
		t.Fatalf("negative CPU kept: %+v", d.Usage)
	}
}

func TestCheckUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		u  protocol.Usage
		ok bool
	}{
		{protocol.Usage{}, true},
		{protocol.Usage{CPUUser: 1, CPUSys: 2, MaxRSS: 3}, true},
		{protocol.Usage{CPUUser: -1}, false},
		{protocol.Usage{CPUSys: 1e30}, false},
		{protocol.Usage{MaxRSS: -4}, false},
	} {
		if err := protocol.CheckUsage(tc.u); (err == nil) != tc.ok {
			t.Errorf("CheckUsage(%+v) = %v", tc.u, err)
		}
	}
}

// TestBlockedBy: a blocked job names the failed job behind it, through
// other blocked jobs.
func TestBlockedBy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.submit1("f", "f")
	b := e.submit1("b", "b", "f")
	c := e.submit1("c", "c", "b")
	ph := e.register("s")
	e.report(ph, exit(e.next(ph, 1)[0], 1))
	e.mustBe(c, job.Blocked)
	for _, id := range []int64{b, c} {
		if got := e.job(id).BlockedBy; got == nil || got.Job != f || got.State != "F" || got.Target != "f" {
			t.Fatalf("job %d blocked by %+v, want job %d (F, target f)", id, got, f)
		}
	}
	if got := e.job(f).BlockedBy; got != nil {
		t.Fatalf("a failed job is blocked by %+v", got)
	}
	// Of several prerequisite targets, the failed or deleted job with the
	// lowest id, whatever its target and however many jobs come before it.
	var many []protocol.JobSpec
	for range 50 {
		many = append(many, spec("m", "true"))
	}
	m := e.submit(many...)
	x := e.submit1("x", "x")
	g := e.submit1("g", "g", "x", "m", "c")
	e.mustDelete(m[45], x, m[40])
	if got := e.job(g).BlockedBy; got == nil || got.Job != m[40] || got.State != "X" || got.Target != "m" {
		t.Fatalf("job %d blocked by %+v, want job %d (X, target m)", g, got, m[40])
	}
}
