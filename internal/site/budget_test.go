package site

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// econStore is a fakeStore with one queue under a deadline and a budget.
type econStore struct {
	*fakeStore
	emu     sync.Mutex
	q       policy.EconQueue
	caps    map[string]int
	unfin   int
	updated []protocol.SiteSpec
	planned int
}

func (s *econStore) EconQueues(context.Context) ([]policy.EconQueue, error) {
	s.emu.Lock()
	defer s.emu.Unlock()
	return []policy.EconQueue{s.q}, nil
}

func (s *econStore) SetEconPlan(_ context.Context, queue string, caps map[string]int, unfinishable int) error {
	s.emu.Lock()
	defer s.emu.Unlock()
	s.caps, s.unfin = maps.Clone(caps), unfinishable
	s.planned++
	return nil
}

func (s *econStore) UpdateSite(_ context.Context, spec protocol.SiteSpec) error {
	s.emu.Lock()
	defer s.emu.Unlock()
	s.updated = append(s.updated, spec)
	return nil
}

func (s *econStore) plan() (map[string]int, int) {
	s.emu.Lock()
	defer s.emu.Unlock()
	return maps.Clone(s.caps), s.unfin
}

// Two sites that follow dbc-cost, one ten times the other's price: by a
// relaxed deadline the cheap one holds every placeholder the work needs
// and the dear one none (and none of the queue's jobs may run there); by
// a deadline the cheap one cannot meet alone the dear one is added and
// the jobs neither can end in time are reported. cls site set lowers the
// dear site's max in place: surplus queued placeholders are cancelled.
func TestManagerDBC(t *testing.T) {
	sites := map[string]*fakeSite{"cheap": {jobs: map[string]batch.State{}}, "dear": {jobs: map[string]batch.State{}}}
	st := &econStore{fakeStore: &fakeStore{ready: 10}}
	st.q = policy.EconQueue{Queue: "q", Ready: 10, Deadline: time.Now().Add(100 * time.Second), Budgeted: true, Budget: 1000, Est: 10}
	m := &Manager{Store: st, Poll: 5 * time.Millisecond,
		Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) { return sites[spec.Name], nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	for _, s := range []protocol.SiteSpec{
		{Name: "cheap", Type: SGE, SSH: "u@h", Max: 4, Price: 1, Provision: "dbc-cost"},
		{Name: "dear", Type: SGE, SSH: "u@h", Max: 4, Price: 10, Provision: "dbc-cost"},
	} {
		if _, err := m.Add(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// 10 jobs of 10 s by 100 s: cheap's 4 slots do them all.
	eventually(t, "4 queued at cheap", func() bool { return sites["cheap"].count(batch.Queued) == 4 })
	time.Sleep(50 * time.Millisecond)
	if n := sites["dear"].count(batch.Queued); n != 0 {
		t.Fatalf("dear got %d placeholders by a relaxed deadline", n)
	}
	if caps, un := st.plan(); !maps.Equal(caps, map[string]int{"cheap": 4, "dear": 0}) || un != 0 {
		t.Fatalf("caps %v, %d unfinishable", caps, un)
	}
	// By 15 s cheap ends 4, dear 4 more; 2 cannot end in time.
	st.emu.Lock()
	st.q.Deadline = time.Now().Add(15 * time.Second)
	st.emu.Unlock()
	eventually(t, "4 queued at dear", func() bool { return sites["dear"].count(batch.Queued) == 4 })
	if caps, un := st.plan(); !maps.Equal(caps, map[string]int{"cheap": 4, "dear": 4}) || un != 2 {
		t.Fatalf("tight: caps %v, %d unfinishable", caps, un)
	}

	two := 2
	info, err := m.Set(ctx, protocol.SiteSet{Name: "dear", Max: &two})
	if err != nil || info.Max != 2 {
		t.Fatalf("Set: %+v, %v", info, err)
	}
	eventually(t, "dear down to 2", func() bool { return sites["dear"].count(batch.Queued) == 2 })
	st.emu.Lock()
	if len(st.updated) != 1 || st.updated[0].Max != 2 || st.updated[0].Price != 10 || st.updated[0].Provision != "dbc-cost" {
		t.Errorf("stored %+v", st.updated)
	}
	st.emu.Unlock()
	bad := "fcfs"
	for _, s := range []protocol.SiteSet{{Name: "nope", Max: &two}, {Name: "dear", Provision: &bad}} {
		if _, err := m.Set(ctx, s); err == nil {
			t.Errorf("Set(%+v) accepted", s)
		}
	}
}

// stageStore is a fakeStore with several planned queues.
type stageStore struct {
	*fakeStore
	emu  sync.Mutex
	qs   []policy.EconQueue
	caps map[string]map[string]int
}

func (s *stageStore) EconQueues(context.Context) ([]policy.EconQueue, error) {
	s.emu.Lock()
	defer s.emu.Unlock()
	return slices.Clone(s.qs), nil
}

func (s *stageStore) SetEconPlan(_ context.Context, queue string, caps map[string]int, _ int) error {
	s.emu.Lock()
	defer s.emu.Unlock()
	s.caps[queue] = maps.Clone(caps)
	return nil
}

func (s *stageStore) plan(queue string) map[string]int {
	s.emu.Lock()
	defer s.emu.Unlock()
	return maps.Clone(s.caps[queue])
}

// startLPSites starts a Manager over st with the fake SGE sites a and b,
// each of 4 placeholders and following lp; it stops with the test.
func startLPSites(t *testing.T, st Store, sites map[string]*fakeSite) (*Manager, context.Context) {
	t.Helper()
	m := &Manager{Store: st, Poll: 5 * time.Millisecond,
		Open: func(spec protocol.SiteSpec, _ func(int)) (Site, error) { return sites[spec.Name], nil }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	for _, s := range []protocol.SiteSpec{
		{Name: "a", Type: SGE, SSH: "u@h", Max: 4, Provision: "lp"},
		{Name: "b", Type: SGE, SSH: "u@h", Max: 4, Provision: "lp"},
	} {
		if _, err := m.Add(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return m, ctx
}

// Two sites that follow lp, two queues as the stages BLAST (10 s a job
// at a, 20 s at b, measured) then Parse (1 s): the site manager holds
// the LP's placeholders (policy.TestLPProvision works them out: all 4 at
// each site) and caps each queue's jobs at each site at its stage's
// slots there, so b's last placeholder is Parse's.
func TestManagerLP(t *testing.T) {
	sites := map[string]*fakeSite{"a": {jobs: map[string]batch.State{}}, "b": {jobs: map[string]batch.State{}}}
	st := &stageStore{fakeStore: &fakeStore{ready: 16}, caps: map[string]map[string]int{}}
	st.qs = []policy.EconQueue{
		{Queue: "blast", Ready: 8, PerJob: map[string]float64{"a": 10, "b": 20}},
		{Queue: "parse", Ready: 8, PerJob: map[string]float64{"a": 1, "b": 1}},
	}
	startLPSites(t, st, sites)
	eventually(t, "4 queued at each site", func() bool {
		return sites["a"].count(batch.Queued) == 4 && sites["b"].count(batch.Queued) == 4
	})
	if b, p := st.plan("blast"), st.plan("parse"); !maps.Equal(b, map[string]int{"a": 4, "b": 3}) || !maps.Equal(p, map[string]int{"a": 0, "b": 1}) {
		t.Errorf("caps blast %v parse %v", b, p)
	}
	// BLAST done, 2 Parse jobs left, measured faster at a: 2 slots at
	// a, none at b, whose queued placeholders go.
	st.emu.Lock()
	st.qs[0].Ready = 0
	st.qs[1].Ready, st.qs[1].PerJob = 2, map[string]float64{"a": 1, "b": 1.5}
	st.emu.Unlock()
	eventually(t, "b drained, 2 at a", func() bool {
		return sites["b"].count(batch.Queued) == 0 && sites["a"].count(batch.Queued) == 2
	})
	if p := st.plan("parse"); !maps.Equal(p, map[string]int{"a": 2, "b": 0}) {
		t.Errorf("parse caps %v", p)
	}
}

// pipeStore is a stageStore that also says how the queues feed each
// other and what the links carry (ledger.Planners.StageQueues): EconQueues
// has none of them (no queue is costed), StageQueues both.
type pipeStore struct {
	*stageStore
	links map[string]float64
}

func (s *pipeStore) EconQueues(context.Context) ([]policy.EconQueue, error) { return nil, nil }

func (s *pipeStore) UpdateSite(context.Context, protocol.SiteSpec) error { return nil }

func (s *pipeStore) StageQueues(_ context.Context, sites []string) ([]policy.EconQueue, map[string]float64, error) {
	s.emu.Lock()
	defer s.emu.Unlock()
	links := map[string]float64{}
	for _, n := range sites {
		links[n] = s.links[n]
	}
	return slices.Clone(s.qs), links, nil
}

// With a store that lists the pipeline's stages (uncosted queues, Parse's
// jobs still waiting) and the links, the site manager plans them with the
// data BLAST sends Parse priced on the links, and shows the plan:
// BLAST runs only at a; over a 1 kB/s link its 1 MB a job cannot reach
// b, so Parse is planned at a too, and cls plan show lists the stages in
// order with a predicted rate.
func TestManagerLPPipeline(t *testing.T) {
	sites := map[string]*fakeSite{"a": {jobs: map[string]batch.State{}}, "b": {jobs: map[string]batch.State{}}}
	st := &pipeStore{stageStore: &stageStore{fakeStore: &fakeStore{ready: 16}, caps: map[string]map[string]int{}},
		links: map[string]float64{"a": 1e3, "b": 1e3}}
	st.qs = []policy.EconQueue{
		{Queue: "blast", Ready: 8, Out: 1e6, FeedsNext: true, PerJob: map[string]float64{"a": 10}},
		{Queue: "parse", Waiting: 8, PerJob: map[string]float64{"a": 20, "b": 1}},
	}
	m, ctx := startLPSites(t, st, sites)
	eventually(t, "a plan for both stages", func() bool { return st.plan("parse") != nil && st.plan("blast") != nil })
	if p := st.plan("parse"); p["b"] != 0 || p["a"] == 0 {
		t.Errorf("parse caps %v: over the slow link it runs at a, beside blast", p)
	}
	shown := m.ProvisionShown()
	if len(shown) != 1 || shown[0].Policy != "lp" || shown[0].Rate <= 0 || len(shown[0].Queues) != 2 ||
		shown[0].Queues[0].Queue != "blast" || shown[0].Queues[1].Waiting != 8 || shown[0].Queues[0].OutBytes != 1e6 {
		t.Fatalf("shown %+v", shown)
	}
	if shown[0].Placeholders["a"] == 0 {
		t.Errorf("placeholders %v", shown[0].Placeholders)
	}
	// Once no site follows a policy, the caps go: they would hold the
	// queues at a and b for good.
	none := ""
	for _, name := range []string{"a", "b"} {
		if _, err := m.Set(ctx, protocol.SiteSet{Name: name, Provision: &none}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "caps lifted", func() bool { return st.plan("blast") == nil && st.plan("parse") == nil })
	if shown := m.ProvisionShown(); len(shown) != 0 {
		t.Errorf("still shown: %+v", shown)
	}
}

// A queue two plans cap: where both cap a site the lower cap holds, a
// site one plan caps keeps that plan's cap, a plan with no caps (nil)
// adds none, and the unfinishable count is the larger.
func TestPlanCapsMerge(t *testing.T) {
	type plan struct {
		caps  map[string]int
		unfin int
	}
	for _, c := range []struct {
		name  string
		plans []plan
		want  map[string]int
		unfin int
	}{
		{"one", []plan{{map[string]int{"a": 2}, 1}}, map[string]int{"a": 2}, 1},
		{"disjoint", []plan{{map[string]int{"c": 4}, 2}, {map[string]int{"a": 3, "b": 1}, 0}}, map[string]int{"a": 3, "b": 1, "c": 4}, 2},
		{"overlap: the lower", []plan{{map[string]int{"a": 2, "c": 4}, 0}, {map[string]int{"a": 3, "b": 1, "c": 0}, 0}}, map[string]int{"a": 2, "b": 1, "c": 0}, 0},
		{"nil caps nothing", []plan{{nil, 0}, {map[string]int{"a": 1}, 0}}, map[string]int{"a": 1}, 0},
		{"only nil", []plan{{nil, 3}}, nil, 3},
		{"empty stays capped", []plan{{map[string]int{}, 0}, {nil, 0}}, map[string]int{}, 0},
	} {
		pc := planCaps{}
		for _, p := range c.plans {
			pc.add("q", p.caps, p.unfin)
		}
		got := pc["q"]
		if (got.caps == nil) != (c.want == nil) || !maps.Equal(got.caps, c.want) || got.unfinishable != c.unfin {
			t.Errorf("%s: caps %v, %d unfinishable; want %v, %d", c.name, got.caps, got.unfinishable, c.want, c.unfin)
		}
	}
}

// bothStore has one costed queue that is also the one stage of a
// pipeline: dbc plans it (EconQueues) and so does lp (StageQueues).
type bothStore struct{ *stageStore }

func (s *bothStore) UpdateSite(context.Context, protocol.SiteSpec) error { return nil }

func (s *bothStore) StageQueues(_ context.Context, sites []string) ([]policy.EconQueue, map[string]float64, error) {
	s.emu.Lock()
	defer s.emu.Unlock()
	links := map[string]float64{}
	for _, n := range sites {
		links[n] = 1e9
	}
	return slices.Clone(s.qs), links, nil
}

// Site c follows dbc-cost, a and b follow lp, and both plans cap the same
// costed queue, each at its own sites: the queue is held at all three
// (each plan's caps, merged), not only by the plan made last; once either
// plan's sites follow no policy, the other's caps stay.
func TestManagerDBCAndLPCapOneQueue(t *testing.T) {
	sites := map[string]*fakeSite{"a": {jobs: map[string]batch.State{}}, "b": {jobs: map[string]batch.State{}}, "c": {jobs: map[string]batch.State{}}}
	st := &bothStore{&stageStore{fakeStore: &fakeStore{ready: 8}, caps: map[string]map[string]int{}}}
	st.qs = []policy.EconQueue{{Queue: "q", Ready: 8, Deadline: time.Now().Add(time.Hour), Budgeted: true, Budget: 1000, Est: 10,
		PerJob: map[string]float64{"a": 10, "b": 10, "c": 10}}}
	m, ctx := startLPSites(t, st, sites)
	if _, err := m.Add(ctx, protocol.SiteSpec{Name: "c", Type: SGE, SSH: "u@h", Max: 4, Price: 1, Provision: "dbc-cost"}); err != nil {
		t.Fatal(err)
	}
	// Each plan's own caps are what cls plan show lists for it.
	own := func(pol string) map[string]int {
		for _, p := range m.ProvisionShown() {
			if p.Policy == pol && len(p.Queues) == 1 {
				return p.Queues[0].Slots
			}
		}
		return nil
	}
	merged := func() map[string]int {
		d, l := own("dbc-cost"), own("lp")
		if d == nil || l == nil {
			return nil
		}
		out := maps.Clone(d)
		maps.Copy(out, l) // disjoint sites
		return out
	}
	eventually(t, "q capped at a, b and c by both plans", func() bool {
		want := merged()
		return want != nil && len(want) == 3 && maps.Equal(st.plan("q"), want)
	})
	none, lp := "", "lp"
	set := func(name string, pol *string) {
		t.Helper()
		if _, err := m.Set(ctx, protocol.SiteSet{Name: name, Provision: pol}); err != nil {
			t.Fatal(err)
		}
	}
	// lp's sites leave it: dbc's cap at c stays, a and b are free.
	set("a", &none)
	set("b", &none)
	eventually(t, "only dbc's caps", func() bool {
		d := own("dbc-cost")
		return own("lp") == nil && d != nil && maps.Equal(st.plan("q"), d)
	})
	// lp back, dbc's site leaves it: lp's caps at a and b stay.
	set("a", &lp)
	set("b", &lp)
	set("c", &none)
	eventually(t, "only lp's caps", func() bool {
		l := own("lp")
		return own("dbc-cost") == nil && len(l) == 2 && maps.Equal(st.plan("q"), l)
	})
}
