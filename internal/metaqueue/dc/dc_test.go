package dc

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newState() *State {
	d := &State{}
	d.Reset(t0)
	return d
}

func TestPlaceOf(t *testing.T) {
	d := newState()
	d.SetNodeLocal("nodes", true, true)
	d.SetNodeLocal("shared", false, true)
	for _, tc := range []struct {
		site, host string
		want       Place
	}{
		{LocalSite, "h1", Place{LocalSite, "h1"}}, // the CLS's own: per host
		{"cluster", "n1", Place{"cluster", ""}},   // a cluster shares its filesystem
		{"shared", "n1", Place{"shared", ""}},     // a data root on a shared filesystem
		{"nodes", "n1", Place{"nodes", "n1"}},     // node-local: per host
		{"", "", Place{}},                         // unknown: a place of its own
	} {
		if got := d.PlaceOf(tc.site, tc.host); got != tc.want {
			t.Errorf("PlaceOf(%q, %q) = %v, want %v", tc.site, tc.host, got, tc.want)
		}
	}
	d.SetNodeLocal("nodes", false, false)
	if got := d.PlaceOf("nodes", "n1"); got != (Place{"nodes", ""}) {
		t.Errorf("a site forgotten is per site again: %v", got)
	}
}

func TestSiteNumbersPlacesOnce(t *testing.T) {
	d := newState()
	a, b := d.At("A", "x"), d.At("B", "")
	if a == b || d.At("A", "y") != a || d.SiteAt(b) != (Place{"B", ""}) {
		t.Fatalf("A %d, B %d, A again %d, SiteAt(B) %v", a, b, d.At("A", "y"), d.SiteAt(b))
	}
}

func TestDeclared(t *testing.T) {
	size := int64(7)
	for _, tc := range []struct {
		name    string
		cwd     string
		out     []protocol.File
		outside bool
	}{
		{"none", "/w", nil, false},
		{"inside", "/w", []protocol.File{{Path: "/w/o", Rel: true}}, false},
		{"absolute", "/w", []protocol.File{{Path: "/w/o"}}, true},
		{"elsewhere", "/w", []protocol.File{{Path: "/x/o", Rel: true}}, true},
		{"the cwd itself", "/w", []protocol.File{{Path: "/w", Rel: true}}, true},
		{"no cwd", "", []protocol.File{{Path: "/w/o", Rel: true}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jf := Declared(&protocol.JobSpec{Cwd: tc.cwd, Inputs: []protocol.File{{Path: "/w/i", Size: &size, Rel: true}}, Outputs: tc.out})
			if jf.OutsideCwd != tc.outside {
				t.Errorf("OutsideCwd %v, want %v", jf.OutsideCwd, tc.outside)
			}
			if !slices.Equal(jf.In, []File{{"/w/i", 7, true}}) || len(jf.Out) != len(tc.out) {
				t.Errorf("in %v, out %v", jf.In, jf.Out)
			}
			for _, f := range jf.Out {
				if f.Size != -1 {
					t.Errorf("an output without a size has size %d, want -1 (unknown)", f.Size)
				}
			}
		})
	}
}

// TestInputs: inputs add up by place, an unknown size costs a file and no
// bytes, an input no job produced weighs nothing, and with staging a
// movable input present here is priced here.
func TestInputs(t *testing.T) {
	d := newState()
	a, b, here := d.At("A", ""), d.At("B", ""), d.At("C", "")
	d.Locate("/a1", Loc{At: a, Size: 100})
	d.Locate("/a2", Loc{At: a, Size: 50})
	d.Locate("/b", Loc{At: b, Size: -1})
	d.Locate("/moved", Loc{At: b, Size: 10})
	d.AddJob(1, &Files{In: []File{{"/a1", -1, true}, {"/a2", 20, true}, {"/b", -1, true}, {"/nowhere", 5, true}}})
	d.AddJob(2, &Files{In: []File{{"/moved", -1, true}, {"/a1", -1, false}}})
	for _, tc := range []struct {
		name string
		ids  []int64
		here Presence
		want []policy.Input
	}{
		{"one job", []int64{1}, nil, []policy.Input{{Site: a, Bytes: 120, Files: 2}, {Site: b, Bytes: 0, Files: 1}}},
		{"two jobs", []int64{1, 2}, nil, []policy.Input{{Site: a, Bytes: 220, Files: 3}, {Site: b, Bytes: 10, Files: 2}}},
		{"no files", []int64{3}, nil, nil},
		{"staged here", []int64{2}, present{"/moved", "/a1"}, []policy.Input{{Site: here, Bytes: 10, Files: 1}, {Site: a, Bytes: 100, Files: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Inputs(nil, tc.ids, here, tc.here); !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// present is a Presence of the paths listed.
type present []string

func (p present) Present(path string) bool { return slices.Contains(p, path) }

func TestOutputs(t *testing.T) {
	valid := func(sha string) bool { return len(sha) == 3 }
	outs := []File{{"/w/rel", 5, true}, {"/abs", 6, false}, {"/w/said", 7, true}}
	for _, tc := range []struct {
		name     string
		reported bool
		shared   bool
		sums     []protocol.FileSum
		want     []Output
	}{
		{"before staging: all at the producer", false, false, nil,
			[]Output{{"/w/rel", 5, ""}, {"/abs", 6, ""}, {"/w/said", 7, ""}}},
		{"staging: only what was said, and site-local ones", true, false,
			[]protocol.FileSum{{Path: "/w/said", Size: 70, SHA256: "abc"}, {Path: "/w/rel", Size: 1, SHA256: "bad sum"}},
			[]Output{{"/abs", 6, ""}, {"/w/said", 70, "abc"}}},
		{"staging on a shared site: all", true, true, nil,
			[]Output{{"/w/rel", 5, ""}, {"/abs", 6, ""}, {"/w/said", 7, ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			d.AddJob(1, &Files{Out: outs})
			got := d.Outputs(1, tc.sums, tc.reported, tc.shared, valid)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// Many declared outputs against a long reported list (an agent's, of
	// any length): looked up by path, not scanned per output; the first
	// of a path given twice counts.
	d := newState()
	var many []File
	var sums []protocol.FileSum
	for i := range 10_000 {
		many = append(many, File{fmt.Sprintf("/w/o%d", i), 1, true})
	}
	for i := range 100_000 {
		sums = append(sums, protocol.FileSum{Path: fmt.Sprintf("/w/x%d", i), Size: 1, SHA256: "abc"})
	}
	sums = append(sums, protocol.FileSum{Path: "/w/o7", Size: 9, SHA256: "abc"}, protocol.FileSum{Path: "/w/o7", Size: 8, SHA256: "abc"})
	d.AddJob(3, &Files{Out: many})
	start := time.Now()
	got := d.Outputs(3, sums, true, false, valid)
	if took := time.Since(start); len(got) != 1 || got[0] != (Output{"/w/o7", 9, "abc"}) || took > 3*time.Second {
		t.Errorf("10,000 declared, 100,002 reported: %+v in %v; want /w/o7 at 9 bytes, in far less than 3 s", got, took)
	}
	if got := d.Outputs(2, nil, false, false, valid); got != nil {
		t.Errorf("a job that declared no outputs: %v", got)
	}
	d.Ran("tgt", time.Time{}, t0)
	if e := d.Estimate("tgt", 0); e != 0 {
		t.Errorf("a job with no start: learned %g", e)
	}
	d.Ran("tgt", t0, t0.Add(3*time.Second))
	if e := d.Estimate("tgt", 0); e != 3 {
		t.Errorf("learned runtime %g, want 3", e)
	}
}

func TestLearnedOnlyWithSJFQueues(t *testing.T) {
	d := newState()
	d.Expect().Observe("t", 4)
	if got := d.Learned("t", 0); got != 0 {
		t.Errorf("no sjf queue: learned %g, want 0", got)
	}
	d.Count(0, 1)
	if got := d.Learned("t", 0); got != 4 {
		t.Errorf("learned %g, want 4", got)
	}
	if got := d.Learned("t", 2); got != 2 {
		t.Errorf("declared %g, want 2", got)
	}
}

func TestQueueTimeAndReady(t *testing.T) {
	d := newState()
	g := d.Gen()
	d.BecameReady(1, job.Waiting, t0)
	d.BecameReady(1, job.Executing, t0.Add(time.Minute)) // requeued: keeps its first time
	if d.Gen() == g {
		t.Error("a job became ready and the decisions' generation did not move")
	}
	if q := d.QueueTime(1, t0.Add(10*time.Second)); q != 10 {
		t.Errorf("queue time %g, want 10", q)
	}
	if q := d.QueueTime(2, t0); q != 0 {
		t.Errorf("a job not seen ready: %g, want 0", q)
	}
	if q := d.QueueTime(2, t0.Add(time.Second)); q != 1 {
		t.Errorf("then seen from its first look: %g, want 1", q)
	}
	d.Ended(1)
	if q := d.QueueTime(1, t0.Add(time.Hour)); q != 0 {
		t.Errorf("an ended job's time is forgotten: %g", q)
	}
}

func TestGenerations(t *testing.T) {
	d := newState()
	d.Changed()
	d.Changed()
	if d.Untold() != 0 || d.Gen() != 2 {
		t.Fatalf("told bumps: gen %d, untold %d", d.Gen(), d.Untold())
	}
	d.Bump()
	d.Gone([]string{"/x"})
	if d.Untold() != 2 || d.Gen() != 4 {
		t.Fatalf("untold bumps: gen %d, untold %d", d.Gen(), d.Untold())
	}
}

// TestSilent: a placeholder silent for longer than a lease is forgotten
// unless alive; arrivals are kept only while a queue chooses.
func TestSilent(t *testing.T) {
	d := newState()
	d.Count(1, 0)
	at := d.At("A", "")
	d.Asked(1, at, t0)
	d.Asked(2, at, t0)
	d.Asked(3, at, t0.Add(time.Minute))
	calls := 0
	alive := func() map[int64]bool { calls++; return map[int64]bool{2: true} }
	if got := d.Silent(t0.Add(90*time.Second), time.Minute, alive); !slices.Equal(got, []int64{1}) || calls != 1 {
		t.Fatalf("silent %v (alive asked %d times), want [1] once", got, calls)
	}
	if !d.Forget(1) || d.Forget(1) || !d.Asking(2) {
		t.Fatal("Forget says whether it knew the placeholder")
	}
	d.Count(0, 0)
	if d.Asking(2) || d.Choosing() {
		t.Fatal("no choosing queue left: arrivals forgotten")
	}
}

func TestLinkValid(t *testing.T) {
	for _, tc := range []struct {
		l    Link
		want bool
	}{
		{DefaultLocalLink, true}, {DefaultSiteLink, true}, {Link{}, false},
		{Link{Latency: 1}, false}, {Link{Latency: -1, Bandwidth: 1}, false},
	} {
		if got := tc.l.Valid(); got != tc.want {
			t.Errorf("%+v valid %v, want %v", tc.l, got, tc.want)
		}
	}
}

func TestArrivals(t *testing.T) {
	d := newState()
	if got := d.Arrivals(); got != "none expected" {
		t.Errorf("no decision yet: %q", got)
	}
	a, h := d.At("A", ""), d.At(LocalSite, "h")
	d.fut = []policy.Arrival{{Site: a, In: 3}, {Site: a, In: 1.25}, {Site: h, In: 0}}
	if got := d.Arrivals(); got != "A in 1.2s; local:h in 0.0s" {
		t.Errorf("got %q", got)
	}
}

// TestQueriesUsed: every query of dc.sql is asked for by name in the
// package, and every name asked for is there (the core's tests run them
// against the schema).
func TestQueriesUsed(t *testing.T) {
	modtest.QueriesUsed(t, "dc.sql", queries.Names(), modtest.Asked)
}

// TestStorePlace: a placeholder's jobs find their files on the CLS host's
// filesystem at a site without a data root of its own, at the site at
// one with a root, and on the placeholder's host where nodes share none.
func TestStorePlace(t *testing.T) {
	d := newState()
	d.SetNodeLocal("rooted", false, true)
	d.SetNodeLocal("nodes", true, true)
	d.SetNodeLocal("gone", false, true)
	d.SetNodeLocal("gone", false, false)
	for i, tc := range []struct {
		site, host string
		want       Place
		shared     bool
	}{
		{LocalSite, "cls", Shared, true},
		{"plain", "n1", Shared, true},
		{"gone", "n1", Shared, true},
		{"rooted", "n1", Place{"rooted", ""}, false},
		{"nodes", "n1", Place{"nodes", "n1"}, false},
	} {
		ph := int64(i + 1)
		d.SetPlaceholder(ph, tc.site, tc.host)
		got, err := d.StorePlace(t.Context(), nil, ph)
		if err != nil || got != tc.want {
			t.Errorf("%s:%s: %+v (%v), want %+v", tc.site, tc.host, got, err, tc.want)
		}
		if d.IsShared(tc.site) != tc.shared {
			t.Errorf("%s: shared %v, want %v", tc.site, !tc.shared, tc.shared)
		}
	}
}

// TestSiteOf: a placeholder's site, whatever its host.
func TestSiteOf(t *testing.T) {
	d := newState()
	d.SetNodeLocal("nodes", true, true)
	for i, tc := range []struct{ site, host string }{{LocalSite, "cls"}, {"nodes", "n1"}, {"plain", "n2"}} {
		ph := int64(i + 1)
		d.SetPlaceholder(ph, tc.site, tc.host)
		if got, err := d.SiteOf(t.Context(), nil, ph); err != nil || got != tc.site {
			t.Errorf("placeholder at %s:%s: site %q (%v)", tc.site, tc.host, got, err)
		}
	}
}

func TestAssigned(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   Files
		in, out []protocol.AssignedFile
	}{
		{"none", Files{}, nil, nil},
		{"both", Files{In: []File{{Path: "a", Size: 3, Rel: true}, {Path: "/b", Size: -1}}, Out: []File{{Path: "c", Size: -1, Rel: true}}},
			[]protocol.AssignedFile{{Path: "a", Size: 3}, {Path: "/b", Size: -1, Local: true}},
			[]protocol.AssignedFile{{Path: "c", Size: -1}}},
		{"outputs only", Files{Out: []File{{Path: "/o", Size: 5}}}, nil, []protocol.AssignedFile{{Path: "/o", Size: 5, Local: true}}},
	} {
		in, out := tc.files.Assigned()
		if !slices.Equal(in, tc.in) || !slices.Equal(out, tc.out) {
			t.Errorf("%s: Assigned = %+v, %+v; want %+v, %+v", tc.name, in, out, tc.in, tc.out)
		}
	}
}

// TestReadyFrom: a job's queue time counts from when its prerequisites
// made it ready; a requeue and a release keep it; a job not seen ready
// before a release counts from then. At load it counts from the stored
// time, no earlier than its queue's switch to choosing and no later than
// now.
func TestReadyFrom(t *testing.T) {
	d := newState()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	d.BecameReady(1, job.Waiting, at(0))
	d.BecameReady(1, job.Executing, at(10)) // requeued
	d.BecameReady(1, job.Held, at(20))      // released
	d.BecameReady(2, job.Held, at(30))      // held before it was ready
	d.BecameReady(3, job.Waiting, at(0))
	d.BecameReady(3, job.Waiting, at(40)) // ready again after its prerequisite's rerun
	d.Switched(4, at(50))
	d.chose[7] = at(-10)
	d.LoadReady(5, 7, at(-20), at(100)) // before the switch
	d.LoadReady(6, 7, at(-5), at(100))
	d.LoadReady(8, 7, at(200), at(100)) // a clock set back
	d.LoadReady(1, 7, at(90), at(100))  // noted already
	for id, want := range map[int64]float64{1: 100, 2: 70, 3: 60, 4: 50, 5: 110, 6: 105, 8: 0} {
		if got := d.QueueTime(id, at(100)); got != want {
			t.Errorf("job %d: queue time %g, want %g", id, got, want)
		}
	}
}
