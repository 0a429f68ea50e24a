package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/wfreplay"
	"github.com/mq-hpc/mq/protocol"
)

const smallTrace = `{"name": "small", "workflow": {"specification": {
  "tasks": [
    {"id": "a", "parents": [], "inputFiles": ["raw.txt"], "outputFiles": ["a.out"]},
    {"id": "b", "parents": ["a"], "inputFiles": ["a.out"], "outputFiles": ["b.out"]},
    {"id": "c", "parents": ["a"], "inputFiles": ["a.out", "raw.txt"], "outputFiles": ["c.out"]}
  ],
  "files": [{"id": "raw.txt", "sizeInBytes": 100000}, {"id": "a.out", "sizeInBytes": 5000}, {"id": "b.out", "sizeInBytes": 70}, {"id": "c.out", "sizeInBytes": 0}]},
  "execution": {"tasks": [{"id": "a", "runtimeInSeconds": 10}, {"id": "b", "runtimeInSeconds": 20}, {"id": "c", "runtimeInSeconds": 1}]}}}`

// TestMqsubWfformat: a trace goes in as one job per task in one
// transaction, prerequisites from the DAG (-p for the roots), the trace's
// own inputs made in the current directory at their scaled sizes; bad
// arguments and files are one-line errors that add nothing.
func TestMqsubWfformat(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.json")
	if err := os.WriteFile(trace, []byte(smallTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"workflow": {}}`), 0o644)
	huge := strings.Replace(smallTrace, `{"id": "b.out", "sizeInBytes": 70}`, `{"id": "b.out", "sizeInBytes": 100000000000}`, 1)
	os.WriteFile(filepath.Join(dir, "huge.json"), []byte(huge), 0o644)
	os.WriteFile(filepath.Join(dir, "notjson.json"), []byte("not json\n"), 0o644)
	run := func(wd string, args ...string) (string, string, int) {
		var o, e bytes.Buffer
		env := tb.env(&o, &e)
		env.Getwd = func() (string, error) { return wd, nil }
		code := Run(ctx, Mqsub(env), append([]string{"mqsub"}, args...))
		return o.String(), e.String(), code
	}
	busy := t.TempDir()
	os.WriteFile(filepath.Join(busy, "raw.txt"), []byte("mine"), 0o644)
	for _, tc := range []struct {
		wd   string
		args []string
		code int
		msg  string
	}{
		{dir, []string{"--wfformat", trace, "--time-scale", "0"}, ExitUsage, "--time-scale: 0 is not a scale"},
		{dir, []string{"--wfformat", trace, "--time-scale", "-2"}, ExitUsage, "--time-scale"},
		{dir, []string{"--wfformat", trace, "--time-scale", "NaN"}, ExitUsage, "--time-scale"},
		{dir, []string{"--wfformat", trace, "--time-scale", "x"}, ExitUsage, "time-scale"},
		{dir, []string{"--wfformat", trace, "--size-scale", "1e9"}, ExitUsage, "--size-scale: 1e+09 is not a scale"},
		{dir, []string{"--wfformat", trace, "--size-scale", "Inf"}, ExitUsage, "--size-scale"},
		{dir, []string{"--time-scale", "0.1", "t", "true"}, ExitUsage, "--time-scale goes with --wfformat"},
		{dir, []string{"--target-prefix", "x", "-f", trace}, ExitUsage, "--target-prefix goes with --wfformat"},
		{dir, []string{"--wfformat", trace, "t", "true"}, ExitUsage, "takes no TARGET"},
		{dir, []string{"--wfformat", trace, "--in", "x"}, ExitUsage, "--in does not go with --wfformat"},
		{dir, []string{"--wfformat", trace, "-f", trace}, ExitUsage, "-f does not go with --wfformat"},
		{dir, []string{"--wfformat", trace, "--target-prefix", "a b"}, ExitFailed, "space"},
		{dir, []string{"--wfformat", filepath.Join(dir, "nosuch.json")}, ExitFailed, "cannot read"},
		{dir, []string{"--wfformat", filepath.Join(dir, "bad.json")}, ExitFailed, "is not a WfFormat trace"},
		{dir, []string{"--wfformat", filepath.Join(dir, "notjson.json")}, ExitFailed, "is not a WfFormat trace"},
		{busy, []string{"--wfformat", trace}, ExitFailed, "is there already and is not the replay's input"},
		{dir, []string{"--wfformat", filepath.Join(dir, "huge.json")}, ExitFailed, "its jobs would write 93.1 GiB"},
	} {
		_, e, code := run(tc.wd, tc.args...)
		if code != tc.code || !strings.Contains(e, tc.msg) || strings.Count(e, "\n") != 1 {
			t.Errorf("mqsub %s: exit %d, stderr %q; want exit %d, one line with %q", strings.Join(tc.args, " "), code, e, tc.code, tc.msg)
		}
	}
	if n := tb.jobs(); n != 0 {
		t.Fatalf("the refused submits added %d jobs", n)
	}
	if b, _ := os.ReadFile(filepath.Join(busy, "raw.txt")); string(b) != "mine" {
		t.Fatalf("a file in the way was changed: %q", b)
	}

	work := t.TempDir()
	o, e, code := run(work, "--wfformat", trace, "--time-scale", "0.1", "--size-scale", "0.01", "--target-prefix", "s-", "-p", "gate", "-q", "replay")
	if code != 0 || strings.Count(o, "\n") != 3 {
		t.Fatalf("mqsub --wfformat: exit %d, stdout %q, stderr %q", code, o, e)
	}
	if fi, err := os.Stat(filepath.Join(work, "raw.txt")); err != nil || fi.Size() != 1000 {
		t.Fatalf("the trace's input: %v, %v; want 1000 bytes", fi, err)
	}
	var ids []int64
	for _, f := range strings.Fields(o) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("mqsub printed %q", o)
		}
		ids = append(ids, id)
	}
	want := map[string]struct {
		prereqs, inputs, outputs []string
		est                      float64
		command                  string
	}{
		"s-a": {[]string{"gate"}, []string{"raw.txt"}, []string{"a.out"}, 1, "cat raw.txt > /dev/null && sleep 1.000 && head -c 50 /dev/zero > a.out"},
		"s-b": {[]string{"s-a"}, []string{"a.out"}, []string{"b.out"}, 2, "cat a.out > /dev/null && sleep 2.000 && head -c 1 /dev/zero > b.out"},
		"s-c": {[]string{"s-a"}, []string{"a.out", "raw.txt"}, []string{"c.out"}, 0.1, "cat a.out raw.txt > /dev/null && sleep 0.100 && head -c 0 /dev/zero > c.out"},
	}
	for _, id := range ids {
		d, err := tb.store.Inspect().Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[d.Target]
		if !ok || d.Queue != "replay" || !slices.Equal(d.Prereqs, w.prereqs) || d.Est != w.est || d.Command != w.command || d.Cwd != work {
			t.Errorf("job %d: %+v; want %+v", id, d.JobInfo, w)
		}
		paths := func(fs []protocol.FileInfo) []string {
			var out []string
			for _, f := range fs {
				out = append(out, strings.TrimPrefix(f.Path, work+"/"))
			}
			return out
		}
		if !slices.Equal(paths(d.Inputs), w.inputs) || !slices.Equal(paths(d.Outputs), w.outputs) {
			t.Errorf("job %d (%s) files: in %v out %v; want %v %v", id, d.Target, paths(d.Inputs), paths(d.Outputs), w.inputs, w.outputs)
		}
		delete(want, d.Target)
	}
	if len(want) > 0 {
		t.Fatalf("no jobs for %v", want)
	}
	// Run again in the same directory: the input is there at its size.
	if _, e, code := run(work, "--wfformat", trace, "--time-scale", "0.1", "--size-scale", "0.01", "--target-prefix", "t-"); code != 0 {
		t.Fatalf("a second replay in the same directory: exit %d, %s", code, e)
	}
}

// TestMqsubWfformatMemory: with a real trace (BLAST, every task with its
// memoryInBytes) each job asks for its task's memory rounded up to a MiB
// and at least wfreplay.MinMem; --no-trace-mem leaves it out, so --mem
// gives every task's; --no-trace-mem alone is refused.
func TestMqsubWfformatMemory(t *testing.T) {
	t.Parallel()
	trace, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "shared", "data", "wfinstances", "blast-chameleon-small-001.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(trace); err != nil {
		t.Skipf("no WfFormat trace: %v", err)
	}
	w, err := readTrace(OSEnv(), trace)
	if err != nil {
		t.Fatal(err)
	}
	traced := map[string]int64{}
	for _, task := range w.Tasks {
		traced[task.ID] = max((task.Mem+(1<<20)-1)>>20<<20, wfreplay.MinMem)
	}
	// Two as the trace writes them: 3,000,000 bytes; 484,000,000 bytes.
	if traced["split_fasta_ID000001"] != 16<<20 || traced["blastall_ID000002"] != 462<<20 {
		t.Fatalf("trace read as %d and %d bytes", traced["split_fasta_ID000001"], traced["blastall_ID000002"])
	}
	for _, c := range []struct {
		args []string
		want func(id string) int64
	}{
		{nil, func(id string) int64 { return traced[id] }},
		{[]string{"--mem", "2G"}, func(id string) int64 { return traced[id] }}, // every task has its own
		{[]string{"--no-trace-mem"}, func(string) int64 { return 0 }},
		{[]string{"--no-trace-mem", "--mem", "1G"}, func(string) int64 { return 1 << 30 }},
	} {
		dir := t.TempDir()
		s, stderr, code := runSeen(t, dir, append([]string{"--wfformat", trace, "--size-scale", "0.001"}, c.args...)...)
		if code != ExitOK || len(s.adds) == 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		n := 0
		for _, a := range s.adds {
			def := protocol.JobSpec{Cwd: dir, Resources: a.Defaults}
			if err := protocol.ReadJobLines(bytes.NewReader(a.Data), a.Line, def, func(_ int, js protocol.JobSpec) error {
				n++
				if want := c.want(js.Target); js.Mem != want {
					t.Errorf("%v: job %s asks for %d bytes, want %d", c.args, js.Target, js.Mem, want)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if n != len(w.Tasks) {
			t.Errorf("%v: %d jobs sent, the trace has %d tasks", c.args, n, len(w.Tasks))
		}
	}
	s, stderr, code := runSeen(t, t.TempDir(), "--no-trace-mem", "t", "true")
	if code != ExitUsage || stderr != "mqsub: --no-trace-mem goes with --wfformat (see mqsub --help)\n" || len(s.submits) > 0 {
		t.Errorf("--no-trace-mem without --wfformat: exit %d, %q", code, stderr)
	}
}
