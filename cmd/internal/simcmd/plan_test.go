package simcmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		for _, k := range planWays {
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
	if code, _, errOut := runMqsim(t, "plan", filepath.Join(t.TempDir(), "missing.json")); code != 1 || errOut == "" {
		t.Errorf("a missing trace: exit %d, %q", code, errOut)
	}
}
