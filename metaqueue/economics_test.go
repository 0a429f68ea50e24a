package metaqueue

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// A queue's deadline and budget are stored, survive a restart, are kept
// when other fields change, clear with 0, and bad values are refused.
func TestQueueDeadlineBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := func(v float64) *float64 { return &v }
	info, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Deadline: f(1.8e9), Budget: f(5000)})
	if err != nil || info.Deadline != 1.8e9 || info.Budget != 5000 {
		t.Fatalf("SetQueue = %+v, %v", info, err)
	}
	if info, err = e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Ceiling: f(60)}); err != nil || info.Deadline != 1.8e9 || info.Budget != 5000 {
		t.Fatalf("another field changed them: %+v, %v", info, err)
	}
	e.reopen()
	qs, err := e.s.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Deadline != 1.8e9 || qs[0].Budget != 5000 || qs[0].Ceiling != 60 {
		t.Fatalf("after a restart: %+v, %v", qs, err)
	}
	if info, err = e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Budget: f(0), Deadline: f(0)}); err != nil || info.Deadline != 0 || info.Budget != 0 {
		t.Fatalf("clearing: %+v, %v", info, err)
	}
	for _, bad := range []protocol.QueueSet{
		{Name: "q", Deadline: f(-1)}, {Name: "q", Deadline: f(math.NaN())}, {Name: "q", Deadline: f(1e12)},
		{Name: "q", Budget: f(-1)}, {Name: "q", Budget: f(math.Inf(1))}, {Name: "q", Budget: f(math.NaN())},
	} {
		if _, err := e.s.SetQueue(ctx, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// Dispatch never starts a job whose bound cost (site price x the queue's
// ceiling) would take the queue past its budget, less what ended attempts
// cost and running ones reserve; each attempt is charged its price x
// elapsed time in its end's transaction, per queue and site, and the
// spending survives a restart. Free sites are not held back; the
// planner's caps hold a site to its share.
func TestBudgetAtDispatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := func(v float64) *float64 { return &v }
	// 3,600 an hour: one unit a second. A job may run 4 s (the ceiling),
	// so each reserves 4 of the budget of 10.
	if err := e.s.AddSite(ctx, protocol.SiteSpec{Name: "dear", Type: "local", Max: 1, Slots: 4, Price: 3600}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Budget: f(10), Ceiling: f(4)}); err != nil {
		t.Fatal(err)
	}
	var specs []protocol.JobSpec
	for i := range 6 {
		sp := spec(fmt.Sprintf("t%d", i), "true")
		sp.Queue = "q"
		specs = append(specs, sp)
	}
	e.submit(specs...)
	dear := e.register("dear")
	got := e.next(dear, 4)
	if len(got) != 2 {
		t.Fatalf("dear got %d jobs with budget 10 and 4 reserved a job; want 2", len(got))
	}
	e.clock.Advance(3 * time.Second)
	// Spent 3 (the first), 4 reserved (the second): 3 + 4 + 4 > 10.
	if more := e.next(dear, 3, ok(got[0])); len(more) != 0 {
		t.Fatalf("dear got %v past the budget", ids(more))
	}
	e.clock.Advance(time.Second)
	if more := e.next(dear, 4, ok(got[1])); len(more) != 0 {
		t.Fatalf("dear got %v past the budget (7 spent)", ids(more))
	}
	qs, err := e.s.Queues(ctx)
	if err != nil || len(qs) != 1 || math.Abs(qs[0].Spent-7) > 1e-6 || math.Abs(qs[0].SpentBySite["dear"]-7) > 1e-6 || qs[0].Reserved != 0 {
		t.Fatalf("spending: %+v, %v", qs, err)
	}
	if c := e.job(got[1].ID).Cost; c == nil || math.Abs(*c-4) > 1e-6 {
		t.Errorf("job %d's cost %v, want 4", got[1].ID, c)
	}
	// A free site is not held back by the budget.
	free := e.register("free")
	if got := e.next(free, 1); len(got) != 1 {
		t.Fatalf("free site got %d jobs", len(got))
	}
	// A raised budget lets dear start jobs again, within the planner's cap.
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Budget: f(100)}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.SetEconPlan(ctx, "q", map[string]int{"dear": 1}, 2); err != nil {
		t.Fatal(err)
	}
	if got := e.next(dear, 4); len(got) != 1 {
		t.Fatalf("dear got %d jobs under a cap of 1", len(got))
	}
	e.reopen()
	qs, err = e.s.Queues(ctx)
	// The job running at dear keeps its reservation (4) across the restart.
	if err != nil || len(qs) != 1 || math.Abs(qs[0].Spent-7) > 1e-6 || math.Abs(qs[0].Reserved-4) > 1e-6 {
		t.Fatalf("after a restart: %+v, %v", qs, err)
	}
}

// The planner is given the budget less what dispatch asks beyond a job's
// expected cost (the ceiling's reservation), so it does not plan a job
// dispatch would not start.
func TestEconQueuesBudgetLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := func(v float64) *float64 { return &v }
	if err := e.s.AddSite(ctx, protocol.SiteSpec{Name: "cheap", Type: "local", Max: 1, Slots: 1, Price: 3600}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Budget: f(10), Ceiling: f(4)}); err != nil {
		t.Fatal(err)
	}
	sp := spec("a", "true")
	sp.Queue, sp.Est = "q", 1
	e.submit(sp)
	qs, err := e.s.EconQueues(ctx)
	// Expected 1 s at 1 a second, reserved 4: the last job needs 3 more.
	if err != nil || len(qs) != 1 || !qs[0].Budgeted || math.Abs(qs[0].Budget-7) > 1e-9 || qs[0].Ready != 1 || qs[0].Est != 1 {
		t.Fatalf("EconQueues = %+v, %v", qs, err)
	}
}
