package sim

import (
	"strings"
	"testing"
)

// TestAfterAny: a workload job's "after_any" orders it after the jobs it
// names, as "after" does (a simulated job never fails, so ended is done):
// with two placeholders, b after-any a still runs after a, not beside it.
func TestAfterAny(t *testing.T) {
	t.Parallel()
	run := func(doc string) (*Workload, float64) {
		t.Helper()
		w := mustWorkload(t, doc)
		r, err := Run(w, quiet, Config{Policy: "fcfs", Placeholders: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return w, r.Makespan
	}
	_, after := run(`{"jobs":[{"name":"a","runtime_s":10},{"name":"b","runtime_s":5,"after":["a"]}]}`)
	_, none := run(`{"jobs":[{"name":"a","runtime_s":10},{"name":"b","runtime_s":5}]}`)
	if after < 15 || none >= 15 {
		t.Fatalf("makespans: b after a %v (want 15 s or more), side by side %v (want under 15 s)", after, none)
	}
	for _, doc := range []string{
		`{"jobs":[{"name":"a","runtime_s":10},{"name":"b","runtime_s":5,"after_any":["a"]}]}`,
		`{"jobs":[{"name":"a","runtime_s":10},{"name":"b","runtime_s":5,"after":["a"],"after_any":["a"]}]}`,
	} {
		w, got := run(doc)
		if len(w.Jobs[1].deps) != 1 || w.Jobs[1].deps[0] != 0 {
			t.Errorf("%s: b's dependencies %v, want [0]", doc, w.Jobs[1].deps)
		}
		if !near(got, after) {
			t.Errorf("%s: makespan %v, want %v as with \"after\"", doc, got, after)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"jobs":[{"name":"a","after_any":["z"]}]}`, "unknown job"},
		{`{"jobs":[{"name":"a","after_any":["b"]},{"name":"b","after":["a"]}]}`, "cycle"},
		{`{"jobs":[{"name":"a","after_any":["b"]},{"name":"b","phase":1}]}`, "later phase"},
	} {
		if _, err := ReadWorkload(strings.NewReader(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.doc, err, tc.want)
		}
	}
}
