//go:build e2e

package sites

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchmarkSites measures what BENCHMARKS.md records; it runs only with
// MQ_SITES_BENCH=1 (it takes about a minute per batch system):
//
//	MQ_SITES_BENCH=1 go test -tags e2e -count=1 -run TestBenchmarkSites -v ./test/sites
func TestBenchmarkSites(t *testing.T) {
	if os.Getenv("MQ_SITES_BENCH") == "" {
		t.Skip("set MQ_SITES_BENCH=1 to measure")
	}
	for _, typ := range []string{"sge", "slurm"} {
		t.Run(typ, func(t *testing.T) {
			need(t, typ)
			l := newLogin(t, "127.0.0.1")
			c := startCLS(t)
			c.addSite("b"+typ, typ, l, "--min", "2", "--max", "2", "--walltime", "30m", "--idle", "60s") // min 2: one ready job alone warrants only one placeholder
			latency := func(target string) time.Duration {
				c.must("mqsub", "-q", "q", target, "true")
				var d time.Duration
				eventually(t, 2*time.Minute, target+" done", func() bool {
					for _, j := range c.jobs("D") {
						if j.Target == target {
							sub, _ := time.Parse(time.RFC3339Nano, j.Submitted)
							st, _ := time.Parse(time.RFC3339Nano, j.Started)
							d = st.Sub(sub)
							return true
						}
					}
					return false
				})
				return d
			}
			cold := latency("cold")
			// Both placeholders up and idle.
			eventually(t, time.Minute, "2 placeholders connected", func() bool { return c.sites()["b"+typ].Connected == 2 })
			var warm []time.Duration
			for i := range 5 {
				warm = append(warm, latency(fmt.Sprintf("warm%d", i)))
			}
			// CLS CPU while idle with placeholders connected.
			eventually(t, time.Minute, "2 placeholders connected", func() bool { return c.sites()["b"+typ].Connected == 2 })
			cpu0 := cpuTicks(t, c.cmd.Process.Pid)
			time.Sleep(10 * time.Second)
			idleCPU := float64(cpuTicks(t, c.cmd.Process.Pid)-cpu0) / 100 / 10 // CLK_TCK 100: cores
			// 1,000 short jobs through the 2 placeholders.
			var b strings.Builder
			for i := range 1000 {
				fmt.Fprintf(&b, `{"target":"many%d","command":"true"}`+"\n", i)
			}
			f := filepath.Join(c.work, "many.jsonl")
			os.WriteFile(f, []byte(b.String()), 0o644)
			start := time.Now()
			c.must("mqsub", "-f", f)
			eventually(t, 5*time.Minute, "1000 jobs", func() bool { return len(c.jobs("D")) == 1006 })
			el := time.Since(start)
			t.Logf("RESULT %s: mqsub->start cold %s; warm %v; 1000 jobs in %s = %.0f jobs/s; CLS CPU idle with 2 placeholders %.2f%% of a core",
				typ, cold.Round(time.Millisecond), warm, el.Round(time.Millisecond), 1000/el.Seconds(), idleCPU*100)
		})
	}
}

// cpuTicks is a process's user+system CPU time in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// TestBenchmarkTunnel measures what the tunnel costs: 1,000 `true` jobs
// through two Slurm placeholders reaching the CLS directly, then through
// the login host (a stock sshd in its own namespace), in one run of one
// CLS. MQ_SITES_BENCH=1 as above.
func TestBenchmarkTunnel(t *testing.T) {
	if os.Getenv("MQ_SITES_BENCH") == "" {
		t.Skip("set MQ_SITES_BENCH=1 to measure")
	}
	need(t, "slurm")
	n := newTestNet(t)
	l := newStockLoginIn(t, n.login, n.loginIP+":2222")
	c := startCLS(t) // here: the compute nodes reach it directly too
	total := 0
	for _, mode := range []string{"direct", "tunnel", "direct", "tunnel"} {
		name := fmt.Sprintf("b%s%d", mode, total/1001)
		c.addSite(name, "slurm", l, "--min", "2", "--max", "2", "--walltime", "30m", "--idle", "60s", "--connect", mode)
		// Min applies while there is work: one job brings both up.
		start := time.Now()
		c.must("mqsub", "-q", "q", name+"-warm", "true")
		total++
		eventually(t, 2*time.Minute, "2 placeholders connected", func() bool { return c.sites()[name].Connected == 2 })
		connected := time.Since(start)
		var b strings.Builder
		for i := range 1000 {
			fmt.Fprintf(&b, `{"target":"%s-%d","command":"true"}`+"\n", name, i)
		}
		f := filepath.Join(c.work, name+".jsonl")
		os.WriteFile(f, []byte(b.String()), 0o644)
		cpu0 := cpuTicks(t, c.cmd.Process.Pid)
		start = time.Now()
		c.must("mqsub", "-f", f)
		total += 1000
		eventually(t, 5*time.Minute, "1000 jobs", func() bool { return len(c.jobs("D")) == total })
		el := time.Since(start)
		cpu := float64(cpuTicks(t, c.cmd.Process.Pid)-cpu0) / 100
		t.Logf("RESULT %s: 1000 true jobs in %s = %.0f jobs/s (2 placeholders; CLS CPU %.2f s); placeholders connected %s after the site was added",
			mode, el.Round(time.Millisecond), 1000/el.Seconds(), cpu, connected.Round(100*time.Millisecond))
		c.must("cls", "site", "remove", name)
		eventuallyShowing(t, time.Minute, "placeholders gone", func() bool { return batchJobsNamed(t, "mq-"+name+"-") == 0 }, batchQueues)
	}
}
