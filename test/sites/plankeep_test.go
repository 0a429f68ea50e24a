//go:build e2e

package sites

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestPlanKeepsFileAtConsumers follows, across two sites that share
// nothing (grid: SGE as mquser; slurmy: Slurm as the second user; each a
// private data root), a plan that keeps a file at the site that does not
// write it. Job p reads a 5 MB input that lives at grid only and writes
// a 100 kB file f; jobs c1 and c2 each read f. Planned by AEH-ETAA with
// slurmy ten times as fast (--site-speed, declared estimates: p 0.1 s,
// c1 and c2 10 s each) over the configured 10 MB/s, 0.5 s links, p is
// best at grid (moving its input costs more than moving f), c1 and c2 at
// slurmy, and f is best kept at slurmy: written there once rather than
// read across twice (what HEFT, keeping f at its producer, would do).
// The test checks the plan is that one (its sites, and 100 kB predicted
// moved), then that the CLS follows it: p runs at grid, f is copied to
// slurmy once on p's behalf (planKeep) and the catalog has it at both,
// c1 and c2 run at slurmy and read it there, with no transfer of their
// own and no second copy of f.
func TestPlanKeepsFileAtConsumers(t *testing.T) {
	need(t, "sge", "slurm")
	l := newLogin(t, "127.0.0.1")
	// A subtest, so that its CLS stops and frees its SGE slot before
	// the next test.
	t.Run("aeh-etaa", func(t *testing.T) { planKeepRun(t, l) })
}

func planKeepRun(t *testing.T, l *login) {
	c := startCLS(t)
	gridRoot, slurmyRoot, state := twoPlanSites(t, c, l, "keep")
	const inSize, fSize = 5_000_000, 100_000
	script := fmt.Sprintf("mkdir -p %[1]s/wf && head -c %[2]d /dev/urandom > %[1]s/wf/in", gridRoot+c.work, inSize)
	if out, err := runAs("mquser", script); err != nil {
		t.Fatalf("making the input at grid: %v %s", err, out)
	}
	c.must("cls", "files", "add", "wf/in", "--site", "grid")

	// The gate holds p until the plan is made.
	gate := filepath.Join(c.work, "go")
	c.must("mqsub", "-q", "work", "--est", "1", "gate", "while [ ! -e "+gate+" ]; do sleep 0.2; done")
	// Submitted as JSON lines, declaring the files' sizes (the planner's
	// costs) as mqsub --in and --out cannot.
	size := func(n int64) *int64 { return &n }
	specs := []protocol.JobSpec{{Queue: "work", Target: "p", Prereqs: []string{"gate"}, Est: 0.1,
		Command: fmt.Sprintf("wc -c < wf/in > /dev/null && head -c %d /dev/urandom > wf/f", fSize),
		Inputs:  []protocol.File{{Path: "wf/in", Size: size(inSize)}}, Outputs: []protocol.File{{Path: "wf/f", Size: size(fSize)}}}}
	for _, cn := range []string{"c1", "c2"} {
		specs = append(specs, protocol.JobSpec{Queue: "work", Target: cn, Prereqs: []string{"p"}, Est: 10,
			Command: "mkdir -p wf && wc -c < wf/f > wf/" + cn,
			Inputs:  []protocol.File{{Path: "wf/f", Size: size(fSize)}}, Outputs: []protocol.File{{Path: "wf/" + cn, Size: size(8)}}})
	}
	specs = append(specs, protocol.JobSpec{Queue: "work", Target: "end", Prereqs: []string{"c1", "c2"}, Est: 0.1, Command: "true"})
	var jl strings.Builder
	for _, sp := range specs {
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		jl.Write(append(b, '\n'))
	}
	jobs := filepath.Join(c.work, "keep.jsonl")
	if err := os.WriteFile(jobs, []byte(jl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c.must("mqsub", "-f", jobs)

	var sum protocol.PlanSummary
	out := c.must("cls", "plan", "make", "end", "--planner", "aeh-etaa", "--time-limit", "20s", "--no-learn",
		"--site-speed", "grid=1,slurmy=10", "--json")
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("plan: %s", strings.TrimSpace(c.must("cls", "plan", "show")))
	if sum.MovedBytes != fSize {
		t.Fatalf("the plan moves %d bytes; want %d (f copied once to its consumers' site): %+v", sum.MovedBytes, fSize, sum)
	}
	ids := map[string]int64{}
	for _, j := range c.jobs("") {
		ids[j.Target] = j.ID
	}
	detail := func(target string) protocol.JobDetail {
		var d protocol.JobDetail
		if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(ids[target], 10), "--json")), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	want := map[string]string{"p": "grid", "c1": "slurmy", "c2": "slurmy"}
	for target, site := range want {
		if d := detail(target); d.Plan == nil || d.Plan.Site != site {
			t.Fatalf("%s planned at %+v; want %s", target, d.Plan, site)
		}
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, "the workflow done", func() bool { return state("end") == "D" })

	for target, site := range want {
		if d := detail(target); d.Site != site {
			t.Errorf("%s ran at %s; planned at %s", target, d.Site, site)
		}
	}
	// f is at both sites in the catalog, and in slurmy's data root.
	fPath := filepath.Join(c.work, "wf", "f")
	eventually(t, time.Minute, "f's replica at slurmy in the catalog", func() bool {
		d := detail("p")
		if len(d.Outputs) != 1 {
			t.Fatalf("p's outputs: %+v", d.Outputs)
		}
		var at []string
		for _, r := range d.Outputs[0].Replicas {
			if r.Size != fSize {
				t.Fatalf("f's replica at %s has %d bytes; want %d", r.Site, r.Size, fSize)
			}
			at = append(at, r.Site)
		}
		slices.Sort(at)
		return slices.Equal(at, []string{"grid", "slurmy"})
	})
	if fi, err := os.Stat(slurmyRoot + fPath); err != nil || fi.Size() != fSize {
		t.Fatalf("f at slurmy: %v, %v", fi, err)
	}
	// One copy of f, to slurmy, on p's behalf; the consumers moved
	// nothing and read what p wrote.
	var copies []protocol.TransferInfo
	for _, target := range []string{"gate", "p", "c1", "c2", "end"} {
		d := detail(target)
		for _, tr := range d.Transfers {
			if tr.Error == "" && strings.HasSuffix(tr.Path, "wf/f") {
				copies = append(copies, tr)
			}
			if target != "p" {
				t.Errorf("%s had a transfer: %+v", target, tr)
			}
		}
	}
	if len(copies) != 1 || copies[0].To != "slurmy" || copies[0].Bytes != fSize {
		t.Fatalf("copies of f: %+v; want one, to slurmy, of %d bytes", copies, fSize)
	}
	for _, cn := range []string{"c1", "c2"} {
		b, err := os.ReadFile(slurmyRoot + filepath.Join(c.work, "wf", cn))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(fSize) {
			t.Errorf("%s at slurmy read %q, %v; want f's %d bytes", cn, b, err, fSize)
		}
	}
	t.Logf("f copied %s -> %s on p's behalf, %d bytes in %.2f s (%s); c1 and c2 ran at slurmy with no transfer",
		copies[0].From, copies[0].To, copies[0].Bytes, copies[0].Seconds, copies[0].Via)
}
