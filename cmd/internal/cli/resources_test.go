package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/protocol"
)

// seenCLS is a canned CLS that records the bodies of submit, bulk.add and
// bulk.commit.
type seenCLS struct {
	mu      sync.Mutex
	submits []protocol.Submit
	adds    []protocol.BulkAdd
	commits int
}

func (s *seenCLS) env(stdout, stderr *bytes.Buffer, wd string) Env {
	seen := func(into func(json.RawMessage)) func(json.RawMessage) {
		return func(b json.RawMessage) {
			s.mu.Lock()
			defer s.mu.Unlock()
			into(b)
		}
	}
	replies := map[string]clitest.Reply{
		protocol.OpSubmit.Name: {Body: protocol.SubmitReply{IDs: []int64{1}}, Seen: seen(func(b json.RawMessage) {
			var v protocol.Submit
			json.Unmarshal(b, &v)
			s.submits = append(s.submits, v)
		})},
		protocol.OpBulkAdd.Name: {Body: protocol.Empty{}, Seen: seen(func(b json.RawMessage) {
			var v protocol.BulkAdd
			json.Unmarshal(b, &v)
			s.adds = append(s.adds, v)
		})},
		protocol.OpBulkCommit.Name: {Body: protocol.SubmitReply{First: 1, Count: 1}, Seen: seen(func(json.RawMessage) { s.commits++ })},
	}
	return Env{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr,
		Getwd: func() (string, error) { return wd, nil }, Dial: clitest.Dial(replies)}
}

func runSeen(t *testing.T, wd string, args ...string) (*seenCLS, string, int) {
	t.Helper()
	s := &seenCLS{}
	var o, e bytes.Buffer
	code := Run(context.Background(), Mqsub(s.env(&o, &e, wd)), append([]string{"mqsub"}, args...))
	return s, e.String(), code
}

// TestMqsubResources: each resource flag, in a plain submit, reaches the
// CLS on the job.
func TestMqsubResources(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want protocol.Resources
	}{
		{[]string{"-c", "4"}, protocol.Resources{CPUs: 4}},
		{[]string{"--cpus", "2"}, protocol.Resources{CPUs: 2}},
		{[]string{"--cpus=auto"}, protocol.Resources{CPUsAuto: true}},
		{[]string{"--cpus-per-task", "8"}, protocol.Resources{CPUs: 8}},
		{[]string{"--mem", "8G"}, protocol.Resources{Mem: 8 << 30}},
		{[]string{"--mem", "500M"}, protocol.Resources{Mem: 500 << 20}},
		{[]string{"--mem", "1000"}, protocol.Resources{Mem: 1000 << 20}},
		{[]string{"--mem", "auto"}, protocol.Resources{MemAuto: true}},
		{[]string{"--gpus", "2"}, protocol.Resources{GPUs: 2}},
		{[]string{"--resource", "licence=1", "--resource", "scratch=50"}, protocol.Resources{Named: map[string]int{"licence": 1, "scratch": 50}}},
		{[]string{"--resource", "a=1,b=2"}, protocol.Resources{Named: map[string]int{"a": 1, "b": 2}}},
		{[]string{"-c", "2", "--mem", "4G", "--gpus", "1", "--resource", "fpga=1"}, protocol.Resources{CPUs: 2, Mem: 4 << 30, GPUs: 1, Named: map[string]int{"fpga": 1}}},
		{nil, protocol.Resources{}},
	} {
		s, stderr, code := runSeen(t, "/tmp", append(c.args, "t", "true")...)
		if code != ExitOK || len(s.submits) != 1 || len(s.submits[0].Jobs) != 1 {
			t.Errorf("%v: exit %d, %s, submits %+v", c.args, code, stderr, s.submits)
			continue
		}
		if got := s.submits[0].Jobs[0].Resources; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: sent %+v, want %+v", c.args, got, c.want)
		}
	}
}

// TestMqsubResourcesArrayFileTrace: an array's members each carry the
// request; with -f the flags are the lines' defaults; --wfformat asks for
// each task's cores.
func TestMqsubResourcesArrayFileTrace(t *testing.T) {
	t.Parallel()
	want := protocol.Resources{CPUs: 4, Mem: 2 << 30}
	s, stderr, code := runSeen(t, "/tmp", "--array", "1-3", "-c", "4", "--mem", "2G", "t", "echo {}")
	if code != ExitOK {
		t.Fatalf("array: exit %d: %s", code, stderr)
	}
	n := 0
	for _, a := range s.adds {
		for _, js := range a.Jobs {
			n++
			if !reflect.DeepEqual(js.Resources, want) {
				t.Errorf("array member %s: %+v", js.Command, js.Resources)
			}
		}
	}
	if n != 3 {
		t.Errorf("array: %d members sent", n)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "jobs")
	os.WriteFile(file, []byte(`{"target":"a","command":"x","cpus":8}`+"\n"), 0o644)
	s, stderr, code = runSeen(t, dir, "-f", file, "-c", "2", "--gpus", "1")
	if code != ExitOK || len(s.adds) != 1 {
		t.Fatalf("-f: exit %d: %s", code, stderr)
	}
	if got := s.adds[0].Defaults; !reflect.DeepEqual(got, protocol.Resources{CPUs: 2, GPUs: 1}) {
		t.Errorf("-f: defaults %+v", got)
	}
	// What the CLS makes of the line with those defaults: its own cores,
	// the flag's GPUs.
	var got protocol.JobSpec
	def := protocol.JobSpec{Cwd: dir, Resources: s.adds[0].Defaults}
	if err := protocol.ReadJobLines(bytes.NewReader(s.adds[0].Data), 1, def, func(_ int, js protocol.JobSpec) error { got = js; return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Resources, protocol.Resources{CPUs: 8, GPUs: 1}) {
		t.Errorf("-f line with defaults: %+v", got.Resources)
	}

	trace := filepath.Join(dir, "trace.json")
	os.WriteFile(trace, []byte(strings.Replace(smallTrace, `{"id": "b", "runtimeInSeconds": 20}`, `{"id": "b", "runtimeInSeconds": 20, "coreCount": 4}`, 1)), 0o644)
	s, stderr, code = runSeen(t, dir, "--wfformat", trace, "--mem", "1G")
	if code != ExitOK || len(s.adds) != 1 {
		t.Fatalf("--wfformat: exit %d: %s", code, stderr)
	}
	cores := map[string]int{}
	def = protocol.JobSpec{Cwd: dir, Resources: s.adds[0].Defaults}
	if err := protocol.ReadJobLines(bytes.NewReader(s.adds[0].Data), 1, def, func(_ int, js protocol.JobSpec) error {
		if js.Mem != 1<<30 {
			t.Errorf("--wfformat job %s: mem %d", js.Target, js.Mem)
		}
		cores[js.Target] = js.CPUs
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cores, map[string]int{"a": 1, "b": 4, "c": 1}) {
		t.Errorf("--wfformat cores %v", cores)
	}
}

// TestMqsubResourceErrors: bad requests and other systems' spellings are
// one line naming what to write, exit 2, and nothing reaches the CLS.
func TestMqsubResourceErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cpus", "0"}, "--cpus: cpus \"0\": must be at least 1"},
		{[]string{"-c", "-1"}, "--cpus: cpus \"-1\": want a positive integer"},
		{[]string{"-c", "1.5"}, "want a positive integer"},
		{[]string{"-c", "99999999"}, "more than 65536"},
		{[]string{"--mem", "8X"}, `--mem: memory "8X": unknown unit "X"`},
		{[]string{"--mem", "1e30"}, `unknown unit "e30"`},
		{[]string{"--mem", "0"}, `--mem 0 is Slurm's "all of the node's memory"; mq asks for a size (--mem 8G)`},
		{[]string{"--mem", "0G"}, "more than zero"},
		{[]string{"--mem", "5000T"}, "more than 1024 TiB"},
		{[]string{"--gpus", "0"}, "at least 1"},
		{[]string{"--gpus", "a100:2"}, "mq asks for a count, --gpus 2"},
		{[]string{"--resource", "9lives=1"}, "is not a name"},
		{[]string{"--resource", "my-lic=1"}, "is not a name"},
		{[]string{"--resource", "lic"}, "want NAME=N"},
		{[]string{"--resource", "lic=0"}, "positive integer"},
		{[]string{"--resource", "mem=4"}, "--mem"},
		{[]string{"--resource", "a=1", "--resource", "a=2"}, "given twice"},

		// Slurm's spellings.
		{[]string{"--ntasks", "4"}, "--ntasks 4 is Slurm's spelling; an mq job is one task: ask for its cores with --cpus 4"},
		{[]string{"-n", "4"}, "--cpus 4"},
		{[]string{"--ntasks-per-node", "8"}, "--cpus 8"},
		{[]string{"--nodes", "2"}, "one node"},
		{[]string{"-N", "2"}, "--cpus N"},
		// qsub's -N and sbatch's -J name the job; PBS Pro's -J is an array.
		{[]string{"-N", "align"}, "-N align is qsub's job name; mq's is the TARGET argument: mqsub align COMMAND"},
		{[]string{"-J", "align"}, "-J align is sbatch's job name; mq's is the TARGET argument"},
		{[]string{"--job-name=align"}, "-J align is sbatch's job name"},
		{[]string{"-J", "1-100"}, "-J 1-100 is PBS Pro's array; mq writes --array 1-100"},
		{[]string{"--mincpus", "3"}, "--cpus 3"},
		{[]string{"--mem-per-cpu", "4G"}, "--mem SIZE, the cores times 4G"},
		{[]string{"--mem-per-gpu", "10G"}, "--mem SIZE"},
		{[]string{"--gres=gpu:2"}, "--gres gpu:2 is Slurm's spelling; mq writes --gpus 2"},
		{[]string{"--gres", "gpu:a100:2,lic:3"}, "mq writes --gpus 2 --resource lic=3"},
		{[]string{"--gpus-per-task", "2"}, "--gpus 2"},
		{[]string{"--gpus-per-node", "v100:4"}, "--gpus 4"},
		{[]string{"--cpus-per-gpu", "4"}, "--cpus N --gpus M"},
		{[]string{"--licenses", "matlab:2"}, "--resource matlab=2"},
		{[]string{"-L", "abaqus"}, "--resource abaqus=1"},
		{[]string{"--tmp", "10G"}, "--resource NAME=N"},
		{[]string{"--exclusive"}, "--cpus N"},
		// qsub's (PBS, Torque, SGE).
		{[]string{"-l", "nodes=1:ppn=4,mem=8gb,walltime=01:00:00"}, "-l nodes=1:ppn=4,mem=8gb,walltime=01:00:00 is qsub's spelling; mq writes --cpus 4 --mem 8G --time 01:00:00"},
		{[]string{"-l", "select=1:ncpus=8:mem=16gb:ngpus=1"}, "--cpus 8 --mem 16G --gpus 1"},
		{[]string{"-l", "h_vmem=2G"}, "--mem SIZE (h_vmem is per slot"},
		{[]string{"-pe", "smp", "4"}, "-pe smp 4 is SGE's spelling; mq writes --cpus 4"},
		// Where and how the job runs, and who hears of it.
		{[]string{"-cwd"}, "-cwd is SGE's spelling; an mq job runs in the directory mqsub runs in already (-d DIR for another)"},
		{[]string{"-wd", "/scratch/x"}, "-wd /scratch/x is SGE's spelling; mq writes -d /scratch/x"},
		{[]string{"-D", "/scratch/x"}, "--chdir /scratch/x is Slurm's spelling; mq writes -d /scratch/x"},
		{[]string{"--chdir=/scratch/x"}, "mq writes -d /scratch/x"},
		{[]string{"-j", "y"}, "-j y is SGE's spelling; without -e, mq writes stderr into -o's file already"},
		{[]string{"-S", "/bin/bash"}, "-S /bin/bash is SGE's spelling; mq runs COMMAND with /bin/sh -c"},
		{[]string{"--partition", "gpu"}, "--partition gpu is Slurm's spelling; an mq job goes to a queue (-q QUEUE); the cluster's partition is its site's: cls site add NAME --partition gpu"},
		{[]string{"--wrap", "echo hi"}, "--wrap echo hi is Slurm's spelling; mq runs COMMAND with /bin/sh -c already: mqsub TARGET 'echo hi'"},
		{[]string{"-sync", "y"}, "-sync y is SGE's spelling; mq writes -b (--block)"},
		{[]string{"--wait"}, "--wait is Slurm's spelling; mq writes -b (--block)"},
		{[]string{"-A", "proj42"}, "--account proj42 is Slurm's spelling; placeholders are charged as their site submits them: cls site add NAME ... --submit-args '-A proj42'"},
		{[]string{"--mail-type=END"}, "mq sends no mail"},
		{[]string{"--mail-user", "me@x.org"}, "mq sends no mail"},
		{[]string{"-m", "bea"}, "-m bea is qsub's spelling; mq sends no mail"},
		{[]string{"-M", "me@x.org"}, "mq sends no mail"},
		{[]string{"-b", "y"}, "-b y is SGE's binary flag; mq runs COMMAND as given, and its -b waits for the job"},

		// Empty values ("$VAR" unset) are left out, not shown as two spaces.
		{[]string{"-l", ""}, "mqsub: -l is qsub's spelling; mq writes --cpus N --mem SIZE --gpus N ("},
		{[]string{"-N", ""}, "mqsub: -N is qsub's job name; mq's is the TARGET argument: mqsub TARGET COMMAND ("},
		{[]string{"--gres", ""}, "mqsub: --gres is Slurm's spelling; mq writes --resource NAME=1 ("},
	} {
		s, stderr, code := runSeen(t, "/tmp", append(c.args, "t", "true")...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "unknown flag") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, stderr, c.want)
		}
		if len(s.submits)+len(s.adds)+s.commits > 0 {
			t.Errorf("%v: reached the CLS", c.args)
		}
	}
	// Flags that do not go with a mode.
	for _, args := range [][]string{
		{"--rerun", "-c", "2", "5"},
		{"--wfformat", "x.json", "--cpus", "2"},
	} {
		if _, stderr, code := runSeen(t, "/tmp", args...); code != ExitUsage || !strings.Contains(stderr, "--cpus does not go with") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

// TestMqsubResourcesNotDropped: the CLS keeps requests and warns of jobs
// no placeholder or site can ever hold (here one placeholder of one
// core, no GPUs), and mqsub passes the warning on; the job is added all
// the same, and waits.
func TestMqsubResourcesNotDropped(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	if _, err := tb.store.Register(context.Background(), protocol.Register{Site: "s", Host: "h", PID: 1, Slots: 1, OutDir: "/o",
		Capacity: &protocol.Capacity{CPUs: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		warn string // "" for none
	}{
		{[]string{"-c", "4", "t", "true"}, "waits: needs 4 cores; the largest placeholder or site holds 1"},
		{[]string{"t", "true"}, ""},
		{[]string{"--array", "1-3", "--gpus", "1", "t", "true"}, "wait: needs 1 GPU; the largest placeholder or site holds 0"},
		{[]string{"-f", "FILE"}, "waits: needs 2 cores; the largest placeholder or site holds 1"},
		{[]string{"-f", "FILE", "--mem", "1G"}, "waits: needs 2 cores; the largest placeholder or site holds 1"},
	} {
		for i, a := range c.args {
			if a == "FILE" {
				c.args[i] = filepath.Join(t.TempDir(), "jobs")
				os.WriteFile(c.args[i], []byte(`{"target":"a","command":"true","cpus":2}
{"target":"b","command":"true","mem":"1G"}
{"target":"c","command":"true"}
`), 0o644)
			}
		}
		var o, e bytes.Buffer
		before := tb.jobs()
		if code := Run(context.Background(), Mqsub(tb.env(&o, &e)), append([]string{"mqsub"}, c.args...)); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, e.String())
		}
		if tb.jobs() == before {
			t.Errorf("%v: no job added", c.args)
		}
		switch {
		case c.warn == "" && e.Len() > 0:
			t.Errorf("%v: stderr %q", c.args, e.String())
		case c.warn != "" && (!strings.Contains(e.String(), "mqsub: warning: ") || !strings.Contains(e.String(), c.warn) || strings.Count(e.String(), "\n") != 1):
			t.Errorf("%v: stderr %q, want the one warning %q", c.args, e.String(), c.warn)
		}
	}
	// A bad request in a file: one line naming the line, nothing added.
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("{\"target\":\"a\",\"command\":\"true\"}\n{\"target\":\"b\",\"command\":\"true\",\"mem\":\"8X\"}\n"), 0o644)
	var o, e bytes.Buffer
	before := tb.jobs()
	code := Run(context.Background(), Mqsub(tb.env(&o, &e)), []string{"mqsub", "-f", bad})
	if code == ExitOK || !strings.Contains(e.String(), `line 2: memory "8X": unknown unit`) || strings.Count(e.String(), "\n") != 1 || tb.jobs() != before {
		t.Errorf("bad file: exit %d, stderr %q, jobs %d -> %d", code, e.String(), before, tb.jobs())
	}
}

// TestMqstatJobResources: mqstat -j shows what a job asked for, and
// nothing for a job that asked for nothing; for a running one, what it
// was granted (an auto size as learned).
func TestMqstatJobResources(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r       protocol.Resources
		granted *protocol.Capacity
		want    string
	}{
		{protocol.Resources{CPUs: 4, Mem: 8 << 30, GPUs: 1, Named: map[string]int{"lic": 2}}, nil, "resources: cpus=4 mem=8 GiB gpus=1 lic=2\n"},
		{protocol.Resources{CPUsAuto: true, MemAuto: true}, nil, "resources: cpus=auto mem=auto\n"},
		{protocol.Resources{MemAuto: true, GPUs: 1}, &protocol.Capacity{CPUs: 1, Mem: 384 << 20, GPUs: 1, GPUIDs: []string{"3"}},
			"resources: mem=auto gpus=1\ngranted:   cpus=1 mem=384 MiB gpus=3\n"},
		{protocol.Resources{}, nil, ""},
	} {
		var b bytes.Buffer
		d := protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, Queue: "q", Target: "t", State: "Q", Command: "x", Resources: c.r}, Granted: c.granted}
		printJob(&b, d)
		if c.want == "" && strings.Contains(b.String(), "resources:") || !strings.Contains(b.String(), c.want) {
			t.Errorf("%+v:\n%s", c.r, b.String())
		}
	}
}

// TestMqstatJobWhyNotRunning: mqstat -j of a queued job no placeholder or
// site can hold says why it is not running (the CLS's JobDetail.Unfit,
// from packing.Why), on a line of its own; a job that fits has none.
func TestMqstatJobWhyNotRunning(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		unfit, want string
	}{
		{"needs 4 GPUs; the largest placeholder or site holds 2", "cannot run: needs 4 GPUs; the largest placeholder or site holds 2\n"},
		{"", ""},
	} {
		var b bytes.Buffer
		d := protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, Queue: "q", Target: "t", State: "Q", Command: "x", Resources: protocol.Resources{GPUs: 4}}, Unfit: c.unfit}
		printJob(&b, d)
		if c.want == "" && strings.Contains(b.String(), "cannot run") || !strings.Contains(b.String(), c.want) {
			t.Errorf("unfit %q:\n%s", c.unfit, b.String())
		}
	}
}

// TestMqalterHabits: qalter's -l and sbatch's request spellings given to
// mqalter are answered as mqsub answers them, with the flags mq writes,
// never "unknown flag", and change nothing.
func TestMqalterHabits(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	if _, err := tb.store.Submit(ctx, []protocol.JobSpec{{Target: "t", Command: "true", Cwd: "/tmp", Hold: true}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-l", "walltime=2:00:00,ncpus=4"}, "mqalter: -l walltime=2:00:00,ncpus=4 is qsub's spelling; mq writes --time 2:00:00 --cpus 4"},
		{[]string{"--mem-per-cpu", "2G"}, "--mem SIZE, the cores times 2G"},
		{[]string{"--gres=gpu:2"}, "mq writes --gpus 2"},
		{[]string{"--tmp", "10G"}, "--resource NAME=N"},
	} {
		var o, e bytes.Buffer
		code := Run(ctx, Mqalter(tb.env(&o, &e)), append(append([]string{"mqalter"}, c.args...), "1"))
		if code != ExitUsage || !strings.Contains(e.String(), c.want) || strings.Count(e.String(), "\n") != 1 || strings.Contains(e.String(), "unknown flag") {
			t.Errorf("mqalter %v 1: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, e.String(), c.want)
		}
	}
	d, err := tb.store.Inspect().Job(ctx, 1)
	if err != nil || d.Est != 0 || d.CPUs != 0 {
		t.Errorf("job 1 after the refusals: %+v, %v; want it unchanged", d, err)
	}
}
