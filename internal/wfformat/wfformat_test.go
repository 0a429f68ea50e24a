package wfformat

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const spec15 = `{"name":"w","schemaVersion":"1.5","workflow":{
 "specification":{"tasks":[
   {"id":"a","name":"a","parents":[],"children":["b","c"],"inputFiles":["in"],"outputFiles":["x"]},
   {"id":"b","name":"b","parents":["a"],"children":["d"],"inputFiles":["x"],"outputFiles":["y"]},
   {"id":"c","name":"c","children":["d"]},
   {"id":"d","name":"d","parents":["b"]}],
  "files":[{"id":"in","sizeInBytes":10},{"id":"x","sizeInBytes":20},{"id":"y"}]},
 "execution":{"makespanInSeconds":9,"tasks":[
   {"id":"a","runtimeInSeconds":1},{"id":"b","runtimeInSeconds":5,"coreCount":2,"memoryInBytes":3000000},
   {"id":"c","runtimeInSeconds":2},{"id":"d","runtimeInSeconds":1}]}}}`

const spec14 = `{"name":"old","workflow":{"makespan":7,"tasks":[
  {"name":"d","parents":["b","c"],"runtime":1,"files":[]},
  {"name":"a","runtime":1,"files":[{"link":"input","name":"in","size":10},{"link":"output","name":"x","size":20}]},
  {"name":"b","parents":["a"],"runtimeInSeconds":5,"memory":2929.6875,"files":[{"link":"input","name":"x","size":20}]},
  {"name":"c","parents":["a"],"runtime":2}]}}`

func TestRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		cores     int // of b
	}{{"1.5", spec15, 2}, {"1.4", spec14, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Read(strings.NewReader(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			pos := map[string]int{}
			for i, task := range w.Tasks {
				pos[task.ID] = i
			}
			if len(pos) != 4 {
				t.Fatalf("tasks %+v", w.Tasks)
			}
			for _, task := range w.Tasks {
				for _, p := range task.Parents {
					if pos[p] >= pos[task.ID] {
						t.Fatalf("%s before its parent %s: %+v", task.ID, p, w.Tasks)
					}
				}
			}
			// c's parent a comes from a's children (1.5) or its own list.
			if d := w.Tasks[pos["d"]]; len(d.Parents) != 2 {
				t.Fatalf("d's parents %v, want b and c", d.Parents)
			}
			// b's memory: 3,000,000 bytes, or 2929.6875 KiB.
			if b := w.Tasks[pos["b"]]; b.Cores != tc.cores || b.Runtime != 5 || b.Mem != 3000000 {
				t.Fatalf("b %+v", b)
			}
			if a := w.Tasks[pos["a"]]; a.Mem != 0 {
				t.Fatalf("a has no memory in the trace, read %d", a.Mem)
			}
			if w.FileSizes["x"] != 20 || w.FileSizes["in"] != 10 {
				t.Fatalf("file sizes %v", w.FileSizes)
			}
			if got := w.CriticalPath(); got != 7 { // a 1 + b 5 + d 1
				t.Fatalf("critical path %v, want 7", got)
			}
			if got := w.LowerBound(1); got != 1+5*float64(tc.cores)+2+1 {
				t.Fatalf("lower bound on 1 slot %v", got)
			}
			if got := w.LowerBound(100); got != 7 {
				t.Fatalf("lower bound on 100 slots %v", got)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	task := func(id, parents, runtime string) string {
		return `{"name":"` + id + `","parents":[` + parents + `],"runtime":` + runtime + `}`
	}
	doc := func(tasks ...string) string { return `{"workflow":{"tasks":[` + strings.Join(tasks, ",") + `]}}` }
	for _, tc := range []struct{ doc, want string }{
		{`{`, "unexpected end"},
		{`{"workflow":{}}`, "no tasks"},
		{doc(task("a", `"zz"`, "1")), `unknown parent "zz"`},
		{doc(task("a", `"b"`, "1"), task("b", `"a"`, "1")), "cycle"},
		{doc(task("a", `"a"`, "1")), "its own parent"},
		{doc(task("a", ``, "1"), task("a", ``, "1")), "appears twice"},
		{doc(task("a", ``, "-1")), "runtime -1"},
		{doc(task("a", ``, "1e300")), `task "a" has runtime 1e+300 s, want 0..1e+09`},
		{`{"workflow":{"specification":{"tasks":[{"id":"a"}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":2e9}]}}}`, "runtime 2e+09 s"},
		{doc(`{"name":"a"}`), "no runtime"},
		{doc(`{"name":"a","runtime":1,"files":[{"link":"both","name":"f"}]}`), `link "both"`},
		{doc(`{"name":"a","runtime":1,"children":["q"]}`), `unknown child "q"`},
		{`{"workflow":{"specification":{"tasks":[{"id":"a"}]},"execution":{"tasks":[]}}}`, "no runtimeInSeconds"},
		{doc(`{"name":"a","runtime":1,"memory":-1}`), "memory -1024 bytes"},
		{doc(`{"name":"a","runtime":1,"cores":-2}`), `task "a" has -2 cores, want 1..65536`},
		{`{"workflow":{"specification":{"tasks":[{"id":"a"}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":2,"coreCount":1000000000000}]}}}`, `task "a" has 1000000000000 cores, want 1..65536`},
		{`{"workflow":{"specification":{"tasks":[{"id":"a"},{"name":"b"}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":2}]}}}`, "task 2 of workflow.specification.tasks has no id"},
		{`{"workflow":{"specification":{"tasks":[{"id":"a"}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":2,"coreCount":-1}]}}}`, `task "a" has -1 cores`},
		{doc(`{"name":"a","runtime":1,"memory":1e30}`), `task "a" has memory`},
		{`{"workflow":{"specification":{"tasks":[{"id":"a"}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":1,"memoryInBytes":-3}]}}}`, "memory -3 bytes"},
		{`{"workflow":{"specification":{"tasks":[{"id":"a"}],"files":[{"id":"f","sizeInBytes":-5}]},"execution":{"tasks":[{"id":"a","runtimeInSeconds":1}]}}}`, "size -5"},
		// One line in the document's terms, not Go's types.
		{`not json`, "not JSON at byte 2"},
		{`{"workflow":{"tasks":"x"}}`, "workflow.tasks is a JSON string, want an array"},
		{`[1,2]`, "the document is a JSON array, want an object"},
		{`{"workflow":{"specification":{"tasks":[{"id":"a","parents":"b"}]}}}`, "workflow.specification.tasks.parents is a JSON string, want an array"},
		{`{"schemaVersion":"2.0","workflow":{"tasks":[{"name":"a","runtime":1}]}}`, `schemaVersion "2.0" is not supported`},
		{`{"schemaVersion":9,"workflow":{"tasks":[{"name":"a","runtime":1}]}}`, `schemaVersion "9" is not supported`},
	} {
		if _, err := Read(strings.NewReader(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.doc, err, tc.want)
		} else if strings.Contains(err.Error(), "struct") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %q names Go types or spans lines", tc.doc, err)
		}
	}
	// The 1.x versions, as a string or a number, and none, are read.
	for _, v := range []string{`"1.5"`, `"1.3"`, `1.4`, `"1"`, `null`} {
		if _, err := Read(strings.NewReader(`{"schemaVersion":` + v + `,"workflow":{"tasks":[{"name":"a","runtime":1}]}}`)); err != nil {
			t.Errorf("schemaVersion %s: %v", v, err)
		}
	}
}

// traceDir holds the real traces beside the repository (../shared/data);
// a clone without them skips.
func traceDir(t testing.TB) string {
	dir := filepath.Join("..", "..", "..", "shared", "data", "wfinstances")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no WfFormat traces at %s: %v", dir, err)
	}
	return dir
}

// TestRealTraces reads every real trace: each is a DAG whose critical
// path does not exceed the makespan its run measured.
func TestRealTraces(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(traceDir(t), "*.json"))
	if len(files) == 0 {
		t.Skip("no traces")
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Read(fh)
		fh.Close()
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		cp := w.CriticalPath()
		if len(w.Tasks) < 10 || cp <= 0 || w.Work() < cp || w.Makespan > 0 && cp > w.Makespan*1.001 {
			t.Errorf("%s: %d tasks, critical path %.1f s, work %.1f s, measured makespan %.1f s",
				filepath.Base(f), len(w.Tasks), cp, w.Work(), w.Makespan)
		}
	}
}

// TestRealTraceMemory: the BLAST trace's tasks carry their measured
// memory (memoryInBytes in workflow.execution), read byte for byte.
func TestRealTraceMemory(t *testing.T) {
	t.Parallel()
	fh, err := os.Open(filepath.Join(traceDir(t), "blast-chameleon-small-001.json"))
	if err != nil {
		t.Skip(err)
	}
	defer fh.Close()
	w, err := Read(fh)
	if err != nil {
		t.Fatal(err)
	}
	mem := map[string]int64{}
	withMem := 0
	for _, task := range w.Tasks {
		mem[task.ID] = task.Mem
		if task.Mem > 0 {
			withMem++
		}
	}
	// Two tasks as the trace writes them.
	if mem["split_fasta_ID000001"] != 3000000 || mem["blastall_ID000002"] != 484000000 || withMem != len(w.Tasks) {
		t.Errorf("memory of split_fasta %d, blastall_ID000002 %d; %d of %d tasks with memory",
			mem["split_fasta_ID000001"], mem["blastall_ID000002"], withMem, len(w.Tasks))
	}
}

func FuzzRead(f *testing.F) {
	f.Add(spec15)
	f.Add(spec14)
	f.Add(`{"workflow":{"tasks":[{"name":"a","parents":["a"],"runtime":1}]}}`)
	f.Add(`{"schemaVersion":"1.5","workflow":{"specification":{"tasks":[{"id":"тест","children":["b🙂"],"outputFiles":["出力"]},{"id":"b🙂","inputFiles":["出力"]}],"files":[{"id":"出力","sizeInBytes":0}]},"execution":{"tasks":[{"id":"тест","runtimeInSeconds":0},{"id":"b🙂","runtimeInSeconds":1e300,"coreCount":-2}]}}}`)
	f.Add(`{"schemaVersion":2,"workflow":{"tasks":"x"}}`)
	// A real trace, when the shared data is beside the repository.
	if b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "data", "wfinstances", "srasearch-chameleon-10a-001.json")); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, doc string) {
		w, err := Read(strings.NewReader(doc))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, task := range w.Tasks {
			for _, p := range task.Parents {
				if !seen[p] {
					t.Fatalf("%q before its parent %q", task.ID, p)
				}
			}
			seen[task.ID] = true
		}
		if lb := w.LowerBound(8); math.IsNaN(lb) || lb < 0 || w.CriticalPath() > w.Work()*(1+1e-9) && !math.IsInf(w.Work(), 1) {
			t.Fatalf("lower bound %g, critical path %g, work %g", lb, w.CriticalPath(), w.Work())
		}
	})
}

// linkParents merges each task's own parents with the tasks that name it
// as a child, once each, and refuses names of no task.
func TestLinkParents(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parents  [][]string // per task a, b, c
		children map[string][]string
		want     [][]string
		err      string
	}{
		{"own lists", [][]string{nil, {"a"}, {"a", "b"}}, nil, [][]string{nil, {"a"}, {"a", "b"}}, ""},
		{"children lists", [][]string{nil, nil, nil}, map[string][]string{"a": {"b", "c"}, "b": {"c"}}, [][]string{nil, {"a"}, {"a", "b"}}, ""},
		{"both, once each", [][]string{nil, {"a"}, {"b"}}, map[string][]string{"a": {"b"}, "b": {"c", "c"}}, [][]string{nil, {"a"}, {"b"}}, ""},
		{"unknown child", [][]string{nil, nil, nil}, map[string][]string{"a": {"z"}}, nil, `unknown child "z"`},
		{"unknown parent", [][]string{nil, {"z"}, nil}, nil, nil, `unknown parent "z"`},
		{"own parent", [][]string{{"a"}, nil, nil}, nil, nil, "its own parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tasks []Task
			for i, ps := range tc.parents {
				tasks = append(tasks, Task{ID: string(rune('a' + i)), Parents: ps})
			}
			byID, err := indexTasks(tasks)
			if err != nil {
				t.Fatal(err)
			}
			err = linkParents(tasks, byID, tc.children)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, task := range tasks {
				// Children lists come from a map: their order is not kept.
				got, want := slices.Sorted(slices.Values(task.Parents)), slices.Sorted(slices.Values(tc.want[i]))
				if !slices.Equal(got, want) {
					t.Fatalf("task %s: parents %v, want %v", task.ID, task.Parents, tc.want[i])
				}
			}
		})
	}
}
