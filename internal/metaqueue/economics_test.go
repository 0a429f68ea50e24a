package metaqueue

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// pricedSite is a local site of at most max placeholders of slots each
// that charges price an hour (3,600: one unit a second).
func pricedSite(name string, max, slots int, price float64) protocol.SiteSpec {
	return protocol.SiteSpec{Name: name, Type: "local", Max: max, Slots: slots, Price: price}
}

// addSites adds sites to the store.
func (e *env) addSites(sites ...protocol.SiteSpec) {
	e.t.Helper()
	for _, s := range sites {
		if err := e.s.AddSite(context.Background(), s); err != nil {
			e.t.Fatalf("AddSite(%s): %v", s.Name, err)
		}
	}
}

// setLimits sets what qs sets of a queue (its deadline, budget, ceiling).
func (e *env) setLimits(qs protocol.QueueSet) {
	e.t.Helper()
	if _, err := e.s.SetQueue(context.Background(), qs); err != nil {
		e.t.Fatalf("SetQueue: %v", err)
	}
}

// ledgerSpec is job target of queue q, expected to run est seconds (0:
// unknown).
func ledgerSpec(target string, est float64, prereqs ...string) protocol.JobSpec {
	sp := spec(target, "true", prereqs...)
	sp.Queue, sp.Est = "q", est
	return sp
}

// ledgerSpecs is n jobs of queue q named prefix0, prefix1, ..., each
// expected to run est seconds (0: unknown).
func ledgerSpecs(prefix string, n int, est float64) []protocol.JobSpec {
	specs := make([]protocol.JobSpec, 0, n)
	for i := range n {
		specs = append(specs, ledgerSpec(fmt.Sprintf("%s%d", prefix, i), est))
	}
	return specs
}

// A queue's deadline and budget are stored, survive a restart, are kept
// when other fields change, clear with 0, and bad values are refused.
func TestQueueDeadlineBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	info, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Deadline: new(1.8e9), Budget: new(5000.0)})
	if err != nil || info.Deadline != 1.8e9 || info.Budget != 5000 {
		t.Fatalf("SetQueue = %+v, %v", info, err)
	}
	if info, err = e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Ceiling: new(60.0)}); err != nil || info.Deadline != 1.8e9 || info.Budget != 5000 {
		t.Fatalf("another field changed them: %+v, %v", info, err)
	}
	e.reopen()
	qs, err := e.s.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Deadline != 1.8e9 || qs[0].Budget != 5000 || qs[0].Ceiling != 60 {
		t.Fatalf("after a restart: %+v, %v", qs, err)
	}
	if info, err = e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Budget: new(0.0), Deadline: new(0.0)}); err != nil || info.Deadline != 0 || info.Budget != 0 {
		t.Fatalf("clearing: %+v, %v", info, err)
	}
	bad := []struct {
		name string
		qs   protocol.QueueSet
	}{
		{"deadline_negative", protocol.QueueSet{Name: "q", Deadline: new(-1.0)}},
		{"deadline_NaN", protocol.QueueSet{Name: "q", Deadline: new(math.NaN())}},
		{"deadline_too_far", protocol.QueueSet{Name: "q", Deadline: new(1e12)}},
		{"budget_negative", protocol.QueueSet{Name: "q", Budget: new(-1.0)}},
		{"budget_infinite", protocol.QueueSet{Name: "q", Budget: new(math.Inf(1))}},
		{"budget_NaN", protocol.QueueSet{Name: "q", Budget: new(math.NaN())}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.s.SetQueue(ctx, tc.qs); err == nil {
				t.Errorf("%+v accepted", tc.qs)
			}
		})
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
	// 3,600 an hour: one unit a second. A job may run 4 s (the ceiling),
	// so each reserves 4 of the budget of 10.
	e.addSites(pricedSite("dear", 1, 4, 3600))
	e.setLimits(protocol.QueueSet{Name: "q", Budget: new(10.0), Ceiling: new(4.0)})
	e.submit(ledgerSpecs("t", 6, 0)...)
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
	e.setLimits(protocol.QueueSet{Name: "q", Budget: new(100.0)})
	if err := e.s.Planners().SetEconPlan(ctx, "q", map[string]int{"dear": 1}, 2); err != nil {
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
	e.addSites(pricedSite("cheap", 1, 1, 3600))
	e.setLimits(protocol.QueueSet{Name: "q", Budget: new(10.0), Ceiling: new(4.0)})
	e.submit(ledgerSpec("a", 1))
	qs, err := e.s.Planners().EconQueues(ctx)
	// Expected 1 s at 1 a second, reserved 4: the last job needs 3 more.
	if err != nil || len(qs) != 1 || !qs[0].Budgeted || math.Abs(qs[0].Budget-7) > 1e-9 || qs[0].Ready != 1 || qs[0].Est != 1 {
		t.Fatalf("EconQueues = %+v, %v", qs, err)
	}
}

// unixSec is t as the Unix seconds a queue's deadline is set in.
func unixSec(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// summaryOf is queue name's row of the summary (mqstat --summary), and
// whether it has one.
func (e *env) summaryOf(name string) (protocol.QueueCounts, bool) {
	e.t.Helper()
	qs, err := e.s.Summary(context.Background())
	if err != nil {
		e.t.Fatalf("Summary: %v", err)
	}
	for _, q := range qs {
		if q.Queue == name {
			return q, true
		}
	}
	return protocol.QueueCounts{}, false
}

// spentOf is queue name's spending in all and at site, from the summary.
func (e *env) spentOf(name, site string) (all, at float64) {
	e.t.Helper()
	q, ok := e.summaryOf(name)
	if !ok {
		e.t.Fatalf("no queue %s in the summary", name)
	}
	return q.Spent, q.SpentBySite[site]
}

// chargeOf is what attempt of job id was charged (-1: no charge).
func (e *env) chargeOf(id int64, attempt int) float64 {
	e.t.Helper()
	var c float64
	err := e.s.rdb.QueryRow("SELECT cost FROM charges WHERE job_id = ? AND attempt = ?", id, attempt).Scan(&c)
	if err != nil {
		return -1
	}
	return c
}

// Copies are attempts like any other: each passes the budget
// check at dispatch and reserves its bound, so replication cannot take a
// queue past its budget, and each is charged when it ends, a killed copy
// too (up to when its placeholder says it stopped). Before, a copy ran
// unreserved and free.
func TestCopiesCharged(t *testing.T) {
	t.Parallel()
	for _, pol := range []string{"wqr", "fcfs"} {
		t.Run(pol, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			// One unit a second; every attempt may run 4 s (the ceiling)
			// and so reserves 4 of the budget of 10: two attempts at once.
			e.addSites(pricedSite("dear", 4, 1, 3600))
			e.setQueue("q", pol, 3)
			e.setLimits(protocol.QueueSet{Name: "q", Budget: new(10.0), Ceiling: new(4.0)})
			id := e.submit(ledgerSpec("t", 0))[0]
			a, b, c := e.register("dear"), e.register("dear"), e.register("dear")
			first := e.next(a, 1)
			if len(first) != 1 {
				t.Fatalf("a got %d jobs", len(first))
			}
			cp := e.next(b, 1)
			if len(cp) != 1 || cp[0].ID != id || cp[0].Attempt == first[0].Attempt {
				t.Fatalf("b got %+v, want a copy of job %d", cp, id)
			}
			qs, err := e.s.Queues(ctx)
			if err != nil || math.Abs(qs[0].Reserved-8) > 1e-9 {
				t.Fatalf("the copy reserved nothing: %+v, %v", qs, err)
			}
			// A third attempt would reserve 4 more: 12 > 10.
			if got := e.next(c, 1); len(got) != 0 {
				t.Fatalf("c got a copy %+v past the budget", got)
			}
			e.clock.Advance(2 * time.Second)
			// The copy wins after 2 s; the first attempt is killed, and
			// its 2 s are spent as well.
			e.report(b, ok(cp[0]))
			e.mustBe(id, job.Done)
			if got := e.chargeOf(id, first[0].Attempt); math.Abs(got-2) > 1e-6 {
				t.Fatalf("the killed attempt was charged %v, want 2", got)
			}
			if all, at := e.spentOf("q", "dear"); math.Abs(all-4) > 1e-6 || math.Abs(at-4) > 1e-6 {
				t.Fatalf("summary spent %v (dear %v), want 4", all, at)
			}
			// The killed attempt's placeholder stops it a second later
			// and says so: it is charged up to then.
			if hb := e.heartbeat(a, []protocol.JobRef{refOf(first[0])}); !contains(hb.Kill, refOf(first[0])) {
				t.Fatalf("a not told to kill the losing attempt: %+v", hb)
			}
			e.clock.Advance(time.Second)
			e.report(a, protocol.Report{ID: id, Attempt: first[0].Attempt, Exit: -1, Finished: e.clock.Now()})
			if got := e.chargeOf(id, first[0].Attempt); math.Abs(got-3) > 1e-6 {
				t.Fatalf("the killed attempt was charged %v after its report, want 3", got)
			}
			if all, _ := e.spentOf("q", "dear"); math.Abs(all-5) > 1e-6 {
				t.Fatalf("summary spent %v, want 5", all)
			}
			qs, err = e.s.Queues(ctx)
			if err != nil || qs[0].Reserved != 0 {
				t.Fatalf("reservations left: %+v, %v", qs, err)
			}
			e.check()
		})
	}
}

// Replication under a budget: whatever order attempts end in, spending
// (ended attempts) plus what running ones reserve never passes the
// budget, and in the end every attempt started, copies included, is
// charged; a copy that fails, one lost with its placeholder and a job
// deleted while executing are charged too.
func TestReplicationWithinBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.addSites(pricedSite("dear", 8, 1, 3600))
	e.setQueue("q", "wqr", -1)
	// 7 attempts' bounds of 10 at once, at most; each ends within its
	// ceiling (a placeholder's turn comes every 8 s).
	const budget = 75.0
	e.setLimits(protocol.QueueSet{Name: "q", Budget: new(budget), Ceiling: new(10.0)})
	e.submit(ledgerSpecs("t", 5, 0)...)
	var phs []int64
	for range 8 {
		phs = append(phs, e.register("dear"))
	}
	held := map[int64][]protocol.Assignment{}
	started := 0
	within := func(when string) {
		t.Helper()
		qs, err := e.s.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if qs[0].Spent+qs[0].Reserved > budget+1e-6 {
			t.Fatalf("%s: spent %v + reserved %v > budget %v", when, qs[0].Spent, qs[0].Reserved, budget)
		}
	}
	for round := 0; round < 12; round++ {
		for _, ph := range phs {
			if len(held[ph]) > 0 {
				continue
			}
			got := e.next(ph, 1)
			started += len(got)
			held[ph] = append(held[ph], got...)
			within(fmt.Sprintf("round %d, dispatch", round))
		}
		e.clock.Advance(time.Second)
		// One placeholder in turn ends what it runs: ok, failed, lost
		// with its placeholder, or deleted by the user.
		ph := phs[round%len(phs)]
		for _, a := range held[ph] {
			switch round % 4 {
			case 0:
				e.report(ph, ok(a))
			case 1:
				e.report(ph, exit(a, 1))
			case 2:
				if err := e.s.PlaceholderGone(ctx, ph); err != nil {
					t.Fatal(err)
				}
				phs[round%len(phs)] = e.register("dear")
			case 3:
				if _, err := e.s.Delete(ctx, protocol.Select{IDs: []int64{a.ID}}); err != nil {
					t.Fatal(err)
				}
				// Its placeholder kills it and reports, as an agent does:
				// a killed copy's reservation waits for that report.
				e.report(ph, exit(a, 143))
			}
		}
		delete(held, ph)
		within(fmt.Sprintf("round %d, end", round))
	}
	// Whatever still runs ends now.
	for ph, as := range held {
		for _, a := range as {
			e.report(ph, ok(a))
		}
	}
	within("the end")
	var charged int
	if err := e.s.rdb.QueryRow("SELECT count(*) FROM charges").Scan(&charged); err != nil {
		t.Fatal(err)
	}
	qs, _ := e.s.Queues(ctx)
	t.Logf("%d attempts started, %d charged; spent %.3g, reserved %.3g", started, charged, qs[0].Spent, qs[0].Reserved)
	if started < 8 || charged != started || qs[0].Reserved != 0 {
		t.Fatalf("%d attempts started, %d charged, %v still reserved: every attempt is charged once", started, charged, qs[0].Reserved)
	}
	e.check()
}

// syncBuffer is a log sink the core writes to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The deadline at dispatch (docs/policies/dbc.md): a job starts at a
// site only if now plus its estimated runtime there (the queue's measured
// mean at the site) is within the queue's deadline; otherwise it waits
// for a faster site. Once no known site can end it in time it is
// reported infeasible (mqstat -j, --summary, logged once), and a later
// deadline lets it run.
func TestDeadlineAtDispatch(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := newEnvWith(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	t0 := e.clock.Now()
	e.setLimits(protocol.QueueSet{Name: "q", Deadline: new(unixSec(t0) + 20)})
	e.submit(ledgerSpecs("t", 6, 0)...)
	slow, fast := e.register("slow"), e.register("fast")
	// No runtime known: each site may learn one.
	a, b := e.next(slow, 1), e.next(fast, 1)
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("slow got %d, fast %d jobs with no runtime known", len(a), len(b))
	}
	e.clock.Advance(2 * time.Second)
	e.report(fast, ok(b[0])) // 2 s at fast
	e.clock.Advance(6 * time.Second)
	e.report(slow, ok(a[0])) // 8 s at slow
	// t = 8: 12 s left, slow's 8 s fit.
	got := e.next(slow, 1)
	if len(got) != 1 {
		t.Fatalf("slow got %d jobs with 12 s left and 8 s a job", len(got))
	}
	e.clock.Advance(6 * time.Second)
	e.report(slow, ok(got[0]))
	// t = 14: 6 s left. Slow (8 s) would end late; fast (2 s) will not.
	if got := e.next(slow, 1); len(got) != 0 {
		t.Fatalf("slow got %v with 6 s left and 8 s a job", ids(got))
	}
	e.tick()
	if n := e.infeasibleIn("q"); n != 0 {
		t.Fatalf("%d jobs infeasible while fast can end them", n)
	}
	got = e.next(fast, 1)
	if len(got) != 1 {
		t.Fatalf("fast got %d jobs with 6 s left and 2 s a job", len(got))
	}
	e.clock.Advance(2 * time.Second)
	e.report(fast, ok(got[0]))
	// t = 19: 1 s left: no site can end a job; the 2 left are reported.
	e.clock.Advance(3 * time.Second)
	if got := e.next(fast, 1); len(got) != 0 {
		t.Fatalf("fast got %v with 1 s left and 2 s a job", ids(got))
	}
	e.tick()
	if n := e.infeasibleIn("q"); n != 2 {
		t.Fatalf("%d jobs reported infeasible, want the 2 left", n)
	}
	var waiting []int64
	for _, j := range e.stat(protocol.Stat{Queue: "q", States: "Q"}) {
		waiting = append(waiting, j.ID)
		if d := e.job(j.ID); !strings.Contains(d.Infeasible, "site fast") {
			t.Errorf("job %d: infeasible %q, want it to name the fastest site", j.ID, d.Infeasible)
		}
	}
	if len(waiting) != 2 {
		t.Fatalf("waiting %v", waiting)
	}
	e.clock.Advance(1500 * time.Millisecond)
	e.tick()
	e.clock.Advance(1500 * time.Millisecond)
	e.tick()
	if n := strings.Count(logs.String(), "cannot end by their queue's deadline"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if d := e.job(waiting[0]); !strings.Contains(d.Infeasible, "deadline has passed") {
		t.Errorf("past the deadline: %q", d.Infeasible)
	}
	// A later deadline: they run, and are no longer reported.
	e.setLimits(protocol.QueueSet{Name: "q", Deadline: new(unixSec(e.clock.Now()) + 60)})
	e.tick()
	if n := e.infeasibleIn("q"); n != 0 {
		t.Fatalf("%d still infeasible with a later deadline", n)
	}
	if got := e.next(slow, 2); len(got) != 2 {
		t.Fatalf("slow got %d jobs with 60 s left", len(got))
	}
	e.check()
}

// A copy is held to the deadline as a first run is: a site whose
// measured runtime ends after it gets no copy.
func TestDeadlineGatesCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setQueue("q", "wqr", -1)
	t0 := e.clock.Now()
	e.setLimits(protocol.QueueSet{Name: "q", Deadline: new(unixSec(t0) + 20)})
	first := e.submit(ledgerSpec("a", 0))[0]
	slow := e.register("slow")
	a := e.next(slow, 1)
	e.clock.Advance(8 * time.Second)
	e.report(slow, ok(a[0])) // 8 s at slow
	if e.state(first) != job.Done {
		t.Fatal("not done")
	}
	id := e.submit(ledgerSpec("b", 0))[0]
	fast := e.register("fast")
	if got := e.next(fast, 1); len(got) != 1 || got[0].ID != id {
		t.Fatalf("fast got %+v", got)
	}
	e.clock.Advance(5 * time.Second)
	// t = 13: 7 s left; slow's 8 s a job would end late.
	if got := e.next(slow, 1); len(got) != 0 {
		t.Fatalf("slow got a copy %+v that cannot end by the deadline", got)
	}
}

// infeasibleIn is how many ready jobs of queue name the summary reports
// infeasible.
func (e *env) infeasibleIn(name string) int {
	e.t.Helper()
	q, ok := e.summaryOf(name)
	if !ok {
		return -1
	}
	return q.Infeasible
}

// A job still waiting on prerequisites is judged too: it can start no
// earlier than its unfinished prerequisites' chain of estimated runtimes
// (a running one for what is left of it), so a second stage that would
// fit the deadline alone is reported infeasible, while it waits, because
// of its prerequisite's runtime; a later deadline clears it.
func TestDeadlineJudgesWaitingJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t0 := e.clock.Now()
	e.setLimits(protocol.QueueSet{Name: "q", Deadline: new(unixSec(t0) + 20)})
	got := e.submit(
		// a: 15 s, then b (needs a): 10 s, then c (needs b): 1 s. b alone
		// fits the 20 s; a then b (25 s) does not, nor does a, b, c.
		ledgerSpec("a", 15), ledgerSpec("b", 10, "a"), ledgerSpec("c", 1, "b"),
		// d (needs a) runs 2 s: a then d ends by 17 s, within the deadline.
		ledgerSpec("d", 2, "a"),
	)
	ida, idb, idc, idd := got[0], got[1], got[2], got[3]
	ph := e.register("fast")
	e.tick()
	if n := e.infeasibleIn("q"); n != 2 {
		t.Fatalf("%d jobs reported infeasible, want b and c (waiting)", n)
	}
	if e.state(idb) != job.Waiting {
		t.Fatalf("b is %v, not waiting", e.state(idb))
	}
	for _, tc := range []struct {
		name string
		id   int64
		want string
	}{
		{"b", idb, "its prerequisites end in 15s at the earliest, then it is expected to run 10s at best (site fast), 20s left"},
		{"c", idc, "its prerequisites end in 25s at the earliest, 20s left"},
		{"a", ida, ""},
		{"d", idd, ""},
	} {
		// Read on the parent's env: its failures belong to the parent.
		got := e.job(tc.id).Infeasible
		t.Run(tc.name, func(t *testing.T) {
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("job %d: infeasible %q, want %q", tc.id, got, tc.want)
			}
		})
	}
	// a runs: 4 s later what is left of it (11 s) still counts.
	if got := e.next(ph, 1); len(got) != 1 || got[0].ID != ida {
		t.Fatalf("fast got %+v, want a", got)
	}
	e.clock.Advance(4 * time.Second)
	e.tick()
	if d := e.job(idb).Infeasible; !strings.Contains(d, "prerequisites end in 11s") {
		t.Errorf("with a running 4 s: %q", d)
	}
	// A later deadline, 21.5 s away: b fits (a's 11 s left, then 10 s);
	// c (then 1 s more) does not.
	e.setLimits(protocol.QueueSet{Name: "q", Deadline: new(unixSec(e.clock.Now()) + 21.5)})
	e.tick()
	if n := e.infeasibleIn("q"); n != 1 || e.job(idc).Infeasible == "" {
		t.Fatalf("%d infeasible with 21.5 s left, want c alone (11 + 10 + 1 s)", n)
	}
	e.check()
}

// Jobs the budget cannot pay for are reported early: the budget left,
// less what running attempts reserve, pays for the jobs not started
// (ready or waiting) at their cheapest site's expected cost, cheapest
// first; the rest are counted (mqstat --summary, cls queue list) and
// mqstat -j says so. A free site pays for everything.
func TestBudgetReportsUnaffordable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// cheap: one unit a second; dear: two.
	e.addSites(pricedSite("cheap", 1, 4, 3600), pricedSite("dear", 1, 4, 7200))
	e.setLimits(protocol.QueueSet{Name: "q", Budget: new(3.5)})
	// 5 jobs of 1 s (1 each at cheap): 3 ready, 2 waiting on t0; and one
	// of unknown runtime, whose cost cannot be foreseen (not counted).
	specs := append(ledgerSpecs("t", 3, 1), ledgerSpec("w0", 1, "t0"), ledgerSpec("w1", 1, "t0"))
	ids := e.submit(append(specs, ledgerSpec("u", 0))...)
	e.tick()
	overIn := func() int {
		t.Helper()
		qs, err := e.s.Summary(ctx)
		if err != nil || len(qs) != 1 {
			t.Fatalf("Summary: %+v, %v", qs, err)
		}
		ql, err := e.s.Queues(ctx)
		if err != nil || len(ql) != 1 || ql[0].OverBudget != qs[0].OverBudget {
			t.Fatalf("Queues: %+v, %v; summary says %d", ql, err, qs[0].OverBudget)
		}
		return qs[0].OverBudget
	}
	if n := overIn(); n != 2 {
		t.Fatalf("%d jobs over budget, want 2 (3.5 pays for 3 of 5 at 1 each)", n)
	}
	if d := e.job(ids[3]).OverBudget; !strings.Contains(d, "pays for 4 of its 6 jobs not started") {
		t.Errorf("waiting job: over budget %q", d)
	}
	// One starts at cheap, reserving its expected 1: 2.5 left for 5.
	ph := e.register("cheap")
	if got := e.next(ph, 1); len(got) != 1 {
		t.Fatalf("cheap got %d jobs", len(got))
	}
	e.clock.Advance(2 * time.Second)
	e.tick()
	if n := overIn(); n != 2 {
		t.Fatalf("%d jobs over budget after one started, want 2 (2.5 left pays for 2 of 4 foreseen)", n)
	}
	// A site that charges nothing can run them all.
	e.register("free")
	e.tick()
	if n := overIn(); n != 0 {
		t.Fatalf("%d jobs over budget with a free site", n)
	}
	if d := e.job(ids[3]).OverBudget; d != "" {
		t.Errorf("with a free site: %q", d)
	}
}

// BenchmarkCheckInfeasible: the early report's cost on the core, with
// 100,000 jobs of a queue with a deadline and a budget, half waiting on
// the other half's targets (b.N checks; its pace keeps it at most 5% of
// the core's time).
func BenchmarkCheckInfeasible(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Path: filepath.Join(b.TempDir(), "mq.db"), Sync: SyncNormal, Lease: testLease})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e := &env{s: s, clock: newClock()}
	if err := e.s.AddSite(ctx, pricedSite("s", 1, 4, 3600)); err != nil {
		b.Fatal(err)
	}
	if _, err := e.s.SetQueue(ctx, protocol.QueueSet{Name: "q", Deadline: new(unixSec(time.Now()) + 60), Budget: new(1000.0)}); err != nil {
		b.Fatal(err)
	}
	const n = 50_000
	specs := ledgerSpecs("a", n, 30)
	for i := range n {
		specs = append(specs, ledgerSpec(fmt.Sprintf("b%d", i), float64(20+i%20), fmt.Sprintf("a%d", i)))
	}
	if _, err := e.s.Submit(ctx, specs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := e.s.do(ctx, func() error {
			e.s.ledger.Changed() // due again at once
			e.s.checkInfeasible(time.Now())
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	qs, _ := e.s.Summary(ctx)
	b.ReportMetric(float64(qs[0].Infeasible), "infeasible")
	b.ReportMetric(float64(qs[0].OverBudget), "over_budget")
}

// A progress request asking for spending (mqstat --summary -t) gets what
// the selected jobs' attempts cost, per site: a target's, a queue's, a
// range's.
func TestProgressSpending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.addSites(pricedSite("dear", 1, 4, 3600))
	e.setLimits(protocol.QueueSet{Name: "q", Budget: new(100.0)})
	ida, idb := e.submit(ledgerSpec("a", 2))[0], e.submit(ledgerSpec("b", 3))[0]
	ph := e.register("dear")
	got := e.next(ph, 2)
	if len(got) != 2 {
		t.Fatalf("dear got %d jobs", len(got))
	}
	e.clock.Advance(2 * time.Second)
	e.report(ph, ok(got[0]))
	e.clock.Advance(time.Second)
	e.report(ph, ok(got[1])) // the first 2 s, the second 3 s
	costOf := map[int64]float64{got[0].ID: 2, got[1].ID: 3}
	for _, tc := range []struct {
		name string
		req  protocol.Progress
		want float64
	}{
		{"target", protocol.Progress{Target: "a"}, costOf[ida]},
		{"target_in_queue", protocol.Progress{Target: "b", Queue: "q"}, costOf[idb]},
		{"queue", protocol.Progress{Queue: "q"}, 5},
		{"all", protocol.Progress{}, 5},
		{"range", protocol.Progress{First: idb, Last: idb}, costOf[idb]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Once, tc.req.Spending = true, true
			var r protocol.ProgressReply
			if err := e.s.Progress().Stream(ctx, tc.req, func(p protocol.ProgressReply) error { r = p; return nil }); err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Spent-tc.want) > 1e-6 || math.Abs(r.SpentBySite["dear"]-tc.want) > 1e-6 || r.Counts["D"] == 0 {
				t.Errorf("%+v: %+v, want spent %g at dear", tc.req, r, tc.want)
			}
		})
	}
	var r protocol.ProgressReply
	if err := e.s.Progress().Stream(ctx, protocol.Progress{Target: "a", Once: true}, func(p protocol.ProgressReply) error { r = p; return nil }); err != nil || r.Spent != 0 || r.SpentBySite != nil {
		t.Errorf("spending not asked: %+v, %v", r, err)
	}
}

// TestInfeasibleJobsDoNotHideFeasible: more than a policy.Window of jobs that
// cannot end by the deadline at the head of a queue once hid the one
// behind them that can (pickFrom looks at a policy.Window of ready jobs); they
// are taken off the heap while infeasible, and put back when a later
// deadline makes them feasible.
func TestInfeasibleJobsDoNotHideFeasible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t0 := e.clock.Now()
	e.setLimits(protocol.QueueSet{Name: "q", Deadline: new(unixSec(t0) + 100)})
	jobIDs := e.submit(append(ledgerSpecs("long", 2*policy.Window, 1000), ledgerSpec("short", 1))...)
	ph := e.register("s")
	e.tick()
	got := e.next(ph, 1)
	if len(got) != 1 || got[0].ID != jobIDs[len(jobIDs)-1] {
		t.Fatalf("got %v; want the one job that can end by the deadline, %d", ids(got), jobIDs[len(jobIDs)-1])
	}
	e.report(ph, ok(got[0]))
	if got := e.next(ph, 1); len(got) != 0 {
		t.Fatalf("got %v; no other job can end by the deadline", ids(got))
	}
	e.setLimits(protocol.QueueSet{Name: "q", Deadline: new(unixSec(t0) + 5000)})
	e.tick()
	if got := e.next(ph, 1); len(got) != 1 || got[0].ID != jobIDs[0] {
		t.Fatalf("after a later deadline got %v, want the first long job %d", ids(got), jobIDs[0])
	}
}
