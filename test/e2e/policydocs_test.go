//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPolicyDocsSimulator runs the marked block of
// docs/policies/simulator.md as written, my-workflow.json being the
// page's own workload example with its shared file 2 MB rather than 2 GB
// and parse-1 of one core, not two (so that DC does not wait its bound,
// about 10^6 simulated seconds, for placeholders of one core holding
// hom-1: the page says so; the run takes a second, not minutes), and
// my-site.json its platform example, and checks
// what the page says: 1,200 JSON objects, the tables and plots, the
// platform's name and cores, live staging, and the mixed bag's core
// utilisation.
func TestPolicyDocsSimulator(t *testing.T) {
	h := newHarness(t)
	workload := `{
  "files": [{"name": "seq-1", "bytes": 612},
            {"name": "ref.db", "bytes": 2000000, "host": 0}],
  "jobs": [
    {"name": "blast-1", "group": "blast", "phase": 0, "runtime_s": 3.5,
     "estimate_s": 3.5, "tasks": 1, "in": ["seq-1", "ref.db"],
     "out": [{"name": "hom-1", "bytes": 45000}]},
    {"name": "parse-1", "group": "parse", "phase": 1, "runtime_s": 0.6,
     "in": ["hom-1"], "after": [], "cpus": 1, "mem": "4G", "gpus": 0}
  ]
}`
	site := `{"name": "my-site", "cls_invocation_s": 1.30, "queuing_delay_s": 0.35,
 "scp_latency_s": 1.20, "scp_rate_Bps": 5000, "other_job_s": 1,
 "placeholders_per_host": 1,
 "hosts": [{"cpus": 16, "mem": "64G", "gpus": 2}, {"cpus": 8}]}`
	for name, text := range map[string]string{"my-workflow.json": workload, "my-site.json": site} {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	steps := runDocBlocks(t, h, "docs/policies/simulator.md", nil)
	want := []wantStep{
		{"mqsim --policy fcfs,sjf,cp,dc --placeholders 2,4,8,16,32 --inflation 1,10,100 \\\n      --network lan,wan --seeds 1-10 --json", 0, regexp.MustCompile(`^\{"policy":"fcfs","placeholders":2,"inflation":1,"network":"lan","seed":1,`)},
		{"mqsim --network wan --inflation 100 --plot plots", 0, regexp.MustCompile(`\n\s+16\s+dc\s+504\s+\(7\)\s+-57\.1%\s`)},
		{"mqsim --workload my-workflow.json --network my-site.json --placeholders 4,8", 0, regexp.MustCompile(`^network my-site, files x1, .*\n.*\bcore_util\n`)},
		{"mqsim --staging live --policy fcfs,dc --placeholders 2 --inflation 100", 0, regexp.MustCompile(`^network lan, files x100, mean \(sd\) over 10 seeds, live staging\n`)},
		{"mqsim --mixed 2000 --ph-cpus 16 --placeholders 4 --network lan --inflation 1 --seeds 1-3 --staging live", 0, regexp.MustCompile(`\n\s+4\s+fcfs\s+6624\s.*\s0\.976\n`)},
	}
	checkSteps(t, "simulator.md", steps, want)
	if n := strings.Count(steps[0].out, "\n"); n != 1200 {
		t.Errorf("the sweep printed %d lines, the page says 1,200 runs", n)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "plots", "index.html")); err != nil {
		t.Errorf("--plot plots: %v", err)
	}
	if t.Failed() {
		logSteps(t, steps)
	}
}

// TestPolicyDocsDC runs the marked block of docs/policies/dc.md as
// written: 2,400 runs in runs.jsonl, among them the table's WAN x100 16
// placeholders, DC 504 s against FCFS's 1,176 (-57.1%).
func TestPolicyDocsDC(t *testing.T) {
	h := newHarness(t)
	steps := runDocBlocks(t, h, "docs/policies/dc.md", nil)
	checkSteps(t, "dc.md", steps, []wantStep{
		{"mqsim --network lan,wan,lan-printed,wan-printed --seeds 1-10 --json > runs.jsonl", 0, regexp.MustCompile(`^$`)},
	})
	b, err := os.ReadFile(filepath.Join(h.dir, "runs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2400 {
		t.Errorf("runs.jsonl has %d runs, the page says 2,400", len(lines))
	}
	sum := map[string]float64{}
	n := map[string]int{}
	for _, l := range lines {
		var r struct {
			Policy       string
			Placeholders int
			Inflation    float64
			Network      string
			Makespan     float64 `json:"makespan_s"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("runs.jsonl: %v: %s", err, l)
		}
		k := fmt.Sprintf("%s x%g %d %s", r.Network, r.Inflation, r.Placeholders, r.Policy)
		sum[k] += r.Makespan
		n[k]++
	}
	mean := func(k string) float64 { return sum[k] / float64(n[k]) }
	dc, fcfs := mean("wan x100 16 dc"), mean("wan x100 16 fcfs")
	if got := fmt.Sprintf("%.1f%% (%.0f vs %.0f)", (dc-fcfs)/fcfs*100, dc, fcfs); got != "-57.1% (504 vs 1176)" {
		t.Errorf("WAN, x100, 16 PH: DC makespan vs FCFS %s, the page says -57.1%% (504 vs 1176)", got)
	}
	if math.IsNaN(mean("wan-printed x100 16 dc")) {
		t.Errorf("runs.jsonl has no wan-printed runs")
	}
}

// TestPolicyDocsLP runs the marked block of docs/policies/lp.md as
// written, in the repository's root, and checks the table's largest
// inputs and, without W_MIN, Ohio's 5 placeholders and the 89.4 s run.
func TestPolicyDocsLP(t *testing.T) {
	h := newHarness(t)
	steps := runDocBlocksIn(t, h, "docs/policies/lp.md", repoRoot(t), nil)
	checkSteps(t, "lp.md", steps, []wantStep{
		{"go run ./cmd/mqsim lp --plan", 0, regexp.MustCompile(`(?s)\n\s+1x2x1\s+320\s+89\.6\s+3\s+43\.9\s+17\s+43\.8\s+5\n.*\n\s+1x5x1\s+320\s+219\.9\s+3\s+44\.4\s+17\s+44\.5\s+8\n.*\n\s+intra\s+400\s+962\.3\s+5\s+40\.8\s+48\s+40\.8\s+41\n.*\n\s+inter\s+400\s+962\.3\s+5\s+1003\.2\s+72\s+40\.8\s+41\n`)},
		{"go run ./cmd/mqsim lp --scenario inter --min-util 0 --plan", 0, regexp.MustCompile(`\n\s+inter\s+400\s+962\.3\s+5\s+1003\.2\s+72\s+89\.4\s+40\n(?s:.*)\ninter lpsched: reader md:1; decompress md:22,oh:3; clip md:7,oh:1; zoom md:4,oh:1; view md:1 `)},
	})
	if t.Failed() {
		logSteps(t, steps)
	}
}

// TestPolicyDocsEcon runs the marked blocks of docs/policies/README.md
// (mqsim econ and lp) and docs/policies/dbc.md (the live test's
// prediction) as written and checks the rows their tables give.
func TestPolicyDocsEcon(t *testing.T) {
	h := newHarness(t)
	steps := runDocBlocksIn(t, h, "docs/policies/README.md", repoRoot(t), nil)
	checkSteps(t, "docs/policies/README.md", steps, []wantStep{
		{"mqsim econ --strategy cost,costtime --budget 22000 --by-resource", 0, regexp.MustCompile(`\n\s+1600\s+22000\s+200\s+1586\.3\s+5506\.6\s+R4:115,R8:85\s+200\s+1386\.3\s+5506\.6\s+R4:100,R8:100\n(?s:.*)\n\s+3100\s+22000\s+200\s+2766\.9\s+5506\.6\s+R4:200\s+200\s+1386\.3\s+5506\.6\s+R4:100,R8:100\n`)},
		{"mqsim lp --plan", 0, regexp.MustCompile(`\n\s+inter\s+400\s+962\.3\s+5\s+1003\.2\s+72\s+40\.8\s+41\n`)},
	})
	dbc := runDocBlocks(t, h, "docs/policies/dbc.md", nil)
	checkSteps(t, "dbc.md", dbc, []wantStep{
		{"mqsim econ --strategy cost --resource cheap:4:1:0.01 --resource dear:4:1:0.1 \\\n  --mi 5 --spread 0 --jobs 24 --deadline 22,40 --budget 100 --by-resource", 0, regexp.MustCompile(`\n\s+22\s+100\s+24\s+20\.0\s+4\.8\s+cheap:16,dear:8\n\s+40\s+100\s+24\s+30\.0\s+1\.2\s+cheap:24\n$`)},
	})
	if t.Failed() {
		logSteps(t, append(steps, dbc...))
	}
}

// TestPolicyDocsOrdered runs the marked block of docs/policies/ordered.md
// as written: queue Q made and set to each ordered policy in turn.
func TestPolicyDocsOrdered(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "0")
	steps := runDocBlocks(t, h, "docs/policies/ordered.md", nil)
	var want []wantStep
	for _, p := range []string{"fcfs", "sjf", "cp"} {
		want = append(want, wantStep{"cls queue set Q --policy " + p, 0, regexp.MustCompile(`\nQ\s+none\s+3\s+false\s+` + p + `\s`)})
	}
	checkSteps(t, "ordered.md", steps, want)
}

// TestPolicyDocsPlans runs the marked block of docs/policies/planners.md
// ("Following a plan live") as written, on a CLS with no local
// placeholders of its own and the page's two sites a and b (local, one
// placeholder each), jobs 1-41 held in another target, then a held gate
// (job 42), two jobs of y after it and z after y: each planner plans
// target z and what it needs, cls plan show shows the last plan (speeds
// given, a=2, so every job at a), mqstat -j 42 names its planned site, and
// cls plan clear drops the plans.
func TestPolicyDocsPlans(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "0")
	h.ok("cls", "site", "add", "a", "--type", "local", "--max", "1")
	h.ok("cls", "site", "add", "b", "--type", "local", "--max", "1")
	h.ok("mqsub", "-H", "--array", "1-41", "other", "true")
	h.ok("mqsub", "-H", "gate", "true")
	h.ok("mqsub", "-p", "gate", "y", "true")
	h.ok("mqsub", "-p", "gate", "y", "true")
	h.ok("mqsub", "-p", "y", "z", "true")
	steps := runDocBlocks(t, h, "docs/policies/planners.md", nil)
	planned := func(planner string) *regexp.Regexp {
		return regexp.MustCompile(`^planned 4 jobs of "z" with ` + planner + ` in [0-9.]+ s: predicted makespan `)
	}
	checkSteps(t, "planners.md", steps, []wantStep{
		{"cls plan make z --planner heft", 0, planned("heft")},
		{"cls plan make z --planner aeh-etaa --time-limit 2m --est 30s", 0, planned("aeh-etaa")},
		{"cls plan make z --planner lp", 0, planned("lp")},
		{"cls plan make z --site-speed a=2,b=1 --no-learn", 0, regexp.MustCompile(`^planned 4 jobs of "z" with heft (?s:.*)\na\s+2\s+4\n`)},
		{"cls plan show", 0, regexp.MustCompile(`^PLANNER\s+SITE\s+JOBS\s+ENDED\s+RAN THERE\s+RAN ELSEWHERE\nheft\s+a\s+4\s+0\s+0\s+0\n(?s:.*)\n  site a, in predicted start order:\n\s+START\s+END\s+SLOT\s+JOB\s+TARGET\s+STATE\s+RAN AT\n\s+0\.0\s+\S+\s+0\s+42\s+gate\s+H\s+-\n`)},
		{"cls plan show --limit 5 --json", 0, regexp.MustCompile(`^\{"sites":\[\{"planner":"heft","site":"a","jobs":4\}\],"plans":\[`)},
		{"mqstat -j 42", 0, regexp.MustCompile(`\nplan:\s+site a \(heft, #1 in its order\)\n`)},
		{"cls plan clear", 0, regexp.MustCompile(`^dropped the plans of 4 jobs\n$`)},
	})
	if t.Failed() {
		logSteps(t, steps)
	}
}
