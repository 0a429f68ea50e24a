package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// fakeCore is the core as the ledger reads it.
type fakeCore struct {
	sites   map[int64]string
	running []Running
	asked   int // SiteOf calls
}

func (f *fakeCore) SiteOf(ph int64) (string, error) {
	f.asked++
	site, ok := f.sites[ph]
	if !ok {
		return "", errors.New("no such placeholder")
	}
	return site, nil
}

func (f *fakeCore) Running() []Running { return f.running }

// An attempt's end is one call: charged at the site the ledger costed it
// at, else where its placeholder runs; an unknown placeholder is an error
// and charges nothing.
func TestChargeEnd(t *testing.T) {
	ref := protocol.JobRef{ID: 7, Attempt: 1}
	for _, c := range []struct {
		name    string
		q       Queue
		started bool // the ledger saw it start (knows its site)
		ph      int64
		writes  int
		asked   int
		spent   float64
		err     bool
	}{
		{"costed, known site", Queue{ID: 1, Budget: 100}, true, 1, 1, 0, 10, false},
		{"priced, site from the placeholder", Queue{ID: 1}, false, 1, 1, 1, 10, false},
		{"uncosted at a free site", Queue{ID: 1}, false, 2, 0, 1, 0, false},
		{"unknown placeholder", Queue{ID: 1}, false, 9, 0, 1, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(nil)
			l.SetPrice("a", 10)
			core := &fakeCore{sites: map[int64]string{1: "a", 2: "b"}}
			if c.started {
				l.Start(ref, c.q, dag.Node{Queue: 1}, "a", noEstimate, 1)
			}
			x := &fakeExec{}
			err := l.ChargeEnd(context.Background(), x, core, End{Ref: ref, Queue: c.q, Placeholder: c.ph,
				Started: t0, Finished: t0.Add(time.Hour), OK: true})
			if (err != nil) != c.err {
				t.Fatalf("ChargeEnd: %v, want an error: %v", err, c.err)
			}
			if len(x.execs) != c.writes || core.asked != c.asked {
				t.Errorf("%d writes, %d site look-ups; want %d, %d", len(x.execs), core.asked, c.writes, c.asked)
			}
			if got := l.spentBy(1); got != c.spent {
				t.Errorf("spent %g, want %g", got, c.spent)
			}
		})
	}
}

// An attempt's end that stops it charges it (unless it was returned
// unstarted) and releases what it reserved either way.
func TestEnded(t *testing.T) {
	ref := protocol.JobRef{ID: 7, Attempt: 1}
	for _, c := range []struct {
		name     string
		returned bool
		writes   int
		spent    float64
	}{
		{"ran", false, 1, 10},
		{"returned unstarted", true, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(nil)
			l.SetPrice("a", 10)
			q := Queue{ID: 1, Budget: 100}
			l.Start(ref, q, dag.Node{Queue: 1}, "a", noEstimate, 1)
			x := &fakeExec{}
			err := l.Ended(context.Background(), x, &fakeCore{sites: map[int64]string{1: "a"}}, End{Ref: ref, Queue: q, Placeholder: 1,
				Started: t0, Finished: t0.Add(time.Hour), OK: true, Returned: c.returned})
			if err != nil {
				t.Fatal(err)
			}
			if len(x.execs) != c.writes || l.spentBy(1) != c.spent {
				t.Errorf("%d writes, spent %g; want %d, %g", len(x.execs), l.spentBy(1), c.writes, c.spent)
			}
			if l.SiteOf(ref) != "" || l.execAt[1]["a"] != 0 {
				t.Errorf("still held: site %q, %d running at a", l.SiteOf(ref), l.execAt[1]["a"])
			}
		})
	}
}

// A queue capped for the first time counts the attempts of its own that
// run now and are not counted yet; later plans count nothing again.
func TestPlanCountsRunning(t *testing.T) {
	l := New(nil)
	counted := protocol.JobRef{ID: 1, Attempt: 1}
	l.Count(counted, 1, "a")
	core := &fakeCore{sites: map[int64]string{1: "a", 2: "b"}, running: []Running{
		{Ref: counted, Queue: 1, Placeholder: 1},
		{Ref: protocol.JobRef{ID: 2, Attempt: 1}, Queue: 1, Placeholder: 2},
		{Ref: protocol.JobRef{ID: 3, Attempt: 1}, Queue: 1, Placeholder: 2},
		{Ref: protocol.JobRef{ID: 4, Attempt: 1}, Queue: 2, Placeholder: 1},
	}}
	for _, c := range []struct {
		caps  map[string]int
		execA int
		execB int
	}{
		{nil, 1, 0},                            // no caps: nothing counted
		{map[string]int{"a": 1, "b": 1}, 1, 2}, // first caps
		{map[string]int{"a": 2, "b": 2}, 1, 2}, // again: not twice
	} {
		if err := l.Plan(1, c.caps, 3, core); err != nil {
			t.Fatal(err)
		}
		if l.execAt[1]["a"] != c.execA || l.execAt[1]["b"] != c.execB || l.execAt[2]["a"] != 0 {
			t.Errorf("caps %v: runs at a %d, b %d (queue 2 at a %d); want %d, %d, 0",
				c.caps, l.execAt[1]["a"], l.execAt[1]["b"], l.execAt[2]["a"], c.execA, c.execB)
		}
	}
	var info protocol.QueueInfo
	l.Fill(&info, 1)
	if info.Unfinishable != 3 {
		t.Errorf("unfinishable %d, want 3", info.Unfinishable)
	}
}

// A job's earliest running attempt, itself or a copy.
func TestStartedFrom(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	asked := 0
	f := StartedFrom(func() []Running {
		asked++
		return []Running{
			{Ref: protocol.JobRef{ID: 1, Attempt: 1}, Started: at(10)},
			{Ref: protocol.JobRef{ID: 1, Attempt: 2}, Started: at(5)},
			{Ref: protocol.JobRef{ID: 2, Attempt: 1}, Started: at(7)},
			{Ref: protocol.JobRef{ID: 3, Attempt: 1}},
			{Ref: protocol.JobRef{ID: 3, Attempt: 2}, Started: at(3)},
		}
	})
	for _, c := range []struct {
		id   int64
		want time.Time
	}{{1, at(5)}, {2, at(7)}, {3, at(3)}, {4, time.Time{}}} {
		if got := f(c.id); !got.Equal(c.want) {
			t.Errorf("job %d started %v, want %v", c.id, got, c.want)
		}
	}
	if asked != 1 {
		t.Errorf("the running attempts read %d times, want once", asked)
	}
}

// The planners' reads: costed queues for the deadline-and-budget
// planner; queues with jobs not ended, in stage order, for LP
// provisioning.
func TestPlannerQueues(t *testing.T) {
	l := New(nil)
	qs := []QueueCounts{
		{Queue: Queue{ID: 1, Name: "a", Budget: 10}, Counts: Counts{Queued: 2}},
		{Queue: Queue{ID: 2, Name: "b"}, Counts: Counts{Executing: 1}, Declared: 30},
		{Queue: Queue{ID: 3, Name: "c", Deadline: 1}},
	}
	for _, c := range []struct {
		what string
		got  []string
		want []string
	}{
		{"EconQueues", queueNames(l.EconQueues(qs, noEstimate)), []string{"a", "c"}},
		{"StageQueues", queueNames(l.StageQueues(dag.New(), qs, 1, t0, noEstimate)), []string{"a", "b"}},
	} {
		if strings.Join(c.got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if e := l.StageQueues(dag.New(), qs, 1, t0, noEstimate); len(e) == 2 && e[1].Est != 30 {
		t.Errorf("b's estimate %g, want its declared 30", e[1].Est)
	}
}

func queueNames(es []policy.EconQueue) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Queue)
	}
	return out
}
