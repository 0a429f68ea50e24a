package dc

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// jobs is a Jobs over plain maps: bundles and their members going now.
type jobs struct {
	bundle map[int64]int64   // job -> its bundle
	now    map[int64][]int64 // bundle -> members going now (none: held)
	parked []int64           // the other placeholders parked
}

func (j jobs) BundleOf(id int64) (int64, bool) {
	b, ok := j.bundle[id]
	return b, ok
}
func (j jobs) BundleNow(id int64) []int64 { return j.now[j.bundle[id]] }
func (jobs) Estimate() (string, float64)  { return "t", 10 }
func (j jobs) Parked(dst []int64) []int64 { return append(dst, j.parked...) }
func (jobs) Running(dst []int64) []int64  { return dst }

// busy is a Busy over lists.
type busy struct{ parked, running []int64 }

func (b busy) Parked(dst []int64) []int64  { return append(dst, b.parked...) }
func (b busy) Running(dst []int64) []int64 { return append(dst, b.running...) }

// staging is a Catalog where the jobs listed are being brought elsewhere
// and the inputs of the jobs here are present.
type staging struct {
	catalog
	elsewhere []int64
	here      []int64
}

func (c staging) StagingElsewhere(ids []int64, _ Place) bool {
	return slices.ContainsFunc(ids, func(id int64) bool { return slices.Contains(c.elsewhere, id) })
}

func (c staging) InputsPresent(ids []int64, _ Place) bool {
	return !slices.ContainsFunc(ids, func(id int64) bool { return !slices.Contains(c.here, id) })
}

func (c staging) InputsAt(ids []int64, to Place) (bool, error) { return c.InputsPresent(ids, to), nil }

// TestPickFor: a bundle is one candidate (its first ready job), a held
// bundle is dropped from the queue, and with staging a job whose inputs
// are being brought elsewhere is passed over and goes back.
func TestPickFor(t *testing.T) {
	dcPol, err := policy.Lookup("dc")
	if err != nil {
		t.Fatal(err)
	}
	bundled := jobs{bundle: map[int64]int64{1: 1, 2: 1}, now: map[int64][]int64{1: {1, 2}}}
	held := jobs{bundle: map[int64]int64{1: 1, 2: 1}}
	for _, tc := range []struct {
		name    string
		jobs    jobs
		staging bool
		cat     staging
		queue   []int64
		want    int64
		left    []int64
	}{
		{"on their own", jobs{}, false, staging{}, []int64{1, 2, 3}, 1, []int64{2, 3}},
		{"a bundle is one", bundled, false, staging{}, []int64{1, 2, 3}, 1, []int64{2, 3}},
		{"a held bundle is dropped", held, false, staging{}, []int64{1, 3}, 3, nil},
		{"staging elsewhere: passed over", jobs{}, true, staging{elsewhere: []int64{1}, here: []int64{1, 2}}, []int64{1, 2}, 2, []int64{1}},
		{"staging: a bundle's members all here", bundled, true, staging{here: []int64{1, 2, 3}}, []int64{1, 3}, 1, []int64{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			d.Count(1, 0)
			q := policy.NewHeap(dcPol.Order)
			for _, id := range tc.queue {
				d.BecameReady(id, job.Waiting, t0)
				q.Push(policy.Ready{ID: id})
			}
			d.SetPlaceholder(7, "A", "")
			a := Asking{Placeholder: 7, Now: t0.Add(time.Second), Staging: tc.staging}
			got, err := d.PickFor(t.Context(), nil, world{}, q, dcPol, a, tc.jobs, tc.cat)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tc.want {
				t.Fatalf("picked %+v, want %d", got, tc.want)
			}
			var left []int64
			for r, ok := q.Pop(); ok; r, ok = q.Pop() {
				left = append(left, r.ID)
			}
			slices.Sort(left)
			if !slices.Equal(left, tc.left) {
				t.Errorf("left %v, want %v", left, tc.left)
			}
		})
	}
}

// TestNetwork: a copy costs nothing within a place, else a latency per
// file and the bytes at the slower of the two sites' links.
func TestNetwork(t *testing.T) {
	var ls Links
	d := newState()
	d.UseLinks(&ls, map[string]Link{"A": {Latency: 1, Bandwidth: 100}, "B": {Latency: 2, Bandwidth: 50}}, Link{})
	d.Reset(t0) // keeps the links
	a, b := d.At("A", ""), d.At("B", "")
	n := d.Network()
	for _, tc := range []struct {
		name     string
		from, to policy.Site
		bytes    int64
		files    int
		want     float64
	}{
		{"within a place", a, a, 1000, 3, 0},
		{"the slower link", a, b, 1000, 3, 3*2 + 1000/50.},
		{"either way", b, a, 1000, 3, 3*2 + 1000/50.},
	} {
		if got := n.Transfer(tc.from, tc.to, tc.bytes, tc.files); got != tc.want {
			t.Errorf("%s: %g, want %g", tc.name, got, tc.want)
		}
	}
	ls.Measured("A", Link{Latency: 3, Bandwidth: 10})
	if got := d.Link(a); got != (Link{Latency: 3, Bandwidth: 10}) {
		t.Errorf("measured over configured: %+v", got)
	}
	if got := newState().LinkOf(LocalSite); got != DefaultLocalLink {
		t.Errorf("no links told: %+v, want the local default", got)
	}
}

// TestPickForParked: the placeholders parked elsewhere are placed where
// they run; one where a job's data is makes the asking one wait.
func TestPickForParked(t *testing.T) {
	dcPol, err := policy.Lookup("dc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		parked []int64
		want   int64
		waited bool
	}{
		{"none parked: taken here", nil, 1, false},
		{"parked where the data is: waits", []int64{8}, 0, true},
		{"parked elsewhere: taken here", []int64{9}, 1, false},
		{"the asking one parked: taken here", []int64{7, 9}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			d.Count(1, 0)
			d.SetPlaceholder(7, "A", "")
			far := d.SetPlaceholder(8, "B", "")
			d.SetPlaceholder(9, "C", "")
			d.Locate("/far", Loc{At: far, Size: 1e9})
			q := policy.NewHeap(dcPol.Order)
			for _, id := range []int64{1, 3} {
				d.AddJob(id, &Files{In: []File{{"/far", -1, true}}})
				d.BecameReady(id, job.Waiting, t0)
				q.Push(policy.Ready{ID: id})
			}
			a := Asking{Placeholder: 7, Now: t0.Add(time.Second)}
			got, err := d.PickFor(t.Context(), nil, world{}, q, dcPol, a, jobs{parked: tc.parked}, staging{})
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tc.want || got.Waited != tc.waited {
				t.Errorf("picked %+v, want %d, waited %v", got, tc.want, tc.waited)
			}
		})
	}
}

// TestWait: a "wait" stands until a decision may differ or Redecide
// passes; a dispatch it stood through keeps it, any other that was not
// told to wait ends it.
func TestWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		then   func(d *State, w *Wait) time.Time // after the wait at t0; when to ask
		stands bool
	}{
		{"nothing changed", func(*State, *Wait) time.Time { return t0.Add(Redecide / 2) }, true},
		{"a decision may differ", func(d *State, _ *Wait) time.Time { d.Changed(); return t0.Add(Redecide / 2) }, false},
		{"redecide passed", func(*State, *Wait) time.Time { return t0.Add(Redecide) }, false},
		{"stood through a dispatch", func(d *State, w *Wait) time.Time {
			d.Decided(w, false, true, t0)
			return t0.Add(Redecide / 2)
		}, true},
		{"a dispatch decided anew", func(d *State, w *Wait) time.Time {
			d.Decided(w, false, false, t0)
			return t0.Add(Redecide / 2)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			var w Wait
			if d.Stands(&w, t0) {
				t.Fatal("the zero Wait stands")
			}
			d.Decided(&w, true, false, t0)
			if got := d.Stands(&w, tc.then(d, &w)); got != tc.stands {
				t.Errorf("stands %v, want %v", got, tc.stands)
			}
		})
	}
}

// TestPickForLogsStaging: a choice whose inputs are asked for is logged,
// with where they go; one taken at once is not.
func TestPickForLogsStaging(t *testing.T) {
	dcPol, err := policy.Lookup("dc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cat    staging
		logged bool
	}{
		{"inputs here: taken", staging{here: []int64{2}}, false},
		{"inputs not here: staged", staging{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			d.Count(1, 0)
			d.SetNodeLocal("A", false, true)
			at := d.SetPlaceholder(7, "A", "h")
			d.Locate("/in2", Loc{At: at, Size: 1e9})
			d.AddJob(2, &Files{In: []File{{"/in2", -1, true}}})
			d.BecameReady(2, job.Waiting, t0)
			q := policy.NewHeap(dcPol.Order)
			q.Push(policy.Ready{ID: 2})
			var buf bytes.Buffer
			a := Asking{Placeholder: 7, Now: t0.Add(time.Second), Staging: true, Log: slog.New(slog.NewTextHandler(&buf, nil))}
			got, err := d.PickFor(t.Context(), nil, world{}, q, dcPol, a, jobs{}, tc.cat)
			if err != nil {
				t.Fatal(err)
			}
			if got.Staged != tc.logged || got.To != (Place{"A", ""}) {
				t.Fatalf("picked %+v, want staged %v at A", got, tc.logged)
			}
			line := buf.String()
			if logged := strings.Contains(line, "dc: staging") && strings.Contains(line, "job=2") && strings.Contains(line, "to=A"); logged != tc.logged || (!tc.logged && line != "") {
				t.Errorf("logged %q, want a staging line %v", line, tc.logged)
			}
		})
	}
}
