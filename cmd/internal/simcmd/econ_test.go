package simcmd

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMqsimEcon(t *testing.T) {
	code, out, errOut := runMqsim(t, "econ", "--deadline", "100,3100", "--budget", "22000", "--by-resource")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"seed 002", "cost_jobs", "costtime_time", "time_spent", "costtime_on", "R4:200", "R4:100,R8:100"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, "\n"); got != 2+2 {
		t.Fatalf("%d lines:\n%s", got, out)
	}
	code, out, errOut = runMqsim(t, "econ", "--strategy", "costtime", "--deadline", "3100", "--budget", "22000", "--jobs", "20", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r econJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Strategy != "costtime" || r.Completed != 20 || r.PerResource["R4"] != 10 || r.PerResource["R8"] != 10 || r.Spent > 22000 {
		t.Errorf("%+v", r)
	}
	for _, bad := range [][]string{{"econ", "x"}, {"econ", "--strategy", "cheap"}, {"econ", "--deadline", "0"},
		{"econ", "--budget", "-5"}, {"econ", "--budget", "NaN"}, {"econ", "--jobs", "0"}, {"econ", "--deadline", "100,100"}} {
		if code, _, errOut := runMqsim(t, bad...); code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("mqsim %v: exit %d, stderr %q; want a one-line usage error, 2", bad, code, errOut)
		}
	}
}
