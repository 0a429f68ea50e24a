package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

var t0 = time.Unix(1_700_000_000, 0)

func noEstimate(dag.Node) float64 { return 0 }

func declared(j dag.Node) float64 { return float64(j.Est) }

func clock(t time.Time) func() time.Time { return func() time.Time { return t } }

// fakeExec records the statements the ledger writes; it reads nothing.
type fakeExec struct{ execs []string }

func (f *fakeExec) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	f.execs = append(f.execs, q)
	return nil, nil
}

func (f *fakeExec) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("not read")
}

func (f *fakeExec) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }

var _ Execer = (*fakeExec)(nil)

// The dispatch rule: deadline, cap and budget, each alone and together.
func TestAffordable(t *testing.T) {
	j := dag.Node{Queue: 1, Est: 3600}
	unknown := dag.Node{Queue: 1}
	for _, c := range []struct {
		name  string
		q     Queue
		j     dag.Node
		site  string
		setup func(l *Ledger)
		want  bool
	}{
		{"uncosted, no caps", Queue{ID: 1}, j, "a", nil, true},
		{"uncosted, under its cap", Queue{ID: 1}, j, "a", func(l *Ledger) { l.SetPlan(1, map[string]int{"a": 1}, 0) }, true},
		{"uncosted, at its cap", Queue{ID: 1}, j, "a", func(l *Ledger) {
			l.SetPlan(1, map[string]int{"a": 1}, 0)
			l.Count(protocol.JobRef{ID: 9, Attempt: 1}, 1, "a")
		}, false},
		{"uncosted, capped at another site", Queue{ID: 1}, j, "b", func(l *Ledger) {
			l.SetPlan(1, map[string]int{"a": 0}, 0)
		}, true},
		{"deadline passed", Queue{ID: 1, Deadline: float64(t0.Unix())}, j, "a", nil, false},
		{"deadline ahead, runtime fits", Queue{ID: 1, Deadline: float64(t0.Unix() + 7200)}, j, "a", nil, true},
		{"deadline ahead, runtime too long", Queue{ID: 1, Deadline: float64(t0.Unix() + 1800)}, j, "a", nil, false},
		{"deadline ahead, runtime unknown", Queue{ID: 1, Deadline: float64(t0.Unix() + 1)}, unknown, "a", nil, true},
		{"budget at a free site", Queue{ID: 1, Budget: 0.5}, j, "free", func(l *Ledger) { l.SetPrice("a", 10) }, true},
		{"budget covers it", Queue{ID: 1, Budget: 10}, j, "a", func(l *Ledger) { l.SetPrice("a", 10) }, true},
		{"budget short", Queue{ID: 1, Budget: 9.99}, j, "a", func(l *Ledger) { l.SetPrice("a", 10) }, false},
		{"budget reserved by a running attempt", Queue{ID: 1, Budget: 15}, j, "a", func(l *Ledger) {
			l.SetPrice("a", 10)
			l.Start(protocol.JobRef{ID: 2, Attempt: 1}, Queue{ID: 1, Budget: 15}, j, "a", declared, 1)
		}, false},
		{"unknown cost, none running", Queue{ID: 1, Budget: 1}, unknown, "a", func(l *Ledger) { l.SetPrice("a", 10) }, true},
		{"unknown cost, one running at a priced site", Queue{ID: 1, Budget: 100}, unknown, "a", func(l *Ledger) {
			l.SetPrice("a", 10)
			l.Start(protocol.JobRef{ID: 2, Attempt: 1}, Queue{ID: 1, Budget: 100}, unknown, "a", noEstimate, 1)
		}, false},
		{"ceiling bounds the reservation", Queue{ID: 1, Budget: 5, Ceiling: 1800}, j, "a", func(l *Ledger) { l.SetPrice("a", 10) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(nil)
			if c.setup != nil {
				c.setup(l)
			}
			if got := l.Affordable(c.q, c.j, c.site, clock(t0), declared, 1); got != c.want {
				t.Errorf("Affordable = %v, want %v", got, c.want)
			}
			// Unbounded (a pick then skips Affordable) only with no
			// deadline, budget or cap: then Affordable allows.
			if got, want := l.Unbounded(c.q), c.q.Budget == 0 && c.q.Deadline == 0 && c.setup == nil; got != want || got && !c.want {
				t.Errorf("Unbounded = %v, want %v", got, want)
			}
		})
	}
}

// What an attempt reserves, and that every way it stops gives it back.
func TestReserveAndRelease(t *testing.T) {
	q := Queue{ID: 1, Budget: 100, Ceiling: 1800}
	j := dag.Node{Queue: 1, Est: 600}
	ref := protocol.JobRef{ID: 7, Attempt: 3}
	for _, c := range []struct {
		name string
		stop func(l *Ledger)
		left float64 // reserved after stop
	}{
		{"stop", func(l *Ledger) { l.Stop(ref) }, 0},
		{"killed, then reported", func(l *Ledger) {
			l.Dying(ref, 4, t0, t0.Add(900*time.Second), t0.Add(time.Hour))
			l.Died(ref)
		}, 0},
		{"killed, held until reported", func(l *Ledger) {
			l.Dying(ref, 4, t0, t0.Add(900*time.Second), t0.Add(time.Hour))
		}, 2.5}, // 5 reserved, 2.5 of it charged at the kill
		{"killed, never reported", func(l *Ledger) {
			l.Dying(ref, 4, t0, t0, t0.Add(time.Minute))
			l.Expire(t0.Add(2 * time.Minute))
		}, 0},
		{"killed, its placeholder gone", func(l *Ledger) {
			l.Dying(ref, 4, t0, t0, t0.Add(time.Hour))
			l.PlaceholderGone(4)
		}, 0},
		{"killed, another placeholder gone", func(l *Ledger) {
			l.Dying(ref, 4, t0, t0, t0.Add(time.Hour))
			l.PlaceholderGone(5)
		}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(nil)
			l.SetPrice("a", 10)
			l.Start(protocol.JobRef{ID: ref.ID}, q, j, "a", declared, 1)
			l.Numbered(ref.ID, ref.Attempt)
			var info protocol.QueueInfo
			l.Fill(&info, q.ID)
			if info.Reserved != 5 { // 10 per hour x the 1800 s ceiling
				t.Fatalf("reserved %g at start, want 5", info.Reserved)
			}
			if got := l.SiteOf(ref); got != "a" {
				t.Errorf("SiteOf = %q, want a", got)
			}
			c.stop(l)
			info = protocol.QueueInfo{}
			l.Fill(&info, q.ID)
			if math.Abs(info.Reserved-c.left) > 1e-9 {
				t.Errorf("reserved %g after, want %g", info.Reserved, c.left)
			}
		})
	}
}

// Charges: a costed or priced attempt is written and spent; a capped
// uncosted queue's success at a free site is measured for the planner,
// not charged.
func TestCharge(t *testing.T) {
	ref := protocol.JobRef{ID: 1, Attempt: 1}
	for _, c := range []struct {
		name      string
		q         Queue
		price     float64
		capped    bool
		ok        bool
		writes    int
		spent     float64
		dirty     bool
		perJobSet bool
	}{
		{"free and uncosted", Queue{ID: 1}, 0, false, true, 0, 0, false, false},
		{"free, uncosted, capped", Queue{ID: 1}, 0, true, true, 0, 0, true, true},
		{"free, uncosted, capped, failed", Queue{ID: 1}, 0, true, false, 0, 0, false, false},
		{"priced", Queue{ID: 1}, 10, false, true, 1, 10, false, true},
		{"costed at a free site", Queue{ID: 1, Budget: 1}, 0, false, false, 1, 0, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(nil)
			l.SetPrice("a", c.price)
			if c.capped {
				l.SetPlan(1, map[string]int{"a": 4}, 0)
			}
			l.Start(ref, c.q, dag.Node{Queue: 1}, "a", noEstimate, 1)
			x := &fakeExec{}
			if err := l.Charge(context.Background(), x, ref, c.q, "a", t0, t0.Add(time.Hour), c.ok); err != nil {
				t.Fatal(err)
			}
			if len(x.execs) != c.writes {
				t.Errorf("%d writes, want %d", len(x.execs), c.writes)
			}
			if got := l.spentBy(1); got != c.spent {
				t.Errorf("spent %g, want %g", got, c.spent)
			}
			if l.Dirty() != c.dirty {
				t.Errorf("Dirty = %v, want %v", l.Dirty(), c.dirty)
			}
			e := l.Provision(c.q, Counts{}, nil, 0, noEstimate)
			if _, ok := e.PerJob["a"]; ok != c.perJobSet {
				t.Errorf("measured rate at a: %v, want %v (%v)", ok, c.perJobSet, e.PerJob)
			}
			if err := l.Flush(context.Background(), x); err != nil || l.Dirty() {
				t.Errorf("Flush: %v, still dirty %v", err, l.Dirty())
			}
		})
	}
}

// How many jobs not started a budget cannot pay for, cheapest first.
func TestOverBudget(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget float64
		groups map[econKey]int
		want   int
	}{
		{"all paid", 100, map[econKey]int{{1, 0, 3600}: 10}, 0},
		{"half paid", 50, map[econKey]int{{1, 0, 3600}: 10}, 5},
		{"cheap ones first", 25, map[econKey]int{{1, 0, 3600}: 2, {1, 0, 360}: 5}, 0},
		{"dear ones left", 15, map[econKey]int{{1, 0, 3600}: 2, {1, 0, 360}: 5}, 1},
		{"unknown runtime is free", 0.01, map[econKey]int{{1, 1, 0}: 10}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(nil)
			l.SetPrice("a", 10)
			l.SetPrice("b", 20)
			n, why := l.overBudget(Queue{ID: 1, Budget: c.budget}, c.groups, declared)
			if n != c.want || (n > 0) != (why != "") {
				t.Errorf("overBudget = %d %q, want %d", n, why, c.want)
			}
		})
	}
}

// Why a job cannot end by its deadline, or "" when it may.
func TestWhyInfeasible(t *testing.T) {
	l := New(nil)
	l.KnowSite("fast")
	l.KnowSite("slow")
	l.ranAt(1, "fast").secs, l.ranAt(1, "fast").n = 100, 1
	l.ranAt(1, "slow").secs, l.ranAt(1, "slow").n = 1000, 1
	q := Queue{ID: 1, Deadline: 1}
	for _, c := range []struct {
		wait, left float64
		want       string
	}{
		{0, 0, "deadline has passed"},
		{50, 40, "prerequisites end in 50s"},
		{0, 100, ""},
		{0, 99, "expected to run 100s at best (site fast)"},
		{10, 100, "then it is expected to run 100s"},
	} {
		got := l.whyInfeasible(q, dag.Node{Queue: 1}, c.wait, c.left, noEstimate)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("wait %g, left %g: %q, want %q", c.wait, c.left, got, c.want)
		}
	}
}

// A ready job is parked only while the last check found it infeasible.
func TestPark(t *testing.T) {
	l := New(nil)
	if l.Park(1, readyOf(5)) || l.Parks() {
		t.Error("parked, or may park, with nothing infeasible")
	}
	l.check.infeasible = map[int64]string{5: "late"}
	if !l.Parks() {
		t.Error("may not park with a job infeasible")
	}
	if l.Park(1, readyOf(6)) {
		t.Error("parked a feasible job")
	}
	if !l.Park(1, readyOf(5)) {
		t.Fatal("did not park an infeasible job")
	}
	l.check.infeasible = map[int64]string{}
	back := l.unpark()
	if len(back) != 1 || back[0].Queue != 1 || back[0].Ready.ID != 5 {
		t.Errorf("unpark = %v, want job 5 of queue 1", back)
	}
	if len(l.unpark()) != 0 {
		t.Error("unparked twice")
	}
}

// The module meets the core only through its arguments: it imports the
// standard library, the public API packages and internal leaf packages,
// never the metaqueue core nor another of its modules.
func TestImportsOnlyLeaves(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(path, ".") {
				continue // standard library
			}
			rest, ok := strings.CutPrefix(path, "github.com/mq-hpc/mq/")
			if !ok {
				t.Errorf("%s imports %s: not of this module", name, path)
				continue
			}
			switch {
			case rest == "job", rest == "protocol":
			case strings.HasPrefix(rest, "internal/metaqueue"):
				t.Errorf("%s imports %s: the core or another module", name, path)
			case strings.HasPrefix(rest, "internal/"):
			default:
				t.Errorf("%s imports %s: not a leaf", name, path)
			}
		}
	}
	if _, err := os.Stat("ledger.sql"); err != nil {
		t.Error(err)
	}
}

func readyOf(id int64) policy.Ready { return policy.Ready{ID: id} }

// A site's price is per core-hour: an attempt of several cores reserves,
// is charged and is admitted against the budget for all its cores.
func TestCoresPriced(t *testing.T) {
	q := Queue{ID: 1, Budget: 100, Ceiling: 1800}
	j := dag.Node{Queue: 1, Est: 600}
	for _, c := range []struct {
		cores      int
		reserved   float64 // 10 per core-hour x the 1800 s ceiling x cores
		spent      float64 // an hour at 10 per core-hour x cores
		affordable bool    // a second job of as many cores, with what the first reserves
	}{
		{0, 5, 10, true}, // 0 means 1
		{1, 5, 10, true},
		{4, 20, 40, true},
		{12, 60, 120, false},
	} {
		t.Run(fmt.Sprint(c.cores), func(t *testing.T) {
			l := New(nil)
			l.SetPrice("a", 10)
			ref := protocol.JobRef{ID: 1, Attempt: 1}
			l.Start(ref, q, j, "a", declared, c.cores)
			var info protocol.QueueInfo
			l.Fill(&info, q.ID)
			if math.Abs(info.Reserved-c.reserved) > 1e-9 {
				t.Errorf("reserved %g, want %g", info.Reserved, c.reserved)
			}
			if got := l.Affordable(q, j, "a", clock(t0), declared, c.cores); got != c.affordable {
				t.Errorf("Affordable = %v, want %v", got, c.affordable)
			}
			x := &fakeExec{}
			if err := l.Charge(context.Background(), x, ref, q, "a", t0, t0.Add(time.Hour), true); err != nil {
				t.Fatal(err)
			}
			if got := l.spentBy(1); math.Abs(got-c.spent) > 1e-9 {
				t.Errorf("spent %g, want %g", got, c.spent)
			}
		})
	}
}

// TestCandidatesAlike: sites with no price and no runtime of the queue's
// are alike to the checks, so however many placeholders registered from
// (a placeholder key may name thousands), a job's best estimate and
// cheapest cost look at one of them, the first by name, beside the
// priced sites and those where the queue's jobs ran; the answers are
// those of every site looked at.
func TestCandidatesAlike(t *testing.T) {
	l := New(nil)
	l.SetPrice("dear", 10)
	l.KnowSite("fast")
	l.ranAt(1, "fast").secs, l.ranAt(1, "fast").n = 100, 1
	for i := range 10000 {
		l.KnowSite(fmt.Sprintf("junk-%05d", i))
	}
	calls := 0
	est := func(dag.Node) float64 { calls++; return 50 }
	q := Queue{ID: 1, Deadline: 1, Budget: 1}
	best, at := l.bestEstimate(q, dag.Node{Queue: 1}, est)
	if calls > 3 {
		t.Errorf("the best estimate asked the estimate %d times, want one per priced, measured or first plain site (3 at most)", calls)
	}
	// What every known site says: the least estimate, the first by name
	// among equals.
	wantBest, wantAt := math.Inf(1), ""
	for site := range l.sites {
		if e := l.estimateAt(q, dag.Node{Queue: 1}, site, est); e < wantBest || e == wantBest && site < wantAt {
			wantBest, wantAt = e, site
		}
	}
	if best != wantBest || at != wantAt {
		t.Errorf("best estimate %g at %q, want %g at %q", best, at, wantBest, wantAt)
	}
	if got := l.candidates(1); len(got) != 3 {
		t.Errorf("%d candidates (%v...), want dear, fast and junk-00000", len(got), got[:min(len(got), 4)])
	}
	// A queue whose jobs ran nowhere: the priced one and the first plain.
	if got := l.candidates(2); len(got) != 2 {
		t.Errorf("%d candidates of queue 2 (%v...), want dear and fast", len(got), got[:min(len(got), 4)])
	}
	l.RemoveSite("fast")
	if got := l.candidates(2); len(got) != 2 || !slices.Contains(got, "junk-00000") {
		t.Errorf("%d candidates of queue 2 after fast was removed (%v...), want dear and junk-00000", len(got), got[:min(len(got), 4)])
	}
}
