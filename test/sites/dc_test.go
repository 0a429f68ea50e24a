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
// inflated files instead (sim.PA's shape, one pipeline per job pair): for
// each of MQ_DC_JOBS pipelines a BLAST-like job reads a small sequence
// file that exists only on the CLS host and writes a homologue file of
// MQ_DC_MIB MiB (the inflation) after MQ_DC_RUN_S s; its parsing job
// (-p) reads that file and runs MQ_DC_PARSE_S s. Either site may run
// either stage: a parsing job runs with its data only at the site its
// BLAST job ran at, and no BLAST job ever does (its input is outside the
// sites), so at most half the jobs are placed with their data, as in the
// thesis. This shape is for dc.sh; it records, and fails only if a job
// fails.
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
		parseS: envInt(t, "MQ_DC_PARSE_S", 1), shape: os.Getenv("MQ_DC_SHAPE")}
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

// dcWorkload is the live workload: jobs (pipelines, for "pa") reading or
// writing mib MiB each, running runS s (a BLAST-like job's time, for
// "pa"; parseS is a parsing job's).
type dcWorkload struct {
	jobs, mib, runS, parseS int
	shape                   string // "bag" or "pa"
}

// total is how many jobs the workload has.
func (w dcWorkload) total() int {
	if w.shape == "pa" {
		return 2 * w.jobs
	}
	return w.jobs
}

// seqFile is pipeline i's sequence file in the "pa" shape: 250-850
// bytes, as sim.PA's.
func seqFile(i int) []byte {
	return []byte(">p" + strconv.Itoa(i) + "\n" + strings.Repeat("MKV", (250+(i*37)%601)/3) + "\n")
}

// dcRun is what one policy's live run did.
type dcRun struct {
	MakespanS float64 `json:"makespan_s"` // first submission to last completion
	Bytes     int64   `json:"bytes_moved"`
	Transfers int     `json:"transfers"`
	TransferS float64 `json:"transfer_s"` // the transfers' time, summed
	WithData  int     `json:"with_data"`  // jobs that ran where their inputs were
	Jobs      int     `json:"jobs"`
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
	c.must("mqsub", "-e", "1", "warm-grid", "true")
	eventually(t, 3*time.Minute, "warm-grid done", func() bool { return done("warm-grid").State == "D" })
	c.addSite("slurmy", "slurm", l2, "--max", "1", "--walltime", "20m", "--idle", "2m", "--data-root", ".mq-data-dc-slurmy")
	c.must("mqsub", "-e", "600", "warm-slurmy", "true")
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
			c.must("mqsub", "-q", "work", "-e", strconv.Itoa(w.runS), "-i", fmt.Sprintf("db/f%d", i), "-o", fmt.Sprintf("out/r%d", i),
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
// seqs/pi.fa (on the CLS host only) and writes hom/pi.tsv (mib MiB);
// parse-i, after it, reads hom/pi.tsv.
func submitPA(t *testing.T, c *cls, w dcWorkload) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(c.work, "seqs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= w.jobs; i++ {
		if err := os.WriteFile(filepath.Join(c.work, "seqs", fmt.Sprintf("p%d.fa", i)), seqFile(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= w.jobs; i++ {
		c.must("mqsub", "-q", "work", "-e", strconv.Itoa(w.runS), "-i", fmt.Sprintf("seqs/p%d.fa", i), "-o", fmt.Sprintf("hom/p%d.tsv", i),
			fmt.Sprintf("blast-%d", i), fmt.Sprintf("sleep %d && mkdir -p hom && (cat seqs/p%d.fa; head -c %d /dev/urandom) > hom/p%d.tsv",
				w.runS, i, w.mib<<20, i))
	}
	for i := 1; i <= w.jobs; i++ {
		c.must("mqsub", "-q", "work", "-e", strconv.Itoa(w.parseS), "-p", fmt.Sprintf("blast-%d", i), "-i", fmt.Sprintf("hom/p%d.tsv", i),
			"-o", fmt.Sprintf("parsed/p%d.txt", i), fmt.Sprintf("parse-%d", i),
			fmt.Sprintf("sleep %d && mkdir -p parsed && cksum hom/p%d.tsv > parsed/p%d.txt", w.parseS, i, i))
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
	for i := 1; w.shape == "pa" && i <= w.jobs; i++ {
		// The sequence files are outside the sites (no host); the
		// homologue files appear where their BLAST job runs.
		seq, hom := fmt.Sprintf("seq-%d", i), fmt.Sprintf("hom-%d", i)
		n := int64(len(seqFile(i)))
		wl.Files = append(wl.Files, file{Name: seq, Bytes: n})
		wl.Jobs = append(wl.Jobs, job{Name: fmt.Sprintf("blast-%d", i), Runtime: float64(w.runS), Estimate: float64(w.runS),
			In: []string{seq}, Out: []file{{Name: hom, Bytes: n + int64(w.mib)<<20}}})
	}
	for i := 1; w.shape == "pa" && i <= w.jobs; i++ {
		wl.Jobs = append(wl.Jobs, job{Name: fmt.Sprintf("parse-%d", i), Runtime: float64(w.parseS), Estimate: float64(w.parseS),
			In: []string{fmt.Sprintf("hom-%d", i)}, Out: []file{{Name: fmt.Sprintf("parsed-%d", i), Bytes: 20}}})
	}
	for i := 1; w.shape == "bag" && i <= w.jobs; i++ {
		f := fmt.Sprintf("f%d", i)
		wl.Files = append(wl.Files, file{Name: f, Bytes: int64(w.mib) << 20, Host: &grid})
		wl.Jobs = append(wl.Jobs, job{Name: fmt.Sprintf("job%d", i), Runtime: float64(w.runS), Estimate: float64(w.runS),
			In: []string{f}, Out: []file{{Name: fmt.Sprintf("r%d", i), Bytes: 20}}})
	}
	fc := res["fcfs"]
	measured := map[string]float64{"transfers": float64(fc.Transfers), "bytes": float64(fc.Bytes), "seconds": fc.TransferS}
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
