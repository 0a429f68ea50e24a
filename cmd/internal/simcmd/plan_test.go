package simcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
)

const tinyTrace = `{"name":"w","schemaVersion":"1.5","workflow":{
 "specification":{"tasks":[
   {"id":"a","name":"a","parents":[],"children":["b","c"],"inputFiles":["in"],"outputFiles":["x"]},
   {"id":"b","name":"b","parents":["a"],"children":["d"],"inputFiles":["x"],"outputFiles":["y"]},
   {"id":"c","name":"c","parents":["a"],"children":["d"],"inputFiles":["x"]},
   {"id":"d","name":"d","parents":["b","c"],"inputFiles":["y"]}],
  "files":[{"id":"in","sizeInBytes":1000000},{"id":"x","sizeInBytes":20000000},{"id":"y","sizeInBytes":5}]},
 "execution":{"makespanInSeconds":9,"tasks":[
   {"id":"a","runtimeInSeconds":1},{"id":"b","runtimeInSeconds":5},
   {"id":"c","runtimeInSeconds":2},{"id":"d","runtimeInSeconds":1}]}}}`

func TestMqsimPlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(path, []byte(tinyTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMqsim(t, "plan", "--sites", "1,3", "--json", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per site count:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var row planRow
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatal(err)
		}
		for _, k := range newPlanColumns(plan.Planners()) {
			// The critical path a, b, d is 7 s at speed 1; the home site
			// runs at 1 and the others at 0.5..1.5.
			if ms := row.Makespan[k]; !(ms >= 7/1.5) {
				t.Errorf("%s: %s makespan %v", l, k, ms)
			}
		}
		if row.Sites == 1 && row.Moved["heft"] != 0 {
			t.Errorf("one site, yet %d bytes moved", row.Moved["heft"])
		}
	}
	code, out, _ = runMqsim(t, "plan", "--sites", "2", path)
	if code != 0 || !strings.Contains(out, "aeh-etaa") || !strings.Contains(out, "tiny") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
	code, out, errOut = runMqsim(t, "plan", "--platform", "ec2", "--json", "--gen", "montage:25,inspiral:30")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"trace":"montage_25"`) || !strings.Contains(out, `"sites":4`) {
		t.Fatalf("--gen on ec2: exit %d, %s\n%s", code, errOut, out)
	}
	for _, bad := range [][]string{{"plan"}, {"plan", "--sites", "0", path}, {"plan", "--slots", "0", path},
		{"plan", "--gen", "montage"}, {"plan", "--gen", "sipht:30"}, {"plan", "--platform", "gcp", path}} {
		if code, _, errOut := runMqsim(t, bad...); code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("mqsim %v: exit %d, stderr %q; want a one-line usage error, 2", bad, code, errOut)
		}
	}
	// A missing trace is refused before any output, as mqsim --trace's.
	if code, _, errOut := runMqsim(t, "plan", filepath.Join(t.TempDir(), "missing.json")); code != 2 || errOut == "" {
		t.Errorf("a missing trace: exit %d, %q", code, errOut)
	}
}

// failing is a planner that always fails, as LP did on cybershake_100.
type failing struct{}

func (failing) Plan(context.Context, policy.Problem) (policy.Plan, error) {
	return policy.Plan{}, errors.New("simplex: bland: all replacements are negative or cause ill-conditioned")
}

// TestMqsimPlanFallback: a planner that fails does not abort the
// comparison; its column shows HEFT's plan, marked and
// explained under the table (and in --json).
func TestMqsimPlanFallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(path, []byte(tinyTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	var ps []plan.Info
	for _, p := range plan.Planners() {
		if p.Name == "lp" {
			p.New = func(time.Duration) policy.Planner { return failing{} }
		}
		ps = append(ps, p)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getwd: os.Getwd}
		app := mqcli.NewApp("mqsim", "test", env)
		app.Commands = []*cli.Command{planCommandWith(func() []plan.Info { return ps })}
		code := mqcli.Main(context.Background(), app, append([]string{"mqsim", "plan"}, args...))
		return code, out.String(), errOut.String()
	}
	code, out, errOut := run("--sites", "2", path)
	want := "* tiny, 2 sites: lp failed: simplex: bland: all replacements are negative or cause ill-conditioned; heft's plan shown"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "tiny") {
		t.Fatalf("exit %d, stderr %q; stdout lacks %q:\n%s", code, errOut, want, out)
	}
	code, out, errOut = run("--sites", "2", "--json", path)
	var row planRow
	if code != 0 || json.Unmarshal([]byte(out), &row) != nil {
		t.Fatalf("--json: exit %d, %s\n%s", code, errOut, out)
	}
	if row.Makespan["lp"] != row.Makespan["heft"] || row.Moved["lp"] != row.Moved["heft"] || !strings.HasSuffix(row.Fallback["lp"], "heft's plan shown") {
		t.Errorf("--json: lp %v (heft %v), fallback %q", row.Makespan["lp"], row.Makespan["heft"], row.Fallback["lp"])
	}
	// Nothing to stand in: the column says so, the rest is there.
	ps = []plan.Info{{Name: "lp", New: func(time.Duration) policy.Planner { return failing{} }}}
	code, out, errOut = run("--sites", "2", path)
	if code != 0 || !strings.Contains(out, "lp failed: simplex") || !strings.Contains(out, "no planner could stand in") {
		t.Fatalf("no stand-in: exit %d, %s\n%s", code, errOut, out)
	}
}

// Bad platform flags and a bad trace among good ones are one line of
// usage error before any output (the table's header was printed, then
// "plan: bandwidth 0, latency 0.05" with exit 1).
func TestMqsimPlanBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "tiny.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(tinyTrace), 0o644)
	os.WriteFile(bad, []byte(`{"workflow":{"tasks":[{"name":"a","parents":["b"],"runtime":1},{"name":"b","parents":["a"],"runtime":1}]}}`), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bandwidth", "0", good}, "--bandwidth must be"},
		{[]string{"--bandwidth", "-1e6", good}, "--bandwidth must be"},
		{[]string{"--latency", "-1", good}, "--latency must be"},
		{[]string{"--time-limit", "-1s", good}, "--time-limit must be"},
		{[]string{good, bad}, "cycle"},
	} {
		code, out, errOut := runMqsim(t, append([]string{"plan", "--sites", "2"}, tc.args...)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
