package sim

import "testing"

// TestCPBeatsFCFS: twenty 1 s jobs submitted before a chain of five 10 s
// jobs, on 2 placeholders. FCFS runs the short jobs first and then the
// chain alone (about 10 + 50 s plus each job's CLS round trips); CP starts the chain at once, its b-level
// being the largest even with no estimates declared (each job counts 1 s),
// and the short jobs fill the other slot (about 50 s).
func TestCPBeatsFCFS(t *testing.T) {
	t.Parallel()
	doc := `{"jobs":[`
	for i := range 20 {
		doc += `{"name":"s` + itoa(i) + `","runtime_s":1},`
	}
	for i := range 5 {
		if i > 0 {
			doc += `,`
		}
		doc += `{"name":"c` + itoa(i) + `","runtime_s":10`
		if i > 0 {
			doc += `,"after":["c` + itoa(i-1) + `"]`
		}
		doc += `}`
	}
	doc += `]}`
	w := mustWorkload(t, doc)
	run := func(pol string) float64 {
		r, err := Run(w, quiet, Config{Policy: pol, Placeholders: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r.Makespan
	}
	fcfs, cp := run("fcfs"), run("cp")
	if fcfs < 70 || cp > 60 {
		t.Fatalf("makespan fcfs %.2f s, cp %.2f s: want fcfs >= 70 and cp <= 60", fcfs, cp)
	}
	if again := run("cp"); again != cp {
		t.Fatalf("cp not deterministic: %v then %v", cp, again)
	}
}
