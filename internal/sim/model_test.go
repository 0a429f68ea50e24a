package sim

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func mustWorkload(t *testing.T, doc string) *Workload {
	t.Helper()
	w, err := ReadWorkload(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// quiet is table 6.2's LAN as printed (20,000 B/s) with no other user, so
// hosts start at time 0 and the timings below can be worked by hand: one
// way 0.155 s, CLS busy 0.35 s.
var quiet = func() Platform { p := LANPrinted; p.Name = "quiet"; p.OtherJob = 0; return p }()

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRunByHand(t *testing.T) {
	t.Parallel()
	const L, S = 0.155, 0.35
	tests := []struct {
		name     string
		doc      string
		phs      int
		policy   string
		makespan float64
		affinity float64
		response float64
		moved    int64
	}{
		{"one job, no data", `{"jobs":[{"name":"a","runtime_s":10}]}`, 1, "fcfs",
			// ask (L), served (S), reply (L), run 10, report reaches the CLS (L)
			L + S + L + 10 + L, 1, L + S + L + 10, 0},
		{"input from outside", `{"files":[{"name":"in","bytes":20000}],"jobs":[{"name":"a","runtime_s":10,"in":["in"]}]}`, 1, "dc",
			// scp: 0.58 s + 20,000 B at 20,000 B/s
			L + S + L + 1.58 + 10 + L, 0, L + S + L + 1.58 + 10, 20000},
		{"second placeholder waits for the CLS", `{"jobs":[{"name":"a","runtime_s":10},{"name":"b","runtime_s":10}]}`, 2, "sjf",
			// both ask at L; the second is served S later; its report is the last
			L + S + S + L + 10 + L, 1, ((L + S + L + 10) + (L + 2*S + L + 10)) / 2, 0},
		{"phase barrier: b is submitted when a is recorded done", `{"jobs":[{"name":"a","runtime_s":10},{"name":"b","phase":1,"runtime_s":5}]}`, 1, "fcfs",
			// a is recorded at t1 = L+S+L+10+L; the placeholder was
			// reinserted at t1+S+L (reply) and asks again at +L
			(L + S + L + 10 + L) + S + L + L + S + L + 5 + L, 1,
			((L + S + L + 10) + (S + L + L + S + L + 5)) / 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Run(mustWorkload(t, tc.doc), quiet, Config{Policy: tc.policy, Placeholders: tc.phs, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Makespan, tc.makespan) || !near(r.DataAffinity, tc.affinity) || !near(r.MeanResponse, tc.response) || r.BytesMoved != tc.moved {
				t.Fatalf("got makespan %v affinity %v response %v moved %d; want %v %v %v %d",
					r.Makespan, r.DataAffinity, r.MeanResponse, r.BytesMoved, tc.makespan, tc.affinity, tc.response, tc.moved)
			}
		})
	}
}

// TestDCKeepsDataLocal: a producer runs on one of two hosts; DC sends the
// consumer there and FCFS does not care. With 2 placeholders and a 1 MB
// intermediate file, DC never moves it. (Producers read nothing, so they
// count as placed with their data: full affinity is 1 here.)
func TestDCKeepsDataLocal(t *testing.T) {
	t.Parallel()
	doc := `{"jobs":[`
	for i := range 20 {
		if i > 0 {
			doc += ","
		}
		doc += `{"name":"p` + itoa(i) + `","runtime_s":` + itoa(1+i*7%5) + `,"out":[{"name":"f` + itoa(i) + `","bytes":1000000}]},` +
			`{"name":"c` + itoa(i) + `","phase":1,"runtime_s":1,"in":["f` + itoa(i) + `"]}`
	}
	doc += `]}`
	w := mustWorkload(t, doc)
	dc, err := Run(w, WAN, Config{Policy: "dc", Placeholders: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if dc.DataAffinity != 1 || dc.BytesMoved != 0 {
		t.Fatalf("dc: affinity %v moved %d, want 1 and 0", dc.DataAffinity, dc.BytesMoved)
	}
	fcfs, err := Run(w, WAN, Config{Policy: "fcfs", Placeholders: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if fcfs.BytesMoved == 0 || fcfs.DataAffinity == 1 || fcfs.Makespan <= dc.Makespan {
		t.Fatalf("fcfs moved %d in %v s, dc %v s", fcfs.BytesMoved, fcfs.Makespan, dc.Makespan)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRunDeterministic(t *testing.T) {
	t.Parallel()
	w := PA(7, 300, 16)
	for _, pol := range []string{"fcfs", "sjf", "dc"} {
		a, err := Run(w, WAN, Config{Policy: pol, Placeholders: 8, Inflation: 10, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Run(PA(7, 300, 16), WAN, Config{Policy: pol, Placeholders: 8, Inflation: 10, Seed: 7})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two runs differ:\n%+v\n%+v", pol, a, b)
		}
		c, _ := Run(w, WAN, Config{Policy: pol, Placeholders: 8, Inflation: 10, Seed: 8})
		if reflect.DeepEqual(a, c) {
			t.Fatalf("%s: seed does not matter", pol)
		}
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	w := PA(1, 10, 4)
	bad := WAN
	bad.SCPRate = 0
	tests := []struct {
		name string
		p    Platform
		cfg  Config
		want string
	}{
		{"policy", WAN, Config{Policy: "lifo", Placeholders: 2}, "unknown policy"},
		{"placeholders", WAN, Config{Policy: "dc"}, "placeholders"},
		{"inflation", WAN, Config{Policy: "dc", Placeholders: 2, Inflation: -1}, "inflation"},
		{"platform", bad, Config{Policy: "dc", Placeholders: 2}, "scp_rate_Bps"},
		{"time limit", WAN, Config{Policy: "dc", Placeholders: 2, MaxTime: 40}, "virtual seconds"},
		{"job past the time limit", WAN, Config{Policy: "dc", Placeholders: 2, MaxTime: 10}, "past the simulated horizon of 10 s"},
	}
	for _, tc := range tests {
		if _, err := Run(w, tc.p, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	hosted := mustWorkload(t, `{"files":[{"name":"x","bytes":1,"host":5}],"jobs":[{"name":"a","in":["x"]}]}`)
	if _, err := Run(hosted, WAN, Config{Policy: "fcfs", Placeholders: 2}); err == nil || !strings.Contains(err.Error(), "host 5") {
		t.Errorf("file on a missing host: %v", err)
	}
	if r, err := Run(hosted, WAN, Config{Policy: "dc", Placeholders: 6}); err != nil || r.DataAffinity != 1 && r.DataAffinity != 0 {
		t.Errorf("file on host 5 of 6: %+v %v", r, err)
	}
}

func TestPA(t *testing.T) {
	t.Parallel()
	w := PA(1, 1000, 16)
	if len(w.Jobs) != 126 {
		t.Fatalf("%d jobs, want 63 BLAST + 63 parsing bundles", len(w.Jobs))
	}
	tasks := 0
	for _, j := range w.Jobs {
		tasks += j.Tasks
	}
	if tasks != 2000 || w.Jobs[62].Tasks != 8 || w.Jobs[125].Tasks != 8 {
		t.Fatalf("tasks %d, last bundles %d and %d", tasks, w.Jobs[62].Tasks, w.Jobs[125].Tasks)
	}
	for i := 0; i < 1000; i++ {
		seq, hom := w.Files[2*i], w.Files[2*i+1]
		if seq.Bytes < 250 || seq.Bytes > 850 || seq.Host != -1 || seq.producer != -1 {
			t.Fatalf("sequence file %+v", seq)
		}
		if hom.Bytes < 5000 || hom.Bytes > 85000 || hom.producer != int32(i/16) {
			t.Fatalf("homologue file %+v", hom)
		}
	}
	for _, j := range w.Jobs {
		per := j.Runtime / float64(j.Tasks)
		lo, hi := 2.0, 8.0
		if j.Phase == 1 {
			lo, hi = 0.5, 0.7
		}
		if per < lo || per > hi || j.Estimate != j.Runtime {
			t.Fatalf("%s: %v s per task", j.Name, per)
		}
		if j.Phase == 1 && (len(j.deps) != 1 || w.Jobs[j.deps[0]].Name != "blast"+strings.TrimPrefix(j.Name, "parse")) {
			t.Fatalf("%s deps %v", j.Name, j.deps)
		}
	}
	if reflect.DeepEqual(PA(1, 50, 16), PA(2, 50, 16)) || !reflect.DeepEqual(PA(3, 50, 16), PA(3, 50, 16)) {
		t.Fatal("PA is not a function of its seed")
	}
}

func TestReadWorkload(t *testing.T) {
	t.Parallel()
	w := mustWorkload(t, `{"files":[{"name":"s","bytes":10},{"name":"h","bytes":5,"host":1}],
		"jobs":[{"name":"a","group":"g","runtime_s":2,"estimate_s":1,"tasks":4,"in":["s","h"],"out":[{"name":"o","bytes":7}]},
		        {"name":"b","in":["o"],"after":["a"]},{"name":"c","phase":2,"after":["b"]}]}`)
	if len(w.Files) != 3 || w.Files[2].producer != 0 || w.Files[1].Host != 1 || w.Files[0].Host != -1 {
		t.Fatalf("files %+v", w.Files)
	}
	if j := w.Jobs[0]; j.Group != "g" || j.Tasks != 4 || j.Estimate != 1 || len(j.In) != 2 {
		t.Fatalf("job a %+v", j)
	}
	if j := w.Jobs[1]; j.Group != "b" || j.Tasks != 1 || len(j.deps) != 1 || j.deps[0] != 0 {
		t.Fatalf("job b %+v", j)
	}
	bad := []struct{ doc, want string }{
		{`{"jobs":[]}`, "no jobs"},
		{`{"jobs":[{"name":"a"}],"extra":1}`, "unknown field"},
		{`{"jobs":[{"name":"a","in":["x"]}]}`, `unknown file "x"`},
		{`{"jobs":[{"name":"a"},{"name":"a"}]}`, "declared twice"},
		{`{"jobs":[{"name":""}]}`, "no name"},
		{`{"jobs":[{"name":"a","runtime_s":-1}]}`, "runtime_s"},
		{`{"jobs":[{"name":"a","estimate_s":-1}]}`, "estimate_s"},
		{`{"jobs":[{"name":"a","phase":-1}]}`, "phase"},
		{`{"jobs":[{"name":"a","after":["z"]}]}`, "unknown job"},
		{`{"jobs":[{"name":"a","after":["b"]},{"name":"b","after":["a"]}]}`, "cycle"},
		{`{"jobs":[{"name":"a","in":["o"],"out":[{"name":"o","bytes":1}]}]}`, "own output"},
		{`{"jobs":[{"name":"a","after":["b"]},{"name":"b","phase":1}]}`, "later phase"},
		{`{"files":[{"name":"o","bytes":1}],"jobs":[{"name":"a","out":[{"name":"o","bytes":1}]}]}`, "declared twice"},
		{`{"files":[{"name":"o","bytes":-1}],"jobs":[{"name":"a"}]}`, "bytes"},
		{`{"files":[{"name":"o","bytes":1,"host":-2}],"jobs":[{"name":"a"}]}`, "host"},
		{`not json`, "workload"},
		{`{"jobs":[{"name":"a"}]} {"x":1}`, "more after the JSON object"},
	}
	for _, tc := range bad {
		if _, err := ReadWorkload(strings.NewReader(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.doc, err, tc.want)
		}
	}
	// The job named is on the cycle (b or c), not one after it (a).
	_, err := ReadWorkload(strings.NewReader(`{"jobs":[{"name":"z"},{"name":"a","after":["b","z"]},{"name":"b","after":["c"]},{"name":"c","after":["b"]}]}`))
	if err == nil || !strings.Contains(err.Error(), `cycle through "b"`) && !strings.Contains(err.Error(), `cycle through "c"`) {
		t.Errorf("a cycle of b and c that a waits on: %v, want it named through b or c", err)
	}
}

func TestPlatform(t *testing.T) {
	t.Parallel()
	p, err := ReadPlatform(strings.NewReader(`{"name":"mine","scp_rate_Bps":1e6}`))
	if err != nil || p.Name != "mine" || p.SCPRate != 1e6 || p.CLSInvocation != WAN.CLSInvocation || p.PerHost != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	// The defaults are the rates the thesis ran with (bytes per 10 ms unit);
	// the table as printed and the old names stay reachable.
	for name, rate := range map[string]float64{"lan": 2e6, "wan": 5e5, "lan-itu": 2e6, "wan-itu": 5e5, "lan-printed": 2e4, "wan-printed": 5e3} {
		if p, err := Network(name); err != nil || p.SCPRate != rate || p.Name != name {
			t.Errorf("network %s: %+v %v, want rate %g", name, p, err, rate)
		}
	}
	if !near(WAN.OneWay(), 0.475) || !near(LAN.OneWay(), 0.155) {
		t.Fatalf("one-way %v %v", WAN.OneWay(), LAN.OneWay())
	}
	if got := WANPrinted.Transfer(1, 2, 50000, 2); !near(got, 2*1.2+10) || WAN.Transfer(3, 3, 1, 1) != 0 {
		t.Fatalf("transfer %v", got)
	}
	for _, doc := range []string{`{"scp_rate_Bps":0}`, `{"cls_invocation_s":0.1}`, `{"other_job_s":-1}`, `{"bogus":1}`, `{"placeholders_per_host":-1}`, `{"name":"x"} 1`} {
		if _, err := ReadPlatform(strings.NewReader(doc)); err == nil {
			t.Errorf("%s accepted", doc)
		}
	}
	for name := range Networks {
		if p, err := LoadPlatform(name); err != nil || p.Name != name {
			t.Errorf("LoadPlatform(%s) = %+v, %v", name, p, err)
		}
	}
	if _, err := LoadPlatform("nosuch"); err == nil || !strings.Contains(err.Error(), "known: lan, wan") {
		t.Errorf("LoadPlatform(nosuch): %v", err)
	}
}

// TestPerHost: two placeholders on one host take turns with the other
// user's jobs, so they never overlap.
func TestPerHost(t *testing.T) {
	t.Parallel()
	p := WAN
	p.PerHost = 2
	w := mustWorkload(t, `{"jobs":[{"name":"a","runtime_s":100},{"name":"b","runtime_s":100}]}`)
	r, err := Run(w, p, Config{Policy: "fcfs", Placeholders: 2, Seed: 1})
	if err != nil || r.Makespan < 200 {
		t.Fatalf("two placeholders on one host ran in parallel: %v, %v", r.Makespan, err)
	}
	r, err = Run(w, WAN, Config{Policy: "fcfs", Placeholders: 2, Seed: 1})
	if err != nil || r.Makespan > 110 {
		t.Fatalf("two hosts did not run in parallel: %v, %v", r.Makespan, err)
	}
}

// BenchmarkRun is one thesis run (1,000 pipelines, WAN x100, 32
// placeholders, DC) and reports simulated events per second. Target:
// >= 1,000,000 events/s.
func BenchmarkRun(b *testing.B) {
	for _, pol := range []string{"fcfs", "dc"} {
		b.Run(pol, func(b *testing.B) {
			w := PA(1, 1000, 16)
			var events uint64
			for b.Loop() {
				r, err := Run(w, WAN, Config{Policy: pol, Placeholders: 32, Inflation: 100, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
