package simcmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMqsimGridTable(t *testing.T) {
	code, out, errOut := runMqsim(t, "grid", "--granularity", "75", "--seeds", "1", "--runs", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"over 1 seeds, 2 runs each, load 0.5", "75MiB", "all", "sa", "wqr", "xsufferage", "cpu_waste", "net_waste", "sa_vs_xs"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	// a header, a column line, 3 policies at 75 MiB and over all
	if got := strings.Count(out, "\n"); got != 2+3*2 {
		t.Fatalf("%d lines:\n%s", got, out)
	}
}

func TestMqsimGridJSONAndTrace(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "bag.json")
	os.WriteFile(trace, []byte(`{"name":"bag\u001b[31m","schemaVersion":"1.5","workflow":{"specification":{
		"tasks":[{"id":"a","name":"a","parents":[],"children":[],"inputFiles":["db","x"],"outputFiles":[]},
		         {"id":"b","name":"b","parents":[],"children":[],"inputFiles":["db","y"],"outputFiles":[]}],
		"files":[{"id":"db","sizeInBytes":1000000},{"id":"x","sizeInBytes":10},{"id":"y","sizeInBytes":10}]},
		"execution":{"makespanInSeconds":10,"tasks":[{"id":"a","runtimeInSeconds":5},{"id":"b","runtimeInSeconds":7}]}}}`), 0o644)
	code, out, errOut := runMqsim(t, "grid", "--trace", trace, "--min-tasks", "2", "--seeds", "1-2", "--runs", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 3 policies x 2 seeds:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if m["tasks"].(float64) != 2 || len(m["makespans_s"].([]any)) != 2 {
			t.Fatalf("line %s", l)
		}
	}
	code, out, _ = runMqsim(t, "grid", "--trace", trace, "--min-tasks", "2", "--seeds", "1", "--runs", "1")
	if code != 0 || strings.Contains(out, "\x1b") || !strings.Contains(out, `bag\x1b[31m/0`) {
		t.Fatalf("exit %d, the trace's name not escaped:\n%q", code, out)
	}
}

func TestMqsimGridBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"grid", "--policy", "dc"},
		{"grid", "--policy", "nope"},
		{"grid", "--granularity", "0"},
		{"grid", "--load", "1"},
		{"grid", "--runs", "0"},
		{"grid", "--seeds", "x"},
		{"grid", "extra"},
		{"--policy", "sa"},
	} {
		if code, _, errOut := runMqsim(t, args...); code != 2 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want a one-line usage error", args, code, errOut)
		}
	}
	// A bad trace, or none with a level big enough, is one line on
	// stderr and nothing on stdout (the table's header came first, or an
	// empty table with exit 0).
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	os.WriteFile(small, []byte(`{"workflow":{"tasks":[{"name":"a","runtime":1}]}}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schemaVersion":"2.0"}`), 0o644)
	for _, tc := range []struct{ trace, want string }{
		{"/nonexistent.json", "nonexistent"},
		{small, "no level of the traces has 10 tasks"},
		{bad, `schemaVersion "2.0"`},
	} {
		code, out, errOut := runMqsim(t, "grid", "--trace", tc.trace, "--seeds", "1", "--runs", "1")
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("--trace %s: exit %d, stdout %q, stderr %q; want exit 2, one line with %q", tc.trace, code, out, errOut, tc.want)
		}
	}
}

// Only SA has a policy to be compared with (the seed's table 4.5).
func TestMqsimGridComparison(t *testing.T) {
	code, out, errOut := runMqsim(t, "grid", "--granularity", "75", "--seeds", "1", "--runs", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[2:] {
		f := strings.Fields(line)
		vs := f[len(f)-1]
		if want := f[1] == "sa"; strings.HasSuffix(vs, "%") != want {
			t.Errorf("%s: sa_vs_xs %q", f[1], vs)
		}
	}
}
