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

// A PA-style data-heavy workload on two sites that share nothing, run
// once under FCFS and once under DC through real SGE and Slurm sites:
// every job reads one large input that lives only at the SGE site (grid,
// account mquser) and runs a fixed time; the Slurm site (slurmy, account
// mquser2) can run any of them but must have the input staged first. Both
// sites have one placeholder, up and asking before the workload arrives.
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
	w := dcWorkload{jobs: envInt(t, "MQ_DC_JOBS", 8), mib: envInt(t, "MQ_DC_MIB", 8), runS: envInt(t, "MQ_DC_RUN_S", 2)}
	l := newLogin(t, "127.0.0.1")
	res := map[string]dcRun{}
	for _, pol := range []string{"fcfs", "dc"} {
		// A subtest per run: its CLS stops and frees its SGE slot first.
		if !t.Run(pol, func(t *testing.T) { res[pol] = runDCWorkload(t, l, pol, w) }) {
			t.FailNow()
		}
		t.Logf("%s: makespan %.1f s, %d bytes moved in %d transfers (%.2f s), %d of %d jobs at grid",
			pol, res[pol].MakespanS, res[pol].Bytes, res[pol].Transfers, res[pol].TransferS, res[pol].WithData, w.jobs)
	}
	if res["fcfs"].Bytes == 0 {
		t.Fatalf("FCFS moved nothing to slurmy: the comparison says nothing (%+v)", res["fcfs"])
	}
	if res["dc"].Bytes >= res["fcfs"].Bytes {
		t.Errorf("DC moved %d bytes, FCFS %d: DC must move fewer", res["dc"].Bytes, res["fcfs"].Bytes)
	}
	if out := os.Getenv("MQ_DC_OUT"); out != "" {
		w.write(t, out, res)
	}
}

type dcWorkload struct{ jobs, mib, runS int }

// dcRun is what one policy's live run did.
type dcRun struct {
	MakespanS float64 `json:"makespan_s"` // first submission to last completion
	Bytes     int64   `json:"bytes_moved"`
	Transfers int     `json:"transfers"`
	TransferS float64 `json:"transfer_s"` // the transfers' time, summed
	WithData  int     `json:"with_data"`  // jobs that ran at grid, where their input was
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
	var jobs []protocol.JobInfo
	eventually(t, time.Duration(w.jobs*(w.runS+20))*time.Second+3*time.Minute, "the workload done", func() bool {
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
		return len(jobs) == w.jobs
	})

	r := dcRun{Jobs: len(jobs)}
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
		if j.Site == "grid" {
			r.WithData++
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
	for i := 1; i <= w.jobs; i++ {
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
