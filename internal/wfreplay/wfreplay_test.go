package wfreplay

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/wfformat"
	"github.com/mq-hpc/mq/protocol"
)

// diamond: a reads raw; b and c read a's output (c raw too); d reads
// both; sizes and runtimes at scale 1.
func diamond() *wfformat.Workflow {
	return &wfformat.Workflow{
		FileSizes: map[string]int64{"raw in": 1000, "a.out": 2000, "b.out": 500, "c.out": 300, "final": 100},
		Tasks: []wfformat.Task{
			{ID: "a", Runtime: 10, Inputs: []string{"raw in"}, Outputs: []string{"a.out"}},
			{ID: "b", Runtime: 20, Parents: []string{"a"}, Inputs: []string{"a.out"}, Outputs: []string{"b.out"}},
			// c names no parent: reading a's output makes a one.
			{ID: "c", Runtime: 5, Inputs: []string{"a.out", "raw in"}, Outputs: []string{"c.out"}},
			{ID: "d", Runtime: 1, Parents: []string{"b", "c"}, Inputs: []string{"b.out", "c.out"}, Outputs: []string{"final", "final"}},
		},
	}
}

func size(n int64) *int64 { return &n }

func TestNew(t *testing.T) {
	t.Parallel()
	r, err := New(diamond(), Options{TimeScale: 0.1, SizeScale: 0.01, TargetPrefix: "w-", Files: true, Est: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.JobSpec{
		{Target: "w-a", Est: 1, Command: "cat raw_in > /dev/null && sleep 1.000 && head -c 20 /dev/zero > a.out",
			Inputs: []protocol.File{{Path: "raw_in", Size: size(10)}}, Outputs: []protocol.File{{Path: "a.out", Size: size(20)}}},
		{Target: "w-b", Prereqs: []string{"w-a"}, Est: 2, Command: "cat a.out > /dev/null && sleep 2.000 && head -c 5 /dev/zero > b.out",
			Inputs: []protocol.File{{Path: "a.out", Size: size(20)}}, Outputs: []protocol.File{{Path: "b.out", Size: size(5)}}},
		{Target: "w-c", Prereqs: []string{"w-a"}, Est: 0.5, Command: "cat a.out raw_in > /dev/null && sleep 0.500 && head -c 3 /dev/zero > c.out",
			Inputs: []protocol.File{{Path: "a.out", Size: size(20)}, {Path: "raw_in", Size: size(10)}}, Outputs: []protocol.File{{Path: "c.out", Size: size(3)}}},
		{Target: "w-d", Prereqs: []string{"w-b", "w-c"}, Est: 0.1, Command: "cat b.out c.out > /dev/null && sleep 0.100 && head -c 1 /dev/zero > final",
			Inputs: []protocol.File{{Path: "b.out", Size: size(5)}, {Path: "c.out", Size: size(3)}}, Outputs: []protocol.File{{Path: "final", Size: size(1)}}},
	}
	if !reflect.DeepEqual(r.Jobs, want) {
		t.Fatalf("jobs\n%+v\nwant\n%+v", r.Jobs, want)
	}
	if !reflect.DeepEqual(r.Inputs, []File{{"raw_in", 10}}) || r.InputBytes() != 10 || r.Edges != 4 ||
		!reflect.DeepEqual(r.Roots, []string{"w-a"}) || !reflect.DeepEqual(r.Leaves, []string{"w-d"}) {
		t.Fatalf("replay %+v", r)
	}
	for _, js := range r.Jobs {
		js.Cwd = "/w" // mqsub sends the jobs with its directory
		if err := protocol.ValidateSpec(&js); err != nil {
			t.Fatalf("job %s: %v", js.Target, err)
		}
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, r.Jobs); err != nil || strings.Count(buf.String(), "\n") != 4 {
		t.Fatalf("WriteJSONL: %v\n%s", err, buf.String())
	}

	// Without files, a job only sleeps (at least MinRuntime), in a
	// directory when given.
	r, err = New(diamond(), Options{TimeScale: 0.01, MinRuntime: 0.05})
	if err != nil || r.Jobs[3].Command != "sleep 0.050" || r.Jobs[0].Inputs != nil || r.Jobs[0].Est != 0 {
		t.Fatalf("sleep only: %+v, %v", r.Jobs, err)
	}
	r, err = New(diamond(), Options{TimeScale: 1, SizeScale: 1, Files: true, Dir: "wf"})
	if err != nil || r.Jobs[0].Command != "cat wf/raw_in > /dev/null && sleep 10.000 && mkdir -p wf && head -c 2000 /dev/zero > wf/a.out" {
		t.Fatalf("in a directory: %+v, %v", r.Jobs, err)
	}
}

// TestNewResources: with Cores and Mem each job asks for its task's
// cores and memory, the memory rounded up to a MiB and at least MinMem;
// without them, for nothing.
func TestNewResources(t *testing.T) {
	t.Parallel()
	w := diamond()
	mems := []int64{0, 3000000, 100<<20 + 1, 8 << 30} // none, under MinMem, just over 100 MiB, 8 GiB
	for i := range w.Tasks {
		w.Tasks[i].Cores = i + 1
		w.Tasks[i].Mem = mems[i]
	}
	for _, c := range []struct {
		o     Options
		cores []int
		mem   []int64
	}{
		{Options{TimeScale: 1, Cores: true, Mem: true}, []int{1, 2, 3, 4}, []int64{0, MinMem, 101 << 20, 8 << 30}},
		{Options{TimeScale: 1, Cores: true}, []int{1, 2, 3, 4}, []int64{0, 0, 0, 0}},
		{Options{TimeScale: 1, Mem: true}, []int{0, 0, 0, 0}, []int64{0, MinMem, 101 << 20, 8 << 30}},
		{Options{TimeScale: 1}, []int{0, 0, 0, 0}, []int64{0, 0, 0, 0}},
	} {
		r, err := New(w, c.o)
		if err != nil {
			t.Fatal(err)
		}
		for i, js := range r.Jobs {
			if js.CPUs != c.cores[i] || js.Mem != c.mem[i] {
				t.Errorf("%+v: job %s asks cpus %d mem %d, want %d and %d", c.o, js.Target, js.CPUs, js.Mem, c.cores[i], c.mem[i])
			}
			js.Cwd = "/w"
			if err := protocol.ValidateSpec(&js); err != nil {
				t.Errorf("job %s: %v", js.Target, err)
			}
		}
	}
}

// TestNewNames: file names are made shell-safe and kept distinct.
func TestNewNames(t *testing.T) {
	t.Parallel()
	w := &wfformat.Workflow{FileSizes: map[string]int64{}, Tasks: []wfformat.Task{
		{ID: "x", Outputs: []string{"a b", "a_b", "-rf", ".hidden", "$(boom)"}},
	}}
	r, err := New(w, Options{TimeScale: 1, SizeScale: 1, Files: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range r.Jobs[0].Outputs {
		got = append(got, f.Path)
	}
	if want := []string{"a_b", "a_b.2", "f-rf", "f.hidden", "__boom_"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("paths %q, want %q", got, want)
	}
}

// A task whose scaled runtime no job may run is refused naming the task
// (the CLS refused "line 1" of a bulk the user never wrote).
func TestNewRuntimeTooLong(t *testing.T) {
	t.Parallel()
	w := &wfformat.Workflow{FileSizes: map[string]int64{}, Tasks: []wfformat.Task{
		{ID: "ok", Runtime: 5}, {ID: "forever", Runtime: 1e15, Parents: []string{"ok"}},
	}}
	if _, err := New(w, Options{TimeScale: 0.001, Est: true}); err == nil || !strings.Contains(err.Error(), `task "forever" runs 1e+12 s`) {
		t.Fatalf("err %v, want the task named", err)
	}
	if _, err := New(w, Options{TimeScale: 1e-6, Est: true}); err != nil {
		t.Fatalf("scaled to 1e9 s: %v", err)
	}
}

func TestCheckScale(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v  float64
		ok bool
	}{
		{1, true}, {0.0001, true}, {1e-12, true}, {MaxScale, true},
		{0, false}, {-1, false}, {MaxScale * 1.01, false}, {math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		if err := CheckScale(tc.v); (err == nil) != tc.ok {
			t.Errorf("CheckScale(%v) = %v", tc.v, err)
		} else if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckScale(%v): not one line: %q", tc.v, err)
		}
	}
	for _, o := range []Options{{TimeScale: 0}, {TimeScale: 1, Files: true}, {TimeScale: 1, SizeScale: 1, Files: true, Dir: "/abs"}, {TimeScale: 1, SizeScale: 1, Files: true, Dir: "../up"}, {TimeScale: 1, TargetPrefix: "a b"}} {
		if _, err := New(diamond(), o); err == nil {
			t.Errorf("New with %+v: no error", o)
		}
	}
}

// FuzzNew: any trace wfformat reads and any scales give jobs that
// validate, or an error; never a panic.
func FuzzNew(f *testing.F) {
	f.Add(`{"workflow":{"specification":{"tasks":[{"id":"a","outputFiles":["x"]},{"id":"b","parents":["a"],"inputFiles":["x","y"]}],"files":[{"id":"x","sizeInBytes":10},{"id":"y","sizeInBytes":3}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":1},{"id":"b","runtimeInSeconds":2}]}}}`, 0.5, 0.1, "p-")
	f.Fuzz(func(t *testing.T, doc string, ts, ss float64, prefix string) {
		w, err := wfformat.Read(strings.NewReader(doc))
		if err != nil {
			return
		}
		r, err := New(w, Options{TimeScale: ts, SizeScale: ss, TargetPrefix: prefix, Files: true, Est: true})
		if err != nil {
			return
		}
		for _, js := range r.Jobs {
			js.Cwd = "/w"
			if err := protocol.ValidateSpec(&js); err != nil {
				t.Fatalf("job %+v: %v", js, err)
			}
		}
	})
}

// A trace name becomes a path safe in a shell word, the same one each
// time it is asked for, distinct from another name that cleans up alike,
// and under the directory when one is given.
func TestBuilderPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dir   string
		names []string
		want  []string
	}{
		{"", []string{"a.out", "a.out"}, []string{"a.out", "a.out"}},
		{"", []string{"raw in", "raw_in", "raw?in"}, []string{"raw_in", "raw_in.2", "raw_in.3"}},
		{"", []string{"-x", ".hidden", ""}, []string{"f-x", "f.hidden", "f"}},
		{"data/w1", []string{"raw in", "b"}, []string{"data/w1/raw_in", "data/w1/b"}},
	} {
		b := &builder{o: Options{Dir: tc.dir}, paths: map[string]string{}, taken: map[string]bool{}}
		for i, name := range tc.names {
			if got := b.path(name); got != tc.want[i] {
				t.Errorf("dir %q: path(%q) = %q, want %q", tc.dir, name, got, tc.want[i])
			}
		}
	}
}
