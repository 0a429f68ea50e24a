//go:build e2e

package sites

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/sim"
	"github.com/mq-hpc/mq/protocol"
)

// Seed 000's bag of tasks live, set beside mqsim grid's prediction for the
// same small workload (scripts/bench/seed000-live.sh; docs/policies/bag-of-tasks.md):
// two sites that share no filesystem, one placeholder each, grid (SGE,
// mquser) twice as fast as slurmy (Slurm, mquser2: each task sleeps twice
// as long there); S000_TASKS tasks, each reading its own S000_MIB MiB
// input from the CLS host and "computing" for a runtime from a fixed list
// (seconds at grid's speed), run S000_RUNS times over the same inputs,
// each execution submitted when the last one ended. Under each policy in
// a fresh CLS it measures what mqsim grid reports: the mean makespan of
// an execution (first start to last end), bytes moved, copies killed and
// the two wastes; then runs sim.RunGrid on the same tasks, two hosts of
// speeds 10 and 5 at two sites and a home link at the bandwidth the live
// transfers measured. It fails only if the live run broke (a job failed,
// a race ended other than once); with S000_OUT=DIR it writes DIR/live.json
// and DIR/sim.json for the script's table.
func TestSeed000LiveVsSim(t *testing.T) {
	need(t, "sge", "slurm")
	tasks := envInt(t, "S000_TASKS", 5)
	mib := envInt(t, "S000_MIB", 4)
	runs := envInt(t, "S000_RUNS", 1) // the benchmark's 2 (scripts/bench/seed000-live.sh); 1 is quick in CI
	pols := strings.Split(envOr("S000_POLICIES", "wqr,sa,xsufferage"), ",")
	runtimes := make([]int, tasks) // seconds at grid's speed: 8, 6, 4, 4, 2, ...
	for i := range runtimes {
		runtimes[i] = max(2, 8-2*i+2*(i/4))
	}
	l := newLogin(t, "127.0.0.1")
	live := map[string]s000Result{}
	simr := map[string]s000Result{}
	for _, pol := range pols {
		// A subtest per policy, so that its CLS stops and cancels its
		// placeholders before the next policy's CLS asks SGE (2 slots)
		// for one: otherwise the third policy's placeholder waits behind
		// the first two's idle ones until they time out.
		var r s000Result
		if !t.Run(pol, func(t *testing.T) { r = runSeed000(t, l, pol, runtimes, mib, runs) }) {
			t.FailNow()
		}
		live[pol] = r
		g, err := sim.RunGrid(sim.GridConfig{Policy: pol, Seed: 1, Sites: 2, Speeds: []float64{10, 5}, Runs: runs,
			LinkBits: 8 * r.RateBps, Tasks: s000Tasks(runtimes, mib)})
		if err != nil {
			t.Fatal(err)
		}
		simr[pol] = s000Result{Makespan: g.Makespan, Makespans: g.Makespans, Bytes: g.BytesMoved, Copies: g.Copies, CPUWaste: g.CPUWaste, NetWaste: g.NetWaste}
		t.Logf("%s live: %+v", pol, r)
		t.Logf("%s sim:  %+v", pol, simr[pol])
	}
	if out := os.Getenv("S000_OUT"); out != "" {
		for name, v := range map[string]any{"live.json": live, "sim.json": simr} {
			b, _ := json.MarshalIndent(v, "", "  ")
			if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// s000Result is one policy's run, live or simulated, in mqsim grid's terms.
type s000Result struct {
	Makespan  float64   `json:"makespan_s"`  // mean over executions
	Makespans []float64 `json:"makespans_s"` // per execution
	Bytes     int64     `json:"bytes_moved"`
	Copies    int       `json:"copies"`    // copies started beyond one per task (live: killed ones)
	CPUWaste  float64   `json:"cpu_waste"` // work of killed copies / the application's work
	NetWaste  float64   `json:"net_waste"` // bytes moved for killed copies / the application's input bytes
	RateBps   float64   `json:"rate_Bps,omitempty"`
}

func s000Tasks(runtimes []int, mib int) []sim.GridTask {
	var ts []sim.GridTask
	for i, r := range runtimes {
		ts = append(ts, sim.GridTask{Cost: float64(r) * 10, Inputs: []sim.GridFile{{Name: fmt.Sprintf("f%d", i), Bytes: int64(mib) << 20}}})
	}
	return ts
}

func runSeed000(t *testing.T, l *login, pol string, runtimes []int, mib, runs int) s000Result {
	t.Helper()
	c := startCLS(t)
	l2 := l.as(t, secondUser)
	gridRoot := privateRoot(t, "mquser", ".mq-data-s000-grid")
	slurmyRoot := privateRoot(t, secondUser, ".mq-data-s000-slurmy")
	t.Cleanup(func() { os.RemoveAll(gridRoot + c.work); os.RemoveAll(slurmyRoot + c.work) })
	c.must("cls", "queue", "set", "bot", "--policy", pol)
	// Both placeholders up and asking before the bag arrives (warm-up jobs
	// in the default queue: grid's first, then one too long for grid).
	c.addSite("grid", "sge", l, "--max", "1", "--walltime", "5m", "--idle", "5m", "--data-root", ".mq-data-s000-grid")
	c.must("mqsub", "--est", "1", "warm-grid", "true")
	eventually(t, 3*time.Minute, "warm-grid done", func() bool { return targetState(t, c, "warm-grid") == "D" })
	c.addSite("slurmy", "slurm", l2, "--max", "1", "--walltime", "20m", "--idle", "5m", "--data-root", ".mq-data-s000-slurmy")
	c.must("mqsub", "--est", "600", "warm-slurmy", "true")
	eventually(t, 3*time.Minute, "warm-slurmy done", func() bool { return targetState(t, c, "warm-slurmy") == "D" })

	if err := os.MkdirAll(filepath.Join(c.work, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range runtimes {
		b := make([]byte, mib<<20)
		for j := range b {
			b[j] = byte(i + j*31)
		}
		if err := os.WriteFile(filepath.Join(c.work, "in", fmt.Sprintf("f%d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var res s000Result
	var work, killedWork float64
	var inBytes, killedBytes, moved int64
	var movedS float64
	for run := 1; run <= runs; run++ {
		var ids []int64
		for i, rt := range runtimes {
			// slurmy's host runs at half grid's speed.
			cmd := fmt.Sprintf(`case "$PWD" in *s000-slurmy*) f=2;; *) f=1;; esac; sleep $((%d*f)); cksum in/f%d > r%d.%d`, rt, i, i, run)
			out := c.must("mqsub", "-q", "bot", "--in", fmt.Sprintf("in/f%d", i), "--out", fmt.Sprintf("r%d.%d", i, run),
				fmt.Sprintf("t%d.%d", i, run), cmd)
			id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
			if err != nil {
				t.Fatalf("mqsub printed %q", out)
			}
			ids = append(ids, id)
			work += float64(rt) * 10
			inBytes += int64(mib) << 20
		}
		var first, last time.Time
		eventually(t, 10*time.Minute, fmt.Sprintf("execution %d done", run), func() bool {
			for _, id := range ids {
				st := jobDetail(t, c, id).State
				if st == "F" || st == "X" {
					t.Fatalf("job %d ended %s", id, st)
				}
				if st != "D" {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			d := jobDetail(t, c, id)
			attempts := append([]protocol.AttemptInfo{{Attempt: 0, Site: d.Site, Started: d.Started, Finished: d.Finished}}, d.History...)
			for _, a := range attempts {
				st, err1 := time.Parse(time.RFC3339Nano, a.Started)
				fi, err2 := time.Parse(time.RFC3339Nano, a.Finished)
				if err1 != nil || err2 != nil {
					continue
				}
				if first.IsZero() || st.Before(first) {
					first = st
				}
				if fi.After(last) {
					last = fi
				}
				if a.Attempt > 0 && strings.HasPrefix(a.Reason, "killed: attempt") {
					res.Copies++
					speed := 10.0
					if a.Site == "slurmy" {
						speed = 5
					}
					killedWork += fi.Sub(st).Seconds() * speed
					for _, tr := range d.Transfers {
						if tr.Error == "" && tr.To == a.Site && tr.To != d.Site {
							killedBytes += tr.Bytes
						}
					}
				}
			}
			for _, tr := range d.Transfers {
				if tr.Error == "" {
					moved += tr.Bytes
					movedS += tr.Seconds
				}
			}
		}
		res.Makespans = append(res.Makespans, last.Sub(first).Seconds())
	}
	var sum float64
	for _, m := range res.Makespans {
		sum += m
	}
	res.Makespan = sum / float64(len(res.Makespans))
	res.Bytes = moved
	res.CPUWaste = killedWork / work
	res.NetWaste = float64(killedBytes) / float64(inBytes)
	res.RateBps = 100e6
	if movedS > 0 && moved > 0 {
		res.RateBps = math.Max(float64(moved)/movedS, 1e5)
	}
	return res
}

func jobDetail(t *testing.T, c *cls, id int64) protocol.JobDetail {
	t.Helper()
	var d protocol.JobDetail
	if err := json.Unmarshal([]byte(c.must("mqstat", "-j", strconv.FormatInt(id, 10), "--json")), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func targetState(t *testing.T, c *cls, target string) string {
	t.Helper()
	for _, j := range c.jobs("") {
		if j.Target == target {
			if j.State == "F" {
				t.Fatalf("%s failed: %+v", target, j)
			}
			return j.State
		}
	}
	return ""
}
