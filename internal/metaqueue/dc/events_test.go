package dc

import (
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/protocol"
)

// rows is an Execer that keeps the rows it is given.
type rows struct {
	got  [][]any
	fail error
}

func (r *rows) Exec(args ...any) (sql.Result, error) {
	if r.fail != nil {
		return nil, r.fail
	}
	r.got = append(r.got, args)
	return nil, nil
}

func size(n int64) *int64 { return &n }

// TestSubmitted: every declared file is a row, kept in memory; the
// inputs with a size and a time on the user's host are returned for the
// catalog; a job that declares none writes nothing.
func TestSubmitted(t *testing.T) {
	js := &protocol.JobSpec{
		Cwd: "/w",
		Inputs: []protocol.File{
			{Path: "/w/a", Size: size(3), MTime: 7, Rel: true},
			{Path: "/w/b", Rel: true},
			{Path: "/w/c", Size: size(-1), MTime: 7},
		},
		Outputs: []protocol.File{{Path: "/w/o", Size: size(9), MTime: 8, Rel: true}},
	}
	for _, tc := range []struct {
		name   string
		js     *protocol.JobSpec
		rows   int
		onHost []string
		none   bool
	}{
		{"files", js, 4, []string{"/w/a"}, false},
		{"none", &protocol.JobSpec{}, 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			var r rows
			jf, onHost, err := d.Submitted(1, tc.js, &r)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.got) != tc.rows {
				t.Errorf("%d rows, want %d: %v", len(r.got), tc.rows, r.got)
			}
			var paths []string
			for _, f := range onHost {
				paths = append(paths, f.Path)
			}
			if !slices.Equal(paths, tc.onHost) {
				t.Errorf("on the host %v, want %v", paths, tc.onHost)
			}
			if (jf == nil) != tc.none || d.Job(1) != jf {
				t.Errorf("declared %+v, kept %+v", jf, d.Job(1))
			}
		})
	}
	d := newState()
	if _, _, err := d.Submitted(1, js, &rows{fail: errors.New("disk")}); err == nil || d.Job(1) != nil {
		t.Errorf("a failed row: err %v, kept %+v", err, d.Job(1))
	}
	var r rows
	d.Submitted(2, js, &r)
	if want := []any{int64(2), "i", 0, "/w/a", int64(3), true}; !slices.Equal(r.got[0], want) {
		t.Errorf("first row %v, want %v", r.got[0], want)
	}
	if r.got[1][4] != nil {
		t.Errorf("an unknown size is NULL, not %v", r.got[1][4])
	}
}

// catalog is a Catalog where the sites listed share the CLS host's
// filesystem and the paths listed are present, with the sizes given
// (-1 when none is).
type catalog struct {
	present []string
	sizes   map[string]int64
}

func (c catalog) Present(path string, _ Place) bool     { return slices.Contains(c.present, path) }
func (c catalog) InputsPresent([]int64, Place) bool     { return true }
func (c catalog) InputsAt([]int64, Place) (bool, error) { return true, nil }
func (c catalog) StagingElsewhere([]int64, Place) bool  { return false }
func (c catalog) ValidSHA(sha string) bool              { return len(sha) == 3 }

func (c catalog) SizeAt(path string, _ Place) (int64, bool) {
	if !slices.Contains(c.present, path) {
		return 0, false
	}
	if n, ok := c.sizes[path]; ok {
		return n, true
	}
	return -1, true
}

// TestDone: a Done job's runtime is learned, its outputs located at its
// placeholder's place and returned with what it wrote, and its declared
// outputs said moved.
func TestDone(t *testing.T) {
	outs := []File{{"/w/a", 5, true}, {"/w/b", -1, true}}
	for _, tc := range []struct {
		name    string
		files   *Files
		sums    []protocol.FileSum
		cat     catalog
		want    []Output
		wrote   float64
		known   bool
		located []string
	}{
		{"no outputs", nil, nil, catalog{}, nil, 0, false, nil},
		{"declared, not reported", &Files{Out: outs}, nil, catalog{}, []Output{{"/w/a", 5, ""}, {"/w/b", -1, ""}}, 5, true, []string{"/w/a", "/w/b"}},
		{"reported, one well", &Files{Out: outs}, []protocol.FileSum{{Path: "/w/b", Size: 8, SHA256: "abc"}}, catalog{}, []Output{{"/w/b", 8, "abc"}}, 8, true, []string{"/w/b"}},
		{"unknown sizes", &Files{Out: outs[1:]}, nil, catalog{}, []Output{{"/w/b", -1, ""}}, 0, false, []string{"/w/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newState()
			if tc.files != nil {
				d.AddJob(1, tc.files)
			}
			d.SetNodeLocal("S", false, true) // a data root of its own: not shared
			at := d.SetPlaceholder(7, "S", "h")
			e := Ended{ID: 1, Target: "t", Placeholder: 7, Started: t0, Finished: t0.Add(2 * time.Second), Outputs: tc.sums, Reported: len(tc.sums) > 0}
			m, err := d.Done(t.Context(), nil, e, tc.cat)
			if err != nil {
				t.Fatal(err)
			}
			if d.Estimate("t", 0) != 2 {
				t.Errorf("runtime learned %g, want 2", d.Estimate("t", 0))
			}
			if !slices.Equal(m.Outputs, tc.want) || m.Wrote != tc.wrote || m.Known != tc.known {
				t.Errorf("made %+v, want %+v wrote %g (%v)", m, tc.want, tc.wrote, tc.known)
			}
			if tc.files != nil && (m.Place != Place{"S", ""} || !slices.Equal(m.Moved, tc.files.Out)) {
				t.Errorf("made at %+v, moved %v", m.Place, m.Moved)
			}
			for _, p := range tc.located {
				if l, ok := d.Where(p); !ok || l.At != at || l.Job != 1 {
					t.Errorf("%s located %+v %v", p, l, ok)
				}
			}
		})
	}
}

func TestCatalogSize(t *testing.T) {
	for _, tc := range []struct {
		o    Output
		want int64
	}{
		{Output{"/a", 5, "abc"}, 5},
		{Output{"/a", 5, ""}, -1},
	} {
		if got := tc.o.CatalogSize(); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc.o, got, tc.want)
		}
	}
}

// TestForgetSilent: the silent placeholders are forgotten, and it says
// whether a decision may differ.
func TestForgetSilent(t *testing.T) {
	d := newState()
	d.Count(1, 0)
	at := d.At("A", "")
	d.Asked(1, at, t0)
	d.Asked(2, at, t0)
	alive := busy{running: []int64{2}}
	for _, tc := range []struct {
		name string
		now  time.Time
		want bool
	}{
		{"within the lease", t0.Add(30 * time.Second), false},
		{"one silent", t0.Add(90 * time.Second), true},
		{"already forgotten", t0.Add(2 * time.Minute), false},
	} {
		if got := d.ForgetSilent(tc.now, time.Minute, alive); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if d.Asking(1) || !d.Asking(2) {
		t.Error("forgot the wrong placeholder")
	}
}

// TestObserve: requests are fed to the predictor only while a queue
// chooses.
func TestObserve(t *testing.T) {
	d := newState()
	d.SetPlaceholder(1, "A", "")
	if err := d.Observe(t.Context(), nil, 1, t0); err != nil || d.Asking(1) {
		t.Fatalf("no choosing queue: observed (%v)", err)
	}
	d.Count(1, 0)
	if err := d.Observe(t.Context(), nil, 1, t0); err != nil || !d.Asking(1) {
		t.Fatalf("a choosing queue: not observed (%v)", err)
	}
}

func TestCountQueues(t *testing.T) {
	look := func(name string) policy.Info {
		p, err := policy.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		pols     []string
		choosing bool
		learned  bool
	}{
		{nil, false, false},
		{[]string{"fcfs"}, false, false},
		{[]string{"fcfs", "dc"}, true, false},
		{[]string{"sjf"}, false, true},
		{[]string{"sa", "sjf"}, true, true},
	} {
		d := newState()
		d.Expect().Observe("t", 4)
		var pols []policy.Info
		for _, n := range tc.pols {
			pols = append(pols, look(n))
		}
		d.CountQueues(pols)
		if d.Choosing() != tc.choosing || (d.Learned("t", 0) != 0) != tc.learned {
			t.Errorf("%v: choosing %v, learned %g; want %v, %v", tc.pols, d.Choosing(), d.Learned("t", 0), tc.choosing, tc.learned)
		}
	}
}

// TestLocalBytes: with staging, the inputs the catalog has at the
// asking place count, at the replica's size when known; without, those
// last produced at the asking site, at their declared size else the
// produced one.
func TestLocalBytes(t *testing.T) {
	d := newState()
	here := d.SetPlaceholder(1, "S", "h")
	there := d.SetPlaceholder(2, "T", "h2")
	d.AddJob(1, &Files{In: []File{{"/a", 10, true}, {"/b", -1, true}, {"/c", 30, true}}})
	d.Locate("/a", Loc{At: here, Size: 11})
	d.Locate("/b", Loc{At: here, Size: 20})
	d.Locate("/c", Loc{At: there, Size: 30})
	cat := catalog{present: []string{"/a", "/c"}, sizes: map[string]int64{"/c": 33}}
	to := Place{Site: "S", Host: "h"}
	for _, tc := range []struct {
		name    string
		id      int64
		cur     policy.Site
		staging bool
		want    int64
	}{
		{"no files", 9, here, false, 0},
		{"produced here", 1, here, false, 10 + 20},
		{"produced there", 1, there, false, 30},
		{"staged replicas", 1, here, true, 10 + 33},
	} {
		if got := d.LocalBytes(tc.id, tc.cur, to, tc.staging, cat); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}

// TestInputPaths lists a job's declared inputs, none for a job without.
func TestInputPaths(t *testing.T) {
	d := newState()
	d.AddJob(1, &Files{In: []File{{"/a", 1, true}, {"b", -1, false}}, Out: []File{{"/c", 1, true}}})
	d.AddJob(2, &Files{Out: []File{{"/d", 1, true}}})
	for _, tc := range []struct {
		id   int64
		want []string
	}{{1, []string{"/a", "b"}}, {2, nil}, {3, nil}} {
		if got := d.InputPaths(tc.id); !slices.Equal(got, tc.want) {
			t.Errorf("job %d: %q, want %q", tc.id, got, tc.want)
		}
	}
}
