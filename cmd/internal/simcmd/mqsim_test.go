package simcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/sim"
)

// runMqsim runs mqsim in-process and returns its exit status and output.
// The tests are not parallel: urfave/cli's shared help and version flags
// are written on every run (a data race between concurrent Apps).
func runMqsim(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd}
	code := mqcli.Main(context.Background(), Mqsim(env), append([]string{"mqsim"}, args...))
	return code, out.String(), errOut.String()
}

func TestMqsimJSON(t *testing.T) {
	code, out, errOut := runMqsim(t, "--policy", "fcfs,dc", "--placeholders", "4", "--inflation", "1,100",
		"--network", "wan", "--seeds", "1-2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d lines, want 2 policies x 2 inflations x 2 seeds:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		for _, k := range []string{"policy", "placeholders", "inflation", "network", "seed", "makespan_s", "data_affinity", "mean_response_s", "bytes_moved"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("%q lacks %s", l, k)
			}
		}
		if m["policy"] == "dc" && m["data_affinity"].(float64) != 0.5 {
			t.Fatalf("DC affinity in %s", l)
		}
	}
	var first map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	if first["policy"] != "fcfs" || first["seed"].(float64) != 1 || first["network"] != "wan" || first["inflation"].(float64) != 1 {
		t.Fatalf("first line %s", lines[0])
	}
	// Same command, same bytes: runs are deterministic whatever the scheduling of workers.
	if _, again, _ := runMqsim(t, "--policy", "fcfs,dc", "--placeholders", "4", "--inflation", "1,100",
		"--network", "wan", "--seeds", "1-2", "--json"); again != out {
		t.Fatal("a second identical sweep printed different output")
	}
}

func TestMqsimTablesAndPlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	code, out, errOut := runMqsim(t, "--placeholders", "2,8", "--inflation", "10", "--network", "lan-itu", "--seeds", "1,2", "--plot", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"network lan-itu, files x10, mean (sd) over 2 seeds", "placeholders", "vs_fcfs", "dc", "sjf", "cp"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	// a header, a column line, then a row per placeholder count and policy
	if got := strings.Count(out, "\n"); got != 2+2*len(sim.WorkflowPolicies()) {
		t.Fatalf("%d lines:\n%s", got, out)
	}
	if !strings.Contains(errOut, "index.html") {
		t.Fatalf("stderr %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "makespan-lan-itu-x10.svg")); err != nil {
		t.Fatal(err)
	}
}

func TestMqsimFiles(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.json")
	os.WriteFile(wl, []byte(`{"jobs":[{"name":"a","runtime_s":5,"out":[{"name":"f","bytes":100000}]},{"name":"b","phase":1,"runtime_s":1,"in":["f"]}]}`), 0o644)
	pf := filepath.Join(dir, "slow.json")
	os.WriteFile(pf, []byte(`{"name":"slow","scp_rate_Bps":1000}`), 0o644)
	code, out, errOut := runMqsim(t, "--workload", wl, "--network", pf, "--placeholders", "1", "--inflation", "1", "--seeds", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"network":"slow"`) || !strings.Contains(out, `"data_affinity":1`) {
		t.Fatalf("output %s", out)
	}
}

// TestMqsimStaging: --staging live runs the live CLS's staging model and
// says so; the default is inline.
func TestMqsimStaging(t *testing.T) {
	args := []string{"--policy", "fcfs", "--placeholders", "2", "--inflation", "100", "--network", "wan", "--seeds", "1"}
	runs := map[string]map[string]any{}
	for _, mode := range []string{"", "inline", "live"} {
		a := append(slices.Clone(args), "--json")
		if mode != "" {
			a = append(a, "--staging", mode)
		}
		code, out, errOut := runMqsim(t, a...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", mode, code, errOut)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%q: %v: %s", mode, err, out)
		}
		runs[mode] = m
	}
	if runs[""]["staging"] != "inline" || runs["live"]["staging"] != "live" || !reflect.DeepEqual(runs[""], runs["inline"]) ||
		runs["live"]["bytes_moved"] == runs["inline"]["bytes_moved"] {
		t.Fatalf("runs %v", runs)
	}
	code, out, errOut := runMqsim(t, append(args, "--staging", "live")...)
	if code != 0 || !strings.Contains(out, "network wan, files x100, mean (sd) over 1 seeds, live staging\n") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
}

func TestMqsimBadFlags(t *testing.T) {
	dir := t.TempDir()
	badWL := filepath.Join(dir, "bad.json")
	os.WriteFile(badWL, []byte(`{"jobs":[{"name":"a","in":["nope"]}]}`), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "lifo"}, "unknown policy"},
		{[]string{"--policy", "dc,dc"}, "given twice"},
		{[]string{"--placeholders", "0"}, "placeholder count"},
		{[]string{"--placeholders", "two"}, "placeholder count"},
		{[]string{"--inflation", "-1"}, "positive factor"},
		{[]string{"--inflation", "NaN"}, "positive factor"},
		{[]string{"--inflation", "1,,2"}, "empty item"},
		{[]string{"--network", "moon"}, "unknown network"},
		{[]string{"--network", "wan,wan"}, "given twice"},
		{[]string{"--seeds", "5-1"}, "range"},
		{[]string{"--seeds", "a"}, "seed"},
		{[]string{"--seeds", "1-3,2"}, "given twice"},
		{[]string{"--seeds", "1-1000000"}, "more than"},
		{[]string{"--workload", badWL}, `unknown file "nope"`},
		{[]string{"--workload", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"--staging", "later"}, `--staging: "later" is not a staging mode`},
		{[]string{"--staging", "inline,live"}, "not a staging mode"},
		{[]string{"--ph-cpus", "0"}, "--ph-cpus"},
		{[]string{"--ph-cpus", "-1"}, "--ph-cpus"},
		{[]string{"--ph-cpus", "1.5"}, "--ph-cpus"},
		{[]string{"--ph-cpus", "4", "--ph-mem", "8X"}, "--ph-mem"},
		{[]string{"--ph-cpus", "4", "--ph-mem", "1e30"}, "--ph-mem"},
		{[]string{"--ph-cpus", "4", "--ph-gpus", "two"}, "--ph-gpus"},
		{[]string{"--ph-mem", "8G"}, "--ph-mem: give --ph-cpus too"},
		{[]string{"--mixed", "0"}, "--mixed"},
		{[]string{"--mixed", "5", "--trace", "x.json"}, "give one workload"},
		{[]string{"--trace", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"--starve-after", "-1"}, "--starve-after"},
		{[]string{"--bogus"}, "unknown flag"},
		{[]string{"stray"}, "unexpected argument"},
	}
	for _, tc := range tests {
		code, out, errOut := runMqsim(t, tc.args...)
		if code != mqcli.ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	got, err := parseSeeds("1-3, 7,10-10")
	if err != nil || len(got) != 5 || got[0] != 1 || got[2] != 3 || got[3] != 7 || got[4] != 10 {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := parseSeeds("18446744073709551615"); err != nil || got[0] != 1<<64-1 {
		t.Fatalf("max seed: %v %v", got, err)
	}
}

// TestMqsimResources: placeholder sizes and jobs' requests from every
// source model resources; the tables and JSON then say the core
// utilisation, and a job no placeholder holds ends the run with one line.
func TestMqsimResources(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.json")
	os.WriteFile(trace, []byte(`{"name":"w","schemaVersion":"1.5","workflow":{
 "specification":{"tasks":[
   {"id":"a","name":"a","children":["b","c"],"inputFiles":["in"],"outputFiles":["x"]},
   {"id":"b","name":"b","parents":["a"],"inputFiles":["x"]},
   {"id":"c","name":"c","parents":["a"]}],
  "files":[{"id":"in","sizeInBytes":10},{"id":"x","sizeInBytes":20}]},
 "execution":{"makespanInSeconds":9,"tasks":[
   {"id":"a","runtimeInSeconds":1},{"id":"b","runtimeInSeconds":5,"coreCount":4},{"id":"c","runtimeInSeconds":2,"coreCount":4}]}}}`), 0o644)
	wl := filepath.Join(dir, "wl.json")
	os.WriteFile(wl, []byte(`{"jobs":[{"name":"a","runtime_s":5,"cpus":4,"mem":"8G"},{"name":"b","runtime_s":5,"cpus":4,"gpus":1}]}`), 0o644)
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`{"jobs":[{"name":"a","runtime_s":5},{"name":"huge","runtime_s":5,"cpus":64}]}`), 0o644)
	pf := filepath.Join(dir, "sized.json")
	os.WriteFile(pf, []byte(`{"name":"sized","hosts":[{"cpus":8,"mem":"32G","gpus":1},{"cpus":4}]}`), 0o644)
	common := []string{"--policy", "fcfs,dc", "--placeholders", "2", "--inflation", "1", "--seeds", "1"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"mixed bag", []string{"--mixed", "50", "--ph-cpus", "16", "--network", "lan"}},
		{"trace cores", []string{"--trace", trace, "--ph-cpus", "8", "--network", "wan"}},
		{"workload requests", []string{"--workload", wl, "--ph-cpus", "8", "--ph-mem", "16G", "--ph-gpus", "1", "--network", "lan"}},
		{"platform hosts", []string{"--workload", wl, "--network", pf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runMqsim(t, append(slices.Clone(common), tc.args...)...)
			if code != 0 || !strings.Contains(out, "core_util") {
				t.Fatalf("exit %d, stderr %q; want a table with core_util:\n%s", code, errOut, out)
			}
			code, out, errOut = runMqsim(t, append(slices.Clone(common), append(tc.args, "--json")...)...)
			if code != 0 {
				t.Fatalf("--json: exit %d: %s", code, errOut)
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatal(err)
				}
				if u, ok := m["core_util"].(float64); !ok || u <= 0 || u > 1 {
					t.Fatalf("core_util in %s", l)
				}
			}
		})
	}
	// Without resources, no core_util at all.
	if _, out, _ := runMqsim(t, append(slices.Clone(common), "--network", "lan", "--json")...); strings.Contains(out, "core_util") {
		t.Errorf("core_util without resources modelled:\n%s", out)
	}
	code, out, errOut := runMqsim(t, append(slices.Clone(common), "--workload", big, "--ph-cpus", "16", "--network", "lan")...)
	if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, `1 of 2 jobs never ran: job "huge" needs 64 cores; the largest placeholder or site holds 16`) {
		t.Errorf("a job larger than every placeholder: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestMqsimGolden: without resources modelled, mqsim prints the same bytes
// as before resources per job existed (the files were written by that
// mqsim), inline and live, tables and JSON.
func TestMqsimGolden(t *testing.T) {
	grid := []string{"--policy", "fcfs,sjf,cp,dc", "--placeholders", "2,8,32", "--network", "lan,wan"}
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"live.golden", append(slices.Clone(grid), "--staging", "live", "--seeds", "1", "--inflation", "100")},
		{"inline.golden", append(slices.Clone(grid), "--seeds", "1-2", "--inflation", "1,100")},
		{"live-json.golden", []string{"--json", "--staging", "live", "--policy", "fcfs,dc", "--placeholders", "2,8", "--network", "wan", "--seeds", "1", "--inflation", "100"}},
	} {
		want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runMqsim(t, tc.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.golden, code, errOut)
		}
		if out != string(want) {
			t.Errorf("mqsim %s differs from testdata/%s:\n%s", strings.Join(tc.args, " "), tc.golden, out)
		}
	}
}

// TestMqsimPolicyElsewhere: a policy another mqsim command simulates is
// refused with that command, which takes it: not the other model's
// command, which sent dbc-* and lp back and forth.
func TestMqsimPolicyElsewhere(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "dbc-cost"}, "mqsim econ --strategy cost"},
		{[]string{"grid", "--policy", "dbc-costtime"}, "mqsim econ --strategy costtime"},
		{[]string{"--policy", "lp"}, "mqsim lp --strategy lpsched"},
		{[]string{"grid", "--policy", "lp"}, "mqsim lp --strategy lpsched"},
		{[]string{"--policy", "sa"}, "mqsim grid --policy sa"},
		{[]string{"grid", "--policy", "dc"}, "mqsim --policy dc"},
	} {
		code, _, errOut := runMqsim(t, tc.args...)
		if code != mqcli.ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("mqsim %s: exit %d, %q; want a usage error naming %q", strings.Join(tc.args, " "), code, errOut, tc.want)
			continue
		}
		// The command named takes the policy.
		words := strings.Fields(tc.want)[1:]
		switch words[0] {
		case "econ":
			words = append(words, "--jobs", "5", "--deadline", "600", "--budget", "5000")
		case "lp":
			words = append(words, "--items", "10")
		case "grid":
			words = append(words, "--granularity", "3", "--seeds", "1", "--runs", "1")
		default:
			words = append(words, "--placeholders", "2", "--seeds", "1")
		}
		if code, _, errOut := runMqsim(t, words...); code != 0 {
			t.Errorf("%s: exit %d: %s", tc.want, code, errOut)
		}
	}
}
