package simcmd

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMqsimLP(t *testing.T) {
	code, out, errOut := runMqsim(t, "lp", "--scenario", "1x2x1,inter", "--items", "40", "--plan")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"seed 001", "trivial_time", "lpsched_ph", "1x2x1 lpsched: reader mg1-6:1; adder mg1-6:3; averager mg1-6:1",
		"inter lpsched: reader md:1; decompress md:26;", "inter total: reader md:1; decompress md:47,oh:3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runMqsim(t, "lp", "--scenario", "inter", "--strategy", "lpsched", "--items", "50", "--min-util", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r lpJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// Without W_MIN the plan uses the far site (see TestLPSeedClaims).
	if r.Strategy != "lpsched" || r.Items != 50 || len(r.Alloc["decompress"]) != 2 || r.CrossBytes == 0 || r.PlanRate <= 0 {
		t.Errorf("%+v", r)
	}
	for _, bad := range [][]string{{"lp", "x"}, {"lp", "--scenario", "1x9x1"}, {"lp", "--strategy", "best"},
		{"lp", "--items", "0"}, {"lp", "--items", "5,5"}, {"lp", "--min-util", "1"}, {"lp", "--min-util", "NaN"}} {
		if code, _, errOut := runMqsim(t, bad...); code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("mqsim %v: exit %d, stderr %q; want a one-line usage error, 2", bad, code, errOut)
		}
	}
}
