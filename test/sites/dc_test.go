//go:build e2e

package sites

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/sim"
	"github.com/mq-hpc/mq/protocol"
)

// A data-heavy workload on two sites that share nothing, run once under
// FCFS and once under DC through real SGE and Slurm sites. In the default
// shape ("bag") every job reads one large input that lives only at the SGE
// site (grid, account mquser) and runs a fixed time; the Slurm site
// (slurmy, account mquser2) can run any of them but must have the input
// staged first. Both sites have one placeholder, up and asking before the
// workload arrives.
//
// With MQ_DC_SHAPE=pa the workload is the thesis's PA pipeline with
// inflated files instead, exactly sim.PA's (MQ_DC_JOBS pipelines, seed 1,
// table 6.1 of the thesis): pipeline i's BLAST-like job reads its sequence
// file (250-850 B, on the CLS host only), sleeps its 2-8 s and writes a
// homologue file of 5,000-85,000 B times MQ_DC_INFLATE; its parsing job
// (-p) reads that file and sleeps 0.5-0.7 s. Estimates are exact. Either
// site may run either stage: a parsing job runs with its data only at the
// site its BLAST job ran at, and no BLAST job ever does (its input is
// outside the sites), so at most half the jobs are placed with their data,
// as in the thesis. This shape is for dc.sh; it records, and fails only if
// a job fails.
// FCFS hands slurmy's placeholder the oldest jobs and stages their inputs
// there (some of those jobs are then run by grid's placeholder, which had
// the data all along, before slurmy's asks again); DC prices the transfer
// with the configured link and mostly holds the jobs for grid's
// placeholder. Bytes moved count every transfer made for the workload's
// jobs. The test fails if DC does not move fewer bytes than FCFS.
//
// scripts/bench/dc.sh runs it larger (MQ_DC_JOBS, MQ_DC_MIB, MQ_DC_RUN_S)
// and sets the live figures beside mqsim's for the same workload: with
// MQ_DC_OUT=DIR the test writes DIR/live.json (per policy: makespan,
// bytes moved, jobs placed with their data), DIR/workload.json (mqsim's
// workload) and DIR/measured.json (the links measured in the FCFS run).
func TestStagingDCMovesLessThanFCFS(t *testing.T) {
	need(t, "sge", "slurm")
	w := dcWorkload{jobs: envInt(t, "MQ_DC_JOBS", 8), mib: envInt(t, "MQ_DC_MIB", 8), runS: envInt(t, "MQ_DC_RUN_S", 2),
		inflate: envInt(t, "MQ_DC_INFLATE", 100), shape: os.Getenv("MQ_DC_SHAPE")}
	switch w.shape {
	case "":
		w.shape = "bag"
	case "bag", "pa":
	default:
		t.Fatalf("MQ_DC_SHAPE=%q: want bag or pa", w.shape)
	}
	l := newLogin(t, "127.0.0.1")
	res := map[string]dcRun{}
	for _, pol := range []string{"fcfs", "dc"} {
		// A subtest per run: its CLS stops and frees its SGE slot first.
		if !t.Run(pol, func(t *testing.T) { res[pol] = runDCWorkload(t, l, pol, w) }) {
			t.FailNow()
		}
		t.Logf("%s (%s): makespan %.1f s, %d bytes moved in %d transfers (%.2f s), %d of %d jobs placed with their data",
			pol, w.shape, res[pol].MakespanS, res[pol].Bytes, res[pol].Transfers, res[pol].TransferS, res[pol].WithData, res[pol].Jobs)
	}
	if out := os.Getenv("MQ_DC_OUT"); out != "" {
		w.write(t, out, res)
	}
	if w.shape == "pa" {
		return
	}
	if res["fcfs"].Bytes == 0 {
		t.Fatalf("FCFS moved nothing to slurmy: the comparison says nothing (%+v)", res["fcfs"])
	}
	if res["dc"].Bytes >= res["fcfs"].Bytes {
		t.Errorf("DC moved %d bytes, FCFS %d: DC must move fewer", res["dc"].Bytes, res["fcfs"].Bytes)
	}
}

// dcWorkload is the live workload: for "bag", jobs jobs reading mib MiB
// each and running runS s; for "pa", jobs pipelines of sim.PA with their
// homologue files inflate times larger.
type dcWorkload struct {
	jobs, mib, runS, inflate int
	shape                    string // "bag" or "pa"
}

// pa is the "pa" shape's workload: sim.PA's, seed 1, one job per task,
// with every file a job writes inflate times larger.
func (w dcWorkload) pa() *sim.Workload {
	pa := sim.PA(1, w.jobs, 1)
	for _, j := range pa.Jobs {
		for _, f := range j.Out {
			pa.Files[f].Bytes *= int64(w.inflate)
		}
	}
	return pa
}

// total is how many jobs the workload has.
func (w dcWorkload) total() int {
	if w.shape == "pa" {
		return 2 * w.jobs
	}
	return w.jobs
}

// dcRun is what one policy's live run did.
type dcRun struct {
	MakespanS float64 `json:"makespan_s"` // first submission to last completion
	Bytes     int64   `json:"bytes_moved"`
	Transfers int     `json:"transfers"`
	TransferS float64 `json:"transfer_s"` // the transfers' time, summed
	WithData  int     `json:"with_data"`  // jobs that ran where their inputs were
	Jobs      int     `json:"jobs"`
	// Each transfer's bytes and seconds, for fitting the link (dc.sh).
	Each [][2]float64 `json:"-"`
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func runDCWorkload(t *testing.T, l *login, pol string, w dcWorkload) dcRun {
	t.Helper()
	c := startCLS(t)
	l2 := l.as(t, secondUser)
	gridRoot := privateRoot(t, "mquser", ".mq-data-dc-grid")
	slurmyRoot := privateRoot(t, secondUser, ".mq-data-dc-slurmy")
	t.Cleanup(func() { os.RemoveAll(gridRoot + c.work); os.RemoveAll(slurmyRoot + c.work) })
	c.must("cls", "queue", "set", "work", "--policy", pol)
	done := func(target string) protocol.JobInfo {
		for _, j := range c.jobs("") {
			if j.Target == target {
				if j.State == "F" {
					t.Fatalf("%s failed: %+v", target, j)
				}
				return j
			}
		}
		return protocol.JobInfo{}
	}
	// Grid's placeholder first (a job only it takes, before slurmy
	// exists), then slurmy's (a job too long for grid's walltime).
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "5m", "--idle", "2m", "--data-root", ".mq-data-dc-grid")
	c.must("mqsub", "--est", "1", "warm-grid", "true")
	eventually(t, 3*time.Minute, "warm-grid done", func() bool { return done("warm-grid").State == "D" })
	c.addSite("slurmy", "slurm", l2, "--max", "1", "--walltime", "20m", "--idle", "2m", "--data-root", ".mq-data-dc-slurmy")
	c.must("mqsub", "--est", "600", "warm-slurmy", "true")
	eventually(t, 3*time.Minute, "warm-slurmy done", func() bool { return done("warm-slurmy").State == "D" })
	eventually(t, time.Minute, "both placeholders connected", func() bool {
		s := c.sites()
		return s["grid"].Connected > 0 && s["slurmy"].Connected > 0
	})

	if w.shape == "pa" {
		submitPA(t, c, w)
	} else {
		// The inputs, made at grid as its account and registered there.
		dir := gridRoot + filepath.Join(c.work, "db")
		script := fmt.Sprintf("mkdir -p %s && for i in $(seq %d); do head -c %d /dev/urandom > %s/f$i; done", dir, w.jobs, w.mib<<20, dir)
		if out, err := runAs("mquser", script); err != nil {
			t.Fatalf("making the inputs at grid: %v %s", err, out)
		}
		for i := 1; i <= w.jobs; i++ {
			c.must("cls", "files", "add", fmt.Sprintf("db/f%d", i), "--site", "grid")
		}
		for i := 1; i <= w.jobs; i++ {
			c.must("mqsub", "-q", "work", "--est", strconv.Itoa(w.runS), "--in", fmt.Sprintf("db/f%d", i), "--out", fmt.Sprintf("out/r%d", i),
				fmt.Sprintf("job%d", i), fmt.Sprintf("sleep %d && mkdir -p out && cksum db/f%d > out/r%d", w.runS, i, i))
		}
	}
	var jobs []protocol.JobInfo
	eventually(t, time.Duration(w.total()*(w.runS+20))*time.Second+3*time.Minute, "the workload done", func() bool {
		jobs = jobs[:0]
		for _, j := range c.jobs("") {
			if j.Queue != "work" {
				continue
			}
			if j.State == "F" {
				t.Fatalf("%s failed: %+v", j.Target, j)
			}
			if j.State != "D" {
				return false
			}
			jobs = append(jobs, j)
		}
		return len(jobs) == w.total()
	})

	r := dcRun{Jobs: len(jobs)}
	siteOf := map[string]string{}
	for _, j := range jobs {
		siteOf[j.Target] = j.Site
	}
	var first, last time.Time
	for _, j := range jobs {
		sub, err1 := time.Parse(time.RFC3339Nano, j.Submitted)
		fin, err2 := time.Parse(time.RFC3339Nano, j.Finished)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: times %q, %q: %v %v", j.Target, j.Submitted, j.Finished, err1, err2)
		}
		if first.IsZero() || sub.Before(first) {
			first = sub
		}
		if fin.After(last) {
			last = fin
		}
		switch {
		case w.shape == "bag" && j.Site == "grid":
			r.WithData++
		case strings.HasPrefix(j.Target, "parse-") && j.Site == siteOf["blast-"+strings.TrimPrefix(j.Target, "parse-")]:
			r.WithData++ // where its BLAST job wrote the homologue file
		}
		var d protocol.JobDetail
		if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(j.ID, 10), "--json")), &d); err != nil {
			t.Fatal(err)
		}
		var moved int64
		for _, tr := range d.Transfers {
			if tr.Error != "" {
				continue
			}
			moved += tr.Bytes
			r.Transfers++
			r.Each = append(r.Each, [2]float64{float64(tr.Bytes), tr.Seconds})
			r.TransferS += tr.Seconds
		}
		r.Bytes += moved
	}
	r.MakespanS = last.Sub(first).Seconds()
	if out := os.Getenv("MQ_DC_OUT"); out != "" {
		// DC's staging decisions, with the arrivals it expected (dc.sh).
		log, _ := os.ReadFile(filepath.Join(c.home, "cls.log"))
		var lines []string
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "dc: staging") || strings.Contains(line, "msg=transfer ") || strings.Contains(line, `"msg":"transfer"`) {
				lines = append(lines, line)
			}
		}
		os.WriteFile(filepath.Join(out, pol+"-log.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
	return r
}

// submitPA submits the "pa" shape: per pipeline i, blast-i reads
// seqs/pi.fa (on the CLS host only) and writes hom/pi.tsv; parse-i, after
// it, reads hom/pi.tsv. All BLAST jobs first, then all parsing jobs, as
// sim.PA's phases (here without the barrier: a parsing job is ready once
// its BLAST job is done, as in the workload dc.sh gives mqsim).
func submitPA(t *testing.T, c *cls, w dcWorkload) {
	t.Helper()
	pa := w.pa()
	if err := os.MkdirAll(filepath.Join(c.work, "seqs"), 0o755); err != nil {
		t.Fatal(err)
	}
	secs := func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
	for _, j := range pa.Jobs {
		in := pa.Files[j.In[0]]
		if j.Group == "blast" {
			out := pa.Files[j.Out[0]]
			// seq-N is pipeline N's sequence file, at its declared size.
			seq := "seqs/p" + strings.TrimPrefix(in.Name, "seq-") + ".fa"
			head := ">" + in.Name + "\n"
			body := head + strings.Repeat("M", int(in.Bytes)-len(head)-1) + "\n"
			if err := os.WriteFile(filepath.Join(c.work, seq), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			hom := "hom/p" + strings.TrimPrefix(out.Name, "hom-") + ".tsv"
			c.must("mqsub", "-q", "work", "--est", secs(j.Runtime), "--in", seq, "--out", hom, j.Name,
				fmt.Sprintf("cat %s >/dev/null && sleep %s && mkdir -p hom && head -c %d /dev/urandom > %s", seq, secs(j.Runtime), out.Bytes, hom))
			continue
		}
		n := strings.TrimPrefix(in.Name, "hom-")
		hom, parsed := "hom/p"+n+".tsv", "parsed/p"+n+".txt"
		c.must("mqsub", "-q", "work", "--est", secs(j.Runtime), "-p", "blast-"+n, "--in", hom, "--out", parsed, j.Name,
			fmt.Sprintf("sleep %s && mkdir -p parsed && cksum %s > %s", secs(j.Runtime), hom, parsed))
	}
}

// runAs runs a shell command as account name.
func runAs(name, script string) ([]byte, error) {
	return exec.Command("su", name, "-c", script).CombinedOutput()
}

// write puts the runs, mqsim's workload for the same jobs and the links
// measured in the FCFS run under dir, for scripts/bench/dc.sh.
func (w dcWorkload) write(t *testing.T, dir string, res map[string]dcRun) {
	t.Helper()
	type file struct {
		Name  string `json:"name"`
		Bytes int64  `json:"bytes"`
		Host  *int   `json:"host,omitempty"`
	}
	type job struct {
		Name     string   `json:"name"`
		Group    string   `json:"group,omitempty"`
		Runtime  float64  `json:"runtime_s"`
		Estimate float64  `json:"estimate_s"`
		In       []string `json:"in"`
		Out      []file   `json:"out"`
	}
	grid := 0
	var wl struct {
		Files []file `json:"files"`
		Jobs  []job  `json:"jobs"`
	}
	if w.shape == "pa" {
		// The same jobs and files as submitPA's, without sim.PA's phase
		// barrier; the sequence files are outside the sites (no host), the
		// homologue files appear where their BLAST job runs.
		pa := w.pa()
		for _, j := range pa.Jobs {
			in := pa.Files[j.In[0]]
			if j.Group == "blast" {
				wl.Files = append(wl.Files, file{Name: in.Name, Bytes: in.Bytes})
			}
			var outs []file
			for _, o := range j.Out {
				outs = append(outs, file{Name: pa.Files[o].Name, Bytes: pa.Files[o].Bytes})
			}
			if j.Group == "parse" {
				outs = []file{{Name: "parsed-" + strings.TrimPrefix(in.Name, "hom-"), Bytes: 20}}
			}
			wl.Jobs = append(wl.Jobs, job{Name: j.Name, Group: j.Group, Runtime: j.Runtime, Estimate: j.Estimate,
				In: []string{in.Name}, Out: outs})
		}
	}
	for i := 1; w.shape == "bag" && i <= w.jobs; i++ {
		f := fmt.Sprintf("f%d", i)
		wl.Files = append(wl.Files, file{Name: f, Bytes: int64(w.mib) << 20, Host: &grid})
		wl.Jobs = append(wl.Jobs, job{Name: fmt.Sprintf("job%d", i), Runtime: float64(w.runS), Estimate: float64(w.runS),
			In: []string{f}, Out: []file{{Name: fmt.Sprintf("r%d", i), Bytes: 20}}})
	}
	fc := res["fcfs"]
	measured := map[string]any{"transfers": fc.Transfers, "bytes": fc.Bytes, "seconds": fc.TransferS, "each": fc.Each}
	if fc.Transfers > 0 && fc.TransferS > 0 {
		measured["mean_transfer_s"] = fc.TransferS / float64(fc.Transfers)
		measured["rate_Bps"] = float64(fc.Bytes) / fc.TransferS
	}
	for name, v := range map[string]any{"live.json": res, "workload.json": wl, "measured.json": measured} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote live.json, workload.json and measured.json to %s", dir)
}
